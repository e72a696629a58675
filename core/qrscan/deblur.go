package qrscan

import (
	"math"
	"math/bits"
	"math/cmplx"
	"sort"
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
// in order along it, to dst. The cross offsets only grow or only shrink
// along a line, so the steps inside the plane are one run, found by
// binary search.
func (l lineSet) appendLine(dst []int32, n int) []int32 {
	across, stride, step := l.h, l.w, 1
	if l.steep {
		across, stride, step = l.w, 1, l.w
	}
	off := l.off
	var k0, k1 int
	if off[len(off)-1] >= off[0] { // 0 ≤ n+o < across, o growing
		k0 = sort.Search(len(off), func(k int) bool { return off[k] >= -n })
		k1 = sort.Search(len(off), func(k int) bool { return off[k] >= across-n })
	} else {
		k0 = sort.Search(len(off), func(k int) bool { return off[k] < across-n })
		k1 = sort.Search(len(off), func(k int) bool { return off[k] < -n })
	}
	if k1 <= k0 {
		return dst
	}
	i := len(dst)
	dst = append(dst, make([]int32, k1-k0)...)
	out, base := dst[i:], n*stride+k0*step
	for j, o := range off[k0:k1] {
		out[j] = int32(base + o*stride + j*step)
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
// apart. The forward transform leaves its output in its own order and the
// inverse takes it so (fftPlan.forward, fftPlan.backward): the filter is
// computed in that order, the lines are never permuted. The transform's
// length is the shortest of the form 2^a·3^b that holds a padded line:
// 1,728 for lines of 1,600 pixels, not 2,048.
func deconvolve(p plane, angle float64, taps []float64, nsr float64, dst []byte) plane {
	dst = grow(dst, p.w*p.h)
	ls := newLineSet(p.w, p.h, angle)
	first, last, longest := ls.span()
	pad := 4 * len(taps)
	n := fftLen(longest + 2*pad)
	h := make([]complex128, n)
	for k, v := range taps {
		h[k] = complex(v, 0)
		h[(n-k)%n] = complex(v, 0)
	}
	plan := newFFT(n)
	plan.forward(h)
	// The filter at the forward transform's output order, with the
	// inverse's division by n.
	filter := make([]float64, n)
	for i, v := range h {
		filter[i] = real(v) / (real(v)*real(v) + nsr) / float64(n)
	}
	buf := make([]complex128, n)
	idx := [2][]int32{make([]int32, 0, longest), make([]int32, 0, longest)}
	for line := first; line <= last; line += 2 {
		idx[0] = ls.appendLine(idx[0][:0], line)
		idx[1] = idx[1][:0]
		if line+1 <= last {
			idx[1] = ls.appendLine(idx[1], line+1)
		}
		fillLines(buf, p.pix, idx[0], idx[1], pad)
		plan.forward(buf)
		for i, f := range filter {
			v := buf[i]
			buf[i] = complex(real(v)*f, imag(v)*f)
		}
		plan.backward(buf)
		out := buf[pad:]
		for j, i := range idx[0] {
			dst[i] = clampByte(real(out[j]) + 0.5)
		}
		for j, i := range idx[1] {
			dst[i] = clampByte(imag(out[j]) + 0.5)
		}
	}
	return plane{pix: dst, w: p.w, h: p.h}
}

// clampByte returns v, within 0 to 255, as a byte (its fraction dropped):
// max(0, min(255, v)) without the NaN and signed zero cases, which a
// filtered line has none of.
func clampByte(v float64) byte {
	if v <= 0 {
		return 0
	}
	if v >= 255 {
		return 255
	}
	return byte(v)
}

// fillLines writes into buf the pixels of pix at a as real parts and at b
// as imaginary parts, each line at pad, its first value repeated before
// it and its last after it, to the end of the (circular) buffer, where the
// first value comes round again; an empty line is zeros.
func fillLines(buf []complex128, pix []byte, a, b []int32, pad int) {
	ends := func(ix []int32) (lo, hi float64) {
		if len(ix) == 0 {
			return 0, 0
		}
		return float64(pix[ix[0]]), float64(pix[ix[len(ix)-1]])
	}
	loA, hiA := ends(a)
	loB, hiB := ends(b)
	n := len(buf)
	for k := range pad {
		buf[k], buf[n-pad+k] = complex(loA, loB), complex(loA, loB)
	}
	mid := buf[pad : n-pad]
	both := min(len(a), len(b))
	for j := range both {
		mid[j] = complex(float64(pix[a[j]]), float64(pix[b[j]]))
	}
	for j := both; j < len(a); j++ {
		mid[j] = complex(float64(pix[a[j]]), hiB)
	}
	for j := both; j < len(b); j++ {
		mid[j] = complex(hiA, float64(pix[b[j]]))
	}
	for j := max(len(a), len(b)); j < len(mid); j++ {
		mid[j] = complex(hiA, hiB)
	}
}

// fftLen returns the shortest transform length of the form 2^a·3^b that
// is at least n.
func fftLen(n int) int {
	best := 1 << bits.Len(uint(max(1, n)-1))
	for p3 := 3; p3 < best; p3 *= 3 {
		m := p3
		for m < n {
			m *= 2
		}
		best = min(best, m)
	}
	return best
}

// fftPlan holds what transforms of one length n = 2^a·3^b share: the
// order the forward transform leaves its output in, and the twiddle
// factors, computed once (and exactly, not by repeated multiplication),
// stage after stage so that a stage reads its own in order. The forward
// transform runs the radix-3 stages first, largest first, then radix-2
// ones within blocks of 2^a values (dif); the backward one the same
// stages in the opposite order (dit, then radix 3).
type fftPlan struct {
	order  []int32      // the frequency the forward transform leaves at each position
	n2     int          // 2^a, the length of the radix-2 blocks
	tw, iw []complex128 // radix 2, forward and inverse: a stage of size s from s/2, e^(∓2πik/s), k < s/2
	// Radix 3, one slice a stage, largest first: for a stage of size
	// s = 3m, e^(∓2πij/s) for each j < m, then e^(∓2πi2j/s).
	t3, i3 [][]complex128
}

// newFFT returns the plan of transforms of length n, of the form 2^a·3^b.
func newFFT(n int) *fftPlan {
	f := &fftPlan{n2: n}
	for f.n2%3 == 0 {
		f.n2 /= 3
	}
	n2 := f.n2
	f.tw, f.iw = make([]complex128, n2), make([]complex128, n2)
	for size := 2; size <= n2; size <<= 1 {
		for k := range size / 2 {
			// e^(-2πi·k(n2/size)/n2), as a table of length n2 would hold it.
			f.tw[size/2+k] = cmplx.Rect(1, -2*math.Pi*float64(k*(n2/size))/float64(n2))
			f.iw[size/2+k] = cmplx.Conj(f.tw[size/2+k])
		}
	}
	for s := n; s > n2; s /= 3 {
		m := s / 3
		t, it := make([]complex128, 2*m), make([]complex128, 2*m)
		for j := range m {
			for e := range 2 {
				t[e*m+j] = cmplx.Rect(1, -2*math.Pi*float64((e+1)*j)/float64(s))
				it[e*m+j] = cmplx.Conj(t[e*m+j])
			}
		}
		f.t3, f.i3 = append(f.t3, t), append(f.i3, it)
	}
	// The order: bit reversal within a radix-2 block; a radix-3 stage of
	// size s = 3m leaves the frequencies 3k+r of its input in its r-th
	// third, in the order of the stages after it.
	f.order = make([]int32, n)
	shift := 64 - bits.Len(uint(n2-1))
	for i := range n2 {
		if n2 > 1 {
			f.order[i] = int32(bits.Reverse64(uint64(i)) >> shift)
		}
	}
	for m := n2; m < n; m *= 3 {
		sub := append([]int32(nil), f.order[:m]...)
		for r := range 3 {
			for q, k := range sub {
				f.order[r*m+q] = int32(3*int(k) + r)
			}
		}
	}
	return f
}

// forward transforms a, in natural order, into f.order, with no scaling.
func (f *fftPlan) forward(a []complex128) {
	for i, t := range f.t3 {
		radix3(a, len(a)/pow3(i), t, -1)
	}
	for start := 0; start < len(a); start += f.n2 {
		f.dif(a[start:start+f.n2], f.tw)
	}
}

// backward transforms a, in f.order, back into natural order, without
// the division by len(a).
func (f *fftPlan) backward(a []complex128) {
	for start := 0; start < len(a); start += f.n2 {
		f.dit(a[start:start+f.n2], f.iw)
	}
	for i := len(f.i3) - 1; i >= 0; i-- {
		radix3Time(a, len(a)/pow3(i), f.i3[i], 1)
	}
}

// pow3 returns 3^i.
func pow3(i int) int {
	p := 1
	for range i {
		p *= 3
	}
	return p
}

// radix3 runs one radix-3 stage of size s = 3m over a, by decimation in
// frequency (the forward transform's stages), with the twiddles t (the
// first factor of each j < m, then the second) and sign -1.
func radix3(a []complex128, s int, t []complex128, sign float64) {
	m := s / 3
	h := sign * math.Sqrt(3) / 2 // e^(±2πi/3) = -1/2 + ih
	t1, t2 := t[:m], t[m:2*m]
	for start := 0; start < len(a); start += s {
		q0, q1, q2 := a[start:start+m], a[start+m:start+2*m], a[start+2*m:start+3*m]
		q1, q2 = q1[:len(q0)], q2[:len(q0)]
		for j, w1 := range t1[:len(q0)] {
			a0, a1, a2 := q0[j], q1[j], q2[j]
			sum, d := a1+a2, a1-a2
			c := a0 - complex(0.5*real(sum), 0.5*imag(sum))
			r := complex(-h*imag(d), h*real(d))
			q0[j], q1[j], q2[j] = a0+sum, (c+r)*w1, (c-r)*t2[j]
		}
	}
}

// radix3Time is radix3 by decimation in time (the backward transform's
// stages), with sign +1.
func radix3Time(a []complex128, s int, t []complex128, sign float64) {
	m := s / 3
	h := sign * math.Sqrt(3) / 2
	t1, t2 := t[:m], t[m:2*m]
	for start := 0; start < len(a); start += s {
		q0, q1, q2 := a[start:start+m], a[start+m:start+2*m], a[start+2*m:start+3*m]
		q1, q2 = q1[:len(q0)], q2[:len(q0)]
		for j, w1 := range t1[:len(q0)] {
			a0, a1, a2 := q0[j], q1[j]*w1, q2[j]*t2[j]
			sum, d := a1+a2, a1-a2
			c := a0 - complex(0.5*real(sum), 0.5*imag(sum))
			r := complex(-h*imag(d), h*real(d))
			q0[j], q1[j], q2[j] = a0+sum, c+r, c-r
		}
	}
}

// transform transforms a in place (len(a) the plan's length), in natural
// order; inverse transforms back and divides by len(a).
func (f *fftPlan) transform(a []complex128, inverse bool) {
	b := make([]complex128, len(a))
	if !inverse {
		f.forward(a)
		for i, k := range f.order {
			b[k] = a[i]
		}
		copy(a, b)
		return
	}
	for i, k := range f.order {
		b[i] = a[k]
	}
	f.backward(b)
	inv := 1 / float64(len(a))
	for i, v := range b {
		a[i] = complex(real(v)*inv, imag(v)*inv)
	}
}

// dit transforms a, a radix-2 block in bit-reversed order, into natural
// order by decimation in time, with the twiddles tw (f.tw forward, f.iw
// inverse, without the division by len(a)).
func (f *fftPlan) dit(a, tw []complex128) {
	n := len(a)
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
}

// dif transforms a, a radix-2 block in natural order, into bit-reversed
// order by decimation in frequency, with the twiddles tw: dit's stages undone in
// the opposite order, largest first, two at a time where dit pairs them.
func (f *fftPlan) dif(a, tw []complex128) {
	n := len(a)
	if n < 4 {
		if n == 2 {
			a[0], a[1] = a[0]+a[1], a[0]-a[1]
		}
		return
	}
	size := n
	if bits.Len(uint(n))%2 == 0 { // an odd number of stages: the largest alone
		half := n / 2
		w := tw[half:n]
		lo, hi := a[:half], a[half:n]
		hi = hi[:len(lo)]
		for k, t := range w[:len(lo)] {
			x, y := lo[k], hi[k]
			lo[k], hi[k] = x+y, (x-y)*t
		}
		size = half
	}
	// Sizes s and s/2 together over the four quarters of s values.
	for ; size >= 16; size >>= 2 {
		s, m := size/2, size/4
		w1, w2 := tw[m:s], tw[s:size]
		for start := 0; start < n; start += size {
			q := a[start : start+size]
			q0, q1, q2, q3 := q[:m], q[m:2*m], q[2*m:3*m], q[3*m:4*m]
			for k, t := range w1[:len(q0)] {
				b0, b2 := q0[k]+q2[k], (q0[k]-q2[k])*w2[k]
				b1, b3 := q1[k]+q3[k], (q1[k]-q3[k])*w2[k+m]
				q0[k], q1[k], q2[k], q3[k] = b0+b1, (b0-b1)*t, b2+b3, (b2-b3)*t
			}
		}
	}
	// The last two stages, four values at a time.
	t := tw[3]
	for i := 0; i+3 < n; i += 4 {
		q := (*[4]complex128)(a[i:])
		b0, b2, b1, b3 := q[0]+q[2], q[0]-q[2], q[1]+q[3], (q[1]-q[3])*t
		q[0], q[1], q[2], q[3] = b0+b1, b0-b1, b2+b3, b2-b3
	}
}

// fft transforms a in place; see fftPlan.transform.
func fft(a []complex128, inverse bool) { newFFT(len(a)).transform(a, inverse) }
