package nonce

import (
	"encoding/binary"
	"errors"
	"hash/maphash"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

// clock is a fake clock, safe for concurrent use.
type clock = testnet.Clock

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func newClock() *clock { return testnet.NewClock(t0) }

func n(i uint64) (b [16]byte) {
	binary.BigEndian.PutUint64(b[8:], i)
	return b
}

// newStore is New made an hour before cfg.Now, so that no timestamp a test
// sends is before the store's start (TestBeforeStart tests that).
func newStore(cfg Config) *Store {
	now := cfg.Now
	cfg.Now = func() time.Time { return now().Add(-time.Hour) }
	s := New(cfg)
	s.now = now
	return s
}

// TestBeforeStart: a timestamp before the second the store was made in is
// refused, even inside the window: the nonces used then (by the edge before
// a restart) are not in this store.
func TestBeforeStart(t *testing.T) {
	c := newClock()
	c.Advance(700 * time.Millisecond)
	s := New(Config{Now: c.Now})
	c.Advance(2 * time.Minute)
	if err := s.useAlone("branch-a", n(1), t0.Add(-time.Second)); err != ErrBeforeStart {
		t.Fatalf("signed a second before the start: %v", err)
	}
	if err := s.useAlone("branch-a", n(2), t0.Add(-2*time.Minute)); err != ErrBeforeStart {
		t.Fatalf("signed 2 minutes before the start: %v", err)
	}
	// Timestamps have whole seconds: the start's own second is accepted.
	if err := s.useAlone("branch-a", n(3), t0); err != nil {
		t.Fatalf("signed in the start's second: %v", err)
	}
	if err := s.useAlone("branch-a", n(3), t0.Add(time.Second)); err != ErrDuplicate {
		t.Fatalf("replayed after the start: %v", err)
	}
}

// useAlone is Use by a client that is the only client of its service.
func (s *Store) useAlone(client string, nonce [16]byte, ts time.Time) error {
	return s.Use(client, client, nonce, ts)
}

func TestUseReplay(t *testing.T) {
	c := newClock()
	s := newStore(Config{Now: c.Now})
	ts := c.Now()
	if err := s.useAlone("branch-a", n(1), ts); err != nil {
		t.Fatal(err)
	}
	if err := s.useAlone("branch-a", n(1), ts); err != ErrDuplicate {
		t.Fatalf("replay: %v", err)
	}
	// The same nonce under another client is that client's first use.
	if err := s.useAlone("branch-b", n(1), ts); err != nil {
		t.Fatalf("other client: %v", err)
	}
	// A nonce is unique per client whatever the timestamp: a second request
	// re-signed with another timestamp is refused too.
	if err := s.useAlone("branch-a", n(1), ts.Add(3*time.Minute)); err != ErrDuplicate {
		t.Fatalf("same nonce, later timestamp: %v", err)
	}
	if err := s.useAlone("branch-a", n(1), ts.Add(-3*time.Minute)); err != ErrDuplicate {
		t.Fatalf("same nonce, earlier timestamp: %v", err)
	}
	if err := s.useAlone("branch-a", n(2), ts); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 3 {
		t.Fatalf("Len = %d", s.Len())
	}
}

// TestWindowBoundaries replays a request at the last instant it could be
// accepted, and one nanosecond later, for timestamps on time and skewed both
// ways by the whole window.
func TestWindowBoundaries(t *testing.T) {
	const w = 5 * time.Minute
	for _, skew := range []time.Duration{0, w, -w, 17 * time.Second, -w + time.Nanosecond, 59*time.Second + 999*time.Millisecond} {
		t.Run(skew.String(), func(t *testing.T) {
			c := newClock()
			c.Advance(1234567 * time.Microsecond) // not aligned to a bucket
			s := newStore(Config{Now: c.Now, Window: w})
			ts := c.Now().Add(skew)
			if err := s.useAlone("k", n(7), ts); err != nil {
				t.Fatalf("first use: %v", err)
			}
			// Every instant at which ts is still acceptable, the replay is refused.
			for _, at := range []time.Duration{0, time.Second, w / 2, w - time.Nanosecond, w} {
				c.Set(ts.Add(at))
				if err := s.useAlone("k", n(7), ts); err != ErrDuplicate {
					t.Fatalf("replay at ts%+v: %v", at, err)
				}
			}
			// After that the timestamp itself is refused.
			c.Set(ts.Add(w + time.Nanosecond))
			if err := s.useAlone("k", n(7), ts); err != ErrOutsideWindow {
				t.Fatalf("replay just past the window: %v", err)
			}
			// A future timestamp is refused just past the window as well.
			if err := s.useAlone("k", n(8), c.Now().Add(w+time.Nanosecond)); err != ErrOutsideWindow {
				t.Fatalf("future timestamp: %v", err)
			}
			if err := s.useAlone("k", n(8), c.Now().Add(w)); err != nil {
				t.Fatalf("future timestamp at the edge: %v", err)
			}
		})
	}
}

func TestOutsideWindow(t *testing.T) {
	c := newClock()
	s := newStore(Config{Now: c.Now})
	for _, ts := range []time.Time{
		{}, c.Now().Add(-5*time.Minute - 1), c.Now().Add(5*time.Minute + 1), c.Now().AddDate(300, 0, 0), c.Now().AddDate(-300, 0, 0),
	} {
		if err := s.useAlone("k", n(1), ts); err != ErrOutsideWindow {
			t.Errorf("Use(ts %v) = %v", ts, err)
		}
	}
	if s.Len() != 0 {
		t.Fatalf("Len = %d", s.Len())
	}
}

// TestAgainstModel drives the store with random traffic on a clock that
// moves forward and compares every answer with a plain model: a nonce is a
// duplicate exactly while the bucket of its first timestamp is not due.
func TestAgainstModel(t *testing.T) {
	const (
		w = 5 * time.Minute
		b = 10 * time.Second
	)
	c := newClock()
	s := newStore(Config{Now: c.Now, Window: w, Bucket: b})
	type ck struct {
		client string
		nonce  [16]byte
	}
	first := map[ck]time.Time{}
	r := rand.New(rand.NewPCG(1, 2))
	clients := []string{"a", "b", "c", "d", "e"}
	for i := range 200_000 {
		c.Advance(time.Duration(r.Int64N(int64(20 * time.Millisecond))))
		now := c.Now()
		ts := now.Add(time.Duration(r.Int64N(int64(2*w+4*time.Second))) - w - 2*time.Second)
		k := ck{clients[r.IntN(len(clients))], n(uint64(r.IntN(3000)))}
		want := error(nil)
		if d := ts.Sub(now); d > w || d < -w {
			want = ErrOutsideWindow
		} else if f, ok := first[k]; ok && (floorDiv(f.UnixNano(), int64(b))+1)*int64(b) > now.UnixNano()-int64(w) {
			// Due means every timestamp of the bucket is older than now-W, so
			// in particular f is: never forgotten while acceptable.
			want = ErrDuplicate
		}
		got := s.useAlone(k.client, k.nonce, ts)
		if got != want {
			t.Fatalf("step %d: Use(%v, ts now%+v) = %v, want %v (first %v)", i, k, ts.Sub(now), got, want, first[k].Sub(now))
		}
		if got == nil {
			first[k] = ts
		}
		if i%10_000 == 0 {
			checkTables(t, s)
		}
	}
	checkTables(t, s)
}

// checkTables checks every table: the counts agree with its slots, and
// every entry is found where it is, from its home, with no empty slot on
// the way.
func checkTables(t *testing.T, s *Store) {
	t.Helper()
	total := 0
	for i := range s.shards {
		sh := &s.shards[i]
		for g := range sh.segs {
			seg := &sh.segs[g]
			used := 0
			for j := range seg.table {
				k := seg.table[j].key
				if seg.table[j].epoch == noEpoch {
					continue
				}
				used++
				h := s.hash(&k)
				if at, ok := s.find(&sh.segs[h>>segShift], sh.cutoff, k, h); !ok || at != j || h>>segShift != uint64(g) {
					t.Fatalf("shard %d segment %d: the entry in slot %d is not found from its home", i, g, j)
				}
			}
			if used != seg.used {
				t.Fatalf("shard %d segment %d: %d slots hold entries, used = %d", i, g, used, seg.used)
			}
			total += used
		}
	}
	if total != s.Len() {
		t.Fatalf("tables hold %d entries, Len = %d", total, s.Len())
	}
}

func TestClockStepsBack(t *testing.T) {
	c := newClock()
	s := newStore(Config{Now: c.Now, Window: 5 * time.Minute, Bucket: time.Minute})
	ts := c.Now()
	if err := s.useAlone("k", n(1), ts); err != nil {
		t.Fatal(err)
	}
	c.Advance(7 * time.Minute) // ts's bucket is dropped
	if err := s.useAlone("k", n(2), c.Now()); err != nil {
		t.Fatal(err)
	}
	// The clock steps back; ts would be within the window again, but its
	// bucket is gone, so the store refuses the timestamp rather than accept a
	// nonce it can no longer check.
	c.Advance(-4 * time.Minute)
	if err := s.useAlone("k", n(1), ts); err != ErrOutsideWindow {
		t.Fatalf("after the clock stepped back: %v", err)
	}
	if err := s.useAlone("k", n(2), c.Now().Add(4*time.Minute)); err != ErrDuplicate {
		t.Fatalf("after the clock stepped back: %v", err)
	}
}

// TestDueDeletedGradually: a due bucket's nonces are forgotten at once and
// deleted from memory by the calls that follow, without a Sweep; a nonce
// used again before its old entry is deleted stays remembered.
func TestDueDeletedGradually(t *testing.T) {
	c := newClock()
	s := newStore(Config{Now: c.Now})
	for i := range 1000 {
		if err := s.useAlone("k", n(uint64(i)), c.Now()); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(6*time.Minute + time.Second)
	if err := s.useAlone("k", n(5), c.Now()); err != nil {
		t.Fatalf("a forgotten nonce: %v", err)
	}
	// Each call sweeps the segment its nonce falls in: 5,000 calls sweep
	// each of the 64 segments many times over.
	for i := range 5000 {
		if err := s.useAlone("k", n(uint64(10_000+i)), c.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if s.Len() != 5001 {
		t.Fatalf("Len = %d, want the 5,001 nonces used since", s.Len())
	}
	if err := s.useAlone("k", n(5), c.Now()); err != ErrDuplicate {
		t.Fatalf("a nonce used again: %v", err)
	}
}

// TestFlood sends a million unique nonces from one client: it is stopped at
// MaxPerClient, and other clients carry on.
func TestFlood(t *testing.T) {
	c := newClock()
	s := newStore(Config{Now: c.Now, MaxEntries: 250_000, MaxPerClient: 100_000})
	accepted := 0
	for i := range 1_000_000 {
		err := s.useAlone("flood", n(uint64(i)), c.Now())
		switch {
		case err == nil:
			accepted++
		case err != ErrClientFull || !errors.Is(err, ErrFull):
			t.Fatalf("nonce %d: %v", i, err)
		}
	}
	if accepted != 100_000 {
		t.Fatalf("accepted %d, want MaxPerClient", accepted)
	}
	for i := range 1000 {
		if err := s.useAlone("quiet-"+strconv.Itoa(i), n(1), c.Now()); err != nil {
			t.Fatalf("another client: %v", err)
		}
	}
	// The flooder's old nonces are still refused as duplicates, not as full.
	if err := s.useAlone("flood", n(5), c.Now()); err != ErrDuplicate {
		t.Fatalf("%v", err)
	}
	// Two more flooders fill the store: then everyone gets ErrFull, not a
	// forgotten nonce.
	for _, f := range []string{"flood2", "flood3"} {
		for i := range 100_000 {
			if err := s.useAlone(f, n(uint64(i)), c.Now()); err != nil && !errors.Is(err, ErrFull) {
				t.Fatal(err)
			}
		}
	}
	if s.Len() != 250_000 {
		t.Fatalf("Len = %d, want MaxEntries", s.Len())
	}
	if err := s.useAlone("newcomer", n(1), c.Now()); err != ErrFull || err == ErrClientFull {
		t.Fatalf("full store: %v", err)
	}
	// Once the buckets are due, the flooder is accepted again.
	c.Advance(6*time.Minute + time.Second)
	if err := s.useAlone("flood", n(2_000_000), c.Now()); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}

// TestServiceShare: the clients of one service together hold at most
// MaxPerService nonces, so a tenant with many clients cannot fill the store
// for the others; its nonces are still duplicates, not forgotten, and it is
// accepted again once they are due.
func TestServiceShare(t *testing.T) {
	c := newClock()
	s := newStore(Config{Now: c.Now, MaxEntries: 300_000, MaxPerClient: 100_000, MaxPerService: 150_000})
	accepted := map[string]int{}
	for _, client := range []string{"b1", "b2", "b3"} {
		for i := range 100_000 {
			switch err := s.Use("tenant", client, n(uint64(i)), c.Now()); {
			case err == nil:
				accepted[client]++
			case err != ErrServiceFull || !errors.Is(err, ErrFull):
				t.Fatalf("%s, nonce %d: %v", client, i, err)
			}
		}
	}
	if accepted["b1"] != 100_000 || accepted["b2"] != 50_000 || accepted["b3"] != 0 {
		t.Fatalf("accepted %v, want b1 100000, b2 50000, b3 0 (the service's share is 150000)", accepted)
	}
	if err := s.Use("tenant", "b2", n(7), c.Now()); err != ErrDuplicate {
		t.Fatalf("the tenant's own nonce again: %v, want ErrDuplicate", err)
	}
	for i := range 100_000 {
		if err := s.Use("other", "o1", n(uint64(i)), c.Now()); err != nil {
			t.Fatalf("another service's client, nonce %d: %v", i, err)
		}
	}
	c.Advance(6*time.Minute + time.Second)
	if err := s.Use("tenant", "b3", n(1), c.Now()); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}

// TestFullSweepsIdleShards fills the store from one shard, lets it expire,
// and then uses another shard: the store sweeps before refusing.
func TestFullSweepsIdleShards(t *testing.T) {
	c := newClock()
	s := newStore(Config{Now: c.Now, MaxEntries: 1000})
	for i := range 1000 {
		if err := s.useAlone("a", n(uint64(i)), c.Now()); err != nil {
			t.Fatal(err)
		}
	}
	other := ""
	for i := 0; other == ""; i++ {
		if cand := "b" + strconv.Itoa(i); maphash.String(s.seed, cand)%numShards != maphash.String(s.seed, "a")%numShards {
			other = cand
		}
	}
	if err := s.useAlone(other, n(1), c.Now()); err != ErrFull {
		t.Fatalf("full: %v", err)
	}
	c.Advance(6*time.Minute + time.Second)
	if err := s.useAlone(other, n(1), c.Now()); err != nil {
		t.Fatalf("after a's buckets were due: %v", err)
	}
	if s.Len() != 1 {
		t.Fatalf("Len = %d", s.Len())
	}
}

// TestMemoryReleased checks that the memory of a burst goes back to the
// garbage collector when its buckets are dropped.
func TestMemoryReleased(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few hundred MB")
	}
	c := newClock()
	s := newStore(Config{Now: c.Now, MaxEntries: 1 << 30, MaxPerClient: 1 << 30, MaxPerService: 1 << 30})
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	const burst = 1_000_000
	for i := range burst {
		if err := s.useAlone("c"+strconv.Itoa(i%500), n(uint64(i)), c.Now()); err != nil {
			t.Fatal(err)
		}
		if i%100_000 == 0 {
			c.Advance(time.Second)
		}
	}
	full := heap()
	perNonce := float64(full-before) / burst
	t.Logf("%.0f bytes per nonce held", perNonce)
	if perNonce > 120 {
		t.Errorf("%.0f bytes per nonce", perNonce)
	}
	c.Advance(7 * time.Minute)
	// A little steady traffic keeps the maps of small buckets in use.
	if err := s.useAlone("steady", n(1), c.Now()); err != nil {
		t.Fatal(err)
	}
	s.Sweep()
	after := heap()
	t.Logf("heap: %d MB before, %d MB holding %d nonces, %d MB after expiry", before>>20, full>>20, burst, after>>20)
	if s.Len() != 1 {
		t.Fatalf("Len = %d after expiry", s.Len())
	}
	if after > before+(full-before)/10 {
		t.Fatalf("heap %d after expiry, %d before the burst, %d at its height", after, before, full)
	}
	runtime.KeepAlive(s)
}

func TestConcurrent(t *testing.T) {
	c := newClock()
	s := newStore(Config{Now: c.Now, Bucket: 10 * time.Second})
	var accepted, dups atomic.Int64
	var wg sync.WaitGroup
	const goroutines, perG = 8, 5000
	for g := range goroutines {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for i := range perG {
				// Every goroutine sends the same nonces for the same clients,
				// with timestamps that differ: each pair is accepted once.
				client := "c" + strconv.Itoa(i%16)
				ts := c.Now().Add(time.Duration(r.Int64N(int64(4*time.Minute))) - 2*time.Minute)
				switch err := s.useAlone(client, n(uint64(i)), ts); err {
				case nil:
					accepted.Add(1)
				case ErrDuplicate:
					dups.Add(1)
				default:
					t.Error(err)
					return
				}
				if i%1000 == 0 {
					c.Advance(time.Second)
					s.Sweep()
				}
			}
		})
	}
	wg.Wait()
	if accepted.Load() != perG {
		t.Fatalf("accepted %d, want each of the %d pairs once (%d duplicates)", accepted.Load(), perG, dups.Load())
	}
}

func TestUseAllocs(t *testing.T) {
	c := newClock()
	s := newStore(Config{Now: c.Now, Window: 5 * time.Minute, Bucket: time.Minute})
	// Warm up: a first lap of the ring at the rate the test then runs at.
	next := uint64(0)
	lap := len(s.shards[0].ring) + 1
	for range lap {
		for range 3000 {
			next++
			s.useAlone("branch", n(next), c.Now())
		}
		c.Advance(time.Minute)
	}
	ts := c.Now()
	if allocs := testing.AllocsPerRun(2000, func() {
		next++
		if err := s.useAlone("branch", n(next), ts); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("a new nonce allocates %v times", allocs)
	}
	if allocs := testing.AllocsPerRun(1000, func() {
		if err := s.useAlone("branch", n(next), ts); err != ErrDuplicate {
			t.Fatal(err)
		}
		if err := s.useAlone("branch", n(next), ts.Add(time.Hour)); err != ErrOutsideWindow {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("a refusal allocates %v times", allocs)
	}
}

func BenchmarkUse(b *testing.B) {
	b.Run("new", func(b *testing.B) {
		// 1,000 signed requests a second from one branch, simulated.
		c := newClock()
		s := newStore(Config{Now: c.Now, MaxEntries: 1 << 30, MaxPerClient: 1 << 30, MaxPerService: 1 << 30})
		i := uint64(0)
		b.ReportAllocs()
		for b.Loop() {
			i++
			c.Advance(time.Millisecond)
			s.useAlone("branch", n(i), c.Now())
		}
	})
	b.Run("new-large", func(b *testing.B) {
		// 3,333 a second from one branch, 1.2 million nonces held: the
		// store's map no longer fits in the CPU's caches.
		c := newClock()
		s := newStore(Config{Now: c.Now, MaxEntries: 1 << 30, MaxPerClient: 1 << 30, MaxPerService: 1 << 30})
		const step = 300 * time.Microsecond
		i := uint64(0)
		for range 1_500_000 {
			i++
			c.Advance(step)
			s.useAlone("branch", n(i), c.Now())
		}
		b.ReportAllocs()
		for b.Loop() {
			i++
			c.Advance(step)
			s.useAlone("branch", n(i), c.Now())
		}
	})
	b.Run("duplicate", func(b *testing.B) {
		c := newClock()
		s := newStore(Config{Now: c.Now})
		for i := range 10_000 {
			s.useAlone("branch", n(uint64(i)), c.Now().Add(-time.Duration(i)*time.Millisecond))
		}
		ts := c.Now()
		b.ReportAllocs()
		for b.Loop() {
			s.useAlone("branch", n(0), ts)
		}
	})
	b.Run("parallel-new", func(b *testing.B) {
		c := newClock()
		s := newStore(Config{Now: c.Now, MaxEntries: 1 << 30, MaxPerClient: 1 << 30, MaxPerService: 1 << 30})
		var seq atomic.Uint64
		clients := make([]string, 256)
		for i := range clients {
			clients[i] = "branch-" + strconv.Itoa(i)
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := seq.Add(1)
				if i%64 == 0 {
					c.Advance(64 * 100 * time.Microsecond)
				}
				s.useAlone(clients[i%256], n(i), c.Now())
			}
		})
	})
}
