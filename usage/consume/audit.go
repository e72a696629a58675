package consume

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/usage/chstore"
)

// auditRows is a batch of slip.audit. Audit records are few (one per
// change to core's records), so they go through encoding/json: no fast
// path as usage events have.
type auditRows struct {
	rec  api.AuditRecord
	rows chstore.AuditRows
}

// add decodes one slip.audit message; fields it does not know are
// ignored, so core may add some before the table has them.
func (a *auditRows) add(value []byte) error {
	a.rec = api.AuditRecord{}
	if err := json.Unmarshal(value, &a.rec); err != nil {
		return fmt.Errorf("not an audit record: %w", err)
	}
	return a.rows.Append(&a.rec)
}

func (a *auditRows) len() int { return a.rows.Len() }
func (a *auditRows) reset()   { a.rows.Reset() }

func (a *auditRows) insert(ctx context.Context, st *chstore.Store) error {
	return st.InsertAudit(ctx, &a.rows)
}

func (a *auditRows) oldest() time.Time {
	var t time.Time
	for i, at := range a.rows.At {
		at = at.Add(time.Duration(a.rows.AtMS[i]) * time.Millisecond)
		if t.IsZero() || at.Before(t) {
			t = at
		}
	}
	return t
}
