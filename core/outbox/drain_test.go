package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/stream"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/outbox"
	"github.com/slipverify/slipverify/core/store"
	"github.com/slipverify/slipverify/deploy/broker"
	"github.com/slipverify/slipverify/deploy/clickhouse"
)

// The measurements of this file run core's outbox into the usage ledger:
// the broker and the usage tier as their programs, a ClickHouse server,
// and core's store and publisher. They run only when asked (README,
// Benchmarks).

// pipeline is the broker and usage programs and ClickHouse, started for a
// measurement.
type pipeline struct {
	kafka, usageAddr string
	ch               *clickhouse.Server
}

// TestMain removes the programs the measurements build.
func TestMain(m *testing.M) { testnet.Main(m) }

func startPipeline(t *testing.T) *pipeline {
	t.Helper()
	p := &pipeline{kafka: testnet.StartBroker(t).Addr, ch: clickhouse.StartTest(t)}
	p.usageAddr = testnet.StartUsage(t, p.kafka, p.ch.Addr()).Addr
	return p
}

// query runs a one-number query on ClickHouse's HTTP interface.
func (p *pipeline) query(q string) (float64, error) {
	res, err := http.Get("http://" + p.ch.HTTPAddr() + "/?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 200 {
		return 0, fmt.Errorf("%s: %d %s %v", q, res.StatusCode, body, err)
	}
	return strconv.ParseFloat(strings.TrimSpace(string(body)), 64)
}

// ledgerEvents counts the distinct events in the ledger.
func (p *pipeline) ledgerEvents(t *testing.T) int {
	t.Helper()
	n, err := p.query("SELECT uniqExact(event_id) FROM slip.usage_events")
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

// waitLedger polls ClickHouse every 100 ms (a cheap count of rows, so the
// polling takes little from the inserts) until the ledger holds n rows, and
// returns the time since start then; each, if not nil, runs at every poll.
func (p *pipeline) waitLedger(t *testing.T, n int, start time.Time, each func()) time.Duration {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := start.Add(5 * time.Minute)
	for {
		if each != nil {
			each()
		}
		if rows, _ := p.query("SELECT count() FROM slip.usage_events"); int(rows) >= n {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 5 minutes, %d of %d events in the ledger", p.ledgerEvents(t), n)
		}
		<-tick.C
	}
}

// inKafka counts the records of slip.usage on the broker.
func (p *pipeline) inKafka(ctx context.Context) int {
	c := &kafka.Client{Addr: kafka.TCP(p.kafka), Timeout: 5 * time.Second}
	meta, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{api.TopicUsage}})
	if err != nil || len(meta.Topics) == 0 {
		return 0
	}
	var ends []kafka.OffsetRequest
	for _, part := range meta.Topics[0].Partitions {
		ends = append(ends, kafka.LastOffsetOf(part.ID))
	}
	res, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{api.TopicUsage: ends}})
	if err != nil {
		return 0
	}
	n := 0
	for _, part := range res.Topics[api.TopicUsage] {
		n += int(part.LastOffset)
	}
	return n
}

var delayBucket = regexp.MustCompile(`usage_event_delay_seconds_bucket\{vmrange="[^.]+\.[0-9e+-]+\.\.\.([0-9.e+-]+)"\} ([0-9]+)`)

// maxDelay reads the usage program's largest event delay (occurredAt to
// insert): the upper bound of the highest bucket of its histogram, within
// 14 % above the true value.
func (p *pipeline) maxDelay(t *testing.T) float64 {
	t.Helper()
	res, err := http.Get("http://" + p.usageAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	worst := 0.0
	for _, m := range delayBucket.FindAllStringSubmatch(string(body), -1) {
		if upper, _ := strconv.ParseFloat(m[1], 64); m[2] != "0" {
			worst = max(worst, upper)
		}
	}
	return worst
}

// usageMessage is a usage event as core's verifier writes it to the
// outbox (verify's usage), occurring at at.
func usageMessage(i int, at time.Time) store.Message {
	e := api.UsageEvent{EventID: uuid.NewString(), OccurredAt: at.UTC(), ServiceID: "svc-" + strconv.Itoa(i%50),
		BranchID: "br-" + strconv.Itoa(i%500), Kind: api.KindBank, API: "v2", Mode: api.ModeSync, Outcome: api.OutcomeOK, Billable: i%5 != 0}
	value, _ := json.Marshal(e)
	return store.Message{Topic: api.TopicUsage, Key: e.ServiceID, Value: value}
}

// envInt reads a positive integer setting of a measurement.
func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return max(n, 0)
}

// TestDrainIntoLedger measures how fast core's outbox reaches ClickHouse:
// CORE_DRAIN_EVENTS usage events go into a store through Emit (the path of
// every refused or free verification) while no broker runs; then the core
// program starts on that store, and its publisher sends the backlog to the
// broker program, from which the usage program inserts it.
func TestDrainIntoLedger(t *testing.T) {
	n := envInt("CORE_DRAIN_EVENTS")
	if n == 0 {
		t.Skip("set CORE_DRAIN_EVENTS (at most core's outbox limit, 1000000) to measure")
	}
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "core.db"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	var wg sync.WaitGroup
	const emitters = 4
	for g := range emitters {
		wg.Go(func() {
			for i := g; i < n; i += emitters {
				if err := st.Emit(usageMessage(i, begin)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	testnet.Eventually(t, time.Minute, func() bool { w, _ := st.OutboxStats(); return w == int64(n) },
		func() string { w, d := st.OutboxStats(); return fmt.Sprintf("outbox: %d waiting, %d dropped", w, d) })
	filled := time.Since(begin)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	p := startPipeline(t)
	testnet.Build(t, "core/cmd/core") // before the clock starts
	start := time.Now()
	core := testnet.StartCore(t, "../../deploy/dev/seed.json", "SLIP_DATA_DIR="+dir, "SLIP_KAFKA_ADDR="+p.kafka)
	var published time.Duration
	ctx := context.Background()
	inserted := p.waitLedger(t, n, start, func() {
		if core.Exited() {
			t.Fatal("core exited")
		}
		if published == 0 && p.inKafka(ctx) >= n {
			published = time.Since(start)
		}
	})
	if published == 0 {
		published = inserted
	}
	rate := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
	t.Logf("%d events emitted into core's outbox in %.1fs (%.0f/s)", n, filled.Seconds(), rate(filled))
	t.Logf("core started: all in Kafka after %.1fs (%.0f/s), all in ClickHouse after %.1fs (%.0f/s)",
		published.Seconds(), rate(published), inserted.Seconds(), rate(inserted))
	if got := p.ledgerEvents(t); got != n {
		t.Errorf("the ledger has %d events, want %d", got, n)
	}
}

// TestSustainedIntoLedger measures the lag at a steady rate from core's
// outbox: CORE_E2E_RATE usage events/s for CORE_E2E_SECONDS go through Emit
// into core's store, each stamped with the time it was due, while core's
// publisher (as the core program runs it) sends the outbox to the broker
// program and the usage program inserts it; the lag is the usage
// program's largest delay from an event's stamp to its insert.
func TestSustainedIntoLedger(t *testing.T) {
	rate, seconds := envInt("CORE_E2E_RATE"), envInt("CORE_E2E_SECONDS")
	if rate == 0 || seconds == 0 {
		t.Skip("set CORE_E2E_RATE (events/s) and CORE_E2E_SECONDS to measure")
	}
	p := startPipeline(t)
	st := openStore(t)
	w := stream.NewWriter([]string{p.kafka}, nil)
	t.Cleanup(func() { w.Close() })
	runPublisher(t, &outbox.Publisher{Store: st, Writer: w, Log: slog.New(slog.DiscardHandler)})

	total := rate * seconds
	const chunk = 1000
	begin := time.Now()
	var wg sync.WaitGroup
	for sent := 0; sent < total; sent += chunk {
		due := begin.Add(time.Duration(float64(sent) / float64(rate) * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			time.Sleep(d) // pacing the open-loop load, not waiting for a result
		}
		wg.Go(func() {
			for i := sent; i < sent+chunk; i++ {
				if err := st.Emit(usageMessage(i, due)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	emitted := time.Since(begin)
	drained := p.waitLedger(t, total, begin, nil)
	_, dropped := st.OutboxStats()
	t.Logf("offered %d events/s for %ds: emitted in %.1fs (%.0f/s), all in ClickHouse after %.1fs (%.0f/s sustained); largest delay stamp->inserted <= %.2fs; dropped %d",
		rate, seconds, emitted.Seconds(), float64(total)/emitted.Seconds(), drained.Seconds(), float64(total)/drained.Seconds(), p.maxDelay(t), dropped)
	if got := p.ledgerEvents(t); got != total {
		t.Errorf("the ledger has %d events, want %d", got, total)
	}
}

// BenchmarkPublisherDrain is the publisher's path per message: a backlog
// of 100,000 usage events in core's outbox sent to an in-memory broker
// (6 partitions) and acked.
func BenchmarkPublisherDrain(b *testing.B) {
	addr := broker.StartTest(b, 6)
	w := stream.NewWriter([]string{addr}, nil)
	b.Cleanup(func() { w.Close() })
	const n = 100_000
	msgs := make([]store.Message, n)
	for i := range msgs {
		msgs[i] = usageMessage(i, time.Now())
	}
	b.ReportAllocs()
	for range b.N {
		b.StopTimer()
		st, err := store.Open(filepath.Join(b.TempDir(), "core.db"), time.Now)
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range msgs {
			if err := st.Emit(m); err != nil {
				b.Fatal(err)
			}
		}
		for w, _ := st.OutboxStats(); w < n; w, _ = st.OutboxStats() {
			<-st.OutboxReady()
		}
		b.StartTimer()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- (&outbox.Publisher{Store: st, Writer: w, Log: slog.New(slog.DiscardHandler)}).Run(ctx) }()
		tick := time.NewTicker(time.Millisecond) // polling the outbox count while the publisher drains it
		for w, _ := st.OutboxStats(); w > 0; w, _ = st.OutboxStats() {
			<-tick.C
		}
		tick.Stop()
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		st.Close()
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "msgs/s")
}
