package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/slipverify/slipverify/bench/hist"
	"github.com/slipverify/slipverify/bench/load"
)

// Kind is one kind of verification within a scenario that mixes kinds
// (mixed: pictures and payloads), reported apart because core's cost of
// one differs by far: a picture costs a scan, tens of times a payload's
// whole verification.
type Kind struct {
	Name string `json:"name"` // "image" or "payload"
	// OKByPart counts the successful requests of each scenario of the mix
	// that is of this kind: the weights of its core CPU (DeriveKindCPU).
	OKByPart map[string]uint64 `json:"okByPart"`
	Requests uint64            `json:"requests"`
	OK       uint64            `json:"ok"`
	Failed   uint64            `json:"failed"`
	// Share is the kind's share of the scenario's requests.
	Share float64 `json:"share"`
	// Verifications is its successful verifications a second, over the
	// scenario's elapsed time.
	Verifications float64 `json:"verifications"`
	// Latency and OKLatency are measured as the scenario's are (from each
	// request's due time), over this kind's requests alone.
	Latency   Latency `json:"latency"`
	OKLatency Latency `json:"okLatency"`
	// CoreCPU is core's CPU per successful verification of this kind, in
	// microseconds (0: not known), and CoreCPUSource how it was found. A
	// mixed run's processes do both kinds at once, so the run cannot
	// measure it: DeriveKindCPU derives it from the runs of the mix's
	// scenarios on their own.
	CoreCPU       float64 `json:"coreCpuMicros,omitempty"`
	CoreCPUSource string  `json:"coreCpuSource,omitempty"`
}

// SetKinds records the kinds of the scenario's requests from the parts
// its run recorded (load.Result.Parts), each part (a scenario of the mix)
// of the kind kindOf gives.
func (s *Scenario) SetKinds(parts map[string]*load.Part, kindOf func(part string) string) {
	type acc struct {
		k       *Kind
		lat, ok hist.Histogram
	}
	by := map[string]*acc{}
	for _, name := range sortedKeys(parts) {
		p := parts[name]
		kind := kindOf(name)
		a := by[kind]
		if a == nil {
			a = &acc{k: &Kind{Name: kind, OKByPart: map[string]uint64{}}}
			by[kind] = a
		}
		ok, fail := p.OK.Load(), p.Fail.Load()
		a.k.OKByPart[name] += ok
		a.k.OK += ok
		a.k.Failed += fail
		a.k.Requests += ok + fail
		a.lat.Merge(&p.Latency)
		a.ok.Merge(&p.OKLatency)
	}
	s.Kinds = nil
	for _, kind := range sortedKeys(by) {
		a := by[kind]
		a.k.Latency, a.k.OKLatency = Digest(&a.lat), Digest(&a.ok)
		if s.Requests > 0 {
			a.k.Share = float64(a.k.Requests) / float64(s.Requests)
		}
		if s.Elapsed > 0 {
			a.k.Verifications = float64(a.k.OK) / s.Elapsed
		}
		s.Kinds = append(s.Kinds, *a.k)
	}
}

// DeriveKindCPU sets, for every scenario with kinds, core's CPU per
// verification of each kind, derived from the runs in r of the mix's
// scenarios on their own: the mean of their core CPU per verification
// (1/PerCore["core"]), weighted by the successful requests each scenario
// had in the mix. A scenario of the mix that r did not run on its own is
// left out of the mean, and the source says so. Where every kind has a
// cost, the scenario's CoreCPUExplained compares what the costs add up to
// with the core CPU the mixed run measured.
func (r *Report) DeriveKindCPU() {
	for _, s := range r.Scenarios {
		if len(s.Kinds) == 0 {
			continue
		}
		s.CoreCPUExplained = 0
		var predicted float64 // core CPU-seconds
		all := true
		for i := range s.Kinds {
			k := &s.Kinds[i]
			var sum, weight float64
			var used, missing []string
			for _, part := range sortedKeys(k.OKByPart) {
				n := k.OKByPart[part]
				pure := r.Find(part)
				if pure == nil || pure == s || pure.Pending != "" || pure.PerCore["core"] <= 0 {
					missing = append(missing, part)
					continue
				}
				if n == 0 {
					continue
				}
				sum += float64(n) * 1e6 / pure.PerCore["core"]
				weight += float64(n)
				used = append(used, part)
			}
			k.CoreCPU, k.CoreCPUSource = 0, ""
			switch {
			case weight > 0:
				k.CoreCPU = sum / weight
				k.CoreCPUSource = "derived: " + strings.Join(used, ", ") + " on their own in this run"
				if len(used) == 1 {
					k.CoreCPUSource = "derived: " + used[0] + " on its own in this run"
				}
				if len(used) > 1 {
					k.CoreCPUSource += ", weighted by the mix's successful requests"
				}
				if len(missing) > 0 {
					k.CoreCPUSource += "; left out, not run on their own: " + strings.Join(missing, ", ")
				}
				predicted += float64(k.OK) * k.CoreCPU / 1e6
			case len(missing) == 1:
				k.CoreCPUSource = "not derived: " + missing[0] + " not run on its own in this run"
				all = false
			case len(missing) > 1:
				k.CoreCPUSource = "not derived: " + strings.Join(missing, ", ") + " not run on their own in this run"
				all = false
			default:
				all = false
			}
		}
		if cpu := s.CPU["core"]; all && cpu > 0 {
			s.CoreCPUExplained = predicted / cpu
		}
	}
}

// kindRows returns the scenario's kinds as table cells: scenario, kind,
// requests, share, verif/s, p50 … max, ok p50, ok p99, errors, core CPU.
func kindRows(s *Scenario) [][]string {
	var out [][]string
	for _, k := range s.Kinds {
		l, ok := k.Latency, k.OKLatency
		errs := "0"
		if k.Requests == 0 {
			errs = "-"
		} else if k.Failed > 0 {
			errs = fmt.Sprintf("%.1f%%", 100*float64(k.Failed)/float64(k.Requests))
		}
		cpu := "-"
		if k.CoreCPU > 0 {
			cpu = micros(k.CoreCPU)
		}
		out = append(out, []string{s.Name, k.Name, fmt.Sprint(k.Requests), fmt.Sprintf("%.1f%%", 100*k.Share), fmt.Sprintf("%.0f", k.Verifications),
			num(l.P50), num(l.P90), num(l.P99), num(l.P999), num(l.Max), num(ok.P50), num(ok.P99), errs, cpu})
	}
	return out
}

// kindHeader names kindRows' columns.
var kindHeader = []string{"scenario", "kind", "requests", "share", "verif/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms", "ok p50 ms", "ok p99 ms", "errors", "core CPU µs/verif"}

// micros formats microseconds with 3 significant digits, thousands
// separated: "287", "19,600".
func micros(v float64) string {
	if v < 100 {
		return num(v)
	}
	p := 1.0
	for v/p >= 1000 {
		p *= 10
	}
	s := strconv.FormatInt(int64(math.Round(v/p)*p), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// kindNotes returns where the core CPU of each of s's kinds came from and
// how much of the run's core CPU the costs account for, one line each.
func kindNotes(s *Scenario) []string {
	var out []string
	for _, k := range s.Kinds {
		src := k.CoreCPUSource
		if src == "" {
			src = "not derived: needs the mix's scenarios run on their own in the same report (loadgen suite)"
		}
		out = append(out, fmt.Sprintf("%s: core CPU per verification %s", k.Name, src))
	}
	if s.CoreCPUExplained > 0 {
		out = append(out, fmt.Sprintf("the kinds' derived costs account for %.0f %% of the %.1f s of core CPU the run measured", 100*s.CoreCPUExplained, s.CPU["core"]))
	}
	return out
}
