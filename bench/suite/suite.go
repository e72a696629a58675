// Package suite runs scenarios and the bench's standard suite: a fresh
// stack, the generator's own ceiling, the peak of the main path, each
// scenario at a share of that peak, a ramp for latency against throughput,
// an overload run and the async scenarios, then the capacity model. After
// each scenario the stack settles (Settler) before the next begins.
package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/bench/capacity"
	"github.com/slipverify/slipverify/bench/load"
	"github.com/slipverify/slipverify/bench/report"
	"github.com/slipverify/slipverify/bench/scenario"
	"github.com/slipverify/slipverify/bench/stack"
	"github.com/slipverify/slipverify/bench/tenant"
	"github.com/slipverify/slipverify/bench/webhook"
)

// Runner runs scenarios against one edge and records CPU per process.
type Runner struct {
	Env *scenario.Env
	// CPU reads the CPU time of the stack's processes (nil: not known).
	CPU func() stack.CPU
	// Commits reads what core's store has committed so far, every core
	// summed (nil: not known); read with CPU.
	Commits func() (report.Commits, error)
	// Alive reports an error when the stack under test stopped (nil: not
	// checked).
	Alive func() error
	// CallbackWait bounds the wait for async callbacks after a run.
	CallbackWait time.Duration
	// Settle, when set, waits after each scenario until the stack has
	// settled, so the next one begins without this one's backlog or
	// lowered limits; the scenario's CPU counts until the stack settled,
	// its backlog included.
	Settle *Settler
	Log    io.Writer
}

// ownCPU is the generator's own CPU time.
func ownCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Run runs sc under plan and reports it as name (sc's name when empty).
func (r *Runner) Run(ctx context.Context, name string, sc *scenario.Scenario, plan load.Plan) (*report.Scenario, error) {
	if name == "" {
		name = sc.Name
	}
	// Each run has slips of its own: a scenario run twice, or a part of
	// the mix, never meets the slips of an earlier run as duplicates.
	env := *r.Env
	env.Run = scenario.RunID()
	// What the scenario makes ahead of its requests (bank-image's
	// pictures) stops with the run.
	buildCtx, stop := context.WithCancel(ctx)
	defer stop()
	f, err := sc.Build(buildCtx, &env)
	if err != nil {
		return nil, err
	}
	var before stack.CPU
	if r.CPU != nil {
		before = r.CPU()
	}
	commitsBefore, commitsErr := r.commits()
	own := ownCPU()
	if r.Log != nil {
		fmt.Fprintf(r.Log, "bench: %s: %s\n", name, describe(plan))
	}
	if sc.Async {
		r.Env.Webhook.Reset()
	}
	res, err := load.Run(ctx, plan, f)
	stop()
	if err != nil {
		return nil, err
	}
	mode := "open"
	if plan.Schedule == nil {
		mode = "closed"
	}
	if r.Alive != nil {
		if err := r.Alive(); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	out := report.FromResult(name, sc.About, mode, describe(plan), sc.VerificationsPer(r.Env), res)
	if len(res.Parts) > 0 {
		// A mix: its pictures and payloads apart (their core CPU is
		// derived once the report holds its parts' own runs,
		// Report.DeriveKindCPU).
		out.SetKinds(res.Parts, scenario.KindOf)
	}
	if sc.Async {
		r.callbacks(out, res.Start)
	}
	var after stack.CPU
	var commitsAfter report.Commits
	read := func() {
		if r.CPU != nil {
			after = r.CPU()
		}
		if commitsErr == nil {
			commitsAfter, commitsErr = r.commits()
		}
	}
	if r.Settle != nil {
		out.Settle = r.Settle.Wait(ctx, read)
		if r.Log != nil {
			fmt.Fprintf(r.Log, "bench: %s: the stack %s\n", name, out.Settle)
		}
	}
	if r.Settle == nil || !out.Settle.Settled {
		read()
	}
	if r.Commits != nil && commitsErr == nil {
		c := commitsAfter.Sub(commitsBefore)
		out.Commits = &c
	}
	cpu := stack.CPU{}
	if r.CPU != nil {
		cpu = after.Sub(before)
	}
	cpu["loadgen"] = ownCPU() - own
	// Async work is done when its callback arrives: SetCPU counts the
	// successful callbacks (SetCallbacks) per CPU-second, not the accepted
	// submits.
	out.SetCPU(cpu)
	return out, nil
}

// commits reads r.Commits, or returns an error when it is not set.
func (r *Runner) commits() (report.Commits, error) {
	if r.Commits == nil {
		return report.Commits{}, errors.New("not read")
	}
	return r.Commits()
}

// callbacks waits for the callbacks of the run started at start and
// records them: the scenario's verifications are its successful callbacks.
func (r *Runner) callbacks(out *report.Scenario, start time.Time) {
	wh := r.Env.Webhook
	wait := r.CallbackWait
	if wait == 0 {
		wait = time.Minute
	}
	wh.Wait(time.Now().Add(wait))
	out.SetCallbacks(callbackReport(wh, start))
	// The run is over when its callbacks are in: CPU is read after them.
}

// callbackReport is what wh saw of the run started at start.
func callbackReport(wh *webhook.Receiver, start time.Time) *report.Callbacks {
	cb := &report.Callbacks{Latency: report.Digest(wh.Latency()), Stats: wh.Stats()}
	if cb.Stats.Expected > cb.Stats.Delivered {
		cb.Missing = cb.Stats.Expected - cb.Stats.Delivered
	}
	if !cb.Stats.LastSuccess.IsZero() {
		cb.Seconds = cb.Stats.LastSuccess.Sub(start).Seconds()
	}
	return cb
}

// describe puts a plan in words.
func describe(p load.Plan) string {
	var parts []string
	if s := p.Schedule; s != nil {
		var st []string
		for _, x := range s.Stages() {
			if x.From == x.To {
				st = append(st, fmt.Sprintf("%.0f/s %v", x.From, x.Duration))
			} else {
				st = append(st, fmt.Sprintf("%.0f→%.0f/s %v", x.From, x.To, x.Duration))
			}
		}
		parts = append(parts, strings.Join(st, ", "))
	} else {
		ws := make([]string, len(p.Workers))
		for i, w := range p.Workers {
			ws[i] = fmt.Sprint(w)
		}
		parts = append(parts, "workers "+strings.Join(ws, ",")+" × "+p.StepDuration.String())
	}
	if p.Requests > 0 {
		parts = append(parts, fmt.Sprintf("≤%d requests", p.Requests))
	}
	return strings.Join(parts, ", ")
}

// Open is an open-loop plan at rate for d.
func Open(rate float64, d time.Duration, maxInFlight int) load.Plan {
	s, err := load.NewSchedule(load.Stage{Duration: d, From: rate, To: rate})
	if err != nil {
		panic(err) // rate and d come from the suite's own constants
	}
	return load.Plan{Schedule: s, MaxInFlight: maxInFlight}
}

// Options of the standard suite.
type Options struct {
	// Repo is the repository root (make run is run there).
	Repo string
	// Out is the directory for bench.json, bench.html and bench.txt.
	Out string
	// Short runs each scenario for a second or two at a low rate: a check
	// that everything works, not a measurement.
	Short bool
	// Only, when set, limits the suite to these scenario names.
	Only []string
	// Capacity is the capacity model's target and assumptions (zero:
	// capacity.DefaultInput).
	Capacity capacity.Input
	// Store is where the stack's core keeps its state: stack.Bbolt (or
	// empty) or stack.Postgres, with Cores cores (stack.Options).
	Store   string
	Cores   int
	Log     io.Writer
	Command string
}

// Run starts a fresh stack and runs the standard suite against it.
func Run(ctx context.Context, o Options) (*report.Report, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	tmp, err := os.MkdirTemp("", "slipbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	// The bench seed with an overload service whose plan rate the stack
	// cannot sustain, so the adaptive limit has something to shed.
	opts := tenant.DefaultOptions
	opts.OverloadRate = 2000
	seedRaw, err := tenant.Generate(opts)
	if err != nil {
		return nil, err
	}
	seedPath := filepath.Join(tmp, "seed.json")
	if err := os.WriteFile(seedPath, seedRaw, 0o600); err != nil {
		return nil, err
	}
	seed, err := tenant.Read(seedPath)
	if err != nil {
		return nil, err
	}
	wh, err := webhook.Start(tmp)
	if err != nil {
		return nil, err
	}
	defer wh.Close()
	what := "make run"
	if o.Store == stack.Postgres {
		what = "SLIP_STORE=postgres make run"
	}
	fmt.Fprintf(o.Log, "bench: starting a fresh stack (%s)\n", what)
	st, err := stack.Start(stack.Options{Repo: o.Repo, Seed: seedPath, DataDir: filepath.Join(tmp, "data"), Log: filepath.Join(o.Out, "stack.log"),
		Env: []string{"SLIP_EGRESS_CA_FILE=" + wh.CAFile, "SLIP_EGRESS_ALLOW_CIDRS=127.0.0.0/8"}, Store: o.Store, Cores: o.Cores})
	if err != nil {
		return nil, err
	}
	defer st.Stop()
	fmt.Fprintf(o.Log, "bench: stack ready, edge on %s, core on %s (%d)\n", st.Edge, st.Store, len(st.Cores))
	client := scenario.NewClient(st.Edge, 4096)
	defer client.CloseIdle()
	env := &scenario.Env{Client: client, Seed: seed, Run: scenario.RunID(), Webhook: wh,
		Mix: filepath.Join(o.Repo, "bench", "profiles", "production.json")}
	r := &Runner{Env: env, CPU: st.CPU, Commits: StoreCommits(st.Cores), Alive: st.Exited, Settle: StackSettler(st), Log: o.Log}
	rep := &report.Report{Version: report.Version, Created: time.Now(), Command: o.Command, Host: Host(), Target: st.Edge,
		Settling: r.Settle.Describe(), Store: st.Store, Cores: len(st.Cores)}
	err = standard(ctx, r, rep, o)
	// The mix's kinds cost core what its scenarios cost on their own,
	// which run after it.
	rep.DeriveKindCPU()
	if err != nil {
		return rep, err
	}
	if err := st.Stop(); err != nil {
		rep.Notes = append(rep.Notes, "the stack did not stop cleanly: "+err.Error())
	}
	in := o.Capacity
	if in.Target == 0 {
		in = capacity.DefaultInput
	}
	rep.Capacity = Model(rep, in)
	return rep, nil
}

// want reports whether the suite runs scenario name.
func (o Options) want(name string) bool {
	if len(o.Only) == 0 {
		return true
	}
	for _, n := range o.Only {
		if n == name {
			return true
		}
	}
	return false
}

// standard runs the suite's scenarios into rep.
func standard(ctx context.Context, r *Runner, rep *report.Report, o Options) error {
	sec := func(n int) time.Duration {
		if o.Short {
			return time.Second
		}
		return time.Duration(n) * time.Second
	}
	add := func(s *report.Scenario, err error) error {
		if err != nil {
			return err
		}
		rep.Scenarios = append(rep.Scenarios, s)
		return nil
	}
	get := func(name string) *scenario.Scenario {
		s, err := scenario.Get(name)
		if err != nil {
			panic(err) // the suite names only registered scenarios
		}
		return s
	}
	const inflight = 2048
	// The generator's own ceiling: the main scenario against a trivial
	// server in this process, sharing the machine with the stack.
	if o.want("generator-ceiling") && !o.Short {
		s, err := Ceiling(ctx, r.Env.Seed, sec(3))
		if err := add(s, err); err != nil {
			return err
		}
	}
	// Warm the edge's auth cache and the connections, then let the stack
	// settle, as after every scenario.
	if _, err := load.Run(ctx, load.Plan{Workers: []int{16}, StepDuration: sec(2)}, mustBuild(ctx, get("bank-v2"), r.Env)); err != nil {
		return err
	}
	if r.Settle != nil {
		if st := r.Settle.Wait(ctx, nil); !st.Settled {
			rep.Notes = append(rep.Notes, "after the warm-up the stack "+st.String())
		}
	}
	// The peak of the main path, closed loop.
	peak := 200.0
	if !o.Short && o.want("bank-v2 peak") {
		s, err := r.Run(ctx, "bank-v2 peak", get("bank-v2"), load.Plan{Workers: []int{4, 16, 64, 128}, StepDuration: sec(5)})
		if err := add(s, err); err != nil {
			return err
		}
		for _, st := range s.Steps {
			peak = max(peak, st.OKRate)
		}
	}
	rate := roundRate(peak / 2)
	if o.Short {
		rate = 100
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("open-loop scenarios run at %.0f requests/s, half the closed-loop peak of bank-v2 (%.0f/s)", rate, peak))
	for _, name := range []string{"bank-v2", "bank-v2-signed", "bank-v1", "wallet-v2", "duplicates", "mixed"} {
		if !o.want(name) {
			continue
		}
		at := rate
		if name == "mixed" && !o.Short {
			// Its pictures cost core as much as about 90 payloads each:
			// the mix runs at a quarter of the payload peak.
			at = roundRate(peak / 4)
		}
		if err := add(r.Run(ctx, "", get(name), Open(at, sec(10), inflight))); err != nil {
			return err
		}
	}
	if o.want("bank-image") {
		// Images cost core far more than payloads: a closed loop finds
		// their own pace.
		if err := add(r.Run(ctx, "", get("bank-image"), load.Plan{Workers: []int{2, 8}, StepDuration: sec(5)})); err != nil {
			return err
		}
	}
	if o.want("bank-v2 ramp") && !o.Short {
		var stages []load.Stage
		for _, f := range []float64{0.25, 0.5, 0.75, 1, 1.25} {
			stages = append(stages, load.Stage{Duration: sec(5), From: roundRate(f * peak), To: roundRate(f * peak)})
		}
		s, _ := load.NewSchedule(stages...)
		if err := add(r.Run(ctx, "bank-v2 ramp", get("bank-v2"), load.Plan{Schedule: s, MaxInFlight: inflight, Timeout: 5 * time.Second})); err != nil {
			return err
		}
	}
	if o.want("overload") {
		s, _ := load.NewSchedule(load.Stage{Duration: sec(20), From: roundRate(2 * peak), To: roundRate(2 * peak)})
		if err := add(r.Run(ctx, "", get("overload"), load.Plan{Schedule: s, MaxInFlight: inflight, Timeout: 5 * time.Second, Drain: 5 * time.Second})); err != nil {
			return err
		}
	}
	// Async scenarios run at a rate the job workers keep up with, high
	// enough that per-core numbers are not dominated by idle polling.
	asyncRate := min(300, roundRate(peak/8))
	if o.Short {
		asyncRate = 20
	}
	for _, a := range []struct {
		name string
		rate float64
	}{{"async-single", asyncRate}, {"async-batch", asyncRate / 20}} {
		if !o.want(a.name) {
			continue
		}
		sc := get(a.name)
		if why := asyncPending(r.Env.Client, r.Env.Seed); why != "" {
			rep.Scenarios = append(rep.Scenarios, &report.Scenario{Name: a.name, About: sc.About, Pending: why})
			continue
		}
		if err := add(r.Run(ctx, "", sc, Open(a.rate, sec(10), inflight))); err != nil {
			return err
		}
	}
	return nil
}

func mustBuild(ctx context.Context, sc *scenario.Scenario, env *scenario.Env) load.Func {
	f, err := sc.Build(ctx, env)
	if err != nil {
		panic(err)
	}
	return f
}

// roundRate rounds a rate to 2 significant digits.
func roundRate(v float64) float64 {
	if v < 10 {
		return max(1, float64(int(v+0.5)))
	}
	p := 1.0
	for v/p >= 100 {
		p *= 10
	}
	return float64(int(v/p+0.5)) * p
}

// asyncPending returns why the async routes cannot be benched, or "" when
// the edge serves them.
func asyncPending(c *scenario.Client, seed *tenant.Seed) string {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + c.Addr() + "/v2/verify/bank/async")
	req.Header.SetMethod("POST")
	req.Header.Set("Authorization", "Bearer "+seed.Branches[0].Key)
	req.Header.SetContentType("application/json")
	req.SetBodyString(`{}`)
	if err := fasthttp.DoTimeout(req, resp, 5*time.Second); err != nil {
		return "the edge did not answer the async route: " + err.Error()
	}
	if resp.StatusCode() == 404 {
		return "the stack does not serve POST /v2/verify/bank/async yet (404)"
	}
	return ""
}

// Host describes this machine.
func Host() report.Host {
	h := report.Host{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				h.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return h
}

// Model runs the capacity model with the per-core numbers a report
// measured (ModelOf); when it cannot, it adds why to rep's notes and
// returns nil.
func Model(rep *report.Report, in capacity.Input) *capacity.Output {
	out, err := ModelOf(in, rep)
	if err != nil {
		rep.Notes = append(rep.Notes, err.Error())
		return nil
	}
	return out
}

// ModelOf runs the capacity model with the per-core numbers the reports
// measured, each the median over the reports that measured it: edge from
// bank-v2 peak (else bank-v2, else mixed), core's payloads from bank-v2
// peak (else bank-v2: not mixed, whose pictures the model counts apart),
// core's pictures from bank-image, core async and the dispatcher from
// async-single, usage from the first of bank-v2 peak, bank-v2, mixed and
// async-single that measured it. A report of a stack on PostgreSQL gives
// core's payloads on PostgreSQL instead, its primary's and standby's
// numbers, and the commit ceiling: the best step of its bank-v2 peak, a
// floor. A number in already has a source when the user gave it
// (in.Source names it, "given" for loadgen's flags): it wins over the
// measured one, for every tier. in's own values also stand where no report
// measured anything.
func ModelOf(in capacity.Input, reps ...*report.Report) (*capacity.Output, error) {
	type measure struct {
		dst  *float64
		src  *string
		from string // the scenario, and the store when PostgreSQL
		vals []float64
	}
	var order []*measure
	measures := map[*float64]*measure{}
	add := func(dst *float64, src *string, from string, v float64) {
		if v <= 0 || *src != "" { // given: it stands
			return
		}
		m := measures[dst]
		if m == nil {
			m = &measure{dst: dst, src: src, from: from}
			measures[dst] = m
			order = append(order, m)
		}
		m.vals = append(m.vals, v)
	}
	for _, rep := range reps {
		pick := func(names ...string) *report.Scenario {
			for _, n := range names {
				if s := rep.Find(n); s != nil && s.Pending == "" && len(s.PerCore) > 0 {
					return s
				}
			}
			return nil
		}
		pg := rep.StoreName() == stack.Postgres
		on := ""
		if pg {
			on = " on PostgreSQL"
		}
		measured := func(s *report.Scenario, tier string, dst *float64, src *string) {
			add(dst, src, s.Name+on, s.PerCore[tier])
		}
		if s := pick("bank-v2 peak", "bank-v2", "mixed"); s != nil {
			measured(s, "edge", &in.PerCore.Edge, &in.Source.Edge)
		}
		if s := pick("bank-v2 peak", "bank-v2"); s != nil {
			if pg {
				measured(s, "core", &in.PerCore.CorePostgres, &in.Source.CorePostgres)
				measured(s, "postgres/primary", &in.PerCore.Postgres, &in.Source.Postgres)
				measured(s, "postgres/standby", &in.PerCore.PostgresStandby, &in.Source.PostgresStandby)
				if s.Name == "bank-v2 peak" {
					var best float64
					for _, st := range s.Steps {
						best = max(best, st.OKRate*float64(max(s.Units, 1)))
					}
					add(&in.PostgresCeiling, &in.Source.PostgresCeiling, "bank-v2 peak"+on+"'s best step, a floor", best)
				}
			} else {
				measured(s, "core", &in.PerCore.CoreSync, &in.Source.CoreSync)
			}
		}
		if !pg {
			// Pictures and async jobs on bbolt: the model adds what the
			// PostgreSQL store costs core to them.
			if s := pick("bank-image"); s != nil {
				measured(s, "core", &in.PerCore.CoreImage, &in.Source.CoreImage)
			}
			if s := pick("async-single"); s != nil {
				measured(s, "core", &in.PerCore.CoreAsync, &in.Source.CoreAsync)
			}
		}
		if s := pick("async-single"); s != nil {
			measured(s, "dispatcher", &in.PerCore.Dispatcher, &in.Source.Dispatcher)
		}
		for _, n := range []string{"bank-v2 peak", "bank-v2", "mixed", "async-single"} {
			if s := pick(n); s != nil && s.PerCore["usage"] > 0 {
				measured(s, "usage", &in.PerCore.Usage, &in.Source.Usage)
				break
			}
		}
	}
	for _, m := range order {
		*m.dst, *m.src = median(m.vals), "measured: "+m.from
		if n := len(m.vals); n > 1 {
			*m.src += fmt.Sprintf(", median of %d runs", n)
		}
	}
	out, err := capacity.Plan(in)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// median returns the middle of vs (of the two in the middle, their mean).
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ErrNoStack is returned by commands that need an edge when none answers.
var ErrNoStack = errors.New("no edge answers /health at the address given")
