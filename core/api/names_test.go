package api

import "testing"

// TestNameProblem: the names a tenant or an operator may set, and those
// refused, as the rule reads.
func TestNameProblem(t *testing.T) {
	f := func(name, want string) {
		t.Helper()
		if got := NameProblem(name); got != want {
			t.Errorf("NameProblem(%q) = %q, want %q", name, got, want)
		}
	}
	const (
		control = "must not hold control characters "
		bidi    = "must not hold bidirectional formatting characters "
	)
	// Names as people write them.
	f("", "")
	f("Main", "")
	f("สาขา ลาดพร้าว", "")
	f("บริษัท ทดสอบสลิป จำกัด", "")
	f("Café Doi (2)", "")
	f("ops+cafe@shop.example", "")
	f("מסעדה שלום", "") // right-to-left text itself is fine
	f("\u00a0non-breaking", "")
	f("zero\u200dwidth joiner", "")
	f("a literal \uFFFD replacement character", "")
	// C0, DEL and C1 control characters.
	f("\u001b]0;OWNED\u0007\u001b[2J", control+"(U+001B)")
	f("nul\x00", control+"(U+0000)")
	f("tab\there", control+"(U+0009)")
	f("line\nbreak", control+"(U+000A)")
	f("cr\r", control+"(U+000D)")
	f("del\x7f", control+"(U+007F)")
	f("c1 csi \u009b2J", control+"(U+009B)")
	f("next line \u0085", control+"(U+0085)")
	// Bidirectional formatting characters.
	f("invoice\u202eexe.pdf", bidi+"(U+202E)")
	f("\u202a", bidi+"(U+202A)")
	f("\u202b", bidi+"(U+202B)")
	f("\u202c", bidi+"(U+202C)")
	f("\u202d", bidi+"(U+202D)")
	f("\u2066isolated\u2069", bidi+"(U+2066)")
	f("\u2067", bidi+"(U+2067)")
	f("\u2068", bidi+"(U+2068)")
	f("\u2069", bidi+"(U+2069)")
	f("mark\u200e", bidi+"(U+200E)")
	f("mark\u200f", bidi+"(U+200F)")
	f("arabic mark\u061c", bidi+"(U+061C)")
	// Not UTF-8.
	f("bad \xff byte", "must be UTF-8 text")
}
