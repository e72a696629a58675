package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/admin"
	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/bank/httpbank"
	"github.com/slipverify/slipverify/core/bank/kbank"
	"github.com/slipverify/slipverify/core/bank/rdcw"
	"github.com/slipverify/slipverify/core/bank/route"
	"github.com/slipverify/slipverify/core/bank/sandbox"
	"github.com/slipverify/slipverify/core/bank/scb"
	"github.com/slipverify/slipverify/core/bank/upstream"
	"github.com/slipverify/slipverify/core/config"
	"github.com/slipverify/slipverify/core/jobs"
	"github.com/slipverify/slipverify/core/lib/egress"
	"github.com/slipverify/slipverify/core/lib/fastlog"
	"github.com/slipverify/slipverify/core/lib/kafkalink"
	"github.com/slipverify/slipverify/core/lib/seedfile"
	"github.com/slipverify/slipverify/core/lib/stream"
	"github.com/slipverify/slipverify/core/outbox"
	"github.com/slipverify/slipverify/core/qrscan"
	"github.com/slipverify/slipverify/core/secret"
	"github.com/slipverify/slipverify/core/seed"
	"github.com/slipverify/slipverify/core/server"
	"github.com/slipverify/slipverify/core/store"
	"github.com/slipverify/slipverify/core/store/pgstore"
	"github.com/slipverify/slipverify/core/verify"
)

// maxBody admits a 4 MiB image as base64 or multipart with room to spare,
// so an oversized image is answered IMAGE_SIZE_TOO_LARGE, not a bare 413.
const maxBody = 8 << 20

// defaultGCPercent is the garbage collector's GOGC when none is given.
// Core's heap is small (its records live in bbolt's file mapping, outside
// it) and every verification allocates: at Go's default of 100 collection
// took about a fifth of core's CPU under load. Core's pod sets GOMEMLIMIT,
// so a heap swollen by image decodes is collected before the limit.
const defaultGCPercent = 400

func run(ctx context.Context, args []string, getenv func(string) string) error {
	if len(args) > 0 && args[0] == "copy-store" {
		return copyStore(ctx, args[1:], getenv, os.Stdout, os.Stderr)
	}
	cfg, err := config.Load(args, getenv)
	if err != nil {
		return err
	}
	if done, err := cfg.Done("core", version, cfg.ValidateAll); done {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("tier", "core")
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}

	box, err := secret.New(cfg.MasterKey)
	if err != nil {
		return err
	}
	var sf seedfile.File
	if cfg.Seed != "" {
		if sf, err = seedfile.Read(cfg.Seed); err != nil {
			return err
		}
	}
	upstream, err := connector(cfg, sf)
	if err != nil {
		return err
	}
	link, err := kafkalink.Start(ctx, cfg.KafkaLink, stream.Brokers(cfg.KafkaAddr), log)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	if n, err := st.InsertMissing(seed.Records(sf, box)); err != nil {
		return fmt.Errorf("load seed: %w", err)
	} else if cfg.Seed != "" {
		log.Info("seed loaded", "file", cfg.Seed, "inserted", n)
	}

	allow, _ := egress.ParsePrefixes(cfg.EgressAllow) // checked by Validate
	fetch, err := egress.New(egress.Config{
		Policy: egress.NewPolicy(allow), CAFile: cfg.EgressCA, Timeout: cfg.FetchTimeout,
		MaxBytes: qrscan.MaxBytes, MaxRedirects: 3,
	})
	if err != nil {
		return err
	}
	v := &verify.Verifier{Store: st, Upstream: upstream, Images: verify.Images{Egress: fetch}}
	verifyRetries, webhookRetries, _ := cfg.Schedules() // checked by Validate
	j := &jobs.Jobs{Store: st, Verifier: v, Box: box, Egress: fetch, Now: time.Now, Log: log,
		VerifyRetries: verifyRetries, DeliveryRetries: webhookRetries, Retention: cfg.JobRetention, MaxOpen: cfg.JobMaxOpen}
	coreSrv := server.New(v, j, st, box, cfg.EdgeToken, cfg.MaxInflight, log)
	srv := &fasthttp.Server{
		Handler:               coreSrv.Handler(),
		NoDefaultServerHeader: true, // the edge names itself to clients
		Logger:                fastlog.Logger{Log: log},
		ReadTimeout:           30 * time.Second,
		WriteTimeout:          cfg.WriteTimeout,
		IdleTimeout:           cfg.IdleTimeout,
		MaxRequestBodySize:    maxBody,
		NoDefaultDate:         true,
		// A form is parsed by the handler, which answers a malformed one
		// in the caller's version format (fasthttp would answer it in
		// plain text before the handler ran).
		DisablePreParseMultipartForm: true,
		// Twice the edge's (fasthttp's default 4 KiB): a head the edge
		// takes still fits with the internal headers it adds.
		ReadBufferSize:        8 << 10,
		SecureErrorLogMessage: true, // fasthttp would quote a malformed request, the edge token included, in the log
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	// The background work: the outbox publisher runs until everything else
	// has stopped, so what they wrote last still reaches the broker.
	brokers := stream.Brokers(cfg.KafkaAddr)
	writer := stream.NewWriter(brokers, link)
	defer writer.Close()
	pubCtx, stopPub := context.WithCancel(context.Background())
	pubDone := make(chan error, 1)
	go func() {
		pubDone <- (&outbox.Publisher{Store: st, Writer: writer, Log: log, Linger: cfg.PublishLinger}).Run(pubCtx)
	}()
	defer func() { stopPub(); <-pubDone }()

	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	errc := make(chan error, 4)
	work := sync.WaitGroup{}
	background := func(name string, fn func(context.Context) error) {
		work.Add(1)
		go func() {
			defer work.Done()
			if err := fn(workCtx); err != nil {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	consumer := func(name, topic, group string, workers int, h stream.Handler) {
		background(name, func(ctx context.Context) error {
			return stream.Resume(ctx, log, name, time.Second, func(ctx context.Context) error {
				r := stream.NewReader(brokers, link, topic, group)
				defer stream.Close(r)
				return stream.Consume(ctx, r, workers, h)
			})
		})
	}
	consumer("jobs consumer", api.TopicJobs, "slip-core-jobs", cfg.JobWorkers, j.HandleJob)
	consumer("webhook outcomes consumer", api.TopicWebhookOutcomes, "slip-core-outcomes", 16, j.HandleOutcome)
	background("job scheduler", j.Schedule)
	background("expiry", func(ctx context.Context) error { return expire(ctx, j, st, cfg.SlipRetention, log) })

	go func() { errc <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "bank", cfg.Bank, "kafka", cfg.KafkaAddr, "version", version)
	adminSrv := admin.Server(admin.Core{Server: coreSrv, Store: st, Box: box, EdgeToken: cfg.EdgeToken}, cfg.AdminToken, fastlog.Logger{Log: log})
	if cfg.Admin() {
		aln, err := net.Listen("tcp", cfg.AdminAddr)
		if err != nil {
			return fmt.Errorf("admin API: %w", err)
		}
		go func() { errc <- adminSrv.Serve(aln) }()
		log.Info("admin API listening", "addr", aln.Addr().String())
	} else {
		log.Info("admin API off", "why", "SLIP_ADMIN_ADDR is off or SLIP_ADMIN_TOKEN is not set")
	}
	select {
	case err = <-errc:
	case <-ctx.Done():
		// /ready fails first, while requests are still taken, so that every
		// edge notices (its next probe) and sends the next ones to another
		// core before this one stops accepting: a rolling restart loses none.
		log.Info("draining", "for", cfg.Drain.String())
		coreSrv.Drain()
		time.Sleep(cfg.Drain)
	}
	log.Info("shutting down")
	// In-flight requests may finish for as long as the longest sync
	// verification takes: an image fetch, then a bank lookup, with room to
	// answer.
	sctx, cancel := context.WithTimeout(context.Background(), cfg.FetchTimeout+cfg.BankTimeout+5*time.Second)
	defer cancel()
	// Connections still open after the grace (a client that connected and
	// sent nothing) close with the process; that is not a failed shutdown.
	adminSrv.ShutdownWithContext(sctx) // short requests; not serving is fine
	if serr := srv.ShutdownWithContext(sctx); errors.Is(serr, context.DeadlineExceeded) {
		log.Warn("closing connections still open after the grace")
	} else if err == nil {
		err = serr
	}
	stopWork()
	work.Wait()
	return err
}

// openStore opens the store cfg names: bbolt's file in the data directory,
// or the PostgreSQL database of SLIP_STORE.
func openStore(ctx context.Context, cfg config.Config) (store.Store, error) {
	o := store.Options{OutboxLimit: int64(cfg.OutboxLimit), SlipAges: cfg.SlipRetention > 0, Gather: cfg.CommitGather}
	if cfg.Store != "" {
		return pgstore.Open(ctx, cfg.Store, time.Now, o)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	return store.OpenWith(filepath.Join(cfg.DataDir, "core.db"), time.Now, o)
}

// expire removes jobs past their retention, the nonces of signed requests
// past their window, and slip records past slipRetention (0: none), once a
// minute.
func expire(ctx context.Context, j *jobs.Jobs, st store.Store, slipRetention time.Duration, log *slog.Logger) error {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		if n, err := j.Expire(); err != nil {
			log.Error("removing expired jobs failed; trying again", "err", err) // the next tick: nothing is lost by waiting
		} else if n > 0 {
			log.Info("removed expired jobs", "jobs", n)
		}
		if n, err := store.InBatches(func(max int) (int, error) { return st.ExpireNonces(time.Now(), max) }); err != nil {
			log.Error("forgetting expired nonces failed; trying again", "err", err)
		} else if n > 0 {
			log.Debug("forgot expired nonces", "nonces", n)
		}
		if slipRetention > 0 {
			cutoff := time.Now().Add(-slipRetention)
			if n, err := store.InBatches(func(max int) (int, error) { return st.ExpireSlips(cutoff, max) }); err != nil {
				log.Error("removing expired slip records failed; trying again", "err", err)
			} else if n > 0 {
				log.Info("removed expired slip records", "slips", n)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// connector returns the bank connector cfg names: one upstream, or a route
// list over several (package route). The sandbox takes its scripted slips
// from the seed file. The bank upstreams' metrics (slip_core_bank_*) go to a
// set registered with the metrics package.
func connector(cfg config.Config, sf seedfile.File) (bank.Connector, error) {
	routes, err := route.Parse(cfg.Bank, config.Upstreams)
	if err != nil {
		return nil, fmt.Errorf("SLIP_BANK: %w", err)
	}
	set := metrics.NewSet()
	metrics.RegisterSet(set)
	transport := func(tls upstream.TLS) upstream.Transport {
		return upstream.Transport{TLS: tls, Timeout: cfg.BankTimeout, Limits: cfg.Limits(), Metrics: set}
	}
	conns := map[string]bank.Connector{}
	var errs []error
	for _, name := range routes.Names() {
		var c bank.Connector
		var err error
		switch name {
		case "sandbox":
			c, err = sandboxConnector(sf)
		case "http":
			c, err = httpbank.New(httpbank.Config{URL: cfg.BankURL, Timeout: cfg.BankTimeout})
		case "kbank":
			k := cfg.KBank
			c, err = kbank.New(kbank.Config{URL: k.URL, ClientID: k.ClientID, ClientSecret: k.ClientSecret, TestMode: k.TestMode,
				Transport: transport(upstream.TLS{CertFile: k.CertFile, KeyFile: k.KeyFile, CAFile: k.CAFile})})
		case "scb":
			s := cfg.SCB
			c, err = scb.New(scb.Config{URL: s.URL, APIKey: s.APIKey, APISecret: s.APISecret,
				Transport: transport(upstream.TLS{CertFile: s.CertFile, KeyFile: s.KeyFile, CAFile: s.CAFile})})
		case "rdcw":
			r := cfg.RDCW
			c, err = rdcw.New(rdcw.Config{URL: r.URL, ClientID: r.ClientID, ClientSecret: r.ClientSecret,
				Timeout: cfg.BankTimeout, Limits: cfg.Limits(), Metrics: set})
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		conns[name] = c
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(routes.ByBank) == 0 {
		return conns[routes.Default], nil // one upstream: no routing
	}
	return route.New(routes, conns)
}

// sandboxConnector returns the sandbox bank with the seed's script.
func sandboxConnector(sf seedfile.File) (bank.Connector, error) {
	var sc sandbox.Config
	if len(sf.Sandbox) > 0 {
		dec := json.NewDecoder(bytes.NewReader(sf.Sandbox))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sc); err != nil {
			return nil, fmt.Errorf("seed sandbox: %w", err)
		}
	}
	return sandbox.New(sc, time.Now)
}
