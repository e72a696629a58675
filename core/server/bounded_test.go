package server_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestValidationMessagesBounded: a VALIDATION_ERROR names the failing
// fields while they are few, and otherwise the first ones and how many
// more, in a message of a few hundred bytes whatever the request holds.
func TestValidationMessagesBounded(t *testing.T) {
	c := startCore(t, nil)
	object := func(n int, name func(int) string) []byte {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%q:1", name(i))
		}
		b.WriteString("}")
		return []byte(b.String())
	}
	k := func(i int) string { return fmt.Sprintf("k%06d", i) }
	ask := func(path string, body []byte) string {
		t.Helper()
		a := c.do(t, call{method: "POST", path: path, branch: "br-main", body: body, contentType: "application/json"})
		a.v2err(t, 400, "VALIDATION_ERROR")
		msg, _ := get(a.body, "error", "message").(string)
		if len(a.raw) > 1000 {
			t.Errorf("%s, a body of %d bytes: an answer of %d bytes: %.300s", path, len(body), len(a.raw), a.raw)
		}
		return msg
	}

	// 700,000 unknown fields (8 MB): counted, not listed.
	short := func(i int) string { return fmt.Sprint("k", i) }
	if msg := ask("/v2/verify/bank", object(700000, short)); !strings.Contains(msg, "700000 fields") {
		t.Errorf("700,000 fields: %q", msg)
	}
	// Values of every kind are walked over, not read, past the 1,000th field.
	var mixed strings.Builder
	mixed.WriteString("{")
	for i := range 1001 {
		if i > 0 {
			mixed.WriteString(" ,\n")
		}
		fmt.Fprintf(&mixed, `"k%d" : [{"a":"},\"]"}, -1.5e3, null] , "s%d":"x,}"`, i, i)
	}
	mixed.WriteString("}")
	if msg := ask("/v2/verify/bank", []byte(mixed.String())); msg != "body: has 2002 fields; a request has at most 1000" {
		t.Errorf("2,002 fields of every kind: %q", msg)
	}
	// 500 (and payload missing): the first ten by name, then how many more.
	msg := ask("/v2/verify/bank", object(500, k))
	if !strings.HasPrefix(msg, "k000000: unknown field; k000001: unknown field;") || !strings.Contains(msg, "k000009: unknown field; and 491 more fields") {
		t.Errorf("500 fields: %q", msg)
	}
	// A name of a megabyte: cut short.
	msg = ask("/v2/verify/bank", object(1, func(int) string { return strings.Repeat("n", 1<<20) }))
	if !strings.Contains(msg, "…: unknown field") || len(msg) > 200 {
		t.Errorf("a long name: %q", msg)
	}
	// A few: every one named, as before.
	msg = ask("/v2/verify/bank", []byte(`{"payload":"x","a":1,"b":2}`))
	if !strings.Contains(msg, "a: unknown field; b: unknown field") || strings.Contains(msg, "more") {
		t.Errorf("two unknown fields: %q", msg)
	}
}
