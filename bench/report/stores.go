package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Stores writes runs of the same scenarios on different stores side by
// side (loadgen suite -store bbolt,postgres): per scenario, each run's
// verifications a second, its best step (the peak), latency, what a
// verification cost core and PostgreSQL in CPU and how many writes a
// commit of core's store carried; then each setup's medians (a store and
// its number of cores) and the ratio of each setup's to the first's. runs
// are in the order they ran.
func Stores(w io.Writer, runs []*Report) {
	var stores, names []string
	for _, r := range runs {
		if !slices.Contains(stores, r.Setup()) {
			stores = append(stores, r.Setup())
		}
		for _, s := range r.Scenarios {
			if s.Pending == "" && !slices.Contains(names, s.Name) {
				names = append(names, s.Name)
			}
		}
	}
	fmt.Fprintf(w, "stores side by side: %s, %d runs in turn\n", strings.Join(stores, ", "), len(runs))
	for _, name := range names {
		fmt.Fprintf(w, "\n%s:\n", name)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "run\tstore\tcores\tverif/s\tbest step\tp50 ms\tp99 ms\tcore µs/verif\tpostgres µs/verif\tprimary\tstandby\twrites/commit\tcommits/s\t")
		byStore := map[string][]storeRow{}
		for i, r := range runs {
			s := r.Find(name)
			if s == nil || s.Pending != "" {
				continue
			}
			row := rowOf(s)
			byStore[r.Setup()] = append(byStore[r.Setup()], row)
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t\n", i+1, r.StoreName(), max(r.Cores, 1), row.cells())
		}
		for _, st := range stores {
			if rows := byStore[st]; len(rows) > 1 {
				fmt.Fprintf(tw, "median\t%s\t\t%s\t\n", st, medianRow(rows).cells())
			}
		}
		tw.Flush()
		base := byStore[stores[0]]
		for _, st := range stores[1:] {
			rows := byStore[st]
			if len(rows) == 0 || len(base) == 0 {
				continue
			}
			b, o := medianRow(base), medianRow(rows)
			line := fmt.Sprintf("  %s / %s: verif/s %.2f, best step %.2f", st, stores[0], o.verif/b.verif, ratio(o.best, b.best))
			if len(rows) > 1 || len(base) > 1 {
				line += " (of the medians"
				if len(rows) == len(base) {
					var rs []string
					for i := range rows {
						rs = append(rs, fmt.Sprintf("%.2f", ratio(rows[i].best, base[i].best)))
					}
					line += "; each round's best steps: " + strings.Join(rs, ", ")
				}
				line += ")"
			}
			if b.core > 0 && o.core > 0 {
				line += fmt.Sprintf("; core's CPU per verification %.2f", o.core/b.core)
			}
			fmt.Fprintln(w, line)
		}
	}
}

// Setup names r's store and, on PostgreSQL, its cores: "bbolt",
// "postgres, 2 cores".
func (r *Report) Setup() string {
	if r.StoreName() != "postgres" {
		return r.StoreName()
	}
	return fmt.Sprintf("postgres, %d %s", r.Cores, plural(r.Cores, "core", "cores"))
}

// storeRow is one run of a scenario, as Stores shows it.
type storeRow struct {
	verif, best, p50, p99       float64
	core, pg, primary, standby  float64 // µs of CPU per verification
	perCommit, commitsPerSecond float64
}

func rowOf(s *Scenario) storeRow {
	r := storeRow{verif: s.Verifications, p50: s.Latency.P50, p99: s.Latency.P99,
		core: us(s.CPUPer("core")), pg: us(s.CPUPer("postgres")), primary: us(s.CPUPer("postgres/primary")), standby: us(s.CPUPer("postgres/standby"))}
	for _, st := range s.Steps {
		r.best = max(r.best, st.OKRate*float64(max(s.Units, 1)))
	}
	if c := s.Commits; c != nil && c.Commits > 0 {
		r.perCommit, r.commitsPerSecond = c.Writes/c.Commits, c.Commits/max(s.Elapsed, 1e-9)
	}
	return r
}

func (r storeRow) cells() string {
	f := func(v float64, format string) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf(format, v)
	}
	best := "-"
	if r.best > 0 {
		best = fmt.Sprintf("%.0f", r.best)
	}
	return strings.Join([]string{fmt.Sprintf("%.0f", r.verif), best, num(r.p50), num(r.p99),
		f(r.core, "%.0f"), f(r.pg, "%.0f"), f(r.primary, "%.0f"), f(r.standby, "%.0f"), f(r.perCommit, "%.1f"), f(r.commitsPerSecond, "%.0f")}, "\t")
}

// medianRow is each column's median over the rows that measured it.
func medianRow(rows []storeRow) storeRow {
	col := func(get func(storeRow) float64) float64 {
		var vs []float64
		for _, r := range rows {
			if v := get(r); v != 0 {
				vs = append(vs, v)
			}
		}
		slices.Sort(vs)
		n := len(vs)
		switch {
		case n == 0:
			return 0
		case n%2 == 1:
			return vs[n/2]
		}
		return (vs[n/2-1] + vs[n/2]) / 2
	}
	return storeRow{
		verif: col(func(r storeRow) float64 { return r.verif }), best: col(func(r storeRow) float64 { return r.best }),
		p50: col(func(r storeRow) float64 { return r.p50 }), p99: col(func(r storeRow) float64 { return r.p99 }),
		core: col(func(r storeRow) float64 { return r.core }), pg: col(func(r storeRow) float64 { return r.pg }),
		primary: col(func(r storeRow) float64 { return r.primary }), standby: col(func(r storeRow) float64 { return r.standby }),
		perCommit: col(func(r storeRow) float64 { return r.perCommit }), commitsPerSecond: col(func(r storeRow) float64 { return r.commitsPerSecond }),
	}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
