package consume

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/usage/chstore"
)

// Decoder turns slip.usage messages into ledger rows. It is not safe for
// concurrent use: one fetching goroutine owns it.
//
// The fast path reads the flat JSON object core writes (each field once,
// strings without escapes or non-ASCII bytes, occurredAt in UTC as RFC 3339,
// amount as plain decimal digits) without reflection, and takes service,
// branch, kind, API, mode, outcome and sending bank from a table of the
// strings seen before, so a valid event costs one
// allocation (its event id). Anything else (other fields, escapes, null,
// another time zone, a malformed message) goes the slow path,
// encoding/json, so every message decodes to what encoding/json makes of
// it and is checked by the same rules.
type Decoder struct {
	event   api.UsageEvent
	strings map[string]string
}

// maxInterned bounds the table of repeated strings; when it is full it
// starts again, so a stream of ever-new ids cannot grow it.
const maxInterned = 1 << 14

// Decode parses one slip.usage message and appends its event to rows, or
// returns why it is not a usage event (and leaves rows as they were).
func (d *Decoder) Decode(value []byte, rows *chstore.Rows) error {
	d.event = api.UsageEvent{}
	if !d.fast(value) {
		d.event = api.UsageEvent{}
		if err := json.Unmarshal(value, &d.event); err != nil {
			return fmt.Errorf("not a usage event: %w", err)
		}
	}
	return rows.Append(&d.event)
}

// usageFields are the JSON names of api.UsageEvent, by field index of the
// fast path.
var usageFields = [...]string{"eventId", "occurredAt", "serviceId", "branchId", "kind", "api", "mode", "outcome", "billable", "jobId",
	"amount", "sendingBank"}

const (
	fieldEventID = iota
	fieldOccurredAt
	fieldServiceID
	fieldBranchID
	fieldKind
	fieldAPI
	fieldMode
	fieldOutcome
	fieldBillable
	fieldJobID
	fieldAmount
	fieldSendingBank
)

// fast decodes v into d.event when v is in the shape core writes, and
// reports whether it did; false leaves d.event partly set.
func (d *Decoder) fast(v []byte) bool {
	i := skipSpace(v, 0)
	if i == len(v) || v[i] != '{' {
		return false
	}
	i = skipSpace(v, i+1)
	if i < len(v) && v[i] == '}' {
		return skipSpace(v, i+1) == len(v)
	}
	var seen uint16
	for {
		key, j, ok := plainString(v, i)
		if !ok {
			return false
		}
		i = skipSpace(v, j)
		if i == len(v) || v[i] != ':' {
			return false
		}
		i = skipSpace(v, i+1)
		f := fieldIndex(key)
		if f < 0 || seen&(1<<f) != 0 {
			return false
		}
		seen |= 1 << f
		switch f {
		case fieldBillable:
			if i, ok = d.bool(v, i); !ok {
				return false
			}
		case fieldAmount:
			if i, ok = d.amount(v, i); !ok {
				return false
			}
		default:
			s, j, ok := plainString(v, i)
			if !ok || !d.set(f, s) {
				return false
			}
			i = j
		}
		i = skipSpace(v, i)
		switch {
		case i == len(v):
			return false
		case v[i] == '}':
			return skipSpace(v, i+1) == len(v)
		case v[i] != ',':
			return false
		}
		i = skipSpace(v, i+1)
	}
}

// set stores the string value s of field f; false means the slow path
// must decide (an occurredAt that is not plain UTC RFC 3339).
func (d *Decoder) set(f int, s []byte) bool {
	e := &d.event
	switch f {
	case fieldEventID:
		e.EventID = string(s)
	case fieldOccurredAt:
		t, ok := parseUTC(s)
		e.OccurredAt = t
		return ok
	case fieldServiceID:
		e.ServiceID = d.intern(s)
	case fieldBranchID:
		e.BranchID = d.intern(s)
	case fieldKind:
		e.Kind = d.intern(s)
	case fieldAPI:
		e.API = d.intern(s)
	case fieldMode:
		e.Mode = d.intern(s)
	case fieldOutcome:
		e.Outcome = d.intern(s)
	case fieldJobID:
		e.JobID = string(s)
	case fieldSendingBank:
		e.SendingBank = d.intern(s)
	}
	return true
}

// amount reads the number at v[i:] into d.event.Amount when it is a plain
// run of up to 18 decimal digits without a leading zero (what core writes,
// and within int64); false leaves anything else (a sign, a fraction, an
// exponent) to the slow path.
func (d *Decoder) amount(v []byte, i int) (int, bool) {
	var n int64
	j := i
	for ; j < len(v) && '0' <= v[j] && v[j] <= '9'; j++ {
		if j-i == 18 {
			return i, false
		}
		n = n*10 + int64(v[j]-'0')
	}
	if j == i || v[i] == '0' && j-i > 1 {
		return i, false
	}
	d.event.Amount = n
	return j, true
}

// bool reads the literal true or false at v[i:] into d.event.Billable.
func (d *Decoder) bool(v []byte, i int) (int, bool) {
	switch {
	case len(v)-i >= 4 && string(v[i:i+4]) == "true":
		d.event.Billable = true
		return i + 4, true
	case len(v)-i >= 5 && string(v[i:i+5]) == "false":
		return i + 5, true
	}
	return i, false
}

// intern returns s as a string shared with earlier calls that saw the same
// bytes (no allocation once seen).
func (d *Decoder) intern(b []byte) string {
	if s, ok := d.strings[string(b)]; ok {
		return s
	}
	if d.strings == nil || len(d.strings) >= maxInterned {
		d.strings = make(map[string]string, 256)
	}
	s := string(b)
	d.strings[s] = s
	return s
}

func fieldIndex(key []byte) int {
	for i, name := range usageFields {
		if string(key) == name {
			return i
		}
	}
	return -1
}

func skipSpace(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
		i++
	}
	return i
}

// plainString returns the contents of the JSON string at v[i:] and the
// index after it, when it has no escapes and only printable ASCII (the
// bytes it returns are then the string's value).
func plainString(v []byte, i int) ([]byte, int, bool) {
	if i == len(v) || v[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(v); j++ {
		switch c := v[j]; {
		case c == '"':
			return v[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, i, false
		}
	}
	return nil, i, false
}

// parseUTC parses RFC 3339 in UTC, as core writes it:
// 2006-01-02T15:04:05Z with an optional fraction of 1 to 9 digits. false
// means another form (or an invalid date), left to time.Time's own parser.
func parseUTC(s []byte) (time.Time, bool) {
	if len(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[len(s)-1] != 'Z' {
		return time.Time{}, false
	}
	year, ok1 := digits(s[0:4])
	month, ok2 := digits(s[5:7])
	day, ok3 := digits(s[8:10])
	hour, ok4 := digits(s[11:13])
	minute, ok5 := digits(s[14:16])
	sec, ok6 := digits(s[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	nsec := 0
	if frac := s[19 : len(s)-1]; len(frac) > 0 {
		n, ok := digits(frac[1:])
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 || !ok {
			return time.Time{}, false
		}
		for range 10 - len(frac) {
			n *= 10
		}
		nsec = n
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	if t.Day() != day { // 31 June and the like
		return time.Time{}, false
	}
	return t, true
}

// digits parses a run of decimal digits.
func digits(s []byte) (int, bool) {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, len(s) > 0
}

// usageRows is a batch of slip.usage: the ledger's columns and the decoder
// that fills them (its table of repeated strings is per batch).
type usageRows struct {
	dec  Decoder
	rows chstore.Rows
}

func (u *usageRows) add(value []byte) error { return u.dec.Decode(value, &u.rows) }
func (u *usageRows) len() int               { return u.rows.Len() }
func (u *usageRows) reset()                 { u.rows.Reset() }

func (u *usageRows) insert(ctx context.Context, st *chstore.Store) error {
	return st.Insert(ctx, &u.rows)
}

func (u *usageRows) oldest() time.Time {
	var t time.Time
	for _, at := range u.rows.OccurredAt {
		if t.IsZero() || at.Before(t) {
			t = at
		}
	}
	return t
}
