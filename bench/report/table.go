package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Table writes the report as terminal tables: one line per scenario, then
// each scenario's errors by code, CPU per tier and callbacks.
func (r *Report) Table(w io.Writer) {
	fmt.Fprintf(w, "slipverify bench: %s, %d CPUs %s, target %s", r.Created.Format("2006-01-02 15:04 MST"), r.Host.CPUs, r.Host.CPUModel, r.Target)
	if r.Store != "" {
		fmt.Fprintf(w, ", core on %s (%d %s)", r.Store, r.Cores, plural(r.Cores, "process", "processes"))
	}
	fmt.Fprint(w, "\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tload\treq/s\tverif/s\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\tok p50 ms\tok p99 ms\terrors\t")
	for _, s := range r.Scenarios {
		if s.Pending != "" {
			fmt.Fprintf(tw, "%s\tpending\t\t\t\t\t\t\t\t\t\t\t\n", s.Name)
			continue
		}
		l, ok := s.Latency, s.OKLatency
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Name, s.Load, s.Throughput, s.Verifications,
			num(l.P50), num(l.P90), num(l.P99), num(l.P999), num(l.Max), num(ok.P50), num(ok.P99), errShare(s))
	}
	tw.Flush()
	fmt.Fprintln(w, "\np50 … max ms: every completed request, refusals included; ok p50, ok p99: successful requests only.")
	r.kindTable(w)
	if sum := r.settleSummary(); sum != "" {
		fmt.Fprintf(w, "settling: %s.\n", sum)
	}
	for _, s := range r.Scenarios {
		if s.Pending != "" {
			fmt.Fprintf(w, "\n%s: pending: %s\n", s.Name, s.Pending)
			continue
		}
		errs := s.ErrorCounts()
		if s.Unsent > 0 {
			errs = append(errs, Count{"unsent", s.Unsent})
		}
		line := fmt.Sprintf("\n%s: send→answer p50 %s p99 %s ms; generator lag p50 %s p99 %s ms", s.Name,
			num(s.Service.P50), num(s.Service.P99), num(s.Lag.P50), num(s.Lag.P99))
		if w := slotWait(s); w != "" {
			line += "\n  " + w
		}
		if s.Duplicates > 0 {
			line += fmt.Sprintf("\n  answered as duplicates: %d of %d successful (%.1f %%)", s.Duplicates, s.OK, 100*float64(s.Duplicates)/float64(max(s.OK, 1)))
		}
		if ok := s.OKLatency; ok.Count > 0 && ok.Count != s.Requests {
			line += fmt.Sprintf("\n  successful requests only: p50 %s p90 %s p99 %s p99.9 %s max %s ms", num(ok.P50), num(ok.P90), num(ok.P99), num(ok.P999), num(ok.Max))
		}
		if len(errs) > 0 {
			line += "\n  errors: " + countList(errs)
		}
		if len(s.CPU) > 0 {
			var cpu []string
			for _, name := range sortedKeys(s.CPU) {
				c := fmt.Sprintf("%s %.1fs", name, s.CPU[name])
				if pc := s.PerCore[name]; pc > 0 && name != "loadgen" {
					c += fmt.Sprintf(" (%.0f verif per CPU-s)", pc)
				}
				cpu = append(cpu, c)
			}
			line += "\n  CPU: " + strings.Join(cpu, ", ")
			if per := cpuPerVerification(s); per != "" {
				line += "\n  CPU per verification: " + per
			}
		}
		if c := s.Commits; c != nil && c.Commits > 0 {
			line += fmt.Sprintf("\n  core's store: %.0f commits (%.0f/s), %.0f writes, %.1f writes per commit", c.Commits, c.Commits/max(s.Elapsed, 1e-9), c.Writes, c.Writes/c.Commits)
		}
		for _, n := range kindNotes(s) {
			line += "\n  " + n
		}
		if cb := s.Callbacks; cb != nil {
			line += fmt.Sprintf("\n  callbacks: %d of %d delivered, %d successful (%d missing, %d repeats, %d bad signatures); submit→callback p50 %s p99 %s max %s ms",
				cb.Stats.Delivered, cb.Stats.Expected, cb.Stats.Succeeded, cb.Missing, cb.Stats.Repeats, cb.Stats.BadSig, num(cb.Latency.P50), num(cb.Latency.P99), num(cb.Latency.Max))
			if st := statusCounts(cb); len(st) > 0 {
				line += "\n  callbacks by status: " + countList(st)
			}
			line += fmt.Sprintf("\n  verif/s is successful callbacks over %.1f s, from the start to the last of them", max(cb.Seconds, s.Elapsed))
		}
		if lo, hi := limitRange(s); hi > 0 {
			line += fmt.Sprintf("\n  X-RateLimit-Limit seen: %d..%d", lo, hi)
		}
		if st := s.Settle; st != nil {
			line += "\n  after it the stack " + st.String()
		}
		fmt.Fprintln(w, line)
	}
	if r.Capacity != nil {
		fmt.Fprintln(w)
		r.Capacity.Print(w)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\nnote: %s\n", n)
	}
}

// cpuPerVerification puts in words what a successful verification cost
// core and PostgreSQL (each server apart) in µs of CPU, or "" when the
// run measured neither.
func cpuPerVerification(s *Scenario) string {
	var parts []string
	if d := s.CPUPer("core"); d > 0 {
		parts = append(parts, fmt.Sprintf("core %.0f µs", us(d)))
	}
	if d := s.CPUPer("postgres"); d > 0 {
		p := fmt.Sprintf("postgres %.0f µs", us(d))
		var servers []string
		for _, k := range sortedKeys(s.PerCore) {
			if name, ok := strings.CutPrefix(k, "postgres/"); ok {
				servers = append(servers, fmt.Sprintf("%s %.0f", name, us(s.CPUPer(k))))
			}
		}
		if len(servers) > 0 {
			p += " (" + strings.Join(servers, ", ") + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// kindTable writes the kinds of the scenarios that mix them, one line
// each, or nothing when none does.
func (r *Report) kindTable(w io.Writer) {
	var rows [][]string
	for _, s := range r.Scenarios {
		if s.Pending == "" {
			rows = append(rows, kindRows(s)...)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nby kind: a mix's pictures (image) and payloads apart, each kind's latency over its own requests; core CPU per verification derived from the mix's scenarios run on their own (see each scenario below):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(kindHeader, "\t")+"\t")
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
}

func limitRange(s *Scenario) (lo, hi int32) {
	for _, p := range s.Series {
		if p.LimitMin > 0 && (lo == 0 || p.LimitMin < lo) {
			lo = p.LimitMin
		}
		hi = max(hi, p.LimitMax)
	}
	return lo, hi
}

// num formats milliseconds with 3 significant digits.
func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func errShare(s *Scenario) string {
	bad, n := s.outcomes()
	if n == 0 {
		return "-"
	}
	if bad == 0 {
		return "0"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(bad)/float64(n))
}

// slotWait puts in words how often and how long open-loop requests waited
// for a free in-flight slot, or "" when none did.
func slotWait(s *Scenario) string {
	if s.Capped == 0 {
		return ""
	}
	return fmt.Sprintf("in-flight cap (%d) reached: %d requests (%.1f %%) waited for a free slot, the stack's back-pressure (in latency, not lag): p50 %s p99 %s max %s ms",
		s.MaxInFlight, s.Capped, 100*float64(s.Capped)/float64(max(s.Requests, 1)), num(s.SlotWait.P50), num(s.SlotWait.P99), num(s.SlotWait.Max))
}

// Compare writes the change from old to new for each scenario both hold:
// throughput and latency percentiles, with the ratio new/old. When the two
// files are of different format versions, the rows that measure something
// else in one than in the other are marked, with the reasons.
func Compare(w io.Writer, old, new *Report) {
	fmt.Fprintf(w, "old: %s (%s)\nnew: %s (%s)\n\n", old.Created.Format("2006-01-02 15:04"), old.Command, new.Created.Format("2006-01-02 15:04"), new.Command)
	var reasons []string // numbered by their place, from 1
	mark := func(why []string) string {
		var m []string
		for _, y := range why {
			i := slices.Index(reasons, y)
			if i < 0 {
				reasons, i = append(reasons, y), len(reasons)
			}
			m = append(m, fmt.Sprintf("[%d]", i+1))
		}
		return strings.Join(m, "")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tmetric\told\tnew\tchange\t\t")
	for _, n := range new.Scenarios {
		o := old.Find(n.Name)
		if o == nil || o.Pending != "" || n.Pending != "" {
			fmt.Fprintf(tw, "%s\t(only in one run, or pending)\t\t\t\t\t\n", n.Name)
			continue
		}
		rows := []struct {
			metric   string
			old, new float64
		}{
			{"verif/s", o.Verifications, n.Verifications},
			{"p50 ms", o.Latency.P50, n.Latency.P50},
			{"p99 ms", o.Latency.P99, n.Latency.P99},
			{"p99.9 ms", o.Latency.P999, n.Latency.P999},
			{"ok p99 ms", o.OKLatency.P99, n.OKLatency.P99},
			{"errors %", pct(o), pct(n)},
		}
		// A mix's kinds, each in both runs: the change of a kind is not
		// hidden in the mix's whole (a few pictures are most of its core CPU).
		for _, nk := range n.Kinds {
			for _, ok := range o.Kinds {
				if ok.Name != nk.Name {
					continue
				}
				rows = append(rows, []struct {
					metric   string
					old, new float64
				}{
					{nk.Name + " verif/s", ok.Verifications, nk.Verifications},
					{nk.Name + " p50 ms", ok.Latency.P50, nk.Latency.P50},
					{nk.Name + " p99 ms", ok.Latency.P99, nk.Latency.P99},
					{nk.Name + " core µs/verif", ok.CoreCPU, nk.CoreCPU},
				}...)
			}
		}
		changed := changedMeaning(old.Version, new.Version, o, n)
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", n.Name, r.metric, num(r.old), num(r.new), change(r.old, r.new), mark(changed[r.metric]))
		}
	}
	for _, o := range old.Scenarios {
		if new.Find(o.Name) == nil {
			fmt.Fprintf(tw, "%s\t(only in the old run)\t\t\t\t\t\n", o.Name)
		}
	}
	tw.Flush()
	if old.Version != new.Version {
		fmt.Fprintf(w, "\nold is format version %d, new is version %d: ", old.Version, new.Version)
		if len(reasons) == 0 {
			fmt.Fprintln(w, "no row above measures something else in one than in the other.")
		} else {
			fmt.Fprintln(w, "rows marked [n] measure something else in one than in the other, so their change is not the stack's alone:")
			for i, y := range reasons {
				fmt.Fprintf(w, "  [%d] %s\n", i+1, y)
			}
		}
		if min(old.Version, new.Version) < 2 {
			fmt.Fprintf(w, "  Not compared here, version 2 also changed: %s.\n", notCompared)
		}
	}
	fmt.Fprintln(w, "\nLatency: lower is better; verif/s: higher is better. On a shared machine a change under about 10 % is noise.")
}

func pct(s *Scenario) float64 {
	if bad, n := s.outcomes(); n > 0 {
		return 100 * float64(bad) / float64(n)
	}
	return 0
}

func change(old, new float64) string {
	if old == 0 {
		if new == 0 {
			return "="
		}
		return "new"
	}
	r := (new - old) / old * 100
	if math.Abs(r) < 0.05 {
		return "="
	}
	return fmt.Sprintf("%+.1f%%", r)
}
