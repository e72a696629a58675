package qrscan

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMedian3: each pixel is the median of its 3×3 neighbourhood, the
// edge repeated, as sorting the nine values gives.
func TestMedian3(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, sz := range [][2]int{{1, 1}, {1, 5}, {7, 1}, {2, 2}, {13, 9}} {
		w, h := sz[0], sz[1]
		src := plane{pix: make([]byte, w*h), w: w, h: h}
		for i := range src.pix {
			src.pix[i] = uint8(r.IntN(256))
		}
		got := median3(src, nil)
		for y := range h {
			for x := range w {
				var v []byte
				for dy := -1; dy <= 1; dy++ {
					for dx := -1; dx <= 1; dx++ {
						v = append(v, src.pix[clampInt(y+dy, 0, h-1)*w+clampInt(x+dx, 0, w-1)])
					}
				}
				slices.Sort(v)
				if got.pix[y*w+x] != v[4] {
					t.Fatalf("%d×%d at (%d,%d): %d, want %d", w, h, x, y, got.pix[y*w+x], v[4])
				}
			}
		}
	}
}
