package chstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slipverify/slipverify/core/api"
)

// AuditRows is a batch of audit records held by column, the layout of
// audit_events. Audit records are few (one per change to core's records),
// so unlike Rows nothing here is tuned.
type AuditRows struct {
	ID         []string
	At         []time.Time // the second; AtMS holds the milliseconds
	AtMS       []uint16
	ActorType  []string
	ActorID    []string
	ActorName  []string
	RequestID  []string
	Action     []string
	ServiceID  []string
	TargetType []string
	TargetID   []string
	Before     []string
	After      []string
	Reason     []string
	stamp      stamp // inserted_at, the same for every attempt
}

// Len is the number of records in r.
func (r *AuditRows) Len() int { return len(r.ID) }

// Reset empties r, keeping its capacity.
func (r *AuditRows) Reset() {
	*r = AuditRows{r.ID[:0], r.At[:0], r.AtMS[:0], r.ActorType[:0], r.ActorID[:0], r.ActorName[:0], r.RequestID[:0],
		r.Action[:0], r.ServiceID[:0], r.TargetType[:0], r.TargetID[:0], r.Before[:0], r.After[:0], r.Reason[:0], r.stamp}
	r.stamp.reset()
}

// maxAuditField bounds the ids, names and action of a record (not its
// reason or before and after, which only Kafka's message size bounds).
const maxAuditField = 1024

// Append checks a and adds it to r, or returns every problem of a and
// leaves r as it was. Only what the table needs is required: the id (the
// key that folds a redelivered record), the time, the action and the
// actor's type; a change of no service has an empty service id. Before and
// After are stored as compact JSON, "null" when absent.
func (r *AuditRows) Append(a *api.AuditRecord) error {
	var errs []error
	bad := func(s string) { errs = append(errs, errors.New(s)) }
	if !isUUID(a.ID) {
		bad("id: not a UUID")
	}
	if a.At.IsZero() || a.At.Year() < 2000 || a.At.Year() > 2105 {
		bad("at: missing or outside 2000-2105")
	}
	field := func(name, v string, required bool) {
		switch {
		case v == "" && required:
			bad(name + ": missing")
		case len(v) > maxAuditField:
			bad(name + ": longer than 1024 bytes")
		}
	}
	field("actor.type", a.Actor.Type, true)
	field("actor.id", a.Actor.ID, false)
	field("actor.name", a.Actor.Name, false)
	field("requestId", a.RequestID, false)
	field("action", a.Action, true)
	field("serviceId", a.ServiceID, false)
	field("target.type", a.Target.Type, false)
	field("target.id", a.Target.ID, false)
	before, err := compactJSON(a.Before)
	if err != nil {
		bad("before: " + err.Error())
	}
	after, err := compactJSON(a.After)
	if err != nil {
		bad("after: " + err.Error())
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	at := a.At.UTC()
	r.ID = append(r.ID, strings.ToLower(a.ID))
	r.At = append(r.At, at.Truncate(time.Second))
	r.AtMS = append(r.AtMS, uint16(at.Nanosecond()/int(time.Millisecond)))
	r.ActorType = append(r.ActorType, a.Actor.Type)
	r.ActorID = append(r.ActorID, a.Actor.ID)
	r.ActorName = append(r.ActorName, a.Actor.Name)
	r.RequestID = append(r.RequestID, a.RequestID)
	r.Action = append(r.Action, a.Action)
	r.ServiceID = append(r.ServiceID, a.ServiceID)
	r.TargetType = append(r.TargetType, a.Target.Type)
	r.TargetID = append(r.TargetID, a.Target.ID)
	r.Before = append(r.Before, before)
	r.After = append(r.After, after)
	r.Reason = append(r.Reason, a.Reason)
	return nil
}

// compactJSON returns raw without insignificant spaces, so that the
// simple JSON functions of ClickHouse 18.16 (visitParamExtract*, which
// expect no spaces) read it; "null" when raw is empty.
func compactJSON(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "null", nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", err
	}
	return b.String(), nil
}

// InsertAudit writes rows to audit_events in one INSERT. Inserting the
// same rows again is harmless: readers fold rows by id (FINAL), and on a
// cluster the replicated table stores the same block once (as Insert).
func (s *Store) InsertAudit(ctx context.Context, rows *AuditRows) error {
	if rows.Len() == 0 {
		return nil
	}
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+s.into("audit_events")+" (id, at, at_ms, actor_type, actor_id, actor_name, request_id, action, service_id, target_type, target_id, before, after, reason, inserted_at)")
	if err != nil {
		return fmt.Errorf("clickhouse: prepare audit insert: %w", err)
	}
	defer b.Abort() // a no-op after Send
	for i, col := range []any{rows.ID, rows.At, rows.AtMS, rows.ActorType, rows.ActorID, rows.ActorName, rows.RequestID,
		rows.Action, rows.ServiceID, rows.TargetType, rows.TargetID, rows.Before, rows.After, rows.Reason, rows.stamp.column(rows.Len())} {
		if err := b.Column(i).Append(col); err != nil {
			return fmt.Errorf("clickhouse: append audit column %d: %w", i, err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("clickhouse: insert %d audit records: %w", rows.Len(), err)
	}
	return nil
}

// InsertAuditRejects writes rejected messages of slip.audit to
// audit_rejects.
func (s *Store) InsertAuditRejects(ctx context.Context, rejects []Reject) error {
	return s.insertRejects(ctx, "audit_rejects", rejects)
}
