package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/slipverify/slipverify/bench/capacity"
	"github.com/slipverify/slipverify/bench/load"
	"github.com/slipverify/slipverify/bench/report"
	"github.com/slipverify/slipverify/bench/scenario"
	"github.com/slipverify/slipverify/bench/stack"
	"github.com/slipverify/slipverify/bench/suite"
	"github.com/slipverify/slipverify/bench/tenant"
	"github.com/slipverify/slipverify/bench/webhook"
)

const usage = `usage: loadgen COMMAND [flags]

commands:
  suite      start a fresh stack (make run) and run the standard suite: table, JSON, HTML
  run        run one scenario against a running edge
  compare    show the change between two JSON results: loadgen compare OLD.json NEW.json
  capacity   print the capacity model (per-core numbers from a JSON result and flags)
  report     render a JSON result again as a table and HTML
  seed       write a bench seed file
  webhook-ca make the async receiver's CA in a directory, to start a stack with before loadgen run
  selftest   measure the generator's own ceiling against a trivial local server
  list       list the scenarios

loadgen COMMAND -h shows the command's flags.`

func run(ctx context.Context, args []string, out, errOut io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "suite":
		return cmdSuite(ctx, args, out, errOut)
	case "run":
		return cmdRun(ctx, args, out, errOut)
	case "compare":
		return cmdCompare(args, out)
	case "capacity":
		return cmdCapacity(args, out)
	case "report":
		return cmdReport(args, out)
	case "seed":
		return cmdSeed(args, out)
	case "webhook-ca":
		return cmdWebhookCA(args, out)
	case "selftest":
		return cmdSelftest(ctx, args, out)
	case "list":
		for _, s := range scenario.All() {
			fmt.Fprintf(out, "%-15s %s\n", s.Name, s.About)
		}
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Fprintln(out, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", cmd, usage)
}

func newFlags(name string) *flag.FlagSet {
	return flag.NewFlagSet("loadgen "+name, flag.ContinueOnError)
}

// parse parses a command's flags and refuses arguments beyond nargs, so a
// misspelt or misplaced flag is an error, not ignored.
func parse(fs *flag.FlagSet, args []string, nargs int) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != nargs {
		return fmt.Errorf("%s: want %d arguments after the flags, got %q", fs.Name(), nargs, fs.Args())
	}
	return nil
}

// capacityFlags adds the model's flags to fs, defaults from
// capacity.DefaultInput.
func capacityFlags(fs *flag.FlagSet) *capacity.Input {
	in := capacity.DefaultInput
	fs.Float64Var(&in.Target, "target", in.Target, "capacity model: verifications/s to plan for")
	fs.Float64Var(&in.AsyncShare, "async", in.AsyncShare, "capacity model: share of verifications submitted async (0..1)")
	fs.Float64Var(&in.BatchSize, "batch-size", in.BatchSize, "capacity model: mean slips per async submit")
	fs.Float64Var(&in.ImageShare, "image-share", in.ImageShare, "capacity model: share of verifications, sync and async, sent as a picture of the slip (0..1; the default is the production mix's, bench/profiles/production.json)")
	fs.Float64Var(&in.CoresPerInstance, "cores", in.CoresPerInstance, "capacity model: cores per instance")
	fs.Float64Var(&in.Utilisation, "utilisation", in.Utilisation, "capacity model: planned CPU share at the target (0..1]")
	fs.IntVar(&in.MinInstances, "min-instances", in.MinInstances, "capacity model: least instances of each tier (core on bbolt is one)")
	return &in
}

// perCoreFlags adds overrides of the per-core numbers; set ones win over
// measured ones.
func perCoreFlags(fs *flag.FlagSet, in *capacity.Input) func() {
	var edge, coreSync, coreImage, coreAsync, disp, usage, corePG, pg, pgStandby, pgCeiling float64
	d := capacity.DefaultPerCore
	fs.Float64Var(&edge, "edge-per-core", 0, fmt.Sprintf("edge requests/s per core (default: measured, else %.0f)", d.Edge))
	fs.Float64Var(&coreSync, "core-per-core", 0, fmt.Sprintf("core sync verifications/s by payload per core (default: measured by bank-v2, else %.0f)", d.CoreSync))
	fs.Float64Var(&coreImage, "core-image-per-core", 0, fmt.Sprintf("core sync verifications/s by picture per core (default: measured by bank-image, else %.0f)", d.CoreImage))
	fs.Float64Var(&coreAsync, "core-async-per-core", 0, fmt.Sprintf("core async verifications/s per core (default: measured, else %.0f)", d.CoreAsync))
	fs.Float64Var(&disp, "dispatcher-per-core", 0, fmt.Sprintf("dispatcher callbacks/s per core (default: measured, else %.0f, assumed)", d.Dispatcher))
	fs.Float64Var(&usage, "usage-per-core", 0, fmt.Sprintf("usage events/s per core (default: measured, else %.0f, assumed)", d.Usage))
	fs.Float64Var(&corePG, "core-postgres-per-core", 0, fmt.Sprintf("core sync verifications/s by payload per core on the PostgreSQL store (default: measured by bank-v2 on PostgreSQL, else %.0f)", d.CorePostgres))
	fs.Float64Var(&pg, "postgres-per-core", 0, fmt.Sprintf("verifications/s per core of PostgreSQL's primary (default: measured by bank-v2 on PostgreSQL, else %.0f)", d.Postgres))
	fs.Float64Var(&pgStandby, "postgres-standby-per-core", 0, fmt.Sprintf("verifications/s per core of PostgreSQL's synchronous standby (default: measured by bank-v2 on PostgreSQL, else %.0f)", d.PostgresStandby))
	fs.Float64Var(&pgCeiling, "postgres-ceiling", 0, fmt.Sprintf("verifications/s PostgreSQL commits at most, whatever the cores (default: the bank-v2 peak measured on PostgreSQL, a floor, else %d)", capacity.DefaultPostgresCeiling))
	return func() {
		set := func(v float64, dst *float64, src *string) {
			if v > 0 {
				*dst, *src = v, "given"
			}
		}
		set(edge, &in.PerCore.Edge, &in.Source.Edge)
		set(coreSync, &in.PerCore.CoreSync, &in.Source.CoreSync)
		set(coreImage, &in.PerCore.CoreImage, &in.Source.CoreImage)
		set(coreAsync, &in.PerCore.CoreAsync, &in.Source.CoreAsync)
		set(disp, &in.PerCore.Dispatcher, &in.Source.Dispatcher)
		set(usage, &in.PerCore.Usage, &in.Source.Usage)
		set(corePG, &in.PerCore.CorePostgres, &in.Source.CorePostgres)
		set(pg, &in.PerCore.Postgres, &in.Source.Postgres)
		set(pgStandby, &in.PerCore.PostgresStandby, &in.Source.PostgresStandby)
		set(pgCeiling, &in.PostgresCeiling, &in.Source.PostgresCeiling)
	}
}

func cmdSuite(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("suite")
	repo := fs.String("repo", ".", "the repository root (make run is run there)")
	dir := fs.String("out", "bench/out", "directory for bench.json, bench.html and bench.txt")
	short := fs.Bool("short", false, "a second per scenario at a low rate: checks that everything works, measures nothing")
	only := fs.String("only", "", "comma-separated scenario names to run (default: the whole suite)")
	stores := fs.String("store", "bbolt", "where core keeps its state: bbolt (one core), postgres (SLIP_STORE=postgres make run: a PostgreSQL primary, its synchronous standby and -core-count cores behind the edge), postgres:N (N cores), or several in turn, bbolt,postgres: a fresh stack of each, -rounds times, each run's results in OUT/SETUP-ROUND (bbolt-1, postgres-2cores-1, …) and the runs side by side in OUT/stores.txt, with the capacity model from the bbolt runs and those of the first PostgreSQL setup listed")
	cores := fs.Int("core-count", 2, "with -store postgres: the core processes on PostgreSQL, behind the edge")
	rounds := fs.Int("rounds", 1, "runs of each store, in turn")
	in := capacityFlags(fs)
	apply := perCoreFlags(fs, in)
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	apply()
	if *rounds < 1 || *cores < 1 {
		return errors.New("suite: -rounds and -core-count must be at least 1")
	}
	list, err := parseStores(*stores, *cores)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	o := suite.Options{Repo: *repo, Out: *dir, Short: *short, Capacity: *in, Log: errOut, Command: "loadgen suite " + strings.Join(args, " "), Cores: *cores}
	if *only != "" {
		o.Only = strings.Split(*only, ",")
	}
	start := time.Now()
	if len(list) == 1 && *rounds == 1 {
		o.Store, o.Cores = list[0].store, list[0].cores
		rep, err := suite.Run(ctx, o)
		if rep != nil && len(rep.Scenarios) > 0 {
			if werr := write(rep, *dir, out); werr != nil {
				return errors.Join(err, werr)
			}
			fmt.Fprintf(errOut, "bench: done in %v; %s\n", time.Since(start).Round(time.Second), filepath.Join(*dir, "bench.{txt,json,html}"))
		}
		return err
	}
	// The stores in turn, round after round, so the machine's drift
	// falls on each alike.
	var runs, model []*report.Report
	for i := 1; i <= *rounds; i++ {
		for j, st := range list {
			o := o
			o.Store, o.Cores, o.Out = st.store, st.cores, filepath.Join(*dir, fmt.Sprintf("%s-%d", st.dir(), i))
			if err := os.MkdirAll(o.Out, 0o755); err != nil {
				return err
			}
			fmt.Fprintf(errOut, "bench: round %d of %d, core on %s\n", i, *rounds, st.dir())
			rep, err := suite.Run(ctx, o)
			if rep != nil && len(rep.Scenarios) > 0 {
				if werr := write(rep, o.Out, io.Discard); werr != nil {
					return errors.Join(err, werr)
				}
				runs = append(runs, rep)
				if st.store == stack.Bbolt || j == firstPostgres(list) {
					model = append(model, rep)
				}
			}
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", i, st.dir(), err)
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "loadgen suite %s\n", strings.Join(args, " "))
	report.Stores(&b, runs)
	if m, err := suite.ModelOf(*in, model...); err != nil {
		fmt.Fprintf(&b, "\ncapacity model: %v\n", err)
	} else {
		fmt.Fprintf(&b, "\nThe capacity model from these runs (each number the median of its store's runs):\n\n")
		m.Print(&b)
	}
	fmt.Fprint(out, b.String())
	fmt.Fprintf(errOut, "bench: done in %v; %s and each run's results beside it\n", time.Since(start).Round(time.Second), filepath.Join(*dir, "stores.txt"))
	return os.WriteFile(filepath.Join(*dir, "stores.txt"), []byte(b.String()), 0o644)
}

// setup is a store to run the suite on, and its cores.
type setup struct {
	store string
	cores int
}

// dir names the setup's results: bbolt, postgres-2cores.
func (s setup) dir() string {
	if s.store == stack.Postgres && s.cores > 0 {
		return fmt.Sprintf("postgres-%dcores", s.cores)
	}
	return s.store
}

// parseStores reads -store: bbolt, postgres (with cores cores) or
// postgres:N, comma-separated.
func parseStores(list string, cores int) ([]setup, error) {
	var out []setup
	for _, st := range strings.Split(list, ",") {
		name, n, hasN := strings.Cut(st, ":")
		s := setup{store: name}
		switch {
		case name == stack.Bbolt && !hasN:
		case name == stack.Postgres && !hasN:
			s.cores = cores
		case name == stack.Postgres:
			c, err := strconv.Atoi(n)
			if err != nil || c < 1 {
				return nil, fmt.Errorf("suite: -store %q: want postgres:N, N cores, at least 1", st)
			}
			s.cores = c
		default:
			return nil, fmt.Errorf("suite: -store %q: want bbolt, postgres or postgres:N, comma-separated", st)
		}
		out = append(out, s)
	}
	return out, nil
}

// firstPostgres returns the index of the first PostgreSQL setup, or -1.
func firstPostgres(list []setup) int {
	for i, s := range list {
		if s.store == stack.Postgres {
			return i
		}
	}
	return -1
}

// write prints the table and writes bench.txt, bench.json and bench.html
// into dir.
func write(rep *report.Report, dir string, out io.Writer) error {
	var b strings.Builder
	rep.Table(&b)
	fmt.Fprint(out, b.String())
	if err := os.WriteFile(filepath.Join(dir, "bench.txt"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	if err := rep.WriteJSON(filepath.Join(dir, "bench.json")); err != nil {
		return err
	}
	return rep.WriteHTML(filepath.Join(dir, "bench.html"))
}

// parseStages reads "DUR:RATE" or "DUR:FROM-TO" stages, comma-separated
// ("10s:100-1000,30s:1000").
func parseStages(s string) ([]load.Stage, error) {
	var out []load.Stage
	for _, part := range strings.Split(s, ",") {
		dur, rates, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return nil, fmt.Errorf("stage %q: want DURATION:RATE or DURATION:FROM-TO", part)
		}
		d, err := time.ParseDuration(dur)
		if err != nil {
			return nil, fmt.Errorf("stage %q: %w", part, err)
		}
		from, to, ramp := strings.Cut(rates, "-")
		if !ramp {
			to = from
		}
		f, err1 := strconv.ParseFloat(from, 64)
		t, err2 := strconv.ParseFloat(to, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("stage %q: rates must be numbers (requests/s)", part)
		}
		out = append(out, load.Stage{Duration: d, From: f, To: t})
	}
	return out, nil
}

func parseWorkers(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("workers %q: want positive integers separated by commas", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func cmdRun(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("run")
	addr := fs.String("addr", "127.0.0.1:8080", "the edge's address (host:port)")
	seedPath := fs.String("seed", "bench/seed.json", "seed file the stack was started with (its keys are used)")
	name := fs.String("scenario", "bank-v2", "scenario (loadgen list)")
	rate := fs.Float64("rate", 0, "open loop: requests/s (with -duration or -requests)")
	duration := fs.Duration("duration", 30*time.Second, "open loop: how long at -rate")
	stages := fs.String("stages", "", `open loop: rate profile, e.g. "10s:100-1000,30s:1000" (ramps and steps)`)
	workers := fs.String("workers", "", "closed loop: worker counts, one step each, e.g. 4,16,64")
	step := fs.Duration("step", 10*time.Second, "closed loop: duration of each step")
	requests := fs.Uint64("requests", 0, "stop after this many requests (0: no limit)")
	inflight := fs.Int("max-inflight", 2048, "open loop: most requests in flight (more wait for a free slot: the stack's back-pressure, counted in latency and reported as slot wait, apart from the generator's lag)")
	timeout := fs.Duration("timeout", 10*time.Second, "timeout of one request")
	conns := fs.Int("conns", 4096, "most connections to the edge")
	mix := fs.String("mix", "bench/profiles/production.json", "scenario file of the mixed scenario")
	batch := fs.Int("batch", 20, "slips per async batch")
	whDir := fs.String("webhook-dir", "", "async scenarios: directory of the receiver's CA, made beforehand with loadgen webhook-ca -dir DIR; the stack must have been started with SLIP_EGRESS_CA_FILE=DIR/webhook-ca.pem and SLIP_EGRESS_ALLOW_CIDRS=127.0.0.0/8")
	jsonOut := fs.String("json", "", "write the result as JSON to this file")
	htmlOut := fs.String("html", "", "write the HTML report to this file")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	sc, err := scenario.Get(*name)
	if err != nil {
		return err
	}
	plan := load.Plan{Requests: *requests, MaxInFlight: *inflight, Timeout: *timeout, StepDuration: *step}
	switch {
	case *workers != "" && (*rate > 0 || *stages != ""):
		return errors.New("give either -workers (closed loop) or -rate/-stages (open loop), not both")
	case *workers != "":
		if plan.Workers, err = parseWorkers(*workers); err != nil {
			return err
		}
	case *stages != "":
		st, err := parseStages(*stages)
		if err != nil {
			return err
		}
		if plan.Schedule, err = load.NewSchedule(st...); err != nil {
			return err
		}
	case *rate > 0:
		d := *duration
		if *requests > 0 && !flagSet(fs, "duration") {
			d = time.Duration(float64(*requests) / *rate * float64(time.Second))
		}
		if plan.Schedule, err = load.NewSchedule(load.Stage{Duration: d, From: *rate, To: *rate}); err != nil {
			return err
		}
	default:
		return errors.New("give -rate (or -stages) for an open loop, or -workers for a closed loop")
	}
	seed, err := tenant.Read(*seedPath)
	if err != nil {
		return err
	}
	if sc.Async {
		// The stack must trust the receiver's CA from its start: a CA made
		// now would not be, so none is made here.
		if *whDir == "" {
			return fmt.Errorf("scenario %s needs -webhook-dir (see loadgen run -h)", sc.Name)
		}
		if err := webhook.CheckCA(*whDir); err != nil {
			return fmt.Errorf("scenario %s: %w; make the CA with loadgen webhook-ca -dir %s and start the stack with the SLIP_EGRESS_CA_FILE it prints", sc.Name, err, *whDir)
		}
	}
	if err := health(*addr); err != nil {
		return err
	}
	env := &scenario.Env{Client: scenario.NewClient(*addr, *conns), Seed: seed, Run: scenario.RunID(), Mix: *mix, BatchSize: *batch}
	if sc.Async {
		if env.Webhook, err = webhook.Start(*whDir); err != nil {
			return err
		}
		defer env.Webhook.Close()
	}
	r := &suite.Runner{Env: env, Log: errOut}
	s, err := r.Run(ctx, "", sc, plan)
	if err != nil {
		return err
	}
	rep := single("loadgen run "+strings.Join(args, " "), *addr, s)
	rep.DeriveKindCPU() // says, for a mix, that its scenarios' own runs are not in this report
	rep.Table(out)
	if *jsonOut != "" {
		if err := rep.WriteJSON(*jsonOut); err != nil {
			return err
		}
	}
	if *htmlOut != "" {
		return rep.WriteHTML(*htmlOut)
	}
	return nil
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func health(addr string) error {
	c := &http.Client{Timeout: 3 * time.Second}
	res, err := c.Get("http://" + addr + "/health")
	if err != nil {
		return fmt.Errorf("%w (%s): %v", suite.ErrNoStack, addr, err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		return fmt.Errorf("%w (%s): status %d", suite.ErrNoStack, addr, res.StatusCode)
	}
	return nil
}

func cmdCompare(args []string, out io.Writer) error {
	if len(args) != 2 {
		return errors.New("usage: loadgen compare OLD.json NEW.json")
	}
	old, err := report.Read(args[0])
	if err != nil {
		return err
	}
	cur, err := report.Read(args[1])
	if err != nil {
		return err
	}
	report.Compare(out, old, cur)
	return nil
}

func cmdCapacity(args []string, out io.Writer) error {
	fs := newFlags("capacity")
	from := fs.String("from", "", "JSON results whose measured per-core numbers to use, comma-separated (each number the median of the results that measured it; a result of a stack on PostgreSQL gives the PostgreSQL numbers)")
	in := capacityFlags(fs)
	apply := perCoreFlags(fs, in)
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	m := &capacity.Output{}
	if *from != "" {
		var reps []*report.Report
		for _, f := range strings.Split(*from, ",") {
			rep, err := report.Read(f)
			if err != nil {
				return err
			}
			reps = append(reps, rep)
		}
		apply()
		var err error
		if m, err = suite.ModelOf(*in, reps...); err != nil {
			return err
		}
	} else {
		apply()
		o, err := capacity.Plan(*in)
		if err != nil {
			return err
		}
		m = &o
	}
	m.Print(out)
	return nil
}

func cmdReport(args []string, out io.Writer) error {
	fs := newFlags("report")
	htmlOut := fs.String("html", "", "also write the HTML report to this file")
	if err := parse(fs, args, 1); err != nil {
		return fmt.Errorf("%w\nusage: loadgen report [-html FILE] RESULT.json", err)
	}
	rep, err := report.Read(fs.Arg(0))
	if err != nil {
		return err
	}
	rep.Table(out)
	if *htmlOut != "" {
		return rep.WriteHTML(*htmlOut)
	}
	return nil
}

func cmdSeed(args []string, out io.Writer) error {
	fs := newFlags("seed")
	o := tenant.DefaultOptions
	path := fs.String("o", "", "write the seed here (default: standard output)")
	fs.IntVar(&o.Services, "services", o.Services, "bench services")
	fs.IntVar(&o.Branches, "branches", o.Branches, "branches (keys) per service")
	fs.IntVar(&o.Rate, "rate", o.Rate, "plan rate per branch and budget, requests/s")
	fs.Int64Var(&o.Quota, "quota", o.Quota, "monthly quota per service")
	fs.IntVar(&o.OverloadBranches, "overload-branches", o.OverloadBranches, "branches of the overload service")
	fs.IntVar(&o.OverloadRate, "overload-rate", o.OverloadRate, "plan rate per branch of the overload service")
	fs.Uint64Var(&o.Seed, "random-seed", o.Seed, "seed of the keys and secrets")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	raw, err := tenant.Generate(o)
	if err != nil {
		return err
	}
	if *path == "" {
		_, err = out.Write(raw)
		return err
	}
	return os.WriteFile(*path, raw, 0o644)
}

// cmdWebhookCA makes the async receiver's CA in a directory (or keeps the
// one there) and prints how to start a stack that trusts it; loadgen run
// -webhook-dir DIR then signs its receivers with it.
func cmdWebhookCA(args []string, out io.Writer) error {
	fs := newFlags("webhook-ca")
	dir := fs.String("dir", "", "directory for webhook-ca.pem and webhook-ca-key.pem (made when missing)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("webhook-ca: give -dir DIR")
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	caFile, made, err := webhook.MakeCA(abs)
	if err != nil {
		return err
	}
	what := "made"
	if !made {
		what = "already there, kept"
	}
	fmt.Fprintf(out, "%s: %s\nstart the stack with SLIP_EGRESS_CA_FILE=%s SLIP_EGRESS_ALLOW_CIDRS=127.0.0.0/8,\nthen: loadgen run -webhook-dir %s -scenario async-single ...\n", caFile, what, caFile, abs)
	return nil
}

func cmdSelftest(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("selftest")
	step := fs.Duration("step", 3*time.Second, "duration of each step (16 and 64 workers)")
	seedPath := fs.String("seed", "bench/seed.json", "seed file whose keys the requests carry")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	seed, err := tenant.Read(*seedPath)
	if err != nil {
		return err
	}
	s, err := suite.Ceiling(ctx, seed, *step)
	if err != nil {
		return err
	}
	single("loadgen selftest", "in-process", s).Table(out)
	return nil
}

// single is the report of one scenario run now on this machine.
func single(command, target string, s *report.Scenario) *report.Report {
	return &report.Report{Version: report.Version, Created: time.Now(), Command: command, Host: suite.Host(), Target: target,
		Scenarios: []*report.Scenario{s}}
}
