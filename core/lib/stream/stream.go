// Package stream connects the tiers to Kafka with kafka-go: a writer for
// the platform's topics and a consumer that handles records concurrently
// while committing offsets only after their effect is durable
// (at-least-once).
package stream

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/lib/kafkalink"
)

// Brokers splits a comma-separated SLIP_KAFKA_ADDR.
func Brokers(addr string) []string {
	var out []string
	for _, a := range strings.Split(addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// CheckBrokers reports what is wrong with a comma-separated
// SLIP_KAFKA_ADDR: no broker at all, or one that is not host:port. Brokers
// of an address it accepts is never empty.
func CheckBrokers(addr string) error {
	if strings.TrimSpace(addr) == "" {
		return errors.New("no broker (want host:port, comma-separated)")
	}
	var bad []string
	empty := false
	for _, a := range strings.Split(addr, ",") {
		if a = strings.TrimSpace(a); a == "" {
			empty = true
			continue
		}
		if _, port, err := net.SplitHostPort(a); err != nil {
			bad = append(bad, err.Error())
		} else if port == "" {
			bad = append(bad, "address "+a+": missing port")
		}
	}
	if empty {
		bad = append(bad, "an empty entry")
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; ") + " (want host:port, comma-separated)")
	}
	return nil
}

// NewWriter returns a writer over link (nil: plaintext) for any platform
// topic (each message names its own): records are placed by key,
// acknowledged by every in-sync replica, and batched for at most a few
// milliseconds.
func NewWriter(brokers []string, link *kafkalink.Link) *kafka.Writer {
	return &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Transport:    link.Transport(),
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		// kafka-go sets aside room for BatchSize messages in every batch
		// it starts (one per partition a write reaches): at 1000 that
		// was a third of all core allocated under load. A backlog goes
		// out in more, smaller requests.
		BatchSize:    100,
		BatchBytes:   1 << 20, // the broker's message.max.bytes is just above 1 MiB
		BatchTimeout: 2 * time.Millisecond,
		WriteTimeout: 10 * time.Second,
	}
}

// NewReader returns a consumer-group reader of topic over link (nil:
// plaintext). Commits are sent to
// the broker every 100 ms rather than one round trip each: a crash forgets
// at most that much of them, and the records are handled again, which every
// handler tolerates (at-least-once).
//
// A fetch waits up to 250 ms for records on each partition it reads (a
// record that arrives ends it at once): fetching idle partitions was
// nearly all an idle core did, 1.7 % of a CPU at 50 ms with two groups of
// six partitions. kafka-go's Close waits for the fetch in hand, so a
// reader takes as long to stop.
//
// A rebalance waits up to 10 s for the members to join again (kafka-go's
// default is 30 s): a member that died (a core killed) never joins, and
// holds the group, and the Close of every other member, for that long.
func NewReader(brokers []string, link *kafkalink.Link, topic, group string) *kafka.Reader {
	return kafka.NewReader(kafka.ReaderConfig{
		Brokers: brokers, Topic: topic, GroupID: group, Dialer: link.Dialer(),
		StartOffset:      kafka.FirstOffset,
		SessionTimeout:   6 * time.Second, // the shortest a broker accepts
		RebalanceTimeout: 10 * time.Second,
		MaxWait:          250 * time.Millisecond,
		MinBytes:         1,
		MaxBytes:         4 << 20,
		CommitInterval:   100 * time.Millisecond,
	})
}

// Close closes r, waiting at most 3 s: a reader in a rebalance stops only
// once the rebalance ends. A reader not closed in time is left to the
// process's exit; commits it still held are lost, and their records are
// handled again (at-least-once).
func Close(r *kafka.Reader) {
	done := make(chan struct{})
	go func() {
		r.Close()
		close(done)
	}()
	t := time.NewTimer(3 * time.Second)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// Wait waits for d (when positive) or a signal on ready (when not nil); it
// returns false when ctx is done first.
func Wait(ctx context.Context, d time.Duration, ready <-chan struct{}) bool {
	var timer <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-timer:
	case <-ready:
	}
	return true
}

// Grace is how long records in hand may take to finish once Consume is
// told to stop; then their handlers' context ends.
const Grace = 15 * time.Second

// Handler handles one record. It returns an error only when it could not
// make the record's effect durable (the store is gone): consumption then
// stops without committing the record, which is delivered again later.
type Handler func(ctx context.Context, m kafka.Message) error

// Consume fetches records from r and runs h on up to workers of them at
// once, committing each partition's offsets in order as far as every
// earlier record of the partition is handled. A slow record holds back its
// partition's commits, not the handling of later records, up to a window
// of 64 records per worker waiting for their commit. It returns when ctx is done
// (after the records in hand are handled, for at most Grace, and what was
// handled is committed; a record whose handling the end of the grace cut
// short is not, and is delivered again) or when h fails.
func Consume(ctx context.Context, r *kafka.Reader, workers int, h Handler) error {
	return ConsumeWithin(ctx, r, workers, Grace, h)
}

// ConsumeWithin is Consume giving the records in hand grace, not Grace, to
// finish once ctx is done.
func ConsumeWithin(ctx context.Context, r *kafka.Reader, workers int, grace time.Duration, h Handler) error {
	type result struct {
		e   *entry
		err error
		cut bool // err came from the end of the grace
	}
	fetched := make(chan kafka.Message)
	fetchErr := make(chan error, 1)
	fctx, stopFetch := context.WithCancel(ctx)
	defer stopFetch()
	go func() {
		for {
			m, err := r.FetchMessage(fctx)
			if err != nil {
				fetchErr <- err
				return
			}
			select {
			case fetched <- m:
			case <-fctx.Done():
				fetchErr <- fctx.Err()
				return
			}
		}
	}()

	// A record in hand may finish for up to grace after ctx is done.
	hctx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(grace, cancelHandlers)
		<-hctx.Done()
		t.Stop()
	})
	defer stop()
	done := make(chan result, workers)
	var wg sync.WaitGroup
	order := map[int][]*entry{} // per partition, in fetch order
	inflight, queued, window := 0, 0, 64*workers
	var failed error
	commit := func(ctx context.Context) error {
		var ready []kafka.Message
		for p, q := range order {
			i := 0
			for i < len(q) && q[i].done {
				i++
			}
			if i > 0 {
				ready = append(ready, q[i-1].m)
				order[p] = q[i:]
				queued -= i
			}
		}
		if len(ready) == 0 {
			return nil
		}
		return r.CommitMessages(ctx, ready...)
	}
	finish := func(res result) {
		inflight--
		switch {
		case res.cut:
			// Cut by the end of the grace: not handled, so not committed,
			// and handled again after the restart. What finished meanwhile
			// is still committed.
			return
		case res.err != nil:
			failed = errors.Join(failed, res.err)
			return
		}
		// This fetch's entry only: after a rebalance the reader fetches
		// records again from the last commit, and a copy that finishes
		// first (a job attempt already running returns at once) must not
		// let the commit pass an original still running.
		res.e.done = true
	}
	in := fetched
	for {
		if failed != nil || in == nil {
			if inflight == 0 {
				break
			}
			finish(<-done)
			continue
		}
		if inflight > 0 && (inflight == workers || queued >= window) {
			finish(<-done)
		} else {
			select {
			case m := <-in:
				e := &entry{m: m}
				order[m.Partition] = append(order[m.Partition], e)
				inflight++
				queued++
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := h(hctx, m)
					done <- result{e, err, err != nil && hctx.Err() != nil}
				}()
				continue
			case res := <-done:
				finish(res)
			case err := <-fetchErr:
				in = nil
				if ctx.Err() == nil {
					failed = errors.Join(failed, err)
				}
				continue
			}
		}
		// Handle every result already waiting before committing once.
	more:
		for inflight > 0 {
			select {
			case res := <-done:
				finish(res)
			default:
				break more
			}
		}
		if err := commit(hctx); err != nil && ctx.Err() == nil {
			failed = errors.Join(failed, err)
		}
	}
	wg.Wait()
	if failed == nil {
		// The grace may have ended: the last commit has its own time.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalCommit)
		defer cancel()
		return commit(cctx)
	}
	stopFetch()
	return failed
}

// finalCommit bounds the commit of what finished when consumption stops.
const finalCommit = 5 * time.Second

type entry struct {
	m    kafka.Message
	done bool
}
