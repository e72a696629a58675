package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/stream"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/deploy/broker"
)

// TestMain removes the programs the tests build.
func TestMain(m *testing.M) { testnet.Main(m) }

// TestConsumerLag: while a receiver holds its callbacks, the dispatcher's
// /metrics shows them as its group's lag on slip.results; once they are
// delivered the lag is 0.
func TestConsumerLag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the dispatcher against a broker")
	}
	release := make(chan struct{})
	srv, ca := testnet.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free() // before the server closes: it waits for the held requests
	addr := broker.StartTest(t, 3)
	p := testnet.StartDispatcher(t, addr, "SLIP_EGRESS_ALLOW_CIDRS=127.0.0.0/8", "SLIP_EGRESS_CA_FILE="+ca, "SLIP_WEBHOOK_TIMEOUT=12s")

	const held = 5
	var msgs []kafka.Message
	for n := range held {
		raw, _ := json.Marshal(api.Callback{EventID: fmt.Sprint("ev", n), JobID: fmt.Sprint("job", n), ServiceID: fmt.Sprint("svc", n),
			Delivery: 1, URL: srv.URL + "/hold", Body: fmt.Sprintf(`{"jobId":"job%d"}`, n), Signature: "sha256=00"})
		msgs = append(msgs, kafka.Message{Topic: api.TopicResults, Key: []byte(fmt.Sprint("job", n)), Value: raw})
	}
	w := stream.NewWriter([]string{addr}, nil)
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}

	series := `slip_dispatcher_consumer_lag_messages{topic="slip.results",group="slip-dispatcher"} `
	var metrics string
	scrape := func(want string) bool {
		res, err := http.Get("http://" + p.Addr + "/metrics")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		metrics = string(raw)
		return strings.Contains(metrics, series+want+"\n")
	}
	testnet.Eventually(t, 30*time.Second, func() bool { return scrape(fmt.Sprint(held)) },
		func() string { return fmt.Sprintf("lag while %d callbacks are held, /metrics:\n%s", held, metrics) })
	free()
	testnet.Eventually(t, 30*time.Second, func() bool { return scrape("0") },
		func() string { return "lag after the callbacks were delivered, /metrics:\n" + metrics })
}
