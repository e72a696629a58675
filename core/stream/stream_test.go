package stream_test

import (
	"context"
	"errors"
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
	"github.com/slipverify/slipverify/core/store"
	"github.com/slipverify/slipverify/core/stream"
	"github.com/slipverify/slipverify/core/testnet"
	"github.com/slipverify/slipverify/deploy/broker"
)

// startBroker runs an in-memory broker on addr, with the platform's topics
// in the given number of partitions, until stop or the end of the test.
func startBroker(t *testing.T, addr string, partitions int) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- broker.Run(ctx, broker.Config{Addr: addr, Partitions: partitions, Memory: true}, func([]string) { close(ready) })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("broker did not start: %v", err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func openStore(t *testing.T) *store.Store {
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
func runPublisher(t *testing.T, p *stream.Publisher) {
	t.Helper()
	r := startPublisher(p)
	t.Cleanup(func() { r.stop(t) })
}

// publisherRun is a publisher running until stop.
type publisherRun struct {
	cancel context.CancelFunc
	done   chan error // Run's error
}

func startPublisher(p *stream.Publisher) *publisherRun {
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
	startBroker(t, addr, 3)
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
	runPublisher(t, &stream.Publisher{Store: st, Writer: w, Log: slog.New(slog.DiscardHandler), Batch: 50})
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
	startBroker(t, addr, 1)
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
	runPublisher(t, &stream.Publisher{Store: st, Writer: w, Log: slog.New(errs)})
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
	runPublisher(t, &stream.Publisher{Store: st, Writer: w, Log: slog.New(warned), Backoff: 50 * time.Millisecond})

	testnet.Eventually(t, 20*time.Second, func() bool { return warned.n.Load() >= 2 },
		func() string { return "the publisher reported no failed publish without a broker" })
	if waiting, _ := st.OutboxStats(); waiting != n {
		t.Fatalf("without a broker, %d messages wait in the outbox, want %d", waiting, n)
	}
	if msgs, _ := st.Outbox(2 * n); len(msgs) != n {
		t.Fatalf("without a broker, the outbox holds %d messages, want %d", len(msgs), n)
	}

	startBroker(t, addr, 1)
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

// produce writes one record per value to topic, value i to partition
// i % partitions.
func produce(t *testing.T, addr, topic string, partitions int, from, to int) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: topic, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond,
		Balancer: kafka.BalancerFunc(func(m kafka.Message, _ ...int) int {
			i, _ := strconv.Atoi(string(m.Value))
			return i % partitions
		})}
	defer w.Close()
	msgs := make([]kafka.Message, 0, to-from)
	for i := from; i < to; i++ {
		msgs = append(msgs, kafka.Message{Key: []byte("k" + strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
}

// consumer runs stream.Consume over a new group reader until stop, which
// returns Consume's error after the reader is closed.
type consumer struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func consume(t *testing.T, addr, topic, group string, workers int, h stream.Handler) *consumer {
	t.Helper()
	r := stream.NewReader([]string{addr}, nil, topic, group)
	ctx, cancel := context.WithCancel(context.Background())
	c := &consumer{cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := stream.Consume(ctx, r, workers, h)
		r.Close()
		c.done <- err
	}()
	t.Cleanup(func() { c.stop() })
	return c
}

func (c *consumer) stop() error {
	c.once.Do(func() { c.cancel(); c.err = <-c.done })
	return c.err
}

// record is a record's value as an int.
func record(m kafka.Message) int { i, _ := strconv.Atoi(string(m.Value)); return i }

// seen is a concurrent set of handled records with how often each was
// handled.
type seen struct {
	mu sync.Mutex
	n  map[int]int
}

func newSeen() *seen { return &seen{n: map[int]int{}} }
func (s *seen) add(i int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[i]++
	return len(s.n)
}
func (s *seen) has(i int) bool { s.mu.Lock(); defer s.mu.Unlock(); return s.n[i] > 0 }
func (s *seen) len() int       { s.mu.Lock(); defer s.mu.Unlock(); return len(s.n) }

// TestConsumeHandlesConcurrently: records of one partition are in hand
// several at once, up to the number of workers.
func TestConsumeHandlesConcurrently(t *testing.T) {
	t.Parallel()
	addr := testnet.FreeAddr(t)
	startBroker(t, addr, 1)
	produce(t, addr, api.TopicJobs, 1, 0, 8)
	const workers = 4
	var inHand, most atomic.Int64
	all := make(chan struct{})
	var allOnce sync.Once
	handled := newSeen()
	c := consume(t, addr, api.TopicJobs, "concurrent", workers, func(ctx context.Context, m kafka.Message) error {
		n := inHand.Add(1)
		defer inHand.Add(-1)
		for {
			if old := most.Load(); n <= old || most.CompareAndSwap(old, n) {
				break
			}
		}
		if n == workers {
			allOnce.Do(func() { close(all) })
		}
		if record(m) < workers { // the first records wait for each other
			select {
			case <-all:
			case <-time.After(5 * time.Second):
			}
		}
		handled.add(record(m))
		return nil
	})
	testnet.Eventually(t, 60*time.Second, func() bool { return handled.len() == 8 },
		func() string { return fmt.Sprintf("%d of 8 records handled", handled.len()) })
	if err := c.stop(); err != nil {
		t.Fatal(err)
	}
	if m := most.Load(); m != workers {
		t.Errorf("at most %d records in hand at once, want %d", m, workers)
	}
}

// committed returns the group's committed offset of each partition of
// topic (-1: none).
func committed(t *testing.T, addr, group, topic string, partitions int) []int64 {
	t.Helper()
	ps := make([]int, partitions)
	for i := range ps {
		ps[i] = i
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := (&kafka.Client{Addr: kafka.TCP(addr)}).OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ps}})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, partitions)
	for i := range out {
		out[i] = -1
	}
	for _, p := range resp.Topics[topic] {
		out[p.Partition] = p.CommittedOffset
	}
	return out
}

// TestConsumeRedeliveredWhileRunning: a rebalance (another member joins
// the group) makes the reader fetch a record again while its first
// handling still runs. The copy finishing first (as a job attempt already
// running returns at once) does not count for the original: when the stop
// cuts the original short, the record is not committed, and is delivered
// again after the restart.
func TestConsumeRedeliveredWhileRunning(t *testing.T) {
	t.Parallel()
	addr := testnet.FreeAddr(t)
	startBroker(t, addr, 1)
	w := stream.NewWriter([]string{addr}, nil)
	t.Cleanup(func() { w.Close() })
	ctx := context.Background()
	if err := w.WriteMessages(ctx, kafka.Message{Topic: api.TopicJobs, Key: []byte("a"), Value: []byte("0")},
		kafka.Message{Topic: api.TopicJobs, Key: []byte("a"), Value: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	const group = "redelivered"
	started, again := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	h := func(ctx context.Context, m kafka.Message) error {
		if m.Offset != 0 {
			return nil
		}
		switch calls.Add(1) {
		case 1: // the original, slow: it ends only when the stop cuts it
			close(started)
			<-ctx.Done()
			return ctx.Err()
		case 2: // the copy: "already running", done at once
			close(again)
		}
		return nil
	}
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	r := stream.NewReader([]string{addr}, nil, api.TopicJobs, group)
	go func() { done <- stream.ConsumeWithin(cctx, r, 4, 10*time.Millisecond, h) }()
	<-started
	// Another member of the group, on another topic: the group rebalances,
	// the partition stays with r, which fetches it again from the last
	// commit.
	other := stream.NewReader([]string{addr}, nil, api.TopicResults, group)
	octx, ocancel := context.WithCancel(ctx)
	go other.FetchMessage(octx)
	t.Cleanup(func() { ocancel(); other.Close() })
	select {
	case <-again:
	case <-time.After(30 * time.Second):
		t.Fatal("no rebalance redelivered the record")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r.Close() // sends the commits made
	if got := committed(t, addr, group, api.TopicJobs, 1)[0]; got > 0 {
		t.Errorf("committed offset %d: the record whose handling was cut is skipped after a restart", got)
	}
}

// TestConsumeRestart: a consumer stopped midway and a new one in its group
// together handle every record; the new one gets nothing the stopped one
// handled (a clean stop commits everything handled), and nothing the
// stopped one did not handle is skipped.
func TestConsumeRestart(t *testing.T) {
	t.Parallel()
	addr := testnet.FreeAddr(t)
	const partitions, n, stopAt = 3, 600, 300
	startBroker(t, addr, partitions)
	produce(t, addr, api.TopicJobs, partitions, 0, n)

	first := newSeen()
	var c1 *consumer
	// From the stopAt-th record on, handlers finish only once the stop is
	// asked for, so the consumer cannot race through every record first.
	stopping, asked := make(chan struct{}), make(chan struct{})
	var stopOnce sync.Once
	c1 = consume(t, addr, api.TopicJobs, "restart", 8, func(ctx context.Context, m kafka.Message) error {
		if first.add(record(m)) >= stopAt {
			stopOnce.Do(func() { close(stopping) })
			<-asked
		}
		return nil
	})
	select {
	case <-stopping:
	case <-time.After(30 * time.Second):
		t.Fatalf("the first consumer handled %d records", first.len())
	}
	c1.cancel()
	close(asked)
	if err := c1.stop(); err != nil {
		t.Fatal(err)
	}
	if first.len() >= n {
		t.Fatalf("the first consumer handled all %d records before it stopped; nothing left to resume", n)
	}
	// The commits of a clean stop are on the broker once Consume returned
	// and the reader closed.
	offsets := committed(t, addr, "restart", api.TopicJobs, partitions)
	var sum int64
	for _, o := range offsets {
		sum += max(o, 0)
	}
	if sum < int64(stopAt) {
		t.Errorf("committed offsets %v cover %d records; the first consumer handled %d", offsets, sum, first.len())
	}

	second := newSeen()
	c2 := consume(t, addr, api.TopicJobs, "restart", 8, func(ctx context.Context, m kafka.Message) error {
		second.add(record(m))
		return nil
	})
	missing := func() []int {
		var out []int
		for i := range n {
			if !first.has(i) && !second.has(i) {
				out = append(out, i)
			}
		}
		return out
	}
	testnet.Eventually(t, 30*time.Second, func() bool { return len(missing()) == 0 },
		func() string { return fmt.Sprintf("records handled by neither consumer: %v", missing()) })
	if err := c2.stop(); err != nil {
		t.Fatal(err)
	}
	var again []int
	for i := range n {
		if first.has(i) && second.has(i) {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		t.Errorf("%d records handled by the stopped consumer were delivered again: %v", len(again), again)
	}
}

// TestConsumeHandlerErrorStops: a handler's error stops consumption with
// that error, and the record is delivered again to the next consumer of
// the group, followed by everything after it.
func TestConsumeHandlerErrorStops(t *testing.T) {
	t.Parallel()
	addr := testnet.FreeAddr(t)
	startBroker(t, addr, 1)
	const n, bad = 20, 7
	produce(t, addr, api.TopicJobs, 1, 0, n)
	errStore := errors.New("store is gone")
	c1 := consume(t, addr, api.TopicJobs, "failing", 4, func(ctx context.Context, m kafka.Message) error {
		if record(m) == bad {
			return errStore
		}
		return nil
	})
	select {
	case err := <-c1.done:
		c1.done <- err // for the cleanup's stop
		if !errors.Is(err, errStore) {
			t.Fatalf("Consume returned %v, want the handler's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Consume went on after the handler failed")
	}

	second := newSeen()
	c2 := consume(t, addr, api.TopicJobs, "failing", 4, func(ctx context.Context, m kafka.Message) error {
		second.add(record(m))
		return nil
	})
	testnet.Eventually(t, 30*time.Second, func() bool {
		for i := bad; i < n; i++ {
			if !second.has(i) {
				return false
			}
		}
		return true
	}, func() string {
		return fmt.Sprintf("the next consumer handled %d records, not every one from %d", second.len(), bad)
	})
	if err := c2.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestConsumeSlowRecord: a record that takes long does not keep later
// records of its partition from being handled, but it holds back the
// partition's commit until it is done.
//
// The reader sends commits every 100 ms, all the offsets asked for since
// the last one together, so a commit offset that is not on the broker yet
// proves nothing. The slow record's partition has a neighbour whose last
// record is handled only after every other record of the slow partition:
// once the neighbour's last offset is committed, so is every offset
// Consume asked for in the slow partition by then.
func TestConsumeSlowRecord(t *testing.T) {
	t.Parallel()
	addr := testnet.FreeAddr(t)
	const partitions, n = 2, 30 // even records on partition 0, the slow record 0 first; odd ones on 1
	startBroker(t, addr, partitions)
	produce(t, addr, api.TopicJobs, partitions, 0, n)
	release, othersDone := make(chan struct{}), make(chan struct{})
	var others atomic.Int64 // records of partition 0 after the slow one handled
	handled := newSeen()
	c := consume(t, addr, api.TopicJobs, "slow", 4, func(ctx context.Context, m kafka.Message) error {
		var wait chan struct{}
		switch record(m) {
		case 0:
			wait = release
		case n - 1: // partition 1's last record
			wait = othersDone
		}
		if wait != nil {
			select {
			case <-wait:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		handled.add(record(m))
		if i := record(m); i%partitions == 0 && i > 0 && others.Add(1) == n/partitions-1 {
			close(othersDone)
		}
		return nil
	})
	testnet.Eventually(t, 30*time.Second, func() bool { return handled.len() == n-1 },
		func() string {
			return fmt.Sprintf("%d of the %d records after the slow one handled", handled.len(), n-1)
		})
	if handled.has(0) {
		t.Fatal("the slow record finished before it was released")
	}
	var offsets []int64
	testnet.Eventually(t, 10*time.Second, func() bool {
		offsets = committed(t, addr, "slow", api.TopicJobs, partitions)
		return offsets[1] == n/partitions
	}, func() string {
		return fmt.Sprintf("committed offsets %v: partition 1 not committed to its end %d", offsets, n/partitions)
	})
	if offsets[0] > 0 {
		t.Errorf("committed offset %d of partition 0 while its record 0 is still in hand", offsets[0])
	}
	close(release)
	testnet.Eventually(t, 10*time.Second, func() bool { return committed(t, addr, "slow", api.TopicJobs, partitions)[0] == n/partitions },
		func() string {
			return fmt.Sprintf("committed offsets %v after every record was handled, want %d on partition 0",
				committed(t, addr, "slow", api.TopicJobs, partitions), n/partitions)
		})
	if err := c.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestPublisherDrainsAfterCancelledWrite: a publisher stopped while a write
// of a large backlog is in flight still publishes the whole outbox before
// Run returns, as a clean stop with the broker up promises.
func TestPublisherDrainsAfterCancelledWrite(t *testing.T) {
	t.Parallel()
	addr := testnet.FreeAddr(t)
	startBroker(t, addr, 3)
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

	run := startPublisher(&stream.Publisher{Store: st, Writer: w, Log: slog.New(slog.DiscardHandler), Batch: batch})
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

// TestCheckBrokers: SLIP_KAFKA_ADDR is one or more host:port, and an
// address CheckBrokers accepts has brokers.
func TestCheckBrokers(t *testing.T) {
	f := func(addr string, ok bool) {
		t.Helper()
		err := stream.CheckBrokers(addr)
		if (err == nil) != ok {
			t.Errorf("CheckBrokers(%q) = %v, want ok %v", addr, err, ok)
		}
		if err == nil && len(stream.Brokers(addr)) == 0 {
			t.Errorf("CheckBrokers accepted %q, which has no brokers", addr)
		}
	}
	f("127.0.0.1:9092", true)
	f("k1:9092, k2:9092,[::1]:9092", true)
	f("", false)
	f(" ", false)
	f(",", false)
	f("k1:9092,", false)
	f("notanaddr", false)
	f("k1:9092,k2", false)
	f("k1:", false)
}

// TestPublisherLingers: messages committed one by one while a write
// lingers go to the broker in that one write, as soon as a batch of them
// waits; what still lingers when the publisher stops is sent before Run
// returns.
func TestPublisherLingers(t *testing.T) {
	t.Parallel()
	addr := testnet.FreeAddr(t)
	startBroker(t, addr, 1)
	st := openStore(t)
	var produced atomic.Int64
	w := stream.NewWriter([]string{addr}, nil)
	w.Transport = onProduce(func() { produced.Add(1) })
	t.Cleanup(func() { w.Close() })
	// A linger no test outlasts: only a full batch or the stop ends it.
	run := startPublisher(&stream.Publisher{Store: st, Writer: w, Log: slog.New(slog.DiscardHandler), Batch: 5, Linger: time.Hour})
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
