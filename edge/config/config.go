// Package config is the edge's configuration: flags and SLIP_* environment
// variables, with defaults that run the dev stack on loopback.
package config

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/slipverify/slipverify/core/lib/envflag"
	"github.com/slipverify/slipverify/core/lib/iplist"
	"github.com/slipverify/slipverify/core/lib/kafkalink"
	"github.com/slipverify/slipverify/core/lib/stream"
)

// Config is the edge's configuration.
type Config struct {
	Addr            string             // the public listener
	MetricsAddr     string             // Prometheus metrics listener; "off" disables
	CoreAddr        string             // core's listeners, comma-separated; a name stands for each address it resolves to
	EdgeToken       string             // shared secret sent to core
	TrustedProxies  string             // CIDRs whose X-Forwarded-For is believed
	AuthTTL         time.Duration      // how long an auth record is cached
	Drain           time.Duration      // /health fails this long before shutdown
	CoreTimeout     time.Duration      // one forwarded request
	CoreIdle        time.Duration      // how long a connection to core stays pooled unused
	CoreProbe       time.Duration      // how often each core's readiness is asked
	CoreResolve     time.Duration      // how often the names in CoreAddr are resolved again
	ReadTimeout     time.Duration      // reading one client request, headers and body
	AdaptInterval   time.Duration      // how often the adaptive factor moves
	MinFactor       float64            // the lowest the adaptive factor goes
	NonceMax        int                // nonces remembered at most (all clients)
	NoncePerClient  int                // nonces remembered at most per client
	NoncePerService int                // nonces remembered at most per service, all its clients together
	NonceQueue      int                // accepted nonces waiting to be published on slip.nonces at most
	NonceMargin     time.Duration      // the replay at start reaches this much further back than twice the window
	KafkaAddr       string             // brokers of slip.config and slip.nonces; "off": TTL only, nonces of this edge only
	KafkaLink       kafkalink.Settings // SLIP_KAFKA_TLS*, SLIP_KAFKA_SASL_*
	AccessLog       string             // "stderr", "off" or a file path
	envflag.Common
}

func (c *Config) vars() []envflag.Var {
	return append([]envflag.Var{
		envflag.Def("SLIP_EDGE_ADDR", "addr", "127.0.0.1:8080", "the public listener", &c.Addr),
		envflag.Def("SLIP_EDGE_METRICS_ADDR", "metrics-addr", "127.0.0.1:9180", "Prometheus metrics listener (off: none)", &c.MetricsAddr),
		envflag.Def("SLIP_CORE_ADDR", "core-addr", "127.0.0.1:8081", "core's listeners, host:port, comma-separated; a host name stands for every address it resolves to (at most 64 cores in all)", &c.CoreAddr),
		envflag.Secret("SLIP_EDGE_TOKEN", "edge-token", "shared secret sent to core (required, 32+ characters)", &c.EdgeToken),
		envflag.Def("SLIP_TRUSTED_PROXIES", "trusted-proxies", "", "comma-separated CIDRs whose X-Forwarded-For is believed", &c.TrustedProxies),
		envflag.Def("SLIP_EDGE_AUTH_TTL", "auth-ttl", "2s", "how long a key's auth record (or its absence) is cached", &c.AuthTTL),
		envflag.Def("SLIP_EDGE_DRAIN", "drain", "2s", "how long /health fails on SIGTERM before the listener closes", &c.Drain),
		envflag.Def("SLIP_EDGE_CORE_TIMEOUT", "core-timeout", "30s", "timeout of one request forwarded to core", &c.CoreTimeout),
		envflag.Def("SLIP_EDGE_CORE_IDLE", "core-idle", "1m", "how long a connection to core stays in the pool unused (keep it below core's SLIP_CORE_IDLE_TIMEOUT, so the edge never sends on a connection core is closing)", &c.CoreIdle),
		envflag.Def("SLIP_EDGE_CORE_PROBE", "core-probe", "1s", "how often each core's /ready is asked; a core that fails it, or refuses a connection, gets no new request until it answers again (keep it below core's SLIP_CORE_DRAIN)", &c.CoreProbe),
		envflag.Def("SLIP_EDGE_CORE_RESOLVE", "core-resolve", "10s", "how often the host names in SLIP_CORE_ADDR are resolved again, for cores added or gone", &c.CoreResolve),
		envflag.Def("SLIP_EDGE_READ_TIMEOUT", "read-timeout", "30s", "time a client has to send one whole request, headers and body (slow clients are cut off)", &c.ReadTimeout),
		envflag.Def("SLIP_EDGE_ACCESS_LOG", "access-log", "stderr", "access log, one JSON line per request: stderr, off, or a file path (appended to)", &c.AccessLog),
		envflag.Def("SLIP_EDGE_ADAPT_INTERVAL", "adapt-interval", "1s", "how often the adaptive rate factor moves", &c.AdaptInterval),
		envflag.Def("SLIP_EDGE_MIN_FACTOR", "min-factor", "0.1", "the lowest fraction of a plan's rate the adaptive limit goes to", &c.MinFactor),
		envflag.Def("SLIP_EDGE_NONCE_MAX", "nonce-max", "4000000", "nonces remembered at most, all clients together", &c.NonceMax),
		envflag.Def("SLIP_EDGE_NONCE_PER_CLIENT", "nonce-per-client", "400000", "nonces remembered at most per B2B client (its requests and the signed requests of its service's branch keys)", &c.NoncePerClient),
		envflag.Def("SLIP_EDGE_NONCE_PER_SERVICE", "nonce-per-service", "2000000", "nonces remembered at most per service, all its clients together", &c.NoncePerService),
		envflag.Def("SLIP_EDGE_NONCE_QUEUE", "nonce-queue", "100000", "accepted nonces waiting to be published on slip.nonces at most (more are dropped, counted, and known to this edge only)", &c.NonceQueue),
		envflag.Def("SLIP_EDGE_NONCE_MARGIN", "nonce-margin", "1m", "the replay of slip.nonces at start reaches this much further back than twice the timestamp window (the topic's retention must cover both)", &c.NonceMargin),
		envflag.Def("SLIP_KAFKA_ADDR", "kafka-addr", "127.0.0.1:9092", "Kafka brokers, comma-separated, for record changes on slip.config and the nonces of every edge on slip.nonces (off: cached records live their TTL, nonces are this edge's own and timestamps before its start are refused)", &c.KafkaAddr),
	}, c.KafkaLink.Vars()...)
}

// Vars returns the documented settings with their defaults.
func Vars() []envflag.Var { return new(Config).vars() }

// Load reads flags from args, each defaulting to its environment variable
// (read with getenv) and then to its built-in default.
func Load(args []string, getenv func(string) string) (Config, error) {
	var c Config
	err := envflag.Load("edge", c.vars(), &c.Common, args, getenv)
	return c, err
}

// Validate returns every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		bad("SLIP_EDGE_ADDR: %v", err)
	}
	if cores := c.CoreAddrs(); len(cores) == 0 || len(cores) > MaxCores {
		bad("SLIP_CORE_ADDR: one to %d host:port, comma-separated", MaxCores)
	} else {
		for _, addr := range cores {
			if _, _, err := net.SplitHostPort(addr); err != nil {
				bad("SLIP_CORE_ADDR: %v", err)
			}
		}
	}
	if c.KafkaAddr != "off" {
		if err := stream.CheckBrokers(c.KafkaAddr); err != nil {
			bad("SLIP_KAFKA_ADDR: %v (or off)", err)
		}
		if err := c.KafkaLink.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.MetricsOn() {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			bad("SLIP_EDGE_METRICS_ADDR: %v", err)
		}
	}
	if len(c.EdgeToken) < 32 {
		bad("SLIP_EDGE_TOKEN: required, at least 32 characters")
	}
	if _, err := c.Trusted(); err != nil {
		bad("SLIP_TRUSTED_PROXIES: %v", err)
	}
	for env, d := range map[string]time.Duration{"SLIP_EDGE_AUTH_TTL": c.AuthTTL, "SLIP_EDGE_CORE_TIMEOUT": c.CoreTimeout, "SLIP_EDGE_CORE_IDLE": c.CoreIdle, "SLIP_EDGE_READ_TIMEOUT": c.ReadTimeout,
		"SLIP_EDGE_CORE_PROBE": c.CoreProbe, "SLIP_EDGE_CORE_RESOLVE": c.CoreResolve,
		"SLIP_EDGE_ADAPT_INTERVAL": c.AdaptInterval, "SLIP_EDGE_NONCE_MARGIN": c.NonceMargin} {
		if d <= 0 {
			bad("%s: must be positive", env)
		}
	}
	if c.NonceQueue < 1 {
		bad("SLIP_EDGE_NONCE_QUEUE: must be positive")
	}
	if c.AccessLog == "" {
		bad("SLIP_EDGE_ACCESS_LOG: stderr, off or a file path")
	}
	if c.Drain < 0 {
		bad("SLIP_EDGE_DRAIN: must not be negative")
	}
	if !(c.MinFactor > 0 && c.MinFactor <= 1) { // NaN too
		bad("SLIP_EDGE_MIN_FACTOR: must be in (0, 1]")
	}
	if c.NonceMax < 1 || c.NoncePerClient < 1 || c.NoncePerClient > c.NoncePerService || c.NoncePerService > c.NonceMax {
		bad("SLIP_EDGE_NONCE_MAX, SLIP_EDGE_NONCE_PER_SERVICE and SLIP_EDGE_NONCE_PER_CLIENT: must be positive, per client at most per service, per service at most the total")
	}
	return errors.Join(errs...)
}

// Trusted parses TrustedProxies. It refuses a list that holds every IPv4
// or every IPv6 address (`*`, a /0, ranges that add up to one): trusting
// every peer would let any client name its own address in X-Forwarded-For
// and pass any branch's IP allow list.
func (c Config) Trusted() (iplist.List, error) {
	l, err := iplist.Parse(splitList(c.TrustedProxies))
	if err == nil && l.Everything() {
		return iplist.List{}, errors.New("trusts every peer, so any client could choose its address; list the proxies' addresses or ranges")
	}
	return l, err
}

// MaxCores bounds the cores one edge balances over, however many addresses
// SLIP_CORE_ADDR's names resolve to.
const MaxCores = 64

// CoreAddrs returns the entries of CoreAddr: host:port each, where a host
// name stands for every address it resolves to.
func (c Config) CoreAddrs() []string { return splitList(c.CoreAddr) }

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// MetricsOn reports whether the metrics listener is wanted: an empty
// variable means the default, so "off" (or an empty -metrics-addr flag)
// turns it off.
func (c Config) MetricsOn() bool { return c.MetricsAddr != "" && c.MetricsAddr != "off" }
