package qrscan

import (
	"image"
	"math"
	"math/rand/v2"
	"testing"
)

// TestLumaRowFastPaths: 16-bit and CMYK images (16-bit PNGs, CMYK JPEGs)
// get the same luma as through their colours' At, without allocating a
// colour per pixel (garbage over the decode budget at the size limit).
func TestLumaRowFastPaths(t *testing.T) {
	r := image.Rect(3, 5, 67, 37)
	rnd := rand.New(rand.NewPCG(1, 2))
	fill := func(pix []byte) {
		for i := range pix {
			pix[i] = byte(rnd.Uint32())
		}
	}
	g16, cmyk, rgba64, nrgba64 := image.NewGray16(r), image.NewCMYK(r), image.NewRGBA64(r), image.NewNRGBA64(r)
	for _, p := range [][]byte{g16.Pix, cmyk.Pix, rgba64.Pix, nrgba64.Pix} {
		fill(p)
	}
	for name, m := range map[string]image.Image{"Gray16": g16, "CMYK": cmyk, "RGBA64": rgba64, "NRGBA64": nrgba64} {
		luma, row := lumaRow(m), make([]byte, r.Dx())
		for y := r.Min.Y; y < r.Max.Y; y++ {
			luma(y, row)
			for x := range row {
				if want := grayOf(m.At(r.Min.X+x, y)); row[x] != want {
					t.Fatalf("%s at (%d,%d): %d, want %d", name, r.Min.X+x, y, row[x], want)
				}
			}
		}
		if n := testing.AllocsPerRun(10, func() { luma(r.Min.Y, row) }); n != 0 {
			t.Errorf("%s: %v allocations a row", name, n)
		}
	}
}

// TestHalf: the half-size plane is each 2×2 box's mean, rounded half up,
// on planes of odd and even sizes (a last row or column of odd ones
// dropped), whatever the levels.
func TestHalf(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	for _, size := range [][2]int{{2, 2}, {9, 3}, {16, 16}, {21, 7}, {1080, 9}} {
		p := plane{pix: make([]byte, size[0]*size[1]), w: size[0], h: size[1]}
		for i := range p.pix {
			p.pix[i] = byte(rnd.Uint32())
			if i%5 == 0 {
				p.pix[i] = 255
			}
		}
		got := half(p, nil)
		if got.w != p.w/2 || got.h != p.h/2 {
			t.Fatalf("%d×%d: half is %d×%d", p.w, p.h, got.w, got.h)
		}
		for y := range got.h {
			for x := range got.w {
				at := func(dx, dy int) int { return int(p.pix[(2*y+dy)*p.w+2*x+dx]) }
				want := (at(0, 0) + at(1, 0) + at(0, 1) + at(1, 1) + 2) / 4
				if v := int(got.pix[y*got.w+x]); v != want {
					t.Fatalf("%d×%d: pixel (%d, %d) is %d, want %d", p.w, p.h, x, y, v, want)
				}
			}
		}
	}
}

// TestNormalize: each pixel is stretched from the range its block and
// their neighbours span, interpolated bilinearly between block centres,
// to 0..255, as written out plainly here for every pixel.
func TestNormalize(t *testing.T) {
	rnd := rand.New(rand.NewPCG(11, 12))
	for _, size := range [][2]int{{5, 7}, {70, 45}, {100, 70}} {
		const cell = 32
		p := plane{pix: make([]byte, size[0]*size[1]), w: size[0], h: size[1]}
		for i := range p.pix {
			p.pix[i] = byte(100 + rnd.IntN(60) + 80*(i/p.w/40%2))
		}
		got := normalize(p, cell, nil)
		w, h := p.w, p.h
		bw, bh := (w+cell-1)/cell, (h+cell-1)/cell
		rng := func(bx, by int) (lo, hi float64) { // over the 3×3 blocks around
			mn, mx := 255, 0
			for y := max(0, (by-1)*cell); y < min(h, (by+2)*cell); y++ {
				for x := max(0, (bx-1)*cell); x < min(w, (bx+2)*cell); x++ {
					mn, mx = min(mn, int(p.pix[y*w+x])), max(mx, int(p.pix[y*w+x]))
				}
			}
			return float64(mn), float64(mx)
		}
		at := func(c, n int) (int, int, float64) {
			f := (float64(c)+0.5)/cell - 0.5
			c0 := clampInt(int(math.Floor(f)), 0, n-1)
			return c0, clampInt(c0+1, 0, n-1), math.Max(0, math.Min(1, f-float64(c0)))
		}
		for y := range h {
			y0, y1, ty := at(y, bh)
			for x := range w {
				x0, x1, tx := at(x, bw)
				l00, u00 := rng(x0, y0)
				l10, u10 := rng(x1, y0)
				l01, u01 := rng(x0, y1)
				l11, u11 := rng(x1, y1)
				l := (l00*(1-tx)+l10*tx)*(1-ty) + (l01*(1-tx)+l11*tx)*ty
				u := (u00*(1-tx)+u10*tx)*(1-ty) + (u01*(1-tx)+u11*tx)*ty
				v, d := float64(p.pix[y*w+x]), u-l
				if d < 24 {
					d = 24
				}
				if want := uint8(clampF((v-l)*255/d, 0, 255)); got.pix[y*w+x] != want {
					t.Fatalf("%d×%d: pixel (%d, %d) is %d, want %d", w, h, x, y, got.pix[y*w+x], want)
				}
			}
		}
	}
}

// TestScaleRect: the magnified window is, byte for byte, the bilinear
// interpolation of each output pixel from its four source pixels, for
// windows inside the plane and over its edges, magnified and shrunk.
func TestScaleRect(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	src := plane{pix: make([]byte, 61*47), w: 61, h: 47}
	for i := range src.pix {
		src.pix[i] = byte(rnd.Uint32())
	}
	at := func(x, y int) float64 {
		return float64(src.pix[clampInt(y, 0, src.h-1)*src.w+clampInt(x, 0, src.w-1)])
	}
	for _, r := range []image.Rectangle{image.Rect(10, 7, 40, 30), image.Rect(-9, -12, 20, 15), image.Rect(45, 30, 70, 60), image.Rect(0, 0, 61, 47)} {
		for _, k := range []float64{0.6, 1, 1.5, 2.17, 3} {
			got, inv := scaleRect(src, r, k, nil), 1/k
			if w, h := int(float64(r.Dx())*k), int(float64(r.Dy())*k); got.w != w || got.h != h {
				t.Fatalf("%v by %v: %d×%d, want %d×%d", r, k, got.w, got.h, w, h)
			}
			for y := range got.h {
				fy := (float64(y)+0.5)*inv - 0.5 + float64(r.Min.Y)
				y0 := int(math.Floor(fy))
				ty := fy - float64(y0)
				for x := range got.w {
					fx := (float64(x)+0.5)*inv - 0.5 + float64(r.Min.X)
					x0 := int(math.Floor(fx))
					tx := fx - float64(x0)
					top := at(x0, y0)*(1-tx) + at(x0+1, y0)*tx
					bot := at(x0, y0+1)*(1-tx) + at(x0+1, y0+1)*tx
					if want := uint8(top*(1-ty) + bot*ty + 0.5); got.pix[y*got.w+x] != want {
						t.Fatalf("%v by %v: pixel (%d, %d) is %d, want %d", r, k, x, y, got.pix[y*got.w+x], want)
					}
				}
			}
		}
	}
}
