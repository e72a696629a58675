package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/envflag"
	"github.com/slipverify/slipverify/core/lib/kafkalink"
	"github.com/slipverify/slipverify/core/lib/stream"
	"github.com/slipverify/slipverify/usage/chstore"
	"github.com/slipverify/slipverify/usage/config"
	"github.com/slipverify/slipverify/usage/consume"
	"github.com/slipverify/slipverify/usage/reconcile"
	"github.com/slipverify/slipverify/usage/report"
)

// anchorSync is how often the serving tier copies core's billing-cycle
// anchor days into the ledger (reconciliation copies them too).
const anchorSync = 10 * time.Minute

// lagInterval is how often the consumer groups' lag is measured.
const lagInterval = 2 * time.Second

// auditBatch bounds the audit consumer's batch below SLIP_USAGE_BATCH:
// audit records are few but larger than usage events (the changed record
// before and after), and a reader holds 4 batches of messages in memory.
const auditBatch = 1000

func run(ctx context.Context, args []string, getenv func(string) string) error {
	if len(args) > 0 {
		switch args[0] {
		case "report":
			return runReport(ctx, args[1:], getenv, os.Stdout)
		case "reconcile":
			return runReconcile(ctx, args[1:], getenv, os.Stdout)
		case "move-to-cluster":
			return runMove(ctx, args[1:], getenv, os.Stdout)
		}
	}
	return serve(ctx, args, getenv)
}

// load reads the configuration of one command and handles -version and
// -validate; done means the command has nothing more to do.
func load(name string, args []string, getenv func(string) string, extra ...envflag.Var) (cfg config.Config, done bool, err error) {
	cfg, err = config.Load(name, args, getenv, extra...)
	if err != nil {
		return cfg, true, err
	}
	done, err = cfg.Done(name, version, cfg.Validate)
	return cfg, done, err
}

func open(cfg config.Config) (*chstore.Store, error) {
	tc, err := cfg.CHTLS.Config()
	if err != nil {
		return nil, err
	}
	return chstore.Open(chstore.Options{Addrs: cfg.ClickHouse(), Database: cfg.CHDatabase, Cluster: cfg.CHCluster, Username: cfg.CHUser, Password: cfg.CHPassword, TLS: tc})
}

func coreClient(cfg config.Config) reconcile.Core {
	return reconcile.Core{Addr: cfg.CoreAddr, Token: cfg.EdgeToken, Client: &http.Client{Timeout: cfg.CoreTimeout}}
}

// usageLag measures the lag of cfg's consumer group on slip.usage.
func usageLag(cfg config.Config, link *kafkalink.Link) *stream.Lag {
	return &stream.Lag{Brokers: cfg.Brokers(), Link: link, Group: cfg.Group, Topic: api.TopicUsage, Metric: "usage_consumer_lag_messages"}
}

// serve runs the consumers and the HTTP listener until ctx ends.
func serve(ctx context.Context, args []string, getenv func(string) string) error {
	cfg, done, err := load("usage", args, getenv)
	if done {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("tier", "usage")
	link, err := kafkalink.Start(ctx, cfg.KafkaLink, cfg.Brokers(), log)
	if err != nil {
		return err
	}
	store, err := open(cfg)
	if err != nil {
		return err
	}
	defer store.Close()
	lag := usageLag(cfg, link)
	go lag.Watch(ctx, lagInterval)
	auditLag := &stream.Lag{Brokers: cfg.Brokers(), Link: link, Group: cfg.AuditGroup, Topic: api.TopicAudit, Metric: "usage_audit_consumer_lag_messages"}
	go auditLag.Watch(ctx, lagInterval)
	core := coreClient(cfg)
	watch := &reconcile.Watch{Core: core, Store: store, Services: cfg.ReconcileServices, Log: log}
	if cfg.EdgeToken != "" {
		watch.Every = cfg.ReconcileEvery
	}
	watch.Publish() // the gauges answer 0 until a run finds more, and without SLIP_EDGE_TOKEN

	// The listener comes before ClickHouse: /metrics answers and /health
	// says 503 while the tier waits for it.
	errc := make(chan error, 1)
	if cfg.Addr != "off" {
		ln, err := net.Listen("tcp", cfg.Addr)
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: handler(store, core, lag), ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- srv.Serve(ln) }()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(sctx)
		}()
	}
	log.Info("listening", "addr", cfg.Addr, "kafka", cfg.Kafka, "clickhouse", cfg.CHAddr, "database", cfg.CHDatabase, "cluster", cfg.CHCluster, "version", version)
	if err := migrate(ctx, store, cfg.RetryMax, log); err != nil {
		return err
	}
	if cfg.EdgeToken != "" {
		go syncAnchors(ctx, core, store, log)
	}
	if watch.Every > 0 {
		t := time.NewTicker(watch.Every)
		defer t.Stop()
		go watch.Run(ctx, t.C)
	}
	// Two consumer groups, each at least once into its table: usage
	// events into the ledger, core's audit records into audit_events.
	consumers := make(chan error, 2)
	go func() {
		consumers <- consumeTopic(ctx, cfg, link, log, "usage consumer", cfg.Group,
			&consume.Consumer{Topic: api.TopicUsage, Store: store, Batch: cfg.Batch, Flush: cfg.Flush, RetryMax: cfg.RetryMax, Log: log})
	}()
	go func() {
		consumers <- consumeTopic(ctx, cfg, link, log, "audit consumer", cfg.AuditGroup,
			&consume.Consumer{Topic: api.TopicAudit, Store: store, Batch: min(cfg.Batch, auditBatch), Flush: cfg.Flush, RetryMax: cfg.RetryMax, Log: log})
	}()
	select {
	case err = <-errc: // the listener failed
	case <-ctx.Done():
		err = errors.Join(<-consumers, <-consumers) // the consumers finish their batches
	}
	log.Info("shutting down")
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// consumeTopic runs c in group until ctx ends. A broker outage stops a
// run; the next one starts from the committed offsets, with a reader of its
// own.
func consumeTopic(ctx context.Context, cfg config.Config, link *kafkalink.Link, log *slog.Logger, name, group string, c *consume.Consumer) error {
	return stream.Resume(ctx, log, name, time.Second, func(ctx context.Context) error {
		c.Reader = kafka.NewReader(kafka.ReaderConfig{
			Brokers: cfg.Brokers(), Dialer: link.Dialer(), GroupID: group, Topic: c.Topic,
			StartOffset: kafka.FirstOffset, MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 100 * time.Millisecond,
			QueueCapacity: 4 * c.Batch, SessionTimeout: 10 * time.Second, CommitInterval: 0, // commits are synchronous, after the insert
			ErrorLogger: kafka.LoggerFunc(func(f string, a ...any) { log.Warn("kafka: "+fmt.Sprintf(f, a...), "consumer", name) }),
		})
		defer c.Reader.Close()
		return c.Run(ctx)
	})
}

// migrate waits for ClickHouse and migrates the schema, retrying while the
// server is unreachable: the tier starts before a ClickHouse that is late.
func migrate(ctx context.Context, store *chstore.Store, retryMax time.Duration, log *slog.Logger) error {
	pause := 100 * time.Millisecond
	for {
		err := store.Migrate(ctx)
		if err == nil {
			return nil
		}
		if refused, hint := chstore.Refused(err); refused {
			return fmt.Errorf("clickhouse: %w; %s", err, hint)
		}
		log.Warn("ClickHouse not ready; retrying", "err", err, "retry_in", pause.String())
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped before ClickHouse was ready: %w", err)
		case <-time.After(pause):
		}
		pause = min(2*pause, retryMax)
	}
}

// syncAnchors copies core's anchor days into the ledger at start and then
// every anchorSync, so billable_by_period cuts periods where core does.
func syncAnchors(ctx context.Context, core reconcile.Core, store *chstore.Store, log *slog.Logger) {
	t := time.NewTicker(anchorSync)
	defer t.Stop()
	for {
		counters, err := core.Counters(ctx)
		if err == nil {
			err = store.SetAnchors(ctx, reconcile.Anchors(counters), counters.At)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("could not copy core's billing anchors", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// handler serves /metrics, /health (200 while ClickHouse answers) and
// /reconcile (the JSON report; ?format=csv or table for text).
func handler(store *chstore.Store, core reconcile.Core, lag *stream.Lag) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) { metrics.WritePrometheus(w, true) })
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		status, body := http.StatusOK, map[string]any{"status": "ok", "tier": "usage", "lagMessages": lag.Last()}
		if err := store.Ping(ctx); err != nil {
			status, body["status"], body["clickhouse"] = http.StatusServiceUnavailable, "clickhouse unreachable", err.Error()
		}
		writeJSON(w, status, body)
	})
	mux.HandleFunc("GET /reconcile", func(w http.ResponseWriter, r *http.Request) {
		format := r.URL.Query().Get("format")
		if format == "json" {
			format = ""
		}
		if format != "" && report.CheckFormat(format) != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "format: not json, table or csv"})
			return
		}
		rep, err := reconcile.Run(r.Context(), core, store, lag.Last())
		if err != nil {
			writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
			return
		}
		if format != "" {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			report.Reconciliation(w, format, rep)
			return
		}
		writeJSON(w, http.StatusOK, rep)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// runReport prints billable verifications per service and branch for one
// billing month (-period) or a range of Bangkok days (-from, -to).
func runReport(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	var period, from, to, service, format string
	cfg, done, err := load("usage report", args, getenv,
		envflag.Def("", "period", "", "billing month YYYY-MM: each service's period that starts in it (default: the current month)", &period),
		envflag.Def("", "from", "", "first Bangkok day YYYY-MM-DD of a range (with -to), instead of -period", &from),
		envflag.Def("", "to", "", "last Bangkok day YYYY-MM-DD of a range, included", &to),
		envflag.Def("", "service", "", "only this service", &service),
		envflag.Def("", "format", "table", "table or csv", &format))
	if done {
		return err
	}
	if err := report.CheckFormat(format); err != nil {
		return err
	}
	query, err := reportQuery(period, from, to, service)
	if err != nil {
		return err
	}
	store, err := open(cfg)
	if err != nil {
		return err
	}
	defer store.Close()
	rows, err := query(ctx, store)
	if err != nil {
		return err
	}
	return report.Billable(out, format, rows)
}

// reportQuery checks the report's options (every problem at once) and
// returns the query they ask for.
func reportQuery(period, from, to, service string) (func(context.Context, *chstore.Store) ([]chstore.ReportRow, error), error) {
	if from != "" || to != "" {
		f, err1 := time.Parse(time.DateOnly, from)
		t, err2 := time.Parse(time.DateOnly, to)
		var errs []error
		if err1 != nil {
			errs = append(errs, fmt.Errorf("-from: %q is not a day like 2026-11-01", from))
		}
		if err2 != nil {
			errs = append(errs, fmt.Errorf("-to: %q is not a day like 2026-11-30", to))
		}
		if period != "" {
			errs = append(errs, errors.New("-period: give either -period or -from and -to"))
		}
		if err1 == nil && err2 == nil && t.Before(f) {
			errs = append(errs, errors.New("-to: before -from"))
		}
		if len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		return func(ctx context.Context, s *chstore.Store) ([]chstore.ReportRow, error) {
			return s.ReportRange(ctx, f, t, service)
		}, nil
	}
	month := time.Now().In(time.FixedZone("Asia/Bangkok", 7*3600))
	if period != "" {
		var err error
		if month, err = report.ParseMonth(period); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context, s *chstore.Store) ([]chstore.ReportRow, error) {
		return s.ReportPeriod(ctx, month, service)
	}, nil
}

// runReconcile compares the ledger with core's counters and fails when any
// row drifts.
func runReconcile(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	var format string
	cfg, done, err := load("usage reconcile", args, getenv, envflag.Def("", "format", "table", "table, csv or json", &format))
	if done {
		return err
	}
	if format != "json" && report.CheckFormat(format) != nil {
		return fmt.Errorf("-format: %q is not table, csv or json", format)
	}
	store, err := open(cfg)
	if err != nil {
		return err
	}
	defer store.Close()
	// The events still in flight, so that a drift can be told from them.
	link, err := kafkalink.New(cfg.KafkaLink) // checked by Validate
	if err != nil {
		return err
	}
	lag, err := usageLag(cfg, link).Measure(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "usage reconcile: consumer lag unknown: %v\n", err)
		lag = -1
	}
	rep, err := reconcile.Run(ctx, coreClient(cfg), store, lag)
	if err != nil {
		return err
	}
	if format == "json" {
		err = json.NewEncoder(out).Encode(rep)
	} else {
		err = report.Reconciliation(out, format, rep)
	}
	if err == nil && rep.Drift > 0 {
		err = fmt.Errorf("reconcile: %d rows drift between the ledger and core's counters (consumer lag: %d messages, -1: unknown)", rep.Drift, rep.Lag)
	}
	return err
}

// runMove moves a ledger made on one server (the first of
// SLIP_CLICKHOUSE_ADDR) into the replicated tables of the cluster
// SLIP_CLICKHOUSE_CLUSTER names, which that server has joined.
func runMove(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	cfg, done, err := load("usage move-to-cluster", args, getenv)
	if done {
		return err
	}
	cfg.CHAddr = cfg.ClickHouse()[0] // the server that holds the old tables
	store, err := open(cfg)
	if err != nil {
		return err
	}
	defer store.Close()
	return store.MoveToCluster(ctx, out)
}
