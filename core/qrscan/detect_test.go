package qrscan

import (
	"testing"

	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode/detector"
)

// TestCentersBoundedWithinARow: one row of a very wide image holding
// thousands of tiny finder patterns (a 1.6 KB PNG of 24000×48) stops the
// search at maxCenters candidates, not at the row's end: the search over
// candidates is cubic, and 1,333 of them took 20 s of CPU for one request.
func TestCentersBoundedWithinARow(t *testing.T) {
	const w, h, module, gap = 24000, 48, 2, 2
	m, err := gozxing.NewBitMatrix(w, h)
	if err != nil {
		t.Fatal(err)
	}
	square := func(x0, y0, side int, black bool) {
		for y := y0; y < y0+side; y++ {
			for x := x0; x < x0+side; x++ {
				if black {
					m.Set(x, y)
				} else {
					m.Unset(x, y)
				}
			}
		}
	}
	y0, patterns := (h-7*module)/2, 0
	for x := 2 * module; x+9*module <= w; x += (7 + gap) * module {
		square(x, y0, 7*module, true)
		square(x+module, y0+module, 5*module, false)
		square(x+2*module, y0+2*module, 3*module, true)
		patterns++
	}
	ff := detector.NewFinderPatternFinder(m, nil)
	scanRows(ff, m, 1)
	if n := len(ff.GetPossibleCenters()); n > maxCenters {
		t.Errorf("%d candidates from a row of %d finder patterns, want at most %d", n, patterns, maxCenters)
	}
}
