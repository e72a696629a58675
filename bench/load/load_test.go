package load

import (
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestScheduleSteady(t *testing.T) {
	s, err := NewSchedule(Stage{Duration: 2 * time.Second, From: 1000, To: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if s.Total() != 2000 {
		t.Fatalf("total %d, want 2000", s.Total())
	}
	for _, i := range []uint64{0, 1, 999, 1999} {
		off, stage, ok := s.At(i)
		if want := time.Duration(i) * time.Millisecond; !ok || stage != 0 || absDur(off-want) > time.Nanosecond {
			t.Errorf("At(%d) = %v %d %v, want %v", i, off, stage, ok, want)
		}
	}
	if _, _, ok := s.At(2000); ok {
		t.Error("At(2000) is inside a 2000-request schedule")
	}
}

// TestScheduleRamp checks a ramp 0→1000/s over 2 s then 1000/s for 1 s:
// the count is the area under the rate, and the request due at time t is
// the integral up to t.
func TestScheduleRamp(t *testing.T) {
	s, err := NewSchedule(Stage{Duration: 2 * time.Second, From: 0, To: 1000}, Stage{Duration: time.Second, From: 1000, To: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if s.Total() != 2000 || s.Duration() != 3*time.Second {
		t.Fatalf("total %d duration %v, want 2000 and 3s", s.Total(), s.Duration())
	}
	// N(t) = 250 t² in the ramp: request 250 is due at 1 s, 1000 at 2 s.
	f := func(i uint64, want time.Duration, wantStage int) {
		t.Helper()
		off, stage, ok := s.At(i)
		if !ok || stage != wantStage || absDur(off-want) > time.Microsecond {
			t.Errorf("At(%d) = %v stage %d, want %v stage %d", i, off, stage, want, wantStage)
		}
	}
	f(0, 0, 0)
	f(250, time.Second, 0)
	f(1000, 2*time.Second, 1)
	f(1500, 2500*time.Millisecond, 1)
	prev := time.Duration(-1)
	for i := range s.Total() {
		off, _, _ := s.At(i)
		if off < prev {
			t.Fatalf("At(%d) = %v before At(%d) = %v", i, off, i-1, prev)
		}
		prev = off
	}
}

func TestScheduleErrors(t *testing.T) {
	if _, err := NewSchedule(); err == nil {
		t.Error("an empty schedule was accepted")
	}
	_, err := NewSchedule(Stage{Duration: 0, From: 1, To: 1}, Stage{Duration: time.Second, From: -1, To: math.NaN()})
	if err == nil || !contains(err.Error(), "stage 1") || !contains(err.Error(), "stage 2") {
		t.Errorf("error %v does not name both bad stages", err)
	}
	if _, err := Run(context.Background(), Plan{}, nil); err == nil {
		t.Error("a plan with neither schedule nor workers was accepted")
	}
}

func TestOpenLoopDueTimes(t *testing.T) {
	s, _ := NewSchedule(Stage{Duration: time.Second, From: 100, To: 300}, Stage{Duration: time.Second, From: 300, To: 300})
	start := time.Unix(1_700_000_000, 0)
	clk := NewManualClock(start)
	var mu sync.Mutex
	due := map[uint64]time.Time{}
	res, err := Run(context.Background(), Plan{Schedule: s, Clock: clk, MaxInFlight: 4}, func(_ context.Context, r Request) Outcome {
		mu.Lock()
		due[r.Seq] = r.Due
		mu.Unlock()
		return Outcome{Code: "200", OK: true}
	})
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(due)) != s.Total() || res.OK != s.Total() || res.Codes["200"] != s.Total() {
		t.Fatalf("sent %d, ok %d, codes %v; want %d", len(due), res.OK, res.Codes, s.Total())
	}
	for i := range s.Total() {
		off, _, _ := s.At(i)
		if !due[i].Equal(start.Add(off)) {
			t.Fatalf("request %d due %v, want %v", i, due[i].Sub(start), off)
		}
	}
	if len(res.Steps) != 2 || res.Steps[0].OK.Load() != 200 || res.Steps[1].OK.Load() != 300 {
		t.Errorf("steps: %d, ok %d and %d; want 200 and 300", len(res.Steps), res.Steps[0].OK.Load(), res.Steps[1].OK.Load())
	}
}

// slowServer returns a Func for a simulated server that serves one request
// at a time in service each, on clk: a request completes service after it
// was due or after the one before it completed, whichever is later. Only
// for plans with MaxInFlight 1 (one caller at a time).
func slowServer(clk *ManualClock, service time.Duration) Func {
	var free time.Time
	return func(ctx context.Context, r Request) Outcome {
		if r.Due.After(free) {
			free = r.Due
		}
		free = free.Add(service)
		clk.SleepUntil(ctx, free)
		return Outcome{Code: "200", OK: true}
	}
}

// TestStepThroughputAchieved offers 25/s for a second, then 200/s for a
// second, to a server that completes 50 requests a second: each step's
// completions within its own second are what it achieved (25 and 50), not
// what it was offered, while the requests due in the second step still
// count there for latency.
func TestStepThroughputAchieved(t *testing.T) {
	s, _ := NewSchedule(Stage{Duration: time.Second, From: 25, To: 25}, Stage{Duration: time.Second, From: 200, To: 200})
	clk := NewManualClock(time.Unix(1_800_000_000, 0))
	res, err := Run(context.Background(), Plan{Schedule: s, Clock: clk, MaxInFlight: 1}, slowServer(clk, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 225 || len(res.Steps) != 2 {
		t.Fatalf("ok %d, %d steps; want 225 and 2", res.OK, len(res.Steps))
	}
	first, second := res.Steps[0], res.Steps[1]
	// The dispatcher takes a free slot before it waits for a due time, so
	// it moves the manual clock only while nothing is in flight: every
	// completion is at its simulated time.
	if n := first.Done.Load(); n != 25 || first.DoneOK.Load() != n {
		t.Errorf("first step: %d completed (%d ok) in its second, want 25", n, first.DoneOK.Load())
	}
	if n := second.Done.Load(); n != 49 {
		t.Errorf("second step: %d completed in its second at 200/s offered to a 50/s server, want 49 (one every 20 ms from 1.02 s)", n)
	}
	if second.OK.Load() != 200 || second.Latency.Count() != 200 || second.Latency.Max() < 2*time.Second {
		t.Errorf("second step: %d due ok, %d latencies, max %v; want 200, 200 and the backlog's wait (over 2 s)",
			second.OK.Load(), second.Latency.Count(), second.Latency.Max())
	}
}

// TestSlotWait offers 200/s for 0.1 s to a server that serves one request
// at a time in 20 ms, with one request in flight at most: each request
// after the first waits for the slot the one before holds (request k, due
// at 5k ms, is sent at 20k ms). That wait is back-pressure from the
// server, reported as SlotWait and counted in Capped, not as the
// generator's lag: on a clock that wakes on time the generator was never
// late.
func TestSlotWait(t *testing.T) {
	s, _ := NewSchedule(Stage{Duration: 100 * time.Millisecond, From: 200, To: 200})
	clk := NewManualClock(time.Unix(1_800_000_000, 0))
	res, err := Run(context.Background(), Plan{Schedule: s, Clock: clk, MaxInFlight: 1}, slowServer(clk, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 20 || res.MaxInFlight != 1 {
		t.Fatalf("ok %d, max in flight %d; want 20 and 1", res.OK, res.MaxInFlight)
	}
	if res.Lag.Max() != 0 {
		t.Errorf("generator lag max %v, want 0: the waits were for the server", res.Lag.Max())
	}
	if want := 19 * 15 * time.Millisecond; res.Capped != 19 || res.SlotWait.Count() != 20 || absDur(res.SlotWait.Max()-want) > want/100 {
		t.Errorf("%d of %d requests waited for a slot, longest %v; want 19 of 20, the last %v", res.Capped, res.SlotWait.Count(), res.SlotWait.Max(), want)
	}
	if res.Service.Max() > 21*time.Millisecond || res.Latency.Max() < 300*time.Millisecond {
		t.Errorf("send→answer max %v, latency max %v; want the 20 ms service and the wait in latency (305 ms)", res.Service.Max(), res.Latency.Max())
	}
}

// lateClock wakes every sleeper late by a fixed time, as a loaded
// machine's timers do.
type lateClock struct {
	*ManualClock
	late time.Duration
}

func (c lateClock) SleepUntil(ctx context.Context, t time.Time) {
	c.ManualClock.SleepUntil(ctx, t.Add(c.late))
}

// TestLagIsTimerLateness runs 10 requests at 100/s on a clock whose timers
// wake 3 ms late, against a server that answers at once: each request is
// sent 3 ms after it was due, and its slot was free long before (one slot,
// so that the simulated clock is moved by one goroutine at a time): that
// is the generator's lag, not a wait for a slot.
func TestLagIsTimerLateness(t *testing.T) {
	s, _ := NewSchedule(Stage{Duration: 100 * time.Millisecond, From: 100, To: 100})
	clk := lateClock{NewManualClock(time.Unix(1_800_000_000, 0)), 3 * time.Millisecond}
	res, err := Run(context.Background(), Plan{Schedule: s, Clock: clk, MaxInFlight: 1}, func(context.Context, Request) Outcome {
		return Outcome{Code: "200", OK: true}
	})
	if err != nil || res.OK != 10 {
		t.Fatalf("%v, ok %d", err, res.OK)
	}
	if res.Capped != 0 || res.SlotWait.Max() != 0 {
		t.Errorf("%d requests waited for a slot (longest %v), want none", res.Capped, res.SlotWait.Max())
	}
	if lo, hi := res.Lag.Quantile(0), res.Lag.Max(); lo != 3*time.Millisecond || hi != 3*time.Millisecond {
		t.Errorf("lag %v..%v, want the timers' 3 ms", lo, hi)
	}
}

// TestPrepIsLag runs requests whose Func spends 5 ms of the generator's
// own work (Outcome.Prep) before a 1 ms answer: it is lag, not send→answer
// time, in both loops, and not latency in the closed loop.
func TestPrepIsLag(t *testing.T) {
	clk := NewManualClock(time.Unix(1_800_000_000, 0))
	f := func(ctx context.Context, r Request) Outcome {
		clk.Advance(5 * time.Millisecond) // making what it sends
		clk.Advance(time.Millisecond)     // the server's answer
		return Outcome{Code: "200", OK: true, Prep: 5 * time.Millisecond}
	}
	s, _ := NewSchedule(Stage{Duration: time.Second, From: 10, To: 10})
	open, err := Run(context.Background(), Plan{Schedule: s, Clock: clk, MaxInFlight: 1}, f)
	if err != nil {
		t.Fatal(err)
	}
	closed, err := Run(context.Background(), Plan{Workers: []int{1}, Requests: 10, Clock: clk}, f)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		res     *Result
		latency time.Duration
	}{{"open", open, 6 * time.Millisecond}, {"closed", closed, time.Millisecond}} {
		r := c.res
		if r.OK != 10 || r.Service.Max() != time.Millisecond || r.Lag.Quantile(0) != 5*time.Millisecond || r.Lag.Max() != 5*time.Millisecond || r.Latency.Max() != c.latency {
			t.Errorf("%s loop: ok %d, send→answer max %v, lag %v..%v, latency max %v; want 10, 1 ms, 5 ms and %v",
				c.name, r.OK, r.Service.Max(), r.Lag.Quantile(0), r.Lag.Max(), r.Latency.Max(), c.latency)
		}
	}
}

func TestRequestCount(t *testing.T) {
	s, _ := NewSchedule(Stage{Duration: time.Hour, From: 1000, To: 1000})
	clk := NewManualClock(time.Unix(1_700_000_000, 0))
	var n atomic.Int64
	res, _ := Run(context.Background(), Plan{Schedule: s, Clock: clk, Requests: 123}, func(context.Context, Request) Outcome {
		n.Add(1)
		return Outcome{Code: "500 X"}
	})
	if n.Load() != 123 || res.Fail != 123 || res.Codes["500 X"] != 123 {
		t.Errorf("sent %d, failed %d, codes %v; want 123", n.Load(), res.Fail, res.Codes)
	}
	res, _ = Run(context.Background(), Plan{Workers: []int{3}, Requests: 50}, func(context.Context, Request) Outcome {
		return Outcome{Code: "200", OK: true}
	})
	if res.OK != 50 {
		t.Errorf("closed loop sent %d, want 50", res.OK)
	}
}

// server is a real HTTP listener on loopback; stall, when set, holds the
// next request for that long once.
type server struct {
	url   string
	hits  atomic.Int64
	stall atomic.Int64
}

func newServer(t *testing.T) *server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{url: "http://" + ln.Addr().String() + "/"}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if d := s.stall.Swap(0); d > 0 {
			time.Sleep(time.Duration(d)) // the server under test is slow once
		}
		io.WriteString(w, "ok")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

func httpFunc(c *http.Client, url string, sent func(time.Time)) Func {
	return func(ctx context.Context, r Request) Outcome {
		if sent != nil {
			sent(time.Now())
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		res, err := c.Do(req)
		if err != nil {
			return Outcome{Code: "net"}
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return Outcome{Code: "200", OK: res.StatusCode == 200}
	}
}

// TestOpenLoopRateAccuracy runs 2,000 requests/s for 3 s against a real
// listener: the rate actually sent is within 2 % of the target and the
// server saw every request.
func TestOpenLoopRateAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("a timing measurement: make test runs it in full, without the race detector")
	}
	srv := newServer(t)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	const rate, secs = 2000, 3
	s, _ := NewSchedule(Stage{Duration: secs * time.Second, From: rate, To: rate})
	var mu sync.Mutex
	var first, last time.Time
	res, err := Run(context.Background(), Plan{Schedule: s, MaxInFlight: 256}, httpFunc(c, srv.url, func(at time.Time) {
		mu.Lock()
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != rate*secs || srv.hits.Load() != rate*secs {
		t.Fatalf("ok %d, server saw %d; want %d (codes %v)", res.OK, srv.hits.Load(), rate*secs, res.Codes)
	}
	got := float64(rate*secs-1) / last.Sub(first).Seconds()
	if math.Abs(got-rate)/rate > 0.02 {
		t.Errorf("sent at %.1f requests/s, want %d ± 2 %%", got, rate)
	}
	t.Logf("sent at %.1f/s; latency p50 %v p99 %v; generator lag p50 %v p99 %v",
		got, res.Latency.Quantile(.5), res.Latency.Quantile(.99), res.Lag.Quantile(.5), res.Lag.Quantile(.99))
}

// TestNoCoordinatedOmission stalls the server once for 300 ms with one
// connection at 1,000 requests/s: the requests due during the stall waited,
// and their latency says so (about 300 of 1,000 above 100 ms), while the
// send-to-answer time of most of them was short.
func TestNoCoordinatedOmission(t *testing.T) {
	srv := newServer(t)
	c := &http.Client{}
	s, _ := NewSchedule(Stage{Duration: time.Second, From: 1000, To: 1000})
	var n atomic.Int64
	f := httpFunc(c, srv.url, nil)
	res, err := Run(context.Background(), Plan{Schedule: s, MaxInFlight: 1}, func(ctx context.Context, r Request) Outcome {
		if n.Add(1) == 100 {
			srv.stall.Store(int64(300 * time.Millisecond))
		}
		return f(ctx, r)
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 1000 {
		t.Fatalf("ok %d, want 1000 (%v)", res.OK, res.Codes)
	}
	if p80, max := res.Latency.Quantile(0.8), res.Latency.Max(); p80 < 50*time.Millisecond || max < 300*time.Millisecond {
		t.Errorf("p80 %v max %v: the stall is hidden (want p80 ≥ 50ms, max ≥ 300ms)", p80, max)
	}
}

func TestClosedLoopSteps(t *testing.T) {
	srv := newServer(t)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	res, err := Run(context.Background(), Plan{Workers: []int{1, 4}, StepDuration: 300 * time.Millisecond}, httpFunc(c, srv.url, nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != 2 || res.Steps[0].OK.Load() == 0 || res.Steps[1].OK.Load() == 0 || res.Fail != 0 {
		t.Fatalf("steps %d, ok %d/%d, fail %d", len(res.Steps), res.Steps[0].OK.Load(), res.Steps[1].OK.Load(), res.Fail)
	}
	if res.Steps[1].Offered != 4 || int(res.Latency.Count()) != int(res.OK) {
		t.Errorf("step offered %v, latency count %d, ok %d", res.Steps[1].Offered, res.Latency.Count(), res.OK)
	}
}

func TestWindowLimits(t *testing.T) {
	var w Window
	for _, l := range []int32{0, 500, 250, 1000, 0} {
		w.noteLimit(l)
	}
	if w.MinLimit.Load() != 250 || w.MaxLimit.Load() != 1000 {
		t.Errorf("min %d max %d, want 250 and 1000", w.MinLimit.Load(), w.MaxLimit.Load())
	}
}

// TestOKLatency records four fast refusals for each slow success: the
// success-only histogram holds the successes alone.
func TestOKLatency(t *testing.T) {
	start := time.Now()
	rec := newRecorder(start, 2)
	for i := range 100 {
		o, lat := Outcome{Code: "429 RATE_LIMIT_EXCEEDED"}, 100*time.Microsecond
		if i%5 == 0 {
			o, lat = Outcome{Code: "200", OK: true}, 5*time.Millisecond
		}
		rec.record(o, lat, start, nil)
	}
	res := rec.res
	if res.Latency.Count() != 100 || res.Latency.Quantile(.5) > time.Millisecond {
		t.Errorf("overall: %d latencies, p50 %v; want 100, the refusals' 0.1 ms", res.Latency.Count(), res.Latency.Quantile(.5))
	}
	if res.OKLatency.Count() != 20 || res.OKLatency.Quantile(0) < 4900*time.Microsecond {
		t.Errorf("successes: %d latencies, min %v; want 20 of 5 ms", res.OKLatency.Count(), res.OKLatency.Quantile(0))
	}
}

// TestFailuresByOutcome counts failures by the outcome's OK flag, not by
// the code's text: a 202 the scenario refused is a failure, a 200 is not.
func TestFailuresByOutcome(t *testing.T) {
	s, _ := NewSchedule(Stage{Duration: time.Second, From: 30, To: 30})
	clk := NewManualClock(time.Unix(1_800_000_000, 0))
	res, err := Run(context.Background(), Plan{Schedule: s, Clock: clk}, func(_ context.Context, r Request) Outcome {
		switch r.Seq % 3 {
		case 0:
			return Outcome{Code: "202 unreadable body"}
		case 1:
			return Outcome{Code: "429 RATE_LIMIT_EXCEEDED"}
		}
		return Outcome{Code: "202", OK: true}
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Codes["202 unreadable body"] != 10 || res.Codes["202"] != 10 || res.Fail != 20 {
		t.Fatalf("codes %v, failed %d", res.Codes, res.Fail)
	}
	if len(res.Failures) != 2 || res.Failures["202 unreadable body"] != 10 || res.Failures["429 RATE_LIMIT_EXCEEDED"] != 10 {
		t.Errorf("failures %v, want 202 unreadable body ×10 and 429 RATE_LIMIT_EXCEEDED ×10", res.Failures)
	}
}

// TestParts runs a mixed request function whose part "image" answers in
// 40 ms and fails one request in four, and whose part "payload" answers in
// 2 ms: each part's counts and latency are recorded apart, from each
// request's due time as the run's own are; a function without parts
// records none.
func TestParts(t *testing.T) {
	s, _ := NewSchedule(Stage{Duration: time.Second, From: 100, To: 100})
	clk := NewManualClock(time.Unix(1_800_000_000, 0))
	res, err := Run(context.Background(), Plan{Schedule: s, Clock: clk, MaxInFlight: 1}, func(_ context.Context, r Request) Outcome {
		if r.Seq%10 == 0 {
			clk.Advance(40 * time.Millisecond)
			if r.Seq%40 == 0 {
				return Outcome{Code: "500", Part: "image"}
			}
			return Outcome{Code: "200", OK: true, Part: "image"}
		}
		clk.Advance(2 * time.Millisecond)
		return Outcome{Code: "200", OK: true, Part: "payload"}
	})
	if err != nil {
		t.Fatal(err)
	}
	img, pay := res.Parts["image"], res.Parts["payload"]
	if len(res.Parts) != 2 || img == nil || pay == nil {
		t.Fatalf("parts %v", res.Parts)
	}
	if img.OK.Load() != 7 || img.Fail.Load() != 3 || pay.OK.Load() != 90 || pay.Fail.Load() != 0 {
		t.Errorf("image %d ok %d failed, payload %d ok %d failed; want 7/3 and 90/0", img.OK.Load(), img.Fail.Load(), pay.OK.Load(), pay.Fail.Load())
	}
	if img.Latency.Count() != 10 || img.OKLatency.Count() != 7 || img.Latency.Quantile(0) < 40*time.Millisecond {
		t.Errorf("image latency: %d recorded, %d ok, min %v; want 10, 7, at least 40 ms", img.Latency.Count(), img.OKLatency.Count(), img.Latency.Quantile(0))
	}
	// One slot: a payload due right after an image waits for it, so the
	// payloads' p99 holds that wait and their p50 does not.
	if p50 := pay.Latency.Quantile(.5); p50 < 2*time.Millisecond || p50 > 3*time.Millisecond {
		t.Errorf("payload p50 %v, want about 2 ms", p50)
	}
	if n := img.Latency.Count() + pay.Latency.Count(); n != res.Latency.Count() {
		t.Errorf("parts recorded %d latencies, the run %d", n, res.Latency.Count())
	}
	res, _ = Run(context.Background(), Plan{Schedule: s, Clock: clk}, func(context.Context, Request) Outcome { return Outcome{Code: "200", OK: true} })
	if res.Parts != nil {
		t.Errorf("a function without parts recorded parts %v", res.Parts)
	}
}

// TestRecordAllocs checks that counting a completion allocates nothing
// once its code and second were seen, in the open loop (which looks up the
// step by completion time) and the closed loop.
func TestRecordAllocs(t *testing.T) {
	start := time.Now()
	rec := newRecorder(start, 10)
	steps := []*Step{{Start: 0, End: time.Second}, {Start: time.Second, End: 2 * time.Second}}
	o := Outcome{Code: "200", OK: true, RateLimit: 100}
	rec.record(o, time.Millisecond, start.Add(1500*time.Millisecond), steps[0])
	if n := testing.AllocsPerRun(100, func() { rec.record(o, time.Millisecond, start.Add(1500*time.Millisecond), steps[0]) }); n != 0 {
		t.Errorf("closed loop: %v allocations", n)
	}
	rec.spans = steps
	if n := testing.AllocsPerRun(100, func() { rec.record(o, time.Millisecond, start.Add(1500*time.Millisecond), steps[0]) }); n != 0 {
		t.Errorf("open loop: %v allocations", n)
	}
	o.Part = "payload"
	rec.record(o, time.Millisecond, start.Add(1500*time.Millisecond), steps[0])
	if n := testing.AllocsPerRun(100, func() { rec.record(o, time.Millisecond, start.Add(1500*time.Millisecond), steps[0]) }); n != 0 {
		t.Errorf("with a part: %v allocations", n)
	}
	if steps[1].Done.Load() != 203 { // 101 open-loop records, then 102 with a part
		t.Errorf("completions at 1.5 s counted %d times in the second step, want 203", steps[1].Done.Load())
	}
}

// BenchmarkRecord is the generator's per-request bookkeeping (open loop:
// the completion's step is looked up by time).
func BenchmarkRecord(b *testing.B) {
	start := time.Now()
	rec := newRecorder(start, 10)
	step := &Step{End: 2 * time.Second}
	rec.spans = []*Step{step}
	o := Outcome{Code: "200", OK: true, RateLimit: 100}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		end := start.Add(time.Second)
		for pb.Next() {
			rec.record(o, 1234567, end, step)
		}
	})
}

// BenchmarkScheduleAt is the open-loop dispatcher's per-request arithmetic.
func BenchmarkScheduleAt(b *testing.B) {
	s, _ := NewSchedule(Stage{Duration: time.Minute, From: 100, To: 5000}, Stage{Duration: time.Minute, From: 5000, To: 5000})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.At(uint64(i) % s.Total())
	}
}

func absDur(d time.Duration) time.Duration { return max(d, -d) }

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
