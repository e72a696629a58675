package server

import (
	"fmt"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/profiling"
	"github.com/slipverify/slipverify/core/verify"
)

// coreMetrics are core's Prometheus series, served on GET /metrics of its
// listener (internal, as every route of core is; the edge forwards no such
// path). Each server has a set of its own.
type coreMetrics struct {
	set      *metrics.Set
	ok       *metrics.Counter
	byCode   map[api.Code]*metrics.Counter
	duration *metrics.Histogram
}

func newMetrics(s *Server) *coreMetrics {
	set := metrics.NewSet()
	m := &coreMetrics{set: set, byCode: map[api.Code]*metrics.Counter{}}
	m.ok = set.NewCounter(`slip_core_answers_total{code="OK"}`)
	for _, r := range api.Rows() {
		m.byCode[r.Code] = set.GetOrCreateCounter(fmt.Sprintf(`slip_core_answers_total{code=%q}`, r.Code.String()))
	}
	m.duration = set.NewHistogram(`slip_core_request_duration_seconds`)
	set.NewGauge(`slip_core_inflight_requests`, func() float64 { return float64(s.inflight.Load()) })
	set.NewGauge(`slip_core_outbox_messages`, func() float64 { w, _ := s.store.OutboxStats(); return float64(w) })
	set.NewGauge(`slip_core_outbox_dropped_total`, func() float64 { _, d := s.store.OutboxStats(); return float64(d) })
	set.NewGauge(`slip_core_store_write_failures_total`, func() float64 { return float64(s.store.WriteFailures()) })
	set.NewGauge(`slip_core_store_commits_total`, func() float64 { c, _ := s.store.Commits(); return float64(c) })
	set.NewGauge(`slip_core_store_writes_total`, func() float64 { _, w := s.store.Commits(); return float64(w) })
	set.NewGauge(`slip_core_store_bytes`, func() float64 { return float64(s.store.Size()) })
	if im, ok := s.verifier.Images.(interface{ Limit() *verify.DecodeLimit }); ok {
		decodes := im.Limit()
		set.NewGauge(`slip_core_image_decode_budget_bytes`, func() float64 { return float64(decodes.Total()) })
		set.NewGauge(`slip_core_image_decode_bytes`, func() float64 { return float64(decodes.InUse()) })
		set.NewGauge(`slip_core_image_decodes_waiting`, func() float64 { return float64(decodes.Waiting()) })
	}
	return m
}

// answered counts one answer: OK, or the catalog code of its error.
func (m *coreMetrics) answered(e *api.Error, start time.Time) {
	if e == nil {
		m.ok.Inc()
	} else {
		m.byCode[e.Code].Inc()
	}
	m.duration.UpdateDuration(start)
}

// profile serves the Go runtime's profiles (/debug/pprof/) beside
// /metrics. Core has one listener, the edge's, internal, and the edge
// forwards no such path to it. Unlike /metrics a profile needs the edge
// token, as every route but /health and /metrics does: it shows more of
// the process than its counters, and a CPU profile or trace costs CPU.
func (s *Server) profile(ctx *fasthttp.RequestCtx) {
	if !s.fromEdge(ctx) {
		s.refuse(ctx, api.V2)
		return
	}
	profiling.Serve(ctx)
}

func (s *Server) writeMetrics(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/plain; version=0.0.4")
	s.metrics.set.WritePrometheus(ctx)
	metrics.WritePrometheus(ctx, true) // the sets registered by other packages (the bank upstreams'), and the process's
}
