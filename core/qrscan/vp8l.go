package qrscan

import (
	"errors"
)

// This file measures lossless WebP (VP8L) bitstreams before they are
// decoded. What golang.org/x/image/vp8l allocates is not set by the
// dimensions alone: the main image may use up to 2,600 groups of five
// Huffman trees, each tree up to 2,328 symbols, and a file of a few hundred
// kilobytes can ask for them all, well over 100 MB for an image of 200×200
// pixels. vp8lCost walks the bitstream as far as the main image's trees
// (decoding the small transform and entropy images on the way, which is
// cheap), and adds up what the decoder will allocate. It is stricter than
// x/image in one way, as libwebp is: a Huffman code that is not complete
// is refused, so that both read the same trees from the same bits.

var errVP8L = errors.New("vp8l: invalid bitstream")

// bitReader reads the VP8L bitstream, least significant bit first.
type bitReader struct {
	b     []byte
	pos   int
	bits  uint64
	nBits uint
}

func (r *bitReader) read(n uint) (uint32, error) {
	for r.nBits < n {
		if r.pos == len(r.b) {
			return 0, errVP8L
		}
		r.bits |= uint64(r.b[r.pos]) << r.nBits
		r.pos++
		r.nBits += 8
	}
	v := uint32(r.bits & (1<<n - 1))
	r.bits >>= n
	r.nBits -= n
	return v, nil
}

// huffCode is a canonical Huffman code, decoded bit by bit.
type huffCode struct {
	count   [16]uint16 // codes of each length
	symbols []uint16   // symbols in canonical order
	zeroLen bool       // a single symbol coded with no bits
	simple  [2]uint32  // the symbols of a simple code
	nSimple int
}

// build makes the code for the given code lengths. It returns the number
// of symbols, and refuses codes that are over-subscribed or incomplete.
func (h *huffCode) build(lengths []uint32) (int, error) {
	syms := h.symbols[:0]
	*h = huffCode{symbols: syms}
	n := 0
	last := 0
	for s, l := range lengths {
		if l > 15 {
			return 0, errVP8L
		}
		if l != 0 {
			h.count[l]++
			n++
			last = s
		}
	}
	if n == 0 {
		return 0, errVP8L
	}
	if n == 1 {
		h.zeroLen, h.simple[0] = true, uint32(last)
		return 1, nil
	}
	left := 1
	for l := 1; l < 16; l++ {
		left = left<<1 - int(h.count[l])
		if left < 0 {
			return 0, errVP8L // over-subscribed
		}
	}
	if left != 0 {
		return 0, errVP8L // incomplete
	}
	var offs [16]uint16
	for l := 1; l < 15; l++ {
		offs[l+1] = offs[l] + h.count[l]
	}
	if cap(h.symbols) < n {
		h.symbols = make([]uint16, n)
	}
	h.symbols = h.symbols[:n]
	for s, l := range lengths {
		if l != 0 {
			h.symbols[offs[l]] = uint16(s)
			offs[l]++
		}
	}
	return n, nil
}

func (h *huffCode) next(r *bitReader) (uint32, error) {
	if h.zeroLen {
		return h.simple[0], nil
	}
	if h.nSimple == 2 {
		b, err := r.read(1)
		return h.simple[b], err
	}
	code, first, index := 0, 0, 0
	for l := 1; l < 16; l++ {
		b, err := r.read(1)
		if err != nil {
			return 0, err
		}
		code |= int(b)
		c := int(h.count[l])
		if code-c < first {
			return uint32(h.symbols[index+code-first]), nil
		}
		index += c
		first = (first + c) << 1
		code <<= 1
	}
	return 0, errVP8L
}

// vp8lMeter walks a bitstream and counts the bytes x/image would allocate.
type vp8lMeter struct {
	r       bitReader
	bytes   int64
	clc     huffCode                 // the code length code being read
	lengths [256 + 24 + 1<<11]uint32 // code lengths being read
	main    [5]huffCode              // the main image's trees, read and dropped
}

var codeLengthOrder = [19]uint8{17, 18, 0, 1, 2, 3, 4, 5, 16, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}

// tree reads one Huffman code of alphabetSize symbols into h and counts
// what x/image allocates for it (the tree's nodes, and for a normal code
// its code lengths and codes, which are garbage at once but allocated).
func (m *vp8lMeter) tree(h *huffCode, alphabetSize uint32) error {
	simple, err := m.r.read(1)
	if err != nil {
		return err
	}
	if simple == 1 {
		n, err := m.r.read(1)
		if err != nil {
			return err
		}
		first, err := m.r.read(1)
		if err != nil {
			return err
		}
		*h = huffCode{nSimple: int(n) + 1, symbols: h.symbols[:0]}
		if h.simple[0], err = m.r.read(uint(7*first + 1)); err != nil {
			return err
		}
		if n == 1 {
			if h.simple[1], err = m.r.read(8); err != nil {
				return err
			}
		} else {
			h.zeroLen = true
		}
		if h.simple[0] >= alphabetSize || h.simple[1] >= alphabetSize {
			return errVP8L
		}
		m.bytes += 8 * int64(2*h.nSimple-1)
		return nil
	}
	nCodes, err := m.r.read(4)
	if err != nil {
		return err
	}
	var clcl [19]uint32
	for i := range nCodes + 4 {
		if clcl[codeLengthOrder[i]], err = m.r.read(3); err != nil {
			return err
		}
	}
	clc := &m.clc
	if _, err := clc.build(clcl[:]); err != nil {
		return err
	}
	lengths := m.lengths[:alphabetSize]
	clear(lengths)
	maxSymbol := int(alphabetSize)
	if use, err := m.r.read(1); err != nil {
		return err
	} else if use == 1 {
		n, err := m.r.read(3)
		if err != nil {
			return err
		}
		ms, err := m.r.read(uint(2 + 2*n))
		if err != nil {
			return err
		}
		if maxSymbol = int(ms) + 2; maxSymbol > len(lengths) {
			return errVP8L
		}
	}
	prev := uint32(8)
	for s := 0; s < len(lengths) && maxSymbol > 0; maxSymbol-- {
		cl, err := clc.next(&m.r)
		if err != nil {
			return err
		}
		if cl < 16 {
			lengths[s] = cl
			s++
			if cl != 0 {
				prev = cl
			}
			continue
		}
		extra, err := m.r.read([3]uint{2, 3, 7}[cl-16])
		if err != nil {
			return err
		}
		rep := int(extra) + [3]int{3, 3, 11}[cl-16]
		if s+rep > len(lengths) {
			return errVP8L
		}
		v := uint32(0)
		if cl == 16 {
			v = prev
		}
		for ; rep > 0; rep-- {
			lengths[s] = v
			s++
		}
	}
	n, err := h.build(lengths)
	if err != nil {
		return err
	}
	m.bytes += 8*int64(alphabetSize) + 8*int64(2*n-1) + 1024
	return nil
}

// group reads five trees; the green one's alphabet includes the colour cache.
func (m *vp8lMeter) group(g *[5]huffCode, ccBits uint32) error {
	sizes := [5]uint32{256 + 24 + 1<<ccBits, 256, 256, 256, 40}
	if ccBits == 0 {
		sizes[0] = 256 + 24
	}
	for i := range g {
		if err := m.tree(&g[i], sizes[i]); err != nil {
			return err
		}
	}
	m.bytes += 5 * (24 + 4<<7) // x/image's hTree: nodes header and look-up table
	return nil
}

// image reads an entropy-coded image of w×h pixels. Sub-images (transform
// data, the entropy image) are decoded, as their pixels are needed to go
// on; for the main image (top) only its trees are read, and the pixels'
// cost counted.
func (m *vp8lMeter) image(w, h int, top bool) ([]uint32, error) {
	m.bytes += 4 * int64(w) * int64(h)
	ccBits := uint32(0)
	if use, err := m.r.read(1); err != nil {
		return nil, err
	} else if use == 1 {
		if ccBits, err = m.r.read(4); err != nil {
			return nil, err
		}
		if ccBits < 1 || ccBits > 11 {
			return nil, errVP8L
		}
		m.bytes += 4 << ccBits
	}
	if top {
		groups := 1
		if use, err := m.r.read(1); err != nil {
			return nil, err
		} else if use == 1 {
			bits, err := m.r.read(3)
			if err != nil {
				return nil, err
			}
			tw, th := tiles(w, bits+2), tiles(h, bits+2)
			meta, err := m.image(tw, th, false)
			if err != nil {
				return nil, err
			}
			maxIndex := 0
			for _, p := range meta {
				maxIndex = max(maxIndex, int(p>>8&0xffff))
			}
			if maxIndex >= 2600 {
				return nil, errVP8L // x/image refuses more
			}
			groups = maxIndex + 1
			m.bytes += 2 * int64(groups) // the index remapping, at most
		}
		for range groups {
			if err := m.group(&m.main, ccBits); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	var g [5]huffCode
	if err := m.group(&g, ccBits); err != nil {
		return nil, err
	}
	pix := make([]uint32, w*h) // ARGB
	var cache []uint32
	if ccBits > 0 {
		cache = make([]uint32, 1<<ccBits)
	}
	cached := 0
	for p := 0; p < len(pix); {
		green, err := g[0].next(&m.r)
		if err != nil {
			return nil, err
		}
		switch {
		case green < 256:
			var c [3]uint32
			for i := range c {
				if c[i], err = g[1+i].next(&m.r); err != nil {
					return nil, err
				}
			}
			pix[p] = c[2]<<24 | c[0]<<16 | green<<8 | c[1]
			p++
		case green < 256+24:
			length, err := m.lz77(green - 256)
			if err != nil {
				return nil, err
			}
			ds, err := g[4].next(&m.r)
			if err != nil {
				return nil, err
			}
			dc, err := m.lz77(ds)
			if err != nil {
				return nil, err
			}
			dist := distance(w, dc)
			if p-dist < 0 || p+int(length) > len(pix) {
				return nil, errVP8L
			}
			for end := p + int(length); p < end; p++ {
				pix[p] = pix[p-dist]
			}
		default:
			if cache == nil {
				return nil, errVP8L
			}
			for ; cached < p; cached++ {
				cache[(pix[cached]*0x1e35a7bd)>>(32-ccBits)] = pix[cached]
			}
			i := green - 256 - 24
			if int(i) >= len(cache) {
				return nil, errVP8L
			}
			pix[p] = cache[i]
			p++
		}
	}
	return pix, nil
}

func (m *vp8lMeter) lz77(sym uint32) (uint32, error) {
	if sym < 4 {
		return sym + 1, nil
	}
	if sym >= 40 {
		return 0, errVP8L
	}
	extra := (sym - 2) >> 1
	v, err := m.r.read(uint(extra))
	return (2+sym&1)<<extra + v + 1, err
}

// distance maps a VP8L distance code to a pixel distance.
func distance(w int, code uint32) int {
	if code > 120 {
		return int(code) - 120
	}
	dc := int(vp8lDistances[code-1])
	d := (dc>>4)*w + 8 - dc&0xf
	return max(d, 1)
}

var vp8lDistances = [120]uint8{
	0x18, 0x07, 0x17, 0x19, 0x28, 0x06, 0x27, 0x29, 0x16, 0x1a,
	0x26, 0x2a, 0x38, 0x05, 0x37, 0x39, 0x15, 0x1b, 0x36, 0x3a,
	0x25, 0x2b, 0x48, 0x04, 0x47, 0x49, 0x14, 0x1c, 0x35, 0x3b,
	0x46, 0x4a, 0x24, 0x2c, 0x58, 0x45, 0x4b, 0x34, 0x3c, 0x03,
	0x57, 0x59, 0x13, 0x1d, 0x56, 0x5a, 0x23, 0x2d, 0x44, 0x4c,
	0x55, 0x5b, 0x33, 0x3d, 0x68, 0x02, 0x67, 0x69, 0x12, 0x1e,
	0x66, 0x6a, 0x22, 0x2e, 0x54, 0x5c, 0x43, 0x4d, 0x65, 0x6b,
	0x32, 0x3e, 0x78, 0x01, 0x77, 0x79, 0x53, 0x5d, 0x11, 0x1f,
	0x64, 0x6c, 0x42, 0x4e, 0x76, 0x7a, 0x21, 0x2f, 0x75, 0x7b,
	0x31, 0x3f, 0x63, 0x6d, 0x52, 0x5e, 0x00, 0x74, 0x7c, 0x41,
	0x4f, 0x10, 0x20, 0x62, 0x6e, 0x30, 0x73, 0x7d, 0x51, 0x5f,
	0x40, 0x72, 0x7e, 0x61, 0x6f, 0x50, 0x71, 0x7f, 0x60, 0x70,
}

func tiles(n int, bits uint32) int { return (n + 1<<bits - 1) >> bits }

// vp8lCost returns the bytes golang.org/x/image/vp8l allocates to decode
// the lossless bitstream b of a w×h image. With header set, b starts with
// the VP8L header (a VP8L chunk); without, it is the headerless stream of a
// WebP alpha plane.
func vp8lCost(b []byte, w, h int, header bool) (int64, error) {
	m := &vp8lMeter{r: bitReader{b: b}}
	if header {
		if len(b) < 5 || b[0] != 0x2f {
			return 0, errVP8L
		}
		m.r.pos = 5
	}
	origW := w
	var seen [4]bool
	for {
		more, err := m.r.read(1)
		if err != nil {
			return 0, err
		}
		if more == 0 {
			break
		}
		t, err := m.r.read(2)
		if err != nil {
			return 0, err
		}
		if seen[t] {
			return 0, errVP8L
		}
		seen[t] = true
		switch t {
		case 0, 1: // predictor, cross-colour: a sub-image of tiles
			bits, err := m.r.read(3)
			if err != nil {
				return 0, err
			}
			if _, err := m.image(tiles(w, bits+2), tiles(h, bits+2), false); err != nil {
				return 0, err
			}
		case 3: // colour indexing: a palette, and pixels bundled by width
			n, err := m.r.read(8)
			if err != nil {
				return 0, err
			}
			n++
			if _, err := m.image(int(n), 1, false); err != nil {
				return 0, err
			}
			m.bytes += 4 * 256 // the palette
			bundle := uint32(0)
			switch {
			case n <= 2:
				bundle = 3
			case n <= 4:
				bundle = 2
			case n <= 16:
				bundle = 1
			}
			if bundle > 0 {
				w = tiles(w, bundle)
				m.bytes += 4 * int64(origW) * int64(h) // the unbundled copy
			}
		}
	}
	if _, err := m.image(w, h, true); err != nil {
		return 0, err
	}
	return m.bytes + 64<<10, nil // and the reader's buffer, and small change
}
