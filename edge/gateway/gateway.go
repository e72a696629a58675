// Package gateway is the edge's request path: it answers every rejection
// itself, in the caller's version format, from bodies rendered once at
// start, and forwards the rest to core over pooled keep-alive connections
// with the internal identity headers.
//
// The path of an accepted Bearer request allocates nothing (see
// TestBearerPathAllocs).
package gateway

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/iplist"
	"github.com/slipverify/slipverify/edge/accesslog"
	"github.com/slipverify/slipverify/edge/authcache"
	"github.com/slipverify/slipverify/edge/authn"
	"github.com/slipverify/slipverify/edge/docs"
	"github.com/slipverify/slipverify/edge/nonce"
	"github.com/slipverify/slipverify/edge/openapi"
	"github.com/slipverify/slipverify/edge/ratelimit"
)

// Config configures a Gateway.
type Config struct {
	Core        *fasthttp.HostClient
	Cores       *Cores // the cores behind Core, its Transport; nil: Core is one core's own client
	EdgeToken   string
	Auth        *authcache.Cache
	Nonces      *nonce.Store
	Limits      *ratelimit.Limiter
	Adaptive    *ratelimit.Adaptive
	Trusted     iplist.List
	CoreTimeout time.Duration
	Now         func() time.Time
	Log         *slog.Logger
	Access      *accesslog.Log // nil: no access log
}

// Gateway serves the public routes.
type Gateway struct {
	cfg       Config
	edgeToken []byte
	coreAddr  []byte     // the Host of a request that has none (HTTP/1.0)
	rejects   []rendered // by api.Code, v2 then v1
	metrics   *Metrics
	draining  atomic.Bool
	reqPrefix []byte
	reqSeq    atomic.Uint64
	cores     *Cores
	bufs      sync.Pool // *[]byte string-to-sign buffers
	chunked   chunkedMemo
}

// rendered is a rejection, encoded once for each version.
type rendered struct {
	v1Status, v2Status int
	v1, v2             []byte
}

// edgeValidation is the message of the edge's own VALIDATION_ERROR: the
// request is refused before any of its fields is read.
const edgeValidation = "request: not taken as sent: a body in a content coding (Content-Encoding other than identity), " +
	"a body over 8 MiB, or a request that is not well-formed HTTP"

// New returns a Gateway.
func New(cfg Config, m *Metrics) *Gateway {
	g := &Gateway{cfg: cfg, metrics: m, edgeToken: []byte(cfg.EdgeToken), coreAddr: []byte(cfg.Core.Addr), cores: cfg.Cores}
	if g.cores == nil {
		g.cores = oneCore(cfg.Core, cfg.EdgeToken, cfg.Now, cfg.Log)
	}
	m.cores = g.cores.set
	for _, r := range api.Rows() {
		for int(r.Code) >= len(g.rejects) {
			g.rejects = append(g.rejects, rendered{})
		}
		e := api.E(r.Code)
		if r.Code == api.Validation { // the edge's: the request, before any field of it is read
			e.Message = edgeValidation
		}
		_, v1 := api.RenderError(api.V1, e)
		_, v2 := api.RenderError(api.V2, e)
		g.rejects[r.Code] = rendered{v1Status: r.V1Status, v2Status: r.V2Status, v1: v1, v2: v2}
	}
	// Request ids: a random prefix per edge process (so edges started
	// together do not share ids), then a counter.
	var seed [6]byte
	rand.Read(seed[:])
	g.reqPrefix = append(hex.AppendEncode(nil, seed[:]), '-')
	g.bufs.New = func() any { b := make([]byte, 0, 512); return &b }
	if cfg.Access != nil {
		m.accessLog(cfg.Access)
	}
	return g
}

// Drain makes /health fail, so load balancers stop sending before the
// listener closes.
func (g *Gateway) Drain() { g.draining.Store(true) }

// Draining reports whether Drain was called.
func (g *Gateway) Draining() bool { return g.draining.Load() }

// Handler returns the request handler of every public route.
func (g *Gateway) Handler() fasthttp.RequestHandler {
	r := router.New()
	r.HandleMethodNotAllowed = false
	r.HandleOPTIONS = false // an OPTIONS request is answered NOT_FOUND, with its id and log line
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	for i := range Routes {
		rt := &Routes[i]
		idx := i
		if rt.local {
			health := func(ctx *fasthttp.RequestCtx) { g.serveHealth(ctx, idx) }
			r.Handle(rt.Method, rt.Path, health)
			r.Handle(fasthttp.MethodHead, rt.Path, health) // load balancers' checks: the status alone
			continue
		}
		r.Handle(rt.Method, rt.Path, func(ctx *fasthttp.RequestCtx) { g.serve(ctx, rt, idx) })
	}
	// The API's own description, for anyone: no key, no limit.
	r.GET("/openapi.json", func(ctx *fasthttp.RequestCtx) {
		x := g.begin(noRoute)
		ctx.SetContentType("application/json")
		ctx.SetBody(openapi.Document())
		g.finish(ctx, &x)
	})
	// The API reference page that renders it (edge/docs), likewise.
	r.GET(docs.PagePath, func(ctx *fasthttp.RequestCtx) {
		x := g.begin(noRoute)
		docs.ServePage(ctx)
		g.finish(ctx, &x)
	})
	r.GET(docs.BundlePath, func(ctx *fasthttp.RequestCtx) {
		x := g.begin(noRoute)
		docs.ServeBundle(ctx)
		g.finish(ctx, &x)
	})
	r.NotFound = func(ctx *fasthttp.RequestCtx) {
		x := g.begin(len(Routes))
		g.reject(ctx, &x, versionOfPath(ctx.Path()), api.NotFound)
		g.finish(ctx, &x)
	}
	return r.Handler
}

// exchange is what the metrics and the access log learn of one request.
type exchange struct {
	route      int // index in Routes, len(Routes) for no route, noRoute for none counted
	start, end time.Time
	idBuf      [40]byte
	idLen      int
	code       api.Code // the edge's own refusal; 0 when core answered
	p          *authcache.Principal
	ip         netip.Addr
	unparsed   bool // fasthttp could not read the request: no method or path to tell
}

// noRoute marks an answer outside the route metrics (/openapi.json, /docs).
const noRoute = -1

// begin starts the exchange of a request to route, with its request id:
// the edge's random prefix and a sequence number.
func (g *Gateway) begin(route int) exchange {
	x := exchange{route: route, start: g.cfg.Now()}
	x.idLen = len(strconv.AppendUint(append(x.idBuf[:0:len(x.idBuf)], g.reqPrefix...), g.reqSeq.Add(1), 16))
	return x
}

// id is the request id.
func (x *exchange) id() []byte { return x.idBuf[:x.idLen] }

// finish ends an exchange: the request id on the answer (core echoes it on
// the answers it gives; the edge sets it on its own), the metrics and the
// access log line.
func (g *Gateway) finish(ctx *fasthttp.RequestCtx, x *exchange) {
	if x.end.IsZero() {
		x.end = g.cfg.Now()
	}
	ctx.Response.Header.SetCanonical(hRequestID, x.id())
	status := ctx.Response.StatusCode()
	if x.route != noRoute {
		g.metrics.observe(x.route, status, x.end.Sub(x.start))
	}
	if g.cfg.Access == nil {
		return
	}
	if !x.ip.IsValid() {
		x.ip = g.clientIP(ctx)
	}
	e := accesslog.Entry{
		Start: x.start, ID: x.id(), Status: status, Duration: x.end.Sub(x.start), IP: x.ip,
		BytesIn: len(ctx.Request.Body()), BytesOut: len(ctx.Response.Body()),
	}
	if ctx.IsHead() {
		e.BytesOut = 0 // fasthttp sends a HEAD answer's headers only
	}
	if !x.unparsed {
		e.Method, e.Path = ctx.Method(), ctx.Request.URI().PathOriginal()
	}
	if x.code != 0 {
		e.Code = x.code.String()
	}
	if x.p != nil {
		e.Service, e.Branch, e.Client = x.p.ServiceIDBytes, x.p.BranchIDBytes, x.p.ClientIDBytes
	}
	g.cfg.Access.Write(&e)
}

// ErrorHandler answers requests fasthttp refuses before any handler runs.
// A body over the server's limit is refused from its Content-Length, before
// it is read: IMAGE_SIZE_TOO_LARGE on verify routes (whose bodies carry
// images), VALIDATION_ERROR elsewhere, in the path's version. A chunked
// body that runs over it is refused alike, in the format HeaderReceived
// remembered (fasthttp has reset the request). Anything else fasthttp could
// not read (a head over its buffer, cut short by the read timeout, with a
// bare line feed or malformed, a malformed chunked body, ambiguous framing)
// has been reset, so its path is gone: VALIDATION_ERROR in the version of
// the route of the head the connection read last (see Listen), v2 on a
// connection Listen did not accept.
//
// A connection that sent nothing before the read timeout (or failed before
// its first byte) is closed without an answer: there is no request, and a
// response nobody asked for could be read as the answer to the client's
// next request on that connection. fasthttp passes the bare read error
// then, and also when a body was cut short; the request has been reset, so
// that one is closed without an answer too.
func (g *Gateway) ErrorHandler(ctx *fasthttp.RequestCtx, err error) {
	if _, bare := err.(*net.OpError); bare {
		g.metrics.unanswered.Inc() // first: a client that saw the close may read the metric next
		ctx.Conn().Close()         // fasthttp's error response then goes nowhere
		return
	}
	x := g.begin(len(Routes))
	defer g.finish(ctx, &x)
	x.unparsed = true // the request was reset
	v, code := versionOfConn(ctx.Conn()), api.Validation
	var broken fasthttp.ErrBrokenChunk
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge) && ctx.Request.Header.ContentLength() > 0: // refused from its Content-Length: the head is there
		x.unparsed = false
		v, code = refusalOfBody(ctx.Method(), ctx.Path())
	case errors.Is(err, fasthttp.ErrBodyTooLarge): // a chunked body that ran over: its format remembered by HeaderReceived
		if rv, rc, ok := g.chunked.take(&ctx.Request.Header); ok {
			v, code = rv, rc
		}
	case errors.As(err, &broken): // a malformed chunked body: its version remembered by HeaderReceived
		if rv, _, ok := g.chunked.take(&ctx.Request.Header); ok {
			v = rv
		}
	}
	g.reject(ctx, &x, v, code)
	ctx.SetConnectionClose()
}

// versionOfPath tells the version of a path no route claims (or none with
// the request's method): v2 under /v2 and /b2b, and under the first
// segment of a v2 route at the root (/banks, /qr, /bank-accounts,
// /health); v1 elsewhere.
func versionOfPath(p []byte) api.Version {
	seg, _, _ := bytes.Cut(bytes.TrimPrefix(p, []byte("/")), []byte("/"))
	if v2Segments[string(seg)] {
		return api.V2
	}
	return api.V1
}

// v2Segments are the first path segments of the v2 routes.
var v2Segments = func() map[string]bool {
	m := map[string]bool{"v2": true, "b2b": true}
	for _, rt := range Routes {
		if rt.Version == api.V2 {
			seg, _, _ := strings.Cut(strings.TrimPrefix(rt.Path, "/"), "/")
			m[seg] = true
		}
	}
	return m
}()

// serve runs one public request through authentication, the caller's state,
// the IP allow list, permissions and the rate limit, then forwards it.
func (g *Gateway) serve(ctx *fasthttp.RequestCtx, rt *Route, idx int) {
	x := g.begin(idx)
	defer g.finish(ctx, &x)
	h := &ctx.Request.Header
	if code := screen(h); code != 0 {
		g.reject(ctx, &x, rt.Version, code)
		if code == api.Validation {
			ctx.SetConnectionClose() // a head read two ways may frame its body two ways
		}
		return
	}
	var (
		p    *authcache.Principal
		code api.Code
	)
	switch {
	case rt.Auth == AuthClient:
		p, code = g.signed(ctx, authcache.Client, x.start)
	case rt.Auth == AuthBranch && (len(h.PeekCanonical(hSignature)) > 0 || len(h.PeekCanonical(hAPIKey)) > 0):
		p, code = g.signed(ctx, authcache.Branch, x.start)
		if p != nil {
			p = p.AsSigned()
		}
	default:
		p, code = g.bearer(ctx, x.start)
	}
	if code == 0 {
		code = p.RefusalAt(x.start)
	}
	x.p = p
	if code == 0 {
		x.ip = g.clientIP(ctx)
		if !p.IPAllow.Contains(x.ip) {
			code = api.IPNotAllowed
		}
	}
	if code == 0 && rt.Permission != "" && p.Perms&api.PermissionBit(rt.Permission) == 0 {
		code = api.PermissionDenied
	}
	if code != 0 {
		g.reject(ctx, &x, rt.Version, code)
		if p != nil && rt.Budget != Unlimited { // the branch is known: so is its limit
			key, rate := g.budget(p, rt, x.start)
			setRateHeaders(&ctx.Response.Header, g.cfg.Limits.PeekAt(key, rate, x.start))
		}
		return
	}
	var d ratelimit.Decision
	if rt.Budget != Unlimited {
		key, rate := g.budget(p, rt, x.start)
		d = g.cfg.Limits.TakeAt(key, rate, x.start)
		if !d.Allowed {
			g.reject(ctx, &x, rt.Version, api.RateLimitExceeded)
			setRateHeaders(&ctx.Response.Header, d)
			var buf [20]byte
			ctx.Response.Header.SetCanonical(hRetryAfter, strconv.AppendInt(buf[:0], int64(max(1, d.RetryAfter)), 10))
			return
		}
	}
	x.end = g.forward(ctx, rt, &x)
	if rt.Budget != Unlimited {
		setRateHeaders(&ctx.Response.Header, d)
	}
}

// budget is the bucket a limited route draws from for p, and its rate in
// force at now.
func (g *Gateway) budget(p *authcache.Principal, rt *Route, now time.Time) (string, float64) {
	key, rate := p.BankKey, p.RateBank
	if rt.Budget == WalletBudget {
		key, rate = p.WalletKey, p.RateWall
	}
	return key, g.cfg.Adaptive.RateAt(rate, now)
}

// bearer authenticates Authorization: Bearer <branch key>.
func (g *Gateway) bearer(ctx *fasthttp.RequestCtx, now time.Time) (*authcache.Principal, api.Code) {
	hv := ctx.Request.Header.PeekCanonical(hAuthorization)
	if len(hv) == 0 {
		return nil, api.MissingAPIKey
	}
	key, ok := authn.Bearer(hv)
	if !ok {
		return nil, api.InvalidAPIKey
	}
	if _, ok := nonce.ParseUUID(key); !ok {
		return nil, api.InvalidAPIKey // malformed keys never reach core
	}
	return g.lookup(authcache.Branch, key, now)
}

func (g *Gateway) lookup(k authcache.Kind, key []byte, now time.Time) (*authcache.Principal, api.Code) {
	p, err := g.cfg.Auth.Lookup(k, key, now)
	switch {
	case err == nil:
		return p, 0
	case err == authcache.ErrUnknown:
		return nil, api.InvalidAPIKey
	}
	g.cfg.Log.Error("auth lookup failed", "err", err)
	return nil, api.APIServerError
}

// signed authenticates a signed request (spec 5.2): key, timestamp window,
// signature over the raw body, then the nonce, in that order, so only
// correctly signed requests can fill the nonce store.
func (g *Gateway) signed(ctx *fasthttp.RequestCtx, k authcache.Kind, now time.Time) (*authcache.Principal, api.Code) {
	h := &ctx.Request.Header
	key := h.PeekCanonical(hAPIKey)
	if len(key) == 0 {
		return nil, api.MissingAPIKey
	}
	if k == authcache.Branch {
		if _, ok := nonce.ParseUUID(key); !ok {
			return nil, api.InvalidAPIKey
		}
	} else if !isHex64(key) {
		return nil, api.InvalidAPIKey
	}
	p, code := g.lookup(k, key, now)
	if code != 0 {
		return nil, code
	}
	tsRaw := h.PeekCanonical(hTimestamp)
	ts, ok := authn.ParseTimestamp(tsRaw)
	if !ok || !authn.InWindow(ts, now.Unix()) {
		return nil, api.InvalidTimestamp
	}
	nonceRaw, sig := h.PeekCanonical(hNonce), h.PeekCanonical(hSignature)
	n, ok := nonce.ParseUUID(nonceRaw)
	if !ok || p.Signer == nil {
		return nil, api.InvalidSignature
	}
	bp := g.bufs.Get().(*[]byte)
	sts := authn.AppendStringToSign((*bp)[:0], h.Method(), authn.SignedPath(h.RequestURI()), tsRaw, nonceRaw, ctx.Request.Body())
	valid, scope := p.Signer.Verify(sts, sig), p.NonceClient
	if !valid && p.PrevSigner != nil && now.Before(p.PrevEnds) { // a rotation's overlap: the previous secret, second
		valid, scope = p.PrevSigner.Verify(sts, sig), p.PrevNonceClient
	}
	*bp = sts
	g.bufs.Put(bp)
	if !valid {
		return nil, api.InvalidSignature
	}
	switch err := g.cfg.Nonces.Use(p.ServiceID, scope, n, time.Unix(ts, 0)); err {
	case nil:
		return p, 0
	case nonce.ErrDuplicate:
		return nil, api.DuplicateNonce
	case nonce.ErrOutsideWindow, nonce.ErrBeforeStart:
		return nil, api.InvalidTimestamp
	default: // the store is full: refuse rather than forget (429 with Retry-After)
		return nil, api.RateLimitExceeded
	}
}

func isHex64(b []byte) bool {
	if len(b) != 64 {
		return false
	}
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// clientIP is the caller's address: the peer, or the right-most
// X-Forwarded-For address not a trusted proxy when the peer is one.
// X-Forwarded-For is read only then (fast path: a peer that is no proxy).
func (g *Gateway) clientIP(ctx *fasthttp.RequestCtx) netip.Addr {
	peer, _ := netip.AddrFromSlice(ctx.RemoteIP())
	peer = peer.Unmap()
	if !g.cfg.Trusted.Contains(peer) {
		return iplist.ClientIP(peer, nil, g.cfg.Trusted)
	}
	all := ctx.Request.Header.PeekAll("X-Forwarded-For")
	switch len(all) {
	case 0:
		return iplist.ClientIP(peer, nil, g.cfg.Trusted)
	case 1:
		return iplist.ClientIP(peer, all[0], g.cfg.Trusted)
	}
	return iplist.ClientIP(peer, bytes.Join(all, []byte(",")), g.cfg.Trusted)
}

// reject writes the pre-rendered body of code for version v and records
// code as the exchange's refusal.
func (g *Gateway) reject(ctx *fasthttp.RequestCtx, x *exchange, v api.Version, code api.Code) {
	x.code = code
	r := g.rejects[code]
	ctx.SetContentType("application/json")
	if code == api.RateLimitExceeded {
		ctx.Response.Header.Set("Retry-After", "1") // the limiter sets its own value after this
	}
	if v == api.V1 {
		ctx.SetStatusCode(r.v1Status)
		ctx.SetBody(r.v1)
	} else {
		ctx.SetStatusCode(r.v2Status)
		ctx.SetBody(r.v2)
	}
	g.metrics.rejected(code)
}

// InHead reports whether raw (RequestHeader.RawHeaders: the header lines
// as received, without a chunked body's trailer) has a field named name,
// in any case, spaces between the name and its colon or not. A line that
// starts with a space or a tab continues the previous field's value
// (obs-fold): it names no field, whatever it holds.
func InHead(raw, name []byte) bool {
	return anyLine(raw, func(line []byte) bool {
		if len(line) == 0 || line[0] == ' ' || line[0] == '\t' {
			return false
		}
		k, _, ok := bytes.Cut(line, []byte(":"))
		return ok && bytes.EqualFold(bytes.TrimRight(k, " \t"), name)
	})
}

// anyLine reports whether fn holds for a line of raw (split at '\n').
func anyLine(raw []byte, fn func(line []byte) bool) bool {
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if fn(line) {
			return true
		}
	}
	return false
}

// folded reports whether raw (RequestHeader.RawHeaders) has a line folded
// into the one before (obs-fold: it starts with a space or a tab). fasthttp
// joins such a line to the field above it; a front end that passes it on,
// or reads it as a field of its own, sees another request: a second
// spelling of a credential that load balancers hash on, or of the framing.
// RFC 9112 5.2 lets a server refuse it with 400, as the edge does.
func folded(raw []byte) bool {
	_, rest, _ := bytes.Cut(raw, []byte("\n")) // a line after the first
	return anyLine(rest, func(line []byte) bool { return len(line) > 0 && (line[0] == ' ' || line[0] == '\t') })
}

// setRateHeaders writes the rate headers in the spec's casing
// (X-RateLimit-Limit), which fasthttp would otherwise normalise.
func setRateHeaders(h *fasthttp.ResponseHeader, d ratelimit.Decision) {
	var buf [20]byte
	h.SetCanonical(hRateLimit, strconv.AppendInt(buf[:0], int64(d.Limit), 10))
	h.SetCanonical(hRateRemaining, strconv.AppendInt(buf[:0], int64(d.Remaining), 10))
	h.SetCanonical(hRateReset, strconv.AppendInt(buf[:0], int64(d.Reset), 10))
}

// screen is one pass over a request's header names before anything else:
// it deletes internal headers a client sent and a Trailer declaration (which
// would make fasthttp leave the named headers, the edge's own among them,
// out of the request to core), and refuses
//   - a folded header line (obs-fold, see folded): VALIDATION_ERROR;
//   - a compressed body (Content-Encoding): the edge bounds bodies as sent,
//     and a multipart body would be inflated without bound further on;
//   - more than one credential header (two Authorization or X-API-Key
//     headers, or one of each): load balancers hash on them to send a key to
//     one edge, its nonces and rate buckets, so an added or repeated header
//     the edge ignored would send a replay of a signed request, or a share
//     of a branch's rate, to another edge.
//
// An X-API-Key in a chunked body's trailer, out of the load balancers'
// sight, is deleted: the request has no key.
//
// Most requests have none of these and pay one comparison per header.
func screen(h *fasthttp.RequestHeader) api.Code {
	var internal, trailer, encoded, apiKey, chunked bool
	creds := 0
	for k, v := range h.All() {
		switch {
		case len(k) > 7 && (k[0]|0x20) == 'x' && k[1] == '-' && (k[2]|0x20) == 's' && (k[3]|0x20) == 'l' &&
			(k[4]|0x20) == 'i' && (k[5]|0x20) == 'p' && k[6] == '-' || bytes.EqualFold(k, hRequestID):
			internal = true
		case bytes.Equal(k, hAuthorization):
			creds++
		case bytes.Equal(k, hAPIKey):
			creds++
			apiKey = true
		case bytes.Equal(k, hContentEncoding):
			encoded = encoded || !bytes.EqualFold(v, identity)
		case bytes.Equal(k, hTrailer):
			trailer = true
		case bytes.Equal(k, hTransferEncoding):
			chunked = true
		}
	}
	if internal {
		for _, name := range api.InternalHeaders {
			h.Del(name)
		}
	}
	if trailer {
		h.Del("Trailer")
	}
	if folded(h.RawHeaders()) {
		return api.Validation
	}
	if apiKey && chunked && !InHead(h.RawHeaders(), hAPIKey) {
		// fasthttp adds a chunked body's trailer fields to the headers
		// (all but Authorization and a few others). A key there is out of
		// the load balancers' sight: no credential.
		delCanonical(h, hAPIKey)
		creds--
	}
	switch {
	case encoded:
		return api.Validation
	case creds > 1:
		return api.InvalidAPIKey
	}
	return 0
}
