package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/slipverify/slipverify/core/config"
	"github.com/slipverify/slipverify/core/lib/envflag"
	"github.com/slipverify/slipverify/core/store"
	"github.com/slipverify/slipverify/core/store/pgstore"
)

// lockWait is how long copy-store waits for core.db's lock: a core holds it
// for as long as it runs, so a longer wait would only delay the refusal.
const lockWait = time.Second

// copyStore is "core copy-store": it copies a stopped core's bbolt file
// into a PostgreSQL database, every record of every kind (store.Kinds),
// then reads both back and checks that each kind has the same count and
// digest in both. It is idempotent (see pgstore.Import): run again, it
// finds everything already there. Progress goes to stderr, the table of
// counts to stdout.
func copyStore(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	const program = "core copy-store"
	var from, to string
	var common envflag.Common
	vars := []envflag.Var{
		{Flag: "from", Default: filepath.Join(dataDir(getenv), "core.db"), Usage: "the bbolt file to copy, which no core may have open: core.db in SLIP_DATA_DIR", Dst: &from},
		envflag.Def("SLIP_STORE", "to", "", "the PostgreSQL URL to copy into", &to),
	}
	if err := envflag.Load(program, vars, &common, args, getenv); err != nil {
		return err
	}
	if done, err := common.Done(program, version, func() error {
		if to == "" {
			return errors.New("-to (SLIP_STORE): the PostgreSQL URL to copy into is required")
		}
		if err := config.CheckStoreURL(to); err != nil {
			return fmt.Errorf("-to (SLIP_STORE): %w", err)
		}
		return nil
	}); done {
		return err
	}

	now := time.Now()
	exp, err := store.OpenExport(from, now, lockWait)
	if errors.Is(err, store.ErrInUse) {
		return fmt.Errorf("%s: core.db is in use: stop core first", from)
	} else if err != nil {
		return err
	}
	defer exp.Close()
	p := &progress{w: stderr}
	fmt.Fprintf(stderr, "%s: reading %s\n", program, from)
	inBolt, err := store.Tally(exp, p.step("reading", nil))
	if err != nil {
		return fmt.Errorf("reading %s: %w", from, err)
	}
	totals := make(map[store.Kind]int64, len(inBolt))
	for k, s := range inBolt {
		totals[k] = s.Count
	}
	imp, err := pgstore.OpenImport(ctx, to, now)
	if err != nil {
		return fmt.Errorf("PostgreSQL: %w", err)
	}
	defer imp.Close()
	fmt.Fprintf(stderr, "%s: copying into PostgreSQL\n", program)
	copied, err := imp.Copy(ctx, exp, totals, p.step("copying", totals))
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	fmt.Fprintf(stderr, "%s: checking: reading PostgreSQL back\n", program)
	inPG, err := store.Tally(imp, p.step("checking", totals))
	if err != nil {
		return fmt.Errorf("check: reading PostgreSQL: %w", err)
	}

	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\tin bbolt\tcopied\talready there\tin PostgreSQL\tcheck\t")
	var differ []string
	for _, k := range store.Kinds {
		b, g, c := inBolt[k], inPG[k], copied[k]
		check := "ok"
		switch {
		case b.Count != g.Count:
			check = "COUNT DIFFERS"
			differ = append(differ, fmt.Sprintf("%s: %d in bbolt, %d in PostgreSQL", k, b.Count, g.Count))
		case b.Digest != g.Digest:
			check = "DIGEST DIFFERS"
			differ = append(differ, fmt.Sprintf("%s: the records differ (SHA-256 sum %x in bbolt, %x in PostgreSQL)", k, b.Digest[:8], g.Digest[:8]))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", k, thousands(b.Count), thousands(c.Copied), thousands(c.Already), thousands(g.Count), check)
	}
	tw.Flush()
	if exp.DeadEntries > 0 {
		fmt.Fprintf(stdout, "%s history entries of slip records gone (expired) were left behind: bbolt no longer lists them either\n", thousands(exp.DeadEntries))
	}
	if len(differ) > 0 {
		return fmt.Errorf("the check failed: PostgreSQL does not hold what core.db holds: %s", strings.Join(differ, "; "))
	}
	fmt.Fprintln(stdout, "checked: every kind has the same count and SHA-256 digest in core.db and in PostgreSQL")
	return nil
}

// dataDir is SLIP_DATA_DIR, or core's default for it.
func dataDir(getenv func(string) string) string {
	if d := getenv("SLIP_DATA_DIR"); d != "" {
		return d
	}
	for _, v := range config.Vars() {
		if v.Env == "SLIP_DATA_DIR" {
			return v.Default
		}
	}
	return "."
}

// progress prints a line at every 10,000th record of a kind a step has
// done, at most one a second, with the step's rate on the kind.
type progress struct {
	w           io.Writer
	kind        store.Kind
	start, last time.Time
	shown       int64 // the count last told of, in tens of thousands
}

// step returns the function that tells of n records of kind k done in
// the step named doing, of totals[k] (nil: none known).
func (p *progress) step(doing string, totals map[store.Kind]int64) func(k store.Kind, n int64) {
	p.kind = ""
	return func(k store.Kind, n int64) {
		if k != p.kind {
			p.kind, p.start, p.last, p.shown = k, time.Now(), time.Time{}, 0
		}
		if n/10_000 == p.shown {
			return
		}
		if p.shown = n / 10_000; time.Since(p.last) < time.Second {
			return
		}
		p.last = time.Now()
		of := ""
		if totals != nil {
			of = " of " + thousands(totals[k])
		}
		rate := float64(n) / max(time.Since(p.start).Seconds(), 1e-3)
		fmt.Fprintf(p.w, "core copy-store: %s %s: %s%s (%s/s)\n", doing, k, thousands(n), of, thousands(int64(rate)))
	}
}

// thousands writes n with commas between its thousands.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
