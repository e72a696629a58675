package stream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/lib/kafkalink"
)

// Lag measures a consumer group's lag on a topic from the brokers: the
// messages past the group's committed offsets, over every partition. A
// message counts until the group commits it, which a consumer does once its
// effect is durable (the usage tier's batch in ClickHouse, the dispatcher's
// delivery and outcome), so the lag grows while that effect cannot be made,
// whatever the readers have fetched. Every tier measures its groups with it.
type Lag struct {
	Brokers      []string
	Link         *kafkalink.Link // TLS and SASL of the brokers; nil: plaintext
	Group, Topic string
	Metric       string // the gauge Watch publishes, with its labels if any

	last atomic.Int64
}

// Measure asks the brokers for the topic's partitions, their end offsets
// and the group's committed offsets.
func (l *Lag) Measure(ctx context.Context) (int64, error) {
	client := &kafka.Client{Addr: kafka.TCP(l.Brokers...), Timeout: 5 * time.Second, Transport: l.Link.Transport()}
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{l.Topic}})
	if err != nil {
		return 0, fmt.Errorf("lag: metadata: %w", err)
	}
	var parts []int
	var ends []kafka.OffsetRequest
	for _, t := range meta.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, p.ID)
			ends = append(ends, kafka.LastOffsetOf(p.ID))
		}
	}
	if len(parts) == 0 {
		return 0, fmt.Errorf("lag: topic %s has no partitions", l.Topic)
	}
	last, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{l.Topic: ends}})
	if err != nil {
		return 0, fmt.Errorf("lag: end offsets: %w", err)
	}
	committed, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{Addr: coordinator(ctx, client, l.Group), GroupID: l.Group,
		Topics: map[string][]int{l.Topic: parts}})
	if err == nil {
		err = committed.Error
	}
	done := map[int]int64{}
	switch {
	case errors.Is(err, kafka.GroupIdNotFound): // a group that never was has committed nothing
	case err != nil:
		return 0, fmt.Errorf("lag: committed offsets: %w", err)
	default:
		for _, p := range committed.Topics[l.Topic] {
			done[p.Partition] = max(p.CommittedOffset, 0) // -1: nothing committed yet
		}
	}
	var n int64
	for _, p := range last.Topics[l.Topic] {
		n += max(0, p.LastOffset-done[p.Partition])
	}
	l.last.Store(n)
	return n, nil
}

// coordinator returns the group coordinator's address, or nil (any broker)
// when it cannot be found.
func coordinator(ctx context.Context, client *kafka.Client, group string) net.Addr {
	res, err := client.FindCoordinator(ctx, &kafka.FindCoordinatorRequest{Key: group, KeyType: kafka.CoordinatorKeyTypeConsumer})
	if err != nil || res.Error != nil || res.Coordinator == nil {
		return nil
	}
	return kafka.TCP(net.JoinHostPort(res.Coordinator.Host, fmt.Sprint(res.Coordinator.Port)))
}

// Last is the lag last measured.
func (l *Lag) Last() int64 { return l.last.Load() }

// Watch measures the lag every interval until ctx ends and publishes it as
// the gauge l.Metric.
func (l *Lag) Watch(ctx context.Context, interval time.Duration) {
	metrics.GetOrCreateGauge(l.Metric, func() float64 { return float64(l.Last()) })
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		mctx, cancel := context.WithTimeout(ctx, interval)
		l.Measure(mctx) // on failure the gauge keeps the last value
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
