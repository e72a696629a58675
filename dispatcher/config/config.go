// Package config is the dispatcher's configuration: flags and SLIP_*
// environment variables, with defaults that run the dev stack on loopback.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"slices"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/egress"
	"github.com/slipverify/slipverify/core/lib/envflag"
	"github.com/slipverify/slipverify/core/lib/kafkalink"
	"github.com/slipverify/slipverify/core/lib/stream"
)

// MaxWorkers bounds SLIP_DISPATCHER_WORKERS: the consumer allocates its
// queues by the number of workers.
const MaxWorkers = 10000

// Config is the dispatcher's configuration.
type Config struct {
	Addr        string             // health and metrics listener
	KafkaAddr   string             // brokers, comma-separated
	KafkaLink   kafkalink.Settings // SLIP_KAFKA_TLS*, SLIP_KAFKA_SASL_*
	Timeout     time.Duration      // one delivery
	Workers     int                // deliveries in flight
	PerService  int                // deliveries in flight of one service
	PerHost     int                // deliveries in flight to one host
	SlotWait    time.Duration      // longest a delivery waits for its slots
	EgressAllow string             // private ranges callbacks may reach
	EgressCA    string             // extra CA roots (PEM) for https callbacks
	// SignatureHeader names the header of every callback's signature, one
	// name for the deployment (spec 6.3's X-Service-Signature by default).
	SignatureHeader string
	envflag.Common
}

func (c *Config) vars() []envflag.Var {
	return append([]envflag.Var{
		envflag.Def("SLIP_DISPATCHER_ADDR", "addr", "127.0.0.1:8083", "the dispatcher's health and metrics listener", &c.Addr),
		envflag.Def("SLIP_KAFKA_ADDR", "kafka-addr", "127.0.0.1:9092", "Kafka brokers, comma-separated", &c.KafkaAddr),
		envflag.Def("SLIP_WEBHOOK_TIMEOUT", "webhook-timeout", "10s", "timeout of one callback delivery", &c.Timeout),
		envflag.Def("SLIP_DISPATCHER_WORKERS", "workers", "1024", "callback deliveries in flight", &c.Workers),
		envflag.Def("SLIP_DISPATCHER_PER_SERVICE", "per-service", "64", "callback deliveries in flight of one service (tenant), whatever hosts they go to", &c.PerService),
		envflag.Def("SLIP_DISPATCHER_PER_HOST", "per-host", "16", "callback deliveries in flight to one host", &c.PerHost),
		envflag.Def("SLIP_DISPATCHER_SLOT_WAIT", "slot-wait", "2s", "longest a callback waits for a slot of its service and its host; then it is deferred (sent again later, not counted as an attempt)", &c.SlotWait),
		envflag.Def("SLIP_EGRESS_ALLOW_CIDRS", "egress-allow-cidrs", "", "private ranges image URLs and callbacks may reach (comma-separated CIDRs; empty: none)", &c.EgressAllow),
		envflag.Def("SLIP_EGRESS_CA_FILE", "egress-ca-file", "", "extra CA roots (PEM) trusted for https image URLs and callbacks", &c.EgressCA),
		envflag.Def("SLIP_WEBHOOK_SIGNATURE_HEADER", "webhook-signature-header", api.SignatureHeader, "name of the header that carries each callback's signature (sha256=<hex>), the same for every callback", &c.SignatureHeader),
	}, c.KafkaLink.Vars()...)
}

// Vars returns the documented settings with their defaults.
func Vars() []envflag.Var { return new(Config).vars() }

// Load reads flags from args, each defaulting to its environment variable
// (read with getenv) and then to its built-in default.
func Load(args []string, getenv func(string) string) (Config, error) {
	var c Config
	err := envflag.Load("dispatcher", c.vars(), &c.Common, args, getenv)
	return c, err
}

// Validate returns every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		bad("SLIP_DISPATCHER_ADDR: %v", err)
	}
	if err := stream.CheckBrokers(c.KafkaAddr); err != nil {
		bad("SLIP_KAFKA_ADDR: %v", err)
	}
	if err := c.KafkaLink.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Timeout <= 0 {
		bad("SLIP_WEBHOOK_TIMEOUT: must be positive")
	}
	if c.Workers < 1 || c.Workers > MaxWorkers {
		bad("SLIP_DISPATCHER_WORKERS: must be between 1 and %d", MaxWorkers)
	}
	if c.PerService < 1 {
		bad("SLIP_DISPATCHER_PER_SERVICE: must be at least 1")
	}
	if c.PerHost < 1 {
		bad("SLIP_DISPATCHER_PER_HOST: must be at least 1")
	}
	if c.SlotWait <= 0 {
		bad("SLIP_DISPATCHER_SLOT_WAIT: must be positive")
	}
	// A delivery waits for its slots, then posts: past the grace, a stop
	// cuts it, and it is made again after the restart. Written so that
	// no sum overflows.
	if c.SlotWait > 0 && c.Timeout > 0 && c.SlotWait >= stream.Grace-c.Timeout {
		bad("SLIP_DISPATCHER_SLOT_WAIT + SLIP_WEBHOOK_TIMEOUT: %v + %v must be below %v, the time a stopping dispatcher gives the deliveries in hand",
			c.SlotWait, c.Timeout, stream.Grace)
	}
	if _, err := egress.ParsePrefixes(c.EgressAllow); err != nil {
		bad("SLIP_EGRESS_ALLOW_CIDRS: %v", err)
	}
	// A missing or broken file fails here, not at the first https callback.
	if err := egress.CheckCAFile(c.EgressCA); err != nil {
		bad("SLIP_EGRESS_CA_FILE: %v", err)
	}
	if err := checkSignatureHeader(c.SignatureHeader); err != nil {
		bad("SLIP_WEBHOOK_SIGNATURE_HEADER: %v", err)
	}
	return errors.Join(errs...)
}

// reservedHeaders are the headers a signature cannot be named after: those
// the dispatcher sets on every callback, and those of HTTP's own framing
// and connection, which Go's transport writes itself (dropping or
// replacing a value of the request's), so a signature under one of them
// would not arrive, or would break the request.
var reservedHeaders = []string{"Content-Type", "User-Agent",
	"Host", "Content-Length", "Transfer-Encoding", "Trailer", "Te", "Connection", "Keep-Alive",
	"Proxy-Connection", "Upgrade", "Expect"}

// checkSignatureHeader refuses a name that is not an HTTP header name (a
// token: letters, digits and !#$%&'*+-.^_`|~) or that is reserved. Case
// does not matter: header names are case-insensitive, and Go writes them
// in canonical form (X-Service-Signature) on HTTP/1.1.
func checkSignatureHeader(name string) error {
	if !httpguts.ValidHeaderFieldName(name) {
		return fmt.Errorf("%q is not an HTTP header name: a name has one or more letters, digits or !#$%%&'*+-.^_`|~, and no spaces or colon", name)
	}
	canon := textproto.CanonicalMIMEHeaderKey(name)
	if slices.Contains(reservedHeaders, canon) {
		return fmt.Errorf("%s is set by the dispatcher or by HTTP itself; choose a name of its own, such as %s", canon, api.SignatureHeader)
	}
	return nil
}
