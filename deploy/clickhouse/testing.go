package clickhouse

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

// StartTest starts a server of the test's own in a temporary directory,
// stopped when the test ends. When clickhouse-server is not installed the
// test is skipped, except in CI (CI set), where it fails: CI installs it.
func StartTest(tb testing.TB) *Server {
	tb.Helper()
	return StartTestConfig(tb, Config{})
}

// StartTestConfig is StartTest with c's TLS files and login; its directory
// and ports are the test's own.
func StartTestConfig(tb testing.TB, c Config) *Server {
	tb.Helper()
	c.Dir, c.TCPAddr, c.HTTPAddr = tb.TempDir(), testnet.FreeAddr(tb), testnet.FreeAddr(tb)
	if !c.Installed() {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%s is missing; CI installs it (.ci/run)", c.binary())
		}
		tb.Skipf("%s is not installed: apt-get install clickhouse-server clickhouse-client to run this test", c.binary())
	}
	s, err := Start(context.Background(), c)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Stop(30 * time.Second) })
	return s
}

// StartTestCluster starts a cluster of the test's own: a ZooKeeper and two
// replicas of one shard on free ports, named "ledger", stopped when the
// test ends. Skipped as StartTest is when clickhouse-server or zookeeper is
// missing, except in CI.
func StartTestCluster(tb testing.TB) *Cluster {
	tb.Helper()
	c := ClusterConfig{Dir: tb.TempDir(), Name: "ledger", ZooKeeper: testnet.FreeAddr(tb)}
	for range 2 {
		c.TCPAddrs = append(c.TCPAddrs, testnet.FreeAddr(tb))
		c.HTTPAddrs = append(c.HTTPAddrs, testnet.FreeAddr(tb))
		c.InterserverAddrs = append(c.InterserverAddrs, testnet.FreeAddr(tb))
	}
	if !(Config{}).Installed() || !(ZooKeeperConfig{}).Installed() {
		if os.Getenv("CI") != "" {
			tb.Fatalf("clickhouse-server or zookeeper is missing; CI installs them (.ci/run)")
		}
		tb.Skip("clickhouse-server or zookeeper is not installed: apt-get install clickhouse-server clickhouse-client zookeeper to run this test")
	}
	cl, err := StartCluster(context.Background(), c)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cl.Stop(30 * time.Second) })
	return cl
}
