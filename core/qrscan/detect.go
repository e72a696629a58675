package qrscan

import (
	"cmp"
	"math"
	"slices"

	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode/decoder"
	"github.com/makiuchi-d/gozxing/qrcode/detector"
)

// This file finds and decodes the QR codes of one binarized image. It is
// gozxing's multi-QR reader (multi/qrcode) rebuilt from gozxing's exported
// parts with bounds on the work: gozxing keeps every finder-pattern
// candidate and tries every plausible triple of them, which is quadratic
// and cubic in the number of candidates, so an image made of finder-like
// squares would take minutes. Here the candidates and the triples tried are
// capped, and the triples are tried best first, so a real code is among
// the first.

const (
	// maxCenters caps the finder-pattern candidates of one image; a slip
	// with two QR codes has 6, and text and photos add a few dozen.
	maxCenters = 160
	// maxTriples caps the decoding attempts of one image.
	maxTriples = 24
	// maxFound stops a search that has decoded this many codes.
	maxFound = 4
)

// lumSource is a gozxing luminance source over a grey plane, without copies.
type lumSource struct {
	gozxing.LuminanceSourceBase
	pix []byte
}

func newLumSource(p plane) *lumSource {
	return &lumSource{gozxing.LuminanceSourceBase{Width: p.w, Height: p.h}, p.pix[:p.w*p.h]}
}

func (l *lumSource) GetRow(y int, row []byte) ([]byte, error) {
	if len(row) < l.Width {
		row = make([]byte, l.Width)
	}
	copy(row, l.pix[y*l.Width:(y+1)*l.Width])
	return row, nil
}

func (l *lumSource) GetMatrix() []byte               { return l.pix }
func (l *lumSource) Invert() gozxing.LuminanceSource { return gozxing.LuminanceSourceInvert(l) }
func (l *lumSource) String() string                  { return gozxing.LuminanceSourceString(l) }
func (l *lumSource) IsCropSupported() bool           { return false }
func (l *lumSource) IsRotateSupported() bool         { return false }
func (l *lumSource) RotateCounterClockwise45() (gozxing.LuminanceSource, error) {
	return l.LuminanceSourceBase.RotateCounterClockwise45()
}

// binarizer names a gozxing binarizer.
type binarizer uint8

const (
	hybrid binarizer = iota // local thresholds in 8×8 blocks: uneven light, screens
	global                  // one threshold from the histogram: blur, low resolution
)

// binarize turns p into a bit matrix with b.
func binarize(p plane, b binarizer) (*gozxing.BitMatrix, error) {
	src := newLumSource(p)
	if b == global {
		return gozxing.NewGlobalHistgramBinarizer(src).GetBlackMatrix()
	}
	return gozxing.NewHybridBinarizer(src).GetBlackMatrix()
}

// center is a finder pattern candidate: its centre and module size in pixels.
type center struct {
	x, y, module float64
}

// findCodes finds the QR codes of m and calls visit with the text of each
// one decoded, until visit returns true. It scans every skip-th row for
// finder patterns. It reports whether visit returned true; when it did not,
// it appends the finder patterns of codes it could not decode (and lone
// ones) to missed, for a closer look.
func findCodes(m *gozxing.BitMatrix, skip int, dec *decoder.Decoder, visit func(string) bool, missed *[]center) bool {
	ff := detector.NewFinderPatternFinder(m, nil)
	scanRows(ff, m, skip)
	hit, used := decodeTriples(m, ff.GetPossibleCenters(), dec, visit)
	if !hit && missed != nil {
		for _, p := range ff.GetPossibleCenters() {
			if !slices.Contains(used, p) {
				*missed = append(*missed, center{p.GetX(), p.GetY(), p.GetEstimatedModuleSize()})
			}
		}
	}
	return hit
}

// decodeTriples tries the best triples of centers as codes. It returns
// whether visit returned true, and the centers of the codes decoded.
func decodeTriples(m *gozxing.BitMatrix, centers []*detector.FinderPattern, dec *decoder.Decoder, visit func(string) bool) (hit bool, used []*detector.FinderPattern) {
	cands := triples(centers)
	if len(cands) == 0 {
		return false, nil
	}
	det := detector.NewDetector(m)
	found := 0
	for k, c := range cands {
		if k == maxTriples || found == maxFound {
			break
		}
		if slices.Contains(used, c.p[0]) || slices.Contains(used, c.p[1]) || slices.Contains(used, c.p[2]) {
			continue
		}
		bl, tl, tr := gozxing.ResultPoint_OrderBestPatterns(c.p[0], c.p[1], c.p[2])
		info := detector.NewFinderPatternInfo(bl.(*detector.FinderPattern), tl.(*detector.FinderPattern), tr.(*detector.FinderPattern))
		dr, err := det.ProcessFinderPatternInfo(info)
		if err != nil {
			continue
		}
		res, err := dec.Decode(dr.GetBits(), nil)
		if err != nil {
			continue
		}
		used = append(used, c.p[:]...)
		found++
		if visit(res.GetText()) {
			return true, used
		}
	}
	return false, used
}

// scanRows looks for finder patterns (1:1:3:1:1 runs) along every skip-th
// row of m, as gozxing's finders do, and stops at maxCenters candidates,
// within a row too: one row of a very wide image can hold thousands, and
// the search over them is cubic.
func scanRows(ff *detector.FinderPatternFinder, m *gozxing.BitMatrix, skip int) {
	maxI, maxJ := m.GetHeight(), m.GetWidth()
	var stateCount [5]int
	row := gozxing.NewBitArray(maxJ)
	for i := skip - 1; i < maxI; i += skip {
		if len(ff.GetPossibleCenters()) >= maxCenters {
			return
		}
		row = m.GetRow(i, row)
		stateCount = [5]int{}
		currentState := 0
		for j := 0; j < maxJ; j++ {
			if row.Get(j) { // black
				if currentState&1 == 1 {
					currentState++
				}
				stateCount[currentState]++
				continue
			}
			if currentState&1 == 1 { // counting white
				stateCount[currentState]++
				continue
			}
			if currentState != 4 {
				currentState++
				stateCount[currentState]++
				continue
			}
			if detector.FinderPatternFinder_foundPatternCross(stateCount[:]) && ff.HandlePossibleCenter(stateCount[:], i, j) {
				if len(ff.GetPossibleCenters()) >= maxCenters {
					return
				}
				currentState = 0
				stateCount = [5]int{}
				continue
			}
			// Shift counts back by two.
			stateCount = [5]int{stateCount[2], stateCount[3], stateCount[4], 1, 0}
			currentState = 3
		}
		if detector.FinderPatternFinder_foundPatternCross(stateCount[:]) {
			ff.HandlePossibleCenter(stateCount[:], i, maxJ)
		}
	}
}

// triple is three finder patterns that may be the corners of one code.
type triple struct {
	p     [3]*detector.FinderPattern
	score float64 // lower is better
}

// triples returns the triples of centers that could be a QR code's finder
// patterns, best first: similar module sizes, an isosceles right triangle,
// and a plausible number of modules between them.
func triples(centers []*detector.FinderPattern) []triple {
	if len(centers) < 3 {
		return nil
	}
	cs := slices.Clone(centers)
	slices.SortFunc(cs, func(a, b *detector.FinderPattern) int {
		return cmpFloat(a.GetEstimatedModuleSize(), b.GetEstimatedModuleSize())
	})
	var out []triple
	for i := 0; i < len(cs)-2; i++ {
		a := cs[i]
		ma := a.GetEstimatedModuleSize()
		for j := i + 1; j < len(cs)-1; j++ {
			b := cs[j]
			if b.GetEstimatedModuleSize() > ma*1.5 {
				break
			}
			dab := sqDist(a, b)
			for k := j + 1; k < len(cs); k++ {
				c := cs[k]
				mc := c.GetEstimatedModuleSize()
				if mc > ma*1.5 {
					break
				}
				// Sides, squared, in ascending order: x ≤ y ≤ z.
				x, y, z := sort3(dab, sqDist(b, c), sqDist(a, c))
				if z == 0 {
					continue
				}
				// An isosceles right triangle has x = y and z = 2x.
				d := (abs64(z-2*y) + abs64(z-2*x)) / z
				if d > 0.8 {
					continue
				}
				ms := (ma + b.GetEstimatedModuleSize() + mc) / 3
				modules := math.Sqrt((x+y)/2) / ms
				// Finder centres are 14 (version 1) to 170 (version 40)
				// modules apart; rotation makes the estimate up to √2 small.
				if modules < 9 || modules > 185 {
					continue
				}
				score := d
				for _, p := range [3]*detector.FinderPattern{a, b, c} {
					if p.GetCount() < 2 {
						score += 0.25 // seen on one row only
					}
				}
				score += (mc - ma) / ma
				out = keepBest(out, triple{[3]*detector.FinderPattern{a, b, c}, score})
			}
		}
	}
	return out
}

// keepBest inserts t into best, sorted by score, keeping at most
// 2×maxTriples (some are skipped for sharing a pattern with a decoded code).
func keepBest(best []triple, t triple) []triple {
	const n = 2 * maxTriples
	if len(best) == n && t.score >= best[n-1].score {
		return best
	}
	i, _ := slices.BinarySearchFunc(best, t.score, func(e triple, s float64) int {
		if e.score <= s {
			return -1
		}
		return 1
	})
	if len(best) < n {
		best = append(best, triple{})
	}
	copy(best[i+1:], best[i:len(best)-1])
	best[i] = t
	return best
}

func sqDist(a, b *detector.FinderPattern) float64 {
	dx, dy := a.GetX()-b.GetX(), a.GetY()-b.GetY()
	return dx*dx + dy*dy
}

// sort3 returns a, b and c in ascending order.
func sort3[T cmp.Ordered](a, b, c T) (T, T, T) {
	if a > b {
		a, b = b, a
	}
	if b > c {
		b, c = c, b
	}
	if a > b {
		a, b = b, a
	}
	return a, b, c
}

func abs64(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
