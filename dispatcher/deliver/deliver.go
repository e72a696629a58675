// Package deliver is the dispatcher's work: it POSTs each result callback
// of slip.results to its URL through the SSRF-safe egress client, exactly
// the bytes core signed, and reports every delivery's outcome to
// slip.webhook.outcomes, where core decides on redeliveries.
//
// Deliveries run concurrently with a bound per receiving host. A delivery
// that finds its host's slots taken waits at most SlotWait and is then
// deferred (core sends it again later, not counted as an attempt), so
// callbacks piling up for a slow or dead receiver hold the shared workers
// only briefly, not for as long as that receiver is slow.
package deliver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/egress"
)

// Poster delivers one webhook; *egress.Client is the one the dispatcher
// uses.
type Poster interface {
	Post(ctx context.Context, rawURL string, body []byte, header http.Header) (int, error)
}

// Outcomes takes the delivery outcomes; a *kafka.Writer is one.
type Outcomes interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// Dispatcher delivers callbacks. Its fields are set once, before use.
type Dispatcher struct {
	Egress   Poster
	Outcomes Outcomes
	PerHost  int           // deliveries to one host at once
	SlotWait time.Duration // longest wait for a host's slot before deferring
	Now      func() time.Time
	Log      *slog.Logger
	Backoff  time.Duration // wait before retrying a failed outcome write

	mu    sync.Mutex
	hosts map[string]*host
}

// host bounds the deliveries in flight to one host.
type host struct {
	slots chan struct{}
	users int
}

var (
	delivered     = metrics.NewCounter(`slip_dispatcher_deliveries_total{result="ok"}`)
	failedHTTP    = metrics.NewCounter(`slip_dispatcher_deliveries_total{result="http_error"}`)
	failedNet     = metrics.NewCounter(`slip_dispatcher_deliveries_total{result="network_error"}`)
	refused       = metrics.NewCounter(`slip_dispatcher_deliveries_total{result="refused"}`)
	deferred      = metrics.NewCounter(`slip_dispatcher_deliveries_total{result="deferred"}`)
	deliveryTimes = metrics.NewHistogram(`slip_dispatcher_delivery_seconds`)
)

// Handle delivers the callback of one slip.results record and reports its
// outcome. It returns an error only when ctx ends before the outcome is
// written: the record is then delivered again later.
func (d *Dispatcher) Handle(ctx context.Context, m kafka.Message) error {
	var cb api.Callback
	if err := json.Unmarshal(m.Value, &cb); err != nil {
		d.Log.Error("skipping a malformed callback", "offset", m.Offset, "err", err)
		return nil
	}
	out := d.deliver(ctx, cb)
	raw, err := json.Marshal(out)
	if err != nil {
		return err
	}
	msg := kafka.Message{Topic: api.TopicWebhookOutcomes, Key: []byte(cb.JobID), Value: raw}
	for {
		err := d.Outcomes.WriteMessages(ctx, msg)
		if err == nil {
			return nil
		}
		d.Log.Warn("writing a delivery outcome failed; retrying", "job", cb.JobID, "err", err)
		t := time.NewTimer(d.Backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}

// deliver makes one delivery and returns its outcome.
func (d *Dispatcher) deliver(ctx context.Context, cb api.Callback) api.WebhookOutcome {
	name := egress.HostKey(cb.URL) // every spelling of one server shares its slots
	h, ok := d.acquire(ctx, name)
	if !ok {
		deferred.Inc()
		return api.WebhookOutcome{EventID: uuid.NewString(), JobID: cb.JobID, Delivery: cb.Delivery, At: d.Now().UTC(),
			Deferred: true, Error: "deferred: every delivery slot of " + name + " is taken"}
	}
	defer d.release(name, h)
	header := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"slipverify-webhook/1"}}
	if cb.Signature != "" {
		header.Set(api.SignatureHeader, cb.Signature)
	}
	start := d.Now()
	status, err := d.Egress.Post(ctx, cb.URL, []byte(cb.Body), header)
	deliveryTimes.UpdateDuration(start)
	out := api.WebhookOutcome{EventID: uuid.NewString(), JobID: cb.JobID, Delivery: cb.Delivery, At: start.UTC(), Status: status}
	var ae *api.Error
	switch {
	case errors.As(err, &ae):
		refused.Inc()
		out.Error = "refused: " + ae.Error()
	case err != nil:
		failedNet.Inc()
		out.Error = err.Error()
	case status >= 200 && status < 300:
		delivered.Inc()
		out.OK = true
	default:
		failedHTTP.Inc()
	}
	return out
}

// acquire takes a delivery slot of host name, waiting while it has PerHost
// deliveries in flight, at most SlotWait (or until ctx ends): ok is false
// then, and the delivery is deferred.
func (d *Dispatcher) acquire(ctx context.Context, name string) (h *host, ok bool) {
	d.mu.Lock()
	if d.hosts == nil {
		d.hosts = map[string]*host{}
	}
	h = d.hosts[name]
	if h == nil {
		h = &host{slots: make(chan struct{}, max(d.PerHost, 1))}
		d.hosts[name] = h
	}
	h.users++
	d.mu.Unlock()
	select {
	case h.slots <- struct{}{}:
		return h, true
	default:
	}
	t := time.NewTimer(d.SlotWait)
	defer t.Stop()
	select {
	case h.slots <- struct{}{}:
		return h, true
	case <-t.C:
	case <-ctx.Done():
	}
	d.leave(name, h)
	return nil, false
}

// release frees the slot.
func (d *Dispatcher) release(name string, h *host) {
	<-h.slots
	d.leave(name, h)
}

// leave forgets a host nobody waits for, so the map holds only hosts with
// deliveries in hand.
func (d *Dispatcher) leave(name string, h *host) {
	d.mu.Lock()
	if h.users--; h.users == 0 {
		delete(d.hosts, name)
	}
	d.mu.Unlock()
}

var _ Poster = (*egress.Client)(nil)
