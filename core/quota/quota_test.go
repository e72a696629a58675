package quota

import (
	"testing"
	"time"
)

func TestPeriodStart(t *testing.T) {
	f := func(now string, anchor int, wantStart, wantEnd string) {
		t.Helper()
		n, err := time.Parse(time.RFC3339, now)
		if err != nil {
			t.Fatal(err)
		}
		s := PeriodStart(n, anchor)
		if got := s.Format("2006-01-02"); got != wantStart {
			t.Errorf("PeriodStart(%s, %d) = %s, want %s", now, anchor, got, wantStart)
		}
		if got := PeriodEnd(s, anchor).Format("2006-01-02"); got != wantEnd {
			t.Errorf("PeriodEnd(%s, %d) = %s, want %s", now, anchor, got, wantEnd)
		}
	}
	f("2026-11-22T10:00:00+07:00", 1, "2026-11-01", "2026-12-01")
	f("2026-11-01T00:00:00+07:00", 1, "2026-11-01", "2026-12-01")
	f("2026-10-31T23:59:59+07:00", 1, "2026-10-01", "2026-11-01")
	// 17:30 UTC on Oct 31 is already Nov 1 in Bangkok.
	f("2026-10-31T17:30:00Z", 1, "2026-11-01", "2026-12-01")
	f("2026-11-14T10:00:00+07:00", 15, "2026-10-15", "2026-11-15")
	f("2026-11-15T10:00:00+07:00", 15, "2026-11-15", "2026-12-15")
	f("2026-01-10T10:00:00+07:00", 15, "2025-12-15", "2026-01-15")
	// Anchor 31 in short months: the period starts on the month's last day.
	f("2026-02-28T10:00:00+07:00", 31, "2026-02-28", "2026-03-31")
	f("2026-02-27T10:00:00+07:00", 31, "2026-01-31", "2026-02-28")
	f("2026-04-30T00:00:00+07:00", 31, "2026-04-30", "2026-05-31")
}

func TestCounter(t *testing.T) {
	c := Counter{Period: 100, Used: 5, Total: 40}
	if got := c.In(100); got != c {
		t.Errorf("same period changed the counter: %+v", got)
	}
	if got := c.In(200); got != (Counter{Period: 200, Used: 0, Total: 40}) {
		t.Errorf("new period: %+v", got)
	}
	five, six := int64(5), int64(6)
	if c.Allows(&five) || !c.Allows(&six) || !c.Allows(nil) {
		t.Error("Allows is wrong at the limit")
	}
}
