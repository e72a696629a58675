package outbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/stream"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/outbox"
	"github.com/slipverify/slipverify/core/store"
	"github.com/slipverify/slipverify/deploy/broker"
)

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "core.db"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// warnings counts the warnings logged through it.
type warnings struct{ n atomic.Int64 }

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		w.n.Add(1)
	}
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

// runPublisher runs p until the test ends, checking that it stops cleanly.
func runPublisher(t *testing.T, p *outbox.Publisher) {
	t.Helper()
	r := startPublisher(p)
	t.Cleanup(func() { r.stop(t) })
}

// publisherRun is a publisher running until stop.
type publisherRun struct {
	cancel context.CancelFunc
	done   chan error // Run's error
}

func startPublisher(p *outbox.Publisher) *publisherRun {
	ctx, cancel := context.WithCancel(context.Background())
	r := &publisherRun{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx) }()
	return r
}

// stop ends the run's context and fails the test unless Run returns nil
// within 30 s.
func (r *publisherRun) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// onProduce is the transport of a writer that calls itself before each
// produce request it sends to the real broker.
type onProduce func()

func (f onProduce) RoundTrip(ctx context.Context, addr net.Addr, req kafka.Request) (kafka.Response, error) {
	if req.ApiKey() == protocol.Produce {
		f()
	}
	return kafka.DefaultTransport.RoundTrip(ctx, addr, req)
}

// readTopic returns every record of topic, partition by partition in
// offset order.
func readTopic(t *testing.T, addr, topic string, partitions int) [][]kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := make([][]kafka.Message, partitions)
	for p := range partitions {
		conn, err := kafka.DialLeader(ctx, "tcp", addr, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		last, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		if last == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: topic, Partition: p, MaxWait: 50 * time.Millisecond})
		for {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				r.Close()
				t.Fatalf("%s/%d: after %d of %d records: %v", topic, p, len(out[p]), last, err)
			}
			out[p] = append(out[p], m)
			if m.Offset == last-1 {
				break
			}
		}
		r.Close()
	}
	return out
}

// TestPublisherSendsOutboxInOrder: the publisher moves the outbox to the
// topics its messages name, each key's messages in the order they were
// written and with their keys, and acks them from the outbox.
func TestPublisherSendsOutboxInOrder(t *testing.T) {
	t.Parallel()
	addr := testnet.FreeAddr(t)
	broker.StartTestConfig(t, broker.Config{Addr: addr, Partitions: 3})
	st := openStore(t)
	keys := []string{"job-a", "job-b", "job-c", "job-d"}
	const perKey = 60
	for i := range perKey {
		for _, k := range keys {
			topic := api.TopicJobs
			if k == "job-d" {
				topic = api.TopicResults
			}
			if err := st.Emit(store.Message{Topic: topic, Key: k, Value: []byte(k + "/" + strconv.Itoa(i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	total := int64(perKey * len(keys))
	testnet.Eventually(t, 5*time.Second, func() bool { w, _ := st.OutboxStats(); return w == total },
		func() string { return "emitted messages not written" })
	w := stream.NewWriter([]string{addr}, nil)
	t.Cleanup(func() { w.Close() })
	runPublisher(t, &outbox.Publisher{Store: st, Writer: w, Log: slog.New(slog.DiscardHandler), Batch: 50})
	testnet.Eventually(t, 20*time.Second, func() bool { n, _ := st.OutboxStats(); return n == 0 },
		func() string {
			n, _ := st.OutboxStats()
			return fmt.Sprintf("%d of %d messages still in the outbox", n, total)
		})
	if msgs, _ := st.Outbox(10); len(msgs) != 0 {
		t.Errorf("outbox counts none but holds %d", len(msgs))
	}

	got := map[string][]string{} // key: values in offset order
	partOf := map[string]int{}
	for _, topic := range []string{api.TopicJobs, api.TopicResults} {
		for p, recs := range readTopic(t, addr, topic, 3) {
			for _, m := range recs {
				k := string(m.Key)
				if prev, ok := partOf[k]; ok && prev != p {
					t.Errorf("key %s on partitions %d and %d", k, prev, p)
				}
				partOf[k] = p
				if want := map[bool]string{true: api.TopicResults, false: api.TopicJobs}[k == "job-d"]; topic != want {
					t.Errorf("key %s on topic %s, want %s", k, topic, want)
				}
				got[k] = append(got[k], string(m.Value))
			}
		}
	}
	for _, k := range keys {
		if len(got[k]) != perKey {
			t.Errorf("key %s: %d records, want %d", k, len(got[k]), perKey)
			continue
		}
		for i, v := range got[k] {
			if v != k+"/"+strconv.Itoa(i) {
				t.Errorf("key %s: record %d is %q: out of order or changed", k, i, v)
				break
			}
		}
	}
}

// TestPublisherDropsTooLarge: a message larger than a write may carry
// (kafka-go refuses the whole write for it) is left out with an error in
// the log; the messages before and after it reach the broker, in order,
// and the outbox empties.
func TestPublisherDropsTooLarge(t *testing.T) {
	t.Parallel()
	addr := testnet.FreeAddr(t)
	broker.StartTestConfig(t, broker.Config{Addr: addr, Partitions: 1})
	st := openStore(t)
	values := []string{"before", strings.Repeat("x", 2<<20), "after"}
	for _, v := range values {
		if err := st.Emit(store.Message{Topic: api.TopicResults, Key: "job-a", Value: []byte(v)}); err != nil {
			t.Fatal(err)
		}
	}
	testnet.Eventually(t, 5*time.Second, func() bool { w, _ := st.OutboxStats(); return w == 3 },
		func() string { return "emitted messages not written" })
	w := stream.NewWriter([]string{addr}, nil)
	t.Cleanup(func() { w.Close() })
	errs := &warnings{}
	runPublisher(t, &outbox.Publisher{Store: st, Writer: w, Log: slog.New(errs)})
	testnet.Eventually(t, 20*time.Second, func() bool { n, _ := st.OutboxStats(); return n == 0 },
		func() string {
			n, _ := st.OutboxStats()
			return fmt.Sprintf("%d of 3 messages still in the outbox", n)
		})
	var got []string
	for _, m := range readTopic(t, addr, api.TopicResults, 1)[0] {
		got = append(got, string(m.Value))
	}
	if !slices.Equal(got, []string{"before", "after"}) {
		t.Errorf("the topic holds %d records %.20q, want before and after", len(got), got)
	}
	if errs.n.Load() != 1 {
		t.Errorf("%d warnings or errors logged, want the one error for the dropped message", errs.n.Load())
	}
}

// TestPublisherWaitsForBroker: while no broker answers, messages stay in
// the outbox; once a broker starts on the address they reach it, in order.
func TestPublisherWaitsForBroker(t *testing.T) {
	t.Parallel()
	addr := testnet.FreeAddr(t)
	st := openStore(t)
	const n = 20
	for i := range n {
		if err := st.Emit(store.Message{Topic: api.TopicResults, Key: "job-1", Value: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	testnet.Eventually(t, 5*time.Second, func() bool { w, _ := st.OutboxStats(); return w == n },
		func() string { return "emitted messages not written" })
	w := stream.NewWriter([]string{addr}, nil)
	w.MaxAttempts = 1 // fail fast: the publisher retries
	t.Cleanup(func() { w.Close() })
	warned := &warnings{}
	runPublisher(t, &outbox.Publisher{Store: st, Writer: w, Log: slog.New(warned), Backoff: 50 * time.Millisecond})

	testnet.Eventually(t, 20*time.Second, func() bool { return warned.n.Load() >= 2 },
		func() string { return "the publisher reported no failed publish without a broker" })
	if waiting, _ := st.OutboxStats(); waiting != n {
		t.Fatalf("without a broker, %d messages wait in the outbox, want %d", waiting, n)
	}
	if msgs, _ := st.Outbox(2 * n); len(msgs) != n {
		t.Fatalf("without a broker, the outbox holds %d messages, want %d", len(msgs), n)
	}

	broker.StartTestConfig(t, broker.Config{Addr: addr, Partitions: 1})
	testnet.Eventually(t, 30*time.Second, func() bool { w, _ := st.OutboxStats(); return w == 0 },
		func() string {
			w, _ := st.OutboxStats()
			return fmt.Sprintf("%d messages still in the outbox with the broker up", w)
		})
	recs := readTopic(t, addr, api.TopicResults, 1)[0]
	if len(recs) != n {
		t.Fatalf("the broker holds %d records, want %d", len(recs), n)
	}
	for i, m := range recs {
		if string(m.Value) != strconv.Itoa(i) || string(m.Key) != "job-1" {
			t.Fatalf("record %d is %s=%s", i, m.Key, m.Value)
		}
	}
}

// TestPublisherDrainsAfterCancelledWrite: a publisher stopped while a write
// of a large backlog is in flight still publishes the whole outbox before
// Run returns, as a clean stop with the broker up promises.
func TestPublisherDrainsAfterCancelledWrite(t *testing.T) {
	t.Parallel()
	addr := testnet.FreeAddr(t)
	broker.StartTestConfig(t, broker.Config{Addr: addr, Partitions: 3})
	st := openStore(t)
	const total, batch = 3000, 100
	for i := range total {
		if err := st.Emit(store.Message{Topic: api.TopicUsage, Key: "svc-" + strconv.Itoa(i%7), Value: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	testnet.Eventually(t, 5*time.Second, func() bool { w, _ := st.OutboxStats(); return w == total },
		func() string { return "emitted messages not written" })
	// The first write waits until release, after telling entered: it is
	// then in flight for as long as the test likes, against the real
	// broker.
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	w := stream.NewWriter([]string{addr}, nil)
	w.Transport = onProduce(func() {
		first := false
		once.Do(func() { first = true })
		if first {
			close(entered)
			<-release
		}
	})
	t.Cleanup(func() { w.Close() })

	run := startPublisher(&outbox.Publisher{Store: st, Writer: w, Log: slog.New(slog.DiscardHandler), Batch: batch})
	select {
	case <-entered:
	case err := <-run.done:
		t.Fatalf("Run returned before its first write: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the publisher sent nothing")
	}
	run.cancel() // while the first write is in flight
	close(release)
	run.stop(t)
	if waiting, _ := st.OutboxStats(); waiting != 0 {
		t.Fatalf("%d of %d messages left in the outbox by a stop with the broker up", waiting, total)
	}
	got := map[string]bool{}
	for _, recs := range readTopic(t, addr, api.TopicUsage, 3) {
		for _, m := range recs {
			got[string(m.Value)] = true
		}
	}
	if len(got) != total {
		t.Errorf("the broker holds %d distinct messages, want %d", len(got), total)
	}
}

// TestPublisherLingers: messages committed one by one while a write
// lingers go to the broker in that one write, as soon as a batch of them
// waits; what still lingers when the publisher stops is sent before Run
// returns.
func TestPublisherLingers(t *testing.T) {
	t.Parallel()
	addr := testnet.FreeAddr(t)
	broker.StartTestConfig(t, broker.Config{Addr: addr, Partitions: 1})
	st := openStore(t)
	var produced atomic.Int64
	w := stream.NewWriter([]string{addr}, nil)
	w.Transport = onProduce(func() { produced.Add(1) })
	t.Cleanup(func() { w.Close() })
	// A linger no test outlasts: only a full batch or the stop ends it.
	run := startPublisher(&outbox.Publisher{Store: st, Writer: w, Log: slog.New(slog.DiscardHandler), Batch: 5, Linger: time.Hour})
	defer run.cancel()
	// emit writes message i and waits until it is committed, on its own,
	// with waiting messages in the outbox (0: no wait): so each tells the
	// publisher of a commit.
	emit := func(i int, waiting int64) {
		t.Helper()
		if err := st.Emit(store.Message{Topic: api.TopicUsage, Key: "svc-1", Value: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
		if waiting == 0 {
			return // the fifth: the write goes out at once
		}
		testnet.Eventually(t, 5*time.Second, func() bool { n, _ := st.OutboxStats(); return n == waiting },
			func() string { return fmt.Sprintf("message %d not written", i) })
	}
	for i := range 4 {
		emit(i, int64(i+1))
	}
	emit(4, 0)
	testnet.Eventually(t, 20*time.Second, func() bool { n, _ := st.OutboxStats(); return n == 0 },
		func() string { n, _ := st.OutboxStats(); return fmt.Sprintf("%d of 5 messages still in the outbox", n) })
	if n := produced.Load(); n != 1 {
		t.Errorf("5 messages committed one by one went out in %d broker writes, want 1", n)
	}

	emit(5, 1)
	emit(6, 2)
	run.stop(t)
	if n, _ := st.OutboxStats(); n != 0 {
		t.Errorf("%d lingering messages left in the outbox by the stop", n)
	}
	var got []string
	for _, m := range readTopic(t, addr, api.TopicUsage, 1)[0] {
		got = append(got, string(m.Value))
	}
	if want := []string{"0", "1", "2", "3", "4", "5", "6"}; !slices.Equal(got, want) {
		t.Errorf("the broker holds %v, want %v", got, want)
	}
}
