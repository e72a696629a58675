package scenario

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"mime/multipart"
	"net/textproto"
	"sync"

	"github.com/skip2/go-qrcode"
)

// Image is one slip picture of the corpus, ready to upload.
type Image struct {
	Name    string // size class and format, e.g. "720x1280.jpg"
	Payload string // the slip payload its QR code holds
	Bytes   int    // size of the image file
	// Body and ContentType are the multipart form that uploads it in the
	// part the API version expects.
	Body        []byte
	ContentType string
}

// imageClass is a size and format of slip pictures as phones send them: a
// compressed photo or a full-resolution screenshot.
type imageClass struct {
	w, h, module int
	png          bool
}

var imageClasses = []imageClass{
	{480, 854, 5, false},    // a downscaled chat-app photo
	{720, 1280, 7, false},   // a common phone screenshot, re-encoded as JPEG
	{1080, 2340, 9, true},   // a full-resolution PNG screenshot
	{1080, 1920, 10, false}, // a large JPEG photo
}

// Corpus makes n slip pictures of distinct new slips of the run (QR code of
// a bank slip payload on a drawn slip, sizes and formats as phones send
// them), each wrapped as a multipart upload in part field. Pictures are
// made in parallel; n of a few dozen takes about a second.
func Corpus(run string, n int, field string) ([]Image, error) {
	out := make([]Image, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i], errs[i] = makeImage(run, i, imageClasses[i%len(imageClasses)], field)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func makeImage(run string, i int, c imageClass, field string) (Image, error) {
	payload := bankPayload(run, 'I', uint64(i))
	img := drawSlip(payload, c, uint64(i))
	var enc bytes.Buffer
	name := fmt.Sprintf("%dx%d", c.w, c.h)
	var err error
	if c.png {
		name += ".png"
		err = png.Encode(&enc, img)
	} else {
		name += ".jpg"
		err = jpeg.Encode(&enc, img, &jpeg.Options{Quality: 85})
	}
	if err != nil {
		return Image{}, err
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, field, "slip-"+name))
	if c.png {
		h.Set("Content-Type", "image/png")
	} else {
		h.Set("Content-Type", "image/jpeg")
	}
	part, err := mw.CreatePart(h)
	if err != nil {
		return Image{}, err
	}
	part.Write(enc.Bytes())
	if err := mw.Close(); err != nil {
		return Image{}, err
	}
	return Image{Name: name, Payload: payload, Bytes: enc.Len(), Body: body.Bytes(), ContentType: mw.FormDataContentType()}, nil
}

// drawSlip draws a transfer slip as a banking app shows it: a tinted
// background, a card with lines of text-like marks and the QR code, with
// some noise (a photo's, or a screenshot's picture banner) so that
// compression sees what it sees in real pictures.
func drawSlip(payload string, c imageClass, seed uint64) *image.RGBA {
	r := rand.New(rand.NewPCG(seed, 77))
	img := image.NewRGBA(image.Rect(0, 0, c.w, c.h))
	top := color.RGBA{uint8(20 + r.IntN(60)), uint8(120 + r.IntN(80)), uint8(60 + r.IntN(120)), 255}
	for y := range c.h {
		t := float64(y) / float64(c.h)
		col := color.RGBA{lerp(top.R, 245, t), lerp(top.G, 246, t), lerp(top.B, 248, t), 255}
		for x := range c.w {
			img.SetRGBA(x, y, col)
		}
	}
	m := c.w / 18
	card := image.Rect(m, c.h/8, c.w-m, c.h-c.h/10)
	fillRect(img, card, color.RGBA{255, 255, 255, 255})
	// Text lines: runs of dark marks of word-like widths.
	lineH := max(c.h/70, 8)
	y := card.Min.Y + lineH
	for line := 0; y < card.Min.Y+card.Dy()/2-lineH; line++ {
		x := card.Min.X + m/2
		for x < card.Max.X-m && r.IntN(12) != 0 {
			w := lineH/2 + r.IntN(lineH*3)
			ink := uint8(30 + r.IntN(60))
			fillRect(img, image.Rect(x, y, min(x+w, card.Max.X-m/2), y+lineH*2/3), color.RGBA{ink, ink, ink + 10, 255})
			x += w + lineH/2
		}
		y += lineH * 2
	}
	// The QR code, centred in the lower half of the card, with its quiet zone.
	q, err := qrcode.New(payload, qrcode.Medium)
	if err != nil {
		panic(err) // a slip payload always fits a QR code
	}
	q.DisableBorder = true
	bm := q.Bitmap()
	size := len(bm) * c.module
	x0 := (c.w - size) / 2
	y0 := card.Min.Y + card.Dy()/2 + (card.Dy()/2-size)/2
	for my, row := range bm {
		for mx, dark := range row {
			if dark {
				fillRect(img, image.Rect(x0+mx*c.module, y0+my*c.module, x0+(mx+1)*c.module, y0+(my+1)*c.module), color.RGBA{16, 16, 20, 255})
			}
		}
	}
	// A photo's sensor noise, light enough to keep the code readable; a
	// screenshot is flat but for the app's picture banner at the top.
	noisy := len(img.Pix)
	if c.png {
		noisy = img.PixOffset(0, c.h/6)
	}
	for i := 0; i < noisy; i += 4 {
		n := uint8(r.IntN(7))
		for k := range 3 {
			img.Pix[i+k] = sat(img.Pix[i+k], n)
		}
	}
	return img
}

func lerp(a, b uint8, t float64) uint8 { return uint8(float64(a)*(1-t) + float64(b)*t) }

func sat(v, n uint8) uint8 {
	if v > 128 {
		return v - n
	}
	return v + n
}

func fillRect(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}
