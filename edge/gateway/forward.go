package gateway

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
)

// Header names in canonical form, set without normalising them again on
// every request (the hot path: see BenchmarkHandler in bench/proxycompare).
var (
	hEdgeToken = []byte(api.HeaderEdgeToken)
	hService   = []byte(api.HeaderService)
	hBranch    = []byte(api.HeaderBranch)
	hB2BClient = []byte(api.HeaderB2BClient)
	hVersion   = []byte(api.HeaderVersion)
	hClientIP  = []byte(api.HeaderClientIP)
	hRequestID = []byte(api.HeaderRequestID)
	versions   = [3][]byte{api.V1: []byte("v1"), api.V2: []byte("v2")}
	schemeHTTP = []byte("http")

	// Names of headers a client sends, as fasthttp stores them, so they are
	// read and deleted without normalising the name again.
	hAuthorization    = canonical("Authorization")
	hAPIKey           = canonical("X-API-Key")
	hSignature        = canonical("X-Signature")
	hTimestamp        = canonical("X-Timestamp")
	hNonce            = canonical("X-Nonce")
	hOverload         = canonical(api.HeaderOverload)
	hTokenRefused     = canonical(api.HeaderTokenRefused)
	hContentEncoding  = canonical("Content-Encoding")
	hTrailer          = canonical("Trailer")
	hTransferEncoding = canonical("Transfer-Encoding")
	hExpect           = canonical("Expect")
	hNonceClaim       = []byte(api.HeaderNonce)
	identity          = []byte("identity")

	// Response headers. The rate headers keep the spec's casing
	// (X-RateLimit-Limit), which normalising would change.
	hRetryAfter    = canonical("Retry-After")
	hRateLimit     = []byte("X-RateLimit-Limit")
	hRateRemaining = []byte("X-RateLimit-Remaining")
	hRateReset     = []byte("X-RateLimit-Reset")
)

// canonical is a header name normalised as fasthttp stores parsed names.
func canonical(name string) []byte { return fasthttp.AppendNormalizedHeaderKey(nil, name) }

// delCanonical deletes the request header of canonical name k without
// normalising k again.
func delCanonical(h *fasthttp.RequestHeader, k []byte) {
	disabled := h.DisableNormalizing()
	h.DelBytes(k)
	if !disabled {
		h.EnableNormalizing()
	}
}

// forward sends the request to core and copies core's answer back. The
// request is reused in place: fasthttp's reverse-proxy pattern. The
// credential that authenticated it is not forwarded (a signed request's
// key and signature alike): core trusts the identity headers, and a key
// need not travel further; a signed request's timestamp and nonce go on as
// api.HeaderNonce only. Nor does Expect: the edge
// answered the client's 100-continue itself and holds the whole body, so
// core is not asked to answer one (fasthttp's server writes it under the
// write deadline of the connection's previous answer: on a connection idle
// longer than that, core closes it while the body is on its way). It
// returns when core answered.
func (g *Gateway) forward(ctx *fasthttp.RequestCtx, rt *Route, x *exchange) time.Time {
	h, p := &ctx.Request.Header, x.p
	delCanonical(h, hExpect)
	if p.ClientID != "" || p.Signed {
		// The nonce goes on for core to claim with the write the request
		// makes: this edge's own nonce store cannot see a copy another
		// edge accepted in the same moment.
		var claim [96]byte
		c := append(append(append(claim[:0], h.PeekCanonical(hTimestamp)...), ':'), h.PeekCanonical(hNonce)...)
		h.SetCanonical(hNonceClaim, c)
		delCanonical(h, hAPIKey)
		delCanonical(h, hSignature)
		delCanonical(h, hTimestamp)
		delCanonical(h, hNonce)
	} else {
		delCanonical(h, hAuthorization)
	}
	var buf [64]byte
	h.SetCanonical(hEdgeToken, g.edgeToken)
	h.SetCanonical(hService, p.ServiceIDBytes)
	if p.BranchID != "" {
		h.SetCanonical(hBranch, p.BranchIDBytes)
	}
	if p.ClientID != "" {
		h.SetCanonical(hB2BClient, p.ClientIDBytes)
	}
	h.SetCanonical(hVersion, versions[rt.Version])
	h.SetCanonical(hClientIP, x.ip.AppendTo(buf[:0]))
	h.SetCanonical(hRequestID, x.id())
	if u := ctx.Request.URI(); len(u.Host()) == 0 || string(u.Scheme()) != "http" {
		// fasthttp's client sends the target's host as Host, and refuses
		// to send a request without one or an https target over plain
		// HTTP (before any byte reaches core): HTTP/1.0 has no Host, and an
		// absolute-form target names its own scheme and may name no host
		// (http:///v2/info, which core's server would refuse as sent).
		if len(u.Host()) == 0 {
			u.SetHostBytes(g.coreAddr)
		}
		u.SetSchemeBytes(schemeHTTP)
	}
	closeAfter := h.ConnectionClose()
	h.ResetConnectionClose()

	err := g.cfg.Core.Do(&ctx.Request, &ctx.Response)
	end := g.cfg.Now()
	if closeAfter {
		h.SetConnectionClose()
	}
	if err != nil {
		// Not counted by the rate factor: a failed exchange (a connection
		// cut, a request the edge could not send, an answer not given in
		// time) is not core saying it is overloaded.
		g.cfg.Log.Error("forward to core failed", "path", string(ctx.Path()), "err", err)
		ctx.Response.Reset()
		g.reject(ctx, x, rt.Version, api.APIServerError)
		return end
	}
	rh := &ctx.Response.Header
	if len(rh.PeekCanonical(hTokenRefused)) > 0 {
		g.cfg.Log.Error("core refused the edge token (SLIP_EDGE_TOKEN differs from core's)", "path", string(ctx.Path()))
		ctx.Response.Reset()
		g.reject(ctx, x, rt.Version, api.APIServerError)
		return end
	}
	rh.ResetConnectionClose() // core's connection is not the client's
	// Core's own overload signal is the only thing that lowers every
	// tenant's rate: not a slow answer (a client's big picture, a slow
	// bank, a slow image URL), not a failed exchange.
	overloaded := ctx.Response.StatusCode() == fasthttp.StatusServiceUnavailable
	if len(rh.PeekCanonical(hOverload)) > 0 {
		overloaded = true
		rh.Del(api.HeaderOverload)
	}
	if overloaded {
		g.cfg.Adaptive.Overload(end)
	}
	return end
}

var (
	healthOK       = []byte(`{"success":true,"message":"success","data":{"status":"ok","tier":"edge","core":"ok"}}`)
	healthDown     = []byte(`{"success":false,"error":{"code":"API_SERVER_ERROR","message":"core is unreachable"}}`)
	healthDraining = []byte(`{"success":false,"error":{"code":"API_SERVER_ERROR","message":"edge is shutting down"}}`)
)

// serveHealth answers /health: 200 when the edge serves and a core is
// ready, 503 otherwise.
func (g *Gateway) serveHealth(ctx *fasthttp.RequestCtx, idx int) {
	x := g.begin(idx)
	ctx.SetContentType("application/json")
	switch {
	case g.draining.Load():
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBody(healthDraining)
	case !g.cores.Ready(g.cfg.Now()):
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBody(healthDown)
	default:
		ctx.SetBody(healthOK)
	}
	g.finish(ctx, &x)
}
