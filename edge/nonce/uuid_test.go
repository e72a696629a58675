package nonce

import (
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-4[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$`)

func TestParseUUID(t *testing.T) {
	want := [16]byte{0x0b, 0x8f, 0x6a, 0x7e, 0x4a, 0x43, 0x4d, 0x7c, 0x9d, 0x6e, 0x6a, 0x1f, 0x3b, 0x2c, 0x9e, 0x10}
	f := func(s string, ok bool) {
		t.Helper()
		got, gotOK := ParseUUID([]byte(s))
		if gotOK != ok || (ok && got != want) || (!ok && got != [16]byte{}) {
			t.Errorf("ParseUUID(%q) = %x, %v; want ok %v", s, got, gotOK, ok)
		}
	}
	f("0b8f6a7e-4a43-4d7c-9d6e-6a1f3b2c9e10", true)
	f("0B8F6A7E-4A43-4D7C-9D6E-6A1F3B2C9E10", true)
	f("0b8f6A7E-4a43-4D7c-9D6e-6a1F3b2C9e10", true)
	f("0b8f6a7e-4a43-1d7c-9d6e-6a1f3b2c9e10", false) // version 1
	f("0b8f6a7e-4a43-7d7c-9d6e-6a1f3b2c9e10", false) // version 7
	f("0b8f6a7e-4a43-4d7c-cd6e-6a1f3b2c9e10", false) // variant
	f("0b8f6a7e-4a43-4d7c-7d6e-6a1f3b2c9e10", false)
	f("0b8f6a7e4a434d7c9d6e6a1f3b2c9e10", false)
	f("{0b8f6a7e-4a43-4d7c-9d6e-6a1f3b2c9e10}", false)
	f("urn:uuid:0b8f6a7e-4a43-4d7c-9d6e-6a1f3b2c9e10", false)
	f("0b8f6a7e-4a43-4d7c-9d6e-6a1f3b2c9e1", false)
	f("0b8f6a7e-4a43-4d7c-9d6e-6a1f3b2c9e100", false)
	f("0b8f6a7e_4a43-4d7c-9d6e-6a1f3b2c9e10", false)
	f("0b8f6a7e-4a43-4d7c-9d6e-6a1f3b2c9e1g", false)
	f("0b8f6a7e-4a43-4d7c-9d6e-6a1f3b2c9e1 ", false)
	f(" 0b8f6a7e-4a43-4d7c-9d6e-6a1f3b2c9e1", false)
	f("0b8f6a7e-4a4-34d7c-9d6e-6a1f3b2c9e10", false)
	f("", false)
}

func TestParseUUIDAllocs(t *testing.T) {
	s := []byte("0b8f6a7e-4a43-4d7c-9d6e-6a1f3b2c9e10")
	if n := testing.AllocsPerRun(1000, func() { ParseUUID(s) }); n != 0 {
		t.Errorf("ParseUUID allocates %v times", n)
	}
}

func FuzzParseUUID(f *testing.F) {
	for _, s := range []string{
		"0b8f6a7e-4a43-4d7c-9d6e-6a1f3b2c9e10", "0B8F6A7E-4A43-4D7C-BD6E-6A1F3B2C9E10", "0b8f6a7e-4a43-1d7c-9d6e-6a1f3b2c9e10",
		"0b8f6a7e4a434d7c9d6e6a1f3b2c9e10", "", "------------------------------------",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		u, ok := ParseUUID(s)
		if ok != uuidV4.Match(s) {
			t.Fatalf("ParseUUID(%q) ok = %v", s, ok)
		}
		if !ok {
			return
		}
		b, err := hex.DecodeString(strings.ReplaceAll(string(s), "-", ""))
		if err != nil || string(b) != string(u[:]) {
			t.Fatalf("ParseUUID(%q) = %x", s, u)
		}
	})
}

func BenchmarkParseUUID(b *testing.B) {
	s := []byte("0b8f6a7e-4a43-4d7c-9d6e-6a1f3b2c9e10")
	b.ReportAllocs()
	for b.Loop() {
		ParseUUID(s)
	}
}

func TestAppendUUIDRoundTrip(t *testing.T) {
	for _, s := range []string{"123e4567-e89b-42d3-a456-426614174000", "00000000-0000-4000-8000-000000000000"} {
		u, ok := ParseUUID([]byte(s))
		if !ok {
			t.Fatalf("%s: not parsed", s)
		}
		if got := string(AppendUUID(nil, u)); got != s {
			t.Errorf("AppendUUID(ParseUUID(%s)) = %s", s, got)
		}
	}
}
