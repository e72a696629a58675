package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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

// Bolt is core's state in one bbolt file, the store of a single core node.
// It is safe for concurrent use.
//
// Reads run in concurrent read transactions. Writes go through a Committer,
// which runs every write waiting at a moment in one transaction, so a lone
// request pays one fsync and a thousand concurrent requests share a few,
// without a timer adding latency (bbolt's own Batch waits for one).
type Bolt struct {
	db       *bolt.DB
	now      func() time.Time
	c        *Committer[*bolt.Tx]
	slipAges bool // Options.SlipAges
	// historyBatch is historyBatch but in tests.
	historyBatch uint64
	// historyFrom is metaHistoryFrom as committed, and historyMoved its
	// value once the running transaction commits (0: unchanged; see
	// waitingFrom); committer only.
	historyFrom, historyMoved uint64
	enqueued                  int64 // messages the running transaction added; committer only

	writeFailures atomic.Int64 // transactions that did not commit

	records decoded // services and branches, decoded once while unchanged
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
	s := &Bolt{db: db, now: now, slipAges: o.SlipAges, historyBatch: historyBatch, historyFrom: from}
	s.c = StartCommitter[*bolt.Tx]((*batches)(s), o, int64(waiting))
	return s, nil
}

// Close finishes the writes in hand, writes the emitted messages and closes
// the file.
func (s *Bolt) Close() error {
	if err := s.c.Stop(); err != nil {
		return err
	}
	return s.db.Close()
}

// Announce tells the committer that the caller will soon write with
// Apply; Retract, that it has written or will not (Committer.Announce).
func (s *Bolt) Announce() { s.c.Announce() }

// Retract ends an Announce.
func (s *Bolt) Retract() { s.c.Retract() }

// errOpFailed stops a batch's transaction at the first op that fails.
var errOpFailed = errors.New("store: an op of the batch failed")

// batches is Bolt's side of its Committer.
type batches Bolt

// RunBatch runs the ops of a batch and the emitted msgs in one transaction.
// An op that fails leaves no write behind, whatever else shares the
// transaction: the transaction is rolled back at once and run again
// without it, until every op left succeeds.
func (b *batches) RunBatch(batch []*Op[*bolt.Tx], msgs []Message) error {
	s := (*Bolt)(b)
	for {
		err := s.update(func(tx *bolt.Tx) error {
			for _, o := range batch {
				if o.Err != nil {
					continue // failed in an earlier run
				}
				if o.Err = o.Fn(tx); o.Err != nil {
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
	s.c.Outbox.Added(s.enqueued)
	return nil
}

// Commits reports how many transactions the committer ran and how many
// writes they held: their ratio is how many writes a disk sync serves.
func (s *Bolt) Commits() (commits, writes int64) { return s.c.Commits() }

// WriteFailures counts the transactions the store could not commit.
func (s *Bolt) WriteFailures() int64 { return s.writeFailures.Load() }

// Size is the size of the store's file in bytes.
func (s *Bolt) Size() int64 {
	var n int64
	s.db.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil })
	return n
}

// write runs fn in a write transaction shared with other writers. When fn
// fails, nothing it wrote is kept (see RunBatch); fn may run more than once.
func (s *Bolt) write(fn func(tx *bolt.Tx) error) error { return s.c.Write(fn, false) }

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
