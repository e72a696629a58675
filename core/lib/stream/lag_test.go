package stream_test

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/bank/bankfake"
	"github.com/slipverify/slipverify/core/lib/kafkalink"
	"github.com/slipverify/slipverify/core/lib/stream"
	"github.com/slipverify/slipverify/core/lib/tlsfiles"
	"github.com/slipverify/slipverify/deploy/broker"
)

// TestLagOverSecureLink: the lag is measured over the tier's link, here TLS
// and SCRAM-SHA-256 to a broker that lets nothing else in.
func TestLagOverSecureLink(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pki := bankfake.NewPKI(t)
	sasl := kafkalink.SASL{Mechanism: kafkalink.ScramSHA256, User: "usage", Password: "lag-password"}
	addr := broker.StartTestTLS(t, pki.Server, "", sasl)
	link, err := kafkalink.New(kafkalink.Settings{TLS: true, Files: tlsfiles.Files{CAFile: pki.CAFile}, SASL: sasl})
	if err != nil {
		t.Fatal(err)
	}
	w := stream.NewWriter([]string{addr}, link)
	defer w.Close()
	var msgs []kafka.Message
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		msgs = append(msgs, kafka.Message{Topic: api.TopicUsage, Key: []byte(k), Value: []byte("{}")})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	lag := &stream.Lag{Brokers: []string{addr}, Link: link, Group: "usage", Topic: api.TopicUsage}
	if n, err := lag.Measure(ctx); err != nil || n != 5 {
		t.Errorf("lag over the link: %d, %v; want 5", n, err)
	}
	plain := &stream.Lag{Brokers: []string{addr}, Group: "usage", Topic: api.TopicUsage}
	if _, err := plain.Measure(ctx); err == nil {
		t.Error("the broker answered a plaintext lag measurement")
	}
}
