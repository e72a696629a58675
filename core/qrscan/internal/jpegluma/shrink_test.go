package jpegluma

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestShrinkBasis: a block of low frequencies alone, shrunk by
// reconstructShrunk, is its full inverse DCT box-averaged (within
// rounding), at every scale; flat blocks (the mean alone) too.
func TestShrinkBasis(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range []int{2, 4, 8} {
		n := 8 / s
		for i := range 200 {
			var b block
			for v := range n {
				for u := range n {
					if i%4 != 0 { // one in four flat
						b[v*8+u] = int32(r.IntN(61) - 30)
					}
				}
			}
			b[0] = int32(r.IntN(401) - 200)
			full := b
			idct(&full)
			d := decoder{scale: s, lumStride: n, lum: make([]byte, n*n)}
			d.reconstructShrunk(&b, 0, 0)
			for y := range n {
				for x := range n {
					sum := 0.0
					for yy := range s {
						for xx := range s {
							sum += float64(full[(y*s+yy)*8+x*s+xx])
						}
					}
					want := math.Max(0, math.Min(255, sum/float64(s*s)+128))
					if got := float64(d.lum[y*n+x]); math.Abs(got-want) > 1.5 {
						t.Fatalf("1/%d, pixel (%d, %d): %v, want %.1f", s, x, y, got, want)
					}
				}
			}
		}
	}
}
