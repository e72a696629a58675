package qrscan

import (
	"bytes"
	"errors"
	"image/png"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBlurKernel: the direction and length of a motion blur are measured
// from the blurred picture, within one of blurKernel's angle steps and
// one step of length, and a picture without blur is not taken for one.
func TestBlurKernel(t *testing.T) {
	f := func(length int, deg float64) {
		t.Helper()
		r := rand.New(rand.NewPCG(3, uint64(length)))
		img := smallScreen(r, bankPayload(r), 1)
		motionBlur(img, length, deg)
		p := toGray(img, 1, nil)
		a, l, ok := blurKernel(p)
		if !ok {
			t.Errorf("%d px at %v°: no blur found", length, deg)
			return
		}
		// The angle, modulo 180°, within a step; the length in steps of
		// the digital lines, which are longer than a pixel off the axes.
		got := a * 180 / math.Pi
		diff := math.Mod(math.Abs(got-deg)+180, 180)
		if diff > 90 {
			diff = 180 - diff
		}
		rad := deg * math.Pi / 180
		steps := float64(length) * max(math.Abs(math.Cos(rad)), math.Abs(math.Sin(rad)))
		if diff > 180.0/blurAngles || math.Abs(float64(l)-steps) > 1.5 {
			t.Errorf("%d px at %v°: measured %d steps at %.1f°, want %.1f steps", length, deg, l, got, steps)
		}
	}
	f(5, 0)
	f(9, 90)
	f(11, 37)
	f(13, 148)
	f(13, 111)
}

// TestDeconvolveUndoesBox: bars of 4 px blurred by a box of 11, thresholded
// at the middle level, are a quarter wrong; deconvolved, a fifth as many.
func TestDeconvolveUndoesBox(t *testing.T) {
	const w, h, length = 300, 4, 11
	src := plane{pix: make([]byte, w*h), w: w, h: h}
	r := rand.New(rand.NewPCG(5, 6))
	v := byte(40)
	for x := range w {
		if x%4 == 0 && r.IntN(2) == 0 { // bars of 4 px, dark or light at random
			v ^= 40 ^ 220
		}
		for y := range h {
			src.pix[y*w+x] = v
		}
	}
	blurred := plane{pix: make([]byte, w*h), w: w, h: h}
	for y := range h {
		for x := range w {
			sum := 0
			for k := -length / 2; k <= length/2; k++ {
				sum += int(src.pix[y*w+clampInt(x+k, 0, w-1)])
			}
			blurred.pix[y*w+x] = byte((sum + length/2) / length)
		}
	}
	out := deconvolve(blurred, 0, boxTaps(length), 0.02, nil)
	wrong := func(p plane) int {
		n := 0
		for i, v := range p.pix {
			if (v > 130) != (src.pix[i] > 130) {
				n++
			}
		}
		return n
	}
	if b, d := wrong(blurred), wrong(out); 5*d > b || b < len(src.pix)/5 {
		t.Errorf("%d of %d pixels on the wrong side deconvolved, %d blurred", d, len(src.pix), b)
	}
}

// TestFFTRoundTrip: the inverse transform undoes the forward one, and the
// forward one of a pure tone is a single bin.
func TestFFTRoundTrip(t *testing.T) {
	const n = 64
	a := make([]complex128, n)
	for i := range a {
		a[i] = cmplx.Rect(1, 2*math.Pi*5*float64(i)/n)
	}
	b := append([]complex128(nil), a...)
	fft(b, false)
	for i, v := range b {
		want := 0.0
		if i == 5 {
			want = n
		}
		if cmplx.Abs(v-complex(want, 0)) > 1e-9 {
			t.Fatalf("bin %d: %v, want %v", i, v, want)
		}
	}
	fft(b, true)
	for i := range a {
		if cmplx.Abs(a[i]-b[i]) > 1e-9 {
			t.Fatalf("sample %d: %v after the round trip, want %v", i, b[i], a[i])
		}
	}
}

// TestBlurredNoCode: a motion-blurred picture with finder look-alikes and
// no code goes through every pass, the unblur pass included, and is still
// not found; it gives no payload.
func TestBlurredNoCode(t *testing.T) {
	img := busyImage(700, 1400)
	motionBlur(img, 9, 30)
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	var passes []string
	passHook = func(n string) { passes = append(passes, n) }
	defer func() { passHook = nil }()
	got, err := Scan(buf.Bytes(), isSlip)
	if !errors.Is(err, ErrNoQR) || got != "" {
		t.Errorf("got %q, %v; want ErrNoQR", got, err)
	}
	if a, l, ok := blurKernel(toGray(img, 1, nil)); !ok {
		t.Errorf("the blur was not measured, so the unblur pass did not run")
	} else {
		t.Logf("measured %d steps at %.1f°", l, a*180/math.Pi)
	}
}

// TestSharpEdges: a slip out of focus by σ 3 px has no sharp edges and gets
// the defocus pass; the same slip in focus, or noisy, has them and skips it.
func TestSharpEdges(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	img := smallScreen(r, bankPayload(r), 0)
	if !sharpEdges(toGray(img, 1, nil)) {
		t.Error("a sharp slip: no sharp edges found")
	}
	noisy := toRGBA(img)
	gaussNoise(r, noisy, 30)
	if !sharpEdges(toGray(noisy, 1, nil)) {
		t.Error("a noisy slip: no sharp edges found")
	}
	gaussBlur(img, 3)
	if sharpEdges(toGray(img, 1, nil)) {
		t.Error("a slip blurred by σ 3 px: sharp edges found")
	}
}

// TestFFTAsDFT: the transform of random values is the discrete Fourier
// transform's, computed from its definition, and the inverse brings them
// back, at every length from 1 to 256 that is a power of two and at
// lengths of 2^a·3^b.
func TestFFTAsDFT(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 2, 4, 8, 16, 32, 64, 128, 256, 3, 6, 9, 12, 24, 27, 48, 54, 81, 96, 162, 243, 432} {
		a := make([]complex128, n)
		for i := range a {
			a[i] = complex(r.Float64()*255, r.Float64()*255)
		}
		got := append([]complex128(nil), a...)
		fft(got, false)
		for k := range n {
			want := complex(0, 0)
			for j, v := range a {
				want += v * cmplx.Rect(1, -2*math.Pi*float64(j*k)/float64(n))
			}
			if cmplx.Abs(got[k]-want) > 1e-6 {
				t.Fatalf("length %d, bin %d: %v, want %v", n, k, got[k], want)
			}
		}
		fft(got, true)
		for i := range a {
			if cmplx.Abs(got[i]-a[i]) > 1e-9 {
				t.Fatalf("length %d, sample %d: %v after the round trip, want %v", n, i, got[i], a[i])
			}
		}
	}
}

// TestFFTLen: the transform length is the shortest 2^a·3^b at least n.
func TestFFTLen(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 5: 6, 7: 8, 10: 12, 13: 16, 17: 18, 100: 108, 782: 864, 1025: 1152, 1537: 1728, 1623: 1728, 1729: 1944, 2000: 2048} {
		if got := fftLen(n); got != want {
			t.Errorf("fftLen(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestLinesCoverPlane: at every angle, the digital lines' pixels
// (appendLine) are those each visits, in the same order, and cover the
// plane once.
func TestLinesCoverPlane(t *testing.T) {
	for _, size := range [][2]int{{37, 23}, {23, 37}, {1, 9}, {9, 1}} {
		w, h := size[0], size[1]
		for j := range 48 {
			a := float64(j) * math.Pi / 48
			ls := newLineSet(w, h, a)
			first, last, _ := ls.span()
			seen := make([]int, w*h)
			for n := first - 2; n <= last+2; n++ {
				var want []int32
				ls.each(n, func(i, _ int) { want = append(want, int32(i)) })
				got := ls.appendLine(nil, n)
				if !slices.Equal(got, want) {
					t.Fatalf("%d×%d at %.1f°, line %d: %v, want %v", w, h, a*180/math.Pi, n, got, want)
				}
				for _, i := range got {
					seen[i]++
				}
			}
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("%d×%d at %.1f°: pixel %d on %d lines", w, h, a*180/math.Pi, i, c)
				}
			}
		}
	}
}
