package scenario

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"mime/multipart"
	"net/textproto"
	"sync"

	"github.com/skip2/go-qrcode"
)

// Pictures of new slips, one per request.
//
// A slip picture is a drawn slip (background, card, lines of text, a
// photo's noise) with the slip's QR code on it. Drawing and encoding a
// whole picture costs 15 to 200 ms, as much as core spends decoding it, so
// a generator doing that per request would share the limit with the stack
// it measures, and a fixed corpus would repeat its slips (duplicates are
// kept per service, so every upload after the first few would take the
// duplicate path: no bank lookup, no quota written). Instead each size
// class is drawn and encoded once without a code, in pieces that can be
// replaced, and a picture of a new slip re-encodes only the pieces its code
// covers and splices them between the stored ones (about 1 to 4 ms):
//
//   - JPEG: the picture is encoded with a restart interval of a few MCUs
//     (16×16 pixel blocks), so each interval is entropy-coded on its own
//     (DC predictors reset and bits byte-aligned at each RSTn marker); an
//     interval is replaced by encoding just its pixels with image/jpeg and
//     taking that scan's data. Decoded, the spliced file is pixel for pixel
//     what image/jpeg makes of the whole picture.
//   - PNG: the rows a code can cover (the band) are filtered with Up and
//     deflated as a stream of their own, between the streams of the rows
//     above (ending in a sync flush) and below (ending the data), each in
//     IDAT chunks of its own; the zlib checksum is combined from the
//     parts'.

// imageClass is a size and format of slip pictures as phones send them: a
// compressed photo or a full-resolution screenshot, some with the noise
// of a dim room or a dusty lens.
type imageClass struct {
	w, h, module int
	png          bool
	noise        float64 // deviation of a dim-light photo's sensor noise, in levels
	impulses     float64 // share of pixels turned black or white
}

var imageClasses = []imageClass{
	{480, 854, 5, false, 0, 0},     // a downscaled chat-app photo
	{720, 1280, 7, false, 0, 0},    // a common phone screenshot, re-encoded as JPEG
	{1080, 2340, 9, true, 0, 0},    // a full-resolution PNG screenshot
	{1080, 1920, 10, false, 0, 0},  // a large JPEG photo
	{720, 1280, 6, false, 24, 0},   // a photo taken in a dim room: sensor noise
	{1080, 2340, 9, true, 0, 0.03}, // a screenshot of a fax or a dusty scan: impulse noise
}

const jpegQuality = 85

// ink is the colour of a code's dark modules.
var ink = color.RGBA{16, 16, 20, 255}

// Pictures makes upload bodies of slip pictures, each holding the payload
// it is given, in the size classes in turn. It is safe for concurrent use.
type Pictures struct {
	classes []*picClass
}

// picClass is one size class, drawn and encoded once without a code.
type picClass struct {
	imageClass
	name        string // "720x1280.jpg"
	contentType string // the multipart body's
	// prefix and suffix wrap the file in the multipart body.
	prefix, suffix []byte
	// light is the slip without a code; dark holds, over band, the pixels
	// of a dark module there (ink under the same noise as light's).
	light *image.RGBA
	dark  *image.RGBA
	// band is where codes go: the largest code and a module of white
	// around it, centred in the lower half of the card.
	band image.Rectangle

	// JPEG: head is the file up to the scan data (SOI, DQT, SOF0, DHT,
	// DRI, SOS); segs the scan data of each restart interval of light, in
	// raster order; ri the MCUs per interval, perRow the intervals of an
	// MCU row.
	head   []byte
	segs   [][]byte
	ri     int
	perRow int

	// PNG: start is the signature, IHDR and the IDAT of the zlib header
	// and the rows above the band; below the IDAT of the rows below it; the
	// adler32 sums and lengths of those rows' filtered bytes combine with
	// the band's into the zlib checksum.
	start, below         []byte
	adlerAbove, adlerEnd uint32
	lenEnd               int64

	scratch sync.Pool // *picScratch
}

// picScratch is one picture's working memory, reused.
type picScratch struct {
	band  *image.RGBA // JPEG: the intervals a code covers
	rows  []byte      // PNG: the band's filtered rows
	cur   []byte      // PNG: a raw RGB row and the one above
	prev  []byte
	enc   sliceWriter // an encoded interval, or the band's deflate stream
	flate *flateWriter
}

var (
	picturesOnce sync.Once
	pictures     *Pictures
	picturesErr  error
)

// SlipPictures returns the process's Pictures, made on first use (about a
// second: every class is drawn and encoded once).
func SlipPictures() (*Pictures, error) {
	picturesOnce.Do(func() { pictures, picturesErr = newPictures() })
	return pictures, picturesErr
}

func newPictures() (*Pictures, error) {
	p := &Pictures{classes: make([]*picClass, len(imageClasses))}
	errs := make([]error, len(imageClasses))
	var wg sync.WaitGroup
	for i, c := range imageClasses {
		wg.Go(func() { p.classes[i], errs[i] = newPicClass(c, uint64(i)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// Classes returns how many size classes there are.
func (p *Pictures) Classes() int { return len(p.classes) }

// Append appends to dst the multipart body that uploads, in part "image",
// a picture of size class i (mod Classes) whose code holds payload, and
// returns it with the body's content type.
func (p *Pictures) Append(dst []byte, i int, payload string) (body []byte, contentType string, err error) {
	c := p.classes[i%len(p.classes)]
	bm, err := codeBitmap(payload)
	if err != nil {
		return dst, "", err
	}
	at, err := c.place(bm)
	if err != nil {
		return dst, "", err
	}
	dst = append(dst, c.prefix...)
	sc, _ := c.scratch.Get().(*picScratch)
	if sc == nil {
		sc = &picScratch{}
	}
	defer c.scratch.Put(sc)
	if c.png {
		dst, err = c.appendPNG(dst, sc, bm, at)
	} else {
		dst, err = c.appendJPEG(dst, sc, bm, at)
	}
	if err != nil {
		return dst, "", err
	}
	return append(dst, c.suffix...), c.contentType, nil
}

// codeBitmap returns payload's QR code, without its quiet zone.
func codeBitmap(payload string) ([][]bool, error) {
	q, err := qrcode.New(payload, qrcode.Medium)
	if err != nil {
		return nil, err
	}
	q.DisableBorder = true
	return q.Bitmap(), nil
}

// place returns where code bm goes: centred in the band.
func (c *picClass) place(bm [][]bool) (image.Point, error) {
	size := len(bm) * c.module
	if size+2*c.module > c.band.Dx() {
		return image.Point{}, fmt.Errorf("scenario: a code of %d modules does not fit the %s picture's band", len(bm), c.name)
	}
	return c.band.Min.Add(image.Pt((c.band.Dx()-size)/2, (c.band.Dy()-size)/2)), nil
}

// paint copies the dark modules of code bm at at from c.dark into img,
// where img covers them.
func (c *picClass) paint(img *image.RGBA, bm [][]bool, at image.Point) {
	m := c.module
	for my, row := range bm {
		for mx, on := range row {
			if !on {
				continue
			}
			r := image.Rect(at.X+mx*m, at.Y+my*m, at.X+(mx+1)*m, at.Y+(my+1)*m).Intersect(img.Rect)
			for y := r.Min.Y; y < r.Max.Y; y++ {
				copy(img.Pix[img.PixOffset(r.Min.X, y):img.PixOffset(r.Max.X, y)], c.dark.Pix[c.dark.PixOffset(r.Min.X, y):c.dark.PixOffset(r.Max.X, y)])
			}
		}
	}
}

// newPicClass draws class c's slip without a code and encodes it in
// replaceable pieces.
func newPicClass(c imageClass, seed uint64) (*picClass, error) {
	maxCode, err := codeBitmap(bankPayload("ZZZZZZZZ", 'I', math.MaxUint64))
	if err != nil {
		return nil, err
	}
	pc := &picClass{imageClass: c, name: fmt.Sprintf("%dx%d", c.w, c.h)}
	switch {
	case c.noise != 0:
		pc.name += "-noisy"
	case c.impulses != 0:
		pc.name += "-impulses"
	}
	pc.drawBase(seed, (len(maxCode)+2)*c.module)
	mimeType := "image/jpeg"
	if c.png {
		pc.name += ".png"
		mimeType = "image/png"
		err = pc.encodePNG()
	} else {
		pc.name += ".jpg"
		err = pc.encodeJPEG()
	}
	if err != nil {
		return nil, fmt.Errorf("scenario: picture %s: %w", pc.name, err)
	}
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	mw.SetBoundary("slipbench" + pc.name)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="image"; filename=%q`, "slip-"+pc.name))
	h.Set("Content-Type", mimeType)
	if _, err := mw.CreatePart(h); err != nil {
		return nil, err
	}
	pc.prefix = bytes.Clone(b.Bytes())
	b.Reset()
	if err := mw.Close(); err != nil {
		return nil, err
	}
	pc.suffix, pc.contentType = bytes.Clone(b.Bytes()), mw.FormDataContentType()
	return pc, nil
}

// drawBase draws the slip as a banking app shows it, without its code: a
// tinted background, a card with lines of text-like marks, a white band of
// bandSize pixels square for the code, and some noise (a photo's, or a
// screenshot's picture banner) so that compression sees what it sees in
// real pictures. dark gets, over the band, ink under the same noise.
func (c *picClass) drawBase(seed uint64, bandSize int) {
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
	for y < card.Min.Y+card.Dy()/2-lineH {
		x := card.Min.X + m/2
		for x < card.Max.X-m && r.IntN(12) != 0 {
			w := lineH/2 + r.IntN(lineH*3)
			shade := uint8(30 + r.IntN(60))
			fillRect(img, image.Rect(x, y, min(x+w, card.Max.X-m/2), y+lineH*2/3), color.RGBA{shade, shade, shade + 10, 255})
			x += w + lineH/2
		}
		y += lineH * 2
	}
	// The code's band, centred in the lower half of the card.
	x0 := (c.w - bandSize) / 2
	y0 := card.Min.Y + card.Dy()/2 + (card.Dy()/2-bandSize)/2
	c.band = image.Rect(x0, y0, x0+bandSize, y0+bandSize)
	c.dark = image.NewRGBA(c.band)
	fillRect(c.dark, c.band, ink)
	// A photo's sensor noise, light enough to keep a code readable; a
	// screenshot is flat but for the app's picture banner at the top.
	noisy := c.h
	if c.png {
		noisy = c.h / 6
	}
	for y := range noisy {
		for x := range c.w {
			n := uint8(r.IntN(7))
			i := img.PixOffset(x, y)
			for k := range 3 {
				img.Pix[i+k] = sat(img.Pix[i+k], n)
			}
			if (image.Point{x, y}).In(c.band) {
				j := c.dark.PixOffset(x, y)
				for k := range 3 {
					c.dark.Pix[j+k] = sat(c.dark.Pix[j+k], n)
				}
			}
		}
	}
	c.degrade(r, img)
	c.light = img
}

// degrade adds the class's sensor noise and impulses to img and, where
// they cover the band, the same to dark: a pixel of a picture is light's
// or dark's, so both carry the noise of its place.
func (c *picClass) degrade(r *rand.Rand, img *image.RGBA) {
	if c.noise == 0 && c.impulses == 0 {
		return
	}
	for y := range c.h {
		for x := range c.w {
			i := img.PixOffset(x, y)
			var d float64
			var impulse bool
			var v uint8
			if c.noise != 0 {
				d = r.NormFloat64() * c.noise
			}
			if c.impulses != 0 && r.Float64() < c.impulses {
				impulse, v = true, uint8(255*r.IntN(2))
			}
			set := func(p []byte) {
				for k := range 3 {
					if impulse {
						p[k] = v
					} else {
						p[k] = uint8(max(0, min(255, float64(p[k])+d+0.5)))
					}
				}
			}
			set(img.Pix[i : i+3])
			if (image.Point{x, y}).In(c.band) {
				j := c.dark.PixOffset(x, y)
				set(c.dark.Pix[j : j+3])
			}
		}
	}
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

// sliceWriter is the buffer image/jpeg writes into directly (it has
// Flush, so the encoder adds no bufio.Writer of its own).
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
func (w *sliceWriter) WriteByte(c byte) error      { w.b = append(w.b, c); return nil }
func (w *sliceWriter) Flush() error                { return nil }

// --- JPEG ---

// mcu is the side of image/jpeg's MCU for colour pictures (4:2:0).
const mcu = 16

// encodeJPEG stores the header and every restart interval of light.
func (c *picClass) encodeJPEG() error {
	mcusPerRow := (c.w + mcu - 1) / mcu
	// The smallest divisor of an MCU row from 4 MCUs up: intervals tile
	// each row, and few pixels are re-encoded beside a code.
	c.ri = mcusPerRow
	for d := 4; d < mcusPerRow; d++ {
		if mcusPerRow%d == 0 {
			c.ri = d
			break
		}
	}
	c.perRow = mcusPerRow / c.ri
	var w sliceWriter
	if err := jpeg.Encode(&w, c.light.SubImage(image.Rect(0, 0, c.w, c.h)), &jpeg.Options{Quality: jpegQuality}); err != nil {
		return err
	}
	sos, err := sosEnd(w.b)
	if err != nil {
		return err
	}
	// The header with a DRI segment before the SOS.
	dri := []byte{0xff, 0xdd, 0, 4, byte(c.ri >> 8), byte(c.ri)}
	start := bytes.LastIndex(w.b[:sos], []byte{0xff, 0xda})
	c.head = append(append(append([]byte(nil), w.b[:start]...), dri...), w.b[start:sos]...)
	rows := (c.h + mcu - 1) / mcu
	for row := range rows {
		for g := range c.perRow {
			seg, err := c.encodeInterval(&w, c.light, row, g)
			if err != nil {
				return err
			}
			c.segs = append(c.segs, bytes.Clone(seg))
		}
	}
	return nil
}

// interval returns the pixels of restart interval g of MCU row row.
func (c *picClass) interval(row, g int) image.Rectangle {
	x := g * c.ri * mcu
	return image.Rect(x, row*mcu, min(x+c.ri*mcu, c.w), min((row+1)*mcu, c.h))
}

// encodeInterval returns the scan data of interval (row, g) of img, which
// must cover it; it is valid until w is written again.
func (c *picClass) encodeInterval(w *sliceWriter, img *image.RGBA, row, g int) ([]byte, error) {
	w.b = w.b[:0]
	if err := jpeg.Encode(w, img.SubImage(c.interval(row, g)), &jpeg.Options{Quality: jpegQuality}); err != nil {
		return nil, err
	}
	sos, err := sosEnd(w.b)
	if err != nil {
		return nil, err
	}
	if len(w.b) < sos+2 || w.b[len(w.b)-2] != 0xff || w.b[len(w.b)-1] != 0xd9 {
		return nil, errors.New("jpeg: no EOI after the scan")
	}
	return w.b[sos : len(w.b)-2], nil
}

// sosEnd returns the offset of the scan data in a JPEG file: just after the
// SOS segment.
func sosEnd(b []byte) (int, error) {
	i := 2 // after SOI
	for i+4 <= len(b) {
		if b[i] != 0xff {
			return 0, errors.New("jpeg: no marker where one was due")
		}
		n := int(binary.BigEndian.Uint16(b[i+2:]))
		if b[i+1] == 0xda {
			return i + 2 + n, nil
		}
		i += 2 + n
	}
	return 0, errors.New("jpeg: no SOS")
}

// appendJPEG appends the JPEG file of code bm at at: the stored intervals,
// and those the code covers encoded again.
func (c *picClass) appendJPEG(dst []byte, sc *picScratch, bm [][]bool, at image.Point) ([]byte, error) {
	code := image.Rect(at.X, at.Y, at.X+len(bm)*c.module, at.Y+len(bm)*c.module)
	segW := c.ri * mcu
	r0, r1 := code.Min.Y/mcu, (code.Max.Y-1)/mcu
	g0, g1 := code.Min.X/segW, (code.Max.X-1)/segW
	area := c.interval(r0, g0).Union(c.interval(r1, g1))
	if sc.band == nil || sc.band.Rect != area {
		sc.band = image.NewRGBA(area)
	}
	for y := area.Min.Y; y < area.Max.Y; y++ {
		copy(sc.band.Pix[sc.band.PixOffset(area.Min.X, y):sc.band.PixOffset(area.Max.X, y)], c.light.Pix[c.light.PixOffset(area.Min.X, y):c.light.PixOffset(area.Max.X, y)])
	}
	c.paint(sc.band, bm, at)
	dst = append(dst, c.head...)
	for k, seg := range c.segs {
		if row, g := k/c.perRow, k%c.perRow; row >= r0 && row <= r1 && g >= g0 && g <= g1 {
			var err error
			if seg, err = c.encodeInterval(&sc.enc, sc.band, row, g); err != nil {
				return dst, err
			}
		}
		dst = append(dst, seg...)
		if k < len(c.segs)-1 {
			dst = append(dst, 0xff, 0xd0+byte(k%8)) // RSTn
		}
	}
	return append(dst, 0xff, 0xd9), nil
}

// --- PNG ---

// encodePNG stores the parts of the PNG file of light around the band.
func (c *picClass) encodePNG() error {
	rowLen := 1 + 3*c.w
	raw := func(y int, dst []byte) []byte { return rgbRow(dst[:0], c.light, y) }
	prev, cur := make([]byte, 3*c.w), make([]byte, 3*c.w)
	// filtered returns the filtered rows [y0, y1), each by the filter that
	// makes its bytes smallest, as image/png chooses.
	filtered := func(y0, y1 int) []byte {
		out := make([]byte, 0, (y1-y0)*rowLen)
		if y0 > 0 {
			prev = raw(y0-1, prev)
		} else {
			clear(prev)
		}
		for y := y0; y < y1; y++ {
			cur = raw(y, cur)
			out = appendFiltered(out, cur, prev)
			prev, cur = cur, prev
		}
		return out
	}
	above, below := filtered(0, c.band.Min.Y), filtered(c.band.Max.Y, c.h)
	c.adlerAbove, c.adlerEnd, c.lenEnd = adler32.Checksum(above), adler32.Checksum(below), int64(len(below))
	fw := newFlateWriter()
	var z sliceWriter
	z.b = append(z.b, 0x78, 0x9c) // zlib header: deflate, 32 KiB window, default level
	if err := fw.deflate(&z, above, false); err != nil {
		return err
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], uint32(c.w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(c.h))
	ihdr[8], ihdr[9] = 8, 2 // 8 bits a sample, RGB
	c.start = append([]byte("\x89PNG\r\n\x1a\n"), chunk(nil, "IHDR", ihdr)...)
	c.start = chunk(c.start, "IDAT", z.b)
	z.b = z.b[:0]
	if err := fw.deflate(&z, below, true); err != nil {
		return err
	}
	c.below = chunk(nil, "IDAT", z.b)
	return nil
}

// appendPNG appends the PNG file of code bm at at: the stored rows above
// and below the band, and the band's rows filtered and deflated again.
func (c *picClass) appendPNG(dst []byte, sc *picScratch, bm [][]bool, at image.Point) ([]byte, error) {
	if sc.flate == nil {
		sc.flate = newFlateWriter()
		sc.cur, sc.prev = make([]byte, 3*c.w), make([]byte, 3*c.w)
	}
	prev := rgbRow(sc.prev[:0], c.light, c.band.Min.Y-1)
	rows := sc.rows[:0]
	size := len(bm) * c.module
	for y := c.band.Min.Y; y < c.band.Max.Y; y++ {
		cur := rgbRow(sc.cur[:0], c.light, y)
		if my := y - at.Y; my >= 0 && my < size {
			for mx, on := range bm[my/c.module] {
				if on {
					x0 := at.X + mx*c.module
					rgbaToRGB(cur[3*x0:3*(x0+c.module)], c.dark.Pix[c.dark.PixOffset(x0, y):c.dark.PixOffset(x0+c.module, y)])
				}
			}
		}
		// Up: each byte less the one above it. Codes are runs of equal
		// rows, which this turns into zeros.
		rows = append(rows, 2)
		for i, v := range cur {
			rows = append(rows, v-prev[i])
		}
		sc.prev, sc.cur = cur, prev
		prev = cur
	}
	sc.rows = rows
	sc.enc.b = sc.enc.b[:0]
	if err := sc.flate.deflate(&sc.enc, rows, false); err != nil {
		return dst, err
	}
	sum := adler32Combine(adler32Combine(c.adlerAbove, adler32.Checksum(rows), int64(len(rows))), c.adlerEnd, c.lenEnd)
	dst = append(dst, c.start...)
	dst = chunk(dst, "IDAT", sc.enc.b)
	dst = append(dst, c.below...)
	dst = chunk(dst, "IDAT", binary.BigEndian.AppendUint32(nil, sum))
	return chunk(dst, "IEND", nil), nil
}

// flateWriter deflates parts of a zlib stream, each on its own: one
// compressor, reset for each part, so a part's matches stay within it and
// the parts can be joined in any order they were made.
type flateWriter struct{ w *flate.Writer }

func newFlateWriter() *flateWriter {
	w, _ := flate.NewWriter(nil, flate.DefaultCompression) // a valid level cannot fail
	return &flateWriter{w: w}
}

// deflate appends data to dst as deflate blocks: ending in a sync flush (an
// empty stored block, byte-aligned) so more parts may follow, or, when
// final, in the stream's last block.
func (f *flateWriter) deflate(dst *sliceWriter, data []byte, final bool) error {
	f.w.Reset(dst)
	if _, err := f.w.Write(data); err != nil {
		return err
	}
	if final {
		return f.w.Close()
	}
	return f.w.Flush()
}

// rgbRow appends row y of img as RGB bytes.
func rgbRow(dst []byte, img *image.RGBA, y int) []byte {
	n := len(dst)
	dst = append(dst, make([]byte, 3*img.Rect.Dx())...)
	rgbaToRGB(dst[n:], img.Pix[img.PixOffset(img.Rect.Min.X, y):img.PixOffset(img.Rect.Max.X, y)])
	return dst
}

func rgbaToRGB(dst, src []byte) {
	for i, j := 0, 0; j+3 < len(src); i, j = i+3, j+4 {
		dst[i], dst[i+1], dst[i+2] = src[j], src[j+1], src[j+2]
	}
}

// appendFiltered appends row cur, filtered against prev (the row above),
// with the filter that makes the sum of its bytes' magnitudes smallest.
func appendFiltered(dst, cur, prev []byte) []byte {
	const bpp = 3
	best, bestSum := -1, math.MaxInt
	var rows [5][]byte
	for f := range 5 {
		out := make([]byte, len(cur))
		sum := 0
		for i, x := range cur {
			var a, b, c byte
			if i >= bpp {
				a, c = cur[i-bpp], prev[i-bpp]
			}
			b = prev[i]
			switch f {
			case 1:
				x -= a
			case 2:
				x -= b
			case 3:
				x -= byte((int(a) + int(b)) / 2)
			case 4:
				x -= paeth(a, b, c)
			}
			out[i] = x
			sum += abs8(x)
		}
		rows[f] = out
		if sum < bestSum {
			best, bestSum = f, sum
		}
	}
	return append(append(dst, byte(best)), rows[best]...)
}

func abs8(x byte) int {
	if int8(x) < 0 {
		return -int(int8(x))
	}
	return int(x)
}

func paeth(a, b, c byte) byte {
	p := int(a) + int(b) - int(c)
	pa, pb, pc := absInt(p-int(a)), absInt(p-int(b)), absInt(p-int(c))
	switch {
	case pa <= pb && pa <= pc:
		return a
	case pb <= pc:
		return b
	}
	return c
}

func absInt(x int) int { return max(x, -x) }

// chunk appends a PNG chunk.
func chunk(dst []byte, typ string, data []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(data)))
	n := len(dst)
	dst = append(append(dst, typ...), data...)
	return binary.BigEndian.AppendUint32(dst, crc32.ChecksumIEEE(dst[n:]))
}

// adler32Combine returns the adler32 of A followed by B from the sums of A
// (a1) and B (a2) and B's length (zlib's adler32_combine).
func adler32Combine(a1, a2 uint32, len2 int64) uint32 {
	const base = 65521
	rem := uint32(len2 % base)
	sum1 := a1 & 0xffff
	sum2 := rem * sum1 % base
	sum1 += a2&0xffff + base - 1
	sum2 += a1>>16 + a2>>16 + base - rem
	if sum1 >= base {
		sum1 -= base
	}
	if sum1 >= base {
		sum1 -= base
	}
	if sum2 >= base<<1 {
		sum2 -= base << 1
	}
	if sum2 >= base {
		sum2 -= base
	}
	return sum1 | sum2<<16
}
