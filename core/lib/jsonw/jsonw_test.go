package jsonw_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/slipverify/slipverify/core/lib/jsonw"
)

func FuzzString(f *testing.F) {
	for _, s := range []string{"", "plain", "นาย ทดสอบ", `<a href="x">&</a>`, "\x00\x1f\b\f\n\r\t\\", "\u2028\u2029", "\xff\xfe", "a\xc3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := jsonw.String(nil, s); string(got) != string(want) {
			t.Fatalf("%q: %s, encoding/json %s", s, got, want)
		}
	})
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
