package admin

import (
	"errors"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/store"
)

// audit answers {items, nextCursor}, newest first.
func (a *admin) audit(ctx *fasthttp.RequestCtx, _ caller) (any, error) {
	q := ctx.QueryArgs()
	f := store.AuditFilter{ServiceID: string(q.Peek("service")), Action: string(q.Peek("action")),
		Cursor: string(q.Peek("cursor")), Limit: 100}
	var fe api.FieldErrors
	for _, x := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Peek(x.name); len(v) > 0 {
			t, err := time.Parse(time.RFC3339, string(v))
			if err != nil {
				fe.Add(x.name, "must be an RFC 3339 time")
			}
			*x.dst = t
		}
	}
	if v := q.Peek("limit"); len(v) > 0 {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 1 || n > 1000 {
			fe.Add("limit", "must be 1 to 1000")
		}
		f.Limit = n
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	items, next, err := a.Store.Audit(f)
	if err != nil {
		if errors.Is(err, store.ErrBadCursor) {
			return nil, api.Errorf(api.Validation, "cursor: not a cursor of this log")
		}
		return nil, api.Internal(err)
	}
	if items == nil {
		items = []api.AuditRecord{}
	}
	return struct {
		Items      []api.AuditRecord `json:"items"`
		NextCursor *string           `json:"nextCursor"`
	}{items, nullable(next)}, nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
