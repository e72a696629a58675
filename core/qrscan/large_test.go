package qrscan

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/qrscan/internal/jpegluma"
)

// withTRNS inserts a tRNS chunk holding data before the first IDAT of a PNG.
func withTRNS(img, data []byte) []byte {
	i := bytes.Index(img, []byte("IDAT")) - 4
	out := append([]byte(nil), img[:i]...)
	out = append(out, pngChunk("tRNS", data)...)
	return append(out, img[i:]...)
}

// upFiltered is an 8-bit RGB PNG file of m, which is opaque, with every
// row filtered with Up.
func upFiltered(m *image.RGBA) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil { // for its header
		panic(err)
	}
	w, h := m.Rect.Dx(), m.Rect.Dy()
	var raw bytes.Buffer
	prev := make([]byte, 3*w)
	for y := range h {
		raw.WriteByte(2)
		for x := range w {
			c := m.RGBAAt(x, y)
			for i, v := range []byte{c.R, c.G, c.B} {
				raw.WriteByte(v - prev[3*x+i])
				prev[3*x+i] = v
			}
		}
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(raw.Bytes())
	zw.Close()
	i := bytes.Index(b.Bytes(), []byte("IDAT")) - 4
	out := append([]byte(nil), b.Bytes()[:i]...)
	out = append(out, pngChunk("IDAT", z.Bytes())...)
	return append(out, pngChunk("IEND", nil)...)
}

// TestPNGLumaAsDecoded: reading a PNG row by row gives, for every colour
// type, bit depth and transparency, the luma plane that image/png and
// toGray give, at full size and shrunk.
func TestPNGLumaAsDecoded(t *testing.T) {
	const w, h = 61, 47
	r := rand.New(rand.NewPCG(3, 4))
	// A picture with flat areas and noise, so that every filter is used.
	var imgs []image.Image
	nrgba := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range nrgba.Pix {
		nrgba.Pix[i] = uint8(r.IntN(256))
		if (i/4)%w < 20 {
			nrgba.Pix[i] = uint8((i / 4 / w) * 5)
		}
	}
	rgba := image.NewRGBA(nrgba.Bounds())
	gray := image.NewGray(nrgba.Bounds())
	gray16 := image.NewGray16(nrgba.Bounds())
	nrgba64 := image.NewNRGBA64(nrgba.Bounds())
	rgba64 := image.NewRGBA64(nrgba.Bounds())
	for y := range h {
		for x := range w {
			c := nrgba.NRGBAAt(x, y)
			rgba.SetRGBA(x, y, color.RGBA{c.R, c.G, c.B, 255})
			gray.SetGray(x, y, color.Gray{c.G})
			gray16.SetGray16(x, y, color.Gray16{uint16(c.G)<<8 | uint16(c.R)})
			nrgba64.SetNRGBA64(x, y, color.NRGBA64{uint16(c.R) << 8, uint16(c.G)<<8 | 7, uint16(c.B) << 8, uint16(c.A)<<8 | uint16(c.R)})
			rgba64.SetRGBA64(x, y, color.RGBA64{uint16(c.R) << 8, uint16(c.G) << 8, uint16(c.B) << 8, 0xffff})
		}
	}
	// A screenshot's rows, which Up filters best: each the one above,
	// with a few pixels changed or none (a row of zeros); pixels changed
	// in one row, kept in the next and changed again in the third, in
	// whole groups of eight pixels and past the last.
	shot := image.NewRGBA(nrgba.Bounds())
	for row := range h {
		y := row
		if y%8 == 4 {
			y-- // the row above again
		}
		for x := range w {
			c := color.RGBA{uint8(x * 37), uint8(x * 11), uint8(255 - x*4), 255}
			switch a, b, end := x >= 8 && x < 12, x >= 24 && x < 28, x >= 58; {
			case (y%4 == 1 || y%4 == 2) && (a || end):
				c = color.RGBA{uint8(9 * (y - y%4)), 100, 30, 255}
			case y%4 == 2 && b:
				c = color.RGBA{50, uint8(7 * y), 60, 255}
			case y%4 == 3 && (a || end):
				c = color.RGBA{200, uint8(5 * y), 90, 255}
			}
			shot.SetRGBA(x, row, c)
		}
	}
	imgs = append(imgs, nrgba, rgba, gray, gray16, nrgba64, rgba64)
	for _, n := range []int{2, 4, 16, 256} { // bit depths 1, 2, 4 and 8
		pal := color.Palette{}
		for i := range n {
			pal = append(pal, color.NRGBA{uint8(i * 37), uint8(i * 11), uint8(255 - i), uint8(255 - i%3*100)})
		}
		p := image.NewPaletted(nrgba.Bounds(), pal)
		for i := range p.Pix {
			p.Pix[i] = uint8(r.IntN(n))
		}
		imgs = append(imgs, p)
	}
	var files [][]byte
	for _, m := range imgs {
		var b bytes.Buffer
		if err := png.Encode(&b, m); err != nil {
			t.Fatal(err)
		}
		files = append(files, b.Bytes())
	}
	// The screenshot with every row filtered with Up (image/png chooses
	// Paeth for these rows), as some phones' encoders write it.
	files = append(files, upFiltered(shot))
	// Grey and RGB with a transparent colour, 8 and 16 bits.
	files = append(files,
		withTRNS(files[2], []byte{0, byte(gray.Pix[5])}),
		withTRNS(files[3], gray16.Pix[10:12]),
		withTRNS(files[1], []byte{0, rgba.Pix[0], 0, rgba.Pix[1], 0, rgba.Pix[2]}),
	)
	for i, f := range files {
		want, err := png.Decode(bytes.NewReader(f))
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []int{1, 2, 3} {
			got, err := pngLuma(f, w, h, k, nil)
			if err != nil {
				t.Fatalf("file %d (%T, colour type %d, depth %d): %v", i, want, f[25], f[24], err)
			}
			if p := toGray(want, k, nil); !bytes.Equal(got.pix, p.pix) || got.w != p.w || got.h != p.h {
				t.Errorf("file %d (%T, colour type %d, depth %d), k=%d: luma differs from image/png's", i, want, f[25], f[24], k)
			}
		}
	}
	// Damaged files are refused.
	bad := append([]byte(nil), files[0]...)
	bad[bytes.Index(bad, []byte("IDAT"))+6]++
	if _, err := pngLuma(bad, w, h, 1, nil); err == nil {
		t.Error("a bad CRC read without error")
	}
	if _, err := pngLuma(files[0][:len(files[0])/2], w, h, 1, nil); err == nil {
		t.Error("a truncated file read without error")
	}
}

// bigPicture is a w×h picture of a slip screenshot enlarged by a whole
// factor to fill most of its height, on a desk: what a phone camera sends
// of a slip on another screen, at its full resolution. With grain, each
// pixel is nudged by ±3 levels, as a sensor would (and as keeps a JPEG's
// size realistic).
func bigPicture(seed uint64, w, h int, grain bool) (*image.RGBA, string) {
	r := rand.New(rand.NewPCG(seed, 99))
	p := bankPayload(r)
	s := renderSlip(r, slipSpec{payload: p, qrFrac: 0.2 + 0.1*r.Float64()})
	sw, sh := s.Bounds().Dx(), s.Bounds().Dy()
	k := max(1, min(h*85/100/sh, w*85/100/sw))
	out := image.NewRGBA(image.Rect(0, 0, w, h))
	fill(out, out.Bounds(), deskColor(r))
	x0, y0 := (w-sw*k)/2, (h-sh*k)/2
	for y := range sh * k {
		src := s.Pix[(y/k)*s.Stride:]
		dst := out.Pix[(y0+y)*out.Stride+4*x0:]
		for x := range sw * k {
			copy(dst[4*x:4*x+4], src[4*(x/k):4*(x/k)+4])
		}
	}
	if grain {
		g := rand.New(rand.NewPCG(seed, 7))
		for i := 0; i < len(out.Pix); i += 4 {
			d := g.IntN(7) - 3
			for ch := range 3 {
				out.Pix[i+ch] = uint8(max(0, min(255, int(out.Pix[i+ch])+d)))
			}
		}
	}
	return out, p
}

// largeSizes are the camera resolutions of the large-picture tests: 12, 24
// and 48 Mpx at 3:4.
var largeSizes = [][2]int{{3024, 4032}, {4000, 6000}, {6000, 8000}}

// TestLargePictures: photos of 12, 24 and 48 Mpx, as JPEG and as PNG where
// the file stays within MaxBytes, are read within the Budget. It logs the
// time and the bytes Scan allocated (all of them: a bound on its peak),
// the figures of the README.
func TestLargePictures(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	for i, sz := range largeSizes {
		w, h := sz[0], sz[1]
		for _, f := range []string{"jpeg", "png"} {
			t.Run(fmt.Sprintf("%s-%dMpx", f, w*h/1_000_000), func(t *testing.T) {
				m, payload := bigPicture(uint64(i), w, h, f == "jpeg")
				var b bytes.Buffer
				var err error
				if f == "jpeg" {
					err = jpeg.Encode(&b, m, &jpeg.Options{Quality: 85})
				} else {
					err = png.Encode(&b, m)
				}
				if err != nil {
					t.Fatal(err)
				}
				if b.Len() > MaxBytes {
					t.Skipf("%d bytes, over MaxBytes", b.Len())
				}
				var got string
				start := time.Now()
				n := allocated(func() { got, err = Scan(b.Bytes(), isSlip) })
				t.Logf("%s %d×%d, %d bytes: read in %v, allocated %.1f MiB", f, w, h, b.Len(), time.Since(start).Round(time.Millisecond), float64(n)/(1<<20))
				if err != nil || got != payload {
					t.Fatalf("Scan = %q, %v; want the slip", got, err)
				}
				if n > Budget {
					t.Errorf("allocated %d bytes, over the budget of %d", n, Budget)
				}
			})
		}
	}
}

// TestTooManyPixels: an image over MaxPixels is refused from its header
// with an error that says so, not that the file is too big.
func TestTooManyPixels(t *testing.T) {
	for _, img := range [][]byte{pngBomb(100000, 100000, 8, 2), pngBomb(8193, 8193, 8, 0), jpegBomb(9000, 8000)} {
		_, err := Check(img)
		if !errors.Is(err, ErrTooManyPixels) {
			t.Errorf("err = %v, want ErrTooManyPixels", err)
			continue
		}
		if !bytes.Contains([]byte(err.Error()), []byte("Mpx allowed")) {
			t.Errorf("err = %v, does not name the pixel limit", err)
		}
	}
	// Within MaxPixels, a PNG too big for image/png is read row by row
	// (the 16-bit one was among the bombs before it was).
	for _, img := range [][]byte{pngBomb(8192, 8192, 8, 6), pngBomb(5000, 5000, 16, 6)} {
		c, err := Check(img)
		if err != nil || c.read != readPNGRows || c.Cost > Budget {
			t.Errorf("%d×%d PNG: cost %d, %v; want it read row by row within the budget", c.cfg.Width, c.cfg.Height, c.Cost, err)
		}
	}
}

// jpegSource is the picture of the JPEG fixtures: a slip screenshot shrunk
// to 333×251 (odd sizes, so that MCUs overhang), with grain.
func jpegSource() *image.RGBA {
	r := rand.New(rand.NewPCG(5, 6))
	m := resize(renderSlip(r, slipSpec{payload: bankPayload(r), qrFrac: 0.3}), 333, 251)
	for i := range m.Pix {
		if i%4 != 3 {
			m.Pix[i] = uint8(max(0, min(255, int(m.Pix[i])+r.IntN(9)-4)))
		}
	}
	return m
}

// jpegFixtures are JPEG files of every layout the luma decoder must read
// as image/jpeg does, made once by TestMakeFixtures with libjpeg-turbo's
// cjpeg (Go's encoder writes baseline 4:2:0 and grey only): progressive
// 4:2:0 (whose chroma AC scans jpegluma skips unread) and 4:4:4, grey
// progressive, and baseline 4:2:2 with restart markers.
var jpegFixtures = []string{"prog-420.jpg", "prog-444.jpg", "prog-gray.jpg", "base-422-rst.jpg"}

// jpegLumaFiles are JPEG files of every layout jpegluma reads: Go's
// baseline 4:2:0 and grey, and the fixtures.
func jpegLumaFiles(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	m := jpegSource()
	var b, g bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 80}); err != nil {
		t.Fatal(err)
	}
	gray := image.NewGray(m.Bounds())
	for i := range gray.Pix {
		gray.Pix[i] = m.Pix[4*i+1]
	}
	if err := jpeg.Encode(&g, gray, nil); err != nil {
		t.Fatal(err)
	}
	files["go-420.jpg"], files["go-gray.jpg"] = b.Bytes(), g.Bytes()
	for _, n := range jpegFixtures {
		data, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			t.Fatal(err)
		}
		files[n] = data
	}
	return files
}

// TestJPEGLumaAsDecoded: jpegluma's luma at each scale is the Y plane of
// image/jpeg, box-averaged as toGray averages it, whether it is written
// into new memory or over a used buffer.
func TestJPEGLumaAsDecoded(t *testing.T) {
	used := bytes.Repeat([]byte{0x5a}, 1<<20)
	for name, data := range jpegLumaFiles(t) {
		want, err := jpeg.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []int{1, 2, 4, 8} {
			buf := used[:0]
			if s == 2 {
				buf = nil // new memory
			}
			got, err := jpegluma.DecodeLuma(bytes.NewReader(data), s, buf)
			if err != nil {
				t.Fatalf("%s at 1/%d: %v", name, s, err)
			}
			p := toGray(want, s, nil)
			q := toGray(got, 1, nil)
			if q.w != p.w || q.h != p.h || !bytes.Equal(q.pix, p.pix) {
				t.Errorf("%s at 1/%d: %d×%d luma differs from image/jpeg's %d×%d", name, s, q.w, q.h, p.w, p.h)
			}
		}
	}
}

// TestJPEGLumaDCT: the luma shrunk in the frequency domain is the size of
// the exact one and within a few levels of it on average (these files are
// a slip shrunk to 333×251, mostly sharp edges, where the dropped
// frequencies count most: 2.2 levels at 1/2, 1.6 at 1/4, 0.1 at 1/8), also
// when written over a used buffer.
func TestJPEGLumaDCT(t *testing.T) {
	used := bytes.Repeat([]byte{0x5a}, 1<<20)
	for name, data := range jpegLumaFiles(t) {
		for _, s := range []int{2, 4, 8} {
			want, err := jpegluma.DecodeLuma(bytes.NewReader(data), s, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := jpegluma.DecodeLumaDCT(bytes.NewReader(data), s, used)
			if err != nil {
				t.Fatalf("%s at 1/%d: %v", name, s, err)
			}
			p, q := toGray(want, 1, nil), toGray(got, 1, nil)
			if q.w != p.w || q.h != p.h {
				t.Fatalf("%s at 1/%d: %d×%d, want %d×%d", name, s, q.w, q.h, p.w, p.h)
			}
			sum, worst := 0, 0
			for i := range p.pix {
				d := abs8(int(p.pix[i]) - int(q.pix[i]))
				sum, worst = sum+d, max(worst, d)
			}
			if mean := float64(sum) / float64(len(p.pix)); mean > 2.5 || worst > 64 {
				t.Errorf("%s at 1/%d: differs from the exact luma by %.2f levels on average, %d at most", name, s, mean, worst)
			}
		}
	}
}

// FuzzReduced feeds mutated files to the readers of large images,
// jpegluma and pngLuma, at every scale, which Scan reaches only for files
// over the budget. Nothing may panic.
//
//	go test -run XXX -fuzz FuzzReduced -fuzztime 1m ./core/qrscan/
func FuzzReduced(f *testing.F) {
	for _, n := range jpegFixtures {
		data, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint8(2))
	}
	for _, data := range smallFiles(f) {
		f.Add(data, uint8(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, s uint8) {
		scale := 1 << (s % 4)
		// Small images only: Check bounds the size of what Scan reads.
		f := sniff(data)
		cfg, err := decodeConfig(f, data)
		if err != nil || int64(cfg.Width)*int64(cfg.Height) > 1<<20 || cfg.Width < 1 || cfg.Height < 1 {
			return
		}
		switch f {
		case formatJPEG:
			jpegluma.DecodeLuma(bytes.NewReader(data), scale, nil)
			jpegluma.DecodeLumaDCT(bytes.NewReader(data), scale, make([]byte, 4096))
		case formatPNG:
			if pngStreamable(data) {
				pngLuma(data, cfg.Width, cfg.Height, scale, nil)
			}
		}
	})
}

// TestLargeNoCode: a 48 Mpx picture with no code, busy enough that every
// strategy runs, is scanned within the Budget through the reduced
// readers, as a grey JPEG and PNG (grey, so that the test itself holds
// 48 MB rather than 192).
func TestLargeNoCode(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	const w, h = 6000, 8000
	r := rand.New(rand.NewPCG(1, 2))
	m := image.NewGray(image.Rect(0, 0, w, h))
	for i := range m.Pix {
		m.Pix[i] = 255
	}
	box := func(x0, y0, x1, y1 int, v uint8) {
		for y := max(0, y0); y < min(h, y1); y++ {
			for x := max(0, x0); x < min(w, x1); x++ {
				m.Pix[y*w+x] = v
			}
		}
	}
	for range w * h / 4000 {
		x, y := r.IntN(w), r.IntN(h)
		box(x, y, x+4+r.IntN(40), y+3+r.IntN(10), 0)
	}
	for k := range 40 { // lone finder-pattern look-alikes
		x, y, s := r.IntN(w-200), r.IntN(h-200), 4*(2+k%3)
		box(x, y, x+7*s, y+7*s, 0)
		box(x+s, y+s, x+6*s, y+6*s, 255)
		box(x+2*s, y+2*s, x+5*s, y+5*s, 0)
	}
	for _, f := range []string{"jpeg", "png"} {
		var b bytes.Buffer
		var err error
		if f == "jpeg" {
			err = jpeg.Encode(&b, m, &jpeg.Options{Quality: 85})
		} else {
			err = (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&b, m)
		}
		if err != nil {
			t.Fatal(err)
		}
		if b.Len() > MaxBytes {
			t.Fatalf("%s: %d bytes", f, b.Len())
		}
		c, err := Check(b.Bytes())
		if err != nil || c.read == readDecoder {
			t.Fatalf("%s: %v; want a reduced reader", f, err)
		}
		start := time.Now()
		n := allocated(func() { _, err = c.Scan(isSlip) })
		t.Logf("%s %d×%d grey, no code, %d bytes: %v in %v, allocated %.1f MiB (estimate %.1f MiB)", f, w, h, b.Len(), err, time.Since(start).Round(time.Millisecond), float64(n)/(1<<20), float64(c.Cost)/(1<<20))
		if !errors.Is(err, ErrNoQR) {
			t.Errorf("%s: %v, want ErrNoQR", f, err)
		}
		if n > uint64(c.Cost) {
			t.Errorf("%s: allocated %d bytes, over its estimate of %d", f, n, c.Cost)
		}
	}
}
