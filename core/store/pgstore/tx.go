package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/slipverify/slipverify/core/quota"
	"github.com/slipverify/slipverify/core/store"
)

// tx is a transaction of the committer, on a connection of the pool.
//
// Round trips are what a verification costs most, in core and in
// PostgreSQL alike, so the statements of the transaction's own (its
// BEGIN, the counters' lock, each op's savepoint, the counters' write,
// the outbox, the commit) are queued and go out with the next statement
// an op sends, or with the commit: an op costs its own round trips only.
// A queued statement that fails fails the whole batch (failed).
//
// The quota counters a batch's verifications charge are read once, when
// the batch locks them, and kept here as its ops leave them (counters):
// a verification reads and charges them in memory, and the batch writes
// the changed ones once, before its commit, outside every savepoint. A
// write that is not a verification (one without Op.Locks: an admin
// change, a sweep) may read or change counters itself, so the changes
// are written before it runs and the counters read again after.
//
// A batch of verifications alone runs blind first: each decides on what
// its snapshot read (Apply, seen) and queues its writes, without
// savepoints, and all go out with the commit, in one round trip for the
// batch. Their strict forms (and the guard of the rows' versions) fail
// where an op would be refused, which fails the whole transaction; the
// batch then runs again with its ops in turn, each in its savepoint.
type tx struct {
	conn *pgxpool.Conn
	msgs []store.Message // the outbox's messages of the batch's writes

	queued pgx.Batch // sent with the next statement
	blind  bool      // every op's writes queued, sent with the commit
	sp     savepoint // the op's savepoint, "op"
	failed error     // a queued statement's error

	scopes   []string                 // the batch's locked counters
	counters map[string]quota.Counter // as the ops before left them
	dirty    map[string]bool          // changed since written
	stale    bool                     // a write that is not a verification ran: read them again
	reading  bool                     // their reading is queued or on its way
	journal  []counterWas             // the op's changes, undone when it fails
	done     bool                     // committed
}

// savepoint is where the op's savepoint stands.
type savepoint int

const (
	spNone   savepoint = iota
	spQueued           // made (or released and made again) by queued statements
	spActive           // made on the server
)

type counterWas struct {
	scope string
	c     quota.Counter
	had   bool
}

// queue adds a statement to go out with the next one.
func (t *tx) queue(sql string, args ...any) *pgx.QueuedQuery {
	return t.queued.Queue(sql, args...)
}

// SendBatch sends the queued statements and then b's, in one round trip,
// and returns b's results.
func (t *tx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	n := t.queued.Len()
	if n == 0 {
		return t.conn.SendBatch(ctx, b)
	}
	all := t.queued
	t.queued = pgx.Batch{}
	all.QueuedQueries = append(all.QueuedQueries, b.QueuedQueries...)
	if t.sp == spQueued {
		t.sp = spActive
	}
	br := t.conn.SendBatch(ctx, &all)
	for _, q := range all.QueuedQueries[:n] {
		var err error
		if q.Fn != nil {
			err = q.Fn(br)
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			t.failed = err
			br.Close()
			return failedBatch{br, err}
		}
	}
	return br
}

// Exec, Query and QueryRow are pgx's, the queued statements sent first.
func (t *tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.queued.Len() == 0 {
		return t.conn.Exec(ctx, sql, args...)
	}
	var b pgx.Batch
	b.Queue(sql, args...)
	br := t.SendBatch(ctx, &b)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (t *tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.send(ctx); err != nil {
		return nil, err
	}
	return t.conn.Query(ctx, sql, args...)
}

// send sends what is queued, if anything.
func (t *tx) send(ctx context.Context) error {
	if t.queued.Len() == 0 {
		return nil
	}
	return t.SendBatch(ctx, &pgx.Batch{}).Close()
}

func (t *tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.queued.Len() == 0 {
		return t.conn.QueryRow(ctx, sql, args...)
	}
	var b pgx.Batch
	b.Queue(sql, args...)
	return batchRow{t.SendBatch(ctx, &b)}
}

// batchRow is the one row of a batch's one query.
type batchRow struct{ br pgx.BatchResults }

func (r batchRow) Scan(dest ...any) error {
	err := r.br.QueryRow().Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// failedBatch is the results of a batch none of whose statements ran.
type failedBatch struct {
	pgx.BatchResults // the one that failed, closed
	err              error
}

func (f failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, f.err }
func (f failedBatch) Query() (pgx.Rows, error)         { return nil, f.err }
func (f failedBatch) QueryRow() pgx.Row                { return failedRow{f.err} }
func (f failedBatch) Close() error                     { return f.err }

type failedRow struct{ err error }

func (r failedRow) Scan(...any) error { return r.err }

// lockCounters queues the lock of the batch's counters, in one order,
// reading them.
func (t *tx) lockCounters(scopes []string) {
	t.scopes = scopes
	t.readCounters("SELECT scope, period, used, total FROM counters WHERE scope = ANY($1) ORDER BY scope FOR UPDATE")
}

func (t *tx) readCounters(query string) {
	t.counters, t.stale, t.reading = make(map[string]quota.Counter, len(t.scopes)), false, true
	t.queue(query, t.scopes).Query(func(rows pgx.Rows) error {
		t.reading = false
		var scope string
		var c quota.Counter
		_, err := pgx.ForEachRow(rows, []any{&scope, &c.Period, &c.Used, &c.Total}, func() error {
			t.counters[scope] = c
			return nil
		})
		return err
	})
}

// fresh queues the counters' reading again, to go out with the op's
// first statement, when a write that is not a verification ran since they
// were read.
func (t *tx) fresh() {
	if t.stale {
		t.readCounters("SELECT scope, period, used, total FROM counters WHERE scope = ANY($1)")
	}
}

// counter is scope's counter as the batch's ops left it; zero for none.
// When their reading is queued, what is queued goes out first.
func (t *tx) counter(scope string) (quota.Counter, error) {
	if t.reading {
		if err := t.send(bg); err != nil {
			return quota.Counter{}, err
		}
	}
	return t.counters[scope], nil
}

// known reports whether the counters are read and current, so that
// counter sends nothing.
func (t *tx) known() bool { return !t.reading && !t.stale }

// usage is snap's usage by the batch's counters.
func (t *tx) usage(snap *store.Snapshot) (store.Usage, error) {
	sc, err := t.counter("s/" + snap.Service.ID)
	if err != nil {
		return store.Usage{}, err
	}
	bc, err := t.counter("b/" + snap.Branch.ID)
	return store.UsageAt(&snap.Service, snap.At, sc, bc), err
}

// charge sets scope's counter, to be written before the commit.
func (t *tx) charge(scope string, c quota.Counter) {
	old, had := t.counters[scope]
	t.journal = append(t.journal, counterWas{scope, old, had})
	t.counters[scope] = c
	if t.dirty == nil {
		t.dirty = map[string]bool{}
	}
	t.dirty[scope] = true
}

// writeCounters queues the write of the changed counters.
func (t *tx) writeCounters() {
	if len(t.dirty) == 0 {
		return
	}
	var scopes []string
	var period, used, total []int64
	for scope := range t.dirty {
		c := t.counters[scope]
		scopes, period, used, total = append(scopes, scope), append(period, c.Period), append(used, c.Used), append(total, c.Total)
	}
	t.queue(`INSERT INTO counters (scope, period, used, total) SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[])
		ON CONFLICT (scope) DO UPDATE SET period = excluded.period, used = excluded.used, total = excluded.total`, scopes, period, used, total)
	clear(t.dirty)
}

// beginOp queues the savepoint of the next op; a write that is not a
// verification has the counters' changes written before it.
func (t *tx) beginOp(verification bool) {
	t.journal = t.journal[:0]
	if t.blind {
		return
	}
	if !verification {
		if len(t.dirty) > 0 {
			t.endSavepoint()
			t.writeCounters()
		}
		t.stale = t.counters != nil
	}
	switch t.sp {
	case spActive:
		t.queue("RELEASE SAVEPOINT op")
		t.queue("SAVEPOINT op")
	case spNone:
		t.queue("SAVEPOINT op")
	}
	t.sp = spQueued // spQueued already: the op before sent nothing
}

// failOp undoes what the op did: its counters, and its statements when
// some went out.
func (t *tx) failOp() {
	for i := len(t.journal) - 1; i >= 0; i-- {
		if w := t.journal[i]; w.had {
			t.counters[w.scope] = w.c
		} else {
			delete(t.counters, w.scope)
		}
	}
	t.journal = t.journal[:0]
	if t.sp == spActive {
		t.queue("ROLLBACK TO SAVEPOINT op")
	}
}

// endSavepoint queues the release of the op's savepoint, so what follows
// runs in the transaction itself.
func (t *tx) endSavepoint() {
	if t.sp != spNone {
		t.queue("RELEASE SAVEPOINT op")
		t.sp = spNone
	}
}

// commit sends what is queued and the COMMIT.
func (t *tx) commit(ctx context.Context) error {
	t.endSavepoint()
	t.writeCounters()
	tag, err := t.Exec(ctx, "commit")
	if err == nil && tag.String() != "COMMIT" {
		err = pgx.ErrTxCommitRollback
	}
	t.done = err == nil
	return err
}

// release ends the transaction, rolled back unless committed, and gives
// the connection back to the pool; one whose rollback failed is closed.
func (t *tx) release() {
	if !t.done {
		if _, err := t.conn.Exec(context.Background(), "rollback"); err != nil {
			t.conn.Conn().Close(context.Background())
		}
	}
	t.conn.Release()
}
