// Package consume moves the usage tier's topics from Kafka into
// ClickHouse: usage events (slip.usage) into the ledger, and core's audit
// records (slip.audit) into audit_events. A consumer group member fetches
// messages, decodes them into a columnar batch, inserts the batch, and only
// then commits the batch's offsets. A crash anywhere before the commit
// redelivers the batch, and both tables count a redelivered record once
// (see chstore); a ClickHouse outage holds the batch in hand and pauses
// fetching until an insert succeeds, so nothing is lost and the backlog
// drains when it returns. The loop is one for both topics; what differs
// (decoding, the insert, where rejects go, metric names) is a table.
//
// Fetching and decoding the next batch overlaps the insert and commit of
// the previous one (two batches at most); batches are inserted and
// committed in the order they were fetched.
package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/usage/chstore"
)

// Metrics of a consumer (Prometheus text on the usage tier's /metrics),
// by topic.
type topicMetrics struct {
	inserted, rejected, failures *metrics.Counter
	insertSeconds                *metrics.Histogram
	delaySeconds                 *metrics.Histogram // from a record's time to its insert
}

func newMetrics(prefix, delay string) topicMetrics {
	return topicMetrics{
		inserted:      metrics.GetOrCreateCounter(prefix + "rows_inserted_total"),
		rejected:      metrics.GetOrCreateCounter(prefix + "rows_rejected_total"),
		failures:      metrics.GetOrCreateCounter(prefix + "insert_failures_total"),
		insertSeconds: metrics.GetOrCreateHistogram(prefix + "insert_duration_seconds"),
		delaySeconds:  metrics.GetOrCreateHistogram(prefix + delay),
	}
}

var (
	usageMetrics = newMetrics("usage_", "event_delay_seconds")
	auditMetrics = newMetrics("usage_audit_", "delay_seconds")
)

// rows is a batch's records of one topic, by column.
type rows interface {
	// add decodes one message into the batch, or returns why it is not a
	// record of the topic (and adds nothing).
	add(value []byte) error
	len() int
	reset()
	// insert writes the batch's records; it runs again for the same batch
	// after a failure.
	insert(ctx context.Context, st *chstore.Store) error
	// oldest is the earliest record time in the batch (zero: none).
	oldest() time.Time
}

// table is what a consumer does with one topic's messages.
type table struct {
	newRows       func() rows
	insertRejects func(*chstore.Store, context.Context, []chstore.Reject) error
	metrics       *topicMetrics
}

// tables are the topics a Consumer reads, each into its table.
var tables = map[string]table{
	api.TopicUsage: {func() rows { return &usageRows{} }, (*chstore.Store).InsertRejects, &usageMetrics},
	api.TopicAudit: {func() rows { return &auditRows{} }, (*chstore.Store).InsertAuditRejects, &auditMetrics},
}

// Consumer is one member of a consumer group of the usage tier: of
// slip.usage into the ledger, or of slip.audit into audit_events.
type Consumer struct {
	Reader   *kafka.Reader // a group reader of Topic (FetchMessage/CommitMessages)
	Topic    string        // api.TopicUsage or api.TopicAudit
	Store    *chstore.Store
	Batch    int           // records per insert at most
	Flush    time.Duration // a partial batch waits at most this long
	RetryMax time.Duration // the longest pause between insert attempts
	Log      *slog.Logger
	Now      func() time.Time // the clock of delay metrics; nil means time.Now

	table table
	// Written by the inserting goroutine, read once Run has returned (for
	// benchmarks): the largest record delay seen, the batches inserted and
	// the time their inserts took.
	maxLag     time.Duration
	inserts    int
	insertTime time.Duration
}

// batch is the messages of one insert: their records by column, the
// messages that are not records, and each partition's last message (whose
// offset the commit moves past).
type batch struct {
	rows   rows
	reject []chstore.Reject
	last   map[int]kafka.Message
}

func (b *batch) empty() bool { return len(b.last) == 0 }

func (b *batch) reset() {
	b.rows.reset()
	b.reject = b.reject[:0]
	clear(b.last)
}

// Run consumes until ctx is done. The batches in hand when ctx ends are
// inserted and committed before Run returns, unless ClickHouse is down, in
// which case they are left uncommitted for the next run.
func (c *Consumer) Run(ctx context.Context) error {
	if c.Now == nil {
		c.Now = time.Now
	}
	var ok bool
	if c.table, ok = tables[c.Topic]; !ok {
		return fmt.Errorf("consume: no table for topic %q", c.Topic)
	}
	// Two batches circulate: one filling, one inserting. The inserter
	// stops at its first failure, and so does fetching: a later batch
	// must never commit past an earlier one's messages.
	free, full := make(chan *batch, 2), make(chan *batch, 1)
	for range 2 {
		free <- &batch{rows: c.table.newRows(), last: map[int]kafka.Message{}}
	}
	stopped := make(chan struct{})
	var insertErr error
	go func() {
		defer close(stopped)
		for b := range full {
			if insertErr = c.flush(ctx, b); insertErr != nil {
				return
			}
			b.reset()
			free <- b
		}
	}()
	var fetchErr error
	for fetchErr == nil {
		var b *batch
		select {
		case b = <-free:
		case <-stopped:
			return insertErr
		}
		fetchErr = c.fill(ctx, b)
		if !b.empty() {
			select {
			case full <- b:
			case <-stopped:
				return insertErr
			}
		}
	}
	close(full)
	<-stopped
	if insertErr != nil || ctx.Err() != nil {
		return insertErr
	}
	return fetchErr
}

// fill fetches messages into b until it is full, Flush has passed since
// its first message, or ctx ends.
func (c *Consumer) fill(ctx context.Context, b *batch) error {
	m, err := c.Reader.FetchMessage(ctx)
	if err != nil {
		return err
	}
	c.add(b, m)
	fctx, cancel := context.WithTimeout(ctx, c.Flush)
	defer cancel()
	for b.rows.len()+len(b.reject) < c.Batch {
		m, err := c.Reader.FetchMessage(fctx)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				return nil // the flush interval passed
			}
			return err
		}
		c.add(b, m)
	}
	return nil
}

// add decodes one message into b, or sets it aside as a reject.
func (c *Consumer) add(b *batch, m kafka.Message) {
	b.last[m.Partition] = m
	if err := b.rows.add(m.Value); err != nil {
		b.reject = append(b.reject, chstore.Reject{Partition: int32(m.Partition), Offset: m.Offset,
			Key: string(m.Key), Value: string(m.Value), Err: err.Error()})
	}
}

// flush inserts b, retrying with backoff while ClickHouse fails, then
// commits its offsets. A batch is finished even when ctx ends, unless an
// attempt fails after ctx ended.
func (c *Consumer) flush(ctx context.Context, b *batch) error {
	work := context.WithoutCancel(ctx)
	pause := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := c.insert(work, b)
		if err == nil {
			break
		}
		c.table.metrics.failures.Inc()
		if ctx.Err() != nil {
			return fmt.Errorf("stopping with %d records of %s uncommitted (they will be redelivered): %w", b.rows.len(), c.Topic, err)
		}
		c.Log.Warn("insert failed; holding the batch and retrying", "topic", c.Topic, "records", b.rows.len(), "attempt", attempt, "retry_in", pause.String(), "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(2*pause, c.RetryMax)
	}
	msgs := make([]kafka.Message, 0, len(b.last))
	for _, m := range b.last {
		msgs = append(msgs, m)
	}
	cctx, cancel := context.WithTimeout(work, 30*time.Second)
	defer cancel()
	if err := c.Reader.CommitMessages(cctx, msgs...); err != nil {
		return fmt.Errorf("commit offsets: %w", err)
	}
	return nil
}

// insert writes b's records and rejects; both may be written again by a
// retry.
func (c *Consumer) insert(ctx context.Context, b *batch) error {
	m := c.table.metrics
	start := time.Now()
	if err := b.rows.insert(ctx, c.Store); err != nil {
		return err
	}
	m.insertSeconds.UpdateDuration(start)
	c.inserts, c.insertTime = c.inserts+1, c.insertTime+time.Since(start)
	if len(b.reject) > 0 {
		if err := c.table.insertRejects(c.Store, ctx, b.reject); err != nil {
			return err
		}
		for _, r := range b.reject {
			c.Log.Warn("rejected a message of "+c.Topic, "partition", r.Partition, "offset", r.Offset, "err", r.Err)
		}
		m.rejected.Add(len(b.reject))
	}
	m.inserted.Add(b.rows.len())
	if oldest := b.rows.oldest(); !oldest.IsZero() {
		worst := max(0, c.Now().Sub(oldest))
		m.delaySeconds.Update(worst.Seconds())
		c.maxLag = max(c.maxLag, worst)
	}
	return nil
}

// MaxDelay is the longest time a record waited between occurring and
// reaching ClickHouse in this consumer's batches; read it after Run.
func (c *Consumer) MaxDelay() time.Duration { return c.maxLag }
