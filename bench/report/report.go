// Package report turns load runs into what a capacity planner reads: a
// terminal table, a JSON file for comparison between runs, and a
// self-contained HTML page with inline SVG charts (latency over time,
// latency against throughput) that opens without a network.
package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slipverify/slipverify/bench/capacity"
	"github.com/slipverify/slipverify/bench/hist"
	"github.com/slipverify/slipverify/bench/load"
	"github.com/slipverify/slipverify/bench/webhook"
)

// Version is the JSON format's version this program writes. Read takes
// versions 1 and 2; Compare says which of its rows measure something else
// in one than in the other (formatChanges).
//
// Version 2: an open-loop step's throughput counts the requests that
// completed within the step; async verif/s counts successful callbacks and
// errors % counts jobs (failed, not_found and missing callbacks); answers
// that say isDuplicate are code "200 duplicate"; bank-image (and mixed)
// upload a new slip's picture made ahead of the request, outside its
// latency; lag leaves out the wait for a free in-flight slot (slotWait,
// capped).
const Version = 2

// oldestVersion is the oldest format Read takes.
const oldestVersion = 1

// Report is one bench run: its scenarios and what they imply.
type Report struct {
	Version   int              `json:"version"`
	Created   time.Time        `json:"created"`
	Command   string           `json:"command"`
	Host      Host             `json:"host"`
	Target    string           `json:"target"` // the edge's address
	Scenarios []*Scenario      `json:"scenarios"`
	Capacity  *capacity.Output `json:"capacity,omitempty"`
	Notes     []string         `json:"notes,omitempty"`
	// Settling says, when the run let the stack settle after each
	// scenario (Scenario.Settle), what it waited for: "core outbox 0, …".
	Settling string `json:"settling,omitempty"`
	// Store is where the stack's core kept its state ("bbolt",
	// "postgres"; empty in files from before the suite ran on
	// PostgreSQL: bbolt) and Cores how many core processes served.
	Store string `json:"store,omitempty"`
	Cores int    `json:"cores,omitempty"`
}

// StoreName is where r's core kept its state: "bbolt" for files from
// before the suite ran on PostgreSQL.
func (r *Report) StoreName() string {
	if r.Store == "" {
		return "bbolt"
	}
	return r.Store
}

// Host is the machine the run was made on.
type Host struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel,omitempty"`
	GoVersion string `json:"goVersion"`
}

// Latency is a histogram's digest in milliseconds.
type Latency struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Digest returns h's digest in milliseconds.
func Digest(h *hist.Histogram) Latency {
	s := h.Summarize()
	return Latency{Count: s.Count, Mean: ms(s.Mean), P50: ms(s.P50), P90: ms(s.P90), P99: ms(s.P99), P999: ms(s.P999), Max: ms(s.Max)}
}

// Point is one second of a run, by completion time.
type Point struct {
	T    int     `json:"t"`
	OK   uint64  `json:"ok"`
	Fail uint64  `json:"fail"`
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	// LimitMin and LimitMax are the X-RateLimit-Limit values seen (0: none).
	LimitMin int32 `json:"limitMin,omitempty"`
	LimitMax int32 `json:"limitMax,omitempty"`
}

// Step is one load level: offered load against what came out.
type Step struct {
	Offered float64 `json:"offered"` // requests/s (open loop) or workers (closed loop)
	// Throughput and OKRate are what the server achieved during the step:
	// requests (all, and successful ones) that completed within the step's
	// own time span, whichever step they were due in, a second. In an open
	// loop that falls behind they stay below Offered.
	Throughput float64 `json:"throughput"`
	OKRate     float64 `json:"okRate"`
	// Latency is of the requests due in the step (sent in it, closed
	// loop), whenever they completed.
	Latency Latency `json:"latency"`
}

// Callbacks is what an async scenario's webhook receiver saw.
type Callbacks struct {
	Latency Latency       `json:"latency"` // submit due → first callback, whatever its status
	Stats   webhook.Stats `json:"stats"`   // Stats.Status: first callbacks by status
	Missing uint64        `json:"missing"` // expected and never delivered in the wait
	// Seconds is from the run's start to the last successful callback:
	// async verifications are done when their callback arrives, so the
	// scenario's verif/s is Stats.Succeeded over this span (or over the
	// submits' span, when that is longer).
	Seconds float64 `json:"seconds"`
}

// Scenario is one scenario's run.
type Scenario struct {
	Name  string `json:"name"`
	About string `json:"about"`
	// Pending, when set, says why the scenario was not run.
	Pending    string  `json:"pending,omitempty"`
	Mode       string  `json:"mode,omitempty"` // open or closed
	Load       string  `json:"load,omitempty"` // the plan in words
	Elapsed    float64 `json:"elapsedSeconds,omitempty"`
	Requests   uint64  `json:"requests"`
	OK         uint64  `json:"ok"`
	Failed     uint64  `json:"failed"`
	Unsent     uint64  `json:"unsent,omitempty"`
	Throughput float64 `json:"throughput"` // completed requests/s
	OKRate     float64 `json:"okRate"`     // successful requests/s
	// Units is the verifications one request carries (a batch: its slips).
	Units int `json:"units,omitempty"`
	// Duplicates counts the successful answers that said isDuplicate
	// (codes "200 duplicate"): the repeats the stack saw, measured, which
	// is what the duplicates scenario's share is, and what scenarios of
	// new slips must not have.
	Duplicates uint64 `json:"duplicates,omitempty"`
	// Verifications is successful verifications/s (a batch request counts
	// its slips). For async scenarios (SetCallbacks) it counts successful
	// callbacks, not accepted submits: a stack whose job workers fall
	// behind accepts at the offered rate but verifies at its own.
	Verifications float64 `json:"verifications"`
	// Latency is of every completed request, refusals included; OKLatency
	// of the successful ones alone (under overload most answers are fast
	// 429s, which pull the overall percentiles down).
	Latency   Latency `json:"latency"`
	OKLatency Latency `json:"okLatency"`
	Service   Latency `json:"service"` // send → answer
	// Lag is the generator's own lateness in sending (timer wake-ups, its
	// own work), without SlotWait; in files of version 1 it held both.
	Lag Latency `json:"lag"`
	// SlotWait is the time open-loop requests waited after they were due
	// for a free in-flight slot, all MaxInFlight being taken by requests
	// the stack had not answered: back-pressure from the stack, part of
	// Latency. Capped counts the requests that waited so.
	SlotWait    Latency           `json:"slotWait"`
	Capped      uint64            `json:"capped,omitempty"`
	MaxInFlight int               `json:"maxInFlight,omitempty"`
	Codes       map[string]uint64 `json:"codes"`
	// Failures counts the failed requests by code, whatever the code says
	// ("202 unreadable body" is a failure of the generator's check of a
	// 202 answer). Files written before it existed lack it; ErrorCounts
	// then takes the codes not starting with 2.
	Failures  map[string]uint64 `json:"failures"`
	Series    []Point           `json:"series"`
	Steps     []Step            `json:"steps"`
	Callbacks *Callbacks        `json:"callbacks,omitempty"`
	// Settle is how the stack settled after the scenario, before the next
	// one began (nil: the run did not wait for it).
	Settle *Settle `json:"settle,omitempty"`
	// CPU is the CPU seconds each process used during the scenario
	// (the stack's tiers, and "loadgen" for the generator itself).
	CPU map[string]float64 `json:"cpuSeconds,omitempty"`
	// PerCore is successful verifications per CPU-second of each tier: the
	// throughput one fully busy core of it sustains at this mix.
	PerCore map[string]float64 `json:"perCore,omitempty"`
	// Commits is what core's store committed during the scenario, every
	// core summed (nil: not read).
	Commits *Commits `json:"commits,omitempty"`
	// Kinds are the scenario's kinds of verification apart, when it mixes
	// them (SetKinds; mixed: images and payloads), and CoreCPUExplained
	// the share of the core CPU it used that their derived costs add up
	// to (DeriveKindCPU; 0: not known).
	Kinds            []Kind  `json:"kinds,omitempty"`
	CoreCPUExplained float64 `json:"coreCpuExplained,omitempty"`
}

// Settle is the wait after a scenario until the stack was settled
// (Report.Settling says what that means), so that the work the scenario
// left queued, and limits it lowered, are not charged to the next one.
type Settle struct {
	// Seconds is from the scenario's end (its last answer, or callback) to
	// the first reading of the settled state that then held, or to the
	// bound when it never did.
	Seconds float64 `json:"seconds"`
	Settled bool    `json:"settled"`
	// Left is what was not settled when the bound was reached.
	Left []string `json:"left,omitempty"`
}

// String puts s in words: "settled after 0.4 s", or "did not settle
// within 60 s: usage Kafka lag 1200 (want 0)".
func (s *Settle) String() string {
	secs := strconv.FormatFloat(math.Round(s.Seconds*10)/10, 'f', -1, 64)
	if s.Settled {
		return "settled after " + secs + " s"
	}
	out := "did not settle within " + secs + " s"
	if len(s.Left) > 0 {
		out += ": " + strings.Join(s.Left, ", ")
	}
	return out
}

// settleSummary sums up the waits after the scenarios, or returns "" when
// the run made none.
func (r *Report) settleSummary() string {
	var n int
	var lo, hi float64
	var not []string
	for _, s := range r.Scenarios {
		st := s.Settle
		if st == nil {
			continue
		}
		if !st.Settled {
			not = append(not, s.Name)
			continue
		}
		if n == 0 || st.Seconds < lo {
			lo = st.Seconds
		}
		hi = max(hi, st.Seconds)
		n++
	}
	if n == 0 && len(not) == 0 {
		return ""
	}
	what := "the stack to settle"
	if r.Settling != "" {
		what = r.Settling
	}
	out := "after each scenario the suite waited for " + what + " before the next began; the stack settled"
	switch {
	case len(not) == 0:
		return out + fmt.Sprintf(" after all %d, in %.1f–%.1f s", n, lo, hi)
	case n > 0:
		out += fmt.Sprintf(" after %d, in %.1f–%.1f s, but", n, lo, hi)
	}
	return out + " NOT after " + strings.Join(not, ", ") + ", so the scenario after each may carry its backlog"
}

// FromResult builds a scenario's report from a load run; units is the
// verifications one request carries.
func FromResult(name, about, mode, plan string, units int, r *load.Result) *Scenario {
	s := &Scenario{Name: name, About: about, Mode: mode, Load: plan, Elapsed: r.Elapsed.Seconds(),
		Requests: r.OK + r.Fail, OK: r.OK, Failed: r.Fail, Unsent: r.Unsent, Units: max(units, 1), Failures: r.Failures,
		Latency: Digest(&r.Latency), OKLatency: Digest(&r.OKLatency), Service: Digest(&r.Service), Lag: Digest(&r.Lag),
		SlotWait: Digest(&r.SlotWait), Capped: r.Capped, MaxInFlight: r.MaxInFlight, Codes: r.Codes}
	for c, n := range r.Codes {
		if strings.HasSuffix(c, " duplicate") {
			s.Duplicates += n - r.Failures[c]
		}
	}
	if r.Elapsed > 0 {
		s.Throughput = float64(s.Requests) / r.Elapsed.Seconds()
		s.OKRate = float64(r.OK) / r.Elapsed.Seconds()
		s.Verifications = s.OKRate * float64(max(units, 1))
	}
	for i, w := range r.Windows {
		p := Point{T: i, OK: w.OK.Load(), Fail: w.Fail.Load(), LimitMin: w.MinLimit.Load(), LimitMax: w.MaxLimit.Load()}
		if w.Latency.Count() > 0 {
			p.P50, p.P99, p.Max = ms(w.Latency.Quantile(.5)), ms(w.Latency.Quantile(.99)), ms(w.Latency.Max())
		}
		s.Series = append(s.Series, p)
	}
	for _, st := range r.Steps {
		d := (st.End - st.Start).Seconds()
		if d <= 0 {
			continue
		}
		s.Steps = append(s.Steps, Step{Offered: st.Offered, Throughput: float64(st.Done.Load()) / d, OKRate: float64(st.DoneOK.Load()) / d,
			Latency: Digest(&st.Latency)})
	}
	return s
}

// SetCallbacks records what the webhook receiver saw of an async run and
// counts the scenario's verifications from it: successful callbacks a
// second, from the run's start to the last of them. Submits the stack
// accepted but did not verify, failed and missing callbacks, count as
// errors (ErrorCounts).
func (s *Scenario) SetCallbacks(cb *Callbacks) {
	s.Callbacks = cb
	s.Verifications = 0
	if span := max(cb.Seconds, s.Elapsed); span > 0 {
		s.Verifications = float64(cb.Stats.Succeeded) / span
	}
}

// verified returns how many verifications the scenario completed: the
// successful callbacks of an async scenario, else the successful requests
// times the verifications each carries.
func (s *Scenario) verified() float64 {
	if s.Callbacks != nil {
		return float64(s.Callbacks.Stats.Succeeded)
	}
	return s.Verifications * s.Elapsed
}

// SetCPU records the CPU seconds each process used and derives each tier's
// verifications per CPU-second (for async scenarios from successful
// callbacks: SetCallbacks first).
func (s *Scenario) SetCPU(cpu map[string]time.Duration) {
	s.CPU, s.PerCore = map[string]float64{}, map[string]float64{}
	done := s.verified()
	for name, d := range cpu {
		s.CPU[name] = d.Seconds()
		if d > 0 && done > 0 {
			s.PerCore[name] = done / d.Seconds()
		}
	}
}

// Commits counts the transactions core's committer ran and the writes
// (verifications, jobs' steps, other changes) they carried, from core's
// slip_core_store_commits_total and slip_core_store_writes_total.
type Commits struct {
	Commits float64 `json:"commits"`
	Writes  float64 `json:"writes"`
}

// Sub returns c - o.
func (c Commits) Sub(o Commits) Commits { return Commits{c.Commits - o.Commits, c.Writes - o.Writes} }

// CPUPer returns the CPU of tier (a key of s.CPU, "core", "postgres",
// "postgres/primary") per successful verification, or 0 when s did not
// measure it.
func (s *Scenario) CPUPer(tier string) time.Duration {
	if pc := s.PerCore[tier]; pc > 0 {
		return time.Duration(float64(time.Second) / pc)
	}
	return 0
}

// callbackFailures returns the first callbacks that verified nothing: a
// status other than success, or a signature the receiver refused.
func callbackFailures(cb *Callbacks) uint64 {
	return cb.Stats.Delivered - min(cb.Stats.Succeeded, cb.Stats.Delivered)
}

// outcomes returns how much work the scenario tried and how much of it did
// not succeed, the errors column's share. Sync scenarios count requests
// (unsent ones included). Async scenarios count verifications: a submit
// carries Units of them, and one succeeded only when its job's callback
// arrived with status success, so failed submits, failed or not_found
// callbacks and missing callbacks are all errors.
func (s *Scenario) outcomes() (bad, all uint64) {
	bad, all = s.Failed+s.Unsent, s.Requests+s.Unsent
	if cb := s.Callbacks; cb != nil {
		u := uint64(max(s.Units, 1))
		bad, all = bad*u+callbackFailures(cb)+cb.Missing, all*u
	}
	return bad, all
}

// Count is a code and how often it was seen.
type Count struct {
	Code string
	N    uint64
}

// ErrorCounts returns what did not succeed, most frequent first: failed
// requests by code (from the outcomes' OK flag, not the code's text) and,
// for async scenarios, callbacks whose status was not success ("callback
// failed QUOTA_EXCEEDED", "callback not_found") and callbacks that never
// came ("callback missing").
func (s *Scenario) ErrorCounts() []Count {
	var out []Count
	failures := s.Failures
	if failures == nil {
		// A file from before Failures: the codes not starting with 2.
		failures = map[string]uint64{}
		for c, n := range s.Codes {
			if len(c) < 1 || c[0] != '2' {
				failures[c] = n
			}
		}
	}
	for c, n := range failures {
		out = append(out, Count{c, n})
	}
	if cb := s.Callbacks; cb != nil {
		for st, n := range cb.Stats.Status {
			if st != "success" && n > 0 {
				out = append(out, Count{"callback " + st, n})
			}
		}
		if cb.Missing > 0 {
			out = append(out, Count{"callback missing", cb.Missing})
		}
	}
	return byFrequency(out)
}

// byFrequency sorts counts most frequent first, then by code.
func byFrequency(cs []Count) []Count {
	slices.SortFunc(cs, func(a, b Count) int {
		if a.N != b.N {
			return cmp.Compare(b.N, a.N)
		}
		return cmp.Compare(a.Code, b.Code)
	})
	return cs
}

// countList puts counts in words: "429 RATE_LIMIT_EXCEEDED ×12, 500 ×1".
func countList(cs []Count) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%s ×%d", c.Code, c.N)
	}
	return strings.Join(parts, ", ")
}

// statusCounts returns the callbacks by status, most frequent first.
func statusCounts(cb *Callbacks) []Count {
	var out []Count
	for st, n := range cb.Stats.Status {
		out = append(out, Count{st, n})
	}
	return byFrequency(out)
}

// Find returns the scenario called name, or nil.
func (r *Report) Find(name string) *Scenario {
	for _, s := range r.Scenarios {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// WriteJSON writes r to path.
func (r *Report) WriteJSON(path string) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(raw, '\n'), 0o644)
}

// Read reads a report written by WriteJSON.
func Read(path string) (*Report, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var r Report
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("report %s: not a bench result: %w", path, err)
	}
	if r.Version < oldestVersion || r.Version > Version {
		return nil, fmt.Errorf("report %s: format version %d, this program reads %d to %d", path, r.Version, oldestVersion, Version)
	}
	return &r, nil
}

// formatChange is a way a format version measures one or more compared
// rows differently from the version before it, for some scenarios.
type formatChange struct {
	version int      // the version that made the change
	metrics []string // Compare's row names
	// applies reports whether the change touches scenario s (either run's).
	applies func(s *Scenario) bool
	why     string
}

func isAsync(s *Scenario) bool { return s.Callbacks != nil }

func uploadsPictures(s *Scenario) bool { return s.Name == "bank-image" || s.Name == "mixed" }

// formatChanges lists, oldest first, what each version changed in the
// quantities Compare shows.
var formatChanges = []formatChange{
	{2, []string{"verif/s"}, isAsync,
		"async verif/s counts successful callbacks a second, from the start to the last of them (version 1 files may count accepted 202 submits)"},
	{2, []string{"errors %"}, isAsync,
		"async errors % is of jobs: failed, not_found and missing callbacks are errors (version 1 files may count failed submits only)"},
	{2, []string{"verif/s", "p50 ms", "p99 ms", "p99.9 ms", "ok p99 ms"}, uploadsPictures,
		"bank-image (and mixed's share of it) uploads a new slip's picture made ahead of the request, outside its latency (version 1: made inside the timed request, or a fixed set of pictures whose repeats took the duplicate path)"},
}

// notCompared says what else version 2 changed, outside Compare's rows.
const notCompared = "steps' throughput is what completed within each step; answers that say isDuplicate are code \"200 duplicate\"; lag leaves out the wait for a free in-flight slot (slot wait)"

// changedMeaning returns, for the rows of scenario o (old) and n (new)
// that measure something else in one run's format than in the other's,
// the reasons by row name.
func changedMeaning(oldVersion, newVersion int, o, n *Scenario) map[string][]string {
	lo, hi := min(oldVersion, newVersion), max(oldVersion, newVersion)
	out := map[string][]string{}
	for _, c := range formatChanges {
		if c.version <= lo || c.version > hi || !(c.applies(o) || c.applies(n)) {
			continue
		}
		for _, m := range c.metrics {
			out[m] = append(out[m], c.why)
		}
	}
	return out
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
