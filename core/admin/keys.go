package admin

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/server"
	"github.com/slipverify/slipverify/core/server/fields"
)

// KeyView is one of a branch's keys, never the key itself.
type KeyView struct {
	KeyID      string     `json:"keyId"` // the first 16 hex digits of its digest
	CreatedAt  *time.Time `json:"createdAt"`
	ExpiresAt  *time.Time `json:"expiresAt"`
	LastSeenAt *time.Time `json:"lastSeenAt"` // when an edge last fetched its record, since core started
	Current    bool       `json:"current"`
}

func (a *admin) keyView(digest string, created, expires *time.Time, current bool) KeyView {
	v := KeyView{KeyID: digest[:16], CreatedAt: created, ExpiresAt: expires, Current: current}
	if t, ok := a.Server.KeySeen(digest); ok {
		seen := t.UTC()
		v.LastSeenAt = &seen
	}
	return v
}

func (a *admin) listKeys(ctx *fasthttp.RequestCtx, _ caller) (any, error) {
	sid, bid := fields.Param(ctx, "s"), fields.Param(ctx, "b")
	b, err := a.Store.Branch(sid, bid)
	if err != nil {
		return nil, server.StoreError(err, "branch "+bid)
	}
	out := []KeyView{a.keyView(b.KeyDigest, b.KeyCreatedAt, nil, true)}
	if p := b.Previous; p != nil {
		out = append(out, a.keyView(p.Digest, p.CreatedAt, &p.ExpiresAt, false))
	}
	return out, nil
}

func (a *admin) rotateKey(ctx *fasthttp.RequestCtx, c caller) (any, error) {
	return a.Server.RotateBranchKey(ctx, fields.Param(ctx, "s"), c.change(""))
}

func (a *admin) revokePrevious(ctx *fasthttp.RequestCtx, c caller) (any, error) {
	sid, bid := fields.Param(ctx, "s"), fields.Param(ctx, "b")
	if _, err := a.Store.RevokePreviousKey(sid, bid, c.change("")); err != nil {
		return nil, server.StoreError(err, "branch "+bid)
	}
	b, err := a.Store.Branch(sid, bid)
	if err != nil {
		return nil, server.StoreError(err, "branch "+bid)
	}
	return a.Server.BranchView(sid, b)
}
