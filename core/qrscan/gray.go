package qrscan

import (
	"encoding/binary"
	"image"
	"image/color"
	"math"
)

// plane is an 8-bit grey image, row after row without padding.
type plane struct {
	pix  []byte
	w, h int
}

// shrunk is a plane being filled row by row from a picture k times its
// size, each pixel the rounded mean of a k×k box.
type shrunk struct {
	plane
	k   int
	acc []uint32 // the sums of the box row under way
}

// newShrunk returns a w×h plane to fill from a picture k times its size,
// in buf's memory if it fits.
func newShrunk(w, h, k int, buf []byte) *shrunk {
	s := &shrunk{plane: plane{pix: grow(buf, w*h), w: w, h: h}, k: k}
	if k > 1 {
		s.acc = make([]uint32, w)
	}
	return s
}

// add takes the picture's row y (at least w*k pixels of luma).
func (s *shrunk) add(y int, row []byte) {
	k := s.k
	if k == 1 {
		copy(s.pix[y*s.w:], row[:s.w])
		return
	}
	for x := range s.acc {
		sum := uint32(0)
		for _, v := range row[x*k : x*k+k] {
			sum += uint32(v)
		}
		s.acc[x] += sum
	}
	if y%k == k-1 {
		o := s.pix[(y/k)*s.w:]
		n := uint32(k * k)
		for x, sum := range s.acc {
			o[x] = uint8((sum + n/2) / n)
			s.acc[x] = 0
		}
	}
}

// grow returns buf with length n, reusing its memory when it can.
func grow(buf []byte, n int) []byte {
	if cap(buf) >= n {
		return buf[:n]
	}
	return make([]byte, n)
}

// toGray converts m to grey, composited over white where it is
// transparent, shrunk by an integer factor k (a k×k box average) when k > 1,
// into buf's memory if it fits. Common decoder outputs have fast paths;
// others go through color.Color.
func toGray(m image.Image, k int, buf []byte) plane {
	b := m.Bounds()
	w, h := b.Dx()/k, b.Dy()/k
	if w == 0 || h == 0 {
		return plane{w: 0, h: 0}
	}
	out := newShrunk(w, h, k, buf)
	row := make([]byte, b.Dx())
	luma := lumaRow(m)
	for y := 0; y < h*k; y++ {
		luma(b.Min.Y+y, row)
		out.add(y, row)
	}
	return out.plane
}

// onScreen is a GIF frame on its logical screen, which it does not fill:
// the screen around the frame is transparent.
type onScreen struct {
	frame  image.Image
	screen image.Rectangle // holds frame.Bounds()
}

func (s onScreen) ColorModel() color.Model { return s.frame.ColorModel() }
func (s onScreen) Bounds() image.Rectangle { return s.screen }
func (s onScreen) At(x, y int) color.Color {
	if image.Pt(x, y).In(s.frame.Bounds()) {
		return s.frame.At(x, y)
	}
	return color.Transparent
}

// lumaRow returns a function that writes the luma of row y of m into row.
func lumaRow(m image.Image) func(y int, row []byte) {
	b := m.Bounds()
	w := b.Dx()
	switch m := m.(type) {
	case onScreen: // white around the frame's own rows
		f := m.frame.Bounds()
		frame := lumaRow(m.frame)
		left, right := f.Min.X-b.Min.X, f.Max.X-b.Min.X
		return func(y int, row []byte) {
			if y < f.Min.Y || y >= f.Max.Y || f.Empty() {
				fillWhite(row[:w])
				return
			}
			fillWhite(row[:left])
			frame(y, row[left:right])
			fillWhite(row[right:w])
		}
	case *image.Gray:
		return func(y int, row []byte) {
			o := m.PixOffset(b.Min.X, y)
			copy(row, m.Pix[o:o+w])
		}
	case *image.YCbCr:
		return func(y int, row []byte) {
			o := m.YOffset(b.Min.X, y)
			copy(row, m.Y[o:o+w])
		}
	case *image.NYCbCrA:
		return func(y int, row []byte) {
			o, ao := m.YOffset(b.Min.X, y), m.AOffset(b.Min.X, y)
			for x := range w {
				a := uint32(m.A[ao+x])
				row[x] = uint8((uint32(m.Y[o+x])*a + 255*(255-a) + 127) / 255)
			}
		}
	case *image.RGBA: // premultiplied
		return func(y int, row []byte) {
			p := m.Pix[m.PixOffset(b.Min.X, y):]
			for x := range w {
				q := p[4*x : 4*x+4 : 4*x+4]
				row[x] = uint8(lum(q[0], q[1], q[2]) + 255 - uint32(q[3]))
			}
		}
	case *image.NRGBA:
		return func(y int, row []byte) {
			p := m.Pix[m.PixOffset(b.Min.X, y):]
			for x := range w {
				q := p[4*x : 4*x+4 : 4*x+4]
				a := uint32(q[3])
				row[x] = uint8((lum(q[0], q[1], q[2])*a + 255*(255-a) + 127) / 255)
			}
		}
	// 16-bit and CMYK images: their colours' RGBA methods by value, which
	// allocate nothing (At returns an interface, an allocation a pixel:
	// 105 MiB of garbage for a 16-bit PNG at the size limit).
	case *image.Gray16:
		return func(y int, row []byte) {
			p := m.Pix[m.PixOffset(b.Min.X, y):]
			for x := range w {
				v := uint32(p[2*x])<<8 | uint32(p[2*x+1])
				row[x] = gray16(v, v, v, 0xffff)
			}
		}
	case *image.CMYK:
		return func(y int, row []byte) {
			p := m.Pix[m.PixOffset(b.Min.X, y):]
			for x := range w {
				q := p[4*x : 4*x+4 : 4*x+4]
				row[x] = gray16(color.CMYK{C: q[0], M: q[1], Y: q[2], K: q[3]}.RGBA())
			}
		}
	case *image.RGBA64:
		return func(y int, row []byte) {
			p := m.Pix[m.PixOffset(b.Min.X, y):]
			for x := range w {
				row[x] = gray16(px16(p[8*x:]).RGBA())
			}
		}
	case *image.NRGBA64:
		return func(y int, row []byte) {
			p := m.Pix[m.PixOffset(b.Min.X, y):]
			for x := range w {
				row[x] = gray16(color.NRGBA64(px16(p[8*x:])).RGBA())
			}
		}
	case *image.Paletted:
		var lut [256]uint8
		for i, c := range m.Palette {
			lut[i] = grayOf(c)
		}
		return func(y int, row []byte) {
			p := m.Pix[m.PixOffset(b.Min.X, y):]
			for x := range w {
				row[x] = lut[p[x]]
			}
		}
	}
	return func(y int, row []byte) {
		for x := range w {
			row[x] = grayOf(m.At(b.Min.X+x, y))
		}
	}
}

func fillWhite(row []byte) {
	for i := range row {
		row[i] = 255
	}
}

// lum is the luma of an 8-bit colour (BT.601 weights).
func lum(r, g, b uint8) uint32 {
	return (77*uint32(r) + 150*uint32(g) + 29*uint32(b) + 128) >> 8
}

// grayOf is the luma of c composited over white.
func grayOf(c color.Color) uint8 { return gray16(c.RGBA()) }

// gray16 is the luma of a premultiplied 16-bit colour over white.
func gray16(r, g, b, a uint32) uint8 {
	l := (19595*r + 38470*g + 7471*b + 1<<15) >> 16
	return uint8((l + 0xffff - a) >> 8)
}

// px16 reads a pixel of 16-bit big-endian R, G, B, A samples, as
// image.RGBA64 and image.NRGBA64 store them.
func px16(p []byte) color.RGBA64 {
	return color.RGBA64{R: be16(p), G: be16(p[2:]), B: be16(p[4:]), A: be16(p[6:])}
}

func be16(p []byte) uint16 { return uint16(p[0])<<8 | uint16(p[1]) }

// half shrinks src by 2 in each direction (2×2 box average) into dst.
func half(src plane, dst []byte) plane {
	w, h := src.w/2, src.h/2
	dst = grow(dst, w*h)
	for y := range h {
		r0 := src.pix[2*y*src.w : 2*y*src.w+2*w]
		r1 := src.pix[(2*y+1)*src.w : (2*y+1)*src.w+2*w]
		o := dst[y*w : y*w+w]
		x := 0
		for ; x+4 <= w; x += 4 { // four pixels at a time, in the 16-bit lanes of a word
			const lanes = 0x00ff00ff00ff00ff
			a, b := binary.LittleEndian.Uint64(r0[2*x:]), binary.LittleEndian.Uint64(r1[2*x:])
			v := a&lanes + a>>8&lanes + b&lanes + b>>8&lanes + 0x0002000200020002
			v = v >> 2 & lanes
			v = (v | v>>8) & 0x0000ffff0000ffff
			binary.LittleEndian.PutUint32(o[x:], uint32(v|v>>16))
		}
		for ; x < w; x++ {
			o[x] = uint8((uint32(r0[2*x]) + uint32(r0[2*x+1]) + uint32(r1[2*x]) + uint32(r1[2*x+1]) + 2) / 4)
		}
	}
	return plane{pix: dst, w: w, h: h}
}

// invert writes the negative of src into dst.
func invert(src plane, dst []byte) plane {
	dst = grow(dst, src.w*src.h)
	for i, v := range src.pix[:src.w*src.h] {
		dst[i] = 255 - v
	}
	return plane{pix: dst, w: src.w, h: src.h}
}

// scaleRect copies the rectangle r of src, scaled by k with bilinear
// interpolation, into dst. Each source row is interpolated across once,
// and each output row blends the two it falls between, held as v[0] and
// v[1]: magnified, consecutive output rows share their source rows.
func scaleRect(src plane, r image.Rectangle, k float64, dst []byte) plane {
	w, h := int(float64(r.Dx())*k), int(float64(r.Dy())*k)
	dst = grow(dst, w*h)
	inv := 1 / k
	// Where each column comes from, the same on every row, and the upper
	// and lower source rows interpolated across.
	cols := make([]struct {
		x0, x1 int
		t, u   float64 // u = 1-t
		v      [2]float64
	}, w)
	for x := range cols {
		fx := (float64(x)+0.5)*inv - 0.5 + float64(r.Min.X)
		x0 := int(math.Floor(fx))
		cols[x].t = fx - float64(x0)
		cols[x].u = 1 - cols[x].t
		cols[x].x0, cols[x].x1 = clampInt(x0, 0, src.w-1), clampInt(x0+1, 0, src.w-1)
	}
	fill := func(s, y int) {
		sr := src.pix[y*src.w : y*src.w+src.w]
		for x := range cols {
			c := &cols[x]
			c.v[s] = float64(sr[c.x0])*c.u + float64(sr[c.x1])*c.t
		}
	}
	move := func(from, to int) {
		for x := range cols {
			cols[x].v[to] = cols[x].v[from]
		}
	}
	upper, lower := -1, -1 // the source rows in v[0] and v[1]
	for y := range h {
		fy := (float64(y)+0.5)*inv - 0.5 + float64(r.Min.Y)
		y0 := int(math.Floor(fy))
		ty := fy - float64(y0)
		y0c, y1c := clampInt(y0, 0, src.h-1), clampInt(y0+1, 0, src.h-1)
		switch y0c {
		case upper:
		case lower:
			move(1, 0)
		default:
			fill(0, y0c)
		}
		switch y1c {
		case lower:
		case y0c:
			move(0, 1)
		default:
			fill(1, y1c)
		}
		upper, lower = y0c, y1c
		o, ry := dst[y*w:y*w+w], 1-ty
		for x := range o {
			c := &cols[x]
			o[x] = uint8(c.v[0]*ry + c.v[1]*ty + 0.5)
		}
	}
	return plane{pix: dst, w: w, h: h}
}

// normalize stretches the contrast of src locally into dst: each pixel is
// mapped from the range of the darkest to the brightest pixel around it
// (blocks of about cell pixels, interpolated) to 0..255. It evens out
// uneven light and the washed-out blacks of a photographed screen.
func normalize(src plane, cell int, dst []byte) plane {
	w, h := src.w, src.h
	dst = grow(dst, w*h)
	bw, bh := (w+cell-1)/cell, (h+cell-1)/cell
	lo := make([]uint8, bw*bh)
	hi := make([]uint8, bw*bh)
	for by := range bh {
		for bx := range bw {
			mn, mx := uint8(255), uint8(0)
			for y := by * cell; y < min(h, (by+1)*cell); y++ {
				for _, v := range src.pix[y*w+bx*cell : y*w+min(w, (bx+1)*cell)] {
					mn, mx = min(mn, v), max(mx, v)
				}
			}
			lo[by*bw+bx], hi[by*bw+bx] = mn, mx
		}
	}
	// Widen each block's range to its 3×3 neighbourhood, so a block inside a
	// large dark or light area borrows its neighbours' contrast.
	lo2, hi2 := make([]uint8, bw*bh), make([]uint8, bw*bh)
	for by := range bh {
		for bx := range bw {
			mn, mx := uint8(255), uint8(0)
			for yy := max(0, by-1); yy <= min(bh-1, by+1); yy++ {
				for xx := max(0, bx-1); xx <= min(bw-1, bx+1); xx++ {
					mn, mx = min(mn, lo[yy*bw+xx]), max(mx, hi[yy*bw+xx])
				}
			}
			lo2[by*bw+bx], hi2[by*bw+bx] = mn, mx
		}
	}
	// The ranges interpolated between blocks: along x once for the two
	// rows of blocks a row of pixels lies between, which 32 rows share,
	// then along y for each row.
	x0s, x1s, txs := make([]int, w), make([]int, w), make([]float64, w)
	for x := range w {
		fx := (float64(x)+0.5)/float64(cell) - 0.5
		x0s[x] = clampInt(int(math.Floor(fx)), 0, bw-1)
		x1s[x] = clampInt(x0s[x]+1, 0, bw-1)
		txs[x] = math.Max(0, math.Min(1, fx-float64(x0s[x])))
	}
	lerps := make([]float64, 4*w) // lo and hi on rows y0 and y1 of blocks
	lo0, lo1, hi0, hi1 := lerps[:w], lerps[w:2*w], lerps[2*w:3*w], lerps[3*w:]
	lerpRow := func(g []uint8, by int, out []float64) {
		r := g[by*bw : by*bw+bw]
		for x, tx := range txs {
			out[x] = float64(r[x0s[x]])*(1-tx) + float64(r[x1s[x]])*tx
		}
	}
	lastY0 := -1
	for y := range h {
		fy := (float64(y)+0.5)/float64(cell) - 0.5
		y0 := clampInt(int(math.Floor(fy)), 0, bh-1)
		y1 := clampInt(y0+1, 0, bh-1)
		ty := math.Max(0, math.Min(1, fy-float64(y0)))
		if y0 != lastY0 {
			lerpRow(lo2, y0, lo0)
			lerpRow(lo2, y1, lo1)
			lerpRow(hi2, y0, hi0)
			lerpRow(hi2, y1, hi1)
			lastY0 = y0
		}
		for x := range w {
			l := lo0[x]*(1-ty) + lo1[x]*ty
			u := hi0[x]*(1-ty) + hi1[x]*ty
			v := float64(src.pix[y*w+x])
			if u-l < 24 { // flat: leave it mid-grey-ish so it binarizes consistently
				dst[y*w+x] = uint8(clampF((v-l)*255/24, 0, 255))
				continue
			}
			dst[y*w+x] = uint8(clampF((v-l)*255/(u-l), 0, 255))
		}
	}
	return plane{pix: dst, w: w, h: h}
}

func clampInt(v, lo, hi int) int { return max(lo, min(hi, v)) }

func clampF(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }
