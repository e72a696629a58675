package server

import (
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/server/fields"
	"github.com/slipverify/slipverify/core/store"
)

// maxOverlap bounds a rotation's overlap.
const maxOverlap = 168 * time.Hour

// RotationFields reads a rotation's {overlap?, force?}: overlap a
// duration of 0s to 168h, default 24h.
func RotationFields(ctx *fasthttp.RequestCtx) (time.Duration, bool, error) {
	overlap, force := 24*time.Hour, false
	if len(ctx.PostBody()) == 0 {
		return overlap, force, nil
	}
	f, err := fields.JSON(ctx.PostBody())
	if err != nil {
		return 0, false, err
	}
	var fe api.FieldErrors
	f.Only(&fe, "overlap", "force")
	if f.Has("overlap") {
		o, ok := f.Str("overlap")
		d, err := time.ParseDuration(o)
		if !ok || err != nil || d < 0 || d > maxOverlap {
			fe.Add("overlap", `must be a duration from "0s" to "168h"`)
		}
		overlap = d
	}
	if f.Has("force") {
		var ok bool
		if force, ok = f.Boolean("force"); !ok {
			fe.Add("force", "must be a boolean")
		}
	}
	return overlap, force, fe.Err()
}

// Rotated is the answer of a rotation: the new credential under name,
// shown only here, and when the previous one stops ({expiresAt}, or null).
func Rotated(credential string, overlaps bool, ends func() time.Time, name string) map[string]any {
	out := map[string]any{name: credential, "previous": nil}
	if overlaps {
		out["previous"] = map[string]any{"expiresAt": ends()}
	}
	return out
}

// RotateBranchKey rotates a branch's key and answers {key, previous
// {expiresAt}}: the operator's and the tenant's rotation are one.
func (s *Server) RotateBranchKey(ctx *fasthttp.RequestCtx, serviceID string, ch store.Change) (any, error) {
	overlap, force, err := RotationFields(ctx)
	if err != nil {
		return nil, err
	}
	bid := fields.Param(ctx, "b")
	if bid == "" {
		bid = fields.Param(ctx, "branch")
	}
	key := uuid.NewString()
	b, err := s.store.RotateBranchKey(serviceID, bid, store.Digest(key), overlap, force, ch)
	if err != nil {
		return nil, StoreError(err, "branch "+bid)
	}
	return Rotated(key, b.Previous != nil, func() time.Time { return b.Previous.ExpiresAt }, "key"), nil
}
