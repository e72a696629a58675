package qrscan

import (
	"image"
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
