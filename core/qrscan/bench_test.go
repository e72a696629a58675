package qrscan

import (
	"bytes"
	"errors"
	"image/png"
	"testing"

	"github.com/makiuchi-d/gozxing/qrcode/decoder"
)

// BenchmarkScan scans the corpus images of each condition, all formats in
// turn, and reports the share decoded as "decoded/op" (1 = all).
func BenchmarkScan(b *testing.B) {
	samples := corpus(b)
	for _, c := range conditions {
		var set []*sample
		for _, s := range samples {
			if s.cond == c.name {
				set = append(set, s)
			}
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			ok, n := 0, 0
			for i := 0; b.Loop(); i++ {
				s := set[i%len(set)]
				got, err := Scan(s.data, isSlip)
				n++
				if err == nil && got == s.payload {
					ok++
				}
			}
			b.ReportMetric(float64(ok)/float64(n), "decoded/op")
		})
	}
}

// BenchmarkDecodeOnly is the floor under BenchmarkScan: decoding the
// image files alone, per format.
func BenchmarkDecodeOnly(b *testing.B) {
	samples := corpus(b)
	for _, f := range formats {
		var set []*sample
		for _, s := range samples {
			if s.format == f && s.cond == "clean" {
				set = append(set, s)
			}
		}
		if len(set) == 0 {
			continue
		}
		b.Run(f, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				s := set[i%len(set)]
				if _, err := decodeImage(sniff(s.data), s.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkScanNoQR is the slow path: a 1080×2340 screenshot-sized PNG
// with no QR code (but look-alike finder patterns), where every strategy
// runs before ErrNoQR.
func BenchmarkScanNoQR(b *testing.B) {
	var buf bytes.Buffer
	if err := png.Encode(&buf, busyImage(1080, 2340)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Scan(buf.Bytes(), isSlip); !errors.Is(err, ErrNoQR) {
			b.Fatal(err)
		}
	}
}

// BenchmarkPass is the cost of each extra pass on its own, on the working
// plane of the corpus images it is for (PNG; about 650×1400): the filter
// alone, and the filter with the search of its result, which is what an
// image the earlier strategies miss pays on top of them. "median": the
// 3×3 median, on saltpepper images; "sharp": the unsharp masks of
// scanner.sharp, every radius, on gauss images (as for an image none
// decodes).
func BenchmarkPass(b *testing.B) {
	planes := func(cond string) []plane {
		var out []plane
		for _, s := range corpus(b) {
			if s.cond == cond && s.format == "png" {
				m, err := decodeImage(formatPNG, s.data)
				if err != nil {
					b.Fatal(err)
				}
				bd := m.Bounds()
				out = append(out, toGray(m, shrinkFactor(bd.Dx(), bd.Dy())))
			}
		}
		return out
	}
	noisy, blurred := planes("saltpepper"), planes("gauss")
	b.Run("median-filter", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for i := 0; b.Loop(); i++ {
			buf = median3(noisy[i%len(noisy)], buf).pix
		}
	})
	b.Run("median", func(b *testing.B) {
		b.ReportAllocs()
		ok, n := 0, 0
		for i := 0; b.Loop(); i++ {
			s := &scanner{full: noisy[i%len(noisy)], dec: decoder.NewDecoder(), accept: isSlip}
			m := median3(s.full, nil)
			if s.try("median", m, hybrid, 2, 1) {
				ok++
			}
			n++
		}
		b.ReportMetric(float64(ok)/float64(n), "decoded/op")
	})
	b.Run("sharpen-filter", func(b *testing.B) {
		b.ReportAllocs()
		var buf, tmp []byte
		for i := 0; b.Loop(); i++ {
			var p plane
			p, tmp = sharpen(blurred[i%len(blurred)], 3, 3, buf, tmp)
			buf = p.pix
		}
	})
	b.Run("sharp", func(b *testing.B) {
		b.ReportAllocs()
		ok, n := 0, 0
		for i := 0; b.Loop(); i++ {
			s := &scanner{full: blurred[i%len(blurred)], dec: decoder.NewDecoder(), accept: func(string) bool { return false }}
			s.sharp()
			if s.found {
				ok++
			}
			n++
		}
		b.ReportMetric(float64(ok)/float64(n), "found/op")
	})
}
