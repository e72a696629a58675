package scenario

import (
	"bytes"
	"hash/adler32"
	"image"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"testing"
	"time"
)

// filePart returns the file inside a one-part multipart body.
func filePart(body []byte) []byte {
	i := bytes.Index(body, []byte("\r\n\r\n"))
	j := bytes.LastIndex(body, []byte("\r\n--"))
	return body[i+4 : j]
}

// TestPicturesSpliced checks each size class's spliced file against the
// whole picture: a PNG decodes to exactly its pixels, a JPEG to exactly
// what image/jpeg makes of the whole picture (restart intervals change
// the entropy coding, not the coefficients).
func TestPicturesSpliced(t *testing.T) {
	p, err := SlipPictures()
	if err != nil {
		t.Fatal(err)
	}
	run := RunID()
	for i, c := range p.classes {
		payload := bankPayload(run, 'I', uint64(1000+i))
		t0 := time.Now()
		body, _, err := p.Append(nil, i, payload)
		took := time.Since(t0)
		if err != nil {
			t.Fatal(err)
		}
		file, name, size := filePart(body), c.name, len(filePart(body))
		bm, _ := codeBitmap(payload)
		at, _ := c.place(bm)
		want := c.draw(bm, at)
		var got image.Image
		if c.png {
			got, err = png.Decode(bytes.NewReader(file))
		} else {
			var whole bytes.Buffer
			jpeg.Encode(&whole, want, &jpeg.Options{Quality: jpegQuality})
			want1, _ := jpeg.Decode(&whole)
			want = toRGBA(want1)
			got, err = jpeg.Decode(bytes.NewReader(file))
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(toRGBA(got).Pix, want.Pix) {
			t.Errorf("%s: the spliced picture differs from the whole one", name)
		}
		t.Logf("%s: %d KiB, made in %v", name, size>>10, took)
	}
}

// draw returns the whole picture of code bm at at: what the spliced file
// holds.
func (c *picClass) draw(bm [][]bool, at image.Point) *image.RGBA {
	img := image.NewRGBA(c.light.Rect)
	copy(img.Pix, c.light.Pix)
	c.paint(img, bm, at)
	return img
}

func toRGBA(m image.Image) *image.RGBA {
	if r, ok := m.(*image.RGBA); ok {
		return r
	}
	b := m.Bounds()
	out := image.NewRGBA(b)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			out.Set(x, y, m.At(x, y))
		}
	}
	return out
}

func TestAdler32Combine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 65520, 65521, 200_000} {
		a, b := make([]byte, r.IntN(70_000)), make([]byte, n)
		for i := range a {
			a[i] = byte(r.Uint32())
		}
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if got, want := adler32Combine(adler32.Checksum(a), adler32.Checksum(b), int64(n)), adler32.Checksum(append(a, b...)); got != want {
			t.Errorf("combine with %d bytes: %08x, want %08x", n, got, want)
		}
	}
}

// BenchmarkPicture is the generator's cost of one picture of a new slip,
// each size class in turn.
func BenchmarkPicture(b *testing.B) {
	p, err := SlipPictures()
	if err != nil {
		b.Fatal(err)
	}
	run := RunID()
	var buf []byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf, _, err = p.Append(buf[:0], i, bankPayload(run, 'I', uint64(i)))
		if err != nil {
			b.Fatal(err)
		}
	}
}
