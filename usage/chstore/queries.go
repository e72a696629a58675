package chstore

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// DayCount is the billable events of a branch on one Bangkok day.
type DayCount struct {
	ServiceID, BranchID string
	Day                 time.Time // midnight UTC of the Bangkok date, as ClickHouse returns a Date
	Billable            uint64
}

// BillableByDay returns billable events per service, branch and Bangkok
// day over the whole ledger, each event counted once (exact distinct event
// ids from the daily rollup). Reconciliation sums them into periods and
// lifetimes.
func (s *Store) BillableByDay(ctx context.Context) ([]DayCount, error) {
	return s.BillableOf(ctx, nil, time.Time{})
}

// BillableOf is BillableByDay for the services listed only (nil: all), with
// the days before since (zero: none) summed into one row dated the day
// before it. With since at or before the services' period starts, the rows
// still give each branch's period count and lifetime total, and their
// number stays within branches × days of a period however old the ledger
// is. An event has one day, so merging its days' states counts it once.
func (s *Store) BillableOf(ctx context.Context, services []string, since time.Time) ([]DayCount, error) {
	floor := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	if !since.IsZero() {
		y, m, d := since.Date()
		floor = time.Date(y, m, d-1, 0, 0, 0, 0, time.UTC)
	}
	where, args := "", []any{floor.Format(time.DateOnly)}
	if services != nil {
		if len(services) == 0 {
			return nil, nil
		}
		set := clickhouse.GroupSet{Value: make([]any, len(services))} // binds as ('a', 'b'): a plain slice binds as an array
		for i, id := range services {
			set.Value[i] = id
		}
		where, args = "WHERE service_id IN ?", append(args, set)
	}
	return query(ctx, s, "billable by day", `SELECT service_id, branch_id, greatest(day, toDate(?)) AS d, uniqExactIfMerge(billable)
		FROM `+s.db+`.usage_daily `+where+` GROUP BY service_id, branch_id, d`, args,
		func(rows driver.Rows, d *DayCount) error {
			return rows.Scan(&d.ServiceID, &d.BranchID, &d.Day, &d.Billable)
		})
}

// ServicesSince returns the services with events in the ledger on the
// Bangkok days from since on.
func (s *Store) ServicesSince(ctx context.Context, since time.Time) ([]string, error) {
	return query(ctx, s, "services", `SELECT DISTINCT service_id FROM `+s.db+`.usage_daily WHERE day >= toDate(?)`,
		[]any{since.Format(time.DateOnly)}, func(rows driver.Rows, id *string) error { return rows.Scan(id) })
}

// ReportRow is one branch's billable verifications in a report's period.
type ReportRow struct {
	ServiceID, BranchID string
	Period              string // the billing period's first day, or "from..to" for a range of days
	Billable, Attempts  uint64
}

// ReportPeriod returns billable verifications per service and branch in
// each service's billing period that starts in month (YYYY-MM), from the
// billable_by_period view.
func (s *Store) ReportPeriod(ctx context.Context, month time.Time, serviceID string) ([]ReportRow, error) {
	q := `SELECT service_id, branch_id, toString(period_start), billable, attempts
		FROM ` + s.db + `.billable_by_period
		WHERE toYYYYMM(period_start) = ? AND (? = '' OR service_id = ?)
		ORDER BY service_id, branch_id`
	return s.report(ctx, q, uint32(month.Year()*100+int(month.Month())), serviceID, serviceID)
}

// ReportRange returns billable verifications per service and branch on the
// Bangkok days from..to, both included, from the billable_daily view.
func (s *Store) ReportRange(ctx context.Context, from, to time.Time, serviceID string) ([]ReportRow, error) {
	q := `SELECT service_id, branch_id, concat(?, '..', ?), sum(billable), sum(attempts)
		FROM ` + s.db + `.billable_daily
		WHERE day >= toDate(?) AND day <= toDate(?) AND (? = '' OR service_id = ?)
		GROUP BY service_id, branch_id
		ORDER BY service_id, branch_id`
	f, t := from.Format(time.DateOnly), to.Format(time.DateOnly)
	return s.report(ctx, q, f, t, f, t, serviceID, serviceID)
}

func (s *Store) report(ctx context.Context, q string, args ...any) ([]ReportRow, error) {
	return query(ctx, s, "report", q, args, func(rows driver.Rows, r *ReportRow) error {
		return rows.Scan(&r.ServiceID, &r.BranchID, &r.Period, &r.Billable, &r.Attempts)
	})
}

// query runs q (what names it in errors) and scans each row of its answer
// into a T.
func query[T any](ctx context.Context, s *Store, what, q string, args []any, scan func(driver.Rows, *T) error) ([]T, error) {
	rows, err := s.conn.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: %s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := scan(rows, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
