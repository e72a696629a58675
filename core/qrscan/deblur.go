package qrscan

import (
	"math"
	"math/bits"
	"math/cmplx"
)

// This file undoes blur. Motion blur: a hand moving during the exposure
// smears every point of the picture along a short line, which a box kernel
// along that line models. The blur's direction and length are measured from the
// picture itself (blurKernel), and each line of pixels in that direction
// is deconvolved by a Wiener filter in the frequency domain (deblur).
// Lines are digital: a line at angle a steps one pixel along x (or y, when
// it is nearer vertical) and round(k·tan a) across, so every pixel is on
// exactly one line and a line is read and written in place, and the blur's
// length is measured in those steps. A lens out of focus blurs by a
// Gaussian, which is undone along rows and then along columns.

// lineSet is the family of digital lines at one angle across a w×h plane.
type lineSet struct {
	w, h  int
	steep bool    // lines step along y (the angle is nearer vertical)
	slope float64 // the cross offset per step
}

func newLineSet(w, h int, a float64) lineSet {
	c, s := math.Cos(a), math.Sin(a)
	if math.Abs(c) >= math.Abs(s) {
		return lineSet{w: w, h: h, slope: s / c}
	}
	return lineSet{w: w, h: h, steep: true, slope: c / s}
}

// span returns the range of line numbers and the longest line's length.
func (l lineSet) span() (first, last, longest int) {
	along, across := l.w, l.h
	if l.steep {
		along, across = l.h, l.w
	}
	d := int(math.Round(float64(along-1) * l.slope))
	return min(0, -d), across - 1 + max(0, -d), along
}

// each calls f with the index into the plane of every pixel of line n, in
// order along it, and the step it is at.
func (l lineSet) each(n int, f func(i, k int)) {
	along, across, stride, step := l.w, l.h, l.w, 1
	if l.steep {
		along, across, stride, step = l.h, l.w, 1, l.w
	}
	for k := range along {
		c := n + int(math.Round(float64(k)*l.slope))
		if c < 0 || c >= across {
			continue
		}
		f(c*stride+k*step, k)
	}
}

// blurAngles is how many directions blurKernel tells apart over 180°.
const blurAngles = 24

// blurKernel measures the motion blur of p: its direction, the one along
// which the picture changes least (a blur smooths along its line and
// leaves edges across it), and its length in steps of that direction's
// digital lines, where the autocorrelation of the differences along the
// lines is most negative (a box of length L turns each edge into a ramp L
// steps wide, whose two ends have opposite signs). It samples every
// other row and column, and every eighth line. It reports false when the
// picture looks no more smoothed in one direction than in the others
// (minAnisotropy), or no length stands out: no motion blur to undo.
func blurKernel(p plane) (angle float64, length int, ok bool) {
	var energy [blurAngles]float64
	var cs, sn [blurAngles]float64
	for j := range blurAngles {
		a := float64(j) * math.Pi / blurAngles
		cs[j], sn[j] = math.Cos(a), math.Sin(a)
	}
	gradients(p, func(gx, gy int) {
		if gx == 0 && gy == 0 {
			return
		}
		for j := range blurAngles {
			energy[j] += math.Abs(float64(gx)*cs[j] + float64(gy)*sn[j])
		}
	})
	best, most := 0, 0
	for j := range energy {
		if energy[j] < energy[best] {
			best = j
		}
		if energy[j] > energy[most] {
			most = j
		}
	}
	if energy[most] < minAnisotropy*energy[best] {
		return 0, 0, false
	}
	angle = float64(best) * math.Pi / blurAngles
	// Autocorrelation of the differences along the lines.
	const maxLag = 40
	var r [maxLag + 1]float64
	ls := newLineSet(p.w, p.h, angle)
	first, last, longest := ls.span()
	d := make([]float64, 0, longest)
	for n := first; n <= last; n += 8 {
		d = d[:0]
		prev, prevK := -1, -2
		ls.each(n, func(i, k int) {
			v := int(p.pix[i])
			if prevK == k-1 {
				d = append(d, float64(v-prev))
			} else {
				d = d[:0] // a gap: the line left the plane
			}
			prev, prevK = v, k
		})
		for lag := 1; lag <= maxLag; lag++ {
			for i := lag; i < len(d); i++ {
				r[lag] += d[i] * d[i-lag]
			}
		}
	}
	length = 0
	for lag := 3; lag <= maxLag; lag++ {
		if r[lag] < 0 && (length == 0 || r[lag] < r[length]) {
			length = lag
		}
	}
	return angle, length, length != 0
}

// minAnisotropy is how much more a picture must change across its
// smoothest direction than along it for blurKernel to call it blurred by
// motion.
const minAnisotropy = 1.25

// boxTaps returns the taps of a box of length steps as deconvolve takes
// them: the centre's weight, then the weight at ±1, ±2 and so on (an even
// length has half a tap at each end, to stay symmetric).
func boxTaps(length int) []float64 {
	taps := make([]float64, length/2+1)
	for i := range taps {
		taps[i] = 1 / float64(length)
	}
	if length%2 == 0 {
		taps[length/2] /= 2
	}
	return taps
}

// sharpEdges reports whether p has steps a blur of σ 3 px would have
// smoothed away: on 0.5 % of pixels (every other row and column sampled),
// a change of 128 levels or more over two pixels, across and down
// together. A Gaussian of σ 3 or more leaves none (the steepest slope of
// a full black-to-white step is 34 levels a pixel); sharp text, finder
// look-alikes and noise leave 2 to 18 % (measured on the corpus).
func sharpEdges(p plane) bool {
	n, steep := 0, 0
	gradients(p, func(gx, gy int) {
		n++
		if max(gx, -gx)+max(gy, -gy) >= 128 {
			steep++
		}
	})
	return steep*200 > n
}

// gradients calls f with the change across and down p (central
// differences, over two pixels) at every other pixel of every other row,
// the edge ones left out: the sample blurKernel and sharpEdges measure.
func gradients(p plane, f func(gx, gy int)) {
	w := p.w
	for y := 1; y < p.h-1; y += 2 {
		for x := 1; x < w-1; x += 2 {
			i := y*w + x
			f(int(p.pix[i+1])-int(p.pix[i-1]), int(p.pix[i+w])-int(p.pix[i-w]))
		}
	}
}

// gaussTaps returns the taps of a Gaussian of deviation sigma, to 3σ, as
// deconvolve takes them.
func gaussTaps(sigma float64) []float64 {
	taps := make([]float64, int(math.Ceil(3*sigma))+1)
	sum := 0.0
	for i := range taps {
		taps[i] = math.Exp(-float64(i*i) / (2 * sigma * sigma))
		sum += taps[i]
		if i > 0 {
			sum += taps[i]
		}
	}
	for i := range taps {
		taps[i] /= sum
	}
	return taps
}

// deconvolve writes into dst p with the blur of the symmetric kernel taps
// (boxTaps) along the digital lines at angle undone by a Wiener filter of
// noise-to-signal ratio nsr: each line, padded by its end values, is
// transformed, divided by the kernel's transfer function (regularised
// where that is near zero), and transformed back. Two lines go through
// each transform, one as its real part and one as its imaginary part: the
// kernel is symmetric, so its transfer function is real and keeps them
// apart.
func deconvolve(p plane, angle float64, taps []float64, nsr float64, dst []byte) plane {
	dst = grow(dst, p.w*p.h)
	ls := newLineSet(p.w, p.h, angle)
	first, last, longest := ls.span()
	pad := 4 * len(taps)
	n := 1 << bits.Len(uint(longest+2*pad-1))
	h := make([]complex128, n)
	for k, v := range taps {
		h[k] = complex(v, 0)
		h[(n-k)%n] = complex(v, 0)
	}
	plan := newFFT(n)
	plan.transform(h, false)
	filter := make([]float64, n)
	for i, v := range h {
		filter[i] = real(v) / (real(v)*real(v) + nsr)
	}
	buf := make([]complex128, n)
	idx := [2][]int32{make([]int32, 0, longest), make([]int32, 0, longest)}
	load := func(line, part int) {
		idx[part] = idx[part][:0]
		if line > last {
			return
		}
		ls.each(line, func(i, _ int) { idx[part] = append(idx[part], int32(i)) })
	}
	for line := first; line <= last; line += 2 {
		load(line, 0)
		load(line+1, 1)
		for k := range buf {
			buf[k] = 0
		}
		for part, ix := range idx {
			if len(ix) == 0 {
				continue
			}
			// The line at pad, its first value repeated before it and its
			// last after it, to the end of the (circular) buffer.
			lo, hi := float64(p.pix[ix[0]]), float64(p.pix[ix[len(ix)-1]])
			for k := range n {
				j := k - pad
				v := lo
				switch {
				case j >= len(ix):
					v = hi
					if k >= n-pad {
						v = lo // wraps round to the start
					}
				case j >= 0:
					v = float64(p.pix[ix[j]])
				}
				if part == 0 {
					buf[k] = complex(v, imag(buf[k]))
				} else {
					buf[k] = complex(real(buf[k]), v)
				}
			}
		}
		plan.transform(buf, false)
		for k := range buf {
			buf[k] *= complex(filter[k], 0)
		}
		plan.transform(buf, true)
		for part, ix := range idx {
			for j, i := range ix {
				v := real(buf[j+pad])
				if part == 1 {
					v = imag(buf[j+pad])
				}
				dst[i] = uint8(max(0, min(255, v+0.5)))
			}
		}
	}
	return plane{pix: dst, w: p.w, h: p.h}
}

// fftPlan holds what transforms of one length share: the bit-reversal
// permutation and the twiddle factors, computed once (and exactly, not by
// repeated multiplication).
type fftPlan struct {
	rev    []int32
	tw, iw []complex128 // e^(∓2πik/n), k < n/2: forward and inverse
}

// newFFT returns the plan of transforms of length n, a power of two.
func newFFT(n int) *fftPlan {
	f := &fftPlan{rev: make([]int32, n), tw: make([]complex128, n/2), iw: make([]complex128, n/2)}
	shift := 64 - bits.Len(uint(n-1))
	for i := range n {
		f.rev[i] = int32(bits.Reverse64(uint64(i)) >> shift)
	}
	if n == 1 {
		f.rev[0] = 0
	}
	for k := range f.tw {
		f.tw[k] = cmplx.Rect(1, -2*math.Pi*float64(k)/float64(n))
		f.iw[k] = cmplx.Conj(f.tw[k])
	}
	return f
}

// transform transforms a in place (radix 2, len(a) the plan's length);
// inverse transforms back and divides by len(a).
func (f *fftPlan) transform(a []complex128, inverse bool) {
	n := len(a)
	for i, j := range f.rev {
		if i < int(j) {
			a[i], a[j] = a[j], a[i]
		}
	}
	tw := f.tw
	if inverse {
		tw = f.iw
	}
	for size := 2; size <= n; size <<= 1 {
		half, stride := size/2, n/size
		for start := 0; start < n; start += size {
			lo, hi := a[start:start+half], a[start+half:start+size]
			for k := range lo {
				v := hi[k] * tw[k*stride]
				lo[k], hi[k] = lo[k]+v, lo[k]-v
			}
		}
	}
	if inverse {
		inv := complex(1/float64(n), 0)
		for i := range a {
			a[i] *= inv
		}
	}
}

// fft transforms a in place; see fftPlan.transform.
func fft(a []complex128, inverse bool) { newFFT(len(a)).transform(a, inverse) }
