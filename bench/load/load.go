// Package load drives a request function at a planned load and records what
// came back.
//
// Open loop: requests are due at fixed times (Schedule) whatever the server
// does, and each request's latency is measured from the time it was due, not
// from the time it was sent, so a server that stalls is charged for every
// request that waited behind the stall (no coordinated omission). At most
// MaxInFlight requests are in flight; a request due while every slot is
// taken waits for one, and that wait (SlotWait, back-pressure from the
// server) is recorded apart from the generator's own lateness (Lag: timer
// wake-ups, its own work), so a generator that could not keep up is seen,
// not mistaken for a slow server, and a slow server is not mistaken for a
// late generator.
//
// Closed loop: N workers send back to back, for each of a list of worker
// counts in turn, to find the peak throughput and draw latency against
// throughput.
package load

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slipverify/slipverify/bench/hist"
)

// Request is one request to send: its sequence number (from 0, unique in a
// run) and the time it was due.
type Request struct {
	Seq uint64
	Due time.Time
}

// Outcome is how one request ended. Code is "200" style for answers the
// scenario counts as successful, or status and error code ("429
// RATE_LIMIT_EXCEEDED") or a transport error class; Func implementations
// should return constant or interned strings, since codes are counted on the
// hot path. RateLimit is the X-RateLimit-Limit the answer carried, 0 when
// none.
type Outcome struct {
	Code      string
	OK        bool
	RateLimit int32
	// Prep is the time the Func spent on the generator's own work before it
	// sent the request (bank-image waiting for a picture its makers had not
	// finished): the run moves the send time on by it, so it counts as the
	// generator's lag, not as the server's send→answer time (nor, in the
	// closed loop, as latency).
	Prep time.Duration
	// Part names the part of a mixed request function the request went to
	// (mixed: the scenario it drew), so a run records each part's counts
	// and latency apart (Result.Parts); "" when the function has no parts.
	// Like Code, a constant or interned string.
	Part string
}

// Func sends one request and reports its outcome. It must honour ctx.
type Func func(ctx context.Context, r Request) Outcome

// Clock is the time source of a run; tests inject one.
type Clock interface {
	Now() time.Time
	// SleepUntil returns at t or later, or early when ctx ends.
	SleepUntil(ctx context.Context, t time.Time)
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// SleepUntil sleeps until t or ctx ends.
func (RealClock) SleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	tm := time.NewTimer(d)
	select {
	case <-tm.C:
	case <-ctx.Done():
		tm.Stop()
	}
}

// ManualClock is a clock that moves only when told: a sleeper jumps it to
// the time it waits for, and Advance moves it on (a simulated service
// time). Tests run whole profiles on it at once.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a ManualClock set to t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{now: t} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// SleepUntil moves the clock to t unless it is past t already.
func (c *ManualClock) SleepUntil(_ context.Context, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}

// Advance moves the clock on by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Plan is the load of one run. Open loop when Schedule is set, closed loop
// when Workers is.
type Plan struct {
	// Schedule is the open-loop arrival profile.
	Schedule *Schedule
	// MaxInFlight bounds concurrent open-loop requests (default 1024);
	// requests due while all are busy wait for a free slot, and their wait
	// counts as latency (and as SlotWait).
	MaxInFlight int
	// Workers lists the closed-loop concurrency of each step, run in turn
	// for StepDuration each.
	Workers      []int
	StepDuration time.Duration
	// Requests stops the run after this many requests were sent (0: no
	// limit).
	Requests uint64
	// Timeout bounds one request (default 10s, the client timeout the spec
	// recommends).
	Timeout time.Duration
	// Drain is how long the requests still in flight once the last one
	// was sent may take (default Timeout); then they are cancelled. (The
	// last request is sent once a slot is free for it: a run whose server
	// holds every slot ends later, each request's latency charged for the
	// wait.)
	Drain time.Duration
	// Clock defaults to RealClock.
	Clock Clock
}

func (p *Plan) check() error {
	var errs []error
	if (p.Schedule == nil) == (len(p.Workers) == 0) {
		errs = append(errs, errors.New("load: a plan needs either a rate schedule (open loop) or worker counts (closed loop)"))
	}
	for _, w := range p.Workers {
		if w < 1 {
			errs = append(errs, fmt.Errorf("load: worker count %d must be at least 1", w))
		}
	}
	if len(p.Workers) > 0 && p.StepDuration <= 0 && p.Requests == 0 {
		errs = append(errs, errors.New("load: a closed-loop plan needs a step duration or a request count"))
	}
	if p.MaxInFlight < 0 || p.Timeout < 0 || p.Drain < 0 {
		errs = append(errs, errors.New("load: max in flight, timeout and drain must not be negative"))
	}
	return errors.Join(errs...)
}

// Window is what completed in one second of a run.
type Window struct {
	Latency  hist.Histogram
	OK, Fail atomic.Uint64
	// MinLimit and MaxLimit are the lowest and highest X-RateLimit-Limit
	// seen (0: none seen).
	MinLimit, MaxLimit atomic.Int32
}

func (w *Window) noteLimit(l int32) {
	if l <= 0 {
		return
	}
	for m := w.MaxLimit.Load(); l > m && !w.MaxLimit.CompareAndSwap(m, l); m = w.MaxLimit.Load() {
	}
	for m := w.MinLimit.Load(); (m == 0 || l < m) && !w.MinLimit.CompareAndSwap(m, l); m = w.MinLimit.Load() {
	}
}

// Step is one level of load: a stage of the open-loop profile or a worker
// count of the closed loop.
type Step struct {
	// Offered is the stage's mean arrival rate (open loop) or the worker
	// count (closed loop).
	Offered    float64
	Start, End time.Duration // offsets of the step
	// Latency, OK and Fail are of the requests due in the step (open
	// loop) or sent in it (closed loop), whenever they completed: the
	// latency clients saw at this level of load.
	Latency  hist.Histogram
	OK, Fail atomic.Uint64
	// Done and DoneOK count the requests that completed within
	// [Start, End), whichever step they were due in: Done/(End-Start) is
	// what the server achieved during the step, which falls below the
	// offered rate when it cannot keep up (requests due in an open-loop
	// step then complete in later steps, or in the drain after the last,
	// which belongs to no step). In the closed loop every request of a step
	// completes within it, so Done is OK+Fail.
	Done, DoneOK atomic.Uint64
}

// Result is what a run recorded.
type Result struct {
	Start   time.Time
	Elapsed time.Duration // from start to the last completion
	// Latency of every completed request: from due time (open loop) or send
	// time (closed loop) to the answer.
	Latency hist.Histogram
	// OKLatency is Latency of the successful requests alone: where many
	// requests are refused fast (429s under overload) the overall
	// percentiles are mostly refusals, these are what served clients saw.
	OKLatency hist.Histogram
	// Service is the time from send to answer: in the open loop it leaves
	// out the wait for a free in-flight slot and the generator's own lag,
	// so it understates what clients see; it is shown beside Latency, never
	// instead of it.
	Service hist.Histogram
	// Lag is the generator's own lateness in sending each request: in the
	// open loop how late it sent beyond SlotWait (timer wake-ups, the
	// generator's own work, Outcome.Prep), in the closed loop Outcome.Prep.
	// Large values mean the generator, not the server, limited the run.
	Lag hist.Histogram
	// SlotWait is, for each open-loop request, how long it waited after it
	// was due because all MaxInFlight slots were taken by requests the
	// server had not answered (or because the requests before it waited
	// so): back-pressure from the server, part of Latency, not the
	// generator's lateness. Capped counts the requests that waited so
	// (SlotWait above 0): none when MaxInFlight was never reached.
	SlotWait    hist.Histogram
	Capped      uint64
	MaxInFlight int // the open loop's bound (0 in the closed loop)
	OK, Fail    uint64
	// Unsent counts requests handed to a worker that the end of the run
	// (its context) cancelled before they were sent.
	Unsent uint64
	// Codes counts every completed request by its outcome's code;
	// Failures the failed ones (Outcome.OK false) alone, whatever their
	// code says ("202 unreadable body" is a failure).
	Codes    map[string]uint64
	Failures map[string]uint64
	// Parts holds, by Outcome.Part, what the requests of each part of a
	// mixed request function recorded (nil when no outcome named a part).
	Parts   map[string]*Part
	Windows []*Window // one a second, by completion time
	Steps   []*Step
}

// Part is what the requests of one part of a mixed request function
// recorded: their counts, and their latency measured as Result.Latency is
// (from the time each was due).
type Part struct {
	OK, Fail  atomic.Uint64
	Latency   hist.Histogram
	OKLatency hist.Histogram
}

func (p *Part) record(ok bool, lat time.Duration) {
	p.Latency.Record(lat)
	if ok {
		p.OK.Add(1)
		p.OKLatency.Record(lat)
	} else {
		p.Fail.Add(1)
	}
}

// recorder is the shared state of a running run.
type recorder struct {
	start time.Time
	res   *Result
	// spans are the open-loop steps, in order, by which completions are
	// counted as each step's achieved throughput (nil in the closed loop,
	// where a request completes within the step it was sent in).
	spans   []*Step
	windows []atomic.Pointer[Window]
	codes   named[codeCount]
	parts   named[Part]
}

func newRecorder(start time.Time, seconds int) *recorder {
	return &recorder{start: start, res: &Result{Start: start}, windows: make([]atomic.Pointer[Window], seconds)}
}

// named holds a value per name, made when the name is first seen. Lookups
// are the hot path: a map lookup in an immutable snapshot, no lock; the
// slow path (a name seen first) copies the snapshot under the lock.
type named[V any] struct {
	mu sync.Mutex
	m  map[string]*V
	ro atomic.Pointer[map[string]*V]
}

// get returns the value of name, made on first use.
func (n *named[V]) get(name string) *V {
	if ro := n.ro.Load(); ro != nil {
		if v, ok := (*ro)[name]; ok {
			return v
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	v, ok := n.m[name]
	if !ok {
		if n.m == nil {
			n.m = map[string]*V{}
		}
		v = new(V)
		n.m[name] = v
		snap := make(map[string]*V, len(n.m))
		for k, x := range n.m {
			snap[k] = x
		}
		n.ro.Store(&snap)
	}
	return v
}

// all returns every value by name; call it once recording has stopped.
func (n *named[V]) all() map[string]*V {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.m
}

// codeCount counts the outcomes of one code, successful and failed apart:
// the scenario, not the code's text, says whether an answer succeeded.
type codeCount struct{ ok, fail atomic.Uint64 }

func (c *codeCount) add(ok bool) {
	if ok {
		c.ok.Add(1)
	} else {
		c.fail.Add(1)
	}
}

// counter returns the counter of code.
func (r *recorder) counter(code string) *codeCount { return r.codes.get(code) }

func (r *recorder) window(end time.Time) *Window {
	sec := int(end.Sub(r.start) / time.Second)
	if sec < 0 || sec >= len(r.windows) {
		return nil
	}
	if w := r.windows[sec].Load(); w != nil {
		return w
	}
	w := new(Window)
	if r.windows[sec].CompareAndSwap(nil, w) {
		return w
	}
	return r.windows[sec].Load()
}

// record counts one completed request. Hot path: no locks, no allocation
// once the code and the second were seen.
func (r *recorder) record(o Outcome, lat time.Duration, end time.Time, step *Step) {
	r.res.Latency.Record(lat)
	r.counter(o.Code).add(o.OK)
	if o.Part != "" {
		r.parts.get(o.Part).record(o.OK, lat)
	}
	w := r.window(end)
	if w != nil {
		w.Latency.Record(lat)
		w.noteLimit(o.RateLimit)
	}
	if step != nil {
		step.Latency.Record(lat)
	}
	if span := r.span(end, step); span != nil {
		span.Done.Add(1)
		if o.OK {
			span.DoneOK.Add(1)
		}
	}
	if o.OK {
		r.res.OKLatency.Record(lat)
		if w != nil {
			w.OK.Add(1)
		}
		if step != nil {
			step.OK.Add(1)
		}
	} else {
		if w != nil {
			w.Fail.Add(1)
		}
		if step != nil {
			step.Fail.Add(1)
		}
	}
}

// span returns the step whose time span holds end: in the open loop by
// binary search of the stages (nil after the last, in the drain), in the
// closed loop the step the request was sent in.
func (r *recorder) span(end time.Time, step *Step) *Step {
	if r.spans == nil {
		return step
	}
	off := end.Sub(r.start)
	i := sort.Search(len(r.spans), func(i int) bool { return r.spans[i].End > off })
	if i == len(r.spans) || off < r.spans[i].Start {
		return nil
	}
	return r.spans[i]
}

func (r *recorder) finish(last time.Time) *Result {
	res := r.res
	res.Elapsed = last.Sub(r.start)
	res.Codes, res.Failures = map[string]uint64{}, map[string]uint64{}
	for code, c := range r.codes.all() {
		ok, fail := c.ok.Load(), c.fail.Load()
		if ok+fail > 0 {
			res.Codes[code] = ok + fail
		}
		if fail > 0 {
			res.Failures[code] = fail
		}
	}
	if parts := r.parts.all(); len(parts) > 0 {
		res.Parts = parts
	}
	for _, st := range res.Steps {
		res.OK += st.OK.Load()
		res.Fail += st.Fail.Load()
	}
	n := len(r.windows)
	for n > 0 && r.windows[n-1].Load() == nil {
		n--
	}
	for i := range n {
		w := r.windows[i].Load()
		if w == nil {
			w = new(Window)
		}
		res.Windows = append(res.Windows, w)
	}
	return res
}

// Run executes plan against f and returns what it recorded. It returns
// early, with what was recorded so far, when ctx ends.
func Run(ctx context.Context, plan Plan, f Func) (*Result, error) {
	if err := plan.check(); err != nil {
		return nil, err
	}
	if plan.Clock == nil {
		plan.Clock = RealClock{}
	}
	if plan.Timeout == 0 {
		plan.Timeout = 10 * time.Second
	}
	if plan.Drain == 0 {
		plan.Drain = plan.Timeout
	}
	if plan.MaxInFlight == 0 {
		plan.MaxInFlight = 1024
	}
	if plan.Schedule != nil {
		return runOpen(ctx, plan, f), nil
	}
	return runClosed(ctx, plan, f), nil
}

type ticket struct {
	req  Request
	step *Step
	// ready is when the request could have been sent at the earliest with
	// MaxInFlight slots (SlotWait is ready-Due): not before it was due, nor
	// before the slot it takes was freed, nor before the request ahead of
	// it could go.
	ready time.Time
}

func runOpen(ctx context.Context, plan Plan, f Func) *Result {
	clk := plan.Clock
	sched := plan.Schedule
	start := clk.Now()
	rec := newRecorder(start, int((sched.Duration()+plan.Drain)/time.Second)+2)
	rec.res.MaxInFlight = plan.MaxInFlight
	var at time.Duration
	for _, st := range sched.Stages() {
		rec.res.Steps = append(rec.res.Steps, &Step{Offered: (st.From + st.To) / 2, Start: at, End: at + st.Duration})
		at += st.Duration
	}
	rec.spans = rec.res.Steps
	// Requests run under their own context, cancelled once the drain after
	// the profile is over.
	reqCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	// slots holds a token per free in-flight slot: the time it was freed.
	// Only the dispatcher takes them, so when it finds none free, every
	// slot has been busy since it last took one.
	slots := make(chan time.Time, plan.MaxInFlight)
	for range plan.MaxInFlight {
		slots <- start
	}
	tickets := make(chan ticket, plan.MaxInFlight) // never full: each ticket holds a slot
	var lastEnd atomic.Int64
	var capped atomic.Uint64
	var wg sync.WaitGroup
	for range plan.MaxInFlight {
		wg.Go(func() {
			for t := range tickets {
				sent := clk.Now()
				if reqCtx.Err() != nil {
					rec.counter("unsent").add(false)
					slots <- sent
					continue
				}
				c, stop := context.WithDeadline(reqCtx, sent.Add(plan.Timeout))
				o := f(c, t.req)
				stop()
				end := clk.Now()
				if o.Prep > 0 {
					sent = minTime(sent.Add(o.Prep), end)
				}
				wait := t.ready.Sub(t.req.Due)
				if wait > 0 {
					capped.Add(1)
				}
				rec.res.SlotWait.Record(wait)
				rec.res.Lag.Record(sent.Sub(t.ready))
				rec.res.Service.Record(end.Sub(sent))
				rec.record(o, end.Sub(t.req.Due), end, t.step)
				storeMax(&lastEnd, end.UnixNano())
				slots <- clk.Now()
			}
		})
	}
	limit := sched.Total()
	if plan.Requests > 0 {
		limit = min(limit, plan.Requests)
	}
	var ready time.Time // of the request before
	for i := uint64(0); i < limit && ctx.Err() == nil; i++ {
		off, stage, _ := sched.At(i)
		due := start.Add(off)
		// A slot first, then the due time: a request early for its slot
		// waits for the time, one late waits for the slot (back-pressure),
		// and a dispatcher waiting for a slot moves no clock ahead.
		var freed time.Time
		select {
		case freed = <-slots:
		case <-ctx.Done():
			continue
		}
		clk.SleepUntil(ctx, due)
		ready = maxTime(due, freed, ready)
		tickets <- ticket{Request{Seq: i, Due: due}, rec.res.Steps[stage], ready}
	}
	close(tickets)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	timer := time.NewTimer(plan.Drain) // real time: the drain bounds a wait for real answers
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		cancel()
		<-done
	case <-ctx.Done():
		cancel()
		<-done
	}
	res := rec.finish(lastEndTime(&lastEnd, start))
	res.Capped = capped.Load()
	res.Unsent = res.Codes["unsent"]
	delete(res.Codes, "unsent")
	delete(res.Failures, "unsent")
	return res
}

func runClosed(ctx context.Context, plan Plan, f Func) *Result {
	clk := plan.Clock
	start := clk.Now()
	total := plan.StepDuration * time.Duration(len(plan.Workers))
	if plan.StepDuration == 0 {
		total = time.Hour
	}
	rec := newRecorder(start, int((total+plan.Timeout)/time.Second)+2)
	var seq atomic.Uint64
	var lastEnd atomic.Int64
	for _, n := range plan.Workers {
		if ctx.Err() != nil {
			break
		}
		stepStart := clk.Now()
		step := &Step{Offered: float64(n), Start: stepStart.Sub(start)}
		rec.res.Steps = append(rec.res.Steps, step)
		stepCtx, cancel := ctx, context.CancelFunc(func() {})
		if plan.StepDuration > 0 {
			stepCtx, cancel = context.WithDeadline(ctx, stepStart.Add(plan.StepDuration))
		}
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				for stepCtx.Err() == nil {
					s := seq.Add(1) - 1
					if plan.Requests > 0 && s >= plan.Requests {
						return
					}
					sent := clk.Now()
					// A request runs to its own timeout even past the step's
					// end, so the last answers of a step are not cut short.
					c, stop := context.WithDeadline(context.WithoutCancel(ctx), sent.Add(plan.Timeout))
					o := f(c, Request{Seq: s, Due: sent})
					stop()
					end := clk.Now()
					// The generator's own work before sending is its lag,
					// not the server's latency.
					prep := min(max(o.Prep, 0), end.Sub(sent))
					rec.res.Lag.Record(prep)
					sent = sent.Add(prep)
					rec.res.Service.Record(end.Sub(sent))
					rec.record(o, end.Sub(sent), end, step)
					storeMax(&lastEnd, end.UnixNano())
				}
			})
		}
		wg.Wait()
		cancel()
		step.End = clk.Now().Sub(start)
		if plan.Requests > 0 && seq.Load() >= plan.Requests {
			break
		}
	}
	return rec.finish(lastEndTime(&lastEnd, start))
}

func storeMax(a *atomic.Int64, v int64) {
	for m := a.Load(); v > m && !a.CompareAndSwap(m, v); m = a.Load() {
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(t time.Time, ts ...time.Time) time.Time {
	for _, u := range ts {
		if u.After(t) {
			t = u
		}
	}
	return t
}

func lastEndTime(a *atomic.Int64, start time.Time) time.Time {
	if v := a.Load(); v != 0 {
		return time.Unix(0, v)
	}
	return start
}
