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
	steep bool  // lines step along y (the angle is nearer vertical)
	off   []int // the cross offset at each step along, the same for every line
}

func newLineSet(w, h int, a float64) lineSet {
	c, s := math.Cos(a), math.Sin(a)
	l := lineSet{w: w, h: h}
	slope, along := s/c, w
	if math.Abs(c) < math.Abs(s) {
		l.steep, slope, along = true, c/s, h
	}
	l.off = make([]int, along)
	for k := range l.off {
		l.off[k] = int(math.Round(float64(k) * slope))
	}
	return l
}

// span returns the range of line numbers and the longest line's length.
func (l lineSet) span() (first, last, longest int) {
	across := l.h
	if l.steep {
		across = l.w
	}
	d := l.off[len(l.off)-1]
	return min(0, -d), across - 1 + max(0, -d), len(l.off)
}

// each calls f with the index into the plane of every pixel of line n, in
// order along it, and the step it is at.
func (l lineSet) each(n int, f func(i, k int)) {
	across, stride, step := l.h, l.w, 1
	if l.steep {
		across, stride, step = l.w, 1, l.w
	}
	for k, o := range l.off {
		if c := n + o; c >= 0 && c < across {
			f(c*stride+k*step, k)
		}
	}
}

// appendLine appends the indexes into the plane of the pixels of line n,
// in order along it, to dst.
func (l lineSet) appendLine(dst []int32, n int) []int32 {
	across, stride, step := l.h, l.w, 1
	if l.steep {
		across, stride, step = l.w, 1, l.w
	}
	for k, o := range l.off {
		if c := n + o; c >= 0 && c < across {
			dst = append(dst, int32(c*stride+k*step))
		}
	}
	return dst
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
	parts := [2][]float64{make([]float64, n), make([]float64, n)}
	idx := [2][]int32{make([]int32, 0, longest), make([]int32, 0, longest)}
	for line := first; line <= last; line += 2 {
		idx[0] = ls.appendLine(idx[0][:0], line)
		idx[1] = idx[1][:0]
		if line+1 <= last {
			idx[1] = ls.appendLine(idx[1], line+1)
		}
		for part, ix := range idx {
			// The line at pad, its first value repeated before it and its
			// last after it, to the end of the (circular) buffer, where
			// the first value comes round again.
			v := parts[part]
			if len(ix) == 0 {
				clear(v)
				continue
			}
			lo, hi := float64(p.pix[ix[0]]), float64(p.pix[ix[len(ix)-1]])
			for k := range pad {
				v[k], v[n-pad+k] = lo, lo
			}
			for j, i := range ix {
				v[pad+j] = float64(p.pix[i])
			}
			for k := pad + len(ix); k < n-pad; k++ {
				v[k] = hi
			}
		}
		// Into the transform's input order as it is filled, and back into
		// it as it is filtered.
		for k, j := range plan.rev {
			buf[j] = complex(parts[0][k], parts[1][k])
		}
		plan.butterflies(buf, false)
		for i, j := range plan.rev {
			if i <= int(j) {
				a, b := buf[i], buf[j]
				fa, fb := filter[i], filter[j]
				buf[i], buf[j] = complex(real(b)*fb, imag(b)*fb), complex(real(a)*fa, imag(a)*fa)
			}
		}
		plan.butterflies(buf, true)
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
// repeated multiplication), stage after stage so that a stage reads its
// own in order.
type fftPlan struct {
	rev    []int32
	tw, iw []complex128 // forward and inverse: a stage of size s from s/2, e^(∓2πik/s), k < s/2
}

// newFFT returns the plan of transforms of length n, a power of two.
func newFFT(n int) *fftPlan {
	f := &fftPlan{rev: make([]int32, n), tw: make([]complex128, n), iw: make([]complex128, n)}
	shift := 64 - bits.Len(uint(n-1))
	for i := range n {
		f.rev[i] = int32(bits.Reverse64(uint64(i)) >> shift)
	}
	if n == 1 {
		f.rev[0] = 0
	}
	for size := 2; size <= n; size <<= 1 {
		for k := range size / 2 {
			// e^(-2πi·k(n/size)/n), as a table of length n would hold it.
			f.tw[size/2+k] = cmplx.Rect(1, -2*math.Pi*float64(k*(n/size))/float64(n))
			f.iw[size/2+k] = cmplx.Conj(f.tw[size/2+k])
		}
	}
	return f
}

// transform transforms a in place (radix 2, len(a) the plan's length);
// inverse transforms back and divides by len(a).
func (f *fftPlan) transform(a []complex128, inverse bool) {
	for i, j := range f.rev {
		if i < int(j) {
			a[i], a[j] = a[j], a[i]
		}
	}
	f.butterflies(a, inverse)
}

// butterflies is transform on a already in bit-reversed order (f.rev).
func (f *fftPlan) butterflies(a []complex128, inverse bool) {
	n := len(a)
	tw := f.tw
	if inverse {
		tw = f.iw
	}
	size := 4
	if n >= 4 {
		// The first two stages together, four values at a time: the
		// first's only twiddle is 1, the second's are 1 and tw[3].
		t := tw[3]
		for i := 0; i+3 < n; i += 4 {
			q := (*[4]complex128)(a[i:])
			b0, b1, b2, b3 := q[0]+q[1], q[0]-q[1], q[2]+q[3], q[2]-q[3]
			v := b3 * t
			q[0], q[1], q[2], q[3] = b0+b2, b1+v, b0-b2, b1-v
		}
		size = 8
	} else if n == 2 {
		a[0], a[1] = a[0]+a[1], a[0]-a[1]
	}
	// Then two stages at a time, sizes s and 2s over the four quarters of
	// 2s values: the operations of one stage after the other, with half
	// the loads and stores.
	for ; 2*size <= n; size <<= 2 {
		m := size / 2
		w1, w2 := tw[m:size], tw[size:2*size]
		for start := 0; start < n; start += 2 * size {
			q := a[start : start+2*size]
			q0, q1, q2, q3 := q[:m], q[m:2*m], q[2*m:3*m], q[3*m:4*m]
			for k, t := range w1[:len(q0)] {
				v1, v3 := q1[k]*t, q3[k]*t
				b0, b1, b2, b3 := q0[k]+v1, q0[k]-v1, q2[k]+v3, q2[k]-v3
				v2, v3 := b2*w2[k], b3*w2[k+m]
				q0[k], q2[k], q1[k], q3[k] = b0+v2, b0-v2, b1+v3, b1-v3
			}
		}
	}
	if size <= n { // a last stage alone
		half := size / 2
		w := tw[half:size]
		for start := 0; start < n; start += size {
			lo, hi := a[start:start+half], a[start+half:start+size]
			hi = hi[:len(lo)]
			for k, t := range w[:len(lo)] {
				v := hi[k] * t
				lo[k], hi[k] = lo[k]+v, lo[k]-v
			}
		}
	}
	if inverse {
		inv := 1 / float64(n)
		for i, v := range a {
			a[i] = complex(real(v)*inv, imag(v)*inv)
		}
	}
}

// fft transforms a in place; see fftPlan.transform.
func fft(a []complex128, inverse bool) { newFFT(len(a)).transform(a, inverse) }
