// Package outbox relays core's outbox to Kafka: the messages a store
// transaction wrote (usage events, jobs, callbacks, audit and config
// records) go to their topics in order, and leave the outbox once the
// broker has them.
package outbox

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/lib/stream"
	"github.com/slipverify/slipverify/core/store"
)

// Publisher sends core's outbox to Kafka in order and acks what the broker
// has; while the broker is away, messages wait in the outbox. One write is
// in flight at a time, so a failed write is sent again before anything
// after it; the ack of what was sent (a disk write) runs beside the next
// write. A message is deleted only once the broker has it, and one sent but
// not yet acked when core stops is sent again at the next start
// (at-least-once).
//
// A write goes out Linger after the first message it carries was
// committed, or as soon as Batch messages wait: each write costs core a
// broker round trip and, for its ack, a disk commit of its own, so while
// verifications come one by one, waiting for more to join it costs less
// than sending each on its own.
type Publisher struct {
	Store   store.Store
	Writer  *kafka.Writer
	Log     *slog.Logger
	Batch   int           // messages per write; 0: 10000
	Backoff time.Duration // wait after a failed write; 0: 1s
	Linger  time.Duration // how long a write waits for more messages; 0: none

	sent uint64 // the outbox position of the last message the broker has
}

// Run publishes until ctx is done, then publishes what is already in the
// outbox once more (so a clean stop leaves nothing behind while the broker
// is reachable), waits for the last ack and returns.
func (p *Publisher) Run(ctx context.Context) error {
	batch, backoff := p.Batch, p.Backoff
	if batch == 0 {
		batch = 10000
	}
	if backoff == 0 {
		backoff = time.Second
	}
	a := p.startAcker()
	defer a.stop()
	for {
		n, err := p.publish(ctx, batch, a)
		switch {
		case err != nil && ctx.Err() != nil:
			// The stop cut a write short: what it carried may or may not
			// be on the broker, and sent again by the drain (at-least-once).
			return p.drain(batch, a)
		case err != nil:
			p.Log.Warn("publish failed; the outbox keeps the messages", "err", err)
			if !stream.Wait(ctx, backoff, nil) {
				return p.drain(batch, a)
			}
		case n == batch:
			// More may wait: go on at once.
		case !p.gather(ctx, batch):
			return p.drain(batch, a)
		}
	}
}

// gather waits for a new message in the outbox, then up to Linger for
// more, ending early once batch messages wait. It returns false when ctx
// is done first.
func (p *Publisher) gather(ctx context.Context, batch int) bool {
	if !stream.Wait(ctx, 0, p.Store.OutboxReady()) {
		return false
	}
	if p.Linger <= 0 {
		return true
	}
	t := time.NewTimer(p.Linger)
	defer t.Stop()
	for {
		if waiting, _ := p.Store.OutboxStats(); waiting >= int64(batch) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case <-p.Store.OutboxReady():
		}
	}
}

// drain publishes what waits in the outbox at shutdown, giving up after a
// few seconds when the broker does not take it: it stays in the outbox.
func (p *Publisher) drain(batch int, a *acker) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		n, err := p.publish(ctx, batch, a)
		if err != nil || n < batch {
			return err
		}
	}
}

// publish sends up to max messages that follow the last one sent and
// hands their ack to a.
func (p *Publisher) publish(ctx context.Context, max int, a *acker) (int, error) {
	msgs, err := p.Store.OutboxAfter(p.sent, max)
	if err != nil || len(msgs) == 0 {
		return 0, err
	}
	out := make([]kafka.Message, len(msgs))
	for i, m := range msgs {
		out[i] = kafka.Message{Topic: m.Topic, Key: []byte(m.Key), Value: m.Value}
	}
	for {
		err := p.Writer.WriteMessages(ctx, out...)
		var big kafka.MessageTooLargeError
		if !errors.As(err, &big) {
			if err != nil {
				return 0, err
			}
			break
		}
		// kafka-go refuses the whole write, sending nothing, when one
		// message is larger than a write may carry. That message can never
		// be sent: it is left out, loudly, rather than hold up every
		// message behind it for good.
		p.Log.Error("dropping an outbox message larger than the broker takes", "topic", big.Message.Topic,
			"key", string(big.Message.Key), "bytes", len(big.Message.Value))
		out = big.Remaining
	}
	p.sent = msgs[len(msgs)-1].Seq
	a.ack(p.sent)
	return len(msgs), nil
}

// acker deletes sent messages from the outbox in the background. Acks
// that queue up while one is written merge into the latest, which deletes
// everything before it too.
type acker struct {
	seqs chan uint64
	done chan struct{}
}

func (p *Publisher) startAcker() *acker {
	a := &acker{seqs: make(chan uint64, 1), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for seq := range a.seqs {
			// A failed ack leaves the messages in the outbox: the next ack
			// deletes them, or core sends them again after a restart.
			if err := p.Store.Ack(seq); err != nil {
				p.Log.Warn("ack failed; the messages stay in the outbox", "seq", seq, "err", err)
			}
		}
	}()
	return a
}

// ack queues the deletion of every message up to seq, replacing a queued
// smaller one.
func (a *acker) ack(seq uint64) {
	for {
		select {
		case a.seqs <- seq:
			return
		case <-a.seqs:
		}
	}
}

// stop waits for the queued ack.
func (a *acker) stop() {
	close(a.seqs)
	<-a.done
}
