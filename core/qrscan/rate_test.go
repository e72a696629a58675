package qrscan

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/slip"
)

// isSlip accepts bank and wallet slip payloads, as the verify service does.
func isSlip(p string) bool {
	if _, err := slip.ParseBank(p); err == nil {
		return true
	}
	_, err := slip.ParseWallet(p)
	return err == nil
}

// result is one corpus image scanned.
type result struct {
	s    *sample
	ok   bool
	got  string
	err  error
	pass string
	dur  time.Duration
}

func scanCorpus(t testing.TB, samples []*sample) []result {
	var pass string
	passHook = func(n string) { pass = n }
	defer func() { passHook = nil }()
	out := make([]result, len(samples))
	for i, s := range samples {
		pass = ""
		start := time.Now()
		got, err := Scan(s.data, isSlip)
		out[i] = result{s: s, ok: err == nil && got == s.payload, got: got, err: err, pass: pass, dur: time.Since(start)}
	}
	return out
}

func median(d []time.Duration) time.Duration { return quantile(d, 0.5) }

// quantile returns the q-quantile of d (nearest rank).
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	return d[min(len(d)-1, int(q*float64(len(d))))]
}

// TestWriteCorpus writes the corpus to $QRSCAN_CORPUS_DIR, to look at it or
// feed it to other decoders.
func TestWriteCorpus(t *testing.T) {
	dir := os.Getenv("QRSCAN_CORPUS_DIR")
	if dir == "" {
		t.Skip("set QRSCAN_CORPUS_DIR to write the corpus")
	}
	for _, s := range corpus(t) {
		if err := os.WriteFile(filepath.Join(dir, s.name()), s.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// rateTable formats the decode rate of res per condition and format, the
// median time per condition, and how often each strategy found the slip.
func rateTable(res []result) string {
	type key struct{ cond, format string }
	ok, n := map[key]int{}, map[key]int{}
	durs := map[string][]time.Duration{}
	passes := map[string]map[string]int{}
	for _, r := range res {
		k := key{r.s.cond, r.s.format}
		n[k]++
		durs[r.s.cond] = append(durs[r.s.cond], r.dur)
		if r.ok {
			ok[k]++
			if passes[r.s.cond] == nil {
				passes[r.s.cond] = map[string]int{}
			}
			passes[r.s.cond][r.pass]++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-10s", "condition")
	for _, f := range formats {
		fmt.Fprintf(&b, " %6s", f)
	}
	fmt.Fprintf(&b, " %7s %9s\n", "all", "median")
	for _, c := range conditions {
		fmt.Fprintf(&b, "%-10s", c.name)
		tot, totN := 0, 0
		for _, f := range formats {
			k := key{c.name, f}
			tot, totN = tot+ok[k], totN+n[k]
			fmt.Fprintf(&b, " %6s", rate(ok[k], n[k]))
		}
		fmt.Fprintf(&b, " %7s %9v\n", rate(tot, totN), median(durs[c.name]).Round(100*time.Microsecond))
	}
	fmt.Fprintln(&b, "found by strategy:")
	for _, c := range conditions {
		var ps []string
		for p, n := range passes[c.name] {
			ps = append(ps, fmt.Sprintf("%s=%d", p, n))
		}
		sort.Strings(ps)
		fmt.Fprintf(&b, "  %-10s %s\n", c.name, strings.Join(ps, " "))
	}
	return b.String()
}

func rate(ok, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d", ok, n)
}
