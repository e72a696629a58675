// Package report renders the usage tier's reports for finance and
// operators: billable verifications per service and branch for a period,
// and reconciliations, as an aligned text table or as CSV.
package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/slipverify/slipverify/usage/chstore"
	"github.com/slipverify/slipverify/usage/reconcile"
)

// Formats a report can be written in.
const (
	Table = "table"
	CSV   = "csv"
)

// CheckFormat returns an error naming the formats when f is not one.
func CheckFormat(f string) error {
	if f != Table && f != CSV {
		return fmt.Errorf("-format: %q is not table or csv", f)
	}
	return nil
}

// Write writes header and rows in format.
func Write(w io.Writer, format string, header []string, rows [][]string) error {
	if format == CSV {
		cw := csv.NewWriter(w)
		cw.Write(header)
		cw.WriteAll(rows) // flushes
		return cw.Error()
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, r := range append([][]string{header}, rows...) {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	return tw.Flush()
}

// Billable writes billable verifications per service and branch; the
// table form ends with a total line.
func Billable(w io.Writer, format string, rows []chstore.ReportRow) error {
	out := make([][]string, 0, len(rows)+1)
	var billable, attempts uint64
	for _, r := range rows {
		out = append(out, []string{r.ServiceID, r.BranchID, r.Period, u(r.Billable), u(r.Attempts)})
		billable, attempts = billable+r.Billable, attempts+r.Attempts
	}
	if format == Table {
		out = append(out, []string{"total", "", "", u(billable), u(attempts)})
	}
	return Write(w, format, []string{"service", "branch", "period", "billable", "attempts"}, out)
}

// Reconciliation writes a reconciliation, one line per service and branch.
func Reconciliation(w io.Writer, format string, r reconcile.Report) error {
	out := make([][]string, 0, len(r.Rows))
	for _, row := range r.Rows {
		branch := row.BranchID
		if branch == "" {
			branch = "*"
		}
		out = append(out, []string{row.ServiceID, branch, row.PeriodStart,
			i(row.CoreUsed), i(row.LedgerUsed), i(row.CoreTotal), i(row.LedgerTotal), row.Status})
	}
	if format == Table { // CSV keeps to rows; JSON has lagMessages
		lag := i(r.Lag) + " messages"
		if r.Lag < 0 {
			lag = "unknown"
		}
		out = append(out, []string{"consumer lag", "", "", "", "", "", "", lag})
	}
	return Write(w, format, []string{"service", "branch", "period", "core used", "ledger used", "core total", "ledger total", "status"}, out)
}

func u(n uint64) string { return strconv.FormatUint(n, 10) }
func i(n int64) string  { return strconv.FormatInt(n, 10) }

// ParseMonth parses a billing month, YYYY-MM.
func ParseMonth(s string) (time.Time, error) {
	t, err := time.Parse("2006-01", s)
	if err != nil {
		return t, fmt.Errorf("-period: %q is not a month like 2026-11", s)
	}
	return t, nil
}
