// Package consume moves usage events from Kafka (slip.usage) into the
// ClickHouse ledger: a consumer group member fetches messages, decodes
// them into a columnar batch, inserts the batch, and only then commits the
// batch's offsets. A crash anywhere before the commit redelivers the batch,
// and the ledger counts a redelivered event once (see chstore); a ClickHouse
// outage holds the batch in hand and pauses fetching until an insert
// succeeds, so nothing is lost and the backlog drains when it returns.
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

// Metrics of the consumer (Prometheus text on the usage tier's /metrics).
var (
	rowsInserted   = metrics.GetOrCreateCounter("usage_rows_inserted_total")
	rowsRejected   = metrics.GetOrCreateCounter("usage_rows_rejected_total")
	insertFailures = metrics.GetOrCreateCounter("usage_insert_failures_total")
	insertSeconds  = metrics.GetOrCreateHistogram("usage_insert_duration_seconds")
	delaySeconds   = metrics.GetOrCreateHistogram("usage_event_delay_seconds")
)

// Consumer is one member of the usage consumer group.
type Consumer struct {
	Reader   *kafka.Reader // a group reader of slip.usage (FetchMessage/CommitMessages)
	Store    *chstore.Store
	Batch    int           // events per insert at most
	Flush    time.Duration // a partial batch waits at most this long
	RetryMax time.Duration // the longest pause between insert attempts
	Log      *slog.Logger
	Now      func() time.Time // the clock of delay metrics; nil means time.Now

	dec Decoder // used by the fetching goroutine only
	// Written by the inserting goroutine, read once Run has returned (for
	// benchmarks): the largest event delay seen, the batches inserted and
	// the time their inserts took.
	maxLag     time.Duration
	inserts    int
	insertTime time.Duration
}

// batch is the messages of one insert: their events by column, the
// messages that are not events, and each partition's last message (whose
// offset the commit moves past).
type batch struct {
	rows   chstore.Rows
	reject []chstore.Reject
	last   map[int]kafka.Message
}

func (b *batch) empty() bool { return len(b.last) == 0 }

func (b *batch) reset() {
	b.rows.Reset()
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
	// Two batches circulate: one filling, one inserting. The inserter
	// stops at its first failure, and so does fetching: a later batch
	// must never commit past an earlier one's messages.
	free, full := make(chan *batch, 2), make(chan *batch, 1)
	for range 2 {
		free <- &batch{last: map[int]kafka.Message{}}
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
	for b.rows.Len()+len(b.reject) < c.Batch {
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
	if err := c.dec.Decode(m.Value, &b.rows); err != nil {
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
		insertFailures.Inc()
		if ctx.Err() != nil {
			return fmt.Errorf("stopping with %d events uncommitted (they will be redelivered): %w", b.rows.Len(), err)
		}
		c.Log.Warn("insert failed; holding the batch and retrying", "events", b.rows.Len(), "attempt", attempt, "retry_in", pause.String(), "err", err)
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

// insert writes b's events and rejects; both may be written again by a
// retry.
func (c *Consumer) insert(ctx context.Context, b *batch) error {
	start := time.Now()
	if err := c.Store.Insert(ctx, &b.rows); err != nil {
		return err
	}
	insertSeconds.UpdateDuration(start)
	c.inserts, c.insertTime = c.inserts+1, c.insertTime+time.Since(start)
	if len(b.reject) > 0 {
		if err := c.Store.InsertRejects(ctx, b.reject); err != nil {
			return err
		}
		for _, r := range b.reject {
			c.Log.Warn("rejected a message of "+api.TopicUsage, "partition", r.Partition, "offset", r.Offset, "err", r.Err)
		}
		rowsRejected.Add(len(b.reject))
	}
	rowsInserted.Add(b.rows.Len())
	now := c.Now()
	var worst time.Duration
	for _, t := range b.rows.OccurredAt {
		worst = max(worst, now.Sub(t))
	}
	delaySeconds.Update(worst.Seconds())
	c.maxLag = max(c.maxLag, worst)
	return nil
}

// MaxDelay is the longest time an event waited between occurring and
// reaching ClickHouse in this consumer's batches; read it after Run.
func (c *Consumer) MaxDelay() time.Duration { return c.maxLag }
