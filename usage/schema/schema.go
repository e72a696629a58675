// Package schema creates and migrates the usage ledger in ClickHouse. Each
// migration is a numbered list of idempotent statements (IF NOT EXISTS), so
// two usage processes starting together, or one killed halfway through a
// migration, leave the same schema. Applied versions are recorded in
// schema_migrations.
//
// One definition serves one server and a cluster (SLIP_CLICKHOUSE_CLUSTER):
// on a cluster every step runs ON CLUSTER, and each ledger table is a
// replicated table on every replica behind a Distributed table of its name
// (see Statement).
//
// The statements run on Debian's ClickHouse 18.16 and on current releases
// alike (see the README's usage section for the design).
package schema

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Migration is one schema version.
type Migration struct {
	Version    uint32
	Name       string
	Statements []Statement
}

// Migrations lists every version in order. Never change what a released
// one does: add the next.
var Migrations = []Migration{
	{1, "usage events, daily rollup, service anchors, rejects, finance views", []Statement{
		usageEvents,
		// usage_daily holds, per Bangkok day, service, branch, kind, API
		// version and mode, the set of event ids (attempts) and of
		// billable event ids, as exact-distinct states: merging them counts
		// each event once however many times its row was inserted.
		table("usage_daily", "AggregatingMergeTree", `(
			day        Date,
			service_id String,
			branch_id  String,
			kind       Enum8('bank' = 1, 'wallet' = 2),
			api        Enum8('v1' = 1, 'v2' = 2),
			mode       Enum8('sync' = 1, 'async' = 2),
			attempts   AggregateFunction(uniqExact, String),
			billable   AggregateFunction(uniqExactIf, String, UInt8)
		)`, `PARTITION BY toYYYYMM(day)
		ORDER BY (service_id, branch_id, day, kind, api, mode)`),
		sql(`CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.usage_daily_mv{cluster} TO {db}.usage_daily{local} AS
		SELECT toDate(occurred_at, 'Asia/Bangkok') AS day, service_id, branch_id, kind, api, mode,
			uniqExactState(event_id) AS attempts, uniqExactIfState(event_id, billable) AS billable
		FROM {db}.usage_events{local}
		GROUP BY day, service_id, branch_id, kind, api, mode`),
		// service_anchors holds each service's billing-cycle anchor day as
		// core last reported it; a service not listed bills from day 1.
		table("service_anchors", "ReplacingMergeTree(updated_at)", `(
			service_id String,
			anchor_day UInt8,
			updated_at DateTime
		)`, `ORDER BY service_id`),
		// usage_rejects keeps messages of slip.usage that are not valid
		// usage events, for an operator to look at; they count nowhere.
		table("usage_rejects", "MergeTree", `(
			received_at DateTime DEFAULT now(),
			partition   Int32,
			offset      Int64,
			key         String,
			value       String,
			error       String
		)`, `PARTITION BY toYYYYMM(received_at)
		ORDER BY (received_at, partition, offset)`),
		// billable_daily: billable verifications (and all attempts) per
		// service, branch, kind, API version and Bangkok day.
		sql(`CREATE VIEW IF NOT EXISTS {db}.billable_daily{cluster} AS
		SELECT day, service_id, branch_id, kind, api,
			uniqExactIfMerge(billable) AS billable, uniqExactMerge(attempts) AS attempts
		FROM {db}.usage_daily
		GROUP BY day, service_id, branch_id, kind, api`),
		// billable_by_period: billable verifications per service, branch
		// and billing period. A period starts at midnight Bangkok time on
		// the service's anchor day, or on the last day of a month shorter
		// than it (core/quota's rule); period_start is that day.
		sql(`CREATE VIEW IF NOT EXISTS {db}.billable_by_period{cluster} AS
		SELECT service_id, branch_id, period_start,
			uniqExactIfMerge(billable) AS billable, uniqExactMerge(attempts) AS attempts
		FROM (
			SELECT service_id, branch_id, billable, attempts,
				toStartOfMonth(day) AS m0, addMonths(m0, -1) AS m1,
				if(anchor_day = 0, 1, anchor_day) AS a,
				addDays(m0, least(a, toDayOfMonth(addDays(addMonths(m0, 1), -1))) - 1) AS this_start,
				addDays(m1, least(a, toDayOfMonth(addDays(m0, -1))) - 1) AS prev_start,
				if(day >= this_start, this_start, prev_start) AS period_start
			FROM {db}.usage_daily
			ANY LEFT JOIN (SELECT service_id, argMax(anchor_day, updated_at) AS anchor_day
				FROM {db}.service_anchors GROUP BY service_id) USING service_id
		)
		GROUP BY service_id, branch_id, period_start`),
	}},
	{2, "audit log: audit events and their rejects", []Statement{
		// audit_events keeps core's audit records (slip.audit) for long
		// retention, one row per delivery, as usage_events does: a
		// redelivered record writes its row again, ReplacingMergeTree
		// folds the rows of one id (the sort key ends in it; a record's
		// service and time never change) in background merges, and
		// readers use FINAL (or LIMIT 1 BY id) so a record counts once.
		// 18.16 has no DateTime64: at is the second and at_ms the
		// milliseconds within it. before and after are the changed record
		// as compact JSON, 'null' for a creation or a deletion.
		table("audit_events", "ReplacingMergeTree", `(
			id          String,
			at          DateTime,
			at_ms       UInt16,
			actor_type  String,
			actor_id    String,
			actor_name  String,
			request_id  String,
			action      String,
			service_id  String,
			target_type String,
			target_id   String,
			before      String,
			after       String,
			reason      String,
			inserted_at DateTime DEFAULT now()
		)`, `PARTITION BY toYYYYMM(at)
		ORDER BY (service_id, at, id)`),
		// audit_rejects keeps messages of slip.audit that are not valid
		// audit records, for an operator to look at.
		table("audit_rejects", "MergeTree", `(
			received_at DateTime DEFAULT now(),
			partition   Int32,
			offset      Int64,
			key         String,
			value       String,
			error       String
		)`, `PARTITION BY toYYYYMM(received_at)
		ORDER BY (received_at, partition, offset)`),
	}},
	{3, "billing anchors from the instant each took effect", []Statement{
		// service_anchor_history holds each anchor day a service had and
		// when it took effect (core's anchorSince; 1970 for always), one
		// row per (service, effective_from) once merged (FINAL).
		table("service_anchor_history", "ReplacingMergeTree(updated_at)", `(
			service_id     String,
			anchor_day     UInt8,
			effective_from DateTime,
			updated_at     DateTime
		)`, `ORDER BY (service_id, effective_from)`),
		// The anchors known so far, as in force from the start (a rerun
		// writes the same rows again, folded by the engine).
		sql(`INSERT INTO {db}.service_anchor_history{local}
		SELECT service_id, argMax(anchor_day, updated_at), toDateTime(0), max(updated_at)
		FROM {db}.service_anchors GROUP BY service_id`),
		sql(`DROP TABLE IF EXISTS {db}.billable_by_period{cluster}`),
		// billable_by_period, as in migration 1, but each day's period is
		// cut by the anchor in force that day, and never starts before that
		// anchor took effect: the first period under a moved anchor runs
		// from the last one's end to the new anchor day (core's
		// store.Service.PeriodStart), and the periods before it keep
		// theirs. A service with no anchor recorded bills from day 1.
		sql(`CREATE VIEW IF NOT EXISTS {db}.billable_by_period{cluster} AS
		SELECT service_id, branch_id, period_start,
			uniqExactIfMerge(billable) AS billable, uniqExactMerge(attempts) AS attempts
		FROM (
			SELECT service_id, branch_id, billable, attempts, period_start
			FROM {db}.usage_daily
			ANY LEFT JOIN (
				SELECT service_id, day,
					toStartOfMonth(day) AS m0, addMonths(m0, -1) AS m1,
					if(a = 0, 1, a) AS an,
					addDays(m0, least(an, toDayOfMonth(addDays(addMonths(m0, 1), -1))) - 1) AS this_start,
					addDays(m1, least(an, toDayOfMonth(addDays(m0, -1))) - 1) AS prev_start,
					greatest(if(day >= this_start, this_start, prev_start), since) AS period_start
				FROM (
					SELECT service_id, day, argMax(anchor_day, effective_from) AS a, max(effective_from) AS since
					FROM (
						SELECT service_id, day, anchor_day, effective_from
						FROM (SELECT DISTINCT service_id, day FROM {db}.usage_daily)
						ALL LEFT JOIN (SELECT service_id, anchor_day, toDate(effective_from, 'Asia/Bangkok') AS effective_from
							FROM {db}.service_anchor_history FINAL) USING service_id
						WHERE effective_from <= day
					)
					GROUP BY service_id, day
				)
			) USING service_id, day
		)
		GROUP BY service_id, branch_id, period_start`),
	}},
	{4, "amount and sending bank of billable events; THB per day", []Statement{
		// A billable event's amount in satang and its sending bank's code
		// (api.UsageEvent); every other event, and every row from before,
		// reads 0 and ''.
		addColumns(usageEvents, "amount Int64 DEFAULT 0", "sending_bank String DEFAULT ''"),
		// thb_daily: the THB of the billable verifications per service,
		// branch and Bangkok day, each event once however many of its rows
		// were inserted (grouped by event_id: no aggregate state of 18.16
		// sums an amount once per distinct event, so it reads the ledger,
		// not the rollup). billable counts them, without_amount those
		// written before events carried an amount.
		sql(`CREATE VIEW IF NOT EXISTS {db}.thb_daily{cluster} AS
		SELECT day, service_id, branch_id, count() AS billable, sum(amount) AS satang,
			toDecimal64(satang, 2) / 100 AS thb, countIf(amount = 0) AS without_amount
		FROM (
			SELECT service_id, branch_id, event_id, toDate(any(occurred_at), 'Asia/Bangkok') AS day, any(amount) AS amount
			FROM {db}.usage_events
			WHERE billable = 1
			GROUP BY service_id, branch_id, event_id
		)
		GROUP BY day, service_id, branch_id`),
	}},
}

// usageEvents (migration 1; migration 4 adds columns) is the ledger: one
// row per delivered event. A retried batch writes its rows again;
// ReplacingMergeTree folds rows of one event_id (the sort key ends in it)
// in the background, and every finance query counts distinct event_ids (or
// reads FINAL), so a retry never counts twice.
var usageEvents = table("usage_events", "ReplacingMergeTree", `(
	event_id    String,
	occurred_at DateTime,
	service_id  String,
	branch_id   String,
	kind        Enum8('bank' = 1, 'wallet' = 2),
	api         Enum8('v1' = 1, 'v2' = 2),
	mode        Enum8('sync' = 1, 'async' = 2),
	outcome     String,
	billable    UInt8,
	job_id      String,
	inserted_at DateTime DEFAULT now()
)`, `PARTITION BY toYYYYMM(occurred_at)
ORDER BY (service_id, branch_id, event_id)`)

// schemaMigrations records the applied versions.
var schemaMigrations = table("schema_migrations", "MergeTree",
	`(version UInt32, name String, applied_at DateTime DEFAULT now())`, `ORDER BY version`)

// Migrate creates the database and applies every migration not yet
// recorded, in order. cluster names a ClickHouse cluster of one shard
// (empty: the single server conn talks to); see Statement for what each
// step becomes there. Once every migration is recorded it runs no DDL, so
// a usage process starts while a replica is away.
func Migrate(ctx context.Context, conn driver.Conn, db, cluster string) error {
	m := mode{db: db, cluster: cluster}
	if cluster != "" {
		if err := oneShard(ctx, conn, cluster); err != nil {
			return err
		}
	}
	var exists uint8
	if err := conn.QueryRow(ctx, "EXISTS TABLE "+db+".schema_migrations").Scan(&exists); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if exists == 0 {
		for _, st := range []Statement{sql("CREATE DATABASE IF NOT EXISTS {db}{cluster}"), schemaMigrations} {
			for _, q := range st.render(m) {
				if err := conn.Exec(ctx, q); err != nil {
					return fmt.Errorf("schema: %w", err)
				}
			}
		}
	}
	current, err := Version(ctx, conn, db)
	if err != nil {
		return err
	}
	for _, mg := range Migrations {
		if mg.Version <= current {
			continue
		}
		for i, st := range mg.Statements {
			for _, q := range st.render(m) {
				if err := conn.Exec(ctx, q); err != nil && !(st.alter != "" && columnExists(err)) {
					return fmt.Errorf("schema: migration %d (%s), statement %d: %w", mg.Version, mg.Name, i+1, err)
				}
			}
		}
		if err := record(ctx, conn, m, mg); err != nil {
			return fmt.Errorf("schema: record migration %d: %w", mg.Version, err)
		}
	}
	return nil
}

// oneShard checks that cluster is known to the server and has one shard:
// a usage process writes a batch to the replica it reaches, and a retry
// of it must meet the same replicated table to be stored once.
func oneShard(ctx context.Context, conn driver.Conn, cluster string) error {
	var shards, replicas uint64
	err := conn.QueryRow(ctx, "SELECT uniqExact(shard_num), count() FROM system.clusters WHERE cluster = ?", cluster).Scan(&shards, &replicas)
	switch {
	case err != nil:
		return fmt.Errorf("schema: read cluster %s: %w", cluster, err)
	case replicas == 0:
		return fmt.Errorf("schema: SLIP_CLICKHOUSE_CLUSTER: the server knows no cluster %q (remote_servers)", cluster)
	case shards != 1:
		return fmt.Errorf("schema: SLIP_CLICKHOUSE_CLUSTER: cluster %q has %d shards; the ledger needs a cluster of one shard (as many replicas as you like)", cluster, shards)
	}
	return nil
}

// record notes m as applied. Inserts go through a batch: 18.16 cannot take
// an INSERT with client-bound values as a plain query.
func record(ctx context.Context, conn driver.Conn, m mode, mg Migration) error {
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+WriteTable(m.db, m.cluster, "schema_migrations")+" (version, name)")
	if err != nil {
		return err
	}
	if err := b.Append(mg.Version, mg.Name); err != nil {
		b.Abort()
		return err
	}
	return b.Send()
}

// Version returns the highest applied migration, 0 for none.
func Version(ctx context.Context, conn driver.Conn, db string) (uint32, error) {
	var v uint32
	if err := conn.QueryRow(ctx, "SELECT max(version) FROM "+db+".schema_migrations").Scan(&v); err != nil {
		return 0, fmt.Errorf("schema: read version: %w", err)
	}
	return v, nil
}

// Statement is one idempotent step of a migration: plain SQL, or a ledger
// table.
//
// On one server SQL runs as it is, with {db} the database and {cluster}
// and {local} empty, and a table is created with its engine.
//
// On a cluster every step runs ON CLUSTER ({cluster}), so each replica
// gets it, now or when it comes back. A table becomes two: table_local
// (what {local} appends), the Replicated version of its engine, with its
// path in ZooKeeper from the replicas' {shard} macro and its replica name
// from {replica}; and, under the table's own name, a Distributed table over
// table_local. Writers insert into one replica's table_local (WriteTable),
// where a block inserted again is stored once; materialized views read
// and fill the local tables on every replica; finance's views, reports and
// reconciliation read the Distributed tables, which answer while one
// replica is away.
type Statement struct {
	sql string
	// For a table: its name, engine (with its arguments) and definition
	// (columns, then what follows the engine).
	table, engine, columns, tail string
	// For columns added to a ledger table: its name, each column's
	// definition, and every column it then has.
	alter string
	add   []string
	all   string
}

// sql is a step of plain SQL.
func sql(q string) Statement { return Statement{sql: q} }

// table is the step that creates a ledger table.
func table(name, engine, columns, tail string) Statement {
	return Statement{table: name, engine: engine, columns: columns, tail: tail}
}

// addColumns is the step that adds columns (each "name type DEFAULT
// value") to the ledger table t, made by an earlier step.
//
// On one server it is an ALTER per column. On a cluster the ALTER of
// table_local runs ON CLUSTER (one replica runs it, ZooKeeper takes it to
// the others), and the Distributed table, which ClickHouse cannot ALTER
// there when the cluster's shard is replicated, is made again ON CLUSTER
// with every column named, so a replica that was away and recreates it
// before its table_local has the new columns still gets them all. Nothing
// writes through a Distributed table (WriteTable), so it holds no data to
// lose.
//
// 18.16 has no ADD COLUMN IF NOT EXISTS: Migrate takes the server's "column
// already exists" as this step done (a migration run again, or by two
// processes at once).
func addColumns(t Statement, cols ...string) Statement {
	before := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(t.columns), ")"))
	all := before + ",\n\t" + strings.Join(cols, ",\n\t") + "\n)"
	return Statement{alter: t.table, add: cols, all: all}
}

// columnExists reports whether err is the server's refusal to add a column
// a table already has, on one server or from a replica of ON CLUSTER.
func columnExists(err error) bool {
	var ex *clickhouse.Exception
	return errors.As(err, &ex) && ex.Code == 44 && strings.Contains(ex.Message, "column with this name already exists")
}

// mode is where a migration runs: the database, and the cluster (empty:
// one server).
type mode struct{ db, cluster string }

// render returns the statements st runs in m.
func (st Statement) render(m mode) []string {
	vars := strings.NewReplacer("{db}", m.db, "{cluster}", "", "{local}", "")
	if m.cluster != "" {
		vars = strings.NewReplacer("{db}", m.db, "{cluster}", " ON CLUSTER "+m.cluster, "{local}", localSuffix)
	}
	if st.alter != "" {
		var out []string
		for _, c := range st.add {
			out = append(out, fmt.Sprintf("ALTER TABLE %s%s ADD COLUMN %s", WriteTable(m.db, m.cluster, st.alter), vars.Replace("{cluster}"), c))
		}
		if m.cluster != "" {
			name := m.db + "." + st.alter
			out = append(out, fmt.Sprintf("DROP TABLE IF EXISTS %s ON CLUSTER %s", name, m.cluster),
				fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s ON CLUSTER %s %s ENGINE = Distributed(%s, %s, %s)", name, m.cluster, st.all, m.cluster, m.db, st.alter+localSuffix))
		}
		return out
	}
	if st.table == "" {
		return []string{vars.Replace(st.sql)}
	}
	name := m.db + "." + st.table
	if m.cluster == "" {
		return []string{fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s %s ENGINE = %s %s", name, st.columns, st.engine, st.tail)}
	}
	local := st.table + localSuffix
	engine, args, _ := strings.Cut(strings.TrimSuffix(st.engine, ")"), "(")
	replicated := fmt.Sprintf("Replicated%s('/clickhouse/tables/{shard}/%s/%s', '{replica}'", engine, m.db, local)
	if args != "" {
		replicated += ", " + args
	}
	return []string{
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s ON CLUSTER %s %s ENGINE = %s) %s", m.db, local, m.cluster, st.columns, replicated, st.tail),
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s ON CLUSTER %s AS %s.%s ENGINE = Distributed(%s, %s, %s)", name, m.cluster, m.db, local, m.cluster, m.db, local),
	}
}

// localSuffix names a ledger table's replicated table on a cluster.
const localSuffix = "_local"

// WriteTable is the table (database.table) that writers insert table's
// rows into: the table itself on one server, its replicated table on the
// replica a writer is connected to on a cluster.
func WriteTable(db, cluster, table string) string {
	if cluster == "" {
		return db + "." + table
	}
	return db + "." + table + localSuffix
}

// Tables are the ledger's tables that hold data (not views), in the order
// they were introduced, schema_migrations first.
func Tables() []string {
	out := []string{schemaMigrations.table}
	for _, mg := range Migrations {
		for _, st := range mg.Statements {
			if st.table != "" {
				out = append(out, st.table)
			}
		}
	}
	return out
}
