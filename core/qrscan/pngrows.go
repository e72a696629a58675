package qrscan

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image/color"
	"io"

	"github.com/klauspost/compress/flate"
)

// A PNG too large for image/png within the Budget (a 12 Mpx RGB photo
// decodes to 48 MiB of RGBA) is read here instead, row by row: each row is
// inflated, unfiltered, turned into luma as lumaRow would from the decoded
// image, and box-averaged into the working plane, so nothing of full
// resolution is held but two stored rows. Interlaced files, whose passes
// cover the whole image before any row is complete, are left to image/png
// and its estimate.

// pngStreamable reports whether img, a PNG, can be read row by row.
func pngStreamable(img []byte) bool {
	return len(img) >= 33 && img[28] == 0
}

// pngStreamCost is what pngLuma allocates for a w×h PNG, beyond
// the working plane that workCost counts: the stored current and previous
// rows, a luma row, the averaging sums and the inflater's window and state.
func pngStreamCost(img []byte, w, h int) int64 {
	return 2*pngRowBytes(img, w) + 5*int64(w) + 128<<10
}

// pngChannels is the samples a pixel of PNG colour type ctype.
func pngChannels(ctype byte) int64 {
	switch ctype {
	case 0, 3:
		return 1
	case 2:
		return 3
	case 4:
		return 2
	case 6:
		return 4
	}
	return 0
}

// pngRowBytes is a stored row of a w-pixel-wide PNG: a filter byte and the samples.
func pngRowBytes(img []byte, w int) int64 {
	depth, ctype := int64(img[24]), img[25]
	return 1 + (max(pngChannels(ctype), 1)*depth*int64(w)+7)/8
}

// pngChunks walks the chunks of a PNG file, checking their CRCs.
type pngChunks struct {
	img []byte
	i   int
}

func (c *pngChunks) next() (typ string, data []byte, err error) {
	if c.i+12 > len(c.img) {
		return "", nil, errors.New("png: truncated chunk")
	}
	n := int64(binary.BigEndian.Uint32(c.img[c.i:]))
	if n > int64(len(c.img)-c.i-12) {
		return "", nil, errors.New("png: chunk past the end of the file")
	}
	typ = string(c.img[c.i+4 : c.i+8])
	data = c.img[c.i+8 : c.i+8+int(n)]
	if crc32.ChecksumIEEE(c.img[c.i+4:c.i+8+int(n)]) != binary.BigEndian.Uint32(c.img[c.i+8+int(n):]) {
		return "", nil, fmt.Errorf("png: bad CRC in %q", typ)
	}
	c.i += 12 + int(n)
	return typ, data, nil
}

// idatReader reads the image data of consecutive IDAT chunks as one stream.
type idatReader struct {
	chunks *pngChunks
	cur    []byte
	done   bool
}

func (r *idatReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.done {
			return 0, io.ErrUnexpectedEOF
		}
		typ, data, err := r.chunks.next()
		if err != nil {
			return 0, err
		}
		if typ != "IDAT" {
			r.done = true
			continue
		}
		r.cur = data
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// pngLuma decodes a non-interlaced w×h PNG into its luma, composited over
// white, shrunk by k as toGray(png.Decode(img), k) would, into buf's
// memory if it fits.
func pngLuma(img []byte, w, h, k int, buf []byte) (plane, error) {
	depth, ctype := img[24], img[25]
	ch := pngChannels(ctype)
	switch {
	case ch == 0,
		ctype == 3 && depth > 8,
		(ctype == 2 || ctype == 4 || ctype == 6) && depth != 8 && depth != 16,
		depth != 1 && depth != 2 && depth != 4 && depth != 8 && depth != 16:
		return plane{}, fmt.Errorf("png: colour type %d at bit depth %d", ctype, depth)
	}
	// The chunks before the image data: palette and transparency.
	chunks := &pngChunks{img: img, i: 8}
	var palette color.Palette
	var trns []byte
	var first []byte
	for first == nil {
		typ, data, err := chunks.next()
		if err != nil {
			return plane{}, err
		}
		switch typ {
		case "PLTE":
			for i := 0; i+3 <= len(data); i += 3 {
				palette = append(palette, color.NRGBA{data[i], data[i+1], data[i+2], 0xff})
			}
		case "tRNS":
			trns = data
		case "IDAT":
			first = data
		case "IEND":
			return plane{}, errors.New("png: no image data")
		}
	}
	if ctype == 3 {
		if len(palette) == 0 {
			return plane{}, errors.New("png: no palette")
		}
		for i, a := range trns {
			if i < len(palette) {
				c := palette[i].(color.NRGBA)
				c.A = a
				palette[i] = c
			}
		}
	}
	// The image data is a zlib stream: a two-byte header, then deflate.
	// klauspost's inflater takes a third of the time of compress/flate's
	// on screenshots. The stream's Adler-32 sum, at its end, is not read:
	// the rows end first, and the chunks' CRCs guard the bytes.
	idat := &idatReader{chunks: chunks, cur: first}
	var hdr [2]byte
	if _, err := io.ReadFull(idat, hdr[:]); err != nil {
		return plane{}, fmt.Errorf("png: %w", err)
	}
	if hdr[0]&0x0f != 8 || hdr[0]>>4 > 7 || hdr[1]&0x20 != 0 || (uint(hdr[0])<<8|uint(hdr[1]))%31 != 0 {
		return plane{}, errors.New("png: bad zlib header")
	}
	zr := flate.NewReader(idat)
	rowBytes := int(pngRowBytes(img, w))
	bpp := max(1, int(ch)*int(depth)/8)
	cur, prev := make([]byte, rowBytes), make([]byte, rowBytes)
	luma := make([]byte, w)
	conv := pngRowLuma(depth, ctype, palette, trns, w)
	rgb := ctype == 2 && depth == 8 && len(trns) < 6 // 8-bit RGB, no transparent colour: screenshots

	out := newShrunk(w/k, h/k, k, buf)
	for y := 0; y < out.h*k; y++ {
		if _, err := io.ReadFull(zr, cur); err != nil {
			return plane{}, fmt.Errorf("png: row %d: %w", y, err)
		}
		if y > 0 && cur[0] == 2 {
			if zero(cur[1:]) {
				// Up, adding nothing: the row above again, and its luma
				// (a screenshot's flat background, most of its rows).
				out.add(y, luma)
				continue
			}
			if rgb {
				upRGB(cur[1:], prev[1:], luma)
				out.add(y, luma)
				cur, prev = prev, cur
				continue
			}
		}
		if err := unfilter(cur, prev, bpp); err != nil {
			return plane{}, err
		}
		conv(cur[1:], luma)
		out.add(y, luma)
		cur, prev = prev, cur
	}
	// Rows past the last whole block of k play no part, as in toGray; the
	// file is not read further.
	return out.plane, nil
}

// unfilter undoes the filter of one stored row in place, given the
// previous row (all zero before the first). The loops are written for
// the compiler to drop bounds checks: a screenshot has millions of bytes.
func unfilter(cur, prev []byte, bpp int) error {
	f, c, p := cur[0], cur[1:], prev[1:len(cur)]
	switch f {
	case 0:
	case 1: // Sub: c[i] += c[i-bpp], in order
		a, b := c[:len(c)-bpp], c[bpp:]
		for i := range b {
			b[i] += a[i]
		}
	case 2: // Up, eight bytes at a time: a byte-wise sum without carries
		p = p[:len(c)]
		for len(c) >= 8 {
			binary.LittleEndian.PutUint64(c, addBytes(binary.LittleEndian.Uint64(c), binary.LittleEndian.Uint64(p)))
			c, p = c[8:], p[8:]
		}
		for i := range c {
			c[i] += p[i]
		}
	case 3: // Average
		for i := range bpp {
			c[i] += p[i] / 2
		}
		a, b, q := c[:len(c)-bpp], c[bpp:], p[bpp:]
		q = q[:len(b)]
		for i := range b {
			b[i] += uint8((uint(a[i]) + uint(q[i])) / 2)
		}
	case 4: // Paeth, one channel at a time, its left and upper-left pixels in registers
		for k := range bpp {
			left, upLeft := 0, 0
			for i := k; i < len(c); i += bpp {
				up := int(p[i])
				pa, pb := up-upLeft, left-upLeft
				pc := abs8(pa + pb)
				pa, pb = abs8(pa), abs8(pb)
				pred := upLeft
				if pa <= pb && pa <= pc {
					pred = left
				} else if pb <= pc {
					pred = up
				}
				left = (pred + int(c[i])) & 0xff
				c[i] = uint8(left)
				upLeft = up
			}
		}
	default:
		return fmt.Errorf("png: bad filter type %d", f)
	}
	return nil
}

// upRGB undoes the Up filter of a row of 8-bit RGB samples c, given the
// row above p, and brings luma, the row above's, up to date: eight pixels
// (24 bytes) at a time, those the filter left as they were above (all
// zero, a screenshot's background beside a code or text) keep their luma.
func upRGB(c, p, luma []byte) {
	w := len(luma)
	c, p = c[:3*w], p[:3*w]
	x := 0
	for ; x+8 <= w; x += 8 {
		q, a := (*[24]byte)(c[3*x:]), (*[24]byte)(p[3*x:])
		f0, f1, f2 := binary.LittleEndian.Uint64(q[:]), binary.LittleEndian.Uint64(q[8:]), binary.LittleEndian.Uint64(q[16:])
		p0, p1, p2 := binary.LittleEndian.Uint64(a[:]), binary.LittleEndian.Uint64(a[8:]), binary.LittleEndian.Uint64(a[16:])
		if f0|f1|f2 == 0 {
			binary.LittleEndian.PutUint64(q[:], p0)
			binary.LittleEndian.PutUint64(q[8:], p1)
			binary.LittleEndian.PutUint64(q[16:], p2)
			continue
		}
		binary.LittleEndian.PutUint64(q[:], addBytes(f0, p0))
		binary.LittleEndian.PutUint64(q[8:], addBytes(f1, p1))
		binary.LittleEndian.PutUint64(q[16:], addBytes(f2, p2))
		o := (*[8]byte)(luma[x:])
		for i := range o {
			o[i] = uint8(lum(q[3*i], q[3*i+1], q[3*i+2]))
		}
	}
	for ; x < w; x++ {
		q := (*[3]byte)(c[3*x:])
		q[0], q[1], q[2] = q[0]+p[3*x], q[1]+p[3*x+1], q[2]+p[3*x+2]
		luma[x] = uint8(lum(q[0], q[1], q[2]))
	}
}

// addBytes adds the eight bytes of x and y each to each, without carries
// from one to the next.
func addBytes(x, y uint64) uint64 {
	const hi = 0x8080808080808080
	return ((x &^ hi) + (y &^ hi)) ^ ((x ^ y) & hi)
}

// zero reports whether b is all zeros, looking at eight bytes at a time.
func zero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, v := range b {
		if v != 0 {
			return false
		}
	}
	return true
}

func abs8(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// pngRowLuma returns a function that writes the luma of one unfiltered
// row of samples, over white, as lumaRow does for what image/png would
// have decoded the file into (Gray, Gray16, RGBA, RGBA64, NRGBA, NRGBA64
// or Paletted).
func pngRowLuma(depth, ctype byte, palette color.Palette, trns []byte, w int) func(s, row []byte) {
	switch ctype {
	case 3, 0:
		if depth <= 8 {
			// Samples of 1 to 8 bits index a table: the palette's luma, or
			// the grey level (white where tRNS names it transparent).
			var lut [256]uint8
			if ctype == 3 {
				for i := range lut {
					lut[i] = 0 // out of the palette: opaque black, as image/png reads it
				}
				for i, c := range palette {
					lut[i] = grayOf(c)
				}
			} else {
				mul := map[byte]int{1: 255, 2: 0x55, 4: 0x11, 8: 1}[depth]
				for i := range 1 << depth {
					lut[i] = uint8(i * mul)
				}
				if len(trns) >= 2 {
					t := int(binary.BigEndian.Uint16(trns))
					if t < 1<<depth {
						lut[t] = 255
					}
				}
			}
			d := int(depth)
			mask := byte(1<<d - 1)
			return func(s, row []byte) {
				if d == 8 {
					for x := range w {
						row[x] = lut[s[x]]
					}
					return
				}
				per := 8 / d
				for x := range w {
					b := s[x/per]
					shift := 8 - d*(x%per+1)
					row[x] = lut[(b>>shift)&mask]
				}
			}
		}
		// 16-bit grey.
		t := -1
		if len(trns) >= 2 {
			t = int(binary.BigEndian.Uint16(trns))
		}
		return func(s, row []byte) {
			for x := range w {
				v := uint32(s[2*x])<<8 | uint32(s[2*x+1])
				if int(v) == t {
					row[x] = 255
					continue
				}
				row[x] = gray16(v, v, v, 0xffff)
			}
		}
	case 2:
		if depth == 8 {
			t := -1
			if len(trns) >= 6 {
				t = int(trns[1])<<16 | int(trns[3])<<8 | int(trns[5])
			}
			if t < 0 { // the common case, screenshots: four pixels at a time
				return func(s, row []byte) {
					x := 0
					for ; x+4 <= w; x += 4 {
						p, o := (*[12]byte)(s[3*x:]), (*[4]byte)(row[x:])
						o[0] = uint8(lum(p[0], p[1], p[2]))
						o[1] = uint8(lum(p[3], p[4], p[5]))
						o[2] = uint8(lum(p[6], p[7], p[8]))
						o[3] = uint8(lum(p[9], p[10], p[11]))
					}
					for ; x < w; x++ {
						row[x] = uint8(lum(s[3*x], s[3*x+1], s[3*x+2]))
					}
				}
			}
			return func(s, row []byte) {
				for x := range w {
					q := s[3*x : 3*x+3 : 3*x+3]
					if t >= 0 && int(q[0])<<16|int(q[1])<<8|int(q[2]) == t {
						row[x] = 255
						continue
					}
					row[x] = uint8(lum(q[0], q[1], q[2]))
				}
			}
		}
		var tr, tg, tb uint16
		has := len(trns) >= 6
		if has {
			tr, tg, tb = be16(trns), be16(trns[2:]), be16(trns[4:])
		}
		return func(s, row []byte) {
			for x := range w {
				q := s[6*x:]
				r, g, b := be16(q), be16(q[2:]), be16(q[4:])
				if has && r == tr && g == tg && b == tb {
					row[x] = 255
					continue
				}
				row[x] = gray16(uint32(r), uint32(g), uint32(b), 0xffff)
			}
		}
	case 4:
		if depth == 8 {
			return func(s, row []byte) {
				for x := range w {
					g, a := uint32(s[2*x]), uint32(s[2*x+1])
					row[x] = uint8((lum(uint8(g), uint8(g), uint8(g))*a + 255*(255-a) + 127) / 255)
				}
			}
		}
		return func(s, row []byte) {
			for x := range w {
				g, a := be16(s[4*x:]), be16(s[4*x+2:])
				row[x] = gray16(color.NRGBA64{R: g, G: g, B: g, A: a}.RGBA())
			}
		}
	}
	// 6: RGBA.
	if depth == 8 {
		return func(s, row []byte) {
			for x := range w {
				q := (*[4]byte)(s[4*x:])
				if a := uint32(q[3]); a != 255 {
					row[x] = uint8((lum(q[0], q[1], q[2])*a + 255*(255-a) + 127) / 255)
					continue
				}
				row[x] = uint8(lum(q[0], q[1], q[2])) // opaque, most pixels: no division
			}
		}
	}
	return func(s, row []byte) {
		for x := range w {
			q := s[8*x:]
			row[x] = gray16(color.NRGBA64{R: be16(q), G: be16(q[2:]), B: be16(q[4:]), A: be16(q[6:])}.RGBA())
		}
	}
}
