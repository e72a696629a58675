package report

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/bench/load"
	"github.com/slipverify/slipverify/bench/webhook"
)

// run makes a small result on a manual clock: 100 requests, 10 of them
// refused, the rest taking slow each on one connection.
func run(t *testing.T, slow time.Duration) *Scenario {
	t.Helper()
	s, _ := load.NewSchedule(load.Stage{Duration: 100 * time.Millisecond, From: 1000, To: 1000})
	clk := load.NewManualClock(time.Unix(1_800_000_000, 0))
	res, err := load.Run(context.Background(), load.Plan{Schedule: s, Clock: clk, MaxInFlight: 1}, func(_ context.Context, r load.Request) load.Outcome {
		if r.Seq%10 == 0 {
			return load.Outcome{Code: "429 RATE_LIMIT_EXCEEDED", RateLimit: 50}
		}
		clk.Advance(slow)
		return load.Outcome{Code: "200", OK: true, RateLimit: 100}
	})
	if err != nil {
		t.Fatal(err)
	}
	return FromResult("bank-v2", "about", "open", "1000/s 100ms", 1, res)
}

func TestReportRoundTrip(t *testing.T) {
	s := run(t, time.Millisecond)
	if s.Requests != 100 || s.OK != 90 || s.Codes["429 RATE_LIMIT_EXCEEDED"] != 10 || s.Latency.P50 < 1 {
		t.Fatalf("scenario %+v", s)
	}
	s.SetCPU(map[string]time.Duration{"core": 2 * time.Second})
	if want := s.Verifications * s.Elapsed / 2; s.PerCore["core"] != want {
		t.Errorf("per core %v, want %v", s.PerCore["core"], want)
	}
	r := &Report{Version: Version, Created: time.Now(), Command: "test", Scenarios: []*Scenario{s, {Name: "async-single", Pending: "not served"}}}
	dir := t.TempDir()
	if err := r.WriteJSON(filepath.Join(dir, "a.json")); err != nil {
		t.Fatal(err)
	}
	back, err := Read(filepath.Join(dir, "a.json"))
	if err != nil || back.Find("bank-v2").OK != 90 || back.Find("async-single").Pending == "" {
		t.Fatalf("read back: %v", err)
	}
	var b strings.Builder
	r.Table(&b)
	for _, want := range []string{"bank-v2", "10.0%", "429 RATE_LIMIT_EXCEEDED ×10", "X-RateLimit-Limit seen: 50..100", "pending: not served"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if err := r.WriteHTML(filepath.Join(dir, "a.html")); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(filepath.Join(dir, "a.html")); err == nil {
		t.Error("an HTML file was read as a result")
	}
}

// TestStepsAchieved offers 25/s, then 200/s, for a second each to a
// simulated server that completes 50 requests a second: the steps report
// what was achieved (25 and 50 a second) beside what was offered, and the
// latency-vs-throughput chart is drawn at the achieved rates.
func TestStepsAchieved(t *testing.T) {
	s, _ := load.NewSchedule(load.Stage{Duration: time.Second, From: 25, To: 25}, load.Stage{Duration: time.Second, From: 200, To: 200})
	clk := load.NewManualClock(time.Unix(1_800_000_000, 0))
	var free time.Time // the server is busy until then; one caller at a time
	res, err := load.Run(context.Background(), load.Plan{Schedule: s, Clock: clk, MaxInFlight: 1}, func(ctx context.Context, r load.Request) load.Outcome {
		if r.Due.After(free) {
			free = r.Due
		}
		free = free.Add(20 * time.Millisecond)
		clk.SleepUntil(ctx, free)
		return load.Outcome{Code: "200", OK: true}
	})
	if err != nil {
		t.Fatal(err)
	}
	sc := FromResult("bank-v2 ramp", "about", "open", "25/s 1s, 200/s 1s", 1, res)
	if len(sc.Steps) != 2 {
		t.Fatalf("steps %+v", sc.Steps)
	}
	for i, want := range []struct{ offered, achieved float64 }{{25, 25}, {200, 50}} {
		st := sc.Steps[i]
		if st.Offered != want.offered || st.Throughput < want.achieved-2.5 || st.Throughput > want.achieved+1 || st.OKRate != st.Throughput {
			t.Errorf("step %d: offered %v, throughput %v, ok %v; want %v offered and about %v achieved", i+1, st.Offered, st.Throughput, st.OKRate, want.offered, want.achieved)
		}
	}
	svg := string(vsLoad(sc))
	if !strings.Contains(svg, "achieved") || strings.Contains(svg, ">200<") {
		t.Errorf("latency vs throughput is not drawn at the achieved rates: %s", svg)
	}
}

// TestOKLatency reports an overload-like run: four requests in five
// refused in 0.1 ms, the rest served in 5 ms. The overall percentiles are
// the refusals'; the success-only ones, reported beside them, are the
// served requests'.
func TestOKLatency(t *testing.T) {
	res := &load.Result{Elapsed: time.Second, OK: 20, Fail: 80, Codes: map[string]uint64{"200": 20, "429 RATE_LIMIT_EXCEEDED": 80}}
	for i := range 100 {
		lat := 100 * time.Microsecond
		if i%5 == 0 {
			lat = 5 * time.Millisecond
			res.OKLatency.Record(lat)
		}
		res.Latency.Record(lat)
	}
	sc := FromResult("overload", "about", "open", "1000/s 100ms", 1, res)
	if sc.Latency.P50 >= 1 || sc.OKLatency.P50 < 4.9 || sc.OKLatency.Count != 20 {
		t.Errorf("p50 %v ms overall, %v ms of %d successes; want under 1 and 5 of 20", sc.Latency.P50, sc.OKLatency.P50, sc.OKLatency.Count)
	}
	r := &Report{Version: Version, Scenarios: []*Scenario{sc}}
	var b strings.Builder
	r.Table(&b)
	okP50 := num(sc.OKLatency.P50)
	for _, want := range []string{"ok p50 ms", "ok p99 ms", "successful requests only: p50 " + okP50, "successful requests only."} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := r.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	back, err := Read(path)
	if err != nil || back.Scenarios[0].OKLatency != sc.OKLatency {
		t.Errorf("okLatency not kept in the JSON: %v %+v", err, back)
	}
}

// TestAsyncCallbacks reports an async run whose workers fell behind: 100
// submits accepted in 1 s, but 50 callbacks successful (the last 5 s after
// the start), 10 failed, 5 not_found and 35 missing in the wait, and two
// submits whose 202 the generator could not read. Verifications are the
// successful callbacks over their span, per-core numbers too; every other
// job is an error, listed by cause.
func TestAsyncCallbacks(t *testing.T) {
	res := &load.Result{Elapsed: time.Second, OK: 100, Fail: 2,
		Codes:    map[string]uint64{"202": 100, "202 unreadable body": 2},
		Failures: map[string]uint64{"202 unreadable body": 2}}
	s := FromResult("async-single", "about", "open", "100/s 1s", 1, res)
	s.SetCallbacks(&Callbacks{Missing: 35, Seconds: 5, Stats: webhook.Stats{Expected: 100, Delivered: 65, Succeeded: 50,
		Status: map[string]uint64{"success": 50, "failed QUOTA_EXCEEDED": 10, "not_found": 5}}})
	if s.Verifications != 10 {
		t.Errorf("verif/s %v, want 10 (50 successful callbacks over 5 s), not the 100/s accepted", s.Verifications)
	}
	s.SetCPU(map[string]time.Duration{"core": 2 * time.Second})
	if s.PerCore["core"] != 25 {
		t.Errorf("core per core %v, want 25 (50 successful callbacks over 2 CPU-seconds)", s.PerCore["core"])
	}
	// 102 jobs tried: 2 never submitted, 10 failed, 5 not found, 35 missing.
	if got := errShare(s); got != "51.0%" {
		t.Errorf("errors %s, want 51.0%%", got)
	}
	want := []Count{{"callback missing", 35}, {"callback failed QUOTA_EXCEEDED", 10}, {"callback not_found", 5}, {"202 unreadable body", 2}}
	if got := s.ErrorCounts(); !slices.Equal(got, want) {
		t.Errorf("error counts %v, want %v", got, want)
	}
	r := &Report{Version: Version, Scenarios: []*Scenario{s}}
	var b strings.Builder
	r.Table(&b)
	for _, w := range []string{"51.0%", "errors: callback missing ×35, callback failed QUOTA_EXCEEDED ×10, callback not_found ×5, 202 unreadable body ×2",
		"callbacks by status: success ×50, failed QUOTA_EXCEEDED ×10, not_found ×5", "65 of 100 delivered, 50 successful"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, b.String())
		}
	}
	dir := t.TempDir()
	if err := r.WriteHTML(filepath.Join(dir, "r.html")); err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(filepath.Join(dir, "r.html"))
	for _, w := range []string{"By status: success ×50, failed QUOTA_EXCEEDED ×10, not_found ×5", "callback missing ×35", "202 unreadable body ×2"} {
		if !strings.Contains(string(page), w) {
			t.Errorf("HTML lacks %q", w)
		}
	}
	if err := r.WriteJSON(filepath.Join(dir, "r.json")); err != nil {
		t.Fatal(err)
	}
	back, err := Read(filepath.Join(dir, "r.json"))
	if err != nil || back.Scenarios[0].Callbacks.Stats.Status["not_found"] != 5 || back.Scenarios[0].Failures["202 unreadable body"] != 2 {
		t.Errorf("JSON lacks the status breakdown or the failures: %v", err)
	}
}

// TestErrorCountsByOK checks that a code counts as an error by its
// outcome, not its first character: a 2xx the scenario refused is listed,
// and a file written before failures were kept falls back to the codes.
func TestErrorCountsByOK(t *testing.T) {
	s := &Scenario{Codes: map[string]uint64{"200": 5, "202 without its job ids": 3, "429 RATE_LIMIT_EXCEEDED": 1},
		Failures: map[string]uint64{"202 without its job ids": 3, "429 RATE_LIMIT_EXCEEDED": 1}}
	if got, want := s.ErrorCounts(), []Count{{"202 without its job ids", 3}, {"429 RATE_LIMIT_EXCEEDED", 1}}; !slices.Equal(got, want) {
		t.Errorf("error counts %v, want %v", got, want)
	}
	s.Failures = nil
	if got, want := s.ErrorCounts(), []Count{{"429 RATE_LIMIT_EXCEEDED", 1}}; !slices.Equal(got, want) {
		t.Errorf("an old file's error counts %v, want %v", got, want)
	}
}

// TestDuplicatesReported checks that the repeats a run measured (answers
// with isDuplicate, "200 duplicate") are counted in the results.
func TestDuplicatesReported(t *testing.T) {
	res := &load.Result{Elapsed: time.Second, OK: 1000, Codes: map[string]uint64{"200": 230, "200 duplicate": 770}, Failures: map[string]uint64{}}
	s := FromResult("duplicates", "about", "open", "1000/s 1s", 1, res)
	if s.Duplicates != 770 {
		t.Errorf("duplicates %d, want 770", s.Duplicates)
	}
	var b strings.Builder
	(&Report{Version: Version, Scenarios: []*Scenario{s}}).Table(&b)
	if !strings.Contains(b.String(), "answered as duplicates: 770 of 1000 successful (77.0 %)") || strings.Contains(b.String(), "errors:") {
		t.Errorf("table:\n%s", b.String())
	}
}

// TestCompare checks that a slower run shows as a latency increase.
func TestCompare(t *testing.T) {
	old := &Report{Version: Version, Scenarios: []*Scenario{run(t, 500*time.Microsecond)}}
	cur := &Report{Version: Version, Scenarios: []*Scenario{run(t, 3*time.Millisecond), {Name: "overload"}}}
	var b strings.Builder
	Compare(&b, old, cur)
	out := b.String()
	if !strings.Contains(out, "p50 ms") || !strings.Contains(out, "overload") || !strings.Contains(out, "+") {
		t.Errorf("compare:\n%s", out)
	}
	if change(2, 3) != "+50.0%" || change(0, 0) != "=" || change(4, 3) != "-25.0%" {
		t.Error("change is wrong")
	}
}

func TestChart(t *testing.T) {
	svg := string(chart("t", "x", "y", true, []series{{name: "a<b", color: "#000", points: [][2]float64{{0, 1}, {1, 100}, {2, 0}}}}))
	if !strings.HasPrefix(svg, "<svg") || !strings.Contains(svg, "a&lt;b") || strings.Contains(svg, "NaN") || strings.Contains(svg, "Inf") {
		t.Errorf("chart: %s", svg)
	}
	if chart("t", "x", "y", false, nil) != "" {
		t.Error("an empty chart was drawn")
	}
}

// TestVersions reads a file of the format before (version 1) and this one,
// and refuses versions it does not know.
func TestVersions(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []int{0, 1, Version, Version + 1} {
		path := filepath.Join(dir, fmt.Sprintf("v%d.json", v))
		if err := (&Report{Version: v, Scenarios: []*Scenario{{Name: "bank-v2"}}}).WriteJSON(path); err != nil {
			t.Fatal(err)
		}
		r, err := Read(path)
		if known := v == 1 || v == Version; known != (err == nil) || (err == nil && r.Version != v) {
			t.Errorf("version %d: read %v, %v", v, r, err)
		}
	}
	if Version != 2 {
		t.Errorf("Version %d: the meanings formatChanges lists are those of version 2", Version)
	}
}

// TestCompareVersions compares a version 1 file with a version 2 one: the
// rows whose quantity changed meaning between them (async verif/s and
// errors %, bank-image's and mixed's latency and verif/s) are marked with
// the reason, the others are not; files of one version get no marks.
func TestCompareVersions(t *testing.T) {
	sc := func(name string, async bool) *Scenario {
		s := &Scenario{Name: name, Requests: 100, OK: 100, Verifications: 100, Latency: Latency{P50: 1, P99: 2, P999: 3}, OKLatency: Latency{P99: 2}}
		if async {
			s.Callbacks = &Callbacks{Stats: webhook.Stats{Delivered: 100, Succeeded: 100, Status: map[string]uint64{"success": 100}}}
		}
		return s
	}
	runs := func(v int) *Report {
		return &Report{Version: v, Scenarios: []*Scenario{sc("bank-v2", false), sc("bank-image", false), sc("async-single", true)}}
	}
	metrics := []string{"verif/s", "p50 ms", "p99.9 ms", "ok p99 ms", "p99 ms", "errors %"}
	rows := func(out string) map[string]string { // "scenario metric" → its marks
		m := map[string]string{}
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			for _, metric := range metrics {
				if strings.Contains(line, " "+metric+" ") {
					marks := ""
					if last := f[len(f)-1]; strings.HasPrefix(last, "[") {
						marks = last
					}
					m[f[0]+" "+metric] = marks
					break
				}
			}
		}
		return m
	}
	var b strings.Builder
	Compare(&b, runs(1), runs(2))
	out := b.String()
	got := rows(out)
	for _, key := range []string{"async-single verif/s", "async-single errors %", "bank-image verif/s", "bank-image p50 ms", "bank-image p99 ms", "bank-image p99.9 ms", "bank-image ok p99 ms"} {
		if got[key] == "" {
			t.Errorf("%s is not marked as changed in meaning", key)
		}
	}
	for _, key := range []string{"bank-v2 verif/s", "bank-v2 p99 ms", "bank-v2 errors %", "async-single p99 ms", "bank-image errors %"} {
		if _, ok := got[key]; !ok || got[key] != "" {
			t.Errorf("%s: marked %q, want a row without marks", key, got[key])
		}
	}
	for _, want := range []string{"old is format version 1, new is version 2", "successful callbacks", "of jobs", "made ahead of the request", "Not compared here"} {
		if !strings.Contains(out, want) {
			t.Errorf("compare lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	Compare(&b, runs(2), runs(2))
	if out := b.String(); strings.Contains(out, "[1]") || strings.Contains(out, "format version") {
		t.Errorf("files of one version compared with marks:\n%s", out)
	}
}

// TestSlotWaitReported reports an open-loop run in which the in-flight cap
// was reached: how many requests waited for a slot, and how long, in the
// table and the HTML, apart from the generator's lag; none is said when
// the cap was not reached.
func TestSlotWaitReported(t *testing.T) {
	res := &load.Result{Elapsed: time.Second, OK: 1000, Codes: map[string]uint64{"200": 1000}, Capped: 250, MaxInFlight: 64}
	for i := range 1000 {
		res.Lag.Record(time.Millisecond / 2)
		w := time.Duration(0)
		if i < 250 {
			w = 40 * time.Millisecond
		}
		res.SlotWait.Record(w)
	}
	s := FromResult("bank-v2 ramp", "about", "open", "1000/s 1s", 1, res)
	if s.Capped != 250 || s.MaxInFlight != 64 || s.SlotWait.Max < 39 || s.Lag.P99 > 1 {
		t.Fatalf("capped %d of cap %d, slot wait %+v, lag %+v", s.Capped, s.MaxInFlight, s.SlotWait, s.Lag)
	}
	r := &Report{Version: Version, Scenarios: []*Scenario{s}}
	var b strings.Builder
	r.Table(&b)
	want := "in-flight cap (64) reached: 250 requests (25.0 %) waited for a free slot"
	if !strings.Contains(b.String(), want) || !strings.Contains(b.String(), "generator lag p50 0.50 p99 0.50 ms") {
		t.Errorf("table lacks %q or the lag:\n%s", want, b.String())
	}
	path := filepath.Join(t.TempDir(), "r.html")
	if err := r.WriteHTML(path); err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(path)
	if !strings.Contains(string(page), "In-flight cap (64) reached: 250 requests") || !strings.Contains(string(page), "that slot wait is the stack's back-pressure") {
		t.Errorf("HTML lacks the slot wait")
	}
	s.Capped = 0
	b.Reset()
	r.Table(&b)
	if strings.Contains(b.String(), "in-flight cap") {
		t.Errorf("a run that never reached the cap says it did:\n%s", b.String())
	}
}

// TestSettleReported: the waits after the scenarios are in the table (a
// summary with the rule, and one line per scenario), the HTML and the JSON,
// a scenario after which the stack did not settle marked as such; a run
// that did not wait says nothing of it.
func TestSettleReported(t *testing.T) {
	a, b, c := run(t, time.Millisecond), run(t, time.Millisecond), run(t, time.Millisecond)
	a.Name, b.Name, c.Name = "bank-v2", "overload", "bank-v1"
	a.Settle = &Settle{Seconds: 0.4, Settled: true}
	b.Settle = &Settle{Seconds: 60, Left: []string{"edge rate factor 0.6 (want 1)"}}
	c.Settle = &Settle{Seconds: 2.25, Settled: true}
	r := &Report{Version: Version, Created: time.Now(), Scenarios: []*Scenario{a, b, c}, Settling: "edge rate factor 1"}
	var tb strings.Builder
	r.Table(&tb)
	for _, want := range []string{
		"settling: after each scenario the suite waited for edge rate factor 1 before the next began; the stack settled after 2, in 0.4–2.2 s, but NOT after overload, so the scenario after each may carry its backlog.",
		"bank-v2: send→answer",
		"after it the stack settled after 0.4 s\n",
		"after it the stack did not settle within 60 s: edge rate factor 0.6 (want 1)\n",
	} {
		if !strings.Contains(tb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tb.String())
		}
	}
	dir := t.TempDir()
	if err := r.WriteHTML(filepath.Join(dir, "a.html")); err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(filepath.Join(dir, "a.html"))
	for _, want := range []string{"Settling: after each scenario the suite waited for edge rate factor 1", "After it the stack settled after 0.4 s.",
		"<strong>After it the stack did not settle within 60 s: edge rate factor 0.6 (want 1).</strong>"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if err := r.WriteJSON(filepath.Join(dir, "a.json")); err != nil {
		t.Fatal(err)
	}
	back, err := Read(filepath.Join(dir, "a.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s := back.Find("overload").Settle; back.Settling != r.Settling || s == nil || s.Settled || s.Seconds != 60 || len(s.Left) != 1 {
		t.Errorf("read back: %q %+v", back.Settling, s)
	}

	all := &Report{Version: Version, Scenarios: []*Scenario{a, c}}
	if got := all.settleSummary(); got != "after each scenario the suite waited for the stack to settle before the next began; the stack settled after all 2, in 0.4–2.2 s" {
		t.Errorf("summary %q", got)
	}
	none := &Report{Version: Version, Scenarios: []*Scenario{run(t, time.Millisecond)}}
	tb.Reset()
	none.Table(&tb)
	if strings.Contains(tb.String(), "settl") {
		t.Errorf("a run without settling reports it:\n%s", tb.String())
	}
}
