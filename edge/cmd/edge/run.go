package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/fastlog"
	"github.com/slipverify/slipverify/core/lib/kafkalink"
	"github.com/slipverify/slipverify/core/lib/profiling"
	"github.com/slipverify/slipverify/core/lib/stream"
	"github.com/slipverify/slipverify/edge/accesslog"
	"github.com/slipverify/slipverify/edge/config"
	"github.com/slipverify/slipverify/edge/gateway"
	"github.com/slipverify/slipverify/edge/nonce/kafkanonce"
)

// maxBody admits a 4 MiB image as base64 or multipart with room to spare;
// core answers IMAGE_SIZE_TOO_LARGE for the image itself.
const maxBody = 8 << 20

func run(ctx context.Context, args []string, getenv func(string) string) error {
	cfg, err := config.Load(args, getenv)
	if err != nil {
		return err
	}
	if done, err := cfg.Done("edge", version, cfg.Validate); done {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("tier", "edge")
	gw, err := gateway.FromConfig(cfg, time.Now, log)
	if err != nil {
		return err
	}
	defer gw.Close()
	go func() {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				gw.SweepNonces()
			}
		}
	}()
	var link *kafkalink.Link
	if cfg.KafkaAddr != "off" {
		if link, err = kafkalink.Start(ctx, cfg.KafkaLink, stream.Brokers(cfg.KafkaAddr), log); err != nil {
			return err
		}
	}
	// share is nil without Kafka: the edge knows its own nonces only and
	// keeps refusing timestamps before its start.
	var share *kafkanonce.Share
	shareDone := make(chan struct{})
	shareCtx, stopShare := context.WithCancel(context.Background())
	defer func() { stopShare(); <-shareDone }() // after the listener: nonces accepted until then are published
	if cfg.KafkaAddr != "off" {
		go followConfig(ctx, cfg.KafkaAddr, link, gw, log)
		// A 2 ms linger: about a quarter less CPU a nonce than a write per
		// wake-up at 20,000 signed requests a second (BenchmarkShareCPU),
		// for 2 ms more before other edges know a nonce.
		share = kafkanonce.New(kafkanonce.Config{Brokers: stream.Brokers(cfg.KafkaAddr), Link: link, Store: gw.Nonces(),
			Queue: cfg.NonceQueue, Margin: cfg.NonceMargin, Linger: 2 * time.Millisecond, Log: log})
		gw.Nonces().SetJournal(share)
		go func() { defer close(shareDone); share.Run(shareCtx) }()
	} else {
		close(shareDone)
	}
	// replaying: signed requests are checked against nonces of this start
	// only, so /health and /ready fail until the replay of slip.nonces is
	// done (Bearer requests are served meanwhile).
	replaying := func() bool { return share != nil && !share.Ready() }
	if access := gw.AccessLog(); access != nil {
		go reopenOnHangup(ctx, access, log)
	}
	metrics := gw.Metrics()

	handler := gw.Handler()
	srv := &fasthttp.Server{
		Handler: notReadyWhileReplaying(share, handler),
		HeaderReceived: func(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
			gw.HeaderReceived(h) // a chunked body over the limit is refused in its route's format
			return closeOnAmbiguousFraming(h)
		},
		ErrorHandler:       gw.ErrorHandler,
		Logger:             fastlog.Logger{Log: log},
		Name:               "edge",
		ReadTimeout:        cfg.ReadTimeout, // from the first byte of a request to its last: slowloris ends here
		WriteTimeout:       30 * time.Second,
		IdleTimeout:        2 * time.Minute,
		MaxRequestBodySize: maxBody,
		// The body stays the bytes the client sent: a signature covers
		// them (spec 5.2), and core parses forms itself. fasthttp would
		// otherwise parse a multipart form here and write it out anew,
		// its parts reordered, for the signature check and for core.
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true,
		SecureErrorLogMessage:        true, // fasthttp would quote a malformed request, credentials included, in the log
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	errc := make(chan error, 2)
	// Raw sockets, each request head watched: an unreadable head is refused
	// in its route's version, one with a bare line feed at once.
	go func() { errc <- srv.Serve(gateway.Listen(ln)) }()
	if cfg.MetricsOn() {
		mln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			return err
		}
		msrv := &fasthttp.Server{Handler: func(c *fasthttp.RequestCtx) {
			if string(c.Path()) == "/ready" {
				// For an orchestrator's readiness check: the edge serves and is
				// not draining. Unlike /health it does not ask core: with core
				// down the edge still answers every request (API_SERVER_ERROR,
				// in the caller's format), better than a load balancer's page.
				if gw.Draining() {
					c.SetStatusCode(fasthttp.StatusServiceUnavailable)
					c.SetBodyString("draining\n")
					return
				}
				if replaying() {
					c.SetStatusCode(fasthttp.StatusServiceUnavailable)
					c.SetBodyString("replaying nonces\n")
					if share.Fallback() {
						c.SetBodyString("slip.nonces unreadable: timestamps before the start refused\n")
					}
					return
				}
				c.SetBodyString("ready\n")
				return
			}
			if profiling.Is(c.Path()) {
				// Profiles for go tool pprof: here, on the private
				// listener, never on the public one (the gateway's routes
				// answer anything else NOT_FOUND).
				profiling.Serve(c)
				return
			}
			c.SetContentType("text/plain; version=0.0.4")
			metrics.WritePrometheus(c)
			if share != nil {
				share.WritePrometheus(c)
			}
		}}
		go func() { errc <- msrv.Serve(mln) }()
		defer msrv.Shutdown()
	}
	log.Info("listening", "addr", ln.Addr().String(), "core", cfg.CoreAddr, "metrics", cfg.MetricsAddr, "version", version)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("draining", "for", cfg.Drain.String())
	gw.Drain()
	time.Sleep(cfg.Drain) // load balancers see /health fail before the listener closes
	// The grace covers the longest a forwarded request may wait for core:
	// core may have done (and billed) the work of one in flight.
	sctx, cancel := context.WithTimeout(context.Background(), cfg.CoreTimeout+time.Second)
	defer cancel()
	log.Info("shutting down")
	// Connections still open after the grace (a client that connected and
	// sent nothing) close with the process; that is not a failed shutdown.
	err = srv.ShutdownWithContext(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		log.Warn("closing connections still open after the grace")
		return nil
	}
	return err
}

// reopenOnHangup opens the access log's file again on every SIGHUP, after
// log rotation moved it away.
func reopenOnHangup(ctx context.Context, access *accesslog.Log, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if err := access.Reopen(); err != nil {
				log.Error("reopening the access log", "err", err)
			}
		}
	}
}

// contentLength is the field closeOnAmbiguousFraming looks for.
var contentLength = []byte("Content-Length")

// closeOnAmbiguousFraming closes the connection after a request that
// carries both Transfer-Encoding: chunked and Content-Length, which
// fasthttp reads by Transfer-Encoding but would keep reading after
// (RFC 9112 6.1: the server MUST close). A proxy in front that counted the
// Content-Length instead would otherwise have the rest of this request read
// as the next one, ahead of whatever request it sends next on the same
// connection. It runs once the header is read, before the body (which
// turns the framing into a plain length). Fast path: a request that is not
// chunked costs one compare.
func closeOnAmbiguousFraming(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if h.ContentLength() == -1 && gateway.InHead(h.RawHeaders(), contentLength) {
		h.SetConnectionClose()
	}
	return fasthttp.RequestConfig{} // the server's limits
}

// followConfig drops the cached auth records whenever core announces a
// change on slip.config. Every edge reads every event: its consumer group
// is its own, starting at the newest record (older changes are already in
// what it will fetch from core). A broker outage pauses it (stream.Resume
// tries again a second after each failure; the TTL keeps records fresh
// meanwhile), and each start drops the cache, since a change may have been
// missed while it was not following.
func followConfig(ctx context.Context, brokers string, link *kafkalink.Link, gw *gateway.Gateway, log *slog.Logger) {
	host, _ := os.Hostname()
	group := fmt.Sprintf("slip-edge-%s-%d-%d", host, os.Getpid(), time.Now().UnixNano())
	stream.Resume(ctx, log, "slip.config follower", time.Second, func(ctx context.Context) error {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers: stream.Brokers(brokers), Dialer: link.Dialer(), Topic: api.TopicConfig, GroupID: group,
			StartOffset: kafka.LastOffset, SessionTimeout: 6 * time.Second, MaxWait: 50 * time.Millisecond,
		})
		defer r.Close()
		gw.InvalidateAuth()
		for {
			if _, err := r.ReadMessage(ctx); err != nil {
				return err
			}
			gw.InvalidateAuth()
		}
	})
}

// Answers of /health while the nonces of slip.nonces are not replayed: in
// the gateway's format, API_SERVER_ERROR as when core is down.
var (
	healthReplaying = []byte(`{"success":false,"error":{"code":"API_SERVER_ERROR","message":"edge is replaying the nonces of slip.nonces"}}`)
	healthFallback  = []byte(`{"success":false,"error":{"code":"API_SERVER_ERROR","message":"edge cannot read slip.nonces: timestamps before its start are refused"}}`)
)

// notReadyWhileReplaying answers /health (and /v2/health) 503 while
// share is not done replaying, and hands every other request, and /health
// once the replay is done, to next. Fast path: one atomic load once
// replayed; without share (no Kafka), next itself.
func notReadyWhileReplaying(share *kafkanonce.Share, next fasthttp.RequestHandler) fasthttp.RequestHandler {
	if share == nil {
		return next
	}
	return func(c *fasthttp.RequestCtx) {
		if !share.Ready() {
			if p := c.Path(); string(p) == "/health" || string(p) == "/v2/health" {
				c.SetStatusCode(fasthttp.StatusServiceUnavailable)
				c.SetContentType("application/json")
				body := healthReplaying
				if share.Fallback() {
					body = healthFallback
				}
				c.SetBody(body)
				return
			}
		}
		next(c)
	}
}
