// Package capacity is the bench's capacity model: from the throughput one
// CPU core of each tier sustains, the instances of each tier a target load
// needs. It is arithmetic on stated assumptions, printed with them, so a
// planner can see and change every number it rests on.
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
}

// DefaultPerCore are the numbers used where nothing was measured: the edge
// and core from this repository's bench on a 2-core shared machine (core's
// pictures: bank-image's 51 verifications per CPU-second in the suite run
// bench/README.md shows); the dispatcher and usage tiers are assumptions
// (a callback is one HTTPS POST; a usage event is one row of a batched
// ClickHouse insert) until their own bench numbers exist.
var DefaultPerCore = PerCore{Edge: 20000, CoreSync: 3000, CoreImage: 51, CoreAsync: 1500, Dispatcher: 2000, Usage: 20000}

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
}

// DefaultInput is the example target: 5,000 verifications a second, 20 %
// async, 2 % pictures (the share in the bench's production mix,
// bench/profiles/production.json).
var DefaultInput = Input{Target: 5000, AsyncShare: 0.2, BatchSize: 1, ImageShare: 0.02, PerCore: DefaultPerCore,
	CoresPerInstance: 2, Utilisation: 0.6, MinInstances: 2}

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

// Work is one kind of core's work at the target: core is one instance,
// so its cores are the sum of these.
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
	// Core is what core's cores are spent on (files written before the
	// model planned pictures apart lack it).
	Core []Work `json:"core,omitempty"`
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
	for name, v := range map[string]float64{"edge": p.Edge, "core sync": p.CoreSync, "core image": p.CoreImage, "core async": p.CoreAsync, "dispatcher": p.Dispatcher, "usage": p.Usage} {
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
	add := func(name, unit string, load, perCore float64, source string) {
		cores := load / perCore
		n := int(math.Ceil(cores/(in.CoresPerInstance*in.Utilisation) - 1e-9))
		if name == "core" {
			n = 1 // one bbolt file: one node, sized up (see Assumptions)
		} else {
			n = max(n, in.MinInstances)
		}
		out.Tiers = append(out.Tiers, Tier{Name: name, Load: load, Unit: unit, PerCore: perCore, Cores: cores,
			Instances: n, Source: src(source)})
	}
	add("edge", "requests/s", sync+submits, in.PerCore.Edge, in.Source.Edge)
	// Core's kinds of work share its cores: each kind's load over what a
	// core sustains of it, summed into one line, with each kind in
	// out.Core.
	out.Core = coreWork(in, sync, async, src)
	var coreCores float64
	for _, w := range out.Core {
		coreCores += w.Cores
	}
	sources := [][2]string{{"payload", src(in.Source.CoreSync)}}
	if in.ImageShare > 0 {
		sources = append(sources, [2]string{"pictures", src(in.Source.CoreImage)})
	}
	sources = append(sources, [2]string{"async", src(in.Source.CoreAsync)})
	add("core", "verifications/s", in.Target, in.Target/coreCores, joinSources(sources))
	add("dispatcher", "callbacks/s", async, in.PerCore.Dispatcher, in.Source.Dispatcher)
	add("usage", "usage events/s", in.Target, in.PerCore.Usage, in.Source.Usage)
	return out, nil
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

// Print writes the model's answer and every assumption it rests on.
func (o Output) Print(w io.Writer) {
	in := o.Input
	fmt.Fprintf(w, "Capacity for %.0f verifications/s, %.0f %% async (mean batch %.0f), %s %% by picture:\n\n", in.Target, in.AsyncShare*100, in.BatchSize, percent(in.ImageShare))
	fmt.Fprintf(w, "  %-11s %12s %-17s %10s %8s %10s  %s\n", "tier", "load", "", "per core", "cores", "instances", "per-core source")
	for _, t := range o.Tiers {
		fmt.Fprintf(w, "  %-11s %12.0f %-17s %10.0f %8.2f %10d  %s\n", t.Name, t.Load, t.Unit, t.PerCore, t.Cores, t.Instances, t.Source)
	}
	if len(o.Core) > 0 {
		fmt.Fprintf(w, "\nCore's work (core is one instance: its cores are the sum):\n\n")
		fmt.Fprintf(w, "  %-22s %16s %10s %8s  %s\n", "work", "verifications/s", "per core", "cores", "per-core source")
		for _, c := range o.Core {
			fmt.Fprintf(w, "  %-22s %16.0f %10.0f %8.2f  %s\n", c.Name, c.Load, c.PerCore, c.Cores, c.Source)
		}
		if cpu, n := o.PictureShare(); n > 0 {
			fmt.Fprintf(w, "  pictures: %s %% of the verifications, %.0f %% of core's CPU; a picture costs core as much as %.0f payloads\n",
				percent(in.ImageShare), 100*cpu, n)
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
		fmt.Sprintf("instances of %.0f cores, planned at %.0f %% CPU at the target (headroom for bursts, GC and a lost instance); at least %d of each tier but core",
			in.CoresPerInstance, in.Utilisation*100, in.MinInstances),
		fmt.Sprintf("core is one instance, always (one bbolt file), of at least %.0f cores at %.0f %% CPU; throughput grows linearly with cores and instances, for core only with services partitioned between core nodes, which the platform does not do yet",
			math.Ceil(core.Cores/in.Utilisation-1e-9), in.Utilisation*100),
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
