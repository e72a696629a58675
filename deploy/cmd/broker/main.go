// Command broker is the dev stack's Kafka-protocol broker (franz-go's kfake)
// on loopback, with its data under SLIP_DATA_DIR. Production uses a real
// Kafka cluster instead.
package main

import (
	"context"
	"log/slog"
	"os"
	"strings"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/envflag"
	"github.com/slipverify/slipverify/deploy/broker"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() { envflag.Main("broker", run) }

func run(ctx context.Context, args []string, getenv func(string) string) error {
	cfg, err := broker.Load(args, getenv)
	if err != nil {
		return err
	}
	if done, err := cfg.Done("broker", version, cfg.Validate); done {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("tier", "broker")
	err = broker.Run(ctx, cfg, func(addrs []string) {
		log.Info("listening", "addrs", strings.Join(addrs, ","), "topics", strings.Join(api.Topics, ","), "memory", cfg.Memory,
			"tls", cfg.CertFile != "", "clientCerts", cfg.ClientCAFile != "", "sasl", cfg.SASL.Name())
	})
	log.Info("shutting down")
	return err
}
