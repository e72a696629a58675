package qrscan

import (
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image/color"
	"io"
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
// white, shrunk by k as toGray(png.Decode(img), k) would.
func pngLuma(img []byte, w, h, k int) (plane, error) {
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
	zr, err := zlib.NewReader(&idatReader{chunks: chunks, cur: first})
	if err != nil {
		return plane{}, err
	}
	rowBytes := int(pngRowBytes(img, w))
	bpp := max(1, int(ch)*int(depth)/8)
	cur, prev := make([]byte, rowBytes), make([]byte, rowBytes)
	luma := make([]byte, w)
	conv := pngRowLuma(depth, ctype, palette, trns, w)

	out := newShrunk(w/k, h/k, k)
	for y := 0; y < out.h*k; y++ {
		if _, err := io.ReadFull(zr, cur); err != nil {
			return plane{}, fmt.Errorf("png: row %d: %w", y, err)
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
// previous row (all zero before the first).
func unfilter(cur, prev []byte, bpp int) error {
	f, c, p := cur[0], cur[1:], prev[1:]
	switch f {
	case 0:
	case 1:
		for i := bpp; i < len(c); i++ {
			c[i] += c[i-bpp]
		}
	case 2:
		for i := range c {
			c[i] += p[i]
		}
	case 3:
		for i := range bpp {
			c[i] += p[i] / 2
		}
		for i := bpp; i < len(c); i++ {
			c[i] += uint8((int(c[i-bpp]) + int(p[i])) / 2)
		}
	case 4:
		for i := range bpp {
			c[i] += p[i]
		}
		for i := bpp; i < len(c); i++ {
			c[i] += paeth(c[i-bpp], p[i], p[i-bpp])
		}
	default:
		return fmt.Errorf("png: bad filter type %d", f)
	}
	return nil
}

func paeth(a, b, c uint8) uint8 {
	pc := int(c)
	pa, pb := int(b)-pc, int(a)-pc
	pc = abs8(pa + pb)
	pa, pb = abs8(pa), abs8(pb)
	switch {
	case pa <= pb && pa <= pc:
		return a
	case pb <= pc:
		return b
	}
	return c
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
				q := s[4*x : 4*x+4 : 4*x+4]
				a := uint32(q[3])
				row[x] = uint8((lum(q[0], q[1], q[2])*a + 255*(255-a) + 127) / 255)
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
