package stream_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/stream"
	"github.com/slipverify/slipverify/core/lib/testnet"
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
