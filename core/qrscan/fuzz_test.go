package qrscan

import (
	"errors"
	"maps"
	"runtime"
	"slices"
	"testing"
	"time"
)

// FuzzScan feeds mutated images of every format to Scan. Nothing may
// panic (a panic inside a decoder is recovered by Scan, and counts as a
// failure here too), every error must be one of the package's, no input
// may make Scan allocate more than Budget, nor take more than 10 s.
//
//	go test -run XXX -fuzz FuzzScan -fuzztime 2m ./core/qrscan/
func FuzzScan(f *testing.F) {
	files := smallFiles(f)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		f.Add(files[name])
	}
	f.Add(vp8lHuffmanBomb())
	f.Add(pngBomb(100000, 100000, 8, 6))
	f.Add(pngBomb(300, 200, 8, 2))
	f.Add(gifBomb(300, 200))
	f.Add(jpegBomb(300, 200))
	f.Add(webpBomb(300, 200))
	f.Fuzz(func(t *testing.T, data []byte) {
		panicHook = func(r any) { t.Errorf("recovered panic: %v", r) }
		defer func() { panicHook = nil }()
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		start := time.Now()
		payload, err := Scan(data, isSlip)
		d := time.Since(start)
		runtime.ReadMemStats(&b)
		if d > 10*time.Second { // the slowest images measured take 0.5 s
			t.Errorf("took %v", d)
		}
		if n := b.TotalAlloc - a.TotalAlloc; n > Budget {
			t.Errorf("allocated %d bytes, over the budget", n)
		}
		switch {
		case err == nil && payload == "":
			t.Error("no error and no payload")
		case err != nil && !errors.Is(err, ErrFormat) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrNoQR):
			t.Errorf("unexpected error %v", err)
		}
	})
}
