package openapi_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRequestExamplesValidate: every example of a JSON request body, the
// ones the reference page shows merchants, is valid against the body's own
// schema; every verify and async route has at least one.
func TestRequestExamplesValidate(t *testing.T) {
	s := load(t)
	n := 0
	for path, item := range raw(t)["paths"].(map[string]any) {
		for method, o := range item.(map[string]any) {
			rb, _ := o.(map[string]any)["requestBody"].(map[string]any)
			content, _ := rb["content"].(map[string]any)
			mt, _ := content["application/json"].(map[string]any)
			if mt == nil {
				continue
			}
			ref, _ := mt["schema"].(map[string]any)["$ref"].(string)
			name, ok := strings.CutPrefix(ref, "#/components/schemas/")
			if !ok {
				t.Errorf("%s %s: the JSON body's schema is not a component (%q)", method, path, ref)
				continue
			}
			var examples []any
			if ex, ok := mt["example"]; ok {
				examples = append(examples, ex)
			}
			named, _ := mt["examples"].(map[string]any)
			for _, ex := range named {
				examples = append(examples, ex.(map[string]any)["value"])
			}
			if len(examples) == 0 && (strings.Contains(path, "/verify") || strings.Contains(path, "/qr/")) {
				t.Errorf("%s %s has no request example", method, path)
			}
			for _, ex := range examples {
				n++
				body, _ := json.Marshal(ex)
				if err := s.ValidateSchema(name, body); err != nil {
					t.Errorf("%s %s: request example %s: %v", method, path, body, err)
				}
			}
		}
	}
	if n < 15 {
		t.Errorf("only %d request examples", n)
	}
}
