package server

import (
	"math"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/server/fields"
	"github.com/slipverify/slipverify/core/store"
)

// conditionFields are the conditions a v2 verification, and a branch's
// defaults, may set on a slip besides matchAmount.
var conditionFields = []string{"amountMin", "amountMax", "dateFrom", "dateTo", "maxAge"}

// maxMaxAge bounds maxAge: a slip older than a year is no payment to wait
// for.
const maxMaxAge = 366 * 24 * time.Hour

// conditions reads the condition fields of f, adding each failing one to
// fe. A field that is null is not set.
func conditions(f fields.Set, fe *api.FieldErrors) store.Conditions {
	var c store.Conditions
	c.AmountMin = amountField(f, fe, "amountMin")
	c.AmountMax = amountField(f, fe, "amountMax")
	if c.AmountMin != nil && c.AmountMax != nil && *c.AmountMin > *c.AmountMax {
		fe.Add("amountMin", "must not be above amountMax")
	}
	c.DateFrom = dateField(f, fe, "dateFrom")
	c.DateTo = dateField(f, fe, "dateTo")
	if c.DateFrom != nil && c.DateTo != nil && c.DateFrom.After(*c.DateTo) {
		fe.Add("dateFrom", "must not be after dateTo")
	}
	if f.Has("maxAge") && !f.Null("maxAge") {
		s, ok := f.Str("maxAge")
		d, err := time.ParseDuration(s)
		switch {
		case !ok || err != nil || d <= 0 || d > maxMaxAge:
			fe.Add("maxAge", "must be a duration such as 30m, 24h or 168h, at most 8784h")
		case c.DateFrom != nil:
			fe.Add("maxAge", "give dateFrom or maxAge, not both")
		default:
			c.MaxAge = d
		}
	}
	return c
}

// amountField reads an amount: positive, in satang (at most two decimal
// places: rounded, 100.004 would match a slip of 100.00); nil when absent
// or null.
func amountField(f fields.Set, fe *api.FieldErrors, name string) *float64 {
	if !f.Has(name) || f.Null(name) {
		return nil
	}
	n, ok := f.Number(name)
	switch {
	case !ok || n <= 0 || math.IsInf(n, 0) || math.IsNaN(n):
		fe.Add(name, "must be a positive number")
	case math.Round(n*100)/100 != n:
		fe.Add(name, "must have at most 2 decimal places")
	default:
		return &n
	}
	return nil
}

// dateField reads an RFC 3339 date-time with its offset; nil when absent
// or null.
func dateField(f fields.Set, fe *api.FieldErrors, name string) *time.Time {
	if !f.Has(name) || f.Null(name) {
		return nil
	}
	s, ok := f.Str(name)
	t, err := time.Parse(time.RFC3339, s)
	if !ok || err != nil {
		fe.Add(name, "must be an RFC 3339 date-time with its offset, such as 2026-11-22T10:00:00+07:00")
		return nil
	}
	return &t
}

// ConditionsView is a branch's default conditions as the management API
// shows and takes them: every field null when not set.
type ConditionsView struct {
	AmountMin *float64   `json:"amountMin"`
	AmountMax *float64   `json:"amountMax"`
	DateFrom  *time.Time `json:"dateFrom"`
	DateTo    *time.Time `json:"dateTo"`
	MaxAge    *string    `json:"maxAge"`
}

func conditionsView(c store.Conditions) ConditionsView {
	v := ConditionsView{AmountMin: c.AmountMin, AmountMax: c.AmountMax, DateFrom: c.DateFrom, DateTo: c.DateTo}
	if c.MaxAge != 0 {
		s := c.MaxAge.String()
		v.MaxAge = &s
	}
	return v
}

// getConditions answers GET /b2b/branches/:branch/conditions.
func (s *Server) getConditions(ctx *fasthttp.RequestCtx, c caller) (any, error) {
	cond, err := s.store.BranchConditions(c.serviceID, fields.Param(ctx, "branch"))
	if err != nil {
		return nil, manageError(err, "branch")
	}
	return conditionsView(cond), nil
}

// putConditions answers PUT /b2b/branches/:branch/conditions: the body
// replaces the branch's defaults (a field left out or null unsets it; {}
// removes them all).
func (s *Server) putConditions(ctx *fasthttp.RequestCtx, c caller) (any, error) {
	var fe api.FieldErrors
	f, err := fields.Body(ctx, &fe, conditionFields...)
	if err != nil {
		return nil, err
	}
	cond := conditions(f, &fe)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	if err := s.store.SetBranchConditions(c.serviceID, fields.Param(ctx, "branch"), cond, tenantChange(ctx, c)); err != nil {
		return nil, manageError(err, "branch")
	}
	return conditionsView(cond), nil
}
