package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

// TestHistoryAcrossTheOutbox: a listing shows every entry, newest first and
// a page at a time, whether it still waits in the outbox or has moved to
// the branch's range; publishers see messages only; acks and a restart
// keep every entry.
func TestHistoryAcrossTheOutbox(t *testing.T) {
	clock := testnet.NewClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "core.db")
	open := func() *Bolt {
		s, err := OpenWith(path, clock.Now, Options{SlipAges: true})
		if err != nil {
			t.Fatal(err)
		}
		s.historyBatch = 8
		t.Cleanup(func() { s.Close() })
		return s
	}
	s := open()
	if _, err := s.InsertMissing(Records{
		Services: []Service{{ID: "svc", State: StateActive, QuotaLimit: 100, CycleAnchorDay: 1}},
		Branches: []Branch{{ID: "br-a", ServiceID: "svc", Active: true, KeyDigest: Digest("a")},
			{ID: "br-b", ServiceID: "svc", Active: true, KeyDigest: Digest("b")}},
	}); err != nil {
		t.Fatal(err)
	}
	published, err := s.Outbox(10)
	if err != nil || len(published) == 0 {
		t.Fatalf("the records' messages: %v %v", published, err)
	}
	if err := s.Ack(published[len(published)-1].Seq); err != nil {
		t.Fatal(err)
	}

	var want []string // refs by branch, newest first: "br-a REF03"
	list := func(q HistoryQuery) []string {
		t.Helper()
		q.ServiceID = "svc"
		var got []string
		for _, v := range listAll(t, s, q) {
			got = append(got, v.BranchID+" "+strings.TrimPrefix(v.SlipKey, "bank/004/"))
		}
		return got
	}
	check := func(when string) {
		t.Helper()
		if got := list(HistoryQuery{Limit: 100}); !slices.Equal(got, want) {
			t.Errorf("%s: the service's history %q, want %q", when, got, want)
		}
		if got := list(HistoryQuery{Limit: 3}); !slices.Equal(got, want) {
			t.Errorf("%s: pages of 3: %q, want %q", when, got, want)
		}
		var a []string
		for _, w := range want {
			if strings.HasPrefix(w, "br-a ") {
				a = append(a, w)
			}
		}
		if got := list(HistoryQuery{BranchID: "br-a", Limit: 2}); !slices.Equal(got, a) {
			t.Errorf("%s: br-a's history %q, want %q", when, got, a)
		}
	}
	counts := func() (moved, waiting int) {
		s.db.View(func(tx *bolt.Tx) error {
			moved = storedEntries(t, tx)
			return tx.Bucket(bucketOutbox).ForEach(func(k, _ []byte) error {
				if isHistoryKey(k) {
					waiting++
				}
				return nil
			})
		})
		return moved, waiting
	}
	last := published[len(published)-1].Seq
	n := 0 // verifications: at least 11, and some entries still waiting after them
	for i := 0; i < 11 || func() bool { _, w := counts(); return w == 0 }(); i++ {
		n++
		br, ref := []string{"br-a", "br-b"}[i%3%2], fmt.Sprintf("REF%02d", i)
		_, err := s.Apply("svc", br, SlipKey("bank", "004", ref), func(Snapshot) (Effect, error) {
			return Effect{Charge: true, Result: []byte(`{}`), Listed: true, History: Verification{Amount: float64(i)},
				Usage: func(bool, time.Time) Message { return Message{Topic: "slip.usage", Key: "svc", Value: []byte(ref)} }}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want = append([]string{br + " " + ref}, want...)
		// Publishers read the usage message alone, and ack most as they go.
		msgs, err := s.OutboxAfter(last, 100)
		if err != nil || len(msgs) != 1 || string(msgs[0].Value) != ref {
			t.Fatalf("publishers read %+v, %v; want the usage message of %s", msgs, err, ref)
		}
		if last = msgs[0].Seq; i%3 != 2 {
			if err := s.Ack(last); err != nil {
				t.Fatal(err)
			}
		}
		check(fmt.Sprintf("after %d verifications", i+1))
		clock.Advance(time.Second)
	}
	if moved, _ := counts(); moved < 8 {
		t.Errorf("%d of %d entries moved to the branches' ranges: the test covers both places only with some", moved, len(want))
	}

	if err := s.Ack(last); err != nil {
		t.Fatal(err)
	}
	if w, _ := s.OutboxStats(); w != 0 {
		t.Errorf("after the ack, %d messages wait", w)
	}
	var stale, kept int // moved entries the ack passed, waiting ones
	s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOutbox).ForEach(func(k, _ []byte) error {
			switch seq := binary.BigEndian.Uint64(k); {
			case !isHistoryKey(k):
			case seq >= s.historyFrom:
				kept++
			case seq <= last:
				stale++
			}
			return nil
		})
	})
	if moved, _ := counts(); stale != 0 || moved+kept != len(want) {
		t.Errorf("after the ack, the outbox keeps %d moved entries it passed and %d waiting ones (%d moved, of %d)", stale, kept, moved, len(want))
	}
	check("after the ack")
	s.Close()
	s = open()
	if w, _ := s.OutboxStats(); w != 0 {
		t.Errorf("after a restart, %d messages wait", w)
	}
	check("after a restart")
}

// TestHistoryOfConcurrentVerifications: verifications that share
// transactions, several batches moving within one of them, are each listed
// once.
func TestHistoryOfConcurrentVerifications(t *testing.T) {
	s := openShop(t, time.Now, Options{SlipAges: true}, 4)
	const n = 600
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 32 {
				ref := fmt.Sprintf("REF%04d", i)
				if _, err := s.Apply("svc", "br", SlipKey("bank", "004", ref), func(Snapshot) (Effect, error) {
					return Effect{Charge: true, Result: []byte(`{}`), Listed: true,
						Usage: func(bool, time.Time) Message { return Message{Topic: "slip.usage", Key: "svc", Value: []byte(ref)} }}, nil
				}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if commits, writes := s.Commits(); commits >= writes {
		t.Fatalf("%d writes in %d transactions: none shared one", writes, commits)
	}
	seen := map[string]int{}
	for _, v := range listAll(t, s, HistoryQuery{ServiceID: "svc", BranchID: "br", Limit: 100}) {
		seen[v.SlipKey]++
	}
	twice := 0
	for _, c := range seen {
		if c > 1 {
			twice++
		}
	}
	if len(seen) != n || twice != 0 {
		t.Errorf("%d of %d verifications listed, %d of them more than once", len(seen), n, twice)
	}
}

// TestHistorySameMillisecond: two listed verifications of one slip by one
// branch in the same millisecond are both listed, whether they move to the
// branch's range in one batch or in two.
func TestHistorySameMillisecond(t *testing.T) {
	for _, batch := range []uint64{3, 64} {
		clock := testnet.NewClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
		s := openShop(t, clock.Now, Options{SlipAges: true}, batch)
		for range 5 {
			if _, err := s.Apply("svc", "br", SlipKey("bank", "004", "SAME"), func(Snapshot) (Effect, error) {
				return Effect{Charge: true, Result: []byte(`{}`), Listed: true}, nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		page, _, err := s.History(HistoryQuery{ServiceID: "svc", BranchID: "br", Limit: 10})
		if err != nil || len(page) != 5 {
			t.Errorf("batch %d: %d entries listed, %v; want the 5 verifications", batch, len(page), err)
		}
	}
}

// TestHistoryKeptAsLongAsSlips: an entry whose slip record expired is no
// longer listed, and the moves of its branch's later entries remove it.
func TestHistoryKeptAsLongAsSlips(t *testing.T) {
	clock := testnet.NewClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	s := openShop(t, clock.Now, Options{SlipAges: true}, 4)
	verify := func(refs ...string) {
		t.Helper()
		for _, ref := range refs {
			if _, err := s.Apply("svc", "br", SlipKey("bank", "004", ref), func(Snapshot) (Effect, error) {
				return Effect{Charge: true, Result: []byte(`{}`), Listed: true}, nil
			}); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Second)
		}
	}
	listed := func() string {
		t.Helper()
		page, _, err := s.History(HistoryQuery{ServiceID: "svc", BranchID: "br", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var refs []string
		for _, v := range page {
			refs = append(refs, strings.TrimPrefix(v.SlipKey, "bank/004/"))
		}
		return strings.Join(refs, ",")
	}
	stored := func() int {
		var n int
		s.db.View(func(tx *bolt.Tx) error { n = storedEntries(t, tx); return nil })
		return n
	}
	verify("OLD1", "OLD2", "OLD3", "OLD4", "OLD5")
	if stored() == 0 {
		t.Fatal("no entry moved to the branch's range: the test needs some")
	}
	clock.Advance(time.Hour)
	if n, err := s.ExpireSlips(clock.Now().Add(-30*time.Minute), 100); err != nil || n != 5 {
		t.Fatalf("ExpireSlips = %d, %v; want the 5 old slips", n, err)
	}
	if got := listed(); got != "" {
		t.Errorf("entries of expired slips listed: %s", got)
	}
	before := stored()
	verify("NEW1", "NEW2", "NEW3", "NEW4", "NEW5", "NEW6")
	if got := listed(); got != "NEW6,NEW5,NEW4,NEW3,NEW2,NEW1" {
		t.Errorf("listed %s, want the new slips", got)
	}
	if after, moved := stored(), 6-waitingEntries(s); after >= before+moved {
		t.Errorf("%d entries stored before, %d after %d more moved: the expired ones stayed", before, after, moved)
	}
}

// waitingEntries counts the entries waiting in s's outbox.
func waitingEntries(s *Bolt) int {
	n := 0
	s.db.View(func(tx *bolt.Tx) error {
		for _, e := range waiting(tx, "svc", "") {
			n += len(e.kv)
		}
		return nil
	})
	return n
}

// storedEntries counts the entries in bucketHistory's runs.
func storedEntries(t *testing.T, tx *bolt.Tx) int {
	t.Helper()
	n := 0
	tx.Bucket(bucketHistory).ForEach(func(k, v []byte) error {
		entries, err := decodeRun(k, v)
		if err != nil {
			t.Fatal(err)
		}
		n += len(entries)
		return nil
	})
	return n
}

// TestHistoryEntriesMovedToRuns: the entries a store of layout 4 kept one
// by one are listed as before once the store is opened, from runs.
func TestHistoryEntriesMovedToRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "core.db")
	s, err := Open(path, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var want []string
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		old, err := tx.CreateBucket(bucketHistoryEntries)
		if err != nil {
			return err
		}
		for i := range 300 { // more than one run's worth for br-a
			br := []string{"br-a", "br-b"}[min(i%5, 1)]
			v := Verification{At: at.Add(time.Duration(i) * time.Second), ServiceID: "svc", BranchID: br,
				SlipKey: fmt.Sprintf("bank/004/OLD%03d", i), Amount: float64(i), Remark: "moved"}
			if err := old.Put(v.appendKey(nil), v.appendValue(nil)); err != nil {
				return err
			}
			want = append([]string{fmt.Sprintf("%s OLD%03d", br, i)}, want...)
		}
		return tx.Bucket(bucketMeta).Put([]byte("schema"), []byte("4"))
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	if s, err = OpenWith(path, time.Now, Options{}); err != nil { // no expiry: the entries have no slip records
		t.Fatal(err)
	}
	defer s.Close()
	var got []string
	for _, v := range listAll(t, s, HistoryQuery{ServiceID: "svc", Limit: 7}) {
		got = append(got, v.BranchID+" "+strings.TrimPrefix(v.SlipKey, "bank/004/"))
		if v.Remark != "moved" {
			t.Fatalf("entry %+v lost its value", v)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("listed %d entries, want the 300 of before, newest first:\n%q", len(got), got)
	}
	s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketHistoryEntries) != nil {
			t.Error("the entries' bucket was kept")
		}
		if runs := tx.Bucket(bucketHistory).Stats().KeyN; runs < 3 {
			t.Errorf("%d runs for 300 entries of 2 branches", runs)
		}
		return nil
	})
}

// TestHistoryClockSetBack: entries older than their branch's newest run (a
// clock set back) join the run their time falls in, and are listed in time
// order.
func TestHistoryClockSetBack(t *testing.T) {
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	clock := testnet.NewClock(start)
	s := openShop(t, clock.Now, Options{}, 8)
	var want []string
	verify := func(sec int) {
		t.Helper()
		clock.Set(start.Add(time.Duration(sec) * time.Second))
		ref := fmt.Sprintf("S%04d", sec)
		if _, err := s.Apply("svc", "br", SlipKey("bank", "004", ref), func(Snapshot) (Effect, error) {
			return Effect{Charge: true, Result: []byte(`{}`), Listed: true, History: Verification{Remark: strings.Repeat("r", 100)}}, nil
		}); err != nil {
			t.Fatal(err)
		}
		want = append(want, ref)
	}
	for sec := 0; sec < 400; sec += 2 { // runs of about 30 entries
		verify(sec)
	}
	for _, sec := range []int{401, 3, 151, 399, 1, 77, 403, 250} { // back and forth, across runs
		verify(sec)
	}
	for sec := 500; sec < 520; sec++ {
		verify(sec)
	}
	slices.Sort(want)
	slices.Reverse(want)
	var got []string
	for _, v := range listAll(t, s, HistoryQuery{ServiceID: "svc", BranchID: "br", Limit: 9}) {
		got = append(got, strings.TrimPrefix(v.SlipKey, "bank/004/"))
	}
	if !slices.Equal(got, want) {
		t.Errorf("listed %d entries, want %d in time order:\n%q", len(got), len(want), got)
	}
	var runs int
	s.db.View(func(tx *bolt.Tx) error { runs = tx.Bucket(bucketHistory).Stats().KeyN; return nil })
	if runs < 3 {
		t.Errorf("%d runs: the test needs entries set back into runs of before", runs)
	}
}

// openShop opens a store in a new directory, with history batches of
// batch, holding service svc and its branch br; the test closes it.
func openShop(t *testing.T, now func() time.Time, o Options, batch uint64) *Bolt {
	t.Helper()
	s, err := OpenWith(filepath.Join(t.TempDir(), "core.db"), now, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.historyBatch = batch
	if _, err := s.InsertMissing(Records{
		Services: []Service{{ID: "svc", State: StateActive, QuotaLimit: 1 << 20, CycleAnchorDay: 1}},
		Branches: []Branch{{ID: "br", ServiceID: "svc", Active: true, KeyDigest: Digest("a")}},
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

// listAll lists q page after page to the end.
func listAll(t *testing.T, s *Bolt, q HistoryQuery) []Verification {
	t.Helper()
	var out []Verification
	for range 10_000 {
		page, next, err := s.History(q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if next == nil {
			return out
		}
		q.After = *next
	}
	t.Fatalf("no end to the pages of %+v", q)
	return nil
}
