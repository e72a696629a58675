package fields

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzJSONFields: the walk of JSON reads any valid object as
// encoding/json does (each field's name and value), refuses anything else,
// and never panics.
func FuzzJSONFields(f *testing.F) {
	for _, s := range []string{`{}`, ` {"payload" : "a\"b" , "n":-1.5e3,"o":{"x":[1,"]}"]},"t":true} `, `{"pay\u006coad":1}`,
		`{"a":1,"a":2}`, `[1]`, `{"a":}`, `{"a":"\\"}`, `{"a":null}`, "{\"\u2028\":\"\\u0000\"}",
		`{"n":1e400,"m":-0,"s":"caf\u00e9","t":"ไทย"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := JSON(body)
		var want map[string]json.RawMessage
		if json.Unmarshal(body, &want) != nil || want == nil {
			if err == nil {
				t.Fatalf("%q: read as an object: %v", body, got.json)
			}
			return
		}
		if err != nil {
			return // a name given twice
		}
		if len(got.json) != len(want) {
			t.Fatalf("%q: %d fields, want %d", body, len(got.json), len(want))
		}
		for name, v := range want {
			var a, b bytes.Buffer
			json.Compact(&a, v)
			json.Compact(&b, got.json[name])
			if a.String() != b.String() {
				t.Fatalf("%q: %s = %s, want %s", body, name, got.json[name], v)
			}
			// The fields read as encoding/json reads them.
			var ws string
			wsErr := json.Unmarshal(v, &ws)
			if gs, ok := got.Str(name); ok != (wsErr == nil && string(v) != "null") || ok && gs != ws {
				t.Fatalf("%q: Str(%s) = %q, %v; encoding/json: %q, %v", body, name, gs, ok, ws, wsErr)
			}
			var wn float64
			wnErr := json.Unmarshal(v, &wn)
			if gn, ok := got.Number(name); ok != (wnErr == nil && string(v) != "null") || ok && gn != wn {
				t.Fatalf("%q: Number(%s) = %v, %v; encoding/json: %v, %v", body, name, gn, ok, wn, wnErr)
			}
		}
	})
}
