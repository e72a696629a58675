// Package server is core's HTTP interface: the verification and info
// endpoints the edge forwards to, answering in each route's API version.
// Core trusts the identity headers of a request only when it carries the
// edge's shared token.
package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/jobs"
	"github.com/slipverify/slipverify/core/secret"
	"github.com/slipverify/slipverify/core/store"
	"github.com/slipverify/slipverify/core/verify"
)

// Server serves core's routes.
type Server struct {
	verifier  *verify.Verifier
	jobs      *jobs.Jobs
	store     store.Store
	box       *secret.Box
	edgeToken []byte
	log       *slog.Logger
	banks     json.RawMessage // the bank list, encoded once

	keysSeen sync.Map // key digest → time.Time: when an edge last fetched its record

	inflight    atomic.Int64
	maxInflight int64
	draining    atomic.Bool // Drain was called: /ready fails
	metrics     *coreMetrics
}

// New returns a Server. jobs runs async verification (nil: the async
// routes do not exist); box opens the secrets the edge needs; edgeToken is
// the secret the edge sends in api.HeaderEdgeToken; above maxInflight
// concurrent requests core marks its answers with api.HeaderOverload.
func New(v *verify.Verifier, j *jobs.Jobs, st store.Store, box *secret.Box, edgeToken string, maxInflight int, log *slog.Logger) *Server {
	banks, err := json.Marshal(bank.Banks())
	if err != nil {
		panic(err) // a static list of strings always encodes
	}
	s := &Server{verifier: v, jobs: j, store: st, box: box, edgeToken: []byte(edgeToken), log: log, banks: banks,
		maxInflight: int64(maxInflight)}
	s.metrics = newMetrics(s)
	return s
}

// caller is who a request acts for, from the edge's identity headers.
type caller struct {
	version   api.Version
	serviceID string
	branchID  string
	clientID  string      // B2B client (its key's digest), on /b2b routes
	nonce     store.Nonce // a signed request's, for the write it makes to claim
}

// need says which identity headers a route requires.
type need uint8

const (
	anyone  need = iota // the edge token only
	branch              // a branch key's service and branch
	service             // a B2B client's service
)

// handler answers a request with the data of a success or an error.
type handler func(ctx *fasthttp.RequestCtx, c caller) (any, error)

// Handler returns the request handler of all routes.
func (s *Server) Handler() fasthttp.RequestHandler {
	r := router.New()
	r.HandleMethodNotAllowed = false // an unknown method is an unknown endpoint
	r.GET("/health", s.health)
	r.GET("/v2/health", s.health)
	r.GET("/ready", s.ready)
	r.GET("/metrics", s.writeMetrics)
	r.GET("/debug/pprof/{name:*}", s.profile)
	r.GET("/banks", s.guard(api.V2, anyone, s.bankList))
	r.GET("/v2/banks", s.guard(api.V2, anyone, s.bankList))
	r.POST("/qr/generate", s.guard(api.V2, anyone, s.generateQR))
	r.POST("/v2/qr/generate", s.guard(api.V2, anyone, s.generateQR))
	r.POST("/v2/verify/bank", s.guard(api.V2, branch, s.verifyBank))
	r.POST("/v2/verify/wallet", s.guard(api.V2, branch, s.verifyWallet))
	r.POST("/v2/verify/truewallet", s.guard(api.V2, branch, s.verifyWallet))
	r.GET("/v2/info", s.guard(api.V2, branch, s.info))
	if s.jobs != nil {
		r.POST("/v2/verify/bank/async", s.guard(api.V2, branch, s.submitAsync))
		r.POST("/v2/verify/bank/async/batch", s.guard(api.V2, branch, s.submitBatch))
		r.GET("/v2/verify/bank/jobs/{job}", s.guard(api.V2, branch, s.pollJob))
	}
	// Every v1 route also answers under /api/v1, the commercial API's
	// prefix: a client's base URL changes only its host.
	for _, prefix := range []string{"", api.V1Prefix} {
		r.GET(prefix+"/verify", s.guard(api.V1, branch, s.verifyBank))
		r.POST(prefix+"/verify", s.guard(api.V1, branch, s.verifyBank))
		r.POST(prefix+"/verify/wallet", s.guard(api.V1, branch, s.verifyWallet))
		r.POST(prefix+"/verify/truewallet", s.guard(api.V1, branch, s.verifyWallet))
		r.GET(prefix+"/me", s.guard(api.V1, branch, s.me))
	}
	s.manageRoutes(r)
	s.historyRoutes(r)
	r.GET(api.PathBranchAuth+"{digest}", s.guard(api.V2, anyone, s.branchAuth))
	r.GET(api.PathClientAuth+"{digest}", s.guard(api.V2, anyone, s.clientAuth))
	r.GET(api.PathUsageCounters, s.guard(api.V2, anyone, s.usageCounters))
	r.NotFound = func(ctx *fasthttp.RequestCtx) {
		s.Respond(ctx, versionOfPath(ctx.Path()), nil, api.E(api.NotFound))
	}
	r.PanicHandler = func(ctx *fasthttp.RequestCtx, p any) {
		s.log.Error("panic in handler", "path", string(ctx.Path()), "panic", p)
		s.Respond(ctx, versionOfPath(ctx.Path()), nil, api.E(api.InternalServerError))
	}
	return func(ctx *fasthttp.RequestCtx) {
		n := s.inflight.Add(1)
		defer s.inflight.Add(-1)
		r.Handler(ctx)
		if n > s.maxInflight {
			ctx.Response.Header.Set(api.HeaderOverload, "1")
		}
	}
}

// versionOfPath tells the version of a path no route claims: /v2 and /b2b
// paths are v2, the rest v1.
func versionOfPath(p []byte) api.Version {
	if hasPrefix(p, "/v2/") || hasPrefix(p, "/b2b/") || string(p) == "/v2" || string(p) == "/b2b" {
		return api.V2
	}
	return api.V1
}

func hasPrefix(p []byte, prefix string) bool {
	return len(p) >= len(prefix) && string(p[:len(prefix)]) == prefix
}

// guard admits a request only with the edge token and, when identity is
// needed, the identity headers, then runs h and writes its answer.
func (s *Server) guard(v api.Version, who need, h handler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		c := caller{version: v}
		if !s.fromEdge(ctx) {
			s.refuse(ctx, v)
			return
		}
		c.serviceID = string(ctx.Request.Header.Peek(api.HeaderService))
		c.branchID = string(ctx.Request.Header.Peek(api.HeaderBranch))
		c.clientID = string(ctx.Request.Header.Peek(api.HeaderB2BClient))
		c.nonce = nonceOf(ctx)
		if who == branch && (c.serviceID == "" || c.branchID == "") || who == service && (c.serviceID == "" || c.clientID == "") {
			s.Respond(ctx, v, nil, api.E(api.MissingAPIKey))
			return
		}
		data, err := h(ctx, c)
		s.Respond(ctx, v, data, err)
	}
}

// nonceOf is the nonce of a signed request, as the edge passes it on
// (api.HeaderNonce); the zero Nonce for any other request.
func nonceOf(ctx *fasthttp.RequestCtx) store.Nonce {
	ts, n, ok := strings.Cut(string(ctx.Request.Header.Peek(api.HeaderNonce)), ":")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if !ok || err != nil || n == "" {
		return store.Nonce{}
	}
	return store.Nonce{Value: n, At: time.Unix(sec, 0)}
}

// Respond writes data, or err as the catalog renders it for version v.
func (s *Server) Respond(ctx *fasthttp.RequestCtx, v api.Version, data any, err error) {
	ctx.SetContentType("application/json")
	if id := ctx.Request.Header.Peek(api.HeaderRequestID); len(id) > 0 {
		ctx.Response.Header.SetBytesV(api.HeaderRequestID, id)
	}
	if csv, ok := data.(csvAnswer); ok && err == nil {
		ctx.SetContentType("text/csv; charset=utf-8")
		ctx.SetBody(csv)
		s.metrics.answered(nil, ctx.Time())
		return
	}
	if err == nil {
		status := fasthttp.StatusOK
		if w, ok := data.(withStatus); ok {
			status, data = w.status, w.data
		}
		body, err2 := api.RenderOK(v, data)
		if err2 == nil {
			ctx.SetStatusCode(status)
			ctx.SetBody(body)
			s.metrics.answered(nil, ctx.Time())
			return
		}
		err = &api.Error{Code: api.InternalServerError, Cause: err2}
	}
	e := api.Internal(err)
	s.metrics.answered(e, ctx.Time())
	switch e.Code {
	case api.RateLimitExceeded: // a branch's unfinished async jobs at their bound
		ctx.Response.Header.Set("Retry-After", "1")
	case api.SlipPending:
		e.RetryAfter = s.pendingWait()
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	status, body := api.RenderError(v, e)
	if status >= 500 {
		s.log.Error("request failed", "path", string(ctx.Path()), "request_id",
			string(ctx.Request.Header.Peek(api.HeaderRequestID)), "code", e.Code.String(), "err", e.Error())
	}
	ctx.SetStatusCode(status)
	ctx.SetBody(body)
}

// defaultPendingWait is how long a client is told to wait before it asks
// again about a pending slip when core runs no async verification, whose
// retry schedule says it otherwise.
const defaultPendingWait = 30 * time.Second

// pendingWait is the retryAfter of SLIP_PENDING, in seconds: the wait
// before an async verification's first retry (SLIP_VERIFY_RETRY_SCHEDULE),
// the time core itself lets a pending slip settle before it asks the bank
// again. No bank connector's answer says how long a slip stays pending.
func (s *Server) pendingWait() int {
	wait := defaultPendingWait
	if s.jobs != nil && len(s.jobs.VerifyRetries) > 0 {
		wait = s.jobs.VerifyRetries[0]
	}
	return max(1, int((wait+time.Second-1)/time.Second))
}

// errNotEdge refuses a request without the edge's token: 403, unlike an
// unknown key (401), so an edge with the wrong SLIP_EDGE_TOKEN can tell
// its own misconfiguration from its callers' bad keys.
var errNotEdge = api.Errorf(api.PermissionDenied, "this listener serves the edge only: X-Slip-Edge-Token is missing or wrong")

// refuse answers a request without the edge's token.
func (s *Server) refuse(ctx *fasthttp.RequestCtx, v api.Version) {
	ctx.Response.Header.Set(api.HeaderTokenRefused, "1")
	s.Respond(ctx, v, nil, errNotEdge)
}

// fromEdge reports whether the request carries the edge's token.
func (s *Server) fromEdge(ctx *fasthttp.RequestCtx) bool {
	return subtle.ConstantTimeCompare(ctx.Request.Header.Peek(api.HeaderEdgeToken), s.edgeToken) == 1
}

// health answers without the edge token (probes send none); one sent must
// be right, so the edge's health check finds a token core refuses.
func (s *Server) health(ctx *fasthttp.RequestCtx) {
	if len(ctx.Request.Header.Peek(api.HeaderEdgeToken)) > 0 && !s.fromEdge(ctx) {
		s.refuse(ctx, api.V2)
		return
	}
	data, err := map[string]string{"status": "ok", "tier": "core"}, s.store.Ping()
	s.Respond(ctx, api.V2, data, err)
}

// Drain makes /ready fail, so the edges stop sending requests here before
// core stops accepting them. Requests are still served.
func (s *Server) Drain() { s.draining.Store(true) }

// ready answers the edges' readiness probe, and an orchestrator's: as
// health while core takes new requests, 503 once it drains.
func (s *Server) ready(ctx *fasthttp.RequestCtx) {
	if s.draining.Load() {
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetContentType("application/json")
		ctx.SetBody(notReady)
		return
	}
	s.health(ctx)
}

// notReady is /ready's answer while core drains.
var notReady = []byte(`{"success":false,"error":{"code":"API_SERVER_ERROR","message":"core is shutting down"}}`)

func (s *Server) bankList(ctx *fasthttp.RequestCtx, _ caller) (any, error) {
	return s.banks, nil
}

// verifyBank answers v2 with the verification data, v1 with the slip
// itself.
func (s *Server) verifyBank(ctx *fasthttp.RequestCtx, c caller) (any, error) {
	req, err := parseVerify(ctx, c, true)
	if err != nil {
		return nil, err
	}
	res, err := s.verifier.Bank(requestContext(ctx), req)
	if err != nil || c.version == api.V2 {
		return res, err
	}
	return res.RawSlip, nil
}

// verifyWallet answers v2 with the verification data, v1 with the wallet
// slip itself.
func (s *Server) verifyWallet(ctx *fasthttp.RequestCtx, c caller) (any, error) {
	req, err := parseVerify(ctx, c, false)
	if err != nil {
		return nil, err
	}
	res, err := s.verifier.Wallet(requestContext(ctx), req)
	if err != nil || c.version == api.V2 {
		return res, err
	}
	return res.RawSlip, nil
}

// requestContext is the context of one request's work. fasthttp's
// RequestCtx is a context.Context that is done as soon as the server begins
// to shut down; the work of a request in flight then would fail (a bank
// lookup cancelled after it may have been billed, an image fetch cut), when
// the shutdown's grace is there to let it finish. So the request's work is
// not cancelled by the shutdown: each step has its own timeout, and the
// grace bounds the rest.
func requestContext(ctx *fasthttp.RequestCtx) context.Context { return context.WithoutCancel(ctx) }
