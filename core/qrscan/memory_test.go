package qrscan

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// allocated returns the bytes f allocates (all of them, garbage included:
// an upper bound on the memory it holds at any time).
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// pngChunk frames one PNG chunk.
func pngChunk(typ string, data []byte) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	b = append(b, typ...)
	b = append(b, data...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(append([]byte(typ), data...)))
}

// pngBomb is a PNG that declares w×h pixels of colour type ctype and bit
// depth depth, with image data for a few rows only.
func pngBomb(w, h uint32, depth, ctype byte) []byte {
	ihdr := binary.BigEndian.AppendUint32(nil, w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, depth, ctype, 0, 0, 0)
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(make([]byte, 1<<16))
	zw.Close()
	out := []byte("\x89PNG\r\n\x1a\n")
	out = append(out, pngChunk("IHDR", ihdr)...)
	out = append(out, pngChunk("IDAT", z.Bytes())...)
	return append(out, pngChunk("IEND", nil)...)
}

// gifBomb is a GIF whose screen and single frame are w×h, with LZW data
// for a few pixels only.
func gifBomb(w, h uint16) []byte {
	b := []byte("GIF89a")
	b = binary.LittleEndian.AppendUint16(b, w)
	b = binary.LittleEndian.AppendUint16(b, h)
	b = append(b, 0x80, 0, 0) // global colour table of 2 entries
	b = append(b, 0, 0, 0, 255, 255, 255)
	b = append(b, 0x2c, 0, 0, 0, 0)
	b = binary.LittleEndian.AppendUint16(b, w)
	b = binary.LittleEndian.AppendUint16(b, h)
	b = append(b, 0, 2, 2, 0x4c, 0x01, 0, 0x3b) // LZW min code size 2, one tiny block
	return b
}

// jpegBomb is a baseline JPEG header declaring w×h pixels in YCbCr 4:2:0.
func jpegBomb(w, h uint16) []byte {
	b := []byte{0xff, 0xd8, 0xff, 0xc0, 0, 17, 8}
	b = binary.BigEndian.AppendUint16(b, h)
	b = binary.BigEndian.AppendUint16(b, w)
	b = append(b, 3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1)
	b = append(b, 0xff, 0xda, 0, 12, 3, 1, 0, 2, 0x11, 3, 0x11, 0, 0x3f, 0) // start of scan
	return append(b, 0xff, 0xd9)
}

// webpBomb is an extended (VP8X) WebP header declaring w×h pixels.
func webpBomb(w, h uint32) []byte {
	x := []byte{0x10, 0, 0, 0} // alpha
	x = append(x, byte(w-1), byte((w-1)>>8), byte((w-1)>>16), byte(h-1), byte((h-1)>>8), byte((h-1)>>16))
	body := []byte("WEBPVP8X")
	body = binary.LittleEndian.AppendUint32(body, 10)
	body = append(body, x...)
	// Raw alpha (which x/image allocates in full before reading it), then
	// the start of a lossy frame.
	body = append(body, "ALPH\x04\x00\x00\x00\x00\xff\xff\xff"...)
	body = append(body, "VP8 \x0a\x00\x00\x00\x00\x00\x00\x9d\x01\x2a\x00\x00\x00\x00"...)
	out := []byte("RIFF")
	out = binary.LittleEndian.AppendUint32(out, uint32(len(body)))
	return append(out, body...)
}

// TestBombs feeds images whose headers declare far more pixels than the
// budget allows. Each must be refused from its header: quickly and
// allocating almost nothing.
func TestBombs(t *testing.T) {
	// A real PNG bomb too: 12000×12000 grey pixels, all zero, compressed.
	var real bytes.Buffer
	zeros := image.NewGray(image.Rect(0, 0, 12000, 12000))
	if err := png.Encode(&real, zeros); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		data []byte
	}{
		{"png 100000×100000 RGBA", pngBomb(100000, 100000, 8, 6)},
		{"png 20000×20000 grey", pngBomb(20000, 20000, 8, 0)},
		{"png 10000×10000 16-bit RGBA", pngBomb(10000, 10000, 16, 6)},
		{"png 12000×12000 zeros", real.Bytes()},
		{"gif 65535×65535", gifBomb(65535, 65535)},
		{"gif 9000×9000", gifBomb(9000, 9000)},
		{"jpeg 65500×65500", jpegBomb(65500, 65500)},
		{"jpeg 12000×9000", jpegBomb(12000, 9000)},
		{"webp 30000×30000", webpBomb(30000, 30000)},
		{"webp 16383×16383", webpBomb(16383, 16383)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(c.data) > MaxBytes {
				t.Fatalf("bomb of %d bytes", len(c.data))
			}
			// Refused cheaply: before decoding, so with almost nothing
			// allocated. (Bytes, not wall time, which shared machines and
			// the race detector make unreliable.)
			var err error
			n := allocated(func() { _, err = Scan(c.data, nil) })
			if !errors.Is(err, ErrTooManyPixels) || !errors.Is(err, ErrTooLarge) {
				t.Errorf("err = %v, want ErrTooManyPixels", err)
			}
			if n > 1<<20 {
				t.Errorf("allocated %d bytes refusing it", n)
			}
		})
	}
}

// TestSizeLimit checks the 4 MiB limit.
func TestSizeLimit(t *testing.T) {
	big := make([]byte, MaxBytes+1)
	copy(big, "\x89PNG\r\n\x1a\n")
	if _, err := Scan(big, nil); !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrTooManyPixels) {
		t.Errorf("Scan of MaxBytes+1: %v, want ErrTooLarge", err)
	}
}

// maxSide is the side of the largest square image of the kind hdr makes
// that the budget admits.
func maxSide(f format, hdr func(side int) []byte) int {
	lo, hi := 64, 20000
	for lo < hi {
		mid := (lo + hi + 1) / 2
		c, err := decodeCost(f, hdr(mid), mid, mid)
		if err == nil && c+workCost(mid, mid) <= Budget {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// busyImage is a w×h picture with no QR code but much for the scanner to
// chew on: text-like blocks, and lone finder-pattern look-alikes of small
// modules, which send it to zoom and the other last resorts.
func busyImage(w, h int) *image.RGBA {
	r := rand.New(rand.NewPCG(1, 2))
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	fill(img, img.Bounds(), white)
	for range w * h / 4000 {
		x, y := r.IntN(w), r.IntN(h)
		fill(img, image.Rect(x, y, x+4+r.IntN(40), y+3+r.IntN(10)), ink)
	}
	for k := range 40 {
		x, y := r.IntN(w-40), r.IntN(h-40)
		m := 2 + k%3
		fill(img, image.Rect(x, y, x+7*m, y+7*m), ink)
		fill(img, image.Rect(x+m, y+m, x+6*m, y+6*m), white)
		fill(img, image.Rect(x+2*m, y+2*m, x+5*m, y+5*m), ink)
	}
	return img
}

// TestMemoryBudget scans, in each format, the largest images the budget
// admits (by the header estimate) and the largest scanned at full
// resolution, with no QR code in them so that every strategy runs, and
// checks that all Scan allocates stays within Budget.
func TestMemoryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	jpegHdr := func(side int) []byte { return jpegBomb(uint16(side), uint16(side)) }
	pngHdr := func(side int) []byte { return pngBomb(uint32(side), uint32(side), 8, 6) }
	gifHdr := func(side int) []byte { return gifBomb(uint16(side), uint16(side)) }
	type kind struct {
		name   string
		f      format
		hdr    func(int) []byte
		encode func(*image.RGBA) ([]byte, error)
	}
	kinds := []kind{
		{"jpeg", formatJPEG, jpegHdr, func(m *image.RGBA) ([]byte, error) {
			var b bytes.Buffer
			err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 85})
			return b.Bytes(), err
		}},
		{"png", formatPNG, pngHdr, func(m *image.RGBA) ([]byte, error) {
			// NRGBA, so the decoder allocates the 4 bytes a pixel of the estimate.
			n := image.NewNRGBA(m.Bounds())
			copy(n.Pix, m.Pix)
			n.Pix[3] = 254
			var b bytes.Buffer
			err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&b, n)
			return b.Bytes(), err
		}},
		{"gif", formatGIF, gifHdr, func(m *image.RGBA) ([]byte, error) {
			p := image.NewPaletted(m.Bounds(), color.Palette{color.Black, color.White})
			for i := range p.Pix {
				if m.Pix[4*i] > 128 {
					p.Pix[i] = 1
				}
			}
			var b bytes.Buffer
			err := gif.Encode(&b, p, nil)
			return b.Bytes(), err
		}},
	}
	if haveCWebP() {
		kinds = append(kinds, kind{"webp", formatWebP, func(side int) []byte { return webpLossyHeader }, func(m *image.RGBA) ([]byte, error) {
			return cwebp(m, 80)
		}})
	}
	fullSide := 1
	for (fullSide+1)*(fullSide+1) <= maxWorkPixels {
		fullSide++
	}
	for _, k := range kinds {
		for _, side := range []int{maxSide(k.f, k.hdr), min(fullSide, maxSide(k.f, k.hdr))} {
			t.Run(k.name+"-"+strconv.Itoa(side), func(t *testing.T) {
				data, err := k.encode(busyImage(side, side))
				if err != nil {
					t.Fatal(err)
				}
				if len(data) > MaxBytes {
					t.Skipf("%d bytes", len(data))
				}
				var got error
				start := time.Now()
				n := allocated(func() { _, got = Scan(data, nil) })
				t.Logf("%s %d×%d: %d bytes, allocated %.1f MiB in %v: %v", k.name, side, side, len(data), float64(n)/(1<<20), time.Since(start).Round(time.Millisecond), got)
				if !errors.Is(got, ErrNoQR) {
					t.Errorf("err = %v, want ErrNoQR", got)
				}
				if n > Budget {
					t.Errorf("allocated %d bytes, over the budget of %d", n, Budget)
				}
			})
		}
	}
}

// webpLossyHeader stands for any simple lossy WebP file in maxSide: the
// estimate reads only its chunk name.
var webpLossyHeader = []byte("RIFF\x00\x00\x00\x00WEBPVP8 \x00\x00\x00\x00")

// TestJPEGWalkedAsDecoded: the estimate reads a JPEG's markers as the
// decoder does. "FF 00" before a frame header is data the decoder skips,
// not a segment: a crafted one cannot hide the real frame header behind a
// small one in a comment. And a file with more scans than any encoder
// writes is refused from its markers: each scan of a progressive file
// passes over every block, so thousands of empty ones would keep a decode
// busy for minutes.
func TestJPEGWalkedAsDecoded(t *testing.T) {
	// A progressive YCbCr 4:2:0 frame of 6000×6000: its coefficients alone
	// are 270 MB.
	real := jpegBomb(6000, 6000)
	real[3] = 0xc2
	if _, err := Check(real); !errors.Is(err, ErrTooManyPixels) {
		t.Fatalf("the real frame: %v, want ErrTooManyPixels", err)
	}
	fake := []byte{0xff, 0xc0, 0, 11, 8, 0, 1, 0, 1, 1, 1, 0x11, 0} // SOF0: 1×1, one component
	crafted := append([]byte{0xff, 0xd8, 0xff, 0x00, 0x00, 0x06, 0xff, 0xfe, 0x00, byte(2 + len(fake))}, fake...)
	crafted = append(crafted, real[2:]...)
	if _, err := Check(crafted); !errors.Is(err, ErrTooManyPixels) {
		t.Errorf("behind a fake frame header in a comment: %v, want ErrTooManyPixels", err)
	}

	// Scans: the header of a small baseline file, then n start-of-scan
	// segments with a byte of data each.
	small := jpegBomb(64, 64)
	sos := bytes.Index(small, []byte{0xff, 0xda})
	scans := func(n int) []byte {
		b := append([]byte(nil), small[:sos]...)
		for range n {
			b = append(b, small[sos:sos+14]...)
			b = append(b, 0x00, 0xff, 0x00, 0xff, 0xd3) // data, a stuffed FF, a restart marker
		}
		return append(b, 0xff, 0xd9)
	}
	if _, err := Check(scans(maxJPEGScans)); err != nil {
		t.Errorf("%d scans: %v", maxJPEGScans, err)
	}
	if _, err := Check(scans(maxJPEGScans + 1)); !errors.Is(err, ErrFormat) {
		t.Errorf("%d scans: %v, want ErrFormat", maxJPEGScans+1, err)
	}
}

// TestPNGRowsCounted: the estimate of a very wide PNG counts the two rows
// the decoder keeps as the file stores them, which dominate when the
// image is one pixel high.
func TestPNGRowsCounted(t *testing.T) {
	for _, c := range []struct {
		w            uint32
		depth, ctype byte
		rowBytes     int64
	}{{7_800_000, 16, 6, 1 + 8*7_800_000}, {62_000_000, 8, 0, 1 + 62_000_000}, {1000, 1, 0, 1 + 125}} {
		img := pngBomb(c.w, 1, c.depth, c.ctype)
		cost, err := decodeCost(formatPNG, img, int(c.w), 1)
		if err != nil {
			t.Fatal(err)
		}
		if cost < 2*c.rowBytes {
			t.Errorf("%d×1, depth %d, colour type %d: estimate %d, below the decoder's two rows of %d", c.w, c.depth, c.ctype, cost, c.rowBytes)
		}
	}
	if _, err := Check(pngBomb(62_000_000, 1, 8, 0)); !errors.Is(err, ErrTooManyPixels) {
		t.Errorf("62,000,000×1 grey: %v, want ErrTooManyPixels (two rows are 124 MB)", err)
	}
}

// TestWebPChunkPastEnd: a lossy image or alpha chunk that declares more
// bytes than the file holds is refused at Check. The decoder allocates
// what a VP8 chunk declares before reading it: a 70-byte file could
// declare 128 MiB of partitions against a 4 MiB estimate.
func TestWebPChunkPastEnd(t *testing.T) {
	for _, c := range []struct{ file, chunk string }{{"slip-lossy.webp", "VP8 "}, {"slip-alpha.webp", "ALPH"}} {
		img, err := os.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Check(img); err != nil {
			t.Fatalf("%s as it is: %v", c.file, err)
		}
		i := bytes.Index(img, []byte(c.chunk))
		if i < 0 {
			t.Fatalf("%s has no %q chunk", c.file, c.chunk)
		}
		binary.LittleEndian.PutUint32(img[i+4:], 1<<27)
		binary.LittleEndian.PutUint32(img[4:], uint32(i+1<<27)) // and the RIFF size to match: the chunk ends at i+8+1<<27
		var err2 error
		n := allocated(func() { _, err2 = Check(img) })
		if !errors.Is(err2, ErrFormat) {
			t.Errorf("%s with its %q chunk declaring 128 MiB: %v, want ErrFormat", c.file, c.chunk, err2)
		}
		if n > 1<<20 {
			t.Errorf("%s: allocated %d bytes refusing it", c.file, n)
		}
	}
}

// TestJPEGLastAPP0Decides: as in Go's decoder, a JFIF APP0 followed by
// another APP0 is no JFIF file, so with Adobe transform 0 the image is
// converted to RGBA: the estimate counts those 4 bytes a pixel as it does
// for a file without the JFIF APP0 (an image of 2.5 times its estimate).
func TestJPEGLastAPP0Decides(t *testing.T) {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewRGBA(image.Rect(0, 0, 512, 512)), nil); err != nil {
		t.Fatal(err)
	}
	plain := b.Bytes()
	seg := func(m byte, data string) []byte {
		return append([]byte{0xff, m, byte((len(data) + 2) >> 8), byte(len(data) + 2)}, data...)
	}
	// Go's encoder writes no APP0; SOI, then the segments given.
	with := func(segs ...[]byte) []byte {
		out := append([]byte(nil), plain[:2]...)
		for _, s := range segs {
			out = append(out, s...)
		}
		return append(out, plain[2:]...)
	}
	jfif, jfxx := seg(0xe0, "JFIF\x00\x01\x02\x00\x00\x01\x00\x01\x00\x00"), seg(0xe0, "JFXX\x00\x10")
	adobe := seg(0xee, "Adobe\x00\x64\x00\x00\x00\x00\x00") // transform 0
	cost := func(img []byte) int64 {
		t.Helper()
		c, err := Check(img)
		if err != nil {
			t.Fatal(err)
		}
		return c.Cost
	}
	if got, want := cost(with(jfif, jfxx, adobe)), cost(with(jfxx, adobe)); got != want {
		t.Errorf("JFIF then JFXX APP0, Adobe 0: cost %d, want %d as without the JFIF APP0 (converted to RGBA)", got, want)
	}
	if cost(with(jfif, adobe)) >= cost(with(jfxx, adobe)) {
		t.Error("a JFIF file with Adobe 0 (YCbCr, no conversion) costs as much as one converted to RGBA")
	}
}
