package store

import (
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestGatherWaitsForAnnouncedWrites runs the committer on a fake clock: a
// transaction waits for the writes announced and not yet in it, and for
// nothing else; a retraction, the window's end and Close each end the wait.
func TestGatherWaitsForAnnouncedWrites(t *testing.T) {
	const window = time.Hour // only a missing write can make it pass
	synctest.Test(t, func(t *testing.T) {
		s, err := OpenWith(filepath.Join(t.TempDir(), "core.db"), time.Now, Options{Gather: window})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		put := func(announced bool) error {
			n++
			key := []byte{byte(n)}
			return s.c.Write(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(key, []byte("v")) }, announced)
		}
		// write starts an announced write, announcing it here unless
		// announce is false (the caller did), and returns its result's
		// channel once the committer waits.
		write := func(announce bool) chan error {
			if announce {
				s.Announce()
			}
			done := make(chan error, 1)
			go func() {
				defer s.Retract()
				done <- put(true)
			}()
			synctest.Wait()
			return done
		}
		took := func(what string, start time.Time, want time.Duration) {
			t.Helper()
			if d := time.Since(start); d != want {
				t.Errorf("%s: took %v, want %v", what, d, want)
			}
		}
		commits := func() int64 { c, _ := s.Commits(); return c }

		start := time.Now()
		for range 3 {
			if err := put(false); err != nil {
				t.Fatal(err)
			}
		}
		s.Announce()
		if err := put(true); err != nil {
			t.Fatal(err)
		}
		s.Retract()
		took("writes with none other announced", start, 0)

		// Three announce; two write; the third retracts without writing.
		c0 := commits()
		s.Announce()
		s.Announce()
		a := write(true)
		if len(a) != 0 {
			t.Fatal("a write returned while another announced one was missing")
		}
		b := write(false)
		if len(a)+len(b) != 0 {
			t.Fatal("writes returned while a third announced one was missing")
		}
		s.Retract()
		synctest.Wait()
		if err := <-a; err != nil {
			t.Fatal(err)
		}
		if err := <-b; err != nil {
			t.Fatal(err)
		}
		took("announced writes", start, 0)
		if c := commits() - c0; c != 1 {
			t.Errorf("two announced writes took %d transactions, want 1", c)
		}

		// A write announced and never made holds the others up for the
		// window, no longer.
		s.Announce()
		a = write(true)
		time.Sleep(window)
		synctest.Wait()
		if err := <-a; err != nil {
			t.Fatal(err)
		}
		took("a write waiting on one never made", start, window)
		s.Retract()

		// Close ends a wait at once.
		start = time.Now()
		s.Announce()
		a = write(true)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-a; err != nil {
			t.Fatal(err)
		}
		took("a write waiting when the store closed", start, 0)
		s.Retract()
	})
}
