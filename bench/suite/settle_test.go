package suite

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipverify/slipverify/bench/load"
	"github.com/slipverify/slipverify/bench/report"
	"github.com/slipverify/slipverify/bench/scenario"
	"github.com/slipverify/slipverify/bench/stack"
	"github.com/slipverify/slipverify/bench/tenant"
)

// tier is a metrics endpoint on a real listener whose series take, on
// the n-th scrape, the n-th of their values (the last one from then on).
type tier struct {
	srv     *httptest.Server
	scrapes atomic.Int64
}

func newTier(t *testing.T, series map[string][]string) *tier {
	tr := &tier{}
	tr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(tr.scrapes.Add(1)) - 1
		fmt.Fprintln(w, "# HELP process_cpu_seconds_total a series the probes do not read")
		fmt.Fprintln(w, "process_cpu_seconds_total 12.5")
		for name, values := range series {
			fmt.Fprintf(w, "%s %s\n", name, values[min(n, len(values)-1)])
		}
	}))
	t.Cleanup(tr.srv.Close)
	return tr
}

func (tr *tier) url() string { return tr.srv.URL + "/metrics" }

// stackTiers stands in for a stack's core, usage and edge metrics. The
// polls read, in order: core's outbox draining (2, 1, 0); usage's lag 0
// (measured before the backlog reached it), then 40 (measured after), then
// 0; the edge's rate factor climbing back to 1. The stack is settled from
// the fifth poll (index 4), the third reads a state that only looks so.
func stackTiers(t *testing.T) (core, usage, edge *tier, probes []Probe) {
	core = newTier(t, map[string][]string{"slip_core_outbox_messages": {"2", "1", "0"}, "slip_core_outbox_messages_total": {"7"}})
	usage = newTier(t, map[string][]string{"usage_consumer_lag_messages": {"0", "0", "0", "40", "0"}})
	edge = newTier(t, map[string][]string{"edge_rate_factor": {"0.5", "0.6", "1"}})
	return core, usage, edge, []Probe{
		{Name: "core outbox", URL: core.url(), Series: "slip_core_outbox_messages", Want: 0},
		{Name: "usage Kafka lag", URL: usage.url(), Series: "usage_consumer_lag_messages", Want: 0},
		{Name: "edge rate factor", URL: edge.url(), Series: "edge_rate_factor", Want: 1},
	}
}

// TestSettleWaitsForEveryProbe: the wait ends only once every probe reads
// its value and keeps it for the hold; a settled-looking reading that a
// later one contradicts (usage's stale lag) starts the hold again, and the
// moment of settling is the reading that began the run that held.
func TestSettleWaitsForEveryProbe(t *testing.T) {
	core, usage, edge, probes := stackTiers(t)
	const hold = 30 * time.Millisecond
	s := &Settler{Probes: probes, Poll: time.Millisecond, Hold: hold, Max: 10 * time.Second}
	var marks []int64
	var marked []time.Time
	start := time.Now()
	got := s.Wait(context.Background(), func() {
		marks = append(marks, core.scrapes.Load())
		marked = append(marked, time.Now())
	})
	if !got.Settled || len(got.Left) != 0 {
		t.Fatalf("not settled: %+v", got)
	}
	// Settled at the third poll, contradicted at the fourth, settled for
	// good from the fifth.
	if len(marks) != 2 || marks[0] != 3 || marks[1] != 5 {
		t.Fatalf("settled-state runs began at polls %v, want [3 5]", marks)
	}
	if held := time.Since(marked[1]); held < hold {
		t.Errorf("returned %v after the stack settled, before the %v hold", held, hold)
	}
	// The fifth poll came at least two polls (2 ms) after the third.
	if third, fifth := marked[0].Sub(start).Seconds(), marked[1].Sub(start).Seconds(); got.Seconds <= third || got.Seconds > fifth {
		t.Errorf("settled after %.4f s, want the fifth poll's moment (%.4f s), not the third's (%.4f s)", got.Seconds, fifth, third)
	}
	for name, tr := range map[string]*tier{"core": core, "usage": usage, "edge": edge} {
		if n := tr.scrapes.Load(); n < 6 {
			t.Errorf("%s scraped %d times", name, n)
		}
	}
}

// TestSettleBound: a stack that does not settle within the bound is
// reported so, with what was left: a factor still low, a series missing, a
// tier that does not answer.
func TestSettleBound(t *testing.T) {
	edge := newTier(t, map[string][]string{"edge_rate_factor": {"0.3"}})
	core := newTier(t, map[string][]string{"slip_core_outbox_messages_total": {"0"}})
	gone := newTier(t, nil)
	gone.srv.Close()
	s := &Settler{Probes: []Probe{
		{Name: "core outbox", URL: core.url(), Series: "slip_core_outbox_messages", Want: 0},
		{Name: "usage Kafka lag", URL: gone.url(), Series: "usage_consumer_lag_messages", Want: 0},
		{Name: "edge rate factor", URL: edge.url(), Series: "edge_rate_factor", Want: 1},
	}, Poll: 5 * time.Millisecond, Max: 50 * time.Millisecond}
	got := s.Wait(context.Background(), func() { t.Error("marked a stack that never settled") })
	if got.Settled || got.Seconds < 0.05 || len(got.Left) != 3 {
		t.Fatalf("%+v", got)
	}
	text := got.String()
	for _, want := range []string{"did not settle within ", "core outbox: no series slip_core_outbox_messages at", "usage Kafka lag: Get", "edge rate factor 0.3 (want 1)"} {
		if !strings.Contains(text, want) {
			t.Errorf("%q lacks %q", text, want)
		}
	}
	if edge.scrapes.Load() < 3 {
		t.Errorf("polled %d times in the bound", edge.scrapes.Load())
	}
}

// TestSettleHeldPastTheBound: a stack that reaches its settled state too
// close to the bound to hold it is not settled.
func TestSettleHeldPastTheBound(t *testing.T) {
	edge := newTier(t, map[string][]string{"edge_rate_factor": {"1"}})
	s := &Settler{Probes: []Probe{{Name: "edge rate factor", URL: edge.url(), Series: "edge_rate_factor", Want: 1}},
		Poll: 5 * time.Millisecond, Hold: time.Hour, Max: 30 * time.Millisecond}
	if got := s.Wait(context.Background(), nil); got.Settled || len(got.Left) != 1 || !strings.Contains(got.Left[0], "settled only") {
		t.Errorf("%+v", got)
	}
}

func TestSeriesValue(t *testing.T) {
	text := []byte(`# TYPE slip_core_outbox_messages gauge
slip_core_outbox_messages_total 9
slip_core_outbox_messages 3
edge_requests_total{route="GET /v2/info",code="200"} 1.5e+03
edge_rate_factor 0.7
`)
	f := func(series string, want float64, found bool) {
		t.Helper()
		if v, ok := seriesValue(text, series); v != want || ok != found {
			t.Errorf("%s: %v %v, want %v %v", series, v, ok, want, found)
		}
	}
	f("slip_core_outbox_messages", 3, true)
	f("slip_core_outbox_messages_total", 9, true)
	f(`edge_requests_total{route="GET /v2/info",code="200"}`, 1500, true)
	f("edge_rate_factor", 0.7, true)
	f("edge_rate", 0, false)
	f("usage_consumer_lag_messages", 0, false)
}

// TestRunnerSettles runs a scenario with a Settler: the report carries the
// wait, and the scenario's CPU counts until the stack settled, not until
// the wait ended.
func TestRunnerSettles(t *testing.T) {
	seed, err := tenant.Read(filepath.Join("..", "seed.json"))
	if err != nil {
		t.Fatal(err)
	}
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"success":true,"data":{}}`))
	}))
	defer edge.Close()
	client := scenario.NewClient(strings.TrimPrefix(edge.URL, "http://"), 16)
	defer client.CloseIdle()
	_, _, _, probes := stackTiers(t)
	var mu sync.Mutex
	var reads int
	cpu := func() stack.CPU { // each read finds core has used one more CPU-second
		mu.Lock()
		defer mu.Unlock()
		reads++
		return stack.CPU{"core": time.Duration(reads) * time.Second}
	}
	r := &Runner{Env: &scenario.Env{Client: client, Seed: seed, Run: scenario.RunID()}, CPU: cpu,
		Settle: &Settler{Probes: probes, Poll: time.Millisecond, Hold: 20 * time.Millisecond, Max: 10 * time.Second}}
	sc, _ := scenario.Get("bank-v2")
	out, err := r.Run(context.Background(), "", sc, load.Plan{Workers: []int{2}, StepDuration: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if out.Settle == nil || !out.Settle.Settled {
		t.Fatalf("settle %+v", out.Settle)
	}
	// Reads: before the run (1), when the settled state began (2), when
	// the state that held began (3); none after the hold.
	if reads != 3 || out.CPU["core"] != 2 {
		t.Errorf("%d CPU reads, core %v CPU-s; want 3 and 2 (to the settled state that held)", reads, out.CPU["core"])
	}
	var b strings.Builder
	(&report.Report{Version: report.Version, Scenarios: []*report.Scenario{out}}).Table(&b)
	if !strings.Contains(b.String(), "after it the stack settled after") {
		t.Errorf("table:\n%s", b.String())
	}
}
