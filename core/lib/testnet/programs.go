package testnet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The credentials the programs a test starts share, unless it gives them
// others (SLIP_EDGE_TOKEN, SLIP_MASTER_KEY in env).
const (
	EdgeToken = "testnet-edge-token-0123456789abcdef0123"
	MasterKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
)

// startTimeout bounds a program's start once it is built: the usage tier
// waits for ClickHouse, the broker replays its log.
const startTimeout = time.Minute

// Program is one of the platform's programs running for a test, on a port
// and with a data directory of its own, until the test ends.
type Program struct {
	*Proc
	// Addr is the program's listener (host:port); the broker's is Kafka's.
	Addr  string
	ready func(testing.TB) // waits until the program serves
}

// URL is the program's base URL.
func (p *Program) URL() string { return "http://" + p.Addr }

// Restart stops the program, starts it again with the same settings and
// data, and waits until it serves, failing tb (the test or subtest that
// restarts it) if it does not.
func (p *Program) Restart(tb testing.TB) {
	tb.Helper()
	p.Proc.Restart()
	p.ready(tb)
}

// Seed writes a seed (core's records, JSON) to a file of the test and
// returns its path, for StartCore.
func Seed(tb testing.TB, json string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "seed.json")
	if err := os.WriteFile(path, []byte(json), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// StartCore starts core with the records of the seed file seed: on a free
// port, a data directory of its own, the shared credentials, the sandbox
// bank, no broker (SLIP_KAFKA_ADDR is a port nobody listens on: jobs wait
// in the outbox) and no drain delay. env adds settings or overrides these.
// It returns once core answers /health.
func StartCore(tb testing.TB, seed string, env ...string) *Program {
	tb.Helper()
	seed, err := filepath.Abs(seed)
	if err != nil {
		tb.Fatal(err)
	}
	return start(tb, "core/cmd/core", "SLIP_CORE_ADDR", "/health", append([]string{
		"SLIP_CORE_ADDR=" + FreeAddr(tb), "SLIP_DATA_DIR=" + tb.TempDir(), "SLIP_SEED=" + seed,
		"SLIP_EDGE_TOKEN=" + EdgeToken, "SLIP_MASTER_KEY=" + MasterKey, "SLIP_BANK=sandbox", "SLIP_CORE_DRAIN=0s",
		"SLIP_KAFKA_ADDR=" + FreeAddr(tb)}, env...))
}

// StartEdge starts the edge in front of core at the address core: on a free
// port, with the shared edge token, no metrics listener, no broker and no
// drain delay; env adds settings or overrides these. It returns once the
// edge answers /health (so core answers too).
func StartEdge(tb testing.TB, core string, env ...string) *Program {
	tb.Helper()
	return start(tb, "edge/cmd/edge", "SLIP_EDGE_ADDR", "/health", append([]string{
		"SLIP_EDGE_ADDR=" + FreeAddr(tb), "SLIP_CORE_ADDR=" + core, "SLIP_EDGE_TOKEN=" + EdgeToken,
		"SLIP_EDGE_METRICS_ADDR=off", "SLIP_KAFKA_ADDR=off", "SLIP_EDGE_DRAIN=0s"}, env...))
}

// StartBroker starts the dev broker (deploy/cmd/broker) on a free port with
// a data directory of its own; env adds settings or overrides these. It
// returns once the broker accepts connections; its Addr is the Kafka
// address of the other programs.
func StartBroker(tb testing.TB, env ...string) *Program {
	tb.Helper()
	return start(tb, "deploy/cmd/broker", "SLIP_KAFKA_ADDR", "", append([]string{
		"SLIP_KAFKA_ADDR=" + FreeAddr(tb), "SLIP_DATA_DIR=" + tb.TempDir()}, env...))
}

// StartDispatcher starts the dispatcher, reading the broker at kafka, on a
// free port; env adds settings or overrides these. It returns once the
// dispatcher answers /health.
func StartDispatcher(tb testing.TB, kafka string, env ...string) *Program {
	tb.Helper()
	return start(tb, "dispatcher/cmd/dispatcher", "SLIP_DISPATCHER_ADDR", "/health", append([]string{
		"SLIP_DISPATCHER_ADDR=" + FreeAddr(tb), "SLIP_KAFKA_ADDR=" + kafka}, env...))
}

// StartUsage starts the usage tier, reading the broker at kafka into the
// ClickHouse server at clickhouse, on a free port and with no
// reconciliation (env names core and the edge token for it); env adds
// settings or overrides these. It returns once usage answers /health
// (ClickHouse reachable, the schema migrated).
func StartUsage(tb testing.TB, kafka, clickhouse string, env ...string) *Program {
	tb.Helper()
	return start(tb, "usage/cmd/usage", "SLIP_USAGE_ADDR", "/health", append([]string{
		"SLIP_USAGE_ADDR=" + FreeAddr(tb), "SLIP_KAFKA_ADDR=" + kafka, "SLIP_CLICKHOUSE_ADDR=" + clickhouse,
		"SLIP_EDGE_TOKEN="}, env...))
}

// start builds and runs pkg's program with env, its listener the last value
// of addrVar in env, and waits until it serves: health answers 200, or,
// without a health path, the listener accepts connections.
func start(tb testing.TB, pkg, addrVar, health string, env []string) *Program {
	tb.Helper()
	p := &Program{Proc: Start(tb, Build(tb, pkg), env...), Addr: lookup(env, addrVar)}
	p.ready = func(tb testing.TB) {
		tb.Helper()
		if health == "" {
			WaitTCP(tb, p.Addr, startTimeout)
			return
		}
		WaitHTTP(tb, p.URL()+health, startTimeout, p)
	}
	p.ready(tb)
	return p
}

// lookup returns the value of name in env, the last if it is set twice (as
// the program reads it).
func lookup(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}
