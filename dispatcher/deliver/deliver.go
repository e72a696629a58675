// Package deliver is the dispatcher's work: it POSTs each result callback
// of slip.results to its URL through the SSRF-safe egress client, exactly
// the bytes core signed, and reports every delivery's outcome to
// slip.webhook.outcomes, where core decides on redeliveries.
//
// Deliveries run concurrently with a bound per service (the tenant whose
// job it is) and one per receiving host. A delivery that finds either's
// slots taken waits at most SlotWait and is then deferred (core sends it
// again later, not counted as an attempt), so callbacks piling up for a slow
// or dead receiver, or for one tenant's receivers under many names, hold the
// shared workers only briefly, not for as long as those receivers are slow.
package deliver

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/egress"
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
	Egress     Poster
	Outcomes   Outcomes
	PerService int           // deliveries of one service at once
	PerHost    int           // deliveries to one host at once
	SlotWait   time.Duration // longest wait for the slots before deferring
	Now        func() time.Time
	Log        *slog.Logger
	Backoff    time.Duration // wait before retrying a failed outcome write
	// SignatureHeader names the header that carries a callback's
	// signature; "" is api.SignatureHeader.
	SignatureHeader string

	services, hosts slots
}

// slots bounds the deliveries in flight per key (a service, a host).
type slots struct {
	mu sync.Mutex
	m  map[string]*slot
}

// slot is one key's deliveries in flight; users counts those holding or
// waiting for it.
type slot struct {
	held  chan struct{}
	users int
}

var (
	delivered     = metrics.NewCounter(`slip_dispatcher_deliveries_total{result="ok"}`)
	failedHTTP    = metrics.NewCounter(`slip_dispatcher_deliveries_total{result="http_error"}`)
	failedNet     = metrics.NewCounter(`slip_dispatcher_deliveries_total{result="network_error"}`)
	refused       = metrics.NewCounter(`slip_dispatcher_deliveries_total{result="refused"}`)
	deferred      = metrics.NewCounter(`slip_dispatcher_deliveries_total{result="deferred"}`)
	cut           = metrics.NewCounter(`slip_dispatcher_deliveries_total{result="cut"}`)
	deliveryTimes = metrics.NewHistogram(`slip_dispatcher_delivery_seconds`)
)

// Handle delivers the callback of one slip.results record and reports its
// outcome. It returns an error only when ctx ends before the outcome is
// written: the record is then delivered again later.
//
// A delivery that ctx ends (the grace after SIGTERM ran out while the
// receiver had not answered, or while the delivery waited for its slots)
// reports nothing: the receiver did not fail it, and core would count an
// attempt that never completed, and mark the job's webhook failed after
// its last delivery. The record, left uncommitted, is delivered again
// after the restart.
func (d *Dispatcher) Handle(ctx context.Context, m kafka.Message) error {
	var cb api.Callback
	if err := json.Unmarshal(m.Value, &cb); err != nil {
		d.Log.Error("skipping a malformed callback", "offset", m.Offset, "err", err)
		return nil
	}
	out, err := d.deliver(ctx, cb)
	if err != nil {
		return fmt.Errorf("delivery %d of job %s cut short; it is made again after the restart: %w", cb.Delivery, cb.JobID, err)
	}
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

// deliver makes one delivery and returns its outcome, or ctx's error when
// ctx ended it: then it has no outcome.
func (d *Dispatcher) deliver(ctx context.Context, cb api.Callback) (api.WebhookOutcome, error) {
	name := egress.HostKey(cb.URL) // every spelling of one server shares its slots
	release, busy := d.acquire(ctx, cb.ServiceID, name)
	if busy != "" {
		if err := ctx.Err(); err != nil {
			cut.Inc()
			return api.WebhookOutcome{}, err
		}
		deferred.Inc()
		return api.WebhookOutcome{EventID: uuid.NewString(), JobID: cb.JobID, Delivery: cb.Delivery, At: d.Now().UTC(),
			Deferred: true, Error: "deferred: every delivery slot of " + busy + " is taken"}, nil
	}
	defer release()
	header := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"slipverify-webhook/1"}}
	if cb.Signature != "" {
		name := d.SignatureHeader
		if name == "" {
			name = api.SignatureHeader
		}
		header.Set(name, cb.Signature)
	}
	start := d.Now()
	status, err := d.Egress.Post(ctx, cb.URL, []byte(cb.Body), header)
	deliveryTimes.UpdateDuration(start)
	if err := ctx.Err(); err != nil { // whatever Post returned: it was cut, or raced the cut
		cut.Inc()
		return api.WebhookOutcome{}, err
	}
	out := api.WebhookOutcome{EventID: uuid.NewString(), JobID: cb.JobID, Delivery: cb.Delivery, At: start.UTC(), Status: status}
	var ae *api.Error
	switch {
	case errors.As(err, &ae):
		refused.Inc()
		out.Error = "refused: " + ae.Code.String()
	case err != nil:
		failedNet.Inc()
		out.Error = failure(err)
	case status >= 200 && status < 300:
		delivered.Inc()
		out.OK = true
	default:
		failedHTTP.Inc()
	}
	if err != nil {
		msg := err.Error()
		if len(msg) > 512 { // a receiver's garbage status line, quoted
			msg = msg[:512] + "…"
		}
		d.Log.Info("delivery failed", "job", cb.JobID, "delivery", cb.Delivery, "outcome", out.Error, "err", msg)
	}
	return out, nil
}

// failure says in a few words why a delivery failed, for the merchant who
// polls the job: what Go's error says besides (the dispatcher's own address,
// the resolver's, a receiver's garbage quoted whole) stays in the
// dispatcher's log.
func failure(err error) string {
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var alert tls.AlertError
	var netErr net.Error
	switch {
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return "dns: no such host"
		}
		return "dns: lookup failed"
	case errors.As(err, &certErr):
		return "tls: certificate not trusted for this host"
	case errors.As(err, &alert):
		return "tls: handshake failed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed before an answer"
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	}
	return "network or protocol error"
}

// acquire takes a slot of the service (none for a callback without one)
// and one of the host, waiting while either has its bound in flight, at most
// SlotWait in all (or until ctx ends). It returns what frees them, or, when
// it gave up, holds nothing and names what was busy.
func (d *Dispatcher) acquire(ctx context.Context, service, host string) (release func(), busy string) {
	var timer *time.Timer // started at the first wait
	wait := func() <-chan time.Time {
		if timer == nil {
			timer = time.NewTimer(d.SlotWait)
		}
		return timer.C
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var sv *slot
	if service != "" {
		if sv = d.services.take(ctx, service, d.PerService, wait); sv == nil {
			return nil, "service " + service
		}
	}
	h := d.hosts.take(ctx, host, d.PerHost, wait)
	if h == nil {
		if sv != nil {
			d.services.give(service, sv)
		}
		return nil, host
	}
	return func() {
		d.hosts.give(host, h)
		if sv != nil {
			d.services.give(service, sv)
		}
	}, ""
}

// take takes a slot of key, waiting while per are in flight, until wait's
// channel fires or ctx ends: it returns nil then.
func (s *slots) take(ctx context.Context, key string, per int, wait func() <-chan time.Time) *slot {
	s.mu.Lock()
	if s.m == nil {
		s.m = map[string]*slot{}
	}
	sl := s.m[key]
	if sl == nil {
		sl = &slot{held: make(chan struct{}, max(per, 1))}
		s.m[key] = sl
	}
	sl.users++
	s.mu.Unlock()
	select {
	case sl.held <- struct{}{}:
		return sl
	default:
	}
	select {
	case sl.held <- struct{}{}:
		return sl
	case <-wait():
	case <-ctx.Done():
	}
	s.leave(key, sl)
	return nil
}

// give frees a slot take returned.
func (s *slots) give(key string, sl *slot) {
	<-sl.held
	s.leave(key, sl)
}

// leave forgets a key nobody waits for, so the map holds only keys with
// deliveries in hand.
func (s *slots) leave(key string, sl *slot) {
	s.mu.Lock()
	if sl.users--; sl.users == 0 {
		delete(s.m, key)
	}
	s.mu.Unlock()
}

var _ Poster = (*egress.Client)(nil)
