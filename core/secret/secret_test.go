package secret

import (
	"bytes"
	"strings"
	"testing"
)

const key = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

func TestSealOpen(t *testing.T) {
	b, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	s := b.Seal("b2bsec_x", "b2b/abc")
	if bytes.Contains(s, []byte("b2bsec_x")) {
		t.Fatal("sealed value contains the plaintext")
	}
	if got, err := b.Open(s, "b2b/abc"); err != nil || got != "b2bsec_x" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := b.Open(s, "b2b/other"); err == nil {
		t.Fatal("a sealed value opened under another label")
	}
	other, _ := New(strings.Repeat("ab", 32))
	if _, err := other.Open(s, "b2b/abc"); err == nil {
		t.Fatal("a sealed value opened with another master key")
	}
	if _, err := b.Open(s[:5], "b2b/abc"); err == nil {
		t.Fatal("a truncated value opened")
	}
}

func TestNewRejectsBadKeys(t *testing.T) {
	for _, k := range []string{"", "abc", strings.Repeat("zz", 32), strings.Repeat("ab", 16)} {
		if _, err := New(k); err == nil {
			t.Errorf("New(%q) accepted", k)
		}
	}
}
