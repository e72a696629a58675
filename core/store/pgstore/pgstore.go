// Package pgstore keeps core's state (store.Store) in PostgreSQL, shared by
// any number of core processes: what bbolt's store keeps in one file, with
// the same records, rules and suite (store/storetest).
//
// Writes go through a store.Committer, as bbolt's: the writes waiting at a
// moment share one transaction, in which one that fails leaves no trace and
// the others commit (tx: a batch of verifications runs blind, in two round
// trips, and again in turn, each write in a savepoint, when one is
// refused). A transaction first locks, in one order, the quota counters
// its verifications will charge, so verifications of one service decide
// one after another whichever core runs them, and two batches never wait
// on each other. A verification decides again on what its snapshot read,
// the rows' versions checked with its writes (seen). A COMMIT is never
// cancelled; one whose outcome is unknown (the connection lost meanwhile)
// is resolved by reading back the mark the transaction wrote.
package pgstore

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/slipverify/slipverify/core/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is core's state in PostgreSQL. It is safe for concurrent use, by
// any number of processes on one database.
type Store struct {
	pool  *pgxpool.Pool
	reads reads // the pool, for reads
	now   func() time.Time
	c     *store.Committer[*tx]
	// relay says whether this core relays the outbox (relay.go).
	relay     *relay
	seen      seenCache  // what verifications' snapshots read, for their Apply
	snapshots *snapshots // the verifications' snapshots, read together
	// The records snapshots decode, kept by their documents.
	services   decoded[store.Service]
	branches   decoded[store.Branch]
	conditions decoded[store.Conditions]
	counting   sync.Mutex // a recount, or a commit and the count of its messages

	writeFailures atomic.Int64
	// closing ends when Close begins: a COMMIT of unknown outcome is no
	// longer resolved (committed), so a store whose database went first
	// closes at once.
	closing     context.Context
	stopClosing context.CancelFunc
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at url (a PostgreSQL URL; several hosts
// with target_session_attrs=read-write find the primary), brings its
// schema up to this build's under a lock, so cores starting at once
// migrate it once, and starts the store. now is the store's clock.
func Open(ctx context.Context, url string, now func() time.Time, o store.Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("SLIP_STORE: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	s := &Store{pool: pool, reads: reads{pool}, now: now}
	s.closing, s.stopClosing = context.WithCancel(context.Background())
	waiting, err := s.waiting(ctx)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.snapshots = s.startSnapshots()
	s.c = store.StartCommitter[*tx]((*batches)(s), o, waiting)
	s.relay = s.startRelay(context.Background(), s.c.Outbox.Signal)
	return s, nil
}

// Migrate applies the migrations this build embeds that the database
// lacks, in order, holding a session lock meanwhile: a core that starts
// while another migrates waits for it, then finds nothing left to do.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, mustSub(migrations, "migrations"),
		goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// Close finishes the writes in hand, writes the emitted messages and
// closes the connections. A write in hand whose COMMIT's outcome is
// unknown is reported failed, not resolved.
func (s *Store) Close() error {
	s.stopClosing()
	if err := s.c.Stop(); err != nil {
		return err
	}
	s.relay.close()
	s.snapshots.close()
	s.pool.Close()
	return nil
}

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.now() }

// Ping reports whether the database answers.
func (s *Store) Ping() error { return s.pool.Ping(context.Background()) }

// Announce and Retract are store.Committer's.
func (s *Store) Announce() { s.c.Announce() }
func (s *Store) Retract()  { s.c.Retract() }

// Commits reports how many transactions the committer ran and how many
// writes they held.
func (s *Store) Commits() (commits, writes int64) { return s.c.Commits() }

// WriteFailures counts the transactions the store could not commit.
func (s *Store) WriteFailures() int64 { return s.writeFailures.Load() }

// Size is the size of the database in bytes (0 when it cannot be read).
func (s *Store) Size() int64 {
	var n int64
	s.pool.QueryRow(context.Background(), "SELECT pg_database_size(current_database())").Scan(&n)
	return n
}

// batches is the Store's side of its Committer.
type batches Store

// maxAttempts bounds how often a batch runs again after a conflict with
// another core's transaction (a deadlock, a row taken meanwhile).
const maxAttempts = 5

// RunBatch runs a batch in one transaction, each op in a savepoint: an op
// that fails is rolled back to it alone. A conflict with another
// transaction runs the whole batch again.
func (b *batches) RunBatch(batch []*store.Op[*tx], msgs []store.Message) error {
	s := (*Store)(b)
	blind := !slices.ContainsFunc(batch, func(o *store.Op[*tx]) bool { return len(o.Locks) == 0 })
	for attempt := 1; ; attempt++ {
		err := s.runBatch(batch, msgs, blind)
		if err == nil {
			return nil
		}
		if errors.Is(err, errInTurn) { // not an attempt: the blind run found something to read
			blind, attempt = false, attempt-1
		} else if !conflict(err) || attempt == maxAttempts {
			s.writeFailures.Add(1)
			if conflict(err) {
				err = store.WriteError{Err: err}
			}
			for _, o := range batch {
				if conflict(o.Err) {
					o.Err = nil // the batch's failure, not its own
				}
			}
			return err
		}
		for _, o := range batch {
			o.Err = nil
		}
	}
}

// errConflict is a write that found a row changed under it by another
// transaction: its batch runs again.
var errConflict = errors.New("pgstore: a row changed under the transaction")

// conflict reports whether err is a conflict with another transaction:
// running the batch again resolves it.
func conflict(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01", "23505": // serialization failure, deadlock, a key taken meanwhile
			return true
		}
	}
	return errors.Is(err, errConflict)
}

func (s *Store) runBatch(batch []*store.Op[*tx], msgs []store.Message, blind bool) error {
	ctx := context.Background()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return store.WriteError{Err: err}
	}
	t := &tx{conn: conn, blind: blind}
	defer t.release()
	t.queue("begin")
	var locks []string
	for _, o := range batch {
		locks = append(locks, o.Locks...)
	}
	if len(locks) > 0 { // read before the first op: a verification decides on them (Apply)
		slices.Sort(locks)
		t.lockCounters(slices.Compact(locks))
		if err := t.send(ctx); err != nil {
			return wrapped(err)
		}
	}
	// Each op in a savepoint of its own, made with its first statement.
	for _, o := range batch {
		t.beginOp(len(o.Locks) > 0)
		n := len(t.msgs)
		o.Err = o.Fn(t)
		if t.failed != nil {
			o.Err = nil // the batch's failure, not its own
			return wrapped(t.failed)
		}
		if o.Err == nil {
			continue
		}
		if conflict(o.Err) || errors.Is(o.Err, errInTurn) {
			return o.Err
		}
		t.msgs = t.msgs[:n]
		t.failOp()
	}
	t.msgs = append(t.msgs, msgs...)
	t.enqueue()
	mark := uuid.New()
	t.queue("INSERT INTO commits (id) VALUES ($1)", mark)
	// A count of the outbox (recount) comes before the commit or after
	// its messages are counted, never between: they are counted once.
	s.counting.Lock()
	defer s.counting.Unlock()
	if err := t.commit(ctx); err != nil {
		var pe *pgconn.PgError
		switch {
		case errors.As(err, &pe) && blind: // a write refused: each op on its own
			return errInTurn
		case errors.As(err, &pe) || !s.committed(mark): // refused, or not found committed
			return wrapped(err)
		}
	}
	s.c.Outbox.Added(int64(len(t.msgs)))
	return nil
}

// wrapped is err of a statement of the batch's transaction: a conflict as
// it is, anything else a failed write.
func wrapped(err error) error {
	if conflict(err) {
		return err
	}
	return store.WriteError{Err: err}
}

// resolveFor bounds how long a COMMIT of unknown outcome is resolved for:
// longer than a failover takes.
const resolveFor = 2 * time.Minute

// committed reports whether the transaction that wrote mark committed,
// reading it back on a new connection until the database answers (a
// COMMIT whose connection was lost may have committed, or a standby taken
// its place), until the store closes. Unresolved, it reports false: the
// caller is told the write failed, and a client tries again, which the
// duplicate registry makes safe.
func (s *Store) committed(mark uuid.UUID) bool {
	ctx, cancel := context.WithTimeout(s.closing, resolveFor)
	defer cancel()
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		var n int
		err := s.pool.QueryRow(ctx, "SELECT count(*) FROM commits WHERE id = $1", mark).Scan(&n)
		if err == nil {
			return n == 1
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
}

// enqueue queues the write of the transaction's messages to the outbox,
// numbered after every message of the transactions committed before it:
// the lock of outbox_next's row, held to the commit, orders them.
func (t *tx) enqueue() {
	if len(t.msgs) == 0 {
		return
	}
	topics, keys, values := make([]string, len(t.msgs)), make([][]byte, len(t.msgs)), make([][]byte, len(t.msgs))
	for i, m := range t.msgs {
		topics[i], keys[i], values[i] = m.Topic, []byte(m.Key), m.Value
		if values[i] == nil {
			values[i] = []byte{}
		}
	}
	t.queue(`WITH n AS (UPDATE outbox_next SET last = last + $4 RETURNING last)
		INSERT INTO outbox (seq, topic, key, value)
		SELECT n.last - $4 + m.i, m.t, m.k, m.v FROM n, unnest($1::text[], $2::bytea[], $3::bytea[]) WITH ORDINALITY AS m(t, k, v, i)`,
		topics, keys, values, len(t.msgs))
	t.queue("NOTIFY slip_outbox") // heard by the relaying core when the transaction commits
}

// write runs fn in a transaction shared with other writes (store.Committer).
func (s *Store) write(fn func(t *tx) error) error { return s.c.Write(fn, false) }

var bg = context.Background()

// getDoc reads the JSON of the one row query selects into v: ErrNotFound
// for none.
func getDoc(q querier, v any, query string, args ...any) error {
	var raw []byte
	if err := q.QueryRow(bg, query, args...).Scan(&raw); errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	} else if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

// docs reads the JSON of every row query selects, in order.
func docs[T any](q querier, query string, args ...any) ([]T, error) {
	rows, err := q.Query(bg, query, args...)
	if err != nil {
		return nil, err
	}
	var out []T
	var raw []byte
	_, err = pgx.ForEachRow(rows, []any{&raw}, func() error {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// querier is the pool or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func mustJSON(v any) []byte {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err) // records are plain data
	}
	return raw
}

func mustSub(f embed.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err) // the directory is embedded
	}
	return sub
}
