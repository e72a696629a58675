package api

import (
	"strings"
	"testing"
)

func TestEmailProblem(t *testing.T) {
	f := func(s, want string) {
		t.Helper()
		if got := EmailProblem(s); got != want {
			t.Errorf("EmailProblem(%q) = %q, want %q", s, got, want)
		}
	}
	f("ops@shop.example", "")
	f("ops+th@ร้าน.example", "")
	f("Ops <ops@shop.example>", "must be an email address (name@example.com)")
	f("not an address", "must be an email address (name@example.com)")
	f("\u202eops@shop.example", "must not hold bidirectional formatting characters (U+202E)")
	f("ops\u0085@shop.example", "must not hold control characters (U+0085)")
	long := "a@" + strings.Repeat("b", 253)
	f(long, "must be an email address of at most 254 characters")
}
