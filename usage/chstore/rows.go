package chstore

import (
	"errors"
	"strings"
	"time"

	"github.com/slipverify/slipverify/core/api"
)

// Rows is a batch of usage events held by column, the layout a native
// INSERT sends, so appending an event copies no row structs and the insert
// converts nothing. Kind, API and Mode hold the Enum8 values of the schema.
type Rows struct {
	EventID     []string
	OccurredAt  []time.Time
	ServiceID   []string
	BranchID    []string
	Kind        []int8
	API         []int8
	Mode        []int8
	Outcome     []string
	Billable    []uint8
	JobID       []string
	Amount      []int64 // satang
	SendingBank []string
	stamp       stamp // inserted_at, the same for every attempt
}

// Len is the number of events in r.
func (r *Rows) Len() int { return len(r.EventID) }

// Reset empties r, keeping its capacity.
func (r *Rows) Reset() {
	*r = Rows{r.EventID[:0], r.OccurredAt[:0], r.ServiceID[:0], r.BranchID[:0], r.Kind[:0], r.API[:0], r.Mode[:0],
		r.Outcome[:0], r.Billable[:0], r.JobID[:0], r.Amount[:0], r.SendingBank[:0], r.stamp}
	r.stamp.reset()
}

// Enum8 values of the schema's kind, api and mode columns.
var (
	kinds = map[string]int8{api.KindBank: 1, api.KindWallet: 2}
	apis  = map[string]int8{"v1": 1, "v2": 2}
	modes = map[string]int8{api.ModeSync: 1, api.ModeAsync: 2}
)

// maxField bounds every string field of an event: ids and codes are short,
// and a runaway value must not reach the ledger.
const maxField = 128

// Append checks e and adds it to r, or returns every problem of e and
// leaves r as it was.
func (r *Rows) Append(e *api.UsageEvent) error {
	var errs []error
	bad := func(s string) { errs = append(errs, errors.New(s)) }
	if !isUUID(e.EventID) {
		bad("eventId: not a UUID")
	}
	if e.OccurredAt.IsZero() || e.OccurredAt.Year() < 2000 || e.OccurredAt.Year() > 2105 {
		bad("occurredAt: missing or outside 2000-2105")
	}
	field := func(name, v string, required bool) {
		switch {
		case v == "" && required:
			bad(name + ": missing")
		case len(v) > maxField:
			bad(name + ": longer than 128 bytes")
		}
	}
	field("serviceId", e.ServiceID, true)
	field("branchId", e.BranchID, true)
	field("outcome", e.Outcome, true)
	field("jobId", e.JobID, false)
	field("sendingBank", e.SendingBank, false)
	if e.Amount < 0 {
		bad("amount: negative")
	}
	kind, ok1 := kinds[e.Kind]
	if !ok1 {
		bad("kind: not bank or wallet")
	}
	ver, ok2 := apis[e.API]
	if !ok2 {
		bad("api: not v1 or v2")
	}
	mode, ok3 := modes[e.Mode]
	if !ok3 {
		bad("mode: not sync or async")
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	var billable uint8
	if e.Billable {
		billable = 1
	}
	r.EventID = append(r.EventID, strings.ToLower(e.EventID))
	r.OccurredAt = append(r.OccurredAt, e.OccurredAt)
	r.ServiceID = append(r.ServiceID, e.ServiceID)
	r.BranchID = append(r.BranchID, e.BranchID)
	r.Kind = append(r.Kind, kind)
	r.API = append(r.API, ver)
	r.Mode = append(r.Mode, mode)
	r.Outcome = append(r.Outcome, e.Outcome)
	r.Billable = append(r.Billable, billable)
	r.JobID = append(r.JobID, e.JobID)
	r.Amount = append(r.Amount, e.Amount)
	r.SendingBank = append(r.SendingBank, e.SendingBank)
	return nil
}

// isUUID reports whether s is a UUID in its canonical 36-character form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
		default:
			return false
		}
	}
	return true
}
