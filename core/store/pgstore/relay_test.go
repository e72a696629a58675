package pgstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/pgtest"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/store"
)

// relayed is a core on url whose relay seeks the lock every every, and
// counts its relay's recounts (the outbox's count queries).
type relayed struct {
	*Store
	recounts atomic.Int64
}

func openRelayed(t *testing.T, url string, every time.Duration) *relayed {
	t.Helper()
	s, err := Open(context.Background(), url, time.Now, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := &relayed{Store: s}
	s.relay.close() // frees the lock if it took it
	s.relay = s.startRelayEvery(context.Background(), every, s.c.Outbox.Signal, func(ctx context.Context) error {
		r.recounts.Add(1)
		return s.recount(ctx)
	})
	t.Cleanup(func() { s.Close() })
	return r
}

// drain empties st's OutboxReady.
func drain(st *relayed) {
	for range len(st.OutboxReady()) {
		<-st.OutboxReady()
	}
}

// TestRelayQuietOnCommits: of two cores on one database, the commits of
// the one that does not relay wake neither core for a count of the
// outbox, nor the other core for a try of the lock; the relaying core
// still hears of each message at once (long before its relayRetry) and
// reads them in order.
func TestRelayQuietOnCommits(t *testing.T) {
	url := pgtest.Start(t).Database(t)
	const every = time.Hour // nothing here is due to time
	relaying, other := openRelayed(t, url, every), openRelayed(t, url, every)
	if !relaying.relay.held.Load() || other.relay.held.Load() {
		t.Fatalf("relay held by the first core: %v, by the second: %v; want the first only",
			relaying.relay.held.Load(), other.relay.held.Load())
	}
	drain(relaying)
	const writes = 50
	var seq uint64
	for i := range writes {
		want := fmt.Sprintf("message %d", i)
		if err := other.Emit(store.Message{Topic: "t", Value: []byte(want)}); err != nil {
			t.Fatal(err)
		}
		for got := false; !got; {
			select {
			case <-relaying.OutboxReady():
			case <-time.After(10 * time.Second):
				t.Fatalf("the relaying core never heard of %q", want)
			}
			msgs, err := relaying.OutboxAfter(seq, 10)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				if string(m.Value) != want || m.Seq != seq+1 {
					t.Fatalf("read %q (seq %d) after seq %d, want %q next", m.Value, m.Seq, seq, want)
				}
				seq, got = m.Seq, true
			}
		}
	}
	if msgs, err := other.OutboxAfter(0, 10); err != nil || len(msgs) != 0 {
		t.Fatalf("the core that does not relay read %d messages (%v), want none", len(msgs), err)
	}
	// The relaying core counted when it took the lock; the other, which
	// has not tried the lock since it opened, counted never.
	if a, b := relaying.recounts.Load(), other.recounts.Load(); a != 1 || b != 0 {
		t.Errorf("after %d commits, the relays counted the outbox %d times (relaying core) and %d (other); want 1 and 0", writes, a, b)
	}
}

// TestRelayTakeover: a core that does not relay counts the outbox every
// relayRetry, so it sees the relaying core's acks; when the relaying core
// stops, it takes the lock within relayRetry, reads what is left, and
// then hears of another core's commits at once.
func TestRelayTakeover(t *testing.T) {
	url := pgtest.Start(t).Database(t)
	const every = 20 * time.Millisecond
	first, second := openRelayed(t, url, every), openRelayed(t, url, every)
	if err := second.Emit(store.Message{Topic: "t", Value: []byte("one")}); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, 10*time.Second, func() bool { w, _ := second.OutboxStats(); return w == 1 },
		func() string { return "the second core never counted its message" })
	var msgs []store.Message
	testnet.Eventually(t, 10*time.Second, func() bool {
		var err error
		msgs, err = first.OutboxAfter(0, 10)
		return err == nil && len(msgs) == 1
	}, func() string { return "the relaying core never read the message" })
	if err := first.Ack(msgs[0].Seq); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, 10*time.Second, func() bool { w, _ := second.OutboxStats(); return w == 0 },
		func() string { return "the second core never counted the first's ack" })

	if err := second.Emit(store.Message{Topic: "t", Value: []byte("two")}); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, 10*time.Second, func() bool { w, _ := second.OutboxStats(); return w == 1 },
		func() string { return "the second core never counted its second message" })
	drain(second) // its own commit's signal
	first.Close()
	testnet.Eventually(t, 10*time.Second, func() bool { return second.relay.held.Load() },
		func() string { return "the second core never took over the relay" })
	select {
	case <-second.OutboxReady(): // the takeover's signal: what waits is to be read
	case <-time.After(10 * time.Second):
		t.Fatal("the core that took over never signalled what waits")
	}
	if msgs, err := second.OutboxAfter(0, 10); err != nil || len(msgs) != 1 || string(msgs[0].Value) != "two" {
		t.Fatalf("after the takeover the second core read %d messages (%v), want the one left", len(msgs), err)
	}

	third := openRelayed(t, url, time.Hour)
	if err := third.Emit(store.Message{Topic: "t", Value: []byte("three")}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-second.OutboxReady():
	case <-time.After(10 * time.Second):
		t.Fatal("the core that took over never heard of another core's commit")
	}
}
