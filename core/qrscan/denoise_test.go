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

// TestBoxMean: each pixel is the rounded mean of the square of side 2r+1
// around it, cut by the plane's edges, on planes narrower and wider than
// the square.
func TestBoxMean(t *testing.T) {
	rnd := rand.New(rand.NewPCG(9, 10))
	for _, c := range []struct{ w, h, r int }{{1, 1, 2}, {5, 3, 2}, {3, 9, 4}, {40, 23, 3}, {64, 64, 6}, {17, 30, 0}} {
		src := make([]byte, c.w*c.h)
		for i := range src {
			src[i] = byte(rnd.Uint32())
		}
		dst := make([]byte, len(src))
		boxMean(src, dst, make([]byte, len(src)), c.w, c.h, c.r)
		for y := range c.h {
			for x := range c.w {
				sum, n := 0, 0
				for yy := max(0, y-c.r); yy <= min(c.h-1, y+c.r); yy++ {
					// Rows are averaged first and rounded, as boxMean does.
					rs, rn := 0, 0
					for xx := max(0, x-c.r); xx <= min(c.w-1, x+c.r); xx++ {
						rs, rn = rs+int(src[yy*c.w+xx]), rn+1
					}
					sum, n = sum+(rs+rn/2)/rn, n+1
				}
				if want := (sum + n/2) / n; int(dst[y*c.w+x]) != want {
					t.Fatalf("%d×%d, r %d: pixel (%d, %d) is %d, want %d", c.w, c.h, c.r, x, y, dst[y*c.w+x], want)
				}
			}
		}
	}
}
