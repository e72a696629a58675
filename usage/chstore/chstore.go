// Package chstore is the usage ledger and the audit log in ClickHouse: the
// connection, the columnar batches of usage events and audit records,
// inserts, and the finance queries that report and reconcile. It speaks
// the native protocol (clickhouse-go/v2), the one that works on Debian's
// ClickHouse 18.16 and on current releases.
package chstore

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slipverify/slipverify/usage/schema"
)

// Options say where the ledger is.
type Options struct {
	Addrs    []string
	Database string // a plain identifier, checked by the caller's config
	// Cluster names the ClickHouse cluster (one shard) that holds the
	// ledger replicated (empty: the single server Addrs name). A batch is
	// written to the local tables of one replica, the first of Addrs that
	// answers.
	Cluster            string
	Username, Password string
	TLS                *tls.Config   // nil: plaintext
	DialTimeout        time.Duration // zero: 5 s
}

// Store is a connection pool to the ledger's database.
type Store struct {
	conn    driver.Conn
	db      string
	cluster string
	// dedup holds the settings of an insert on a cluster, once known.
	dedup atomic.Pointer[clickhouse.Settings]
}

// Open connects to ClickHouse. It does not wait for the server: see Ping
// and Migrate.
func Open(o Options) (*Store, error) {
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:         o.Addrs,
		Auth:         clickhouse.Auth{Database: "default", Username: o.Username, Password: o.Password},
		TLS:          o.TLS,
		DialTimeout:  o.DialTimeout,
		ReadTimeout:  time.Minute,
		MaxOpenConns: 8,
		Compression:  &clickhouse.Compression{Method: clickhouse.CompressionLZ4},
	})
	if err != nil {
		return nil, fmt.Errorf("clickhouse: %w", err)
	}
	return &Store{conn: conn, db: o.Database, cluster: o.Cluster}, nil
}

// Close closes the pool.
func (s *Store) Close() error { return s.conn.Close() }

// insertContext returns ctx with the settings of an insert into a table
// that materialized views read (usage_events, by the daily rollup).
//
// On a cluster a replicated table skips a block it already holds, and on a
// server without deduplicate_blocks_in_dependent_materialized_views (18.16)
// it then skips the table's views too: an attempt that stored the events
// but failed in the view (ZooKeeper lost between the two) would leave the
// rollup without them for good once its retry was skipped. There the
// ledger inserts with insert_deduplicate off, a retry stores its rows
// again, and they count once (exact distinct event ids, as on one server).
// A server with the setting takes both on: the retry is stored once, in
// the table and in each view.
func (s *Store) insertContext(ctx context.Context) (context.Context, error) {
	if s.cluster == "" {
		return ctx, nil
	}
	set := s.dedup.Load()
	if set == nil {
		var n uint64
		err := s.conn.QueryRow(ctx, "SELECT count() FROM system.settings WHERE name = 'deduplicate_blocks_in_dependent_materialized_views'").Scan(&n)
		if err != nil {
			return nil, fmt.Errorf("clickhouse: read settings: %w", err)
		}
		set = &clickhouse.Settings{"insert_deduplicate": 0}
		if n > 0 {
			set = &clickhouse.Settings{"insert_deduplicate": 1, "deduplicate_blocks_in_dependent_materialized_views": 1}
		}
		s.dedup.Store(set)
	}
	return clickhouse.Context(ctx, clickhouse.WithSettings(*set)), nil
}

// stamp is a batch's insert time, the value of its inserted_at column: set
// at its first insert and kept for every retry, so that a retried batch is
// the same block (the server's now() would differ from one second to the
// next).
type stamp struct {
	at  time.Time
	col []time.Time
}

// column returns inserted_at for n rows.
func (s *stamp) column(n int) []time.Time {
	if s.at.IsZero() {
		s.at = time.Now().UTC().Truncate(time.Second)
	}
	if len(s.col) != n || (n > 0 && !s.col[0].Equal(s.at)) {
		s.col = s.col[:0]
		for range n {
			s.col = append(s.col, s.at)
		}
	}
	return s.col
}

// reset forgets the time, for the next batch.
func (s *stamp) reset() { s.at = time.Time{} }

// Ping checks that the server answers.
func (s *Store) Ping(ctx context.Context) error { return s.conn.Ping(ctx) }

// Migrate creates and migrates the ledger's schema.
func (s *Store) Migrate(ctx context.Context) error {
	return schema.Migrate(ctx, s.conn, s.db, s.cluster)
}

// into is the table rows of table are inserted into (schema.WriteTable).
func (s *Store) into(table string) string { return schema.WriteTable(s.db, s.cluster, table) }

// Database is the ledger's database.
func (s *Store) Database() string { return s.db }

// Conn is the underlying connection, for tests and ad-hoc queries.
func (s *Store) Conn() driver.Conn { return s.conn }

// Insert writes rows to usage_events in one INSERT (one block).
// Inserting the same rows again is harmless: every query counts distinct
// event ids. On a cluster whose servers deduplicate blocks for views too,
// the replicated table stores the same block once (rows carries its insert
// time from its first attempt, so a retry sends the same bytes); see
// insertContext.
func (s *Store) Insert(ctx context.Context, rows *Rows) error {
	if rows.Len() == 0 {
		return nil
	}
	ctx, err := s.insertContext(ctx)
	if err != nil {
		return err
	}
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+s.into("usage_events")+" (event_id, occurred_at, service_id, branch_id, kind, api, mode, outcome, billable, job_id, amount, sending_bank, inserted_at)")
	if err != nil {
		return fmt.Errorf("clickhouse: prepare insert: %w", err)
	}
	defer b.Abort() // a no-op after Send
	for i, col := range []any{rows.EventID, rows.OccurredAt, rows.ServiceID, rows.BranchID, rows.Kind, rows.API, rows.Mode, rows.Outcome, rows.Billable, rows.JobID,
		rows.Amount, rows.SendingBank, rows.stamp.column(rows.Len())} {
		if err := b.Column(i).Append(col); err != nil {
			return fmt.Errorf("clickhouse: append column %d: %w", i, err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("clickhouse: insert %d rows: %w", rows.Len(), err)
	}
	return nil
}

// Reject is a message of slip.usage or slip.audit that is not a valid
// usage event or audit record.
type Reject struct {
	Partition int32
	Offset    int64
	Key       string
	Value     string
	Err       string
}

// InsertRejects writes rejected messages of slip.usage to usage_rejects.
func (s *Store) InsertRejects(ctx context.Context, rejects []Reject) error {
	return s.insertRejects(ctx, "usage_rejects", rejects)
}

// insertRejects writes rejected messages to table, usage_rejects or
// audit_rejects (the same columns).
func (s *Store) insertRejects(ctx context.Context, table string, rejects []Reject) error {
	if len(rejects) == 0 {
		return nil
	}
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+s.into(table)+" (partition, offset, key, value, error)")
	if err != nil {
		return fmt.Errorf("clickhouse: prepare rejects: %w", err)
	}
	defer b.Abort()
	for _, r := range rejects {
		if err := b.Append(r.Partition, r.Offset, r.Key, r.Value, r.Err); err != nil {
			return fmt.Errorf("clickhouse: append reject: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("clickhouse: insert %d rejects: %w", len(rejects), err)
	}
	return nil
}

// Anchor is a service's billing-cycle anchor day and when it took effect
// (zero: it always was).
type Anchor struct {
	Day   int
	Since time.Time
}

// SetAnchors records each service's billing-cycle anchor day from the
// instant it took effect, so the periods of billable_by_period follow
// core's: a moved anchor cuts the periods after it, never those before.
func (s *Store) SetAnchors(ctx context.Context, anchors map[string]Anchor, at time.Time) error {
	if len(anchors) == 0 {
		return nil
	}
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+s.into("service_anchor_history")+" (service_id, anchor_day, effective_from, updated_at)")
	if err != nil {
		return fmt.Errorf("clickhouse: prepare anchors: %w", err)
	}
	defer b.Abort()
	for id, a := range anchors {
		since := a.Since
		if since.IsZero() {
			since = time.Unix(0, 0)
		}
		if err := b.Append(id, uint8(a.Day), since, at); err != nil {
			return fmt.Errorf("clickhouse: append anchor: %w", err)
		}
	}
	return b.Send()
}
