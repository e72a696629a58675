// Package config is core's configuration: flags and SLIP_* environment
// variables, with defaults that run the dev stack on loopback.
package config

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/slipverify/slipverify/core/bank/httpbank"
	"github.com/slipverify/slipverify/core/bank/route"
	"github.com/slipverify/slipverify/core/bank/upstream"
	"github.com/slipverify/slipverify/core/jobs"
	"github.com/slipverify/slipverify/core/lib/egress"
	"github.com/slipverify/slipverify/core/lib/envflag"
	"github.com/slipverify/slipverify/core/lib/kafkalink"
	"github.com/slipverify/slipverify/core/lib/seedfile"
	"github.com/slipverify/slipverify/core/lib/stream"
)

// Config is core's configuration.
type Config struct {
	Addr         string        // listener for the edge
	DataDir      string        // holds core.db
	Store        string        // empty: bbolt in DataDir; a PostgreSQL URL: the PostgreSQL store
	Seed         string        // seed file loaded at start; empty loads none
	Bank         string        // bank connector: sandbox, http, kbank, scb or a route list
	BankURL      string        // upstream bank gateway for Bank=http
	BankTimeout  time.Duration // one upstream lookup
	BankMaxConc  int           // lookups in flight per bank upstream; 0: no cap
	BankMaxRate  int           // lookups a second per bank upstream; 0: no cap
	KBank        KBank         // SLIP_KBANK_*
	SCB          SCB           // SLIP_SCB_*
	RDCW         RDCW          // SLIP_RDCW_*
	EdgeToken    string        // shared secret the edge sends
	MasterKey    string        // 64 hex digits sealing stored secrets
	MaxInflight  int           // concurrent requests above which core signals overload
	IdleTimeout  time.Duration // how long a quiet connection from the edge is kept
	WriteTimeout time.Duration // writing one answer to the edge
	Drain        time.Duration // on SIGTERM: readiness off, requests still taken, for this long
	EgressAllow  string        // private ranges image URLs may reach
	EgressCA     string        // extra CA roots (PEM) for https image URLs
	FetchTimeout time.Duration // one image URL fetch

	KafkaAddr     string             // brokers, comma-separated
	KafkaLink     kafkalink.Settings // SLIP_KAFKA_TLS*, SLIP_KAFKA_SASL_*
	VerifyRetries string             // waits before async attempts 2, 3, ...
	WebhookRetry  string             // waits before callback deliveries 2, 3, ...
	JobRetention  time.Duration      // how long a job can be polled
	SlipRetention time.Duration      // how long a verified slip is remembered for duplicate checks; 0: for good
	JobWorkers    int                // async attempts run at once
	JobMaxOpen    int                // unfinished async jobs a branch may have
	OutboxLimit   int                // messages the outbox holds while the broker is away
	CommitGather  time.Duration      // how long a transaction may wait for writes under way
	PublishLinger time.Duration      // how long a write to the broker waits for more messages
	AdminAddr     string             // the operators' admin API; "off": none
	AdminToken    string             // its bootstrap token; empty: the admin API is off
	envflag.Common
}

// KBank holds the settings of KBank's Slip Verification API.
type KBank struct {
	URL, ClientID, ClientSecret string
	CertFile, KeyFile, CAFile   string
	TestMode                    bool
}

// SCB holds the settings of SCB's Slip Verification API.
type SCB struct {
	URL, APIKey, APISecret    string
	CertFile, KeyFile, CAFile string
}

// RDCW holds the settings of the RDCW Slip Verify aggregator.
type RDCW struct {
	URL, ClientID, ClientSecret string
}

// Upstreams are the names SLIP_BANK and its route lists take.
var Upstreams = []string{"sandbox", "http", "kbank", "scb", "rdcw"}

// vars lists every setting of c, bound to its fields.
func (c *Config) vars() []envflag.Var {
	return append([]envflag.Var{
		envflag.Def("SLIP_CORE_ADDR", "addr", "127.0.0.1:8081", "core's listener (reached only by the edge)", &c.Addr),
		envflag.Def("SLIP_DATA_DIR", "data-dir", ".data", "directory of core.db", &c.DataDir),
		envflag.Def("SLIP_STORE", "store", "", "where core keeps its state: empty for core.db in SLIP_DATA_DIR (one core node), or a PostgreSQL URL shared by any number of cores (several hosts with target_session_attrs=read-write find the primary)", &c.Store),
		envflag.Def("SLIP_SEED", "seed", "deploy/dev/seed.json", "seed file loaded at start, idempotently (none: no seed)", &c.Seed),
		envflag.Def("SLIP_BANK", "bank", "sandbox", "bank connector: sandbox, http, kbank, scb, rdcw, or a route list by sending bank such as 014=scb,*=kbank", &c.Bank),
		envflag.Def("SLIP_BANK_URL", "bank-url", "", "upstream bank gateway URL (SLIP_BANK=http)", &c.BankURL),
		envflag.Def("SLIP_BANK_TIMEOUT", "bank-timeout", "8s", "timeout of one upstream bank lookup", &c.BankTimeout),
		envflag.Def("SLIP_BANK_MAX_CONCURRENT", "bank-max-concurrent", "64", "lookups in flight per bank upstream (kbank, scb); more are refused at once (0: no cap)", &c.BankMaxConc),
		envflag.Def("SLIP_BANK_MAX_RATE", "bank-max-rate", "0", "lookups a second per bank upstream (kbank, scb); more are refused at once (0: no cap)", &c.BankMaxRate),
		envflag.Def("SLIP_KBANK_URL", "kbank-url", "", "KBank API scheme and host, e.g. https://openapi.kasikornbank.com (SLIP_BANK uses kbank)", &c.KBank.URL),
		envflag.Def("SLIP_KBANK_CLIENT_ID", "kbank-client-id", "", "KBank consumer id", &c.KBank.ClientID),
		envflag.Secret("SLIP_KBANK_CLIENT_SECRET", "kbank-client-secret", "KBank consumer secret", &c.KBank.ClientSecret),
		envflag.Def("SLIP_KBANK_CERT_FILE", "kbank-cert-file", "", "client certificate (PEM) for KBank's two-way TLS (with SLIP_KBANK_KEY_FILE)", &c.KBank.CertFile),
		envflag.Def("SLIP_KBANK_KEY_FILE", "kbank-key-file", "", "key (PEM) of SLIP_KBANK_CERT_FILE", &c.KBank.KeyFile),
		envflag.Def("SLIP_KBANK_CA_FILE", "kbank-ca-file", "", "extra CA roots (PEM) trusted for KBank", &c.KBank.CAFile),
		envflag.Def("SLIP_KBANK_TEST_MODE", "kbank-test-mode", "false", "send KBank sandbox's x-test-mode and env-id headers", &c.KBank.TestMode),
		envflag.Def("SLIP_SCB_URL", "scb-url", "", "SCB API base with its /partners/... prefix, e.g. https://api-sandbox.partners.scb/partners/sandbox (SLIP_BANK uses scb)", &c.SCB.URL),
		envflag.Def("SLIP_SCB_API_KEY", "scb-api-key", "", "SCB application key (also sent as resourceOwnerId)", &c.SCB.APIKey),
		envflag.Secret("SLIP_SCB_API_SECRET", "scb-api-secret", "SCB application secret", &c.SCB.APISecret),
		envflag.Def("SLIP_SCB_CERT_FILE", "scb-cert-file", "", "client certificate (PEM) for SCB's two-way TLS (with SLIP_SCB_KEY_FILE)", &c.SCB.CertFile),
		envflag.Def("SLIP_SCB_KEY_FILE", "scb-key-file", "", "key (PEM) of SLIP_SCB_CERT_FILE", &c.SCB.KeyFile),
		envflag.Def("SLIP_SCB_CA_FILE", "scb-ca-file", "", "extra CA roots (PEM) trusted for SCB", &c.SCB.CAFile),
		envflag.Def("SLIP_RDCW_URL", "rdcw-url", "https://suba.rdcw.co.th", "RDCW Slip Verify scheme and host (SLIP_BANK uses rdcw)", &c.RDCW.URL),
		envflag.Def("SLIP_RDCW_CLIENT_ID", "rdcw-client-id", "", "RDCW client id", &c.RDCW.ClientID),
		envflag.Secret("SLIP_RDCW_CLIENT_SECRET", "rdcw-client-secret", "RDCW client secret", &c.RDCW.ClientSecret),
		envflag.Secret("SLIP_EDGE_TOKEN", "edge-token", "shared secret the edge sends in X-Slip-Edge-Token (required, 32+ characters)", &c.EdgeToken),
		envflag.Def("SLIP_CORE_MAX_INFLIGHT", "max-inflight", "256", "concurrent requests above which core tells the edge it is overloaded", &c.MaxInflight),
		envflag.Def("SLIP_CORE_IDLE_TIMEOUT", "idle-timeout", "2m", "how long core keeps a keep-alive connection from the edge that carries no request (keep it above every edge's SLIP_EDGE_CORE_IDLE, so the edge always closes first)", &c.IdleTimeout),
		envflag.Def("SLIP_CORE_WRITE_TIMEOUT", "write-timeout", "30s", "time core has to write one answer to the edge", &c.WriteTimeout),
		envflag.Def("SLIP_CORE_DRAIN", "drain", "3s", "on SIGTERM, how long /ready fails while core still takes requests, before it stops accepting and finishes what it holds (keep it above the edges' SLIP_EDGE_CORE_PROBE, so every edge has stopped sending)", &c.Drain),
		envflag.Def("SLIP_EGRESS_ALLOW_CIDRS", "egress-allow-cidrs", "", "private ranges image URLs and callbacks may reach (comma-separated CIDRs; empty: none)", &c.EgressAllow),
		envflag.Def("SLIP_EGRESS_CA_FILE", "egress-ca-file", "", "extra CA roots (PEM) trusted for https image URLs and callbacks", &c.EgressCA),
		envflag.Def("SLIP_IMAGE_FETCH_TIMEOUT", "image-fetch-timeout", "10s", "timeout of one image URL fetch", &c.FetchTimeout),
		envflag.Secret("SLIP_MASTER_KEY", "master-key", "64 hex digits that seal stored secrets (required)", &c.MasterKey),
		envflag.Def("SLIP_KAFKA_ADDR", "kafka-addr", "127.0.0.1:9092", "Kafka brokers, comma-separated", &c.KafkaAddr),
		envflag.Def("SLIP_VERIFY_RETRY_SCHEDULE", "verify-retry-schedule", "30s,60s,120s,240s", "waits before each retry of an async verification (not found or pending)", &c.VerifyRetries),
		envflag.Def("SLIP_WEBHOOK_RETRY_SCHEDULE", "webhook-retry-schedule", "10s,30s,120s", "waits before each redelivery of a failed callback", &c.WebhookRetry),
		envflag.Def("SLIP_JOB_RETENTION", "job-retention", "168h", "how long an async job can be polled before it is removed", &c.JobRetention),
		envflag.Def("SLIP_SLIP_RETENTION", "slip-retention", "0s", "how long a verified slip is remembered for duplicate checks (about 2,100 bytes of core.db each); a slip verified again after that is a new one; 0: for good", &c.SlipRetention),
		envflag.Def("SLIP_JOB_WORKERS", "job-workers", "64", "async verification attempts run at once", &c.JobWorkers),
		envflag.Def("SLIP_JOB_MAX_OPEN", "job-max-open", "10000", "unfinished async jobs a branch may have (at least 100, one batch); a submit beyond it gets 429 RATE_LIMIT_EXCEEDED", &c.JobMaxOpen),
		envflag.Def("SLIP_ADMIN_ADDR", "admin-addr", "127.0.0.1:8085", "listener of the operators' admin API (/admin/v1; off: none); the edge never forwards to it", &c.AdminAddr),
		envflag.Secret("SLIP_ADMIN_TOKEN", "admin-token", "bootstrap token of the admin API (32+ characters; unset: the admin API is off)", &c.AdminToken),
		envflag.Def("SLIP_COMMIT_GATHER", "commit-gather", "500us", "how long a write may wait for the writes of verifications already under way, so they share its disk syncs (0: never; at most 100ms)", &c.CommitGather),
		envflag.Def("SLIP_PUBLISH_LINGER", "publish-linger", "10ms", "how long a write of the outbox to Kafka waits for more messages to join it, so one broker round trip and one disk commit serve many (0: never; at most 1s)", &c.PublishLinger),
		envflag.Def("SLIP_OUTBOX_LIMIT", "outbox-limit", "1000000", "messages kept for the broker while it is unreachable; beyond it the usage events of attempts that consumed no quota are dropped and counted (billable ones are kept)", &c.OutboxLimit),
	}, c.KafkaLink.Vars()...)
}

// maxCommitGather bounds SLIP_COMMIT_GATHER: a write waits at most that
// long for others, on top of its own disk syncs.
const maxCommitGather = 100 * time.Millisecond

// maxPublishLinger bounds SLIP_PUBLISH_LINGER: usage events, jobs and
// callbacks wait at most that long for company on their way to Kafka.
const maxPublishLinger = time.Second

// Admin reports whether the admin API is served: on an address, with a
// bootstrap token.
func (c Config) Admin() bool { return c.AdminAddr != "off" && c.AdminToken != "" }

// Vars returns the documented settings with their defaults.
func Vars() []envflag.Var { return new(Config).vars() }

// Load reads flags from args, each defaulting to its environment variable
// (read with getenv) and then to its built-in default.
func Load(args []string, getenv func(string) string) (Config, error) {
	var c Config
	err := envflag.Load("core", c.vars(), &c.Common, args, getenv)
	if c.Seed == "none" {
		c.Seed = "" // an empty variable is unset (the default); none is no seed
	}
	return c, err
}

var hex64 = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// CheckStoreURL checks that url, SLIP_STORE's value, is a PostgreSQL URL.
func CheckStoreURL(url string) error {
	if _, err := pgconn.ParseConfig(url); err != nil {
		return fmt.Errorf("not a PostgreSQL URL: %w", err)
	}
	return nil
}

// Validate returns every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		bad("SLIP_CORE_ADDR: %v", err)
	}
	if c.DataDir == "" {
		bad("SLIP_DATA_DIR: must not be empty")
	}
	if c.Store != "" {
		if err := CheckStoreURL(c.Store); err != nil {
			bad("SLIP_STORE: %v", err)
		}
	}
	errs = append(errs, c.validateBank()...)
	if len(c.EdgeToken) < 32 {
		bad("SLIP_EDGE_TOKEN: required, at least 32 characters")
	}
	if c.AdminAddr != "off" {
		if _, _, err := net.SplitHostPort(c.AdminAddr); err != nil {
			bad("SLIP_ADMIN_ADDR: %v (or off)", err)
		}
	}
	if c.AdminToken != "" && len(c.AdminToken) < 32 {
		bad("SLIP_ADMIN_TOKEN: at least 32 characters")
	}
	if _, err := egress.ParsePrefixes(c.EgressAllow); err != nil {
		bad("SLIP_EGRESS_ALLOW_CIDRS: %v", err)
	}
	if err := egress.CheckCAFile(c.EgressCA); err != nil {
		bad("SLIP_EGRESS_CA_FILE: %v", err)
	}
	if c.FetchTimeout <= 0 {
		bad("SLIP_IMAGE_FETCH_TIMEOUT: must be positive")
	}
	if c.MaxInflight < 1 {
		bad("SLIP_CORE_MAX_INFLIGHT: must be at least 1")
	}
	if c.IdleTimeout <= 0 {
		bad("SLIP_CORE_IDLE_TIMEOUT: must be positive")
	}
	if c.WriteTimeout <= 0 {
		bad("SLIP_CORE_WRITE_TIMEOUT: must be positive")
	}
	if c.Drain < 0 {
		bad("SLIP_CORE_DRAIN: must not be negative")
	}
	if err := stream.CheckBrokers(c.KafkaAddr); err != nil {
		bad("SLIP_KAFKA_ADDR: %v", err)
	}
	if err := c.KafkaLink.Validate(); err != nil {
		errs = append(errs, err)
	}
	verifyRetries, webhookRetries, err := c.Schedules()
	if err != nil {
		errs = append(errs, err)
	}
	if need := c.minRetention(verifyRetries, webhookRetries); c.JobRetention <= 0 {
		bad("SLIP_JOB_RETENTION: must be positive")
	} else if err == nil && c.JobRetention < need {
		bad("SLIP_JOB_RETENTION: %v is shorter than the %v a job may need, or a job is removed before its last attempt and callback and polls as JOB_NOT_FOUND: "+
			"%v of verification retries (SLIP_VERIFY_RETRY_SCHEDULE), %v of callback redeliveries (SLIP_WEBHOOK_RETRY_SCHEDULE), "+
			"%d attempts of up to %v (SLIP_BANK_TIMEOUT plus SLIP_IMAGE_FETCH_TIMEOUT) and %v for queues, deliveries and polling the result",
			c.JobRetention, need, sum(verifyRetries), sum(webhookRetries), len(verifyRetries)+1, c.attemptTime(), retentionMargin)
	}
	switch {
	case c.SlipRetention < 0:
		bad("SLIP_SLIP_RETENTION: must not be negative (0: for good)")
	case c.SlipRetention > 0 && c.SlipRetention < c.JobRetention:
		// A job's repeated attempt (after a crash) finds its own record.
		bad("SLIP_SLIP_RETENTION: %v is shorter than SLIP_JOB_RETENTION (%v): a job's slip would be forgotten while the job lives", c.SlipRetention, c.JobRetention)
	}
	if c.JobWorkers < 1 {
		bad("SLIP_JOB_WORKERS: must be at least 1")
	}
	if c.JobMaxOpen < jobs.MaxBatch {
		bad("SLIP_JOB_MAX_OPEN: must be at least %d, the items of one batch", jobs.MaxBatch)
	}
	if c.CommitGather < 0 || c.CommitGather > maxCommitGather {
		bad("SLIP_COMMIT_GATHER: must be from 0 to %v", maxCommitGather)
	}
	if c.PublishLinger < 0 || c.PublishLinger > maxPublishLinger {
		bad("SLIP_PUBLISH_LINGER: must be from 0 to %v", maxPublishLinger)
	}
	if c.OutboxLimit < 1 {
		bad("SLIP_OUTBOX_LIMIT: must be at least 1")
	}
	if !hex64.MatchString(c.MasterKey) {
		bad("SLIP_MASTER_KEY: required, 64 hex digits")
	}
	return errors.Join(errs...)
}

// validateBank returns the problems of SLIP_BANK and the settings of the
// upstreams it uses; those of the others are not looked at.
func (c Config) validateBank() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	routes, err := route.Parse(c.Bank, Upstreams)
	if err != nil {
		bad("SLIP_BANK: %v", err)
	}
	for _, name := range routes.Names() {
		switch name {
		case "http":
			// The connector's own checks: scheme, host, no query or fragment.
			if c.BankURL == "" {
				bad("SLIP_BANK_URL: required when SLIP_BANK uses http")
			} else if _, err := httpbank.New(httpbank.Config{URL: c.BankURL}); err != nil {
				bad("SLIP_BANK_URL: %v", err)
			}
		case "kbank":
			k := c.KBank
			errs = append(errs, upstreamErrs("SLIP_KBANK", k.URL, upstream.TLS{CertFile: k.CertFile, KeyFile: k.KeyFile, CAFile: k.CAFile},
				[2]string{"CLIENT_ID", k.ClientID}, [2]string{"CLIENT_SECRET", k.ClientSecret})...)
		case "scb":
			s := c.SCB
			errs = append(errs, upstreamErrs("SLIP_SCB", s.URL, upstream.TLS{CertFile: s.CertFile, KeyFile: s.KeyFile, CAFile: s.CAFile},
				[2]string{"API_KEY", s.APIKey}, [2]string{"API_SECRET", s.APISecret})...)
		case "rdcw":
			r := c.RDCW
			errs = append(errs, upstreamErrs("SLIP_RDCW", r.URL, upstream.TLS{},
				[2]string{"CLIENT_ID", r.ClientID}, [2]string{"CLIENT_SECRET", r.ClientSecret})...)
		}
	}
	if c.BankTimeout <= 0 {
		bad("SLIP_BANK_TIMEOUT: must be positive")
	}
	if c.BankMaxConc < 0 {
		bad("SLIP_BANK_MAX_CONCURRENT: must not be negative (0: no cap)")
	}
	if c.BankMaxRate < 0 {
		bad("SLIP_BANK_MAX_RATE: must not be negative (0: no cap)")
	}
	return errs
}

// upstreamErrs checks a bank upstream's URL, TLS files and required
// credentials (named by suffix, with their values), never showing a value.
func upstreamErrs(prefix, rawURL string, files upstream.TLS, required ...[2]string) []error {
	var errs []error
	if _, err := upstream.CheckURL(rawURL); err != nil {
		errs = append(errs, fmt.Errorf("%s_URL: %w", prefix, err))
	}
	for _, r := range required {
		if r[1] == "" {
			errs = append(errs, fmt.Errorf("%s_%s: required", prefix, r[0]))
		}
	}
	if _, err := files.Config(prefix); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// Limits returns the caps of each bank upstream.
func (c Config) Limits() upstream.Limits {
	return upstream.Limits{MaxConcurrent: c.BankMaxConc, PerSecond: c.BankMaxRate}
}

// ValidateAll returns every problem of c at once: Validate's, and those of
// the seed file (SLIP_SEED), read as startup reads it. It is what
// -validate should check where the program runs. Validate leaves the seed
// out so that a configuration can be checked where the file is not: the
// deployment files' tests, whose seed path is a mount in the container.
func (c Config) ValidateAll() error {
	var seedErr error
	if c.Seed != "" {
		if _, err := seedfile.Read(c.Seed); err != nil {
			seedErr = fmt.Errorf("SLIP_SEED: %w", err)
		}
	}
	return errors.Join(c.Validate(), seedErr)
}

// retentionMargin is what a job's retention holds beyond its retry waits
// and attempts. It covers what core does not bound: the time records wait
// in the broker and behind busy workers at each step, the callback
// deliveries themselves (the dispatcher's SLIP_WEBHOOK_TIMEOUT, 10 s each by
// default) and deliveries deferred by its per-host and per-service slots;
// and it leaves the client time to poll the final result after the last
// callback, which is what polling is for when callbacks fail. An hour is far more
// than the first needs and still a small part of the 168 h default.
const retentionMargin = time.Hour

// minRetention is the shortest SLIP_JOB_RETENTION that lets a job run its
// whole course before it is removed: every verification attempt and the
// waits between them, every callback redelivery wait, and retentionMargin.
func (c Config) minRetention(verifyRetries, webhookRetries []time.Duration) time.Duration {
	attempts := time.Duration(len(verifyRetries) + 1)
	return sum(verifyRetries) + sum(webhookRetries) + attempts*c.attemptTime() + retentionMargin
}

// attemptTime bounds one verification attempt: an image fetch and a bank
// lookup.
func (c Config) attemptTime() time.Duration {
	return max(c.BankTimeout, 0) + max(c.FetchTimeout, 0)
}

func sum(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t
}

// Schedules returns the async verification and callback retry schedules.
func (c Config) Schedules() (verifyRetries, webhookRetries []time.Duration, err error) {
	verifyRetries, err1 := envflag.Schedule(c.VerifyRetries)
	if err1 != nil {
		err1 = fmt.Errorf("SLIP_VERIFY_RETRY_SCHEDULE: %w", err1)
	}
	webhookRetries, err2 := envflag.Schedule(c.WebhookRetry)
	if err2 != nil {
		err2 = fmt.Errorf("SLIP_WEBHOOK_RETRY_SCHEDULE: %w", err2)
	}
	return verifyRetries, webhookRetries, errors.Join(err1, err2)
}
