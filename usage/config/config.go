// Package config is the usage tier's configuration: flags and SLIP_*
// environment variables, with defaults that run the dev stack on loopback.
package config

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/slipverify/slipverify/core/lib/envflag"
	"github.com/slipverify/slipverify/core/lib/kafkalink"
	"github.com/slipverify/slipverify/usage/chstore"
)

// Config is the usage tier's configuration.
type Config struct {
	Kafka       string             // SLIP_KAFKA_ADDR: brokers, comma-separated
	KafkaLink   kafkalink.Settings // SLIP_KAFKA_TLS*, SLIP_KAFKA_SASL_*
	Group       string             // consumer group on slip.usage
	AuditGroup  string             // consumer group on slip.audit
	CHAddr      string             // ClickHouse native protocol, comma-separated
	CHDatabase  string             // database of the ledger
	CHCluster   string             // ClickHouse cluster of the ledger (empty: one server)
	CHUser      string             // ClickHouse user
	CHPassword  string             // ClickHouse password
	CHTLS       chstore.TLS        // SLIP_CLICKHOUSE_TLS*
	Addr        string             // metrics, /health, /reconcile
	Batch       int                // rows per insert at most
	Flush       time.Duration      // a partial batch waits at most this long
	RetryMax    time.Duration      // the longest pause between insert attempts
	CoreAddr    string             // core's listener, for its quota counters
	EdgeToken   string             // the internal token core requires
	CoreTimeout time.Duration      // one request to core
	// ReconcileEvery is the interval of the periodic reconciliation behind
	// the drift gauges (0: none); ReconcileServices bounds one run.
	ReconcileEvery    time.Duration
	ReconcileServices int
	envflag.Common
}

func (c *Config) vars() []envflag.Var {
	return append(append([]envflag.Var{
		envflag.Def("SLIP_KAFKA_ADDR", "kafka-addr", "127.0.0.1:9092", "Kafka brokers, comma-separated", &c.Kafka),
		envflag.Def("SLIP_USAGE_GROUP", "group", "usage", "consumer group reading slip.usage", &c.Group),
		envflag.Def("SLIP_USAGE_AUDIT_GROUP", "audit-group", "usage-audit", "consumer group reading slip.audit (core's audit records) into audit_events", &c.AuditGroup),
		envflag.Def("SLIP_CLICKHOUSE_ADDR", "clickhouse-addr", "127.0.0.1:9000", "ClickHouse native protocol addresses, comma-separated", &c.CHAddr),
		envflag.Def("SLIP_CLICKHOUSE_DATABASE", "clickhouse-database", "slip", "ClickHouse database of the usage ledger", &c.CHDatabase),
		envflag.Def("SLIP_CLICKHOUSE_CLUSTER", "clickhouse-cluster", "", "ClickHouse cluster (remote_servers, one shard) holding the ledger replicated, created ON CLUSTER; SLIP_CLICKHOUSE_ADDR lists its replicas (empty: one server)", &c.CHCluster),
		envflag.Def("SLIP_CLICKHOUSE_USER", "clickhouse-user", "default", "ClickHouse user", &c.CHUser),
		envflag.Secret("SLIP_CLICKHOUSE_PASSWORD", "clickhouse-password", "ClickHouse password", &c.CHPassword),
		envflag.Def("SLIP_USAGE_ADDR", "addr", "127.0.0.1:8084", "listener for /metrics, /health and /reconcile (off: none)", &c.Addr),
		envflag.Def("SLIP_USAGE_BATCH", "batch", "20000", "events per ClickHouse insert at most", &c.Batch),
		envflag.Def("SLIP_USAGE_FLUSH", "flush", "500ms", "how long a partial batch waits before it is inserted", &c.Flush),
		envflag.Def("SLIP_USAGE_RETRY_MAX", "retry-max", "5s", "longest pause between attempts while ClickHouse is unreachable", &c.RetryMax),
		envflag.Def("SLIP_CORE_ADDR", "core-addr", "127.0.0.1:8081", "core's listener, asked for its quota counters", &c.CoreAddr),
		envflag.Secret("SLIP_EDGE_TOKEN", "edge-token", "internal token core requires (32+ characters; empty: no reconciliation)", &c.EdgeToken),
		envflag.Def("SLIP_USAGE_CORE_TIMEOUT", "core-timeout", "10s", "timeout of one request to core", &c.CoreTimeout),
		envflag.Def("SLIP_USAGE_RECONCILE_INTERVAL", "reconcile-interval", "5m", "how often the ledger is reconciled with core's counters for the usage_ledger_drift gauges (0: never; needs SLIP_EDGE_TOKEN); longer than the pipeline's usual delay", &c.ReconcileEvery),
		envflag.Def("SLIP_USAGE_RECONCILE_SERVICES", "reconcile-services", "1000", "services one periodic reconciliation checks at most; the next run goes on with the next ones", &c.ReconcileServices),
	}, c.KafkaLink.Vars()...), c.CHTLS.Vars()...)
}

// Vars returns the documented settings with their defaults.
func Vars() []envflag.Var { return new(Config).vars() }

// Load reads flags from args, each defaulting to its environment variable
// (read with getenv) and then to its built-in default. extra are options of
// one subcommand (flags only).
func Load(program string, args []string, getenv func(string) string, extra ...envflag.Var) (Config, error) {
	var c Config
	err := envflag.Load(program, append(c.vars(), extra...), &c.Common, args, getenv)
	return c, err
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate returns every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	addrs := func(env, list string) {
		for _, a := range strings.Split(list, ",") {
			if _, _, err := net.SplitHostPort(strings.TrimSpace(a)); err != nil {
				bad("%s: %v", env, err)
			}
		}
	}
	addrs("SLIP_KAFKA_ADDR", c.Kafka)
	addrs("SLIP_CLICKHOUSE_ADDR", c.CHAddr)
	if err := c.KafkaLink.Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.CHTLS.Config(); err != nil {
		errs = append(errs, err)
	}
	if c.Addr != "off" {
		addrs("SLIP_USAGE_ADDR", c.Addr)
	}
	addrs("SLIP_CORE_ADDR", c.CoreAddr)
	if c.Group == "" {
		bad("SLIP_USAGE_GROUP: must not be empty")
	}
	switch c.AuditGroup {
	case "":
		bad("SLIP_USAGE_AUDIT_GROUP: must not be empty")
	case c.Group:
		bad("SLIP_USAGE_AUDIT_GROUP: must differ from SLIP_USAGE_GROUP (one group per topic)")
	}
	if !identifier.MatchString(c.CHDatabase) {
		bad("SLIP_CLICKHOUSE_DATABASE: %q is not a plain identifier (letters, digits, _)", c.CHDatabase)
	}
	if c.CHCluster != "" && !identifier.MatchString(c.CHCluster) {
		bad("SLIP_CLICKHOUSE_CLUSTER: %q is not a plain identifier (letters, digits, _)", c.CHCluster)
	}
	if c.Batch < 1 || c.Batch > 1_000_000 {
		bad("SLIP_USAGE_BATCH: must be between 1 and 1000000")
	}
	if c.Flush <= 0 {
		bad("SLIP_USAGE_FLUSH: must be positive")
	}
	if c.RetryMax <= 0 {
		bad("SLIP_USAGE_RETRY_MAX: must be positive")
	}
	if c.CoreTimeout <= 0 {
		bad("SLIP_USAGE_CORE_TIMEOUT: must be positive")
	}
	if c.ReconcileEvery < 0 {
		bad("SLIP_USAGE_RECONCILE_INTERVAL: must not be negative (0: no periodic reconciliation)")
	}
	if c.ReconcileServices < 1 {
		bad("SLIP_USAGE_RECONCILE_SERVICES: must be at least 1")
	}
	if c.EdgeToken != "" && len(c.EdgeToken) < 32 {
		bad("SLIP_EDGE_TOKEN: at least 32 characters")
	}
	return errors.Join(errs...)
}

// Brokers returns the Kafka brokers of c.
func (c Config) Brokers() []string { return split(c.Kafka) }

// ClickHouse returns the ClickHouse addresses of c.
func (c Config) ClickHouse() []string { return split(c.CHAddr) }

func split(list string) []string {
	var out []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
