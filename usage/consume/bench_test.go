package consume

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/usage/chstore"
	"github.com/slipverify/slipverify/usage/ledgertest"
)

// BenchmarkDecode is the consumer's hot path per message: decode one
// slip.usage message and append it to the columnar batch.
func BenchmarkDecode(b *testing.B) {
	value, _ := json.Marshal(ledgertest.Event(1, "svc-demo", "br-main", time.Now().UTC()))
	var d Decoder
	var rows chstore.Rows
	b.ReportAllocs()
	b.SetBytes(int64(len(value)))
	for i := 0; b.Loop(); i++ {
		if i%20000 == 0 {
			rows.Reset()
		}
		if err := d.Decode(value, &rows); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInsert is one INSERT of a batch of usage events into
// ClickHouse, the exact-distinct rollup included, by batch size (the
// program's default is 20,000). The same rows go in again each time, as a
// redelivery would.
func BenchmarkInsert(b *testing.B) {
	_, st := ledgertest.Ledger(b)
	at := time.Now().UTC()
	for _, size := range []int{5000, 20000, 50000} {
		b.Run("rows="+strconv.Itoa(size), func(b *testing.B) {
			var d Decoder
			var rows chstore.Rows
			for i := range size {
				v, _ := json.Marshal(ledgertest.Event(i, "svc-"+strconv.Itoa(i%50), "br-"+strconv.Itoa(i%500), at))
				if err := d.Decode(v, &rows); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := st.Insert(context.Background(), &rows); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(size*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// TestThroughput measures the pipeline end to end: a producer at a fixed
// rate (USAGE_E2E_RATE events/s for USAGE_E2E_SECONDS, open loop: each
// event is stamped with the time it was due) through the real broker into
// real ClickHouse, reporting the rate sustained and the largest delay from
// an event's due time to its insert. USAGE_E2E_BATCH sets the events per
// insert (default 20,000, the program's). It runs only when USAGE_E2E_RATE
// is set (README, Benchmarks).
func TestThroughput(t *testing.T) {
	rate, _ := strconv.Atoi(os.Getenv("USAGE_E2E_RATE"))
	if rate <= 0 {
		t.Skip("set USAGE_E2E_RATE (events/s) and USAGE_E2E_SECONDS to measure")
	}
	seconds, _ := strconv.Atoi(os.Getenv("USAGE_E2E_SECONDS"))
	if seconds <= 0 {
		seconds = 20
	}
	batch, _ := strconv.Atoi(os.Getenv("USAGE_E2E_BATCH"))
	if batch <= 0 {
		batch = 20000
	}
	addr := ledgertest.Broker(t, 6)
	_, st := ledgertest.Ledger(t)
	c, stop := start(t, addr, "usage", st, batch)
	c.Flush = 500 * time.Millisecond // the program's default

	// Messages are made ahead of time; only the stamp changes.
	const chunk = 1000
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: api.TopicUsage, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchSize: chunk, BatchTimeout: 2 * time.Millisecond, BatchBytes: 1 << 20}
	defer w.Close()
	jobs := make(chan []kafka.Message, 64)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for msgs := range jobs {
				if err := w.WriteMessages(context.Background(), msgs...); err != nil {
					t.Error(err)
				}
			}
		})
	}
	total := rate * seconds
	begin := time.Now()
	for sent := 0; sent < total; sent += chunk {
		due := begin.Add(time.Duration(float64(sent) / float64(rate) * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			time.Sleep(d) // pacing the open-loop producer, not waiting for a result
		}
		msgs := make([]kafka.Message, chunk)
		for i := range msgs {
			e := ledgertest.Event(sent+i, "svc-"+strconv.Itoa((sent+i)%50), "br-"+strconv.Itoa((sent+i)%500), due)
			v, _ := json.Marshal(e)
			msgs[i] = kafka.Message{Key: []byte(e.ServiceID), Value: v}
		}
		jobs <- msgs
	}
	close(jobs)
	wg.Wait()
	produced := time.Since(begin)
	ledgertest.Eventually(5*time.Minute, func() bool {
		rows, _ := ledgertest.Rows(context.Background(), st)
		return rows >= uint64(total)
	})
	drained := time.Since(begin)
	stop()
	n, err := ledgertest.Count(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("offered %d events/s for %ds: produced in %.1fs (%.0f/s), all in ClickHouse after %.1fs (%.0f/s sustained); max delay due->inserted %.2fs; ledger %v",
		rate, seconds, produced.Seconds(), float64(total)/produced.Seconds(), drained.Seconds(), float64(total)/drained.Seconds(),
		c.MaxDelay().Seconds(), n)
	t.Logf("inserts: %d, %.3fs each on average", c.inserts, c.insertTime.Seconds()/float64(max(c.inserts, 1)))
	if n.Events != uint64(total) {
		t.Errorf("ledger has %d events, want %d", n.Events, total)
	}
}
