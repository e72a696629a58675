// Package admin is the operators' admin API, on a listener of its own:
// services and their plans, branch keys, B2B clients, admin tokens, the
// audit log and the export. It serves a tenant's /b2b routes, on a service
// the operator names, by passing the request to core's own.
package admin

import (
	"crypto/subtle"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fasthttp/router"
	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/secret"
	"github.com/slipverify/slipverify/core/server"
	"github.com/slipverify/slipverify/core/server/fields"
	"github.com/slipverify/slipverify/core/store"
)

// Prefix is where the operators' admin API lives, on its own
// listener (SLIP_ADMIN_ADDR); the edge never forwards to it.
const Prefix = "/admin/v1"

// MinToken is the shortest bootstrap token core accepts.
const MinToken = 32

// MaxBody is the largest request body the admin API reads.
const MaxBody = 1 << 20

// admin serves the admin API. Operators authenticate with the bootstrap
// token or a named token of the store; a read token may only read.
type admin struct {
	Core
	bootstrap []byte
	used      sync.Map // token id → time.Time of its last use, since core started
}

// Core is what the admin API manages: core's server, whose /b2b routes it
// serves as the edge forwards them (with EdgeToken, core's
// SLIP_EDGE_TOKEN), its store, and the box that seals its secrets.
type Core struct {
	Server    *server.Server
	Store     store.Store
	Box       *secret.Box
	EdgeToken string
}

// caller is who calls the admin API.
type caller struct {
	actor     api.AuditActor
	write     bool
	requestID string
	expires   *time.Time // when the caller's token ends; nil: never
}

type handler func(ctx *fasthttp.RequestCtx, a caller) (any, error)

// Server returns the server of the admin API's listener on core,
// authenticating with the bootstrap token given (at least MinToken
// characters) and the named tokens: its routes, its bounds, and the answer
// to a request fasthttp refuses before any handler runs, in the v2
// envelope like every other answer. logger gets fasthttp's own messages
// (nil: its default).
func Server(core Core, bootstrap string, logger fasthttp.Logger) *fasthttp.Server {
	a := &admin{Core: core, bootstrap: []byte(bootstrap)}
	return &fasthttp.Server{Handler: a.routes(), ErrorHandler: a.refused, NoDefaultServerHeader: true, Logger: logger,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, MaxRequestBodySize: MaxBody,
		SecureErrorLogMessage: true} // fasthttp would quote a malformed request, a token in it, in the log
}

// refused answers a request that fasthttp refused before the handler ran.
// A body over MaxBody is refused from its Content-Length, before it is
// read; its head is there, so a caller without a token learns only that.
// Anything else (a head too large, malformed, or cut by the read timeout)
// has been reset: VALIDATION_ERROR. A connection that failed before it
// sent anything gets no answer: there is no request.
func (a *admin) refused(ctx *fasthttp.RequestCtx, err error) {
	if _, bare := err.(*net.OpError); bare {
		ctx.Conn().Close()
		return
	}
	var e error = api.Errorf(api.Validation, "request: malformed, too large a head, or not read in time")
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		e = api.Errorf(api.Validation, "body: larger than the admin API's "+strconv.Itoa(MaxBody>>20)+" MiB")
		if _, cerr := a.authenticate(ctx); cerr != nil {
			e = cerr
		}
	}
	a.Server.Respond(ctx, api.V2, nil, e)
	ctx.SetConnectionClose()
}

// routes routes the admin API. Every answer, of every path and method,
// needs a token: OPTIONS is not answered for the router, paths are not
// redirected, and a path no route has is NOT_FOUND only to a caller with a
// token.
func (a *admin) routes() fasthttp.RequestHandler {
	r := router.New()
	r.HandleMethodNotAllowed = false
	r.HandleOPTIONS = false
	r.RedirectTrailingSlash, r.RedirectFixedPath = false, false
	read := func(h handler) fasthttp.RequestHandler { return a.guard(false, h) }
	write := func(h handler) fasthttp.RequestHandler { return a.guard(true, h) }
	p := Prefix
	r.GET(p+"/services", read(a.listServices))
	r.POST(p+"/services", write(a.createService))
	r.GET(p+"/services/{s}", read(a.getService))
	r.PATCH(p+"/services/{s}", write(a.patchService))
	r.PUT(p+"/services/{s}/state", write(a.putState))
	r.PUT(p+"/services/{s}/plan", write(a.putPlan))
	r.DELETE(p+"/services/{s}", write(a.deleteService))
	r.GET(p+"/services/{s}/branches/{b}/keys", read(a.listKeys))
	r.POST(p+"/services/{s}/branches/{b}/key/rotate", write(a.rotateKey))
	r.POST(p+"/services/{s}/branches/{b}/key/revoke-previous", write(a.revokePrevious))
	r.GET(p+"/services/{s}/clients", read(a.listClients))
	r.POST(p+"/services/{s}/clients", write(a.createClient))
	r.PATCH(p+"/services/{s}/clients/{c}", write(a.patchClient))
	r.DELETE(p+"/services/{s}/clients/{c}", write(a.deleteClient))
	r.POST(p+"/services/{s}/clients/{c}/secret/rotate", write(a.rotateSecret))
	r.GET(p+"/export", read(a.export))
	// The tenant's own management routes, on a service the operator names:
	// the one implementation of /b2b, with every permission. A change to a
	// deleted service is refused by the store, as every other change to it
	// is (the edge refuses its tenant's keys before they reach /b2b).
	b2b := a.Server.Handler()
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		r.Handle(m, p+"/services/{s}/b2b/{rest:*}", a.guard(m != "GET", func(ctx *fasthttp.RequestCtx, c caller) (any, error) {
			a.asTenant(ctx, c, b2b)
			if st := ctx.Response.StatusCode(); st >= 300 && st < 400 {
				// core's router redirects a path it would mend (a trailing
				// slash, another case) to a /b2b path of its own: no such
				// path here.
				ctx.Response.Header.Del(fasthttp.HeaderLocation)
				return nil, api.E(api.NotFound)
			}
			return nil, errAnswered
		}))
	}
	r.GET(p+"/tokens", read(a.listTokens))
	r.POST(p+"/tokens", write(a.createToken))
	r.DELETE(p+"/tokens/{t}", write(a.deleteToken))
	r.GET(p+"/audit", read(a.audit))
	r.NotFound = a.guard(false, func(*fasthttp.RequestCtx, caller) (any, error) { return nil, api.E(api.NotFound) })
	return r.Handler
}

// guard authenticates the caller and runs h: a write needs a write token.
func (a *admin) guard(write bool, h handler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		c, err := a.authenticate(ctx)
		if err == nil && write && !c.write {
			err = api.Errorf(api.PermissionDenied, "this admin token has the read scope")
		}
		var data any
		if err == nil {
			data, err = h(ctx, c)
		}
		if err != errAnswered {
			a.Server.Respond(ctx, api.V2, data, err)
		}
	}
}

// errAnswered tells guard that its handler wrote the answer itself.
var errAnswered = errors.New("admin: answered")

// asTenant runs a /b2b request on the named service as the edge forwards a
// tenant's, with the operator as its client.
func (a *admin) asTenant(ctx *fasthttp.RequestCtx, c caller, b2b fasthttp.RequestHandler) {
	h := &ctx.Request.Header
	h.Set(api.HeaderEdgeToken, a.EdgeToken)
	h.Set(api.HeaderService, fields.Param(ctx, "s"))
	h.Set(api.HeaderB2BClient, "admin:"+c.actor.ID)
	h.Set(api.HeaderRequestID, c.requestID)
	h.Del(api.HeaderBranch)
	ctx.URI().SetPath("/b2b/" + fields.Param(ctx, "rest"))
	b2b(ctx)
}

func (a *admin) authenticate(ctx *fasthttp.RequestCtx) (caller, error) {
	c := caller{requestID: string(ctx.Request.Header.Peek(api.HeaderRequestID))}
	if c.requestID == "" {
		c.requestID = uuid.NewString()
		ctx.Response.Header.Set(api.HeaderRequestID, c.requestID)
	}
	auth := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)
	token, ok := strings.CutPrefix(string(auth), "Bearer ")
	switch {
	case len(auth) == 0:
		return c, api.Errorf(api.MissingAPIKey, "Authorization: Bearer <admin token> is required")
	case !ok || token == "":
		return c, api.Errorf(api.InvalidAPIKey, "admin token is invalid")
	case subtle.ConstantTimeCompare([]byte(token), a.bootstrap) == 1:
		c.actor, c.write = api.AuditActor{Type: api.ActorAdmin, ID: "bootstrap", Name: "SLIP_ADMIN_TOKEN"}, true
		return c, nil
	}
	t, err := a.Store.AdminTokenByDigest(store.Digest(token))
	if errors.Is(err, store.ErrNotFound) {
		return c, api.Errorf(api.InvalidAPIKey, "admin token is invalid, revoked or expired")
	} else if err != nil {
		return c, api.Internal(err)
	}
	a.used.Store(t.ID, time.Now().UTC())
	c.actor, c.write = api.AuditActor{Type: api.ActorAdmin, ID: t.ID, Name: t.Name}, t.Scope == store.ScopeWrite
	c.expires = t.ExpiresAt
	return c, nil
}

func (c caller) change(reason string) store.Change {
	return store.Change{Actor: c.actor, RequestID: c.requestID, Reason: reason}
}
