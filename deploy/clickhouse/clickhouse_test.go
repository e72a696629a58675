package clickhouse

import (
	"context"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStartStopRestart: the server answers /ping once Start returns, stops
// on SIGTERM, and starts again on the same directory.
func TestStartStopRestart(t *testing.T) {
	s := StartTest(t)
	ctx := context.Background()
	url := "http://" + s.HTTPAddr() + "/ping"
	if err := Ping(ctx, url); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if Ping(ctx, url) == nil {
		t.Fatal("the server still answers after Stop")
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := Ping(ctx, url); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	err := Config{TCPAddr: "10.0.0.1:9000", HTTPAddr: "nope"}.Validate()
	for _, want := range []string{"data directory", "loopback", "SLIP_CLICKHOUSE_HTTP_ADDR"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
	c := Config{Dir: t.TempDir(), TCPAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2", Binary: "/nonexistent/clickhouse-server"}
	if _, err := Start(context.Background(), c); err == nil || !strings.Contains(err.Error(), "apt-get install") {
		t.Errorf("missing binary: %v", err)
	}
}

// TestClusterSupervised: a cluster's replicas and ZooKeeper answer once it
// has started, and each one killed is started again by Supervise.
func TestClusterSupervised(t *testing.T) {
	cl := StartTestCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	supervised := make(chan struct{})
	go func() { cl.Supervise(ctx, slog.New(slog.DiscardHandler)); close(supervised) }()
	defer func() { cancel(); <-supervised }()
	// Each part is killed while no restart of it runs, so reading its pid
	// races with nothing; it is back when it answers again after going away.
	for _, s := range cl.Replicas {
		url := "http://" + s.HTTPAddr() + "/ping"
		if err := Ping(ctx, url); err != nil {
			t.Fatal(err)
		}
		syscall.Kill(s.Pid(), syscall.SIGKILL)
		if !eventually(time.Minute, func() bool { return Ping(ctx, url) != nil }) || !eventually(time.Minute, func() bool { return Ping(ctx, url) == nil }) {
			t.Fatalf("replica %s not started again", s.Addr())
		}
	}
	syscall.Kill(cl.ZooKeeper.Pid(), syscall.SIGKILL)
	if !eventually(time.Minute, func() bool { return !cl.ZooKeeper.ok() }) || !eventually(time.Minute, cl.ZooKeeper.ok) {
		t.Fatal("ZooKeeper not started again")
	}
}

// eventually polls cond every 20 ms until it holds or timeout passes.
func eventually(timeout time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(20 * time.Millisecond) { // polling interval
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}
