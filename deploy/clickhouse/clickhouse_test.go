package clickhouse

import (
	"context"
	"strings"
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
