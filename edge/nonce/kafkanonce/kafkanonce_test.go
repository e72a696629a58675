package kafkanonce

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/stream"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/deploy/broker"
	"github.com/slipverify/slipverify/edge/nonce"
)

// edge is a nonce store with its Share running, as one edge process has.
type edge struct {
	store *nonce.Store
	share *Share
	stop  func()
}

// startEdge runs a store and its Share against the brokers at addr until
// the test ends (or stop). The stores read the real clock: the broker
// stamps records with it, and the replay seeks by it.
func startEdge(t testing.TB, addr string, cfg Config) *edge {
	t.Helper()
	var sh *Share
	j := journalFunc(func(service, client string, n [16]byte, ts int64) { sh.Record(service, client, n, ts) })
	st := nonce.New(nonce.Config{Window: 5*time.Minute + time.Second, Journal: j})
	cfg.Brokers, cfg.Store = []string{addr}, st
	if cfg.Backoff == 0 {
		cfg.Backoff = 50 * time.Millisecond
	}
	sh = New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); sh.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return &edge{store: st, share: sh, stop: stop}
}

type journalFunc func(service, client string, n [16]byte, ts int64)

func (f journalFunc) Record(service, client string, n [16]byte, ts int64) { f(service, client, n, ts) }

func uuid(t *testing.T, s string) [16]byte {
	u, ok := nonce.ParseUUID([]byte(s))
	if !ok {
		t.Fatalf("bad uuid %s", s)
	}
	return u
}

func waitReady(t testing.TB, e *edge) {
	t.Helper()
	testnet.Eventually(t, 10*time.Second, e.share.Ready, func() string { return "replay at start not done" })
}

func waitAdded(t *testing.T, e *edge, n uint64) {
	t.Helper()
	testnet.Eventually(t, 10*time.Second, func() bool { return e.share.added.Get() >= n },
		func() string { return "nonce not received" })
}

// TestNonceReachesOtherEdge: a nonce one edge accepts is refused by the
// other once its record arrived, and the other edge's own nonces are not
// added back to it.
func TestNonceReachesOtherEdge(t *testing.T) {
	addr := broker.StartTest(t, 3)
	a, b := startEdge(t, addr, Config{}), startEdge(t, addr, Config{})
	waitReady(t, a)
	waitReady(t, b)
	n := uuid(t, "11111111-1111-4111-8111-111111111111")
	now := time.Now()
	if err := a.store.Use("svc", "branch-1", n, now); err != nil {
		t.Fatal(err)
	}
	waitAdded(t, b, 1)
	if err := b.store.Use("svc", "branch-1", n, now.Add(time.Second)); err != nonce.ErrDuplicate {
		t.Fatalf("edge B took edge A's nonce: %v", err)
	}
	if err := b.store.Use("svc", "branch-2", n, now); err != nil { // another scope
		t.Fatalf("another client's nonce: %v", err)
	}
	waitAdded(t, a, 1)
	testnet.Eventually(t, 5*time.Second, func() bool { return a.share.published.Get() == 1 && b.share.published.Get() == 1 },
		func() string { return "not published" })
	if a.share.added.Get() != 1 || b.share.added.Get() != 1 {
		t.Errorf("an edge added its own nonces: a %d, b %d", a.share.added.Get(), b.share.added.Get())
	}
}

// TestRestartReplays: an edge started after others accepted nonces (or
// after its own restart) refuses them, one stamped 4 minutes ahead
// included, and accepts the whole window once replayed: a fresh request
// stamped 4 minutes before its start.
func TestRestartReplays(t *testing.T) {
	addr := broker.StartTest(t, 1)
	// A record from before 2×Window+Margin: the replay seeks past it.
	w := stream.NewWriter([]string{addr}, nil)
	hourAgo := time.Now().Add(-time.Hour)
	gone := New(Config{Store: nonce.New(nonce.Config{}), Now: func() time.Time { return hourAgo }})
	old, _ := gone.encode(nil, []item{{service: "svc", client: "c", nonce: [16]byte{7}, ts: hourAgo.Unix()}})
	old[0].Time = time.Now().Add(-12 * time.Minute)
	if err := w.WriteMessages(context.Background(), old...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	a := startEdge(t, addr, Config{})
	waitReady(t, a)
	if got := a.share.replayedNonces.Get(); got != 0 {
		t.Errorf("replayed %v records older than 2×Window+Margin", got)
	}
	now := time.Now()
	past, ahead := uuid(t, "22222222-2222-4222-8222-222222222222"), uuid(t, "33333333-3333-4333-8333-333333333333")
	if err := a.store.Use("svc", "c", past, now.Add(-4*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := a.store.Use("svc", "c", ahead, now.Add(240*time.Second)); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, 5*time.Second, func() bool { return a.share.published.Get() == 2 }, func() string { return "not published" })
	a.stop()

	b := startEdge(t, addr, Config{})
	waitReady(t, b)
	if !b.store.Opened() || b.share.Fallback() {
		t.Fatal("replayed but not opened")
	}
	for _, n := range [][16]byte{past, ahead} {
		if err := b.store.Use("svc", "c", n, time.Now()); err != nonce.ErrDuplicate {
			t.Errorf("after the restart, a nonce accepted before it: %v", err)
		}
	}
	fresh := uuid(t, "44444444-4444-4444-8444-444444444444")
	if err := b.store.Use("svc", "c", fresh, time.Now().Add(-4*time.Minute)); err != nil {
		t.Errorf("fresh nonce stamped 4 minutes ago: %v", err)
	}
	if got := b.share.replayedNonces.Get(); got != 2 {
		t.Errorf("replayed %v records, want 2", got)
	}
}

// TestFallbackUntilBrokerIsBack: with no broker at start the edge refuses
// timestamps before its start and shows the fallback; publishing fails,
// counted, without blocking Use; once the broker is there, the replay runs,
// the queued nonce is published in order and the whole window is accepted.
func TestFallbackUntilBrokerIsBack(t *testing.T) {
	addr := testnet.FreeAddr(t)
	a := startEdge(t, addr, Config{})
	testnet.Eventually(t, 10*time.Second, a.share.Fallback, func() string { return "no fallback" })
	if a.share.Ready() || a.store.Opened() {
		t.Fatal("ready without a broker")
	}
	n := uuid(t, "55555555-5555-4555-8555-555555555555")
	if err := a.store.Use("svc", "c", n, time.Now().Add(-time.Minute)); err != nonce.ErrBeforeStart {
		t.Fatalf("fallback: stamped before the start: %v", err)
	}
	if err := a.store.Use("svc", "c", n, time.Now()); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, 20*time.Second, func() bool { return a.share.failures.Get() >= 1 },
		func() string { return "publishing did not fail" })

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		done <- broker.Run(ctx, broker.Config{Addr: addr, Partitions: 2, Memory: true}, func([]string) { close(ready) })
	}()
	t.Cleanup(func() { a.stop(); cancel(); <-done })
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("broker: %v", err)
	}
	waitReady(t, a)
	if a.share.Fallback() {
		t.Error("fallback shown after the replay")
	}
	if err := a.store.Use("svc", "c", uuid(t, "66666666-6666-4666-8666-666666666666"), time.Now().Add(-4*time.Minute)); err != nil {
		t.Errorf("after the replay, stamped 4 minutes ago: %v", err)
	}
	testnet.Eventually(t, 20*time.Second, func() bool { return a.share.published.Get() == 2 },
		func() string { return "queued nonces not published" })
	b := startEdge(t, addr, Config{})
	waitReady(t, b)
	if err := b.store.Use("svc", "c", n, time.Now()); err != nonce.ErrDuplicate {
		t.Errorf("the nonce accepted during the outage, on another edge: %v", err)
	}
}

// TestQueueFullDrops: Record never waits: a full queue drops, counted.
func TestQueueFullDrops(t *testing.T) {
	s := New(Config{Queue: 2, Store: nonce.New(nonce.Config{})})
	for i := range 5 {
		s.Record("svc", "c", [16]byte{byte(i)}, time.Now().Unix())
	}
	if s.drops.Get() != 3 || len(s.queue) != 2 {
		t.Fatalf("dropped %d, queued %d", s.drops.Get(), len(s.queue))
	}
	if a := testing.AllocsPerRun(100, func() { s.Record("svc", "c", [16]byte{}, 1) }); a != 0 {
		t.Errorf("Record allocates %v times", a)
	}
}

// TestRetryDropsExpired: a batch written again after a failure leaves out
// the nonces whose window passed meanwhile (no edge accepts them any more),
// on a clock the test moves.
func TestRetryDropsExpired(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := New(Config{Store: nonce.New(nonce.Config{Window: 5*time.Minute + time.Second}), Now: func() time.Time { return now }})
	batch := []item{
		{service: "svc", client: "c", nonce: [16]byte{1}, ts: now.Unix() - 200, at: 5},
		{service: "svc", client: "c2", nonce: [16]byte{2}, ts: now.Unix() + 240, at: 6},
	}
	if _, n := s.encode(nil, batch); n != 2 {
		t.Fatalf("encoded %d of 2", n)
	}
	now = now.Add(2 * time.Minute) // the first is 320 s old: past its window
	got, n := s.encode(nil, batch)
	if n != 1 || len(got) != 1 {
		t.Fatalf("after 2 minutes, encoded %d in %d records, want 1", n, len(got))
	}
	if string(got[0].Key) != s.Edge() || !bytes.HasPrefix(got[0].Value, s.own) {
		t.Errorf("record key %q, value %q: not this edge's", got[0].Key, got[0].Value)
	}
	var es []entry
	edge, err := decodeRecord(got[0].Value, func(e *entry) { es = append(es, *e) })
	if err != nil || string(edge) != s.Edge() || len(es) != 1 {
		t.Fatalf("decoded %d entries of %s: %v", len(es), edge, err)
	}
	if e := es[0]; string(e.service) != "svc" || string(e.scope) != "c2" || e.nonce != batch[1].nonce || e.ts != batch[1].ts ||
		e.window != 301 || e.at != 6 {
		t.Errorf("entry %+v", e)
	}
}

// TestRecordsSplit: a batch larger than a record takes holds is written as
// several records, every nonce once; a cut or altered record is refused
// after the entries before the fault.
func TestRecordsSplit(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := New(Config{Store: nonce.New(nonce.Config{}), Now: func() time.Time { return now }})
	long := string(bytes.Repeat([]byte("s"), 1000))
	var batch []item
	for i := range 1200 {
		batch = append(batch, item{service: long, client: "c", nonce: [16]byte{byte(i), byte(i >> 8)}, ts: now.Unix()})
	}
	msgs, n := s.encode(nil, batch)
	if n != len(batch) || len(msgs) < 2 {
		t.Fatalf("%d nonces in %d records", n, len(msgs))
	}
	seen := map[[16]byte]bool{}
	for _, m := range msgs {
		if len(m.Value) > maxRecord+2000 {
			t.Errorf("record of %d bytes", len(m.Value))
		}
		if _, err := decodeRecord(m.Value, func(e *entry) { seen[e.nonce] = true }); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != len(batch) {
		t.Errorf("%d distinct nonces decoded, want %d", len(seen), len(batch))
	}
	v := msgs[0].Value
	for _, bad := range [][]byte{nil, {2}, v[:len(v)-1], append(append([]byte(nil), v...), 0)} {
		if _, err := decodeRecord(bad, func(*entry) {}); err == nil {
			t.Errorf("record of %d bytes accepted", len(bad))
		}
	}
}

// FuzzDecodeRecord: no record makes the decoder panic or read out of
// bounds, and what decodes encodes to a record that decodes the same.
func FuzzDecodeRecord(f *testing.F) {
	s := New(Config{Store: nonce.New(nonce.Config{}), Now: func() time.Time { return time.Unix(100, 0) }})
	msgs, _ := s.encode(nil, []item{{service: "svc", client: "c", nonce: [16]byte{1}, ts: 100, at: 100_000}})
	f.Add(msgs[0].Value)
	f.Add([]byte{1, 0, 0})
	f.Fuzz(func(t *testing.T, v []byte) {
		var first []entry
		var again []byte
		edge, err := decodeRecord(v, func(e *entry) {
			first = append(first, entry{service: bytes.Clone(e.service), scope: bytes.Clone(e.scope), nonce: e.nonce, ts: e.ts, at: e.at, window: e.window})
			it := item{service: string(e.service), client: string(e.scope), nonce: e.nonce, ts: e.ts, at: e.at}
			again = appendEntry(again, &it, e.window)
		})
		if err != nil {
			return
		}
		rec := binary.AppendUvarint(recordHead(nil, string(edge)), uint64(len(first)))
		i := 0
		if _, err := decodeRecord(append(rec, again...), func(e *entry) {
			if f := first[i]; !bytes.Equal(f.service, e.service) || !bytes.Equal(f.scope, e.scope) || f.nonce != e.nonce ||
				f.ts != e.ts || f.at != e.at || f.window != e.window {
				t.Errorf("entry %d: %+v, then %+v", i, f, *e)
			}
			i++
		}); err != nil || i != len(first) {
			t.Errorf("%x: encoded again, %d of %d entries: %v", v, i, len(first), err)
		}
	})
}

// TestRecordAllocs: queuing a nonce on the request path allocates nothing.
func TestRecordAllocs(t *testing.T) {
	s := New(Config{Queue: 1 << 20, Store: nonce.New(nonce.Config{})})
	if a := testing.AllocsPerRun(1000, func() { s.Record("svc", "c", [16]byte{1}, 1) }); a != 0 {
		t.Errorf("Record allocates %v times", a)
	}
}
