// Command clickhouse runs the dev stack's ClickHouse: Debian's
// clickhouse-server on loopback with its config and data under
// SLIP_DATA_DIR/clickhouse, until SIGTERM, which it passes on. With
// SLIP_CLICKHOUSE_CLUSTER it runs a cluster instead (SLIP_DATA_DIR/
// clickhouse-cluster): a ZooKeeper and a replica per SLIP_CLICKHOUSE_ADDR,
// each started again when it dies, as a supervisor would in production.
// Production points the usage tier at a ClickHouse server or cluster of its
// own.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/slipverify/slipverify/core/lib/envflag"
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
	if set.Cluster != "" {
		return runCluster(ctx, set)
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

// runCluster runs the cluster of set until ctx ends, starting again each
// part that dies meanwhile.
func runCluster(ctx context.Context, set clickhouse.Settings) error {
	cfg := set.ClusterConfig()
	if done, err := set.Done("clickhouse", version, cfg.Validate); done {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("tier", "clickhouse")
	cfg.Log = os.Stderr
	cl, err := clickhouse.StartCluster(ctx, cfg)
	if err != nil {
		return err
	}
	log.Info("listening", "cluster", cl.Name, "replicas", cl.Addrs(), "zookeeper", cl.ZooKeeper.Addr(), "dir", cfg.Dir, "user", set.User)
	cl.Supervise(ctx, log) // until ctx ends
	log.Info("shutting down")
	return cl.Stop(30 * time.Second)
}
