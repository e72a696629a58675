package chstore

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slipverify/slipverify/usage/schema"
)

// MoveToCluster moves a ledger made on one server into the replicated
// tables of the cluster s names, on the server s is connected to, which
// must be the one that held it and a replica of the cluster. The old
// tables are renamed into database <db>_single (their views, which hold
// no data, are dropped) and migrated to the last version there, the
// cluster's schema is created, and each old
// partition is attached to the replicated table (which sends it to the
// other replicas) and then dropped from the old table. Run again after an
// interruption it goes on where it stopped; a partition attached but not
// yet dropped is attached again, and its rows count once (every finance
// number counts distinct event ids). The empty old database is dropped at
// the end. It writes what it does to w.
//
// The usage consumers should be stopped meanwhile (their events wait in
// Kafka), so that the old tables take no more rows.
func (s *Store) MoveToCluster(ctx context.Context, w io.Writer) error {
	if s.cluster == "" {
		return fmt.Errorf("move: SLIP_CLICKHOUSE_CLUSTER is empty: name the cluster to move the ledger to")
	}
	old := s.db + "_single"
	engines, err := s.engines(ctx, s.db)
	if err != nil {
		return err
	}
	if e, ok := engines["usage_events"]; ok && e != "Distributed" {
		// A ledger of one server: set it aside under the old database.
		if err := s.conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+old); err != nil {
			return fmt.Errorf("move: %w", err)
		}
		var renames []string
		for name, engine := range engines {
			switch {
			case engine == "View" || engine == "MaterializedView":
				if err := s.conn.Exec(ctx, "DROP TABLE "+s.db+"."+name); err != nil {
					return fmt.Errorf("move: drop view %s: %w", name, err)
				}
			case slices.Contains(schema.Tables(), name):
				renames = append(renames, fmt.Sprintf("%s.%s TO %s.%s", s.db, name, old, name))
			}
		}
		slices.Sort(renames)
		if err := s.conn.Exec(ctx, "RENAME TABLE "+strings.Join(renames, ", ")); err != nil {
			return fmt.Errorf("move: set the single-server tables aside in %s: %w", old, err)
		}
		fmt.Fprintf(w, "moved the single-server ledger's tables to %s\n", old)
	}
	if err := s.Migrate(ctx); err != nil {
		return err
	}
	fmt.Fprintf(w, "cluster schema ready on cluster %s\n", s.cluster)
	oldTables, err := s.engines(ctx, old)
	if err != nil {
		return err
	}
	if len(oldTables) > 0 {
		// The old tables at the cluster's version, so that their
		// partitions fit the replicated tables (a ledger last migrated by
		// an older usage, or set aside by one).
		if err := schema.Migrate(ctx, s.conn, old, ""); err != nil {
			return fmt.Errorf("move: migrate %s: %w", old, err)
		}
	}
	for _, t := range schema.Tables() {
		if _, ok := oldTables[t]; !ok || t == "schema_migrations" {
			continue // the cluster keeps its own record of migrations
		}
		parts, err := query(ctx, s, "partitions", "SELECT DISTINCT partition_id FROM system.parts WHERE database = ? AND table = ? AND active ORDER BY partition_id",
			[]any{old, t}, func(rows driver.Rows, id *string) error { return rows.Scan(id) })
		if err != nil {
			return err
		}
		for _, p := range parts {
			// Merged into one part first: the replicated table refuses
			// two identical parts (a batch inserted twice) in one attach.
			if err := s.conn.Exec(ctx, fmt.Sprintf("OPTIMIZE TABLE %s.%s PARTITION ID '%s' FINAL", old, t, p)); err != nil {
				return fmt.Errorf("move: merge %s partition %s: %w", t, p, err)
			}
			if err := s.conn.Exec(ctx, fmt.Sprintf("ALTER TABLE %s ATTACH PARTITION ID '%s' FROM %s.%s", s.into(t), p, old, t)); err != nil {
				return fmt.Errorf("move: attach %s partition %s: %w", t, p, err)
			}
			if err := s.conn.Exec(ctx, fmt.Sprintf("ALTER TABLE %s.%s DROP PARTITION ID '%s'", old, t, p)); err != nil {
				return fmt.Errorf("move: drop %s partition %s from %s: %w", t, p, old, err)
			}
		}
		fmt.Fprintf(w, "%s: %d partitions moved\n", t, len(parts))
	}
	if len(oldTables) > 0 {
		if err := s.conn.Exec(ctx, "DROP DATABASE IF EXISTS "+old); err != nil {
			return fmt.Errorf("move: drop %s: %w", old, err)
		}
		fmt.Fprintf(w, "dropped %s (empty)\n", old)
	}
	return nil
}

// engines returns the engine of each table of db.
func (s *Store) engines(ctx context.Context, db string) (map[string]string, error) {
	type table struct{ name, engine string }
	ts, err := query(ctx, s, "tables", "SELECT name, engine FROM system.tables WHERE database = ?", []any{db},
		func(rows driver.Rows, t *table) error { return rows.Scan(&t.name, &t.engine) })
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, t := range ts {
		out[t.name] = t.engine
	}
	return out, nil
}
