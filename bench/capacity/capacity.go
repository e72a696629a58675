// Package capacity is the bench's capacity model: from the throughput one
// CPU core of each tier sustains, the instances of each tier a target load
// needs, and where core keeps its state: bbolt while one core instance
// suffices, else PostgreSQL with as many cores as the target needs and a
// primary and standby sized from PostgreSQL's own CPU per verification,
// up to its commit ceiling. It is arithmetic on stated assumptions, printed
// with them, so a planner can see and change every number it rests on.
package capacity

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// PerCore is what one fully busy core of each tier handles a second.
type PerCore struct {
	// Edge: requests (a sync verification, an async submit or a batch).
	Edge float64 `json:"edge"`
	// CoreSync: sync verifications by payload; CoreImage: sync
	// verifications by picture (the scan included: tens of times a
	// payload's cost); CoreAsync: async jobs processed (submit and
	// processing together) by payload.
	CoreSync  float64 `json:"coreSync"`
	CoreImage float64 `json:"coreImage"`
	CoreAsync float64 `json:"coreAsync"`
	// Dispatcher: callbacks delivered. Usage: usage events written.
	Dispatcher float64 `json:"dispatcher"`
	Usage      float64 `json:"usage"`
	// CorePostgres: sync verifications by payload per CPU-second of core
	// on the PostgreSQL store (every core's process summed). Postgres and
	// PostgresStandby: sync verifications by payload per CPU-second of
	// PostgreSQL's primary and of its synchronous standby (every process
	// of each server, backends and replay included).
	CorePostgres    float64 `json:"corePostgres,omitempty"`
	Postgres        float64 `json:"postgres,omitempty"`
	PostgresStandby float64 `json:"postgresStandby,omitempty"`
}

// Source says where each PerCore number came from ("measured: <scenario>"
// or "assumed").
type Source struct {
	Edge       string `json:"edge"`
	CoreSync   string `json:"coreSync"`
	CoreImage  string `json:"coreImage"`
	CoreAsync  string `json:"coreAsync"`
	Dispatcher string `json:"dispatcher"`
	Usage      string `json:"usage"`

	CorePostgres    string `json:"corePostgres,omitempty"`
	Postgres        string `json:"postgres,omitempty"`
	PostgresStandby string `json:"postgresStandby,omitempty"`
	PostgresCeiling string `json:"postgresCeiling,omitempty"`
}

// DefaultPerCore are the numbers used where nothing was measured: the edge
// and core from this repository's bench on a 2-core shared machine (core's
// pictures: bank-image's 51 verifications per CPU-second in the suite run
// bench/README.md shows); the dispatcher and usage tiers are assumptions
// (a callback is one HTTPS POST; a usage event is one row of a batched
// ClickHouse insert) until their own bench numbers exist.
//
// The PostgreSQL numbers are the medians, rounded, of the side-by-side run
// bench/README.md shows ("PostgreSQL beside bbolt"): core's two processes
// (659 µs a verification) and PostgreSQL's primary (756 µs) and standby
// (88 µs) at the bank-v2 peak on the dev stack's PostgreSQL (synchronous
// standby on the same disk).
var DefaultPerCore = PerCore{Edge: 20000, CoreSync: 3000, CoreImage: 51, CoreAsync: 1500, Dispatcher: 2000, Usage: 20000,
	CorePostgres: 1500, Postgres: 1300, PostgresStandby: 11000}

// DefaultPostgresCeiling is the verifications a second PostgreSQL commits
// at most where nothing was measured: the median best step of the dev
// stack's bank-v2 peak on PostgreSQL with two cores in the side-by-side
// run bench/README.md shows, a floor (the stack and the generator ran out
// of the machine's two CPUs first).
const DefaultPostgresCeiling = 1170

// Input is a target and the assumptions the model rests on.
type Input struct {
	// Target is verifications a second, AsyncShare the fraction of them
	// submitted async, BatchSize the mean slips per async submit (1: single
	// submits).
	Target     float64 `json:"target"`
	AsyncShare float64 `json:"asyncShare"`
	BatchSize  float64 `json:"batchSize"`
	// ImageShare is the fraction of verifications, sync and async alike,
	// sent as a picture of the slip rather than its QR payload: core
	// scans each one, so its cores depend on this share more than on any
	// other input.
	ImageShare float64 `json:"imageShare"`
	PerCore    PerCore `json:"perCore"`
	Source     Source  `json:"source"` // kept in bench.json: a re-rendered report says the same
	// CoresPerInstance is the size of one instance; Utilisation the share
	// of its CPU the model plans to use at the target (the rest absorbs
	// bursts, garbage collection and a lost instance's load);
	// MinInstances the floor of every tier (redundancy).
	CoresPerInstance float64 `json:"coresPerInstance"`
	Utilisation      float64 `json:"utilisation"`
	MinInstances     int     `json:"minInstances"`
	// PostgresCeiling is the verifications a second one PostgreSQL
	// primary with its synchronous standby commits at most, whatever the
	// cores in front of it: every core's transactions wait for the same
	// WAL flushes, on both servers. Above it the model plans no store.
	PostgresCeiling float64 `json:"postgresCeiling,omitempty"`
}

// DefaultInput is the example target: 5,000 verifications a second, 20 %
// async, 2 % pictures (the share in the bench's production mix,
// bench/profiles/production.json).
var DefaultInput = Input{Target: 5000, AsyncShare: 0.2, BatchSize: 1, ImageShare: 0.02, PerCore: DefaultPerCore,
	CoresPerInstance: 2, Utilisation: 0.6, MinInstances: 2, PostgresCeiling: DefaultPostgresCeiling}

// Tier is one line of the model's answer.
type Tier struct {
	Name      string  `json:"name"`
	Load      float64 `json:"load"`      // work units a second at the target
	Unit      string  `json:"unit"`      // what a work unit is
	PerCore   float64 `json:"perCore"`   // units a core sustains
	Cores     float64 `json:"cores"`     // cores busy at the target
	Instances int     `json:"instances"` // instances to run
	Source    string  `json:"source"`
}

// Work is one kind of core's work at the target: core's cores are the sum
// of these (on PostgreSQL, with the store's own line, StorePlan.Work).
type Work struct {
	Name    string  `json:"name"`
	Load    float64 `json:"load"`    // verifications a second
	PerCore float64 `json:"perCore"` // of them one core sustains
	Cores   float64 `json:"cores"`
	Source  string  `json:"source"`
	// Picture marks the work pictures cost.
	Picture bool `json:"picture,omitempty"`
}

// Output is the model's answer.
type Output struct {
	Input Input  `json:"input"`
	Tiers []Tier `json:"tiers"`
	// Core is what core's cores are spent on, on bbolt (files written
	// before the model planned pictures apart lack it).
	Core []Work `json:"core,omitempty"`
	// Store is the store Tiers plan core on: Bbolt while one instance of
	// it suffices, else Postgres. Stores is each store's plan, offered or
	// not (files written before the model planned stores lack both: core
	// was one bbolt instance, always).
	Store  string      `json:"store,omitempty"`
	Stores []StorePlan `json:"stores,omitempty"`
}

// The stores core keeps its state in.
const (
	Bbolt    = "bbolt"
	Postgres = "postgres"
)

// StorePlan is core on one store at the target.
type StorePlan struct {
	Store string `json:"store"`
	// Offered says whether the store serves the target; Why, when not,
	// says why.
	Offered bool   `json:"offered"`
	Why     string `json:"why,omitempty"`
	// Cores are core's cores busy at the target, Instances the core
	// processes to run (bbolt: one, its file's only writer).
	Cores     float64 `json:"cores"`
	Instances int     `json:"instances"`
	// Work is the store's own line of core's work beyond Output.Core's
	// (PostgreSQL: what a verification costs core on it beyond bbolt).
	Work *Work `json:"work,omitempty"`
	// PostgreSQL only: its primary's and standby's cores busy at the
	// target, the cores of each server at the utilisation target (the
	// standby as large as the primary: it takes its place), and the
	// commit ceiling.
	PrimaryCores float64 `json:"primaryCores,omitempty"`
	StandbyCores float64 `json:"standbyCores,omitempty"`
	ServerCores  int     `json:"serverCores,omitempty"`
	Ceiling      float64 `json:"ceiling,omitempty"`
}

func (in Input) check() error {
	var errs []error
	if in.Target <= 0 {
		errs = append(errs, errors.New("target must be positive"))
	}
	if in.AsyncShare < 0 || in.AsyncShare > 1 {
		errs = append(errs, errors.New("async share must be between 0 and 1"))
	}
	if in.BatchSize < 1 {
		errs = append(errs, errors.New("batch size must be at least 1"))
	}
	if !(in.ImageShare >= 0 && in.ImageShare <= 1) {
		errs = append(errs, errors.New("image share must be between 0 and 1"))
	}
	p := in.PerCore
	for name, v := range map[string]float64{"edge": p.Edge, "core sync": p.CoreSync, "core image": p.CoreImage, "core async": p.CoreAsync, "dispatcher": p.Dispatcher, "usage": p.Usage,
		"core on PostgreSQL": p.CorePostgres, "PostgreSQL primary": p.Postgres, "PostgreSQL standby": p.PostgresStandby} {
		if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Errorf("per-core throughput of %s must be positive, is %v", name, v))
		}
	}
	if in.CoresPerInstance <= 0 {
		errs = append(errs, errors.New("cores per instance must be positive"))
	}
	if in.Utilisation <= 0 || in.Utilisation > 1 {
		errs = append(errs, errors.New("utilisation must be in (0, 1]"))
	}
	if in.MinInstances < 1 {
		errs = append(errs, errors.New("minimum instances must be at least 1"))
	}
	if !(in.PostgresCeiling > 0) || math.IsInf(in.PostgresCeiling, 0) {
		errs = append(errs, fmt.Errorf("PostgreSQL's commit ceiling must be positive, is %v", in.PostgresCeiling))
	}
	return errors.Join(errs...)
}

// Plan computes the instances of each tier for in.
func Plan(in Input) (Output, error) {
	if err := in.check(); err != nil {
		return Output{}, fmt.Errorf("capacity: %w", err)
	}
	src := func(s string) string {
		if s == "" {
			return "default"
		}
		return s
	}
	async := in.Target * in.AsyncShare
	sync := in.Target - async
	submits := async / in.BatchSize
	out := Output{Input: in}
	instances := func(cores float64) int {
		return max(int(math.Ceil(cores/(in.CoresPerInstance*in.Utilisation)-1e-9)), in.MinInstances)
	}
	add := func(name, unit string, load, perCore float64, n int, source string) {
		cores := load / perCore
		if n == 0 {
			n = instances(cores)
		}
		out.Tiers = append(out.Tiers, Tier{Name: name, Load: load, Unit: unit, PerCore: perCore, Cores: cores,
			Instances: n, Source: src(source)})
	}
	add("edge", "requests/s", sync+submits, in.PerCore.Edge, 0, in.Source.Edge)
	// Core's kinds of work share its cores: each kind's load over what a
	// core sustains of it, summed into one line, with each kind in
	// out.Core.
	out.Core = coreWork(in, sync, async, src)
	var coreCores float64
	for _, w := range out.Core {
		coreCores += w.Cores
	}
	out.Stores = []StorePlan{planBbolt(in, coreCores), planPostgres(in, coreCores, src)}
	pick := out.Stores[0]
	if !pick.Offered {
		pick = out.Stores[1]
	}
	out.Store = pick.Store
	sources := [][2]string{{"payload", src(in.Source.CoreSync)}}
	if in.ImageShare > 0 {
		sources = append(sources, [2]string{"pictures", src(in.Source.CoreImage)})
	}
	sources = append(sources, [2]string{"async", src(in.Source.CoreAsync)})
	if pick.Store == Postgres {
		sources = append(sources, [2]string{"on PostgreSQL", src(in.Source.CorePostgres)})
	}
	add("core", "verifications/s", in.Target, in.Target/pick.Cores, pick.Instances, joinSources(sources))
	if pick.Store == Postgres {
		// The primary and its synchronous standby, each a server of
		// ServerCores.
		add("postgres", "verifications/s", in.Target, in.Target/(pick.PrimaryCores+pick.StandbyCores), 2,
			joinSources([][2]string{{"primary", src(in.Source.Postgres)}, {"standby", src(in.Source.PostgresStandby)}}))
	}
	add("dispatcher", "callbacks/s", async, in.PerCore.Dispatcher, 0, in.Source.Dispatcher)
	add("usage", "usage events/s", in.Target, in.PerCore.Usage, 0, in.Source.Usage)
	return out, nil
}

// planBbolt plans core on bbolt, whose file has one writer: one instance,
// offered while one instance at the utilisation target holds core's
// cores.
func planBbolt(in Input, cores float64) StorePlan {
	p := StorePlan{Store: Bbolt, Cores: cores, Instances: 1, Offered: cores <= in.CoresPerInstance*in.Utilisation+1e-9}
	if !p.Offered {
		p.Why = fmt.Sprintf("needs %.2f cores, more than one instance of %.0f cores at %.0f %% CPU (%.2f): bbolt's file has one writer, one core",
			cores, in.CoresPerInstance, in.Utilisation*100, in.CoresPerInstance*in.Utilisation)
	}
	return p
}

// planPostgres plans core on PostgreSQL: bbolt's work plus, for every
// verification, what the PostgreSQL store costs core beyond bbolt
// (1/CorePostgres − 1/CoreSync CPU-seconds, less than nothing when it
// costs less), spread over as many instances as that takes; and a primary
// and a synchronous standby sized from their own CPU per verification.
// Offered up to the commit ceiling, which more cores do not raise.
func planPostgres(in Input, bboltCores float64, src func(string) string) StorePlan {
	p := in.PerCore
	extra := 1/p.CorePostgres - 1/p.CoreSync
	w := &Work{Name: "store on PostgreSQL", Load: in.Target, Cores: in.Target * extra,
		Source: less(src(in.Source.CorePostgres), src(in.Source.CoreSync))}
	if extra != 0 {
		w.PerCore = 1 / extra // negative: a verification costs core less on PostgreSQL
	}
	cores := max(bboltCores+w.Cores, 0)
	primary, standby := in.Target/p.Postgres, in.Target/p.PostgresStandby
	plan := StorePlan{Store: Postgres, Cores: cores, Work: w, Offered: in.Target <= in.PostgresCeiling,
		Instances:    max(int(math.Ceil(cores/(in.CoresPerInstance*in.Utilisation)-1e-9)), in.MinInstances),
		PrimaryCores: primary, StandbyCores: standby, Ceiling: in.PostgresCeiling,
		ServerCores: int(math.Ceil(max(primary, standby)/in.Utilisation - 1e-9))}
	if !plan.Offered {
		plan.Why = fmt.Sprintf("the target is above PostgreSQL's commit ceiling of %.0f verifications/s (%s): more cores do not raise it; services must be split between databases, which the platform does not do yet",
			in.PostgresCeiling, src(in.Source.PostgresCeiling))
	}
	return plan
}

// coreWork splits core's load at the target into its kinds of work. A
// sync verification by payload costs 1/CoreSync CPU-seconds, by picture
// 1/CoreImage; an async job 1/CoreAsync, and an async picture its scan on
// top: what a sync picture costs beyond a sync payload. So with no async
// share, core's cores are
//
//	Target × (ImageShare/CoreImage + (1−ImageShare)/CoreSync).
func coreWork(in Input, sync, async float64, src func(string) string) []Work {
	p := in.PerCore
	work := func(name string, load, perCore float64, source string, picture bool) Work {
		return Work{Name: name, Load: load, PerCore: perCore, Cores: load / perCore, Source: source, Picture: picture}
	}
	out := []Work{
		work("payload, sync", sync*(1-in.ImageShare), p.CoreSync, src(in.Source.CoreSync), false),
		work("picture, sync", sync*in.ImageShare, p.CoreImage, src(in.Source.CoreImage), true),
		work("job, async", async, p.CoreAsync, src(in.Source.CoreAsync), false),
	}
	// A scan's CPU-seconds; none when the numbers given make a picture no
	// dearer than a payload.
	if scan := 1/p.CoreImage - 1/p.CoreSync; scan > 0 {
		out = append(out, work("picture's scan, async", async*in.ImageShare, 1/scan,
			less(src(in.Source.CoreImage), src(in.Source.CoreSync)), true))
	}
	return out
}

// less names the source of a difference of two numbers: "measured:
// bank-image less bank-v2 peak", or the one source both have.
func less(a, b string) string {
	if a == b {
		return a
	}
	const m = "measured: "
	if strings.HasPrefix(a, m) {
		b = strings.TrimPrefix(b, m)
	}
	return a + " less " + b
}

// joinSources names the source of each of core's numbers, or the one
// source they share: ("payload", "measured: bank-v2") pairs.
func joinSources(ss [][2]string) string {
	same := true
	for _, s := range ss {
		same = same && s[1] == ss[0][1]
	}
	if same {
		return ss[0][1]
	}
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = s[0] + " " + s[1]
	}
	return strings.Join(parts, "; ")
}

// PictureShare returns the share of core's CPU at the target that
// pictures take, and how many payload verifications a sync picture costs
// as much as (0 when o predates pictures planned apart).
func (o Output) PictureShare() (cpu, payloads float64) {
	var all, pics float64
	for _, w := range o.Core {
		all += w.Cores
		if w.Picture {
			pics += w.Cores
		}
	}
	if all <= 0 || o.Input.PerCore.CoreImage <= 0 {
		return 0, 0
	}
	return pics / all, o.Input.PerCore.CoreSync / o.Input.PerCore.CoreImage
}

// plan returns the plan of store, or nil.
func (o Output) plan(store string) *StorePlan {
	for i := range o.Stores {
		if o.Stores[i].Store == store {
			return &o.Stores[i]
		}
	}
	return nil
}

// Describe puts the plan in a line a planner reads.
func (p StorePlan) Describe(in Input) string {
	offered := "offered"
	if !p.Offered {
		offered = "NOT offered: " + p.Why
	}
	switch p.Store {
	case Bbolt:
		return fmt.Sprintf("bbolt     core %.2f cores busy in one instance (one file, one writer); %s", p.Cores, offered)
	case Postgres:
		return fmt.Sprintf("postgres  core %.2f cores busy in %d instances of %.0f cores; PostgreSQL primary %.2f cores busy, standby %.2f: two servers of %d cores at %.0f %% CPU (the standby as large as the primary, which it replaces); commit ceiling %.0f verifications/s, the target %.0f %% of it; %s",
			p.Cores, p.Instances, in.CoresPerInstance, p.PrimaryCores, p.StandbyCores, p.ServerCores, in.Utilisation*100, p.Ceiling, 100*in.Target/p.Ceiling, offered)
	}
	return p.Store
}

// Print writes the model's answer and every assumption it rests on.
func (o Output) Print(w io.Writer) {
	in := o.Input
	fmt.Fprintf(w, "Capacity for %.0f verifications/s, %.0f %% async (mean batch %.0f), %s %% by picture:\n\n", in.Target, in.AsyncShare*100, in.BatchSize, percent(in.ImageShare))
	fmt.Fprintf(w, "  %-11s %12s %-17s %10s %8s %10s  %s\n", "tier", "load", "", "per core", "cores", "instances", "per-core source")
	for _, t := range o.Tiers {
		fmt.Fprintf(w, "  %-11s %12.0f %-17s %10.0f %8.2f %10d  %s\n", t.Name, t.Load, t.Unit, t.PerCore, t.Cores, t.Instances, t.Source)
	}
	if len(o.Core) > 0 {
		fmt.Fprintf(w, "\nCore's work (its cores are the sum):\n\n")
		fmt.Fprintf(w, "  %-22s %16s %10s %8s  %s\n", "work", "verifications/s", "per core", "cores", "per-core source")
		work := o.Core
		if sp := o.plan(o.Store); sp != nil && sp.Work != nil {
			work = append(work[:len(work):len(work)], *sp.Work)
		}
		for _, c := range work {
			fmt.Fprintf(w, "  %-22s %16.0f %10.0f %8.2f  %s\n", c.Name, c.Load, c.PerCore, c.Cores, c.Source)
		}
		if cpu, n := o.PictureShare(); n > 0 {
			fmt.Fprintf(w, "  pictures: %s %% of the verifications, %.0f %% of core's CPU on bbolt; a picture costs core as much as %.0f payloads\n",
				percent(in.ImageShare), 100*cpu, n)
		}
	}
	if len(o.Stores) > 0 {
		fmt.Fprintf(w, "\nCore's store (bbolt while one core instance suffices, else PostgreSQL with N cores): %s\n\n", o.Store)
		for _, sp := range o.Stores {
			fmt.Fprintf(w, "  %s\n", sp.Describe(in))
		}
	}
	fmt.Fprintf(w, "\nAssumptions:\n")
	for _, a := range o.Assumptions() {
		fmt.Fprintf(w, "  - %s\n", a)
	}
}

// BytesPerSlip is what core.db grows by for each distinct slip verified:
// its record (the answer, about 700 bytes of JSON, kept for duplicate
// checks, by default for good) in a B+tree filled in random key order.
// Measured: 100,000 slips through store.Consume, store.Size() after.
const BytesPerSlip = 2100

// Assumptions lists what the model takes for granted, in words.
func (o Output) Assumptions() []string {
	in := o.Input
	var core Tier
	for _, t := range o.Tiers {
		if t.Name == "core" {
			core = t
		}
	}
	return []string{
		fmt.Sprintf("instances of %.0f cores, planned at %.0f %% CPU at the target (headroom for bursts, GC and a lost instance); at least %d of each tier but core on bbolt, which is one",
			in.CoresPerInstance, in.Utilisation*100, in.MinInstances),
		o.storeAssumption(core),
		fmt.Sprintf("core's disk grows by about %d bytes for each distinct slip verified (kept for duplicate checks for SLIP_SLIP_RETENTION, by default for good): %.0f GB a day at the target if every verification is a new slip, plus the async jobs while retained",
			BytesPerSlip, in.Target*86400*BytesPerSlip/1e9),
		"each verification is one edge request (sync) or 1/batch of a submit (async), one unit of core work, one usage event; each async verification one callback, without retries",
		fmt.Sprintf("%s %% of verifications, sync and async alike, send a picture: core scans it, at what a sync picture costs (%.0f a core sustains a second) against a sync payload (%.0f); an async picture costs an async job plus that difference; the other tiers' per-core numbers are payloads' (a picture's larger body at the edge is not planned apart)",
			percent(in.ImageShare), in.PerCore.CoreImage, in.PerCore.CoreSync),
		"per-core numbers are requests handled per CPU-second of the tier's process, measured under the bench's load on a shared machine: compare ratios, re-measure on the production hardware",
		"the sandbox bank answers at once; a real bank gateway's latency needs more concurrency per core, not more CPU, and is not modelled",
		strings.TrimSpace(fmt.Sprintf("dispatcher and usage per-core numbers are %s", sourceWord(in.Source.Dispatcher, in.Source.Usage))),
	}
}

// storeAssumption says how core's store was chosen and what it rests on.
func (o Output) storeAssumption(core Tier) string {
	in := o.Input
	if len(o.Stores) == 0 { // a file from before stores were planned
		return fmt.Sprintf("core is one instance, always (one bbolt file), of at least %.0f cores at %.0f %% CPU",
			math.Ceil(core.Cores/in.Utilisation-1e-9), in.Utilisation*100)
	}
	return fmt.Sprintf("core on bbolt is one instance (its file has one writer), offered while one instance of %.0f cores at %.0f %% CPU holds it; "+
		"on PostgreSQL any number of cores share one primary, and core's throughput grows linearly with its instances up to PostgreSQL's commit ceiling (%.0f verifications/s, %s), which more cores do not raise; "+
		"on PostgreSQL a verification costs core %.0f µs (%s) against %.0f µs on bbolt, whatever its kind (async jobs and pictures alike), and PostgreSQL's primary %.0f µs and standby %.0f µs",
		in.CoresPerInstance, in.Utilisation*100, in.PostgresCeiling, orDefault(in.Source.PostgresCeiling),
		1e6/in.PerCore.CorePostgres, orDefault(in.Source.CorePostgres), 1e6/in.PerCore.CoreSync,
		1e6/in.PerCore.Postgres, 1e6/in.PerCore.PostgresStandby)
}

// percent formats a share as a percentage without trailing zeros: 0.02
// as "2", 0.005 as "0.5".
func percent(share float64) string {
	return strconv.FormatFloat(math.Round(share*1e4)/100, 'f', -1, 64)
}

func sourceWord(a, b string) string {
	if a == "" && b == "" {
		return "assumed defaults until those tiers have bench numbers of their own"
	}
	return fmt.Sprintf("%s / %s", orDefault(a), orDefault(b))
}

func orDefault(s string) string {
	if s == "" {
		return "default"
	}
	return s
}
