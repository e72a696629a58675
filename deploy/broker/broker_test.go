package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/testnet"
)

// start runs the broker until the test ends or stop is called.
func start(t *testing.T, c Config) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- Run(ctx, c, func([]string) { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("broker did not start: %v", err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

func produce(t *testing.T, addr, topic string, msgs ...kafka.Message) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: topic, Balancer: &kafka.Hash{}, BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
}

// consume reads n messages with a consumer group, committing each after it
// is read, the way the tiers will.
func consume(t *testing.T, addr, topic, group string, n int) []string {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: topic, GroupID: group,
		SessionTimeout: 6 * time.Second, MaxWait: 50 * time.Millisecond, StartOffset: kafka.FirstOffset})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	for len(got) < n {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("after %d of %d messages: %v", len(got), n, err)
		}
		got = append(got, string(m.Value))
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// TestTopicsOverTCP: kafka-go finds the platform's topics and moves
// messages through the broker over TCP, as the tiers will.
func TestTopicsOverTCP(t *testing.T) {
	addr := testnet.FreeAddr(t)
	start(t, Config{Addr: addr, Partitions: 3, Memory: true})
	conn, err := kafka.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := conn.ReadPartitions(api.Topics...)
	conn.Close()
	if err != nil || len(parts) != 3*len(api.Topics) {
		t.Fatalf("partitions of the platform topics: %d, %v", len(parts), err)
	}
	produce(t, addr, "slip.usage", kafka.Message{Key: []byte("svc-a"), Value: []byte("e1")}, kafka.Message{Key: []byte("svc-a"), Value: []byte("e2")})
	if got := consume(t, addr, "slip.usage", "test", 2); got[0] != "e1" || got[1] != "e2" {
		t.Errorf("consumed %v", got)
	}
}

// TestDataSurvivesRestart: records and a group's committed offset survive a
// restart with the same data dir.
func TestDataSurvivesRestart(t *testing.T) {
	addr, dir := testnet.FreeAddr(t), t.TempDir()
	c := Config{Addr: addr, DataDir: dir, Partitions: 1}
	stop := start(t, c)
	produce(t, addr, "slip.jobs", kafka.Message{Value: []byte("j1")}, kafka.Message{Value: []byte("j2")})
	if got := consume(t, addr, "slip.jobs", "workers", 1); got[0] != "j1" {
		t.Fatalf("first read: %v", got)
	}
	stop()
	start(t, c)
	if got := consume(t, addr, "slip.jobs", "workers", 1); got[0] != "j2" {
		t.Errorf("after a restart the group resumed at %v, want j2", got)
	}
}

func TestConfig(t *testing.T) {
	c, err := Load(nil, func(string) string { return "" })
	if err != nil || c.Validate() != nil || c.Addr != "127.0.0.1:9092" || c.Memory {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	c.Addr, c.Partitions = "10.0.0.1:9092, 127.0.0.1:x", 0
	err = c.Validate()
	for _, want := range []string{"loopback", "bad port", "SLIP_BROKER_PARTITIONS"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
}
