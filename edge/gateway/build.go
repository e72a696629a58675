package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/edge/accesslog"
	"github.com/slipverify/slipverify/edge/authcache"
	"github.com/slipverify/slipverify/edge/config"
	"github.com/slipverify/slipverify/edge/nonce"
	"github.com/slipverify/slipverify/edge/ratelimit"
	"github.com/slipverify/slipverify/edge/rawsock"
)

// FromConfig builds the edge's request path from its configuration, reading
// time from now. Close releases it.
func FromConfig(cfg config.Config, now func() time.Time, log *slog.Logger) (*Gateway, error) {
	trusted, err := cfg.Trusted()
	if err != nil {
		return nil, err
	}
	cores := NewCores(CoresConfig{
		Addrs: cfg.CoreAddrs(), Client: func(addr string) *fasthttp.HostClient { return newCoreClient(addr, cfg) },
		EdgeToken: cfg.EdgeToken, ProbeEvery: cfg.CoreProbe, ResolveEvery: cfg.CoreResolve, Now: now, Log: log,
	})
	// The client of every core: the request path's and the auth cache's.
	// Cores picks a core for each request and sends it on that core's own
	// client; this one only names core as the Host of a request without one.
	core := &fasthttp.HostClient{
		Addr: cfg.CoreAddrs()[0], Name: "edge", NoDefaultUserAgentHeader: true, DisablePathNormalizing: true,
		Transport: cores,
	}
	auth, err := authcache.New(authcache.Config{
		Core: core, EdgeToken: cfg.EdgeToken, TTL: cfg.AuthTTL, Timeout: 5 * time.Second,
	})
	if err != nil {
		cores.Close()
		return nil, err
	}
	access, err := accesslog.Open(cfg.AccessLog, os.Stderr, accesslog.Config{})
	if err != nil {
		auth.Close()
		cores.Close()
		return nil, err
	}
	cores.Start()
	adaptive := ratelimit.NewAdaptive(ratelimit.AdaptiveConfig{
		Now: now, Interval: cfg.AdaptInterval, MinFactor: cfg.MinFactor,
	})
	return New(Config{
		Core: core, Cores: cores, EdgeToken: cfg.EdgeToken, Auth: auth,
		// Timestamps have whole seconds: a nonce is kept a second longer than
		// the ±5 minutes a request may be off, so truncation never lets a
		// replay in at the window's edge.
		Nonces: nonce.New(nonce.Config{Window: 5*time.Minute + time.Second, MaxEntries: cfg.NonceMax, MaxPerClient: cfg.NoncePerClient,
			MaxPerService: cfg.NoncePerService, Now: now}),
		Limits: ratelimit.New(now), Adaptive: adaptive, Trusted: trusted,
		CoreTimeout: cfg.CoreTimeout, Now: now, Log: log, Access: access,
	}, NewMetrics(auth, adaptive)), nil
}

// newCoreClient is the edge's client of the core at addr: its own pool of
// keep-alive connections.
func newCoreClient(addr string, cfg config.Config) *fasthttp.HostClient {
	core := &fasthttp.HostClient{
		Addr:                     addr,
		Name:                     "edge",
		MaxConns:                 4096,
		MaxIdleConnDuration:      cfg.CoreIdle, // below core's idle timeout: the edge closes first
		ReadTimeout:              cfg.CoreTimeout,
		WriteTimeout:             cfg.CoreTimeout,
		MaxResponseBodySize:      16 << 20,
		NoDefaultUserAgentHeader: true,
		// retryCore is set below: it closes the pool once one connection
		// of it turns out closed by core.
		MaxIdemponentCallAttempts: maxCoreAttempts,
		DialTimeout:               dialCore,
		// core gets the path as the client sent it, which is the path the
		// edge's router matched and authorised: decoded and cleaned,
		// /v2/verify/bank/jobs/..%2F..%2F..%2F..%2Fverify would reach core
		// as /verify, outside the verify route's rate budget.
		DisablePathNormalizing: true,
	}
	core.RetryIfErr = func(_ *fasthttp.Request, _ int, err error) (bool, bool) { return retryCore(core, err) }
	return core
}

// dialCore dials core as fasthttp would (a timeout of 0 is its default
// one) and makes the connection's reads and writes raw system calls. A
// connection not made is errCoreUnreachable: the request can go to another
// core.
func dialCore(addr string, timeout time.Duration) (net.Conn, error) {
	dial := fasthttp.DialTimeout
	if timeout <= 0 {
		dial = func(addr string, _ time.Duration) (net.Conn, error) { return fasthttp.Dial(addr) }
	}
	c, err := dial(addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCoreUnreachable, err)
	}
	tcp, _ := c.(*net.TCPConn)
	return watchClosed(rawsock.WrapClient(c), tcp), nil
}

// SweepNonces releases the nonces of every client whose window has passed,
// including clients that went quiet (the store drops them lazily otherwise).
// The edge calls it once a minute, the nonce store's bucket.
func (g *Gateway) SweepNonces() { g.cfg.Nonces.Sweep() }

// Nonces returns the store of signed requests' nonces, for the edge to
// share them with other edges (edge/nonce/kafkanonce).
func (g *Gateway) Nonces() *nonce.Store { return g.cfg.Nonces }

// Metrics returns the gateway's metrics.
func (g *Gateway) Metrics() *Metrics { return g.metrics }

// AccessLog returns the access log, nil when it is off.
func (g *Gateway) AccessLog() *accesslog.Log { return g.cfg.Access }

// InvalidateAuth drops every cached auth record: core announced a change.
func (g *Gateway) InvalidateAuth() { g.cfg.Auth.Invalidate() }

// Close releases the gateway's cache and connections and writes the rest
// of the access log. Requests must have ended.
func (g *Gateway) Close() {
	g.cfg.Auth.Close()
	g.cores.Close()
	if g.cfg.Access != nil {
		if err := g.cfg.Access.Close(); err != nil {
			g.cfg.Log.Error("closing the access log", "err", err)
		}
	}
}

// maxCoreAttempts bounds the tries of one request to core: each but the
// last found a pooled connection core had closed (retryCore).
const maxCoreAttempts = 3

// retryCore sends a request to core again only when it was not sent at
// all: its pooled connection turned out closed by core while it was idle
// (errCoreClosed), as every one is after core restarted, so the rest of the
// pool is closed too. A request cut off after it was sent (a reset, core's
// close, its crash) is not: core may have acted on it.
func retryCore(core *fasthttp.HostClient, err error) (resetTimeout, retry bool) {
	if !errors.Is(err, errCoreClosed) {
		return false, false
	}
	core.CloseIdleConnections()
	return false, true
}
