// Command dispatcher delivers the result callbacks of async verification:
// it consumes slip.results, POSTs each callback through the SSRF-safe
// egress client and reports every outcome to slip.webhook.outcomes.
package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/egress"
	"github.com/slipverify/slipverify/core/lib/envflag"
	"github.com/slipverify/slipverify/core/lib/kafkalink"
	"github.com/slipverify/slipverify/core/lib/stream"
	"github.com/slipverify/slipverify/dispatcher/config"
	"github.com/slipverify/slipverify/dispatcher/deliver"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// group is the dispatcher's consumer group on slip.results.
const group = "slip-dispatcher"

// lagInterval is how often the group's lag is measured.
const lagInterval = 2 * time.Second

func main() { envflag.Main("dispatcher", run) }

func run(ctx context.Context, args []string, getenv func(string) string) error {
	cfg, err := config.Load(args, getenv)
	if err != nil {
		return err
	}
	if done, err := cfg.Done("dispatcher", version, cfg.Validate); done {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("tier", "dispatcher")
	allow, _ := egress.ParsePrefixes(cfg.EgressAllow) // checked by Validate
	client, err := egress.New(egress.Config{Policy: egress.NewPolicy(allow), CAFile: cfg.EgressCA, Timeout: cfg.Timeout})
	if err != nil {
		return err
	}
	brokers := stream.Brokers(cfg.KafkaAddr)
	link, err := kafkalink.Start(ctx, cfg.KafkaLink, brokers, log)
	if err != nil {
		return err
	}
	w := stream.NewWriter(brokers, link)
	defer w.Close()
	d := &deliver.Dispatcher{Egress: client, Outcomes: w, PerService: cfg.PerService, PerHost: cfg.PerHost, SlotWait: cfg.SlotWait,
		SignatureHeader: cfg.SignatureHeader, Now: time.Now, Log: log, Backoff: time.Second}

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ok","tier":"dispatcher"}`))
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) { metrics.WritePrometheus(w, true) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	// Callbacks not yet delivered (or given up) and reported: the group
	// commits a result only after its outcome is written.
	lag := &stream.Lag{Brokers: brokers, Link: link, Group: group, Topic: api.TopicResults,
		Metric: `slip_dispatcher_consumer_lag_messages{topic="` + api.TopicResults + `",group="` + group + `"}`}
	go lag.Watch(ctx, lagInterval)

	log.Info("delivering", "addr", ln.Addr().String(), "kafka", cfg.KafkaAddr, "signatureHeader", cfg.SignatureHeader, "version", version)
	err = stream.Resume(ctx, log, "callbacks consumer", time.Second, func(ctx context.Context) error {
		r := stream.NewReader(brokers, link, api.TopicResults, group)
		defer stream.Close(r)
		return stream.Consume(ctx, r, cfg.Workers, d.Handle)
	})
	log.Info("stopped")
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
