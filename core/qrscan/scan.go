package qrscan

import (
	"image"
	"math"
	"strconv"
	"sync"

	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode/decoder"
)

// maxWorkPixels caps the grey plane the strategies work on: a larger image
// is shrunk by a whole factor to fit. It holds a 1440×3200 screenshot (the
// largest common phone screen) at full resolution, so small QR codes keep
// every pixel they have.
const maxWorkPixels = 4800 << 10

// shrinkFactor is the whole factor that brings a w×h image within maxWorkPixels.
func shrinkFactor(w, h int) int {
	k := max(1, int(math.Sqrt(float64(w)*float64(h)/maxWorkPixels)))
	for int64(w/k)*int64(h/k) > maxWorkPixels {
		k++
	}
	return k
}

// workCost is the memory the strategies need for a w×h image, beyond
// decoding it: the grey plane and its half-size copy, two scratch planes
// (the second for the unsharp masks' blur), gozxing's bit matrices and
// block thresholds for each pass (garbage included: the median and sharp
// passes added 8 of them), and the magnified windows of zoom; and 3 bytes
// a pixel of the plane the unblur and defocus passes filter, for their
// bit matrices and windows. TestMemoryBudget and TestLargeNoCode check it.
func workCost(w, h int) int64 {
	k := shrinkFactor(w, h)
	w, h = w/k, h/k
	p, late := int64(w)*int64(h), int64(w)*int64(h)
	if lateHalf(w, h) {
		late = int64(w/2) * int64(h/2)
	}
	return 8*p + 3*late + 4<<20
}

// halfFrom is the size, in pixels on the shorter side, from which a
// working plane has a half-size copy, which the first pass searches: a
// slip's code spans a fifth of a screenshot's width or more, so in a
// picture 720 pixels wide it has 2.5 pixels a module or more at half size
// (1.5 for the corpus's smallest codes, which later passes read).
const halfFrom = 720

// hasHalf reports whether a w×h working plane has a half-size copy.
func hasHalf(w, h int) bool { return min(w, h) >= halfFrom }

// firstScale is the factor the first pass's plane is smaller than a w×h
// picture by: the working plane's, or twice that where it has a half-size
// copy.
func firstScale(w, h int) int {
	k := shrinkFactor(w, h)
	if hasHalf(w/k, h/k) {
		return 2 * k
	}
	return k
}

// maxLatePixels caps the plane the unblur and defocus passes filter: a
// larger picture's half-size plane is filtered instead (its blur halved
// too), as their transforms cost n log n a line and a picture with no code
// pays for every one.
const maxLatePixels = 2 << 20

// lateHalf reports whether the unblur and defocus passes filter the
// half-size copy of a w×h working plane.
func lateHalf(w, h int) bool { return w*h > maxLatePixels && hasHalf(w, h) }

// passHook, when set by a test, is told which strategy found the payload.
var passHook func(name string)

// scanner holds one image's planes and scratch buffers across strategies.
// Scanners are pooled with their buffers (scanners), so that a busy core
// does not allocate and collect a picture's planes for each scan: a
// scanner keeps what one scan used, which that scan's Cost counted, and
// the pool holds about as many as ran at once, which the caller's decode
// budget bounds (verify.DecodeLimit), until the garbage collector drops
// the unused ones.
type scanner struct {
	full, small plane
	// load reads the full plane when the first pass's plane was read
	// alone (a JPEG shrunk in the frequency domain); nil once it is read.
	load    func() (plane, error)
	loadErr error
	a, b    []byte
	// The memory of the last scan's planes and decoders' output, reused.
	fullBuf, smallBuf, decBuf, dctBuf []byte
	bin                               hybridBits
	dec                               *decoder.Decoder
	accept                            func(string) bool
	payload                           string
	first                             string
	found                             bool
	missed                            []center // finder patterns not decoded, in full-plane coordinates
	light                             []center // those of the light codes, set aside for zoom(true)
}

var scanners = sync.Pool{New: func() any { return &scanner{dec: decoder.NewDecoder()} }}

// newScanner returns a pooled scanner for one image; release returns it.
func newScanner(accept func(string) bool) *scanner {
	s := scanners.Get().(*scanner)
	s.accept = accept
	return s
}

// release keeps s's buffers for the next scan and forgets the image.
func (s *scanner) release() {
	s.full, s.small, s.load, s.loadErr, s.accept = plane{}, plane{}, nil, nil, nil
	s.payload, s.first, s.found, s.missed = "", "", false, s.missed[:0]
	scanners.Put(s)
}

// setFull takes p, the image's luma within maxWorkPixels, as the full
// plane, and makes the first pass's plane from it.
func (s *scanner) setFull(p plane) {
	s.full, s.fullBuf = p, p.pix[:0]
	s.small = p
	if hasHalf(p.w, p.h) {
		s.small = half(p, s.smallBuf)
		s.smallBuf = s.small.pix[:0]
	}
}

// scan runs the strategies and returns what Scan returns.
func (s *scanner) scan() (string, error) {
	if s.small.w == 0 || s.small.h == 0 {
		return "", ErrNoQR
	}
	if s.run() {
		return s.payload, nil
	}
	if s.loadErr != nil {
		return "", s.loadErr
	}
	if s.found {
		return s.first, nil
	}
	return "", ErrNoQR
}

// try runs one strategy: binarize p with b and look for codes. Finder
// patterns it could not decode are kept, in full-plane coordinates (p is
// the full plane shrunk by shrink), for zoom; with shrink 0, they are not.
func (s *scanner) try(name string, p plane, b binarizer, skip int, shrink float64) bool {
	if p.w < 21 || p.h < 21 {
		return false
	}
	var m *gozxing.BitMatrix
	var err error
	if b == hybrid {
		m, err = s.bin.binarize(p)
	} else {
		m, err = binarize(p, b)
	}
	if err != nil {
		return false
	}
	n := len(s.missed)
	missed := &s.missed
	if shrink == 0 {
		missed = nil
	}
	hit := findCodes(m, skip, s.dec, func(t string) bool {
		if s.accept == nil || s.accept(t) {
			s.payload = t
			return true
		}
		if !s.found {
			s.first, s.found = t, true
		}
		return false
	}, missed)
	if shrink != 1 {
		for i := n; i < len(s.missed); i++ {
			c := &s.missed[i]
			c.x, c.y, c.module = c.x*shrink, c.y*shrink, c.module*shrink
		}
	}
	if hit && passHook != nil {
		passHook(name)
	}
	return hit
}

// run tries the strategies, cheapest and most often useful first, until
// one finds an accepted payload.
func (s *scanner) run() bool {
	// Dark codes on light ground, then light codes on dark ground (dark
	// mode, inverted colours), at half size: fast, and enough for most
	// screenshots. They run before the full plane is read, if it was not.
	if s.try("small", s.small, hybrid, 2, 1) {
		return true
	}
	dark := len(s.missed)
	inv := invert(s.small, s.a)
	s.a = inv.pix
	if s.try("small-inv", inv, hybrid, 2, 1) {
		return true
	}
	if s.load != nil {
		full, err := s.load()
		s.load = nil
		if err != nil {
			s.loadErr = err
			return false
		}
		s.full, s.fullBuf = full, full.pix[:0]
	}
	full, small := s.full, s.small
	shrunk := small.w != full.w
	k := float64(full.w) / float64(small.w)
	for i := range s.missed { // the first passes', in full-plane coordinates
		c := &s.missed[i]
		c.x, c.y, c.module = c.x*k, c.y*k, c.module*k
	}
	// Full size, then a closer look at what did not decode: dark codes,
	// then light ones.
	s.light = append(s.light[:0], s.missed[dark:]...)
	s.missed = s.missed[:dark]
	if shrunk && s.try("full", full, hybrid, 2, 1) {
		return true
	}
	if s.zoom(false) {
		return true
	}
	// Impulse noise (pixels turned black or white at random, 1 to 8 % of
	// them) breaks the runs of the finder patterns: a 3×3 median removes
	// it, then dark and light codes are looked for again. (The half-size
	// plane, an average, already tones it down in large pictures.)
	m := median3(full, s.a)
	s.a = m.pix
	if s.try("median", m, hybrid, 2, 1) {
		return true
	}
	m = invert(m, m.pix)
	if s.try("median-inv", m, hybrid, 2, 1) {
		return true
	}
	// Light codes the half-size plane missed, at full size and closer.
	s.missed = append(s.missed[:0], s.light...)
	if shrunk {
		inv = invert(full, s.a)
		s.a = inv.pix
		if s.try("full-inv", inv, hybrid, 2, 1) {
			return true
		}
	}
	if s.zoom(true) {
		return true
	}
	// Blur, then the last resorts: one global threshold, and local
	// contrast stretching (harsh light), which read nothing of the corpus
	// that an earlier pass does not (the passes go in the order of their
	// cost per picture read). Any rotation needs no pass of its own: the
	// finder-pattern search works at every angle. Magnifying the whole
	// image (in tiles) was measured and dropped: zoom already reads codes
	// down to 40 pixels (1.4 pixels a module), tiles found nothing more
	// below that, and tripled the time of an image without a code.
	if s.sharp() || s.unblur() || s.defocus() {
		return true
	}
	if s.try("full-global", full, global, 2, 1) {
		return true
	}
	n := normalize(full, 32, s.a)
	s.a = n.pix
	return s.try("norm", n, hybrid, 2, 1)
}

// late returns the plane the unblur and defocus passes filter.
func (s *scanner) late() plane {
	if lateHalf(s.full.w, s.full.h) {
		return s.small
	}
	return s.full
}

// defocusTries are the Gaussian blurs defocus undoes: σ in pixels and the
// Wiener filter's noise-to-signal ratio (the larger blur, a lower ratio:
// its transfer function falls further).
var defocusTries = []struct{ sigma, nsr float64 }{{3, 0.02}, {4, 0.005}}

// defocus looks again at a picture out of focus past what the unsharp
// masks of sharp restore (a Gaussian of σ 3 to 4 px on modules of 5):
// the blur is undone along rows, then columns, and the result searched at
// its size and magnified around finder patterns. A picture with sharp
// edges is not that blurred, and skips it.
func (s *scanner) defocus() bool {
	if sharpEdges(s.late()) {
		return false
	}
	for _, t := range defocusTries {
		taps := gaussTaps(t.sigma)
		p := deconvolve(s.late(), 0, taps, t.nsr, s.a)
		p = deconvolve(p, math.Pi/2, taps, t.nsr, p.pix) // in place: a line is read whole before it is written
		s.a = p.pix
		s.missed = s.missed[:0]
		if s.try("defocus", p, hybrid, 2, 1) || s.zoomOn(p, "defocus-zoom", false, lateZooms) {
			return true
		}
	}
	return false
}

// unblurTries are the motion deblurring attempts: the length blurKernel
// measured plus dl, and the Wiener filter's noise-to-signal ratio.
var unblurTries = []struct {
	dl  int
	nsr float64
}{{0, 0.02}, {1, 0.02}, {1, 0.08}}

// unblur looks again at a picture blurred by motion (deblur.go): the blur's
// direction and length are measured, undone along its lines, and the
// result searched at its size and magnified around finder patterns.
func (s *scanner) unblur() bool {
	src := s.late()
	angle, length, ok := blurKernel(src)
	if !ok {
		return false
	}
	for _, t := range unblurTries {
		p := deconvolve(src, angle, boxTaps(length+t.dl), t.nsr, s.a)
		s.a = p.pix
		s.missed = s.missed[:0]
		if s.try("unblur", p, hybrid, 2, 1) || s.zoomOn(p, "unblur-zoom", false, lateZooms) {
			return true
		}
	}
	return false
}

// sharp looks again at a blurred picture: unsharp masks of the full plane
// over four sizes of blur, most useful first.
func (s *scanner) sharp() bool {
	for _, r := range []int{3, 2, 4, 6} {
		var p plane
		p, s.b = sharpen(s.full, r, 3, s.a, s.b)
		s.a = p.pix
		s.missed = s.missed[:0]
		if s.try("sharp"+strconv.Itoa(r), p, hybrid, 2, 1) {
			return true
		}
		// One global threshold read two of the corpus's blurred codes
		// after the first mask, none after the others.
		if r == 3 && s.try("sharp-global3", p, global, 2, 1) {
			return true
		}
	}
	return false
}

// maxZooms caps the windows zoom looks at.
const maxZooms = 8

// zoom looks closer at finder patterns that did not decode: it magnifies a
// window around them so that modules are about 13 pixels, and tries again
// (inverted, for the inverted passes' patterns). Codes of 2 pixels a
// module, or blurred ones, are found at their own size but sampled badly.
func (s *scanner) zoom(inverted bool) bool {
	name := "zoom"
	if inverted {
		name = "zoom-inv"
	}
	return s.zoomOn(s.full, name, inverted, maxZooms)
}

// lateZooms caps the windows zoom looks at after the unblur and defocus
// passes, each of which tries several filters: a code is one window, and
// the magnified windows' bit matrices are most of what those passes
// allocate.
const lateZooms = 3

// zoomOn is zoom on src, a plane the size of the full one, looking at up
// to n windows.
func (s *scanner) zoomOn(src plane, name string, inverted bool, n int) bool {
	var wins []image.Rectangle
	var mods []float64
	bounds := image.Rect(0, 0, src.w, src.h)
	for _, c := range s.missed {
		if c.module > 8 || len(wins) == n {
			continue
		}
		pt := image.Pt(int(c.x), int(c.y))
		inside := false
		for _, w := range wins {
			inside = inside || pt.In(w)
		}
		if inside {
			continue
		}
		r := int(c.module*40) + 8
		wins = append(wins, image.Rect(pt.X-r, pt.Y-r, pt.X+r, pt.Y+r).Intersect(bounds))
		mods = append(mods, c.module)
	}
	for i, w := range wins {
		k := max(1.5, min(3, 13/mods[i]))
		z := scaleRect(src, w, k, s.b)
		if inverted {
			z = invert(z, z.pix)
		}
		s.b = z.pix
		for _, b := range []binarizer{hybrid, global} {
			if s.try(name, z, b, 2, 0) {
				return true
			}
		}
	}
	return false
}
