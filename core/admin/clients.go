package admin

import (
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/seedfile"
	"github.com/slipverify/slipverify/core/secret"
	"github.com/slipverify/slipverify/core/seed"
	"github.com/slipverify/slipverify/core/server"
	"github.com/slipverify/slipverify/core/server/fields"
	"github.com/slipverify/slipverify/core/store"
)

// ClientView is a B2B client as the admin API shows it: Key and Secret only
// in the answer that creates it (or rotates its secret). Signer marks the
// client whose secret signs the requests made with the service's branch
// keys (its first).
type ClientView struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	Permissions []string   `json:"permissions"`
	Signer      bool       `json:"signer"`
	Previous    *time.Time `json:"previousSecretExpiresAt"`
	Key         string     `json:"key,omitempty"`
	Secret      string     `json:"secret,omitempty"`
}

// clientView shows a client of a service read now (signer: its first).
func (a *admin) clientView(c store.B2BClient) ClientView {
	list, _ := a.Store.Clients(c.ServiceID)
	return clientViewOf(c, len(list) > 0 && list[0].KeyDigest == c.KeyDigest)
}

func clientViewOf(c store.B2BClient, signer bool) ClientView {
	v := ClientView{ID: c.ID(), Name: c.Name, Permissions: c.Permissions, Signer: signer}
	if c.Previous != nil {
		v.Previous = &c.Previous.ExpiresAt
	}
	return v
}

func (a *admin) listClients(ctx *fasthttp.RequestCtx, _ caller) (any, error) {
	sid := fields.Param(ctx, "s")
	if _, _, _, err := a.Store.Service(sid); err != nil {
		return nil, server.StoreError(err, "service "+sid)
	}
	list, err := a.Store.Clients(sid)
	if err != nil {
		return nil, api.Internal(err)
	}
	out := make([]ClientView, 0, len(list))
	for i, c := range list {
		out = append(out, clientViewOf(c, i == 0))
	}
	return out, nil
}

// clientFields reads a client's name and permissions.
func clientFields(fe *api.FieldErrors, f fields.Set, c *store.B2BClient) {
	f.Only(fe, "name", "permissions")
	if f.Has("name") {
		if name, ok := f.Str("name"); !ok || len(name) > 100 {
			fe.Add("name", "must be a name of at most 100 characters")
		} else if fields.Name(fe, "name", name) {
			c.Name = name
		}
	}
	permissionsField(fe, f, &c.Permissions)
}

// permissionsField reads field permissions, when sent, into dst: a list
// of api.Permissions. It decodes into a list of its own, never into the
// one dst held (api.Permissions itself, as a default).
func permissionsField(fe *api.FieldErrors, f fields.Set, dst *[]string) {
	if !f.Has("permissions") {
		return
	}
	var perms []string
	if err := f.Into("permissions", &perms); err != nil || len(perms) == 0 {
		fe.Add("permissions", "must be a list of "+strings.Join(api.Permissions, ", "))
	}
	for _, p := range perms {
		if api.PermissionBit(p) == 0 {
			fe.Add("permissions", "unknown permission "+strconv.Quote(p))
		}
	}
	*dst = perms
}

func (a *admin) createClient(ctx *fasthttp.RequestCtx, ac caller) (any, error) {
	f, err := fields.JSON(ctx.PostBody())
	if err != nil {
		return nil, err
	}
	key, secretText := server.RandomHex(32), server.RandomHex(24)
	probe := store.B2BClient{Permissions: api.Permissions}
	var fe api.FieldErrors
	clientFields(&fe, f, &probe)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	c := seed.B2BClient(seedfile.B2BClient{Name: probe.Name, Key: key, Secret: secretText, Permissions: probe.Permissions}, a.Box, fields.Param(ctx, "s"))
	c, err = a.Store.CreateClient(c, ac.change(""))
	if err != nil {
		return nil, server.StoreError(err, "service "+c.ServiceID)
	}
	v := a.clientView(c)
	v.Key, v.Secret = key, secretText
	return server.Created(v), nil
}

func (a *admin) patchClient(ctx *fasthttp.RequestCtx, ac caller) (any, error) {
	f, err := fields.JSON(ctx.PostBody())
	if err != nil {
		return nil, err
	}
	var fe api.FieldErrors
	var probe store.B2BClient
	clientFields(&fe, f, &probe)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	sid, id := fields.Param(ctx, "s"), fields.Param(ctx, "c")
	c, err := a.Store.UpdateClient(sid, id, ac.change(""), func(c *store.B2BClient) {
		if f.Has("name") {
			c.Name = probe.Name
		}
		if f.Has("permissions") {
			c.Permissions = probe.Permissions
		}
	})
	if err != nil {
		return nil, server.StoreError(err, "client "+id)
	}
	return a.clientView(c), nil
}

func (a *admin) deleteClient(ctx *fasthttp.RequestCtx, ac caller) (any, error) {
	sid, id := fields.Param(ctx, "s"), fields.Param(ctx, "c")
	if err := a.Store.DeleteClient(sid, id, ac.change("")); err != nil {
		return nil, server.StoreError(err, "client "+id)
	}
	return map[string]any{"id": id, "deleted": true}, nil
}

// rotateSecret gives a client a new secret, shown once; the previous one
// verifies signatures too for the overlap ({overlap?, force?} as for keys).
func (a *admin) rotateSecret(ctx *fasthttp.RequestCtx, ac caller) (any, error) {
	overlap, force, err := server.RotationFields(ctx)
	if err != nil {
		return nil, err
	}
	sid, id := fields.Param(ctx, "s"), fields.Param(ctx, "c")
	secretText := server.RandomHex(24)
	c, err := a.Store.RotateClientSecret(sid, id, overlap, force, ac.change(""), func(digest string) []byte {
		return a.Box.Seal(secretText, secret.ClientLabel(digest))
	})
	if err != nil {
		return nil, server.StoreError(err, "client "+id)
	}
	return server.Rotated(secretText, c.Previous != nil, func() time.Time { return c.Previous.ExpiresAt }, "secret"), nil
}
