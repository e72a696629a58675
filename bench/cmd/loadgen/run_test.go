package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/bench/load"
	"github.com/slipverify/slipverify/bench/report"
)

func TestParseStages(t *testing.T) {
	st, err := parseStages("10s:100-1000, 30s:1000")
	if err != nil || len(st) != 2 || st[0] != (load.Stage{Duration: 10 * time.Second, From: 100, To: 1000}) || st[1].From != 1000 || st[1].To != 1000 {
		t.Fatalf("%v %+v", err, st)
	}
	for _, bad := range []string{"10s", "ten:5", "10s:x", "10s:1-y"} {
		if _, err := parseStages(bad); err == nil {
			t.Errorf("parseStages(%q) accepted", bad)
		}
	}
}

// TestCommandErrors checks that bad flags, files and combinations are
// refused with a reason, before anything is sent.
func TestCommandErrors(t *testing.T) {
	dir := t.TempDir()
	f := func(want string, args ...string) {
		t.Helper()
		var out strings.Builder
		err := run(context.Background(), args, &out, &out)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("loadgen %v: %v, want an error with %q", args, err, want)
		}
	}
	f("usage", []string{}...)
	f(`unknown command "nope"`, "nope")
	f(`unknown scenario "nope"`, "run", "-scenario", "nope", "-rate", "1")
	f("either -workers", "run", "-workers", "4", "-rate", "10")
	f("positive integers", "run", "-workers", "0")
	f("give -rate", "run")
	f("stage", "run", "-stages", "10s")
	f("no such file", "run", "-rate", "10", "-seed", filepath.Join(dir, "missing.json"))
	f("no edge answers", "run", "-rate", "10", "-seed", filepath.Join("..", "..", "seed.json"), "-addr", "127.0.0.1:1")
	f("want 0 arguments", "suite", "extra")
	f("usage: loadgen compare", "compare", "one.json")
	f("no such file", "compare", filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json"))
	f("target must be positive", "capacity", "-target", "0")
	f("image share must be between 0 and 1", "capacity", "-image-share", "1.2")
	f("rates and quota", "seed", "-rate", "0")
	f("want postgres:N, N cores, at least 1", "suite", "-store", "bbolt,postgres:x")
	f("want bbolt, postgres or postgres:N", "suite", "-store", "bbolt,mysql")
}

func TestCommands(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), []string{"capacity", "-target", "5000", "-async", "0.2"}, &out, &out); err != nil ||
		!strings.Contains(out.String(), "Capacity for 5000 verifications/s, 20 % async") {
		t.Errorf("capacity: %v\n%s", err, out.String())
	}
	// The share of pictures moves core's cores: 5,000 sync verifications,
	// 3,000 payloads or 50 pictures a core-second: 5000 × (0.98/3000 +
	// 0.02/50) = 3.63 cores with 2 % pictures, 1.67 with none; one
	// instance of 8 cores at 60 % (4.8) holds either on bbolt.
	for share, cores := range map[string]string{"0.02": "3.63", "0": "1.67"} {
		out.Reset()
		err := run(context.Background(), []string{"capacity", "-async", "0", "-image-share", share, "-core-per-core", "3000", "-core-image-per-core", "50", "-cores", "8"}, &out, &out)
		if err != nil || !regexp.MustCompile(`(?m)^  core +5000 verifications/s +\d+ +`+regexp.QuoteMeta(cores)+` +1  payload given; `).MatchString(out.String()) ||
			!strings.Contains(out.String(), "else PostgreSQL with N cores): bbolt") {
			t.Errorf("capacity with %s pictures: %v, want core at %s cores on bbolt:\n%s", share, err, cores, out.String())
		}
	}
	// In instances of 2 cores (1.2 at 60 %) 1.67 cores take two: core on
	// PostgreSQL, 5000 × (1/2500 on PostgreSQL) = 2 cores in 2
	// instances, PostgreSQL's primary 5000/4000 = 1.25 cores busy, a
	// server of 3 cores at 60 %.
	out.Reset()
	err := run(context.Background(), []string{"capacity", "-async", "0", "-image-share", "0", "-core-per-core", "3000", "-core-postgres-per-core", "2500",
		"-postgres-per-core", "4000", "-postgres-standby-per-core", "20000", "-postgres-ceiling", "9000"}, &out, &out)
	if err != nil || !regexp.MustCompile(`(?m)^  core +5000 verifications/s +2500 +2\.00 +2  `).MatchString(out.String()) ||
		!regexp.MustCompile(`(?m)^  postgres +5000 verifications/s +\d+ +1\.50 +2  given$`).MatchString(out.String()) ||
		!strings.Contains(out.String(), "PostgreSQL primary 1.25 cores busy, standby 0.25: two servers of 3 cores at 60 % CPU") {
		t.Errorf("capacity on PostgreSQL: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"list"}, &out, &out); err != nil || !strings.Contains(out.String(), "async-batch") {
		t.Errorf("list: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"seed", "-services", "1", "-branches", "2"}, &out, &out); err != nil || !strings.Contains(out.String(), `"bench-1-br02"`) {
		t.Errorf("seed: %v", err)
	}
}

// TestCapacityFlagsWin gives every per-core number by flag with a result
// that measured them all: the printed model uses and names the given ones.
func TestCapacityFlagsWin(t *testing.T) {
	rep := &report.Report{Version: report.Version, Scenarios: []*report.Scenario{
		{Name: "bank-v2 peak", PerCore: map[string]float64{"edge": 9000, "core": 1500, "usage": 30000}},
		{Name: "async-single", PerCore: map[string]float64{"core": 700, "dispatcher": 1600}},
		{Name: "bank-image", PerCore: map[string]float64{"core": 40}},
	}}
	path := filepath.Join(t.TempDir(), "bench.json")
	if err := rep.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	err := run(context.Background(), []string{"capacity", "-from", path, "-edge-per-core", "1000", "-core-per-core", "100",
		"-core-image-per-core", "5", "-core-async-per-core", "50", "-dispatcher-per-core", "10", "-usage-per-core", "10",
		"-core-postgres-per-core", "80", "-postgres-per-core", "60", "-postgres-standby-per-core", "300", "-postgres-ceiling", "9000"}, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "measured:") {
		t.Errorf("a measured number replaced a given one:\n%s", out.String())
	}
	for _, tier := range []string{"edge", "core", "postgres", "dispatcher", "usage"} {
		if !regexp.MustCompile(`(?m)^  ` + tier + ` .* given$`).MatchString(out.String()) {
			t.Errorf("%s is not from the given number:\n%s", tier, out.String())
		}
	}
	// Without flags the measured numbers are used.
	out.Reset()
	if err := run(context.Background(), []string{"capacity", "-from", path}, &out, &out); err != nil || !strings.Contains(out.String(), "measured: bank-v2 peak") ||
		!regexp.MustCompile(`(?m)^  picture, sync +80 +40 +2\.00  measured: bank-image$`).MatchString(out.String()) {
		t.Errorf("%v\n%s", err, out.String())
	}
}

// TestWebhookCA makes the receiver's CA before a stack exists, as the
// README's steps for async scenarios against one's own stack go, and
// checks that run refuses an async scenario whose directory has no CA
// (the stack could not trust one made then) before it looks for a stack.
func TestWebhookCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wh")
	var out strings.Builder
	if err := run(context.Background(), []string{"webhook-ca", "-dir", dir}, &out, &out); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "webhook-ca.pem")
	if !strings.Contains(out.String(), "SLIP_EGRESS_CA_FILE="+caFile) || !strings.Contains(out.String(), "made") {
		t.Errorf("webhook-ca printed:\n%s", out.String())
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "webhook-ca-key.pem")); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(context.Background(), []string{"webhook-ca", "-dir", dir}, &out, &out); err != nil || !strings.Contains(out.String(), "kept") {
		t.Errorf("second webhook-ca: %v\n%s", err, out.String())
	}
	if again, _ := os.ReadFile(caFile); string(again) != string(pem) {
		t.Error("a second webhook-ca replaced the CA")
	}
	seed := filepath.Join("..", "..", "seed.json")
	err = run(context.Background(), []string{"run", "-scenario", "async-single", "-rate", "1", "-seed", seed, "-addr", "127.0.0.1:1",
		"-webhook-dir", t.TempDir()}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "loadgen webhook-ca -dir") {
		t.Errorf("run with a directory without CA: %v", err)
	}
	err = run(context.Background(), []string{"run", "-scenario", "async-single", "-rate", "1", "-seed", seed, "-addr", "127.0.0.1:1",
		"-webhook-dir", dir}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "no edge answers") {
		t.Errorf("run with the CA made: %v, want it to look for the stack", err)
	}
	if err := run(context.Background(), []string{"webhook-ca"}, &out, &out); err == nil {
		t.Error("webhook-ca without -dir was accepted")
	}
}
