package store

import (
	"sync"
	"sync/atomic"
	"time"
)

// maxBatch bounds how many writes share one transaction, and maxEmitted
// how many emitted messages: those are small and many (a usage event per
// verification attempt), so while a transaction commits the next
// thousands wait in memory rather than hold up Emit.
const (
	maxBatch   = 512
	maxEmitted = 8192
)

// Batcher is a store's side of a Committer: it runs a batch of writes and
// messages in one transaction of T.
type Batcher[T any] interface {
	// RunBatch runs the ops of batch and msgs in one transaction. An op
	// that fails (its Err set) leaves no write behind, whatever else
	// shares the transaction; the others are committed, or none is and
	// RunBatch returns why. Each op's Fn runs on the state the ops before
	// it left, and may run more than once.
	RunBatch(batch []*Op[T], msgs []Message) error
}

// Op is one write of a batch.
type Op[T any] struct {
	announced bool // Apply's, whose writer announced it
	Fn        func(tx T) error
	// Locks names what the write will lock, so that a store whose
	// transactions lock rows may take every lock of a batch first, in
	// one order, and no two batches wait on each other.
	Locks []string
	// Err is Fn's error in the batch's transaction (nil: it succeeded).
	Err  error
	done chan error
}

// Committer runs a store's writes on one goroutine: every write waiting at
// a moment, and the messages emitted meanwhile, in one transaction, so a
// lone request pays one commit (a disk sync) and a thousand concurrent
// requests share a few, without a timer adding latency. Bolt and package
// pgstore both write through one.
type Committer[T any] struct {
	b       Batcher[T]
	ops     chan *Op[T] // unbuffered: a sent op is always run
	quit    chan struct{}
	stopped chan struct{}
	emitted chan Message // messages of Emit, for the next transaction
	opPool  sync.Pool    // ops with their channels: a write is made for every verification

	// Outbox counts the messages waiting in the store's outbox.
	Outbox OutboxCount

	commits   atomic.Int64  // transactions the committer ran
	writes    atomic.Int64  // writes they held
	gather    time.Duration // Options.Gather
	announced atomic.Int64  // writes announced and not yet retracted
	retracted chan struct{} // a retraction, for a committer that waits

	closing sync.RWMutex // Close waits for Emits in progress
	closed  bool
}

// StartCommitter starts a committer of b's transactions with o's gather
// and outbox limit, waiting counting the messages in the outbox now.
func StartCommitter[T any](b Batcher[T], o Options, waiting int64) *Committer[T] {
	if o.OutboxLimit == 0 {
		o.OutboxLimit = DefaultOutboxLimit
	}
	c := &Committer[T]{b: b, ops: make(chan *Op[T]), quit: make(chan struct{}), stopped: make(chan struct{}),
		emitted: make(chan Message, maxEmitted), gather: o.Gather, retracted: make(chan struct{}, 1),
		Outbox: OutboxCount{limit: o.OutboxLimit, ready: make(chan struct{}, 1)}}
	c.Outbox.waiting.Store(waiting)
	go c.commit()
	return c
}

// Stop finishes the writes in hand and writes the emitted messages; the
// store closes after it. It returns ErrClosed when stopped already.
func (c *Committer[T]) Stop() error {
	c.closing.Lock()
	already := c.closed
	c.closed = true
	c.closing.Unlock()
	if already {
		return ErrClosed
	}
	close(c.quit)
	<-c.stopped
	return nil
}

// emitDelay bounds how long an emitted message waits for a transaction to
// join before the committer writes it in one of its own.
const emitDelay = 10 * time.Millisecond

// commit runs queued writes in shared transactions until Stop. Emitted
// messages join the next transaction; while no write comes, they are
// written together once maxEmitted of them wait or the first has waited
// emitDelay, so a stream of them costs few commits.
func (c *Committer[T]) commit() {
	defer close(c.stopped)
	batch := make([]*Op[T], 0, maxBatch)
	var msgs []Message
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed := false
	gathering := time.NewTimer(time.Hour)
	gathering.Stop()
	for {
		batch = batch[:0]
		select {
		case <-c.quit:
			c.flushEmitted(msgs)
			return
		case o := <-c.ops:
			batch = append(batch, o)
		case m := <-c.emitted:
			msgs = append(msgs, m)
			if len(msgs) < maxEmitted {
				if !armed {
					timer.Reset(emitDelay)
					armed = true
				}
				continue
			}
		case <-timer.C:
			armed = false
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case o := <-c.ops:
				batch = append(batch, o)
			default:
				break drain
			}
		}
		if len(batch) > 0 && c.gather > 0 {
			batch = c.gatherMore(batch, gathering)
		}
		c.commits.Add(1)
		c.writes.Add(int64(len(batch)))
		for _, o := range batch {
			o.Err = nil
		}
		err := c.b.RunBatch(batch, msgs)
		if err != nil && len(msgs) > 0 {
			c.Outbox.dropped.Add(int64(len(msgs)))
		}
		msgs = msgs[:0]
		if armed && !timer.Stop() {
			<-timer.C
		}
		armed = false
		for _, o := range batch {
			if o.Err != nil {
				o.done <- o.Err // it wrote nothing: the transaction's fate is not its
				continue
			}
			o.done <- err
		}
	}
}

// gatherMore adds to batch the writes announced and not yet in it (see
// Announce) as they come, for up to Options.Gather, until none is missing,
// the batch is full or the store closes.
func (c *Committer[T]) gatherMore(batch []*Op[T], t *time.Timer) []*Op[T] {
	inHand := int64(0)
	for _, o := range batch {
		if o.announced {
			inHand++
		}
	}
	if c.announced.Load() <= inHand {
		return batch
	}
	t.Reset(c.gather)
	defer t.Stop()
	for len(batch) < maxBatch && c.announced.Load() > inHand {
		select {
		case o := <-c.ops:
			batch = append(batch, o)
			if o.announced {
				inHand++
			}
		case <-c.retracted: // count again
		case <-t.C:
			return batch
		case <-c.quit:
			return batch
		}
	}
	return batch
}

// Announce tells the committer that the caller will soon write with
// Apply; Retract, that it has written or will not. While announced writes
// are on their way, a transaction waits for them up to Options.Gather, so
// they share its commit. A verification announces its write from its
// first snapshot to Apply's return, but not while it waits on a bank.
func (c *Committer[T]) Announce() { c.announced.Add(1) }

// Retract ends an Announce.
func (c *Committer[T]) Retract() {
	c.announced.Add(-1)
	select {
	case c.retracted <- struct{}{}:
	default: // the committer has one to read
	}
}

// flushEmitted writes, at Stop, the messages emitted before it: msgs and
// those still in the channel.
func (c *Committer[T]) flushEmitted(msgs []Message) {
	for drained := false; !drained; {
		select {
		case m := <-c.emitted:
			msgs = append(msgs, m)
		default:
			drained = true
		}
	}
	for len(msgs) > 0 {
		n := min(len(msgs), maxEmitted)
		if err := c.b.RunBatch(nil, msgs[:n]); err != nil {
			c.Outbox.dropped.Add(int64(n))
		}
		msgs = msgs[n:]
	}
}

// Write runs fn in a transaction shared with other writes. When fn fails,
// nothing it wrote is kept; fn may run more than once. announced says the
// writer announced it (Announce); locks are Op.Locks.
func (c *Committer[T]) Write(fn func(tx T) error, announced bool, locks ...string) error {
	o, _ := c.opPool.Get().(*Op[T])
	if o == nil {
		o = &Op[T]{done: make(chan error, 1)}
	}
	o.Fn, o.announced, o.Locks = fn, announced, locks
	select {
	case c.ops <- o:
		err := <-o.done
		o.Fn, o.Locks = nil, nil
		c.opPool.Put(o) // answered: the committer holds it no more
		return err
	case <-c.stopped:
		return ErrClosed
	}
}

// Emit queues a message that reports no state change of its own (a usage
// event of a refused verification, for example). It does not wait for a
// commit: the message joins the next transaction the committer runs, or
// one of its own at once when the committer is idle; Stop writes every
// message emitted before it. It returns ErrOutboxFull when the outbox
// limit's messages already wait, and ErrClosed after Stop.
func (c *Committer[T]) Emit(m Message) error {
	c.closing.RLock()
	defer c.closing.RUnlock()
	if c.closed {
		return ErrClosed
	}
	if c.Outbox.waiting.Load() >= c.Outbox.limit {
		c.Outbox.dropped.Add(1)
		return ErrOutboxFull
	}
	c.emitted <- m // the committer runs until Stop, which waits for this
	return nil
}

// Commits reports how many transactions the committer ran and how many
// writes they held: their ratio is how many writes a commit serves.
func (c *Committer[T]) Commits() (commits, writes int64) { return c.commits.Load(), c.writes.Load() }

// OutboxCount counts the messages waiting in a store's outbox, as its
// process sees them, and those dropped for want of room.
type OutboxCount struct {
	waiting, dropped atomic.Int64
	limit            int64
	ready            chan struct{}
}

// Room reports whether a message that may be dropped has room, n more
// being added by the transaction running; else it counts it dropped.
func (o *OutboxCount) Room(n int64) bool {
	if o.waiting.Load()+n >= o.limit {
		o.dropped.Add(1)
		return false
	}
	return true
}

// Added counts n messages a transaction committed, and signals OutboxReady.
func (o *OutboxCount) Added(n int64) {
	if n == 0 {
		return
	}
	o.waiting.Add(n)
	o.Signal()
}

// Signal signals OutboxReady (without blocking): messages wait to be
// published.
func (o *OutboxCount) Signal() {
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

// Removed counts n messages acked.
func (o *OutboxCount) Removed(n int64) { o.waiting.Add(-n) }

// Set sets the count to n waiting, counted in the outbox itself: where
// several processes write and ack one outbox, each counts anew after an
// ack.
func (o *OutboxCount) Set(n int64) { o.waiting.Store(n) }

// OutboxStats reports how many messages wait in the outbox and how many
// were dropped because it was full.
func (o *OutboxCount) OutboxStats() (waiting, dropped int64) {
	return o.waiting.Load(), o.dropped.Load()
}

// OutboxReady is signalled (without blocking) after a transaction that
// added messages to the outbox commits.
func (o *OutboxCount) OutboxReady() <-chan struct{} { return o.ready }
