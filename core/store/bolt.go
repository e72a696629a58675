package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// schemaVersion is the layout this build writes. 2 added the counts of
// each branch's unfinished jobs, which a build of 1 would open and not
// keep: it refuses a file of 2, and this build upgrades a file of 1. 3
// added the slip records' index by age (bucketSlipsByAge), likewise. 4
// writes slip records in a binary form (SlipRecord.encode), which a build
// of 3 could not read; records of before stay JSON and are read as such.
// 5 keeps the history in runs (bucketHistory), into which this build moves
// the entries a build of 4 kept one by one.
const schemaVersion = 5

var (
	bucketMeta     = []byte("meta")
	bucketServices = []byte("services")
	bucketBranches = []byte("branches")
	bucketKeys     = []byte("keys")
	bucketB2B      = []byte("b2b")
	// bucketB2BByService indexes B2B clients by service and creation order.
	bucketB2BByService = []byte("b2b-by-service")
	bucketAccounts     = []byte("accounts")
	// bucketAccountsByService indexes bank accounts by service
	// (service NUL account id), so a service's accounts are read without
	// reading every other service's.
	bucketAccountsByService = []byte("accounts-by-service")
	// bucketBranchesByService indexes branches the same way.
	bucketBranchesByService = []byte("branches-by-service")
	bucketQuota             = []byte("quota")
	bucketSlips             = []byte("slips")
	// bucketSlipsByAge orders the slip records by their first
	// verification (timeKey of FirstAt in ms, then the record's key), for
	// removal after SLIP_SLIP_RETENTION.
	bucketSlipsByAge = []byte("slips-by-age")
	bucketOutbox     = []byte("outbox")
	bucketJobs       = []byte("jobs")
	// bucketJobsDue orders the jobs that wait for a time (a retry, a
	// delivery) by that time; bucketJobsByAge orders jobs by creation for
	// removal after their retention.
	bucketJobsDue   = []byte("jobs-due")
	bucketJobsByAge = []byte("jobs-by-age")
	// bucketJobsUnfinished counts each branch's unfinished jobs (service
	// NUL branch → big-endian uint64), which CreateJobs bounds.
	bucketJobsUnfinished = []byte("jobs-unfinished")
	// bucketBranchesDeleted holds the ids of deleted branches (with the
	// time of deletion), so the seed, loaded at every start, does not bring
	// a deleted branch and its key back.
	bucketBranchesDeleted = []byte("branches-deleted")
	allBuckets            = [][]byte{bucketMeta, bucketServices, bucketBranches, bucketBranchesByService, bucketKeys,
		bucketB2B, bucketB2BByService, bucketAccounts, bucketAccountsByService, bucketQuota, bucketSlips, bucketOutbox,
		bucketJobs, bucketJobsDue, bucketJobsByAge, bucketJobsUnfinished, bucketBranchesDeleted, bucketSlipsByAge,
		bucketAudit, bucketAdminTokens, bucketAdminTokenDigests, bucketNonces, bucketHistory}
)

// maxBatch bounds how many writes share one transaction, and maxEmitted
// how many emitted messages: those are small and many (a usage event per
// verification attempt), so while a transaction syncs to disk the next
// thousands wait in memory rather than hold up Emit.
const (
	maxBatch   = 512
	maxEmitted = 8192
)

// Bolt is core's state in one bbolt file, the store of a single core node.
// It is safe for concurrent use.
//
// Reads run in concurrent read transactions. Writes go through one committer
// goroutine that runs every write waiting at that moment in one transaction,
// so a lone request pays one fsync and a thousand concurrent requests share a
// few, without a timer adding latency (bbolt's own Batch waits for one).
type Bolt struct {
	db      *bolt.DB
	now     func() time.Time
	ops     chan *op // unbuffered: a sent op is always run
	quit    chan struct{}
	stopped chan struct{}

	emitted     chan Message  // messages of Emit, for the next transaction
	outboxReady chan struct{} // see OutboxReady
	outboxLen   atomic.Int64
	outboxLimit int64
	slipAges    bool // Options.SlipAges
	// historyBatch is historyBatch but in tests.
	historyBatch uint64
	// historyFrom is metaHistoryFrom as committed, and historyMoved its
	// value once the running transaction commits (0: unchanged; see
	// waitingFrom); committer only.
	historyFrom, historyMoved uint64
	dropped                   atomic.Int64
	enqueued                  int64 // messages the running transaction added; committer only

	opPool sync.Pool // ops with their channels: a write is made for every verification

	writeFailures atomic.Int64  // transactions that did not commit
	commits       atomic.Int64  // transactions the committer ran
	writes        atomic.Int64  // writes they held
	gather        time.Duration // Options.Gather
	announced     atomic.Int64  // writes announced and not yet retracted
	retracted     chan struct{} // a retraction, for a committer that waits

	closing sync.RWMutex // Close waits for Emits in progress
	closed  bool

	records decoded // services and branches, decoded once while unchanged
}

type op struct {
	announced bool // Apply's, whose writer announced it
	fn        func(tx *bolt.Tx) error
	err       error
	done      chan error
}

// Open opens or creates the store at path. now is the clock that decides
// billing periods, verification and job times. The outbox holds at most
// DefaultOutboxLimit messages, and slip records are indexed by age.
func Open(path string, now func() time.Time) (*Bolt, error) {
	return OpenWith(path, now, Options{SlipAges: true})
}

// OpenWith is Open with o.
func OpenWith(path string, now func() time.Time, o Options) (*Bolt, error) {
	if o.OutboxLimit == 0 {
		o.OutboxLimit = DefaultOutboxLimit
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(bucketMeta); meta != nil {
			if v := meta.Get([]byte("schema")); v != nil {
				if n, err := strconv.Atoi(string(v)); err != nil || n > schemaVersion {
					return fmt.Errorf("schema version %s, this build reads %d and older", v, schemaVersion)
				}
			}
		}
		var missing []byService // indexes a store from before them lacks
		for _, x := range []byService{accountsByService, branchesByService} {
			if tx.Bucket(x.index) == nil {
				missing = append(missing, x)
			}
		}
		countJobs := tx.Bucket(bucketJobsUnfinished) == nil
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		for _, x := range missing {
			if err := x.build(tx); err != nil {
				return err
			}
		}
		if err := moveEntries(tx); err != nil {
			return err
		}
		if countJobs {
			if err := countAllUnfinished(tx); err != nil {
				return err
			}
		}
		if !o.SlipAges {
			if err := dropSlipAges(tx); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put([]byte("schema"), []byte(strconv.Itoa(schemaVersion)))
	})
	if err == nil && o.SlipAges {
		err = indexSlips(db)
	}
	var waiting int
	var from uint64
	if err == nil {
		err = db.View(func(tx *bolt.Tx) error {
			from = historyFrom(tx)
			return tx.Bucket(bucketOutbox).ForEach(func(k, _ []byte) error {
				if !isHistoryKey(k) {
					waiting++
				}
				return nil
			})
		})
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	s := &Bolt{db: db, now: now, ops: make(chan *op), quit: make(chan struct{}), stopped: make(chan struct{}),
		emitted: make(chan Message, maxEmitted), outboxReady: make(chan struct{}, 1), outboxLimit: o.OutboxLimit, slipAges: o.SlipAges, historyBatch: historyBatch, historyFrom: from,
		gather: o.Gather, retracted: make(chan struct{}, 1)}
	s.outboxLen.Store(int64(waiting))
	go s.commit()
	return s, nil
}

// Close finishes the writes in hand, writes the emitted messages and closes
// the file.
func (s *Bolt) Close() error {
	s.closing.Lock()
	already := s.closed
	s.closed = true
	s.closing.Unlock()
	if already {
		return ErrClosed
	}
	close(s.quit)
	<-s.stopped
	return s.db.Close()
}

// emitDelay bounds how long an emitted message waits for a transaction to
// join before the committer writes it in one of its own.
const emitDelay = 10 * time.Millisecond

// commit runs queued writes in shared transactions until Close. Emitted
// messages join the next transaction; while no write comes, they are
// written together once maxEmitted of them wait or the first has waited
// emitDelay, so a stream of them costs few disk syncs.
func (s *Bolt) commit() {
	defer close(s.stopped)
	batch := make([]*op, 0, maxBatch)
	var msgs []Message
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed := false
	gathering := time.NewTimer(time.Hour)
	gathering.Stop()
	for {
		batch = batch[:0]
		select {
		case <-s.quit:
			s.flushEmitted(msgs)
			return
		case o := <-s.ops:
			batch = append(batch, o)
		case m := <-s.emitted:
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
			case o := <-s.ops:
				batch = append(batch, o)
			default:
				break drain
			}
		}
		if len(batch) > 0 && s.gather > 0 {
			batch = s.gatherMore(batch, gathering)
		}
		s.commits.Add(1)
		s.writes.Add(int64(len(batch)))
		err := s.runBatch(batch, msgs)
		if err != nil && len(msgs) > 0 {
			s.dropped.Add(int64(len(msgs)))
		}
		msgs = msgs[:0]
		if armed && !timer.Stop() {
			<-timer.C
		}
		armed = false
		for _, o := range batch {
			if o.err != nil {
				o.done <- o.err // it wrote nothing: the transaction's fate is not its
				continue
			}
			o.done <- err
		}
	}
}

// gatherMore adds to batch the writes announced and not yet in it (see
// Announce) as they come, for up to Options.Gather, until none is missing,
// the batch is full or the store closes.
func (s *Bolt) gatherMore(batch []*op, t *time.Timer) []*op {
	inHand := int64(0)
	for _, o := range batch {
		if o.announced {
			inHand++
		}
	}
	if s.announced.Load() <= inHand {
		return batch
	}
	t.Reset(s.gather)
	defer t.Stop()
	for len(batch) < maxBatch && s.announced.Load() > inHand {
		select {
		case o := <-s.ops:
			batch = append(batch, o)
			if o.announced {
				inHand++
			}
		case <-s.retracted: // count again
		case <-t.C:
			return batch
		case <-s.quit:
			return batch
		}
	}
	return batch
}

// Announce tells the committer that the caller will soon write with
// Apply; Retract, that it has written or will not. While announced writes
// are on their way, a transaction waits for them up to Options.Gather, so
// they share its disk syncs. A verification announces its write from its
// first snapshot to Apply's return, but not while it waits on a bank.
func (s *Bolt) Announce() { s.announced.Add(1) }

// Retract ends an Announce.
func (s *Bolt) Retract() {
	s.announced.Add(-1)
	select {
	case s.retracted <- struct{}{}:
	default: // the committer has one to read
	}
}

// errOpFailed stops a batch's transaction at the first op that fails.
var errOpFailed = errors.New("store: an op of the batch failed")

// runBatch runs the ops of a batch and the emitted msgs in one transaction.
// An op that fails leaves no write behind, whatever else shares the
// transaction: the transaction is rolled back at once and run again
// without it, until every op left succeeds. So each op's fn runs on the
// state the ops before it left, and may run more than once: it must set
// its results from the transaction alone.
func (s *Bolt) runBatch(batch []*op, msgs []Message) error {
	for i := range batch {
		batch[i].err = nil
	}
	for {
		err := s.update(func(tx *bolt.Tx) error {
			for _, o := range batch {
				if o.err != nil {
					continue // failed in an earlier run
				}
				if o.err = o.fn(tx); o.err != nil {
					return errOpFailed
				}
			}
			return s.enqueue(tx, msgs...)
		})
		if !errors.Is(err, errOpFailed) {
			return err
		}
	}
}

// flushEmitted writes, at Close, the messages emitted before it: msgs and
// those still in the channel.
func (s *Bolt) flushEmitted(msgs []Message) {
	for drained := false; !drained; {
		select {
		case m := <-s.emitted:
			msgs = append(msgs, m)
		default:
			drained = true
		}
	}
	for len(msgs) > 0 {
		n := min(len(msgs), maxEmitted)
		if err := s.update(func(tx *bolt.Tx) error { return s.enqueue(tx, msgs[:n]...) }); err != nil {
			s.dropped.Add(int64(n))
		}
		msgs = msgs[n:]
	}
}

// update runs fn in a write transaction on the committer goroutine and
// accounts for the messages it added to the outbox.
func (s *Bolt) update(fn func(tx *bolt.Tx) error) error {
	s.enqueued, s.historyMoved = 0, 0
	tx, err := s.db.Begin(true)
	if err != nil {
		return WriteError{err}
	}
	defer tx.Rollback() // after a commit: a no-op
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		s.writeFailures.Add(1)
		return WriteError{err}
	}
	if s.historyMoved != 0 {
		s.historyFrom = s.historyMoved
	}
	if s.enqueued > 0 {
		s.outboxLen.Add(s.enqueued)
		select {
		case s.outboxReady <- struct{}{}:
		default:
		}
	}
	return nil
}

// Commits reports how many transactions the committer ran and how many
// writes they held: their ratio is how many writes a disk sync serves.
func (s *Bolt) Commits() (commits, writes int64) { return s.commits.Load(), s.writes.Load() }

// WriteFailures counts the transactions the store could not commit.
func (s *Bolt) WriteFailures() int64 { return s.writeFailures.Load() }

// Size is the size of the store's file in bytes.
func (s *Bolt) Size() int64 {
	var n int64
	s.db.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil })
	return n
}

// write runs fn in a write transaction shared with other writers. When fn
// fails, nothing it wrote is kept (see runBatch); fn may run more than once.
func (s *Bolt) write(fn func(tx *bolt.Tx) error) error { return s.writeOp(fn, false) }

// writeOp is write; announced says the writer announced it (Announce).
func (s *Bolt) writeOp(fn func(tx *bolt.Tx) error, announced bool) error {
	o, _ := s.opPool.Get().(*op)
	if o == nil {
		o = &op{done: make(chan error, 1)}
	}
	o.fn, o.announced = fn, announced
	select {
	case s.ops <- o:
		err := <-o.done
		o.fn = nil
		s.opPool.Put(o) // answered: the committer holds it no more
		return err
	case <-s.stopped:
		return ErrClosed
	}
}

func getJSON(b *bolt.Bucket, key string, v any) error {
	raw := b.Get([]byte(key))
	if raw == nil {
		return ErrNotFound
	}
	return json.Unmarshal(raw, v)
}

func putJSON(b *bolt.Bucket, key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put([]byte(key), raw)
}

// Ping reports whether the file can be read.
func (s *Bolt) Ping() error { return s.db.View(func(*bolt.Tx) error { return nil }) }

// Now is the store's clock: the time its records are written at.
func (s *Bolt) Now() time.Time { return s.now() }
