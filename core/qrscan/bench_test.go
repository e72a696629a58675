package qrscan

import (
	"bytes"
	"errors"
	"image/png"
	"math"
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

// BenchmarkPass is the cost of each strategy of scanner.run on its own, on
// the working planes of the corpus images it is for (PNG), as an image
// that reaches it pays on top of the earlier ones; "decoded/op" is the
// share it reads. The filters are also measured alone. Each runs on a
// fresh scanner, as Scan's are.
func BenchmarkPass(b *testing.B) {
	planes := map[string][]plane{}
	for _, s := range corpus(b) {
		if s.format != "png" {
			continue
		}
		m, err := decodeImage(formatPNG, s.data)
		if err != nil {
			b.Fatal(err)
		}
		bd := m.Bounds()
		planes[s.cond] = append(planes[s.cond], toGray(m, shrinkFactor(bd.Dx(), bd.Dy()), nil))
	}
	newScanner := func(p plane) *scanner {
		s := &scanner{dec: decoder.NewDecoder(), accept: isSlip}
		s.setFull(p)
		return s
	}
	k := func(s *scanner) float64 { return float64(s.full.w) / float64(s.small.w) }
	passes := []struct {
		name, cond string
		run        func(s *scanner) bool
	}{
		{"small", "clean", func(s *scanner) bool { return s.try("small", s.small, hybrid, 2, k(s)) }},
		{"full", "small", func(s *scanner) bool { return s.try("full", s.full, hybrid, 2, 1) }},
		{"zoom", "small", func(s *scanner) bool { // with the search that finds its windows
			return s.try("full", s.full, hybrid, 2, 1) || s.zoom(false)
		}},
		{"small-inv", "inverted", func(s *scanner) bool {
			return s.try("small-inv", invert(s.small, nil), hybrid, 2, k(s))
		}},
		{"full-global", "gauss", func(s *scanner) bool { return s.try("full-global", s.full, global, 2, 1) }},
		{"norm", "photo", func(s *scanner) bool { return s.try("norm", normalize(s.full, 32, nil), hybrid, 2, 1) }},
		{"median", "saltpepper", func(s *scanner) bool { return s.try("median", median3(s.full, nil), hybrid, 2, 1) }},
		{"sharp", "gauss", (*scanner).sharp},
		{"unblur", "motion", (*scanner).unblur},
		{"defocus", "gauss", (*scanner).defocus},
	}
	for _, p := range passes {
		set := planes[p.cond]
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			ok, n := 0, 0
			for i := 0; b.Loop(); i++ {
				if p.run(newScanner(set[i%len(set)])) {
					ok++
				}
				n++
			}
			b.ReportMetric(float64(ok)/float64(n), "decoded/op")
		})
	}
	filters := []struct {
		name, cond string
		run        func(p plane, buf, tmp []byte) ([]byte, []byte)
	}{
		{"median-filter", "saltpepper", func(p plane, buf, tmp []byte) ([]byte, []byte) { return median3(p, buf).pix, tmp }},
		{"sharpen-filter", "gauss", func(p plane, buf, tmp []byte) ([]byte, []byte) {
			q, tmp := sharpen(p, 3, 3, buf, tmp)
			return q.pix, tmp
		}},
		{"unblur-measure", "motion", func(p plane, buf, tmp []byte) ([]byte, []byte) {
			blurKernel(p)
			return buf, tmp
		}},
		{"unblur-filter", "motion", func(p plane, buf, tmp []byte) ([]byte, []byte) {
			return deconvolve(p, math.Pi/4, boxTaps(11), 0.02, buf).pix, tmp
		}},
		{"defocus-filter", "gauss", func(p plane, buf, tmp []byte) ([]byte, []byte) {
			rows := deconvolve(p, 0, gaussTaps(3), 0.02, tmp)
			return deconvolve(rows, math.Pi/2, gaussTaps(3), 0.02, buf).pix, rows.pix
		}},
	}
	for _, f := range filters {
		set := planes[f.cond]
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			var buf, tmp []byte
			for i := 0; b.Loop(); i++ {
				buf, tmp = f.run(set[i%len(set)], buf, tmp)
			}
		})
	}
}
