package qrscan

import (
	"bytes"
	"image"
	"image/gif"
	"testing"

	"github.com/skip2/go-qrcode"
)

// partialGIF is a GIF whose logical screen is w×h and whose only frame,
// placed at r, is a QR code of text without its quiet zone, so that only
// the screen around the frame gives the code one.
func partialGIF(t *testing.T, text string, w, h int, r image.Rectangle) []byte {
	t.Helper()
	q, err := qrcode.New(text, qrcode.Medium)
	if err != nil {
		t.Fatal(err)
	}
	q.DisableBorder = true
	code := q.Image(r.Dx()).(*image.Paletted)
	if code.Bounds().Size() != r.Size() {
		t.Fatalf("code of %v, want %v", code.Bounds().Size(), r.Size())
	}
	frame := image.NewPaletted(r, code.Palette)
	for y := range r.Dy() {
		copy(frame.Pix[frame.PixOffset(r.Min.X, r.Min.Y+y):], code.Pix[code.PixOffset(0, y):code.PixOffset(r.Dx(), y)])
	}
	var buf bytes.Buffer
	err = gif.EncodeAll(&buf, &gif.GIF{Image: []*image.Paletted{frame}, Delay: []int{0},
		Config: image.Config{ColorModel: code.Palette, Width: w, Height: h}})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestGIFFrameSmallerThanScreen: a GIF whose first frame covers only part
// of its logical screen is a valid image; its code is found wherever the
// frame sits, and scanning it allocates no more than Check reckoned.
func TestGIFFrameSmallerThanScreen(t *testing.T) {
	const text = "slip in a GIF frame"
	for _, r := range []image.Rectangle{
		image.Rect(50, 50, 150, 150), // in the middle
		image.Rect(0, 0, 100, 100),   // a corner: two edges of the screen
		image.Rect(100, 75, 200, 175),
		image.Rect(0, 0, 200, 200), // the whole screen: the common case
	} {
		img := partialGIF(t, text, 200, 200, r)
		if cfg, err := gif.DecodeConfig(bytes.NewReader(img)); err != nil || cfg.Width != 200 || cfg.Height != 200 {
			t.Fatalf("the GIF's screen: %+v %v", cfg, err)
		}
		c, err := Check(img)
		if err != nil {
			t.Fatalf("frame %v: Check: %v", r, err)
		}
		var p string
		got := allocated(func() { p, err = c.Scan(nil) })
		if p != text || err != nil {
			t.Errorf("frame %v on a 200×200 screen: %q, %v; want %q", r, p, err, text)
		}
		if got > uint64(c.Cost) {
			t.Errorf("frame %v: allocated %d bytes, Check reckoned %d", r, got, c.Cost)
		}
	}
}
