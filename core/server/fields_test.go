package server

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzJSONFields: the walk of jsonFields reads any valid object as
// encoding/json does (each field's name and value), refuses anything else,
// and never panics.
func FuzzJSONFields(f *testing.F) {
	for _, s := range []string{`{}`, ` {"payload" : "a\"b" , "n":-1.5e3,"o":{"x":[1,"]}"]},"t":true} `, `{"pay\u006coad":1}`,
		`{"a":1,"a":2}`, `[1]`, `{"a":}`, `{"a":"\\"}`, `{"a":null}`, "{\"\u2028\":\"\\u0000\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := jsonFields(body)
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
		}
	})
}
