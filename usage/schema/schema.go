// Package schema creates and migrates the usage ledger in ClickHouse. Each
// migration is a numbered list of idempotent statements (IF NOT EXISTS), so
// two usage processes starting together, or one killed halfway through a
// migration, leave the same schema. Applied versions are recorded in
// schema_migrations.
//
// The statements run on Debian's ClickHouse 18.16 and on current releases
// alike (see the README's usage section for the design).
package schema

import (
	"context"
	"fmt"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Migration is one schema version.
type Migration struct {
	Version    uint32
	Name       string
	Statements []string // {db} stands for the database
}

// Migrations lists every version in order. Never edit a released one: add
// the next.
var Migrations = []Migration{
	{1, "usage events, daily rollup, service anchors, rejects, finance views", []string{
		// usage_events is the ledger: one row per delivered event. A
		// retried batch writes its rows again; ReplacingMergeTree folds
		// rows of one event_id (the sort key ends in it) in the
		// background, and every finance query counts distinct event_ids
		// (or reads FINAL), so a retry never counts twice.
		`CREATE TABLE IF NOT EXISTS {db}.usage_events (
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
		) ENGINE = ReplacingMergeTree
		PARTITION BY toYYYYMM(occurred_at)
		ORDER BY (service_id, branch_id, event_id)`,
		// usage_daily holds, per Bangkok day, service, branch, kind, API
		// version and mode, the set of event ids (attempts) and of
		// billable event ids, as exact-distinct states: merging them counts
		// each event once however many times its row was inserted.
		`CREATE TABLE IF NOT EXISTS {db}.usage_daily (
			day        Date,
			service_id String,
			branch_id  String,
			kind       Enum8('bank' = 1, 'wallet' = 2),
			api        Enum8('v1' = 1, 'v2' = 2),
			mode       Enum8('sync' = 1, 'async' = 2),
			attempts   AggregateFunction(uniqExact, String),
			billable   AggregateFunction(uniqExactIf, String, UInt8)
		) ENGINE = AggregatingMergeTree
		PARTITION BY toYYYYMM(day)
		ORDER BY (service_id, branch_id, day, kind, api, mode)`,
		`CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.usage_daily_mv TO {db}.usage_daily AS
		SELECT toDate(occurred_at, 'Asia/Bangkok') AS day, service_id, branch_id, kind, api, mode,
			uniqExactState(event_id) AS attempts, uniqExactIfState(event_id, billable) AS billable
		FROM {db}.usage_events
		GROUP BY day, service_id, branch_id, kind, api, mode`,
		// service_anchors holds each service's billing-cycle anchor day as
		// core last reported it; a service not listed bills from day 1.
		`CREATE TABLE IF NOT EXISTS {db}.service_anchors (
			service_id String,
			anchor_day UInt8,
			updated_at DateTime
		) ENGINE = ReplacingMergeTree(updated_at)
		ORDER BY service_id`,
		// usage_rejects keeps messages of slip.usage that are not valid
		// usage events, for an operator to look at; they count nowhere.
		`CREATE TABLE IF NOT EXISTS {db}.usage_rejects (
			received_at DateTime DEFAULT now(),
			partition   Int32,
			offset      Int64,
			key         String,
			value       String,
			error       String
		) ENGINE = MergeTree
		PARTITION BY toYYYYMM(received_at)
		ORDER BY (received_at, partition, offset)`,
		// billable_daily: billable verifications (and all attempts) per
		// service, branch, kind, API version and Bangkok day.
		`CREATE VIEW IF NOT EXISTS {db}.billable_daily AS
		SELECT day, service_id, branch_id, kind, api,
			uniqExactIfMerge(billable) AS billable, uniqExactMerge(attempts) AS attempts
		FROM {db}.usage_daily
		GROUP BY day, service_id, branch_id, kind, api`,
		// billable_by_period: billable verifications per service, branch
		// and billing period. A period starts at midnight Bangkok time on
		// the service's anchor day, or on the last day of a month shorter
		// than it (core/quota's rule); period_start is that day.
		`CREATE VIEW IF NOT EXISTS {db}.billable_by_period AS
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
		GROUP BY service_id, branch_id, period_start`,
	}},
	{2, "audit log: audit events and their rejects", []string{
		// audit_events keeps core's audit records (slip.audit) for long
		// retention, one row per delivery, as usage_events does: a
		// redelivered record writes its row again, ReplacingMergeTree
		// folds the rows of one id (the sort key ends in it; a record's
		// service and time never change) in background merges, and
		// readers use FINAL (or LIMIT 1 BY id) so a record counts once.
		// 18.16 has no DateTime64: at is the second and at_ms the
		// milliseconds within it. before and after are the changed record
		// as compact JSON, 'null' for a creation or a deletion.
		`CREATE TABLE IF NOT EXISTS {db}.audit_events (
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
		) ENGINE = ReplacingMergeTree
		PARTITION BY toYYYYMM(at)
		ORDER BY (service_id, at, id)`,
		// audit_rejects keeps messages of slip.audit that are not valid
		// audit records, for an operator to look at.
		`CREATE TABLE IF NOT EXISTS {db}.audit_rejects (
			received_at DateTime DEFAULT now(),
			partition   Int32,
			offset      Int64,
			key         String,
			value       String,
			error       String
		) ENGINE = MergeTree
		PARTITION BY toYYYYMM(received_at)
		ORDER BY (received_at, partition, offset)`,
	}},
	{3, "billing anchors from the instant each took effect", []string{
		// service_anchor_history holds each anchor day a service had and
		// when it took effect (core's anchorSince; 1970 for always), one
		// row per (service, effective_from) once merged (FINAL).
		`CREATE TABLE IF NOT EXISTS {db}.service_anchor_history (
			service_id     String,
			anchor_day     UInt8,
			effective_from DateTime,
			updated_at     DateTime
		) ENGINE = ReplacingMergeTree(updated_at)
		ORDER BY (service_id, effective_from)`,
		// The anchors known so far, as in force from the start (a rerun
		// writes the same rows again, folded by the engine).
		`INSERT INTO {db}.service_anchor_history
		SELECT service_id, argMax(anchor_day, updated_at), toDateTime(0), max(updated_at)
		FROM {db}.service_anchors GROUP BY service_id`,
		`DROP TABLE IF EXISTS {db}.billable_by_period`,
		// billable_by_period, as in migration 1, but each day's period is
		// cut by the anchor in force that day, and never starts before that
		// anchor took effect: the first period under a moved anchor runs
		// from the last one's end to the new anchor day (core's
		// store.Service.PeriodStart), and the periods before it keep
		// theirs. A service with no anchor recorded bills from day 1.
		`CREATE VIEW IF NOT EXISTS {db}.billable_by_period AS
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
		GROUP BY service_id, branch_id, period_start`,
	}},
}

// Migrate creates the database and applies every migration not yet
// recorded, in order.
func Migrate(ctx context.Context, conn driver.Conn, db string) error {
	q := func(stmt string) string { return strings.ReplaceAll(stmt, "{db}", db) }
	for _, stmt := range []string{
		"CREATE DATABASE IF NOT EXISTS {db}",
		`CREATE TABLE IF NOT EXISTS {db}.schema_migrations (version UInt32, name String, applied_at DateTime DEFAULT now())
		ENGINE = MergeTree ORDER BY version`,
	} {
		if err := conn.Exec(ctx, q(stmt)); err != nil {
			return fmt.Errorf("schema: %w", err)
		}
	}
	current, err := Version(ctx, conn, db)
	if err != nil {
		return err
	}
	for _, m := range Migrations {
		if m.Version <= current {
			continue
		}
		for i, stmt := range m.Statements {
			if err := conn.Exec(ctx, q(stmt)); err != nil {
				return fmt.Errorf("schema: migration %d (%s), statement %d: %w", m.Version, m.Name, i+1, err)
			}
		}
		if err := record(ctx, conn, db, m); err != nil {
			return fmt.Errorf("schema: record migration %d: %w", m.Version, err)
		}
	}
	return nil
}

// record notes m as applied. Inserts go through a batch: 18.16 cannot take
// an INSERT with client-bound values as a plain query.
func record(ctx context.Context, conn driver.Conn, db string, m Migration) error {
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+".schema_migrations (version, name)")
	if err != nil {
		return err
	}
	if err := b.Append(m.Version, m.Name); err != nil {
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
