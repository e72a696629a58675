package api

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// NameProblem says why s cannot be a name that a tenant or an operator sets
// (a service's, plan's, branch's, B2B client's, admin token's or bank
// account's name, a contact email, the reason of a state change), or ""
// when it can. Such names are shown to other people, on operators'
// terminals (slipadm) among them, so they may hold no control characters
// (C0, DEL and C1: an escape sequence could retitle, clear or drive a
// terminal) and no bidirectional formatting characters (embeddings and
// overrides U+202A to U+202E, isolates U+2066 to U+2069, and the marks
// U+200E, U+200F and U+061C: they make text read in another order than it
// is stored, "gpj.exe" shown as "exe.jpg"). Lengths and emptiness are each
// field's own rule. Every path that stores a name calls it: the admin API,
// /b2b and the seed.
func NameProblem(s string) string {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return "must be UTF-8 text"
		case r < 0x20 || r >= 0x7f && r <= 0x9f:
			return "must not hold control characters (" + codePoint(r) + ")"
		case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
			return "must not hold bidirectional formatting characters (" + codePoint(r) + ")"
		}
	}
	return ""
}

// codePoint writes r as U+XXXX.
func codePoint(r rune) string {
	h := strings.ToUpper(strconv.FormatInt(int64(r), 16))
	return "U+" + strings.Repeat("0", max(0, 4-len(h))) + h
}
