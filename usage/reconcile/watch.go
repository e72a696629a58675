package reconcile

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/usage/chstore"
)

// Watch reconciles the ledger with core's counters again and again (Run),
// for the drift gauges an alert watches. Each run reads the ledger between
// two reads of core's counters, the last run's and a new one, and judges it
// by Between, so events in flight are not drift while traffic flows; a
// pipeline that lags behind by longer than the interval between runs
// (core's outbox, Kafka, a ClickHouse outage) does show as drift until it
// catches up, and the lag gauges say so. A run checks at most Services
// services, the next ones by id after the last run's, so the ledger query
// stays bounded however many services there are; a service's drift is what
// its last check found. The services are core's and those the ledger has
// events of in the last Recent days, so a service core does not know is
// drift too.
type Watch struct {
	Core     Core
	Store    *chstore.Store
	Services int              // services per run at most; 0: all
	Every    time.Duration    // the interval Run is ticked at, for /metrics; 0: Run does not run
	Recent   int              // days the ledger is searched for services core does not know; 0: 62
	Now      func() time.Time // nil: time.Now
	Log      *slog.Logger     // nil: slog.Default()

	mu      sync.Mutex
	prev    *api.UsageCounters // the last run's read of core's counters
	after   string             // the last service the last run checked
	checked map[string]serviceDrift
	status  Status
}

type serviceDrift struct{ units, rows int64 }

// Status is what the runs so far found.
type Status struct {
	Units       int64     // units by which the ledger is off core's counters, over the services' own rows
	Rows        int64     // drifting rows, services and branches
	Services    int       // services with a drifting row
	Checked     int       // services checked at least once and still in core or the ledger
	LastSuccess time.Time // the end of the last run that reconciled; zero: none yet
	Runs        uint64    // runs that reconciled
	Failures    uint64    // runs that could not read core or the ledger
}

// Status returns what the runs so far found.
func (w *Watch) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

// Publish exports the status as gauges (once per process).
func (w *Watch) Publish() {
	gauge := func(name string, f func(Status) float64) {
		metrics.GetOrCreateGauge(name, func() float64 { return f(w.Status()) })
	}
	gauge("usage_ledger_drift", func(s Status) float64 { return float64(s.Units) })
	gauge("usage_ledger_drift_rows", func(s Status) float64 { return float64(s.Rows) })
	gauge("usage_ledger_drifting_services", func(s Status) float64 { return float64(s.Services) })
	gauge("usage_reconcile_services_checked", func(s Status) float64 { return float64(s.Checked) })
	metrics.GetOrCreateGauge("usage_reconcile_interval_seconds", func() float64 { return w.Every.Seconds() })
	gauge("usage_reconcile_last_success_timestamp_seconds", func(s Status) float64 {
		if s.LastSuccess.IsZero() {
			return 0
		}
		return float64(s.LastSuccess.UnixMilli()) / 1000
	})
}

// Runs of every Watch of the process, for /metrics.
var (
	runs     = metrics.NewCounter("usage_reconcile_runs_total")
	failures = metrics.NewCounter("usage_reconcile_failures_total")
)

// Run reconciles at once and then at every tick until ctx ends.
func (w *Watch) Run(ctx context.Context, tick <-chan time.Time) {
	for {
		if err := w.Once(ctx); err != nil && ctx.Err() == nil {
			cmp.Or(w.Log, slog.Default()).Warn("periodic reconciliation failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
	}
}

// Once runs one reconciliation of the next services.
func (w *Watch) Once(ctx context.Context) error {
	w.mu.Lock()
	prev, after := w.prev, w.after
	w.mu.Unlock()
	err := w.once(ctx, prev, after)
	if err != nil {
		w.mu.Lock()
		w.status.Failures++
		w.mu.Unlock()
		failures.Inc()
	}
	return err
}

func (w *Watch) once(ctx context.Context, prev *api.UsageCounters, after string) error {
	var lo api.UsageCounters // the first run knows no earlier counters: only a ledger above core's drifts
	list := prev
	if prev == nil {
		c, err := w.Core.Counters(ctx)
		if err != nil {
			return err
		}
		list = &c
	} else {
		lo = *prev
	}
	recent := w.Recent
	if recent <= 0 {
		recent = 62
	}
	inLedger, err := w.Store.ServicesSince(ctx, bangkokDate(w.now()).AddDate(0, 0, -recent))
	if err != nil {
		return err
	}
	all := slices.Clone(list.Services)
	listed := map[string]bool{}
	for _, s := range all {
		listed[s.ServiceID] = true
	}
	for _, id := range inLedger {
		if !listed[id] {
			listed[id] = true
			all = append(all, api.ServiceCounters{ServiceID: id}) // no period: only its total counts
		}
	}
	batch := w.batch(all, after)
	ids := make([]string, len(batch))
	since := time.Time{}
	for i, s := range batch {
		ids[i] = s.ServiceID
		if start := bangkokDate(s.PeriodStart); !s.PeriodStart.IsZero() && (since.IsZero() || start.Before(since)) {
			since = start
		}
	}
	days, err := w.Store.BillableOf(ctx, ids, since)
	if err != nil {
		return err
	}
	cur, err := w.Core.Counters(ctx)
	if err != nil {
		return err
	}
	inBatch := map[string]bool{}
	for _, id := range ids {
		inBatch[id] = true
	}
	hi := api.UsageCounters{At: cur.At}
	for _, s := range cur.Services {
		if inBatch[s.ServiceID] {
			hi.Services = append(hi.Services, s)
		}
	}
	r := Between(lo, hi, days)

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.checked == nil {
		w.checked = map[string]serviceDrift{}
	}
	for _, id := range ids {
		w.checked[id] = serviceDrift{}
	}
	for _, row := range r.Rows {
		if row.Status != Drift {
			continue
		}
		d := w.checked[row.ServiceID]
		d.rows++
		if row.BranchID == "" {
			d.units += row.Units
		}
		w.checked[row.ServiceID] = d
	}
	known := listed
	for _, s := range cur.Services {
		known[s.ServiceID] = true
	}
	st := Status{Runs: w.status.Runs + 1, Failures: w.status.Failures, LastSuccess: w.now()}
	for id, d := range w.checked {
		if !known[id] {
			delete(w.checked, id)
			continue
		}
		st.Units, st.Rows, st.Checked = st.Units+d.units, st.Rows+d.rows, st.Checked+1
		if d.rows > 0 {
			st.Services++
		}
	}
	w.status, w.prev = st, &cur
	if n := len(ids); n > 0 {
		w.after = ids[n-1]
	}
	runs.Inc()
	return nil
}

// batch sorts all by id and returns the next Services of them after the
// one named after, from the first again past the last; all of them when
// Services is 0 or they are no more.
func (w *Watch) batch(all []api.ServiceCounters, after string) []api.ServiceCounters {
	slices.SortFunc(all, func(a, b api.ServiceCounters) int { return strings.Compare(a.ServiceID, b.ServiceID) })
	if w.Services <= 0 || len(all) <= w.Services {
		return all
	}
	i, _ := slices.BinarySearchFunc(all, after, func(s api.ServiceCounters, id string) int { return strings.Compare(s.ServiceID, id) })
	if after != "" && i < len(all) && all[i].ServiceID == after {
		i++
	}
	if i >= len(all) {
		i = 0
	}
	return all[i:min(i+w.Services, len(all))]
}

func (w *Watch) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}
