// Package quota holds the arithmetic of monthly quotas: billing periods that
// start on each service's anchor day, and the counters of used verifications.
package quota

import "time"

// Bangkok is the time zone billing periods follow.
var Bangkok = time.FixedZone("Asia/Bangkok", 7*60*60)

// PeriodStart returns the start of the billing period holding t for a
// service whose cycle starts on anchorDay (1 to 31) of each month, at
// midnight Bangkok time. In months shorter than anchorDay the period starts
// on the month's last day.
func PeriodStart(t time.Time, anchorDay int) time.Time {
	t = t.In(Bangkok)
	y, m, d := t.Date()
	if d < anchorIn(y, m, anchorDay) {
		m--
	}
	return time.Date(y, m, anchorIn(y, m, anchorDay), 0, 0, 0, 0, Bangkok)
}

// PeriodEnd returns the start of the period after the one beginning at start.
func PeriodEnd(start time.Time, anchorDay int) time.Time {
	y, m, _ := start.Date()
	return time.Date(y, m+1, anchorIn(y, m+1, anchorDay), 0, 0, 0, 0, Bangkok)
}

// anchorIn returns the anchor day clamped to the length of month m of year y
// (m may be out of range; time.Date normalises it).
func anchorIn(y int, m time.Month, anchorDay int) int {
	last := time.Date(y, m+1, 0, 0, 0, 0, 0, Bangkok).Day()
	return min(max(anchorDay, 1), last)
}

// Counter is the usage of one branch or service. Used counts the period that
// began at Period (Unix seconds); Total is never reset.
type Counter struct {
	Period int64 `json:"period"`
	Used   int64 `json:"used"`
	Total  int64 `json:"total"`
}

// In returns c as seen in the period starting at period: Used is zero when c
// was last written in an earlier period, so a new period starts fresh
// without any job resetting counters.
func (c Counter) In(period int64) Counter {
	if c.Period != period {
		c.Period, c.Used = period, 0
	}
	return c
}

// Allows reports whether one more verification fits under limit; a nil limit
// means no limit of its own.
func (c Counter) Allows(limit *int64) bool { return limit == nil || c.Used < *limit }
