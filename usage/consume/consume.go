// Package consume moves usage events from Kafka (slip.usage) into the
// ClickHouse ledger: a consumer group member fetches messages, decodes
// them into a columnar batch, inserts the batch, and only then commits the
// batch's offsets. A crash anywhere before the commit redelivers the batch,
// and the ledger counts a redelivered event once (see chstore); a ClickHouse
// outage holds the batch in hand and pauses fetching until an insert
// succeeds, so nothing is lost and the backlog drains when it returns.
package consume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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

	once   sync.Once
	rows   chstore.Rows
	last   map[int]kafka.Message // the last message of each partition in the batch
	reject []chstore.Reject
	event  api.UsageEvent
	maxLag time.Duration // the largest event delay seen, for benchmarks
	// inserts and insertTime count the batches written and the time
	// their inserts took, for benchmarks.
	inserts    int
	insertTime time.Duration
}

// Run consumes until ctx is done. The batch in hand when ctx ends is
// inserted and committed before Run returns, unless ClickHouse is down, in
// which case it is left uncommitted for the next run.
func (c *Consumer) Run(ctx context.Context) error {
	c.once.Do(c.init)
	for {
		if err := c.fill(ctx); err != nil {
			if ctx.Err() != nil && c.rows.Len() == 0 && len(c.reject) == 0 {
				return nil
			}
			if ctx.Err() == nil {
				return err
			}
		}
		if err := c.flush(ctx); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

func (c *Consumer) init() {
	if c.Now == nil {
		c.Now = time.Now
	}
	c.last = map[int]kafka.Message{}
}

// fill fetches messages into the batch until it is full, Flush has passed
// since its first message, or ctx ends.
func (c *Consumer) fill(ctx context.Context) error {
	m, err := c.Reader.FetchMessage(ctx)
	if err != nil {
		return err
	}
	c.add(m)
	fctx, cancel := context.WithTimeout(ctx, c.Flush)
	defer cancel()
	for c.rows.Len()+len(c.reject) < c.Batch {
		m, err := c.Reader.FetchMessage(fctx)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				return nil // the flush interval passed
			}
			return err
		}
		c.add(m)
	}
	return nil
}

// add decodes one message into the batch (fast path: a valid event is one
// json.Unmarshal and ten slice appends), or sets it aside as a reject.
func (c *Consumer) add(m kafka.Message) {
	c.last[m.Partition] = m
	if err := Decode(m.Value, &c.event, &c.rows); err != nil {
		c.reject = append(c.reject, chstore.Reject{Partition: int32(m.Partition), Offset: m.Offset,
			Key: string(m.Key), Value: string(m.Value), Err: err.Error()})
	}
}

// Decode parses one slip.usage message into e and appends it to rows, or
// returns why it is not a usage event. e is scratch space, reused between
// calls.
func Decode(value []byte, e *api.UsageEvent, rows *chstore.Rows) error {
	*e = api.UsageEvent{}
	if err := json.Unmarshal(value, e); err != nil {
		return fmt.Errorf("not a usage event: %w", err)
	}
	return rows.Append(e)
}

// flush inserts the batch, retrying with backoff while ClickHouse fails,
// then commits its offsets. Once a batch is fetched it is finished even
// when ctx ends, unless an attempt fails after ctx ended.
func (c *Consumer) flush(ctx context.Context) error {
	if len(c.last) == 0 {
		return nil
	}
	work := context.WithoutCancel(ctx)
	pause := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := c.insert(work)
		if err == nil {
			break
		}
		insertFailures.Inc()
		if ctx.Err() != nil {
			return fmt.Errorf("stopping with %d events uncommitted (they will be redelivered): %w", c.rows.Len(), err)
		}
		c.Log.Warn("insert failed; holding the batch and retrying", "events", c.rows.Len(), "attempt", attempt, "retry_in", pause.String(), "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(2*pause, c.RetryMax)
	}
	msgs := make([]kafka.Message, 0, len(c.last))
	for _, m := range c.last {
		msgs = append(msgs, m)
	}
	cctx, cancel := context.WithTimeout(work, 30*time.Second)
	defer cancel()
	if err := c.Reader.CommitMessages(cctx, msgs...); err != nil {
		return fmt.Errorf("commit offsets: %w", err)
	}
	c.rows.Reset()
	c.reject = c.reject[:0]
	clear(c.last)
	return nil
}

// insert writes the batch's events and rejects; both may be written again
// by a retry.
func (c *Consumer) insert(ctx context.Context) error {
	start := time.Now()
	if err := c.Store.Insert(ctx, &c.rows); err != nil {
		return err
	}
	insertSeconds.UpdateDuration(start)
	c.inserts, c.insertTime = c.inserts+1, c.insertTime+time.Since(start)
	if len(c.reject) > 0 {
		if err := c.Store.InsertRejects(ctx, c.reject); err != nil {
			return err
		}
		for _, r := range c.reject {
			c.Log.Warn("rejected a message of "+api.TopicUsage, "partition", r.Partition, "offset", r.Offset, "err", r.Err)
		}
		rowsRejected.Add(len(c.reject))
	}
	rowsInserted.Add(c.rows.Len())
	now := c.Now()
	var worst time.Duration
	for _, t := range c.rows.OccurredAt {
		worst = max(worst, now.Sub(t))
	}
	delaySeconds.Update(worst.Seconds())
	c.maxLag = max(c.maxLag, worst)
	return nil
}

// MaxDelay is the longest time an event waited between occurring and
// reaching ClickHouse in this consumer's batches.
func (c *Consumer) MaxDelay() time.Duration { return c.maxLag }
