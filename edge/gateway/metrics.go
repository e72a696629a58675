package gateway

import (
	"fmt"
	"io"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/edge/accesslog"
	"github.com/slipverify/slipverify/edge/authcache"
	"github.com/slipverify/slipverify/edge/ratelimit"
)

// statuses are the response codes counted one by one; others count as
// "other".
var statuses = []int{200, 201, 202, 400, 401, 403, 404, 409, 413, 429, 500, 502, 503}

// Metrics are the edge's Prometheus metrics, created once so the request
// path only increments.
type Metrics struct {
	set        *metrics.Set
	requests   [][]*metrics.Counter // [route][status slot]
	latency    []*metrics.Histogram // [route]
	rejection  []*metrics.Counter   // [api.Code]
	unanswered *metrics.Counter     // connections closed without an answer
	cores      *metrics.Set         // the cores' series (Cores), set by New
}

// NewMetrics registers the edge's metrics: requests by route and status,
// latency by route, rejections by reason, auth cache lookups, the adaptive
// rate factor and connections closed without an answer.
func NewMetrics(auth *authcache.Cache, adaptive *ratelimit.Adaptive) *Metrics {
	m := &Metrics{set: metrics.NewSet()}
	names := make([]string, 0, len(Routes)+1)
	for _, r := range Routes {
		names = append(names, r.Method+" "+r.Path)
	}
	names = append(names, "unknown")
	for _, route := range names {
		row := make([]*metrics.Counter, len(statuses)+1)
		for i, s := range statuses {
			row[i] = m.set.NewCounter(fmt.Sprintf(`edge_requests_total{route=%q,code="%d"}`, route, s))
		}
		row[len(statuses)] = m.set.NewCounter(fmt.Sprintf(`edge_requests_total{route=%q,code="other"}`, route))
		m.requests = append(m.requests, row)
		m.latency = append(m.latency, m.set.NewHistogram(fmt.Sprintf(`edge_request_duration_seconds{route=%q}`, route)))
	}
	for _, r := range api.Rows() {
		for int(r.Code) >= len(m.rejection) {
			m.rejection = append(m.rejection, nil)
		}
		m.rejection[r.Code] = m.set.NewCounter(fmt.Sprintf(`edge_rejections_total{reason=%q}`, r.Code.String()+"/"+r.V1Code))
	}
	stat := func(f func(authcache.Stats) uint64) func() float64 {
		return func() float64 { return float64(f(auth.Stats())) }
	}
	m.set.NewGauge(`edge_auth_cache_lookups_total{result="hit"}`, stat(func(s authcache.Stats) uint64 { return s.Hits }))
	m.set.NewGauge(`edge_auth_cache_lookups_total{result="negative"}`, stat(func(s authcache.Stats) uint64 { return s.Negative }))
	m.set.NewGauge(`edge_auth_cache_lookups_total{result="miss"}`, stat(func(s authcache.Stats) uint64 { return s.Misses }))
	m.set.NewGauge(`edge_auth_cache_lookups_total{result="shared"}`, stat(func(s authcache.Stats) uint64 { return s.Shared }))
	m.set.NewGauge(`edge_auth_cache_lookups_total{result="error"}`, stat(func(s authcache.Stats) uint64 { return s.Errors }))
	m.set.NewGauge(`edge_auth_cache_refreshes_total`, stat(func(s authcache.Stats) uint64 { return s.Refreshed }))
	m.set.NewGauge(`edge_rate_factor`, adaptive.Factor)
	m.unanswered = m.set.NewCounter(`edge_connections_closed_unanswered_total`)
	return m
}

func (m *Metrics) observe(route, status int, d time.Duration) {
	slot := len(statuses)
	for i, s := range statuses {
		if s == status {
			slot = i
			break
		}
	}
	m.requests[route][slot].Inc()
	m.latency[route].Update(d.Seconds())
}

func (m *Metrics) rejected(code api.Code) { m.rejection[code].Inc() }

// accessLog exports the access log's losses: lines dropped because its
// writer fell behind, and lines lost to failed writes.
func (m *Metrics) accessLog(l *accesslog.Log) {
	m.set.NewGauge(`edge_access_log_dropped_lines_total`, func() float64 { return float64(l.Dropped()) })
	m.set.NewGauge(`edge_access_log_failed_lines_total`, func() float64 { return float64(l.Failed()) })
}

// WritePrometheus writes every metric in Prometheus text format.
func (m *Metrics) WritePrometheus(w io.Writer) {
	m.set.WritePrometheus(w)
	if m.cores != nil {
		m.cores.WritePrometheus(w)
	}
}
