package jsonw_test

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/slipverify/slipverify/core/lib/jsonw"
)

var stringSeeds = []string{"", "plain", "นาย ทดสอบ", `<a href="x">&</a>`, "\x00\x1f\b\f\n\r\t\\", "\u2028\u2029", "\xff\xfe", "a\xc3", "/a?b=1&c=<2>\x7f"}

func FuzzString(f *testing.F) {
	for _, s := range stringSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := jsonw.String(nil, s); string(got) != string(want) {
			t.Fatalf("%q: %s, encoding/json %s", s, got, want)
		}
		if got := jsonw.String(nil, []byte(s)); string(got) != string(want) {
			t.Fatalf("%q as bytes: %s, encoding/json %s", s, got, want)
		}
	})
}

// FuzzStringNoHTML holds StringNoHTML to a json.Encoder that does not
// escape HTML, for strings and byte slices.
func FuzzStringNoHTML(f *testing.F) {
	for _, s := range stringSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if got := jsonw.StringNoHTML(nil, s); string(got) != string(want) {
			t.Fatalf("%q: %s, encoding/json %s", s, got, want)
		}
		if got := jsonw.StringNoHTML(nil, []byte(s)); string(got) != string(want) {
			t.Fatalf("%q as bytes: %s, encoding/json %s", s, got, want)
		}
	})
}

// TestStringAllocs: a byte slice, runes of several bytes and invalid UTF-8
// included, is written without an allocation, as a string is.
func TestStringAllocs(t *testing.T) {
	s := "/สาขา/<ทดสอบ>&\xff\u2028" + string(bytes.Repeat([]byte("ก"), 40))
	b := []byte(s)
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() {
		buf = jsonw.String(buf[:0], s)
		buf = jsonw.String(buf, b)
		buf = jsonw.StringNoHTML(buf, b)
	}); n != 0 {
		t.Fatalf("%.1f allocations", n)
	}
}

func FuzzFloat(f *testing.F) {
	for _, x := range []float64{0, 100.5, 1500, 0.01, 1e-7, 1e21, 123456789.123, -3.25, math.SmallestNonzeroFloat64, math.MaxFloat64} {
		f.Add(x)
	}
	f.Fuzz(func(t *testing.T, x float64) {
		want, err := json.Marshal(x)
		if err != nil {
			want = []byte("null")
		}
		if got := jsonw.Float(nil, x); string(got) != string(want) {
			t.Fatalf("%v: %s, encoding/json %s", x, got, want)
		}
	})
}

func BenchmarkString(b *testing.B) {
	b.ReportAllocs()
	buf := make([]byte, 0, 64)
	for b.Loop() {
		buf = jsonw.String(buf[:0], "บริษัท ทดสอบสลิป จำกัด")
	}
}
