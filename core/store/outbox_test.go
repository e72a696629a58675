package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/quota"
	"github.com/slipverify/slipverify/core/store"
)

// clock is a settable test clock.
type clock = testnet.Clock

func newClock() *clock { return testnet.NewClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)) }

// open opens a fresh store in the test's directory, closed when the test
// ends unless the test closes it first.
func open(t *testing.T, c *clock, limit int64) (*store.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "core.db")
	st, err := store.OpenWith(path, c.Now, store.Options{OutboxLimit: limit, SlipAges: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, path
}

// reopenWithout closes st, deletes buckets from its file, as a build from
// before them left it, and opens the file again.
func reopenWithout(t *testing.T, st *store.Store, path string, c *clock, buckets ...string) *store.Store {
	t.Helper()
	st.Close()
	editFile(t, path, func(tx *bolt.Tx) error { return dropBuckets(tx, buckets...) })
	st, err := store.Open(path, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// editFile changes a closed store's file directly, as another build would.
func editFile(t *testing.T, path string, edit func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(db.Update(edit), db.Close()); err != nil {
		t.Fatal(err)
	}
}

func dropBuckets(tx *bolt.Tx, buckets ...string) error {
	var errs []error
	for _, b := range buckets {
		errs = append(errs, tx.DeleteBucket([]byte(b)))
	}
	return errors.Join(errs...)
}

// waiting polls until the outbox counts n waiting messages.
func waiting(t *testing.T, st *store.Store, n int64) {
	t.Helper()
	testnet.Eventually(t, 5*time.Second, func() bool { w, _ := st.OutboxStats(); return w == n },
		func() string {
			w, d := st.OutboxStats()
			return fmt.Sprintf("outbox waiting %d dropped %d, want %d waiting", w, d, n)
		})
}

func outbox(t *testing.T, st *store.Store, max int) []store.Message {
	t.Helper()
	msgs, err := st.Outbox(max)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func sameMessage(a, b store.Message) bool {
	return a.Topic == b.Topic && a.Key == b.Key && bytes.Equal(a.Value, b.Value)
}

// TestOutboxRoundTrip: what is emitted comes back from the outbox as it
// was, oldest first, whatever its key and value hold.
func TestOutboxRoundTrip(t *testing.T) {
	st, _ := open(t, newClock(), store.DefaultOutboxLimit)
	big := bytes.Repeat([]byte{0, 1, 0xff, 'x'}, 64<<10)
	in := []store.Message{
		{Topic: "slip.usage", Key: "svc", Value: []byte(`{"eventId":"1"}`)},
		{Topic: "slip.jobs", Key: "", Value: []byte("no key")},
		{Topic: "slip.results", Key: "job-ทดสอบ", Value: nil},
		{Topic: "t", Key: strings.Repeat("k", 300), Value: []byte{0, 0, 0, 0}},
		{Topic: "slip.usage", Key: "svc\x00with\x00zeros", Value: big},
	}
	for _, m := range in {
		if err := st.Emit(m); err != nil {
			t.Fatal(err)
		}
	}
	waiting(t, st, int64(len(in)))
	got := outbox(t, st, 100)
	if len(got) != len(in) {
		t.Fatalf("outbox holds %d messages, want %d", len(got), len(in))
	}
	for i := range in {
		if !sameMessage(got[i], in[i]) {
			t.Errorf("message %d: got %q/%q (%d bytes), want %q/%q (%d bytes)", i,
				got[i].Topic, got[i].Key, len(got[i].Value), in[i].Topic, in[i].Key, len(in[i].Value))
		}
		if i > 0 && got[i].Seq <= got[i-1].Seq {
			t.Errorf("message %d: seq %d after %d", i, got[i].Seq, got[i-1].Seq)
		}
	}
	if first := outbox(t, st, 2); len(first) != 2 || first[0].Seq != got[0].Seq || first[1].Seq != got[1].Seq {
		t.Errorf("Outbox(2) = %d messages, want the two oldest", len(first))
	}
}

// TestAck: acking a sequence number removes every message up to it and
// no other, and the waiting count follows.
func TestAck(t *testing.T) {
	st, _ := open(t, newClock(), store.DefaultOutboxLimit)
	for i := range 5 {
		if err := st.Emit(store.Message{Topic: "t", Key: "k", Value: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	waiting(t, st, 5)
	all := outbox(t, st, 10)
	if err := st.Ack(all[1].Seq); err != nil {
		t.Fatal(err)
	}
	rest := outbox(t, st, 10)
	if len(rest) != 3 || rest[0].Seq != all[2].Seq || rest[0].Value[0] != 2 {
		t.Fatalf("after acking the second of 5: %d left, first %v", len(rest), rest)
	}
	if w, _ := st.OutboxStats(); w != 3 {
		t.Errorf("waiting = %d after ack, want 3", w)
	}
	// Acking again what is gone changes nothing.
	if err := st.Ack(all[0].Seq); err != nil {
		t.Fatal(err)
	}
	if w, _ := st.OutboxStats(); w != 3 || len(outbox(t, st, 10)) != 3 {
		t.Errorf("a repeated ack removed messages: waiting %d", w)
	}
	if err := st.Ack(all[4].Seq); err != nil {
		t.Fatal(err)
	}
	if w, _ := st.OutboxStats(); w != 0 || len(outbox(t, st, 10)) != 0 {
		t.Errorf("after acking the last: waiting %d, outbox %d", w, len(outbox(t, st, 10)))
	}
	// Sequence numbers keep growing after the outbox emptied, so an ack of
	// an old number can never remove a new message.
	if err := st.Emit(store.Message{Topic: "t", Value: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	waiting(t, st, 1)
	if m := outbox(t, st, 1); m[0].Seq <= all[4].Seq {
		t.Errorf("new message seq %d, not above the acked %d", m[0].Seq, all[4].Seq)
	}
}

// TestAckBacklog: an ack of a backlog longer than one transaction deletes
// removes all of it, in order, and reading past a position skips what an
// ack in progress has not removed yet.
func TestAckBacklog(t *testing.T) {
	st, _ := open(t, newClock(), store.DefaultOutboxLimit)
	const n = 25_000
	for i := range n {
		if err := st.Emit(store.Message{Topic: "t", Key: "k", Value: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	waiting(t, st, n)
	all := outbox(t, st, n)
	after, err := st.OutboxAfter(all[n-3].Seq, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 2 || string(after[0].Value) != strconv.Itoa(n-2) || string(after[1].Value) != strconv.Itoa(n-1) {
		t.Fatalf("after the third last: %d messages, %v", len(after), after)
	}
	if err := st.Ack(all[n-2].Seq); err != nil {
		t.Fatal(err)
	}
	rest := outbox(t, st, 10)
	if w, _ := st.OutboxStats(); w != 1 || len(rest) != 1 || string(rest[0].Value) != strconv.Itoa(n-1) {
		t.Errorf("after acking all but the last of %d: waiting %d, outbox %v", n, w, rest)
	}
}

// TestOutboxReady: a publisher waiting on OutboxReady hears of emitted
// messages and of messages written with a job.
func TestOutboxReady(t *testing.T) {
	st, _ := open(t, newClock(), store.DefaultOutboxLimit)
	select {
	case <-st.OutboxReady():
	default:
	}
	signalled := func(what string) {
		t.Helper()
		select {
		case <-st.OutboxReady():
		case <-time.After(5 * time.Second):
			t.Fatalf("no OutboxReady signal after %s", what)
		}
	}
	if err := st.Emit(store.Message{Topic: "t", Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	signalled("Emit")
	if err := st.CreateJobs([]store.Job{{ID: "j1", Created: 1}}, []store.Message{{Topic: "slip.jobs", Key: "j1"}}, 0, store.Nonce{}); err != nil {
		t.Fatal(err)
	}
	// The message is in the outbox when CreateJobs returns, and the signal
	// is there too.
	select {
	case <-st.OutboxReady():
	default:
		t.Error("no OutboxReady signal when CreateJobs returned")
	}
	if w, _ := st.OutboxStats(); w != 2 {
		t.Errorf("waiting = %d, want 2", w)
	}
}

// TestEmitRefusedWhenFull: with Options.OutboxLimit messages waiting, Emit refuses
// and counts the drop; an ack makes room again.
func TestEmitRefusedWhenFull(t *testing.T) {
	st, _ := open(t, newClock(), 3)
	for i := range 3 {
		if err := st.Emit(store.Message{Topic: "t", Value: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
		waiting(t, st, int64(i+1))
	}
	for i := range 2 {
		if err := st.Emit(store.Message{Topic: "t", Value: []byte("extra")}); !errors.Is(err, store.ErrOutboxFull) {
			t.Fatalf("Emit into a full outbox: %v, want ErrOutboxFull", err)
		}
		if w, d := st.OutboxStats(); w != 3 || d != int64(i+1) {
			t.Fatalf("after %d refusals: waiting %d dropped %d", i+1, w, d)
		}
	}
	msgs := outbox(t, st, 10)
	if len(msgs) != 3 {
		t.Fatalf("outbox holds %d messages, want 3", len(msgs))
	}
	if err := st.Ack(msgs[0].Seq); err != nil {
		t.Fatal(err)
	}
	if err := st.Emit(store.Message{Topic: "t", Value: []byte("room again")}); err != nil {
		t.Fatalf("Emit after an ack made room: %v", err)
	}
	waiting(t, st, 3)
	if _, d := st.OutboxStats(); d != 2 {
		t.Errorf("dropped = %d, want 2", d)
	}
}

// TestEmittedBeforeCloseSurviveReopen: Close writes every message emitted
// before it, in order, and a reopened store counts them.
func TestEmittedBeforeCloseSurviveReopen(t *testing.T) {
	c := newClock()
	path := filepath.Join(t.TempDir(), "core.db")
	st, err := store.Open(path, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1500 // more than one transaction's worth
	for i := range n {
		if err := st.Emit(store.Message{Topic: "slip.usage", Key: "svc", Value: fmt.Appendf(nil, "%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = store.Open(path, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if w, d := st.OutboxStats(); w != n || d != 0 {
		t.Errorf("reopened store: waiting %d dropped %d, want %d and 0", w, d, n)
	}
	msgs := outbox(t, st, 2*n)
	if len(msgs) != n {
		t.Fatalf("outbox after reopen holds %d messages, want %d", len(msgs), n)
	}
	for i, m := range msgs {
		if string(m.Value) != fmt.Sprint(i) {
			t.Fatalf("message %d is %q: order lost", i, m.Value)
		}
	}
}

// TestEmitAfterClose: a message emitted after Close is refused with
// ErrClosed, never accepted and then lost.
func TestEmitAfterClose(t *testing.T) {
	c := newClock()
	path := filepath.Join(t.TempDir(), "core.db")
	st, err := store.Open(path, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for range 50 {
		if err := st.Emit(store.Message{Topic: "t", Value: []byte("late")}); err == nil {
			accepted++
		} else if !errors.Is(err, store.ErrClosed) {
			t.Fatalf("Emit after Close: %v, want ErrClosed", err)
		}
	}
	if accepted > 0 {
		t.Errorf("Emit after Close returned nil %d times of 50; those messages are never written", accepted)
	}
}

// TestUsageEventInItsPeriod: a verification at the very end of a billing
// period has its event dated in the period its unit was counted in, even
// when the clock passes the period's start meanwhile (here: at every read),
// so core's counters and the ledger's period totals agree.
func TestUsageEventInItsPeriod(t *testing.T) {
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, quota.Bangkok) // the service's next period starts
	var reads atomic.Int64
	tick := func() time.Time { // half a second before the period's end, then a second later at every read
		return end.Add(-500*time.Millisecond + time.Duration(reads.Add(1)-1)*time.Second)
	}
	st, err := store.OpenWith(filepath.Join(t.TempDir(), "core.db"), tick, store.Options{OutboxLimit: 100, SlipAges: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	insertShop(t, st, 10)
	reads.Store(0)
	var at time.Time
	applyV2(t, st, "EDGE1", func(_ bool, t time.Time) store.Message {
		at = t
		return store.Message{Topic: "slip.usage", Key: "svc", Value: []byte("e")}
	})
	if !at.Before(end) {
		t.Fatalf("the event is dated %v, in the next period; the unit was counted in the one ending %v", at, end)
	}
}

// TestExpireSlips: slip records are removed after the retention, oldest
// first, and a slip verified again after that is new (charged, not a
// duplicate); a younger one is still a duplicate. A store written before
// the records' index by age gets it when opened.
func TestExpireSlips(t *testing.T) {
	c := newClock()
	st, path := open(t, c, 100)
	insertShop(t, st, 100)
	consume := func(ref string) applied { t.Helper(); return applyV2(t, st, ref, nil) }
	consume("OLD1")
	consume("OLD2")
	// As written by a build before the index: built when opened.
	st.Close()
	editFile(t, path, func(tx *bolt.Tx) error {
		return errors.Join(dropBuckets(tx, "slips-by-age"), tx.Bucket([]byte("meta")).Delete([]byte("slips-indexed")))
	})
	st, err := store.Open(path, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	consume("OLD3") // indexed as it is recorded
	c.Advance(2 * time.Hour)
	consume("NEW1")
	if n, err := st.ExpireSlips(c.Now().Add(-time.Hour), 1); err != nil || n != 1 {
		t.Fatalf("ExpireSlips(max 1) = %d, %v; want 1", n, err)
	}
	if n, err := st.ExpireSlips(c.Now().Add(-time.Hour), 100); err != nil || n != 2 {
		t.Fatalf("ExpireSlips = %d, %v; want the other two old ones", n, err)
	}
	if got := consume("OLD1"); got.Seen != nil || !got.Charged {
		t.Errorf("a slip verified again after its record expired: %+v, want new and charged", got)
	}
	if got := consume("NEW1"); got.Seen == nil || got.Charged {
		t.Errorf("a slip within the retention: %+v, want a free self-duplicate", got)
	}
	if n, err := st.ExpireSlips(c.Now().Add(-time.Hour), 100); err != nil || n != 0 {
		t.Errorf("ExpireSlips again = %d, %v; want none", n, err)
	}
}

// TestSlipAgesOff: a store opened without the index by age (no retention)
// refuses to expire; opened with it again, it builds the index from the
// records, those verified meanwhile too, and expires them.
func TestSlipAgesOff(t *testing.T) {
	c := newClock()
	st, path := open(t, c, 100)
	insertShop(t, st, 100)
	applyV2(t, st, "BEFORE", nil) // indexed
	reopen := func(ages bool) *store.Store {
		t.Helper()
		st.Close()
		st, err := store.OpenWith(path, c.Now, store.Options{SlipAges: ages})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	st = reopen(false)
	applyV2(t, st, "WITHOUT", nil) // not indexed
	if n, err := st.ExpireSlips(c.Now().Add(time.Hour), 100); err == nil || n != 0 {
		t.Fatalf("ExpireSlips without the index = %d, %v; want an error", n, err)
	}
	c.Advance(2 * time.Hour)
	st = reopen(true)
	applyV2(t, st, "AFTER", nil)
	if n, err := st.ExpireSlips(c.Now().Add(-time.Hour), 100); err != nil || n != 2 {
		t.Fatalf("ExpireSlips after the index was rebuilt = %d, %v; want BEFORE and WITHOUT", n, err)
	}
	for ref, dup := range map[string]bool{"BEFORE": false, "WITHOUT": false, "AFTER": true} {
		if got := applyV2(t, st, ref, nil); (got.Seen != nil) != dup {
			t.Errorf("%s verified again: %+v, want a duplicate: %v", ref, got, dup)
		}
	}
}

// TestUsageEventsWithConsume: a verification's usage event is in the
// outbox when Consume returns, told whether quota was consumed; with the
// outbox full the verification still succeeds, its event kept if it
// consumed quota (the ledger must equal core's counters), else dropped and
// counted.
func TestUsageEventsWithConsume(t *testing.T) {
	st, _ := open(t, newClock(), 2)
	insertShop(t, st, 10)
	if seeded := outbox(t, st, 10); len(seeded) != 2 || seeded[0].Topic != "slip.audit" || seeded[1].Topic != "slip.config" {
		t.Fatalf("the seed's messages: %+v, want its audit record and config event", seeded)
	} else if err := st.Ack(seeded[1].Seq); err != nil { // published
		t.Fatal(err)
	}
	usage := func(charged bool, _ time.Time) store.Message {
		return store.Message{Topic: "slip.usage", Key: "svc", Value: fmt.Appendf(nil, "charged=%v", charged)}
	}
	consume := func(ref string) applied { t.Helper(); return applyV2(t, st, ref, usage) }
	if c := consume("REF1"); !c.Charged {
		t.Fatal("a new slip was not charged")
	}
	if c := consume("REF1"); c.Charged {
		t.Fatal("a self-duplicate was charged")
	}
	// Both events are on disk already: no waiting.
	msgs := outbox(t, st, 10)
	if len(msgs) != 2 || string(msgs[0].Value) != "charged=true" || string(msgs[1].Value) != "charged=false" ||
		msgs[0].Topic != "slip.usage" || msgs[0].Key != "svc" {
		t.Fatalf("outbox after two verifications: %+v", msgs)
	}
	// The outbox (limit 2) is full: the next verification is charged and its
	// event kept; a self-duplicate's (free) is dropped and counted.
	if c := consume("REF2"); !c.Charged {
		t.Fatal("a verification with a full outbox was not charged")
	}
	if w, d := st.OutboxStats(); w != 3 || d != 0 {
		t.Errorf("a billable event with a full outbox: waiting %d dropped %d, want 3 and 0", w, d)
	}
	if c := consume("REF2"); c.Charged {
		t.Fatal("a self-duplicate was charged")
	}
	if w, d := st.OutboxStats(); w != 3 || d != 1 {
		t.Errorf("a free event with a full outbox: waiting %d dropped %d, want 3 and 1", w, d)
	}
	if msgs := outbox(t, st, 10); len(msgs) != 3 || string(msgs[2].Value) != "charged=true" {
		t.Errorf("outbox: %+v, want the billable event last", msgs)
	}
	snap, err := st.Snapshot("svc", "br", "")
	if err != nil {
		t.Fatal(err)
	}
	if u := snap.Usage; u.Service.Used != 2 || u.Branch.Used != 2 {
		t.Errorf("quota used: service %d branch %d, want 2 and 2", u.Service.Used, u.Branch.Used)
	}
}

// applied is what applyV2 did: the slip's record before it, and whether it
// charged.
type applied struct {
	Seen    *store.SlipRecord
	Charged bool
}

// applyV2 applies a v2 verification of slip ref by branch br of svc as the
// verification rule decides it (core/verify.Decide): the branch's own
// duplicate free, anything else charged.
// insertShop inserts service "svc" with quota limit quota and its branch
// "br", which applyV2 verifies for.
func insertShop(t *testing.T, st *store.Store, quota int64) {
	t.Helper()
	if _, err := st.InsertMissing(store.Records{
		Services: []store.Service{{ID: "svc", State: store.StateActive, QuotaLimit: quota, CycleAnchorDay: 1}},
		Branches: []store.Branch{{ID: "br", ServiceID: "svc", Active: true, KeyDigest: store.Digest("k")}},
	}); err != nil {
		t.Fatal(err)
	}
}

func applyV2(t *testing.T, st *store.Store, ref string, usage func(bool, time.Time) store.Message) applied {
	t.Helper()
	var out applied
	snap, err := st.Apply("svc", "br", store.SlipKey("bank", "004", ref), func(s store.Snapshot) (store.Effect, error) {
		out.Charged = s.Slip == nil || !s.Slip.VerifiedBy("br")
		return store.Effect{Charge: out.Charged, Result: []byte(`{}`), Usage: usage}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out.Seen = snap.Slip
	return out
}
