// Command clickhouse runs the dev stack's ClickHouse: Debian's
// clickhouse-server on loopback with its config and data under
// SLIP_DATA_DIR/clickhouse, until SIGTERM, which it passes on. Production
// points the usage tier at a ClickHouse cluster instead.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/slipverify/slipverify/core/envflag"
	"github.com/slipverify/slipverify/deploy/clickhouse"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() { envflag.Main("clickhouse", run) }

func run(ctx context.Context, args []string, getenv func(string) string) error {
	set, err := clickhouse.Load(args, getenv)
	if err != nil {
		return err
	}
	cfg := set.Config()
	if done, err := set.Done("clickhouse", version, cfg.Validate); done {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("tier", "clickhouse")
	cfg.Log = os.Stderr
	srv, err := clickhouse.Start(ctx, cfg)
	if err != nil {
		return err
	}
	log.Info("listening", "addr", srv.Addr(), "http", srv.HTTPAddr(), "dir", cfg.Dir, "tls", cfg.Secure(), "user", set.User)
	select {
	case <-ctx.Done():
	case <-srv.Done():
		return errors.New("clickhouse-server exited on its own; its log is in SLIP_DATA_DIR/clickhouse/log")
	}
	log.Info("shutting down")
	return srv.Stop(30 * time.Second)
}
