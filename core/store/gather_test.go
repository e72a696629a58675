package store

import (
	"path/filepath"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestGatherPolicy: a transaction waits for more writes only while they
// arrive more often than once a window, and never past the window from
// its first write's arrival.
func TestGatherPolicy(t *testing.T) {
	const window = 500 * time.Microsecond
	at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	g := newGather(window)
	if w := g.wait(at, at); w != 0 {
		t.Errorf("before any write: waits %v, want 0", w)
	}
	for i := range 50 { // one write every 2 ms
		at = at.Add(2 * time.Millisecond)
		g.arrived(at)
		if w := g.wait(at, at); w != 0 {
			t.Fatalf("write %d, 2 ms after the last: waits %v, want 0", i, w)
		}
	}
	waited := false
	for range 50 { // one every 100 µs
		at = at.Add(100 * time.Microsecond)
		g.arrived(at)
		w := g.wait(at, at)
		if w != 0 && w != window {
			t.Fatalf("waits %v, want 0 or the window", w)
		}
		waited = waited || w == window
	}
	if !waited {
		t.Fatal("writes 100 µs apart: no transaction waits for more")
	}
	if w := g.wait(at, at.Add(window/5)); w != window*4/5 {
		t.Errorf("a fifth of the window after the first write: waits %v, want %v", w, window*4/5)
	}
	if w := g.wait(at, at.Add(2*window)); w != 0 {
		t.Errorf("past the window: waits %v, want 0", w)
	}
	// An idle hour weighs as a few idle windows: writes that come together
	// again are gathered after a few of them.
	at = at.Add(time.Hour)
	g.arrived(at)
	for n := 1; g.wait(at, at) == 0; n++ {
		if n > 20 {
			t.Fatal("after an idle hour, 20 writes 100 µs apart are not gathered")
		}
		at = at.Add(100 * time.Microsecond)
		g.arrived(at)
	}
	if off := newGather(0); off.wait(at, at) != 0 {
		t.Error("window 0 waits")
	}
}

// TestGatherWaitsForMoreWrites runs the committer on a fake clock: writes
// that come seldom commit at once; writes that come together share one
// transaction, which waits the window for them; Close ends the wait.
func TestGatherWaitsForMoreWrites(t *testing.T) {
	const window = time.Millisecond
	synctest.Test(t, func(t *testing.T) {
		s, err := OpenWith(filepath.Join(t.TempDir(), "core.db"), time.Now, Options{Gather: window})
		if err != nil {
			t.Fatal(err)
		}
		put := func(key string) error {
			return s.write(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put([]byte(key), []byte("v")) })
		}
		for i := range 20 {
			time.Sleep(2 * window)
			start := time.Now()
			if err := put("seldom" + strconv.Itoa(i)); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d != 0 {
				t.Fatalf("write %d, 2 windows after the last: took %v, want 0", i, d)
			}
		}
		for i := range 20 { // back to back: the mean gap falls below the window
			if err := put("busy" + strconv.Itoa(i)); err != nil {
				t.Fatal(err)
			}
		}

		together := func(n int) (done chan error) {
			done = make(chan error, n)
			for i := range n {
				go func() { done <- put("together" + strconv.Itoa(n) + "-" + strconv.Itoa(i)) }()
			}
			synctest.Wait()
			if len(done) != 0 {
				t.Fatalf("%d writes returned before the window ended", len(done))
			}
			return done
		}
		commits, writes := s.Commits()
		start := time.Now()
		done := together(10)
		time.Sleep(window)
		synctest.Wait()
		checkAll(t, done, 10)
		if d := time.Since(start); d != window {
			t.Errorf("writes that came together took %v, want the window, %v", d, window)
		}
		if c, w := s.Commits(); c-commits != 1 || w-writes != 10 {
			t.Errorf("10 writes together: %d transactions of %d writes, want 1 of 10", c-commits, w-writes)
		}

		start = time.Now()
		done = together(5)
		s.Close()
		checkAll(t, done, 5)
		if d := time.Since(start); d != 0 {
			t.Errorf("Close during the wait: the writes took %v, want 0", d)
		}
	})
}

// checkAll receives n results from done; each must be nil.
func checkAll(t *testing.T, done chan error, n int) {
	t.Helper()
	for range n {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
