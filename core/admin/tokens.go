package admin

import (
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/server"
	"github.com/slipverify/slipverify/core/server/fields"
	"github.com/slipverify/slipverify/core/store"
)

// TokenView is an admin token, never the token itself.
type TokenView struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Scope      string     `json:"scope"`
	CreatedAt  time.Time  `json:"createdAt"`
	ExpiresAt  *time.Time `json:"expiresAt"`
	LastUsedAt *time.Time `json:"lastUsedAt"` // since core started
	Token      string     `json:"token,omitempty"`
}

func (a *admin) tokenView(t store.AdminToken) TokenView {
	v := TokenView{ID: t.ID, Name: t.Name, Scope: t.Scope, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt}
	if u, ok := a.used.Load(t.ID); ok {
		at := u.(time.Time)
		v.LastUsedAt = &at
	}
	return v
}

func (a *admin) listTokens(_ *fasthttp.RequestCtx, _ caller) (any, error) {
	list, err := a.Store.AdminTokens()
	if err != nil {
		return nil, api.Internal(err)
	}
	out := make([]TokenView, 0, len(list))
	for _, t := range list {
		out = append(out, a.tokenView(t))
	}
	return out, nil
}

func (a *admin) createToken(ctx *fasthttp.RequestCtx, c caller) (any, error) {
	var fe api.FieldErrors
	f, err := fields.Body(ctx, &fe, "name", "scope", "expiresAt")
	if err != nil {
		return nil, err
	}
	t := store.AdminToken{ID: "tok-" + server.RandomHex(6), CreatedAt: a.Store.Now().UTC()}
	var ok bool
	if t.Name, ok = f.Str("name"); !ok || strings.TrimSpace(t.Name) == "" || len(t.Name) > 100 {
		f.Want(&fe, "name", "a name of 1 to 100 characters")
	} else {
		fields.Name(&fe, "name", t.Name)
	}
	if t.Scope, ok = f.Str("scope"); !ok || t.Scope != store.ScopeRead && t.Scope != store.ScopeWrite {
		f.Want(&fe, "scope", "read or write")
	}
	if f.Has("expiresAt") && !f.Null("expiresAt") {
		s, _ := f.Str("expiresAt")
		if at, err := time.Parse(time.RFC3339, s); err != nil || !at.After(t.CreatedAt) {
			fe.Add("expiresAt", "must be an RFC 3339 time in the future, or null")
		} else {
			at = at.UTC()
			t.ExpiresAt = &at
		}
	}
	// A token ends no later than the token that makes it, or an expiring
	// token could make one that never ends.
	if end := c.expires; end != nil {
		switch {
		case t.ExpiresAt == nil:
			at := end.UTC()
			t.ExpiresAt = &at
		case t.ExpiresAt.After(*end):
			fe.Add("expiresAt", "must not be after the expiry of the token making it ("+end.UTC().Format(time.RFC3339)+")")
		}
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	token := "sa_" + server.RandomHex(32)
	t.Digest = store.Digest(token)
	if err := a.Store.CreateAdminToken(t, c.change("")); err != nil {
		return nil, server.StoreError(err, "token")
	}
	v := a.tokenView(t)
	v.Token = token
	return server.Created(v), nil
}

func (a *admin) deleteToken(ctx *fasthttp.RequestCtx, c caller) (any, error) {
	id := fields.Param(ctx, "t")
	if err := a.Store.DeleteAdminToken(id, c.change("")); err != nil {
		return nil, server.StoreError(err, "token "+id)
	}
	return map[string]any{"id": id, "deleted": true}, nil
}
