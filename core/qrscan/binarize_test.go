package qrscan

import (
	"math/rand/v2"
	"testing"
)

// TestHybridAsGozxing: hybridBits binarizes as gozxing's HybridBinarizer
// does, bit for bit, on planes of every shape (sizes not a multiple of 8,
// so the last blocks overlap; flat areas, where the black point comes from
// the neighbours; noise; a busy picture), reusing its memory between
// planes of different sizes.
func TestHybridAsGozxing(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var hb hybridBits
	busy := toGray(busyImage(333, 251), 1, nil)
	planes := []plane{busy, toGray(busyImage(1080, 200), 1, nil), busy}
	for _, size := range [][2]int{{40, 40}, {41, 57}, {64, 64}, {203, 99}, {640, 481}} {
		p := plane{pix: make([]byte, size[0]*size[1]), w: size[0], h: size[1]}
		for y := range p.h {
			for x := range p.w {
				v := 200 // flat light, dark patches, a gradient, noise
				switch (x/37 + y/29) % 4 {
				case 1:
					v = 40 + r.IntN(10)
				case 2:
					v = x * 255 / p.w
				case 3:
					v = r.IntN(256)
				}
				p.pix[y*p.w+x] = uint8(v)
			}
		}
		planes = append(planes, p)
	}
	for _, p := range planes {
		want, err := binarize(p, hybrid)
		if err != nil {
			t.Fatal(err)
		}
		got, err := hb.binarize(p)
		if err != nil {
			t.Fatal(err)
		}
		if got.GetWidth() != p.w || got.GetHeight() != p.h {
			t.Fatalf("%d×%d plane: a %d×%d matrix", p.w, p.h, got.GetWidth(), got.GetHeight())
		}
		for y := range p.h {
			for x := range p.w {
				if got.Get(x, y) != want.Get(x, y) {
					t.Fatalf("%d×%d plane: pixel (%d, %d) is %v, gozxing says %v", p.w, p.h, x, y, got.Get(x, y), want.Get(x, y))
				}
			}
		}
	}
}
