// Package storetest is the suite every implementation of store.Store
// passes, as database/sql drivers share their compliance tests: records,
// verifications and their exactness under concurrency, jobs, the outbox,
// nonces, the history, counters' periods, the audit log and admin tokens.
// An implementation's test calls Run with a Backend.
package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/quota"
	"github.com/slipverify/slipverify/core/store"
)

// Place is where one test's store keeps its state (a file, a database).
type Place interface {
	// Open opens the store kept at the place: empty at first, and after a
	// store there closed, with what it held.
	Open(now func() time.Time, o store.Options) (store.Store, error)
}

// Backend is an implementation under test.
type Backend struct {
	// New returns an empty place for one test.
	New func(t *testing.T) Place
	// Shared says that several stores may be open on one place at once,
	// as several core processes on one database: the suite then checks
	// exactness across them too.
	Shared bool
}

// Run runs the suite against b, each test in a place of its own.
func Run(t *testing.T, b Backend) {
	tests := []struct {
		name string
		fn   func(*testing.T, *env)
	}{
		{"OutboxRoundTrip", testOutboxRoundTrip},
		{"Ack", testAck},
		{"AckBacklog", testAckBacklog},
		{"OutboxReady", testOutboxReady},
		{"EmitRefusedWhenFull", testEmitRefusedWhenFull},
		{"EmittedBeforeCloseSurviveReopen", testEmittedBeforeCloseSurviveReopen},
		{"EmitAfterClose", testEmitAfterClose},
		{"UsageEventInItsPeriod", testUsageEventInItsPeriod},
		{"ExpireSlips", testExpireSlips},
		{"UsageEventsWithConsume", testUsageEventsWithConsume},
		{"CreateJobsAllOrNone", testCreateJobsAllOrNone},
		{"UnfinishedJobsBound", testUnfinishedJobsBound},
		{"UpdateJob", testUpdateJob},
		{"DueJobs", testDueJobs},
		{"ExpireJobs", testExpireJobs},
		{"NonceClaimedOnce", testNonceClaimedOnce},
		{"NonceGuardsChange", testNonceGuardsChange},
		{"IndexesByService", testIndexesByService},
		{"AccountBounds", testAccountBounds},
		{"DeletedBranchStaysDeleted", testDeletedBranchStaysDeleted},
		{"QuotaExact", testQuotaExact},
		{"SlipRecordedOnce", testSlipRecordedOnce},
		{"ApplyAfterChange", testApplyAfterChange},
		{"FailedDecideWritesNothing", testFailedDecideWritesNothing},
		{"CounterPeriods", testCounterPeriods},
		{"History", testHistory},
		{"FindSlip", testFindSlip},
		{"Records", testRecords},
		{"Audit", testAudit},
		{"AdminTokens", testAdminTokens},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, &env{place: b.New(t), shared: b.Shared})
		})
	}
}

// env is one test's place.
type env struct {
	place  Place
	shared bool
}

// open opens the test's store with the clock c and outbox limit limit (0:
// the default), closed when the test ends unless the test closes it.
func (e *env) open(t *testing.T, c *clock, limit int64) store.Store {
	t.Helper()
	return e.openWith(t, c.Now, store.Options{OutboxLimit: limit, SlipAges: true})
}

func (e *env) openWith(t *testing.T, now func() time.Time, o store.Options) store.Store {
	t.Helper()
	st, err := e.place.Open(now, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// others returns n stores on the test's place besides st: stores of their
// own when the backend is shared (as other cores would be), else st again.
func (e *env) others(t *testing.T, st store.Store, c *clock, n int) []store.Store {
	t.Helper()
	out := []store.Store{st}
	for range n {
		if e.shared {
			out = append(out, e.open(t, c, 0))
		} else {
			out = append(out, st)
		}
	}
	return out
}

// clock is a settable test clock.
type clock = testnet.Clock

func newClock() *clock { return testnet.NewClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)) }

// waiting polls until the outbox counts n waiting messages.
func waiting(t *testing.T, st store.Store, n int64) {
	t.Helper()
	testnet.Eventually(t, 5*time.Second, func() bool { w, _ := st.OutboxStats(); return w == n },
		func() string {
			w, d := st.OutboxStats()
			return fmt.Sprintf("outbox waiting %d dropped %d, want %d waiting", w, d, n)
		})
}

func outbox(t *testing.T, st store.Store, max int) []store.Message {
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

// applyV2 applies a v2 verification of slip ref by branch br of svc as the
// verification rule decides it (core/verify.Decide): the branch's own
// duplicate free, anything else charged.
// insertShop inserts service "svc" with quota limit quota and its branch
// "br", which applyV2 verifies for.
func insertShop(t *testing.T, st store.Store, quota int64) {
	t.Helper()
	if _, err := st.InsertMissing(store.Records{
		Services: []store.Service{{ID: "svc", State: store.StateActive, QuotaLimit: quota, CycleAnchorDay: 1}},
		Branches: []store.Branch{{ID: "br", ServiceID: "svc", Active: true, KeyDigest: store.Digest("k")}},
	}); err != nil {
		t.Fatal(err)
	}
}

func applyV2(t *testing.T, st store.Store, ref string, usage func(bool, time.Time) store.Message) applied {
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

func jobMsg(id string) store.Message {
	return store.Message{Topic: "slip.jobs", Key: id, Value: []byte(`{"jobId":"` + id + `"}`)}
}

func job(t *testing.T, st store.Store, id string) store.Job {
	t.Helper()
	j, err := st.Job(id)
	if err != nil {
		t.Fatalf("job %s: %v", id, err)
	}
	return j
}

func twoServices() store.Records {
	r := store.Records{
		Services: []store.Service{{ID: "svc-a", CycleAnchorDay: 1}, {ID: "svc-b", CycleAnchorDay: 1}},
		Branches: []store.Branch{
			{ID: "a-1", ServiceID: "svc-a", KeyDigest: store.Digest("ka")},
			{ID: "b-1", ServiceID: "svc-b", KeyDigest: store.Digest("kb")},
		},
	}
	for i := range 3 {
		r.Accounts = append(r.Accounts, store.BankAccount{ID: fmt.Sprintf("acc-a%d", i), ServiceID: "svc-a", BankCode: "004",
			BankNumber: fmt.Sprint(1000 + i), Active: true})
	}
	r.Accounts = append(r.Accounts, store.BankAccount{ID: "acc-b0", ServiceID: "svc-b", BankCode: "004", BankNumber: "1000", Active: true})
	return r
}

// openTwoServices opens a fresh store with twoServices and a second branch
// of svc-a, a-2, and returns them.
func openTwoServices(t *testing.T, e *env, c *clock) (store.Store, store.Records) {
	t.Helper()
	st := e.open(t, c, 0)
	r := twoServices()
	r.Branches = append(r.Branches, store.Branch{ID: "a-2", ServiceID: "svc-a", KeyDigest: store.Digest("ka2")})
	if _, err := st.InsertMissing(r); err != nil {
		t.Fatal(err)
	}
	return st, r
}

// listings returns each service's accounts and branches, by id.
func listings(t *testing.T, st store.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, svc := range []string{"svc-a", "svc-b"} {
		accounts, err := st.Accounts(svc, "")
		if err != nil {
			t.Fatal(err)
		}
		branches, err := st.Branches(svc)
		if err != nil {
			t.Fatal(err)
		}
		var a, b []string
		for _, x := range accounts {
			a = append(a, x.ID)
		}
		for _, x := range branches {
			b = append(b, x.ID)
		}
		out[svc] = fmt.Sprintf("accounts %v branches %v", a, b)
	}
	return out
}

// testOutboxRoundTrip: what is emitted comes back from the outbox as it
// was, oldest first, whatever its key and value hold.
func testOutboxRoundTrip(t *testing.T, e *env) {
	st := e.open(t, newClock(), store.DefaultOutboxLimit)
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

// testAck: acking a sequence number removes every message up to it and
// no other, and the waiting count follows.
func testAck(t *testing.T, e *env) {
	st := e.open(t, newClock(), store.DefaultOutboxLimit)
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

// testAckBacklog: an ack of a backlog longer than one transaction deletes
// removes all of it, in order, and reading past a position skips what an
// ack in progress has not removed yet.
func testAckBacklog(t *testing.T, e *env) {
	st := e.open(t, newClock(), store.DefaultOutboxLimit)
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

// testOutboxReady: a publisher waiting on OutboxReady hears of emitted
// messages and of messages written with a job.
func testOutboxReady(t *testing.T, e *env) {
	st := e.open(t, newClock(), store.DefaultOutboxLimit)
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

// testEmitRefusedWhenFull: with Options.OutboxLimit messages waiting, Emit refuses
// and counts the drop; an ack makes room again.
func testEmitRefusedWhenFull(t *testing.T, e *env) {
	st := e.open(t, newClock(), 3)
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

// testEmittedBeforeCloseSurviveReopen: Close writes every message emitted
// before it, in order, and a reopened store counts them.
func testEmittedBeforeCloseSurviveReopen(t *testing.T, e *env) {
	c := newClock()
	st := e.open(t, c, 0)
	const n = 1500 // more than one transaction's worth
	for i := range n {
		if err := st.Emit(store.Message{Topic: "slip.usage", Key: "svc", Value: fmt.Appendf(nil, "%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = e.open(t, c, 0)
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

// testEmitAfterClose: a message emitted after Close is refused with
// ErrClosed, never accepted and then lost.
func testEmitAfterClose(t *testing.T, e *env) {
	c := newClock()
	st := e.open(t, c, 0)
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

// testUsageEventInItsPeriod: a verification at the very end of a billing
// period has its event dated in the period its unit was counted in, even
// when the clock passes the period's start meanwhile (here: at every read),
// so core's counters and the ledger's period totals agree.
func testUsageEventInItsPeriod(t *testing.T, e *env) {
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, quota.Bangkok) // the service's next period starts
	var reads atomic.Int64
	tick := func() time.Time { // half a second before the period's end, then a second later at every read
		return end.Add(-500*time.Millisecond + time.Duration(reads.Add(1)-1)*time.Second)
	}
	st := e.openWith(t, tick, store.Options{OutboxLimit: 100, SlipAges: true})
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

// testExpireSlips: slip records are removed after the retention, oldest
// first, and a slip verified again after that is new (charged, not a
// duplicate); a younger one is still a duplicate. A store written before
// the records' index by age gets it when opened.
func testExpireSlips(t *testing.T, e *env) {
	c := newClock()
	st := e.open(t, c, 100)
	insertShop(t, st, 100)
	consume := func(ref string) applied { t.Helper(); return applyV2(t, st, ref, nil) }
	consume("OLD1")
	consume("OLD2")
	st.Close() // the records outlive a restart
	st = e.open(t, c, 100)
	consume("OLD3")
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

// testUsageEventsWithConsume: a verification's usage event is in the
// outbox when Consume returns, told whether quota was consumed; with the
// outbox full the verification still succeeds, its event kept if it
// consumed quota (the ledger must equal core's counters), else dropped and
// counted.
func testUsageEventsWithConsume(t *testing.T, e *env) {
	st := e.open(t, newClock(), 2)
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

// testCreateJobsAllOrNone: a batch with one taken id creates nothing and
// publishes nothing.
func testCreateJobsAllOrNone(t *testing.T, e *env) {
	c := newClock()
	st := e.open(t, c, store.DefaultOutboxLimit)
	ms := c.Now().UnixMilli()
	a := store.Job{ID: "a", ServiceID: "svc", BranchID: "br", Created: ms, Status: "queued", Attempt: 1,
		Request: []byte(`{"Source":{"Payload":"p"}}`), CallbackURL: "https://example.com/hook"}
	if err := st.CreateJobs([]store.Job{a}, []store.Message{jobMsg("a")}, 0, store.Nonce{}); err != nil {
		t.Fatal(err)
	}
	got := job(t, st, "a")
	if got.ServiceID != "svc" || got.Status != "queued" || string(got.Request) != string(a.Request) ||
		got.CallbackURL != a.CallbackURL || got.Created != ms || got.Attempt != 1 {
		t.Errorf("stored job %+v, want %+v", got, a)
	}
	if msgs := outbox(t, st, 10); len(msgs) != 1 || !sameMessage(msgs[0], jobMsg("a")) {
		t.Fatalf("outbox after CreateJobs: %+v", msgs)
	}

	b := store.Job{ID: "b", Created: ms, Status: "queued", Attempt: 1}
	a2 := a
	a2.Status = "overwritten"
	err := st.CreateJobs([]store.Job{b, a2}, []store.Message{jobMsg("b"), jobMsg("a")}, 0, store.Nonce{})
	if !errors.Is(err, store.ErrJobExists) {
		t.Fatalf("CreateJobs with a taken id: %v, want ErrJobExists", err)
	}
	if _, err := st.Job("b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("job b of the refused batch: %v, want ErrNotFound", err)
	}
	if got := job(t, st, "a"); got.Status != "queued" {
		t.Errorf("job a changed by the refused batch: status %q", got.Status)
	}
	if msgs := outbox(t, st, 10); len(msgs) != 1 {
		t.Errorf("the refused batch published: outbox holds %d messages", len(msgs))
	}
	// The refused batch left nothing in the retention index either.
	if n, err := st.ExpireJobs(c.Now().Add(time.Hour), 10); err != nil || n != 1 {
		t.Errorf("ExpireJobs = %d, %v; want only job a", n, err)
	}
}

// testUnfinishedJobsBound: CreateJobs refuses, all or none, jobs that would
// take a branch past its bound of unfinished jobs; a job stops counting when
// it gets its result or error or is removed; branches count apart; and the
// counts are rebuilt when a store from before them opens.
func testUnfinishedJobsBound(t *testing.T, e *env) {
	c := newClock()
	st := e.open(t, c, 0)
	create := func(branch string, ids ...string) error {
		jobs := make([]store.Job, len(ids))
		for i, id := range ids {
			jobs[i] = store.Job{ID: id, ServiceID: "svc", BranchID: branch, Created: c.Now().UnixMilli(), Status: "queued", Attempt: 1}
		}
		return st.CreateJobs(jobs, nil, 3, store.Nonce{})
	}
	update := func(id string, change func(j *store.Job)) {
		t.Helper()
		if _, err := st.UpdateJob(id, func(j *store.Job) ([]store.Message, error) { change(j); return nil, nil }); err != nil {
			t.Fatal(err)
		}
	}
	want := func(err error, wantErr error, what string) {
		t.Helper()
		if !errors.Is(err, wantErr) {
			t.Fatalf("%s: %v, want %v", what, err, wantErr)
		}
	}
	want(create("a", "a1", "a2"), nil, "2 of 3")
	want(create("a", "a3", "a4"), store.ErrTooManyJobs, "2 more")
	if _, err := st.Job("a3"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("job a3 of the refused batch: %v, want ErrNotFound", err)
	}
	want(create("b", "b1", "b2", "b3"), nil, "another branch's 3")
	if err := st.CreateJobs([]store.Job{{ID: "x1", ServiceID: "other", BranchID: "a"}}, nil, 1, store.Nonce{}); err != nil {
		t.Errorf("branch a of another service: %v", err)
	}

	update("a1", func(j *store.Job) { j.Status = "processing" })
	want(create("a", "a3", "a4"), store.ErrTooManyJobs, "after a1 started")
	update("a1", func(j *store.Job) { j.Status, j.Result = "done", []byte(`{"status":"success"}`) })
	want(create("a", "a3", "a4"), nil, "after a1 was done")
	want(create("a", "a5"), store.ErrTooManyJobs, "a fourth unfinished")
	update("a2", func(j *store.Job) { j.Status, j.Error = "failed", []byte(`{"code":"QUOTA_EXCEEDED"}`) })
	update("a2", func(j *store.Job) { j.Settled = true }) // a finished job changing again
	want(create("a", "a5"), nil, "after a2 failed")

	// a3, a4, a5 unfinished: the count survives a restart
	st.Close()
	st = e.open(t, c, 0)
	want(create("a", "a6"), store.ErrTooManyJobs, "reopened, a fourth unfinished")
	want(create("b", "b4"), store.ErrTooManyJobs, "reopened, b's fourth")

	// removal after retention frees the branch
	c.Advance(time.Hour)
	if n, err := st.ExpireJobs(c.Now(), 100); err != nil || n != 9 {
		t.Fatalf("ExpireJobs = %d, %v; want 9", n, err)
	}
	want(create("a", "a6", "a7", "a8"), nil, "3 after the rest expired")
}

// testUpdateJob: a change is stored with its messages in one step; a
// change that fails leaves the job and the outbox as they were.
func testUpdateJob(t *testing.T, e *env) {
	c := newClock()
	st := e.open(t, c, store.DefaultOutboxLimit)
	if err := st.CreateJobs([]store.Job{{ID: "j", Created: c.Now().UnixMilli(), Status: "queued", Attempt: 1}}, nil, 0, store.Nonce{}); err != nil {
		t.Fatal(err)
	}
	res := store.Message{Topic: "slip.results", Key: "j", Value: []byte("callback")}
	got, err := st.UpdateJob("j", func(j *store.Job) ([]store.Message, error) {
		j.Status, j.Result, j.Delivery = "done", []byte(`{"status":"success"}`), 1
		return []store.Message{res}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "done" {
		t.Errorf("UpdateJob returned status %q", got.Status)
	}
	if j := job(t, st, "j"); j.Status != "done" || string(j.Result) != `{"status":"success"}` || j.Delivery != 1 {
		t.Errorf("stored job after update: %+v", j)
	}
	if msgs := outbox(t, st, 10); len(msgs) != 1 || !sameMessage(msgs[0], res) {
		t.Errorf("outbox after update: %+v", msgs)
	}

	refuse := errors.New("refused")
	_, err = st.UpdateJob("j", func(j *store.Job) ([]store.Message, error) {
		j.Status, j.Result, j.DueAt = "failed", nil, c.Now().UnixMilli()
		return []store.Message{jobMsg("j")}, refuse
	})
	if !errors.Is(err, refuse) {
		t.Fatalf("UpdateJob with a failing change: %v, want its error", err)
	}
	if j := job(t, st, "j"); j.Status != "done" || string(j.Result) != `{"status":"success"}` || j.DueAt != 0 {
		t.Errorf("a failed change altered the job: %+v", j)
	}
	if msgs := outbox(t, st, 10); len(msgs) != 1 {
		t.Errorf("a failed change published: outbox holds %d messages", len(msgs))
	}
	if ids, _, _ := st.DueJobs(c.Now().Add(time.Hour), 10); len(ids) != 0 {
		t.Errorf("a failed change made the job due: %v", ids)
	}

	called := false
	_, err = st.UpdateJob("gone", func(*store.Job) ([]store.Message, error) { called = true; return nil, nil })
	if !errors.Is(err, store.ErrNotFound) || called {
		t.Errorf("UpdateJob of an unknown job: %v (change called: %v), want ErrNotFound", err, called)
	}
}

// testDueJobs: due jobs come earliest first, up to max, with the time of
// the next one; moving or clearing a job's due time moves it in the index.
func testDueJobs(t *testing.T, e *env) {
	c := newClock()
	st := e.open(t, c, store.DefaultOutboxLimit)
	t0 := c.Now()
	at := func(d time.Duration) int64 { return t0.Add(d).UnixMilli() }
	jobs := []store.Job{
		{ID: "late", Created: at(0), DueAt: at(3 * time.Second)},
		{ID: "first", Created: at(0), DueAt: at(1 * time.Second)},
		{ID: "second-b", Created: at(0), DueAt: at(2 * time.Second)},
		{ID: "second-a", Created: at(0), DueAt: at(2 * time.Second)},
		{ID: "never", Created: at(0)},
	}
	if err := st.CreateJobs(jobs, nil, 0, store.Nonce{}); err != nil {
		t.Fatal(err)
	}
	due := func(now time.Time, max int) ([]string, time.Time) {
		t.Helper()
		ids, next, err := st.DueJobs(now, max)
		if err != nil {
			t.Fatal(err)
		}
		return ids, next
	}
	f := func(now time.Duration, max int, want []string, wantNext time.Duration) {
		t.Helper()
		ids, next := due(t0.Add(now), max)
		if !slices.Equal(ids, want) {
			t.Errorf("DueJobs(t0+%v, %d) = %v, want %v", now, max, ids, want)
		}
		var wn time.Time
		if wantNext >= 0 {
			wn = time.UnixMilli(at(wantNext))
		}
		if !next.Equal(wn) {
			t.Errorf("DueJobs(t0+%v, %d) next = %v, want %v", now, max, next, wn)
		}
	}
	f(0, 10, nil, time.Second)
	f(time.Second, 10, []string{"first"}, 2*time.Second)
	f(2*time.Second, 10, []string{"first", "second-a", "second-b"}, 3*time.Second)
	f(2*time.Second, 2, []string{"first", "second-a"}, 2*time.Second) // the third is due already
	f(time.Hour, 10, []string{"first", "second-a", "second-b", "late"}, -1)

	// Moving "first" after "late" and clearing "second-a" update the index.
	if _, err := st.UpdateJob("first", func(j *store.Job) ([]store.Message, error) { j.DueAt = at(4 * time.Second); return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateJob("second-a", func(j *store.Job) ([]store.Message, error) { j.DueAt = 0; return nil, nil }); err != nil {
		t.Fatal(err)
	}
	f(time.Second, 10, nil, 2*time.Second)
	f(time.Hour, 10, []string{"second-b", "late", "first"}, -1)
	// An update that keeps the due time keeps the job listed once.
	if _, err := st.UpdateJob("late", func(j *store.Job) ([]store.Message, error) { j.Status = "retrying"; return nil, nil }); err != nil {
		t.Fatal(err)
	}
	f(time.Hour, 10, []string{"second-b", "late", "first"}, -1)
}

// testExpireJobs: jobs created before the cutoff are removed, oldest
// first and at most max of them, and no longer come due.
func testExpireJobs(t *testing.T, e *env) {
	c := newClock()
	st := e.open(t, c, store.DefaultOutboxLimit)
	t0 := c.Now()
	at := func(d time.Duration) int64 { return t0.Add(d).UnixMilli() }
	if err := st.CreateJobs([]store.Job{
		{ID: "old-due", Created: at(0), DueAt: at(time.Minute)},
		{ID: "old", Created: at(time.Second)},
		{ID: "new-due", Created: at(time.Hour), DueAt: at(time.Minute)},
	}, nil, 0, store.Nonce{}); err != nil {
		t.Fatal(err)
	}
	expire := func(cutoff time.Duration, max, want int) {
		t.Helper()
		if n, err := st.ExpireJobs(t0.Add(cutoff), max); err != nil || n != want {
			t.Fatalf("ExpireJobs(t0+%v, %d) = %d, %v; want %d", cutoff, max, n, err, want)
		}
	}
	expire(0, 10, 0) // created at the cutoff: kept
	expire(time.Minute, 1, 1)
	if _, err := st.Job("old-due"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the oldest job after expiry: %v, want ErrNotFound", err)
	}
	job(t, st, "old")
	if ids, _, _ := st.DueJobs(t0.Add(2*time.Hour), 10); !slices.Equal(ids, []string{"new-due"}) {
		t.Errorf("due after expiry: %v, want only new-due", ids)
	}
	expire(time.Minute, 10, 1)
	if _, err := st.Job("old"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("job old after expiry: %v", err)
	}
	job(t, st, "new-due")
	expire(time.Minute, 10, 0)
	expire(2*time.Hour, 10, 1)
	if ids, next, _ := st.DueJobs(t0.Add(2*time.Hour), 10); len(ids) != 0 || !next.IsZero() {
		t.Errorf("due after every job expired: %v next %v", ids, next)
	}
	// A job created again with an expired one's id is a new job.
	if err := st.CreateJobs([]store.Job{{ID: "old", Created: at(3 * time.Hour)}}, nil, 0, store.Nonce{}); err != nil {
		t.Errorf("CreateJobs with an expired job's id: %v", err)
	}
}

// testNonceClaimedOnce: copies of a signed request that reach the store at
// once, or one after another, are claimed once per service; the nonce is
// remembered as long as an edge would take the request, then forgotten.
func testNonceClaimedOnce(t *testing.T, e *env) {
	c := newClock()
	st := e.open(t, c, 0)
	at := c.Now()
	for i := range 200 {
		n := store.Nonce{Value: fmt.Sprintf("nonce-%03d", i), At: at}
		var wg sync.WaitGroup
		var mu sync.Mutex
		claimed := 0
		for range 4 {
			wg.Go(func() {
				err := st.ClaimNonce("svc-a", n)
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					claimed++
				} else if api.Internal(err).Code != api.DuplicateNonce {
					t.Errorf("claim %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		if claimed != 1 {
			t.Fatalf("nonce %d: claimed %d times of 4", i, claimed)
		}
	}
	n := store.Nonce{Value: "nonce-000", At: at}
	if err := st.ClaimNonce("svc-b", n); err != nil {
		t.Errorf("another service's nonce: %v", err)
	}
	for _, after := range []time.Duration{0, api.NonceWindow} {
		if _, err := st.ExpireNonces(at.Add(after), 1000); err != nil {
			t.Fatal(err)
		}
		if err := st.ClaimNonce("svc-a", n); err == nil {
			t.Fatalf("a nonce was forgotten %v after its timestamp, inside the window", after)
		}
	}
	if m, err := st.ExpireNonces(at.Add(api.NonceWindow+2*time.Minute), 1000); err != nil || m == 0 {
		t.Fatalf("expiring the window's nonces: %d nonces, %v", m, err)
	}
	if err := st.ClaimNonce("svc-a", n); err != nil {
		t.Errorf("a nonce past the window is still refused: %v", err)
	}
}

// testNonceGuardsChange: copies of one signed change that reach the store
// at once are applied once.
func testNonceGuardsChange(t *testing.T, e *env) {
	c := newClock()
	st, _ := openTwoServices(t, e, c)
	for i := range 100 {
		ch := store.Change{Nonce: store.Nonce{Value: fmt.Sprintf("change-%03d", i), At: c.Now()}}
		var wg sync.WaitGroup
		var mu sync.Mutex
		applied := 0
		for range 2 {
			wg.Go(func() {
				_, err := st.UpdateBranch("svc-a", "a-2", ch, func(b *store.Branch, _ store.Usage) error { b.Name += "x"; return nil })
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					applied++
				}
			})
		}
		wg.Wait()
		if applied != 1 {
			t.Fatalf("change %d: applied %d times of 2", i, applied)
		}
	}
}

// testIndexesByService: each service lists its own accounts and branches,
// seeded or created, and no deleted branch; also in a store written before
// accounts and branches were indexed by service (the indexes are built
// when such a store opens).
func testIndexesByService(t *testing.T, e *env) {
	c := newClock()
	st, _ := openTwoServices(t, e, c)
	if err := st.CreateAccount(&store.BankAccount{ID: "acc-b1", ServiceID: "svc-b", BankCode: "014", BankNumber: "2000", Active: true}, store.Change{}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateBranch(store.Branch{ID: "b-0", ServiceID: "svc-b", KeyDigest: store.Digest("kb0")}, store.Change{}); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteBranch("svc-a", "a-2", store.Change{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"svc-a": "accounts [acc-a0 acc-a1 acc-a2] branches [a-1]",
		"svc-b": "accounts [acc-b0 acc-b1] branches [b-0 b-1]",
	}
	if got := listings(t, st); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("listings %v, want %v", got, want)
	}
}

// testAccountBounds: a service holds at most MaxAccountsPerService
// accounts, an account lists at most MaxAccountBranches branches at
// creation, and a branch listed twice is linked once.
func testAccountBounds(t *testing.T, e *env) {
	st := e.open(t, newClock(), 0)
	r := twoServices()
	for i := 1; i < store.MaxAccountsPerService; i++ { // svc-b has acc-b0 already
		r.Accounts = append(r.Accounts, store.BankAccount{ID: fmt.Sprintf("acc-x%04d", i), ServiceID: "svc-b", BankCode: "006",
			BankNumber: fmt.Sprint(i), Active: true})
	}
	if _, err := st.InsertMissing(r); err != nil {
		t.Fatal(err)
	}
	one := func(svc, id string, branches ...string) error {
		return st.CreateAccount(&store.BankAccount{ID: id, ServiceID: svc, BankCode: "014", BankNumber: id, Active: true, Branches: branches}, store.Change{})
	}
	if err := one("svc-b", "acc-over"); !errors.Is(err, store.ErrRule) {
		t.Fatalf("account %d of a service: %v, want a refusal", store.MaxAccountsPerService+1, err)
	}
	many := make([]string, store.MaxAccountBranches+1)
	for i := range many {
		many[i] = "a-1"
	}
	if err := one("svc-a", "acc-many", many...); !errors.Is(err, store.ErrRule) {
		t.Fatalf("%d branches: %v, want a refusal", len(many), err)
	}
	twice := store.BankAccount{ID: "acc-twice", ServiceID: "svc-a", BankCode: "014", BankNumber: "acc-twice", Active: true, Branches: []string{"a-1", "a-1"}}
	if err := st.CreateAccount(&twice, store.Change{}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(twice.Branches) != "[a-1]" {
		t.Errorf("the account as created lists %v, want [a-1] as stored", twice.Branches)
	}
	accounts, _ := st.Accounts("svc-a", "a-1")
	if len(accounts) != 1 || fmt.Sprint(accounts[0].Branches) != "[a-1]" {
		t.Fatalf("a branch listed twice: %+v", accounts)
	}
}

// testDeletedBranchStaysDeleted: the seed, loaded at every start, does not
// bring back a branch deleted at run time, nor its key: deleting a branch is
// how an operator revokes a leaked key.
func testDeletedBranchStaysDeleted(t *testing.T, e *env) {
	c := newClock()
	st, r := openTwoServices(t, e, c)
	if err := st.DeleteBranch("svc-a", "a-2", store.Change{}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = e.open(t, c, 0)
	if n, err := st.InsertMissing(r); err != nil || n != 0 {
		t.Fatalf("the seed again after a restart: inserted %d (%v), want 0", n, err)
	}
	if _, br, _, _, err := st.BranchByKey(store.Digest("ka2")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the deleted branch's key finds branch %q (%v)", br.ID, err)
	}
	if got := listings(t, st)["svc-a"]; got != "accounts [acc-a0 acc-a1 acc-a2] branches [a-1]" {
		t.Errorf("svc-a: %s", got)
	}
} // insert inserts r into st.
func insert(t *testing.T, st store.Store, r store.Records) {
	t.Helper()
	if _, err := st.InsertMissing(r); err != nil {
		t.Fatal(err)
	}
}

// twoBranches is service svc (quota limit) with branches br and br2.
func twoBranches(limit int64) store.Records {
	return store.Records{
		Services: []store.Service{{ID: "svc", State: store.StateActive, QuotaLimit: limit, CycleAnchorDay: 1}},
		Branches: []store.Branch{
			{ID: "br", ServiceID: "svc", Main: true, Active: true, KeyDigest: store.Digest("k")},
			{ID: "br2", ServiceID: "svc", Active: true, KeyDigest: store.Digest("k2")},
		},
	}
}

var errQuota = errors.New("quota used up")

// usageEvent is a verification's usage event, saying whether it charged.
func usageEvent(charged bool, _ time.Time) store.Message {
	return store.Message{Topic: "slip.usage", Key: "svc", Value: []byte(strconv.FormatBool(charged))}
}

// decideV2 decides as core's rule does for a v2 verification: the
// branch's own duplicate is free, anything else is charged, and refused
// when no quota is left.
func decideV2(branch string, charged *atomic.Int64) func(store.Snapshot) (store.Effect, error) {
	return func(s store.Snapshot) (store.Effect, error) {
		if s.Slip != nil && s.Slip.VerifiedBy(branch) {
			return store.Effect{Result: []byte(`{}`), Usage: usageEvent}, nil
		}
		if !s.QuotaLeft() {
			return store.Effect{}, errQuota
		}
		if charged != nil {
			charged.Add(1)
		}
		return store.Effect{Charge: true, Result: []byte(`{"branch":"` + branch + `"}`), Usage: usageEvent}, nil
	}
}

// usageEvents counts the usage events in st's outbox by what they say.
func usageEvents(t *testing.T, st store.Store) (charged, free int) {
	t.Helper()
	for _, m := range outbox(t, st, 100_000) {
		switch {
		case m.Topic != "slip.usage":
		case string(m.Value) == "true":
			charged++
		default:
			free++
		}
	}
	return charged, free
}

// testQuotaExact: concurrent verifications of new slips from two branches,
// through several stores at once when the backend is shared (as several
// cores), charge exactly the service's limit: no more, none lost. The
// counters, the usage events and the slip records agree.
func testQuotaExact(t *testing.T, e *env) {
	c := newClock()
	st := e.open(t, c, 0)
	const limit, n = 25, 120
	insert(t, st, twoBranches(limit))
	stores := e.others(t, st, c, 2)
	var decided atomic.Int64 // decisions to charge, some of them decided again
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, br := stores[i%len(stores)], []string{"br", "br2"}[i%2]
			s.Announce()
			defer s.Retract()
			_, err := s.Apply("svc", br, store.SlipKey("bank", "004", fmt.Sprintf("Q%03d", i)), decideV2(br, &decided))
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, errQuota):
				refused.Add(1)
			default:
				t.Errorf("verification %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != limit || refused.Load() != n-limit {
		t.Errorf("%d verifications over a limit of %d: %d charged, %d refused", n, limit, ok.Load(), refused.Load())
	}
	q1, err := st.Quota("svc", "br")
	if err != nil {
		t.Fatal(err)
	}
	q2, err := st.Quota("svc", "br2")
	if err != nil {
		t.Fatal(err)
	}
	if u := q1.Usage.Service; u.Used != limit || u.Total != limit {
		t.Errorf("service counter %+v, want %d used", u, limit)
	}
	if b := q1.Usage.Branch.Used + q2.Usage.Branch.Used; b != limit {
		t.Errorf("branch counters add up to %d, want %d", b, limit)
	}
	if charged, free := usageEvents(t, st); charged != limit || free != 0 {
		t.Errorf("usage events: %d charged, %d free; want %d and 0", charged, free, limit)
	}
	recorded := 0
	for i := range n {
		if _, _, err := st.FindSlip("svc", fmt.Sprintf("Q%03d", i)); err == nil {
			recorded++
		}
	}
	if recorded != limit {
		t.Errorf("%d slips recorded, want the %d charged", recorded, limit)
	}
}

// testSlipRecordedOnce: one slip verified many times at once by two
// branches, through several stores when shared, is recorded once with
// both branches: charged once for the first branch and once for the other
// (another branch's duplicate), free ever after; the first verification's
// result stands.
func testSlipRecordedOnce(t *testing.T, e *env) {
	c := newClock()
	st := e.open(t, c, 0)
	insert(t, st, twoBranches(100))
	stores := e.others(t, st, c, 2)
	key := store.SlipKey("bank", "004", "ONCE")
	var wg sync.WaitGroup
	var firsts atomic.Int64 // verifications that found no record
	for i := range 40 {
		wg.Go(func() {
			s, br := stores[i%len(stores)], []string{"br", "br2"}[i%2]
			snap, err := s.Apply("svc", br, key, decideV2(br, nil))
			if err != nil {
				t.Errorf("verification %d: %v", i, err)
			}
			if snap.Slip == nil {
				firsts.Add(1)
			}
		})
	}
	wg.Wait()
	if firsts.Load() != 1 {
		t.Errorf("%d verifications found no record of the slip, want 1", firsts.Load())
	}
	q, err := st.Quota("svc", "br")
	if err != nil {
		t.Fatal(err)
	}
	if q.Usage.Service.Used != 2 {
		t.Errorf("charged %d times, want 2 (once per branch)", q.Usage.Service.Used)
	}
	k, rec, err := st.FindSlip("svc", "ONCE")
	if err != nil {
		t.Fatal(err)
	}
	br := slices.Sorted(slices.Values(rec.Branches))
	if k != key || !slices.Equal(br, []string{"br", "br2"}) || rec.FirstAt != c.Now().Unix() {
		t.Errorf("record %s: %+v, want one of both branches", k, rec)
	}
	if first := rec.Branches[0]; string(rec.Result) != `{"branch":"`+first+`"}` {
		t.Errorf("record's result %s, want the first verification's (%s)", rec.Result, first)
	}
}

// testApplyAfterChange: a verification's write decides on the rows as
// they stand when it is written, not as its snapshot read them, whatever
// another core (store) changed between the two: the slip verified
// meanwhile by the same branch is not charged again, and a branch whose
// quota was used up meanwhile refuses it.
func testApplyAfterChange(t *testing.T, e *env) {
	c := newClock()
	st := e.open(t, c, 0)
	insert(t, st, twoBranches(100))
	other := e.others(t, st, c, 1)[1]
	key := store.SlipKey("bank", "004", "MEANWHILE")
	if _, err := st.Apply("svc", "br2", key, decideV2("br2", nil)); err != nil {
		t.Fatal(err)
	}
	if snap, err := st.Snapshot("svc", "br", key); err != nil || snap.Slip.VerifiedBy("br") {
		t.Fatalf("snapshot: %+v, %v; want the slip of br2 alone", snap.Slip, err)
	}
	if _, err := other.Apply("svc", "br", key, decideV2("br", nil)); err != nil {
		t.Fatal(err)
	}
	snap, err := st.Apply("svc", "br", key, decideV2("br", nil))
	if err != nil || !snap.Slip.VerifiedBy("br") {
		t.Errorf("the write after br's verification elsewhere saw %+v (%v); want the slip verified by br", snap.Slip, err)
	}
	q, err := st.Quota("svc", "br")
	if err != nil {
		t.Fatal(err)
	}
	if q.Usage.Service.Used != 2 || q.Usage.Branch.Used != 1 {
		t.Errorf("service used %d, br %d; want 2 and 1: br2's and br's verifications charged once each", q.Usage.Service.Used, q.Usage.Branch.Used)
	}

	key = store.SlipKey("bank", "004", "USEDUP")
	if _, err := st.Snapshot("svc", "br", key); err != nil {
		t.Fatal(err)
	}
	if _, err := other.ChangeQuota("svc", "br", "quota.set", store.Change{}, func(q store.BranchQuota) (*int64, bool, error) {
		used := q.Usage.Branch.Used
		return &used, false, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply("svc", "br", key, decideV2("br", nil)); !errors.Is(err, errQuota) {
		t.Errorf("the write after the branch's quota was used up: %v, want %v", err, errQuota)
	}
	if q, err = st.Quota("svc", "br"); err != nil || q.Usage.Service.Used != 2 {
		t.Errorf("service used %d (%v), want 2", q.Usage.Service.Used, err)
	}
}

// testFailedDecideWritesNothing: a verification whose decision fails, or
// whose write is refused (a nonce claimed already), writes nothing of its
// effect, while verifications beside it (in the same commit, maybe) are
// written whole.
func testFailedDecideWritesNothing(t *testing.T, e *env) {
	c := newClock()
	st := e.open(t, c, 0)
	insert(t, st, twoBranches(100))
	stores := e.others(t, st, c, 1)
	nonce := store.Nonce{Value: "n-1", At: c.Now()}
	refusal := errors.New("refused")
	var wg sync.WaitGroup
	var claimed, plain atomic.Int64
	for i := range 30 {
		wg.Go(func() {
			s := stores[i%len(stores)]
			s.Announce()
			defer s.Retract()
			key := store.SlipKey("bank", "004", fmt.Sprintf("F%02d", i))
			_, err := s.Apply("svc", "br", key, func(snap store.Snapshot) (store.Effect, error) {
				switch i % 3 {
				case 0: // refused by its decision
					return store.Effect{Charge: true, Result: []byte(`{}`)}, refusal
				case 1: // all claim one nonce: one of them wins
					return store.Effect{Charge: true, Result: []byte(`{}`), Nonce: nonce, Usage: usageEvent}, nil
				}
				return store.Effect{Charge: true, Result: []byte(`{}`), Usage: usageEvent}, nil
			})
			switch {
			case i%3 == 0 && !errors.Is(err, refusal):
				t.Errorf("verification %d: %v, want its decision's refusal", i, err)
			case i%3 == 1 && err == nil:
				claimed.Add(1)
			case i%3 == 1 && api.Internal(err).Code != api.DuplicateNonce:
				t.Errorf("verification %d: %v, want DUPLICATE_NONCE", i, err)
			case i%3 == 2 && err != nil:
				t.Errorf("verification %d: %v", i, err)
			case i%3 == 2:
				plain.Add(1)
			}
		})
	}
	wg.Wait()
	if claimed.Load() != 1 || plain.Load() != 10 {
		t.Fatalf("%d verifications claimed the nonce (want 1), %d plain ones written (want 10)", claimed.Load(), plain.Load())
	}
	q, err := st.Quota("svc", "br")
	if err != nil {
		t.Fatal(err)
	}
	if q.Usage.Service.Used != 11 || q.Usage.Branch.Used != 11 {
		t.Errorf("used %d (branch %d), want 11: only what was written", q.Usage.Service.Used, q.Usage.Branch.Used)
	}
	recorded := 0
	for i := range 30 {
		if _, _, err := st.FindSlip("svc", fmt.Sprintf("F%02d", i)); err == nil {
			recorded++
		}
	}
	if charged, _ := usageEvents(t, st); recorded != 11 || charged != 11 {
		t.Errorf("%d slips recorded, %d usage events; want 11 each", recorded, charged)
	}
}

// testCounterPeriods: a service's counters start at 0 in each billing
// period, from its anchor day at midnight in Bangkok, and the total runs
// on; Counters lists every service's and branch's in the period now; a
// branch's reset zeroes its use in the period alone.
func testCounterPeriods(t *testing.T, e *env) {
	c := newClock()
	st := e.open(t, c, 0)
	insert(t, st, twoBranches(2))
	verify := func(ref string) error {
		_, err := st.Apply("svc", "br", store.SlipKey("bank", "004", ref), decideV2("br", nil))
		return err
	}
	for _, ref := range []string{"P1", "P2"} {
		if err := verify(ref); err != nil {
			t.Fatal(err)
		}
	}
	if err := verify("P3"); !errors.Is(err, errQuota) {
		t.Fatalf("a third verification over a limit of 2: %v", err)
	}
	next := time.Date(2026, 12, 1, 0, 0, 0, 0, quota.Bangkok)
	c.Set(next.Add(-time.Second))
	if snap, err := st.Snapshot("svc", "br", ""); err != nil || snap.QuotaLeft() || snap.Usage.PeriodStart != time.Date(2026, 11, 1, 0, 0, 0, 0, quota.Bangkok).Unix() {
		t.Fatalf("the period's last second: %+v, %v", snap.Usage, err)
	}
	c.Set(next)
	snap, err := st.Snapshot("svc", "br", "")
	if err != nil {
		t.Fatal(err)
	}
	if u := snap.Usage; !snap.QuotaLeft() || u.PeriodStart != next.Unix() || u.Service.Used != 0 || u.Service.Total != 2 || u.Branch.Used != 0 {
		t.Fatalf("the next period: %+v", u)
	}
	if err := verify("P3"); err != nil {
		t.Fatal(err)
	}
	at, all, err := st.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if !at.Equal(next) || len(all) != 1 {
		t.Fatalf("Counters at %v: %+v", at, all)
	}
	sc := all[0]
	want := fmt.Sprint([]store.BranchCounter{{BranchID: "br", Counter: quota.Counter{Period: next.Unix(), Used: 1, Total: 3}}, {BranchID: "br2", Counter: quota.Counter{Period: next.Unix()}}})
	if sc.Service.ID != "svc" || sc.PeriodStart != next.Unix() || sc.Counter.Used != 1 || sc.Counter.Total != 3 || fmt.Sprint(sc.Branches) != want {
		t.Errorf("Counters: %+v, want service 1 used of 3 and branches %s", sc, want)
	}
	q, err := st.ChangeQuota("svc", "br", "quota.reset", store.Change{}, func(q store.BranchQuota) (*int64, bool, error) {
		return q.Branch.LimitQuota, true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if q.Usage.Branch.Used != 0 {
		t.Errorf("ChangeQuota's answer after a reset: %+v", q.Usage)
	}
	q, err = st.Quota("svc", "br")
	if err != nil {
		t.Fatal(err)
	}
	if q.Usage.Branch.Used != 0 || q.Usage.Branch.Total != 3 || q.Usage.Service.Used != 1 {
		t.Errorf("after the branch's reset: %+v, want branch 0 used of 3, service 1", q.Usage)
	}
}

// testHistory: verifications listed in the history come back newest first
// across branches, by branch, filtered, a page at a time; and they go with
// their slips' records when those expire.
func testHistory(t *testing.T, e *env) {
	c := newClock()
	st := e.open(t, c, 0)
	insert(t, st, twoBranches(100))
	t0 := c.Now()
	list := func(br, ref string, amount float64, remark string, dup bool) {
		t.Helper()
		_, err := st.Apply("svc", br, store.SlipKey("bank", "004", ref), func(s store.Snapshot) (store.Effect, error) {
			e, err := decideV2(br, nil)(s)
			e.Listed = true
			e.History = store.Verification{Amount: amount, ReceivingBank: "014", Remark: remark, Duplicate: dup}
			return e, err
		})
		if err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Second)
	}
	list("br", "A", 100, "", false)
	list("br2", "B", 200, "", false)
	list("br", "C", 300, "x", false)
	list("br2", "C", 300, "", true)
	if _, err := st.Apply("svc", "br", store.SlipKey("bank", "004", "UNLISTED"), decideV2("br", nil)); err != nil {
		t.Fatal(err)
	}
	show := func(vs []store.Verification) string {
		var b strings.Builder
		for _, v := range vs {
			fmt.Fprintf(&b, "%s:%s@%d ", v.BranchID, strings.TrimPrefix(v.SlipKey, "bank/004/"), v.At.Sub(t0)/time.Second)
		}
		return strings.TrimSpace(b.String())
	}
	yes, lo, hi, x := true, 150.0, 250.0, "x"
	for _, f := range []struct {
		q    store.HistoryQuery
		want string
	}{
		{store.HistoryQuery{}, "br2:C@3 br:C@2 br2:B@1 br:A@0"},
		{store.HistoryQuery{BranchID: "br"}, "br:C@2 br:A@0"},
		{store.HistoryQuery{Duplicate: &yes}, "br2:C@3"},
		{store.HistoryQuery{AmountMin: &lo, AmountMax: &hi}, "br2:B@1"},
		{store.HistoryQuery{Remark: &x}, "br:C@2"},
		{store.HistoryQuery{From: t0.Add(time.Second), To: t0.Add(3 * time.Second)}, "br:C@2 br2:B@1"},
	} {
		f.q.ServiceID, f.q.Limit = "svc", 10
		got, next, err := st.History(f.q)
		if err != nil || show(got) != f.want || next != nil {
			t.Errorf("History(%+v) = %s (next %v, %v), want %s", f.q, show(got), next, err, f.want)
		}
	}
	page, next, err := st.History(store.HistoryQuery{ServiceID: "svc", Limit: 3})
	if err != nil || show(page) != "br2:C@3 br:C@2 br2:B@1" || next == nil {
		t.Fatalf("first page: %s, next %v, %v", show(page), next, err)
	}
	if v := page[1]; v.ServiceID != "svc" || v.Amount != 300 || v.ReceivingBank != "014" || v.Remark != "x" || v.Duplicate || v.DateMatched != nil ||
		v.At.UnixMilli() != t0.Add(2*time.Second).UnixMilli() {
		t.Errorf("an entry: %+v", v)
	}
	page, next, err = st.History(store.HistoryQuery{ServiceID: "svc", Limit: 3, After: *next})
	if err != nil || show(page) != "br:A@0" || next != nil {
		t.Errorf("second page: %s, next %v, %v", show(page), next, err)
	}
	if got, _, _ := st.History(store.HistoryQuery{ServiceID: "other", Limit: 10}); len(got) != 0 {
		t.Errorf("another service's history: %s", show(got))
	}
	c.Advance(time.Hour)
	if n, err := st.ExpireSlips(c.Now().Add(-30*time.Minute), 100); err != nil || n != 4 {
		t.Fatalf("ExpireSlips = %d, %v; want the 4 slips", n, err)
	}
	if got, _, err := st.History(store.HistoryQuery{ServiceID: "svc", Limit: 10}); err != nil || len(got) != 0 {
		t.Errorf("after the slips expired: %s, %v; want none", show(got), err)
	}
}

// testFindSlip: a transaction reference is found whatever its sending
// bank, the one first verified when several banks have it, and a wallet's
// by its transaction id; another service's is not found.
func testFindSlip(t *testing.T, e *env) {
	c := newClock()
	st := e.open(t, c, 0)
	insert(t, st, twoBranches(100))
	for _, k := range []string{store.SlipKey("bank", "014", "REF"), store.SlipKey("bank", "004", "REF"), store.SlipKey("wallet", "W1"), store.SlipKey("bank", "006", "REFX")} {
		if _, err := st.Apply("svc", "br", k, decideV2("br", nil)); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Second)
	}
	for ref, want := range map[string]string{"REF": "bank/014/REF", "W1": "wallet/W1", "REFX": "bank/006/REFX"} {
		if k, rec, err := st.FindSlip("svc", ref); err != nil || k != want || rec == nil || !rec.VerifiedBy("br") {
			t.Errorf("FindSlip(%s) = %s, %+v, %v; want %s", ref, k, rec, err, want)
		}
	}
	for _, q := range [][2]string{{"svc", "RE"}, {"svc", "NONE"}, {"other", "REF"}} {
		if _, _, err := st.FindSlip(q[0], q[1]); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("FindSlip(%s, %s): %v, want ErrNotFound", q[0], q[1], err)
		}
	}
}

// testRecords: services, branches, keys, B2B clients, conditions and
// account links as the operators and tenants change them.
func testRecords(t *testing.T, e *env) {
	c := newClock()
	st := e.open(t, c, 0)
	limit := int64(5)
	sv := store.Service{ID: "svc", Name: "Shop", State: store.StateActive, QuotaLimit: 100, CycleAnchorDay: 1}
	main := store.Branch{ID: "main", ServiceID: "svc", Main: true, Active: true, KeyDigest: store.Digest("key-1"), LimitQuota: &limit}
	client := store.B2BClient{KeyDigest: store.Digest("client-1"), ServiceID: "svc", Secret: []byte("sealed"), Permissions: []string{"branch:read"}}
	if err := st.CreateService(sv, main, client, store.Change{}); err != nil {
		t.Fatal(err)
	}
	other := main
	other.ID = "other"
	if err := st.CreateService(sv, other, store.B2BClient{KeyDigest: store.Digest("client-2"), ServiceID: "svc"}, store.Change{}); !errors.Is(err, store.ErrExists) {
		t.Errorf("a service id taken: %v, want ErrExists", err)
	}
	gotSv, br, first, keyEnds, err := st.BranchByKey(store.Digest("key-1"))
	if err != nil || gotSv.Name != "Shop" || br.ID != "main" || *br.LimitQuota != 5 || first == nil || first.KeyDigest != client.KeyDigest || keyEnds != nil {
		t.Fatalf("BranchByKey: %+v %+v %+v %v, %v", gotSv, br, first, keyEnds, err)
	}
	if _, _, _, _, err := st.BranchByKey(store.Digest("nobody")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown key: %v", err)
	}
	// Key rotation with an overlap: both keys work until it ends.
	if _, err := st.RotateBranchKey("svc", "main", store.Digest("key-2"), time.Hour, false, store.Change{}); err != nil {
		t.Fatal(err)
	}
	if _, br, _, ends, err := st.BranchByKey(store.Digest("key-1")); err != nil || br.ID != "main" || ends == nil || !ends.Equal(c.Now().Add(time.Hour)) {
		t.Errorf("the previous key in its overlap: %v, ends %v", err, ends)
	}
	if _, _, _, ends, err := st.BranchByKey(store.Digest("key-2")); err != nil || ends != nil {
		t.Errorf("the new key: %v, ends %v", err, ends)
	}
	if _, err := st.RotateBranchKey("svc", "main", store.Digest("key-3"), time.Hour, false, store.Change{}); !errors.Is(err, store.ErrOverlapOpen) {
		t.Errorf("a rotation in the overlap: %v, want ErrOverlapOpen", err)
	}
	c.Advance(time.Hour)
	if _, _, _, _, err := st.BranchByKey(store.Digest("key-1")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the previous key after its overlap: %v", err)
	}
	if _, err := st.RotateBranchKey("svc", "main", store.Digest("key-3"), time.Hour, false, store.Change{}); err != nil {
		t.Fatal(err)
	}
	if b, err := st.RevokePreviousKey("svc", "main", store.Change{}); err != nil || b.Previous != nil {
		t.Fatalf("RevokePreviousKey: %+v, %v", b.Previous, err)
	}
	if _, _, _, _, err := st.BranchByKey(store.Digest("key-2")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a revoked key: %v", err)
	}
	// Branches.
	b2 := store.Branch{ID: "b2", ServiceID: "svc", Active: true, KeyDigest: store.Digest("key-b2")}
	if err := st.CreateBranch(b2, store.Change{}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateBranch(store.Branch{ID: "b3", ServiceID: "svc", KeyDigest: store.Digest("key-b2")}, store.Change{}); !errors.Is(err, store.ErrRule) {
		t.Errorf("a branch with a key in use: %v, want a refusal", err)
	}
	if err := st.CreateBranch(store.Branch{ID: "x", ServiceID: "none", KeyDigest: store.Digest("key-x")}, store.Change{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a branch of no service: %v", err)
	}
	if _, err := st.UpdateBranch("svc", "b2", store.Change{}, func(b *store.Branch, _ store.Usage) error { b.Name = "Second"; return nil }); err != nil {
		t.Fatal(err)
	}
	if b, err := st.Branch("svc", "b2"); err != nil || b.Name != "Second" {
		t.Errorf("Branch after update: %+v, %v", b, err)
	}
	if _, err := st.Branch("other", "b2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a branch asked of another service: %v", err)
	}
	if list, err := st.Branches("svc"); err != nil || len(list) != 2 || list[0].ID != "main" || list[1].ID != "b2" {
		t.Errorf("Branches: %+v, %v", list, err)
	}
	if err := st.DeleteBranch("svc", "main", store.Change{}); !errors.Is(err, store.ErrRule) {
		t.Errorf("deleting the main branch: %v", err)
	}
	// Conditions: a branch's defaults reach its snapshots.
	lo := 10.0
	if err := st.SetBranchConditions("svc", "b2", store.Conditions{AmountMin: &lo, MaxAge: time.Hour}, store.Change{}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.BranchConditions("svc", "b2"); err != nil || *got.AmountMin != 10 || got.MaxAge != time.Hour {
		t.Errorf("BranchConditions: %+v, %v", got, err)
	}
	if snap, err := st.Snapshot("svc", "b2", ""); err != nil || snap.Conditions.AmountMin == nil || *snap.Conditions.AmountMin != 10 {
		t.Errorf("Snapshot's conditions: %+v, %v", snap.Conditions, err)
	}
	if got, err := st.BranchConditions("svc", "main"); err != nil || got.HasAmount() || got.HasDate() {
		t.Errorf("a branch without conditions: %+v, %v", got, err)
	}
	// Accounts.
	acc := store.BankAccount{ID: "acc", ServiceID: "svc", BankCode: "004", BankNumber: "123", Active: true, Branches: []string{"main"}}
	if err := st.CreateAccount(&acc, store.Change{}); err != nil {
		t.Fatal(err)
	}
	dup := acc
	dup.ID = "acc2"
	if err := st.CreateAccount(&dup, store.Change{}); !errors.Is(err, store.ErrAccountDuplicate) {
		t.Errorf("an account twice: %v", err)
	}
	if a, err := st.LinkAccount("svc", "b2", "acc", true, store.Change{}); err != nil || fmt.Sprint(a.Branches) != "[main b2]" {
		t.Errorf("LinkAccount: %+v, %v", a, err)
	}
	if list, err := st.Accounts("svc", "b2"); err != nil || len(list) != 1 {
		t.Errorf("b2's accounts: %+v, %v", list, err)
	}
	if _, err := st.LinkAccount("svc", "b2", "acc", false, store.Change{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.LinkAccount("svc", "b2", "acc", false, store.Change{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unlinking twice: %v", err)
	}
	// B2B clients.
	c2, err := st.CreateClient(store.B2BClient{KeyDigest: store.Digest("client-3"), ServiceID: "svc", Secret: []byte("s3")}, store.Change{})
	if err != nil {
		t.Fatal(err)
	}
	if list, err := st.Clients("svc"); err != nil || len(list) != 2 || list[0].KeyDigest != client.KeyDigest || list[1].KeyDigest != c2.KeyDigest {
		t.Errorf("Clients in creation order: %+v, %v", list, err)
	}
	if _, err := st.UpdateClient("svc", c2.ID(), store.Change{}, func(c *store.B2BClient) { c.Name = "ops" }); err != nil {
		t.Fatal(err)
	}
	rotated, err := st.RotateClientSecret("svc", c2.ID(), time.Minute, false, store.Change{}, func(string) []byte { return []byte("s4") })
	if err != nil || string(rotated.Secret) != "s4" || rotated.Previous == nil || string(rotated.Previous.Secret) != "s3" || rotated.Name != "ops" {
		t.Fatalf("RotateClientSecret: %+v, %v", rotated, err)
	}
	if _, got, err := st.Client(c2.KeyDigest); err != nil || string(got.Secret) != "s4" {
		t.Errorf("Client after rotation: %+v, %v", got, err)
	}
	if err := st.DeleteClient("svc", c2.ID(), store.Change{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Client(c2.KeyDigest); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a deleted client: %v", err)
	}
	// The service: changed, then deleted; its keys stop working.
	if _, err := st.UpdateService("svc", "service.update", store.Change{}, func(sv *store.Service, _ quota.Counter, _ time.Time) error {
		sv.Name = "Shop 2"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, _, _, err := st.Service("svc"); err != nil || got.Name != "Shop 2" {
		t.Errorf("Service after update: %+v, %v", got, err)
	}
	if _, err := st.UpdateService("svc", "service.delete", store.Change{}, func(sv *store.Service, _ quota.Counter, _ time.Time) error {
		sv.State = store.StateDeleted
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, _, err := st.BranchByKey(store.Digest("key-b2")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a deleted service's key: %v", err)
	}
	if _, err := st.Snapshot("svc", "b2", ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a deleted service's snapshot: %v", err)
	}
	if err := st.CreateBranch(store.Branch{ID: "b9", ServiceID: "svc", KeyDigest: store.Digest("key-b9")}, store.Change{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a branch of a deleted service: %v", err)
	}
	if all, err := st.Services(); err != nil || len(all) != 1 || all[0].State != store.StateDeleted {
		t.Errorf("Services: %+v, %v", all, err)
	}
}

// testAudit: every change leaves an audit record, listed newest first a
// page at a time and filtered by service and action, each published on
// slip.audit with the slip.config event that makes the edges forget the
// service's records.
func testAudit(t *testing.T, e *env) {
	c := newClock()
	st := e.open(t, c, 0)
	insert(t, st, twoBranches(100))
	who := store.Change{Actor: api.AuditActor{Type: "admin", ID: "ops"}, RequestID: "req-1", Reason: "asked"}
	for i := range 3 {
		c.Advance(time.Millisecond)
		if _, err := st.UpdateBranch("svc", "br2", who, func(b *store.Branch, _ store.Usage) error { b.Name = fmt.Sprint("n", i); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	recs, next, err := st.Audit(store.AuditFilter{Limit: 2})
	if err != nil || len(recs) != 2 || next == "" {
		t.Fatalf("first page: %d records, next %q, %v", len(recs), next, err)
	}
	r := recs[0]
	if r.Action != "branch.update" || r.ServiceID != "svc" || r.Actor != who.Actor || r.RequestID != "req-1" || r.Reason != "asked" ||
		r.Target != (api.AuditTarget{Type: "branch", ID: "br2"}) || !bytes.Contains(r.After, []byte(`"n2"`)) || !bytes.Contains(r.Before, []byte(`"n1"`)) ||
		bytes.Contains(r.After, []byte(store.Digest("k2"))) || !r.At.Equal(c.Now().UTC()) {
		t.Errorf("the newest record: %+v", r)
	}
	rest, next, err := st.Audit(store.AuditFilter{Limit: 10, Cursor: next})
	if err != nil || next != "" || len(rest) != 2 || !bytes.Contains(rest[0].After, []byte(`"n0"`)) || rest[1].Action != "service.create" {
		t.Errorf("the rest: %+v, next %q, %v", rest, next, err)
	}
	if got, _, _ := st.Audit(store.AuditFilter{Limit: 10, Action: "service.create"}); len(got) != 1 || got[0].Actor.Type != api.ActorSeed {
		t.Errorf("by action: %+v", got)
	}
	if got, _, _ := st.Audit(store.AuditFilter{Limit: 10, ServiceID: "other"}); len(got) != 0 {
		t.Errorf("another service's: %+v", got)
	}
	if got, _, _ := st.Audit(store.AuditFilter{Limit: 10, Since: c.Now().Add(-time.Millisecond)}); len(got) != 2 {
		t.Errorf("since a millisecond ago: %d records, want 2", len(got))
	}
	if _, _, err := st.Audit(store.AuditFilter{Limit: 10, Cursor: "zz"}); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("a made-up cursor: %v", err)
	}
	topics := map[string]int{}
	for _, m := range outbox(t, st, 100) {
		topics[m.Topic]++
	}
	if topics[api.TopicAudit] != 4 || topics[api.TopicConfig] != 4 {
		t.Errorf("outbox topics: %v, want 4 audit records and 4 config events", topics)
	}
}

// testAdminTokens: an operator's token is found by its digest until it
// expires or is revoked; ids and digests are unique.
func testAdminTokens(t *testing.T, e *env) {
	c := newClock()
	st := e.open(t, c, 0)
	ends := c.Now().Add(time.Hour)
	tok := store.AdminToken{ID: "t1", Name: "ops", Scope: store.ScopeWrite, Digest: store.Digest("secret"), CreatedAt: c.Now().UTC(), ExpiresAt: &ends}
	if err := st.CreateAdminToken(tok, store.Change{}); err != nil {
		t.Fatal(err)
	}
	again := tok
	again.ID = "t2"
	if err := st.CreateAdminToken(again, store.Change{}); !errors.Is(err, store.ErrExists) {
		t.Errorf("a digest in use: %v", err)
	}
	if err := st.CreateAdminToken(store.AdminToken{ID: "t0", Scope: store.ScopeRead, Digest: store.Digest("other")}, store.Change{}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.AdminTokenByDigest(tok.Digest); err != nil || got.Name != "ops" || got.Scope != store.ScopeWrite {
		t.Errorf("AdminTokenByDigest: %+v, %v", got, err)
	}
	if list, err := st.AdminTokens(); err != nil || len(list) != 2 || list[0].ID != "t0" || list[1].ID != "t1" {
		t.Errorf("AdminTokens by id: %+v, %v", list, err)
	}
	c.Advance(time.Hour)
	if _, err := st.AdminTokenByDigest(tok.Digest); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an expired token: %v", err)
	}
	if err := st.DeleteAdminToken("t0", store.Change{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AdminTokenByDigest(store.Digest("other")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a revoked token: %v", err)
	}
	if err := st.DeleteAdminToken("t0", store.Change{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoking twice: %v", err)
	}
	if recs, _, _ := st.Audit(store.AuditFilter{Limit: 10}); len(recs) != 3 || recs[0].Action != "token.delete" || bytes.Contains(recs[2].After, []byte(tok.Digest)) {
		t.Errorf("the tokens' audit records: %+v", recs)
	}
}
