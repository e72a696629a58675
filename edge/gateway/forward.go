package gateway

import (
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/edge/authcache"
)

// credentialHeaders are not forwarded: core trusts the edge's identity
// headers, and client secrets need not travel further.
var credentialHeaders = []string{"Authorization", "X-API-Key", "X-Signature", "X-Nonce", "X-Timestamp"}

// forward sends the request to core and copies core's answer back. The
// request is reused in place: fasthttp's reverse-proxy pattern.
func (g *Gateway) forward(ctx *fasthttp.RequestCtx, rt *Route, p *authcache.Principal, ip netip.Addr) {
	h := &ctx.Request.Header
	for _, name := range credentialHeaders {
		h.Del(name)
	}
	var buf [64]byte
	h.Set(api.HeaderEdgeToken, g.cfg.EdgeToken)
	h.Set(api.HeaderService, p.ServiceID)
	if p.BranchID != "" {
		h.Set(api.HeaderBranch, p.BranchID)
	}
	if p.ClientID != "" {
		h.Set(api.HeaderB2BClient, p.ClientID)
	}
	h.Set(api.HeaderVersion, rt.Version.String())
	h.SetBytesV(api.HeaderClientIP, ip.AppendTo(buf[:0]))
	id := strconv.AppendUint(append(buf[:0], g.reqPrefix...), g.reqSeq.Add(1), 16)
	h.SetBytesV(api.HeaderRequestID, id)
	closeAfter := h.ConnectionClose()
	h.ResetConnectionClose()

	start := g.cfg.Now()
	err := g.cfg.Core.Do(&ctx.Request, &ctx.Response)
	latency := g.cfg.Now().Sub(start)
	if closeAfter {
		h.SetConnectionClose()
	}
	if err != nil {
		g.cfg.Adaptive.Observe(latency, true)
		g.cfg.Log.Error("forward to core failed", "path", string(ctx.Path()), "err", err)
		ctx.Response.Reset()
		g.reject(ctx, rt.Version, api.APIServerError)
		return
	}
	rh := &ctx.Response.Header
	overloaded := len(rh.Peek(api.HeaderOverload)) > 0 || ctx.Response.StatusCode() == fasthttp.StatusServiceUnavailable
	rh.Del(api.HeaderOverload)
	rh.Del("Connection")
	rh.Del("Server")
	g.cfg.Adaptive.Observe(latency, overloaded)
}

// coreHealth remembers whether core answered its health check lately, so
// /health on the edge asks core at most once per interval.
type coreHealth struct {
	mu      sync.Mutex
	checked atomic.Int64 // Unix nanoseconds of the last check
	up      atomic.Bool
}

const healthInterval = time.Second

// coreUp reports whether core is reachable, asking it when the last answer
// is older than healthInterval.
func (g *Gateway) coreUp() bool {
	now := g.cfg.Now().UnixNano()
	if now-g.health.checked.Load() < int64(healthInterval) {
		return g.health.up.Load()
	}
	if !g.health.mu.TryLock() {
		return g.health.up.Load() // another request is asking
	}
	defer g.health.mu.Unlock()
	req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(res)
	req.SetRequestURI("http://" + g.cfg.Core.Addr + "/health")
	err := g.cfg.Core.DoTimeout(req, res, time.Second)
	g.health.up.Store(err == nil && res.StatusCode() == fasthttp.StatusOK)
	g.health.checked.Store(g.cfg.Now().UnixNano())
	return g.health.up.Load()
}

var (
	healthOK       = []byte(`{"success":true,"data":{"status":"ok","tier":"edge","core":"ok"}}`)
	healthDown     = []byte(`{"success":false,"error":{"code":"API_SERVER_ERROR","message":"core is unreachable"}}`)
	healthDraining = []byte(`{"success":false,"error":{"code":"API_SERVER_ERROR","message":"edge is shutting down"}}`)
)

// serveHealth answers /health: 200 when the edge serves and core answers,
// 503 otherwise.
func (g *Gateway) serveHealth(ctx *fasthttp.RequestCtx, idx int) {
	start := g.cfg.Now()
	ctx.SetContentType("application/json")
	switch {
	case g.draining.Load():
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBody(healthDraining)
	case !g.coreUp():
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBody(healthDown)
	default:
		ctx.SetBody(healthOK)
	}
	g.metrics.observe(idx, ctx.Response.StatusCode(), g.cfg.Now().Sub(start))
}
