package capacity

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestPlan checks the model's arithmetic on round numbers, without
// pictures (TestPlanPictures plans them), in instances of 8 cores, one of
// which holds core on bbolt (TestPlanStores plans beyond one).
func TestPlan(t *testing.T) {
	in := DefaultInput
	in.ImageShare, in.CoresPerInstance = 0, 8
	in.PerCore = PerCore{Edge: 10000, CoreSync: 2000, CoreImage: 20, CoreAsync: 1000, Dispatcher: 500, Usage: 10000,
		CorePostgres: 1000, Postgres: 2000, PostgresStandby: 10000}
	out, err := Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	// 4,000 sync + 1,000 async: edge 5,000 req/s → 0.5 cores → 1 instance,
	// raised to the floor of 2; core 4000/2000 + 1000/1000 = 3 cores →
	// one bbolt instance (8 cores at 60 % hold 4.8); dispatcher 1000/500 = 2 cores
	// → 2; usage 0.5 → 2.
	want := map[string]struct {
		cores float64
		n     int
	}{"edge": {0.5, 2}, "core": {3, 1}, "dispatcher": {2, 2}, "usage": {0.5, 2}}
	for _, tier := range out.Tiers {
		w := want[tier.Name]
		if diff := tier.Cores - w.cores; diff > 1e-9 || diff < -1e-9 || tier.Instances != w.n {
			t.Errorf("%s: %.3f cores, %d instances; want %.3f and %d", tier.Name, tier.Cores, tier.Instances, w.cores, w.n)
		}
	}
	in.BatchSize = 20
	out, _ = Plan(in)
	if out.Tiers[0].Load != 4050 {
		t.Errorf("with batches of 20 the edge sees %v requests/s, want 4050", out.Tiers[0].Load)
	}
	var b bytes.Buffer
	out.Print(&b)
	for _, s := range []string{"5000 verifications/s, 20 % async", "dispatcher", "Assumptions", "60 % CPU",
		"else PostgreSQL with N cores): bbolt", "bbolt     core 3.00 cores busy in one instance (one file, one writer); offered", "907 GB a day"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("printed model lacks %q:\n%s", s, b.String())
		}
	}
}

// TestPlanPictures checks that core's cores follow the share of pictures:
// with no async share they are Target × (share/CoreImage +
// (1−share)/CoreSync); an async picture costs an async job plus a sync
// picture's cost beyond a sync payload's (its scan). The other tiers do not
// change with the share.
func TestPlanPictures(t *testing.T) {
	in := DefaultInput
	in.Target, in.AsyncShare, in.CoresPerInstance = 1000, 0, 200
	in.PerCore = PerCore{Edge: 10000, CoreSync: 1000, CoreImage: 10, CoreAsync: 500, Dispatcher: 500, Usage: 10000,
		CorePostgres: 1000, Postgres: 2000, PostgresStandby: 10000}
	core := func(out Output) Tier {
		for _, tier := range out.Tiers {
			if tier.Name == "core" {
				return tier
			}
		}
		t.Fatalf("no core tier in %+v", out.Tiers)
		return Tier{}
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	f := func(share, wantCores float64) {
		t.Helper()
		in.ImageShare = share
		out, err := Plan(in)
		if err != nil {
			t.Fatal(err)
		}
		if c := core(out); !near(c.Cores, wantCores) || !near(c.PerCore, in.Target/wantCores) || c.Instances != 1 {
			t.Errorf("%v pictures: core %.4f cores, %.1f per core, %d instances; want %.4f cores, %.1f per core, one instance",
				share, c.Cores, c.PerCore, c.Instances, wantCores, in.Target/wantCores)
		}
		if e := out.Tiers[0]; e.Name != "edge" || !near(e.Cores, 0.1) {
			t.Errorf("%v pictures: edge %+v, want 0.1 cores whatever the share", share, e)
		}
	}
	f(0, 1)       // 1000 payloads at 1000 a core
	f(0.02, 2.98) // 980/1000 + 20/10
	f(0.1, 10.9)  // 900/1000 + 100/10
	f(1, 100)     // 1000/10
	f(0.5, 50.5)  // 500/1000 + 500/10

	// Half async: 450 sync payloads (0.45 cores), 50 sync pictures (5),
	// 500 async jobs (1) and the scans of 50 async pictures at 0.1 − 0.001
	// CPU-seconds each (4.95): 11.4 cores, pictures 9.95 of them.
	in.AsyncShare, in.ImageShare = 0.5, 0.1
	out, err := Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	if c := core(out); !near(c.Cores, 11.4) {
		t.Errorf("half async, 10 %% pictures: core %.4f cores, want 11.4", c.Cores)
	}
	want := []struct {
		name        string
		load, cores float64
	}{{"payload, sync", 450, 0.45}, {"picture, sync", 50, 5}, {"job, async", 500, 1}, {"picture's scan, async", 50, 4.95}}
	if len(out.Core) != len(want) {
		t.Fatalf("core's work %+v, want %d lines", out.Core, len(want))
	}
	for i, w := range want {
		if c := out.Core[i]; c.Name != w.name || !near(c.Load, w.load) || !near(c.Cores, w.cores) {
			t.Errorf("core's work %d: %+v, want %s %v/s in %v cores", i, c, w.name, w.load, w.cores)
		}
	}
	if cpu, n := out.PictureShare(); !near(cpu, 9.95/11.4) || n != 100 {
		t.Errorf("pictures take %.4f of core's CPU, a picture %v payloads; want %.4f and 100", cpu, n, 9.95/11.4)
	}
	var b bytes.Buffer
	out.Print(&b)
	for _, s := range []string{"1000 verifications/s, 50 % async (mean batch 1), 10 % by picture", "Core's work", "picture's scan, async",
		"pictures: 10 % of the verifications, 87 % of core's CPU on bbolt; a picture costs core as much as 100 payloads",
		"bbolt     core 11.40 cores busy in one instance"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("printed model lacks %q:\n%s", s, b.String())
		}
	}

	// Given numbers that make a picture no dearer than a payload add no
	// scan to async pictures.
	in.PerCore.CoreImage = 2000
	if out, err = Plan(in); err != nil || len(out.Core) != 3 || !near(core(out).Cores, 450.0/1000+50.0/2000+1) {
		t.Errorf("%v: core %+v, work %+v", err, core(out), out.Core)
	}
}

func TestPlanRefusesBadInput(t *testing.T) {
	in := DefaultInput
	in.Target, in.AsyncShare, in.PerCore.Usage, in.Utilisation = 0, 2, 0, 0
	_, err := Plan(in)
	for _, s := range []string{"target", "async share", "usage", "utilisation"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("error %v does not name %s", err, s)
		}
	}
	for _, share := range []float64{-0.1, 1.5, math.NaN()} {
		in := DefaultInput
		in.ImageShare, in.PerCore.CoreImage = share, 0
		_, err := Plan(in)
		for _, s := range []string{"image share", "core image"} {
			if err == nil || !strings.Contains(err.Error(), s) {
				t.Errorf("image share %v: error %v does not name %s", share, err, s)
			}
		}
	}
}

// TestSourceSurvivesJSON: a plan read back from bench.json says where its
// per-core numbers came from, as the printed one did.
func TestSourceSurvivesJSON(t *testing.T) {
	in := DefaultInput
	in.Source = Source{CoreImage: "measured: bank-image", Dispatcher: "measured: async-callbacks", Usage: "measured: usage-drain"}
	out, err := Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var back Output
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	var before, after bytes.Buffer
	out.Print(&before)
	back.Print(&after)
	if before.String() != after.String() || !strings.Contains(after.String(), "measured: usage-drain") || !strings.Contains(after.String(), "picture, sync") {
		t.Errorf("printed before JSON:\n%s\nafter:\n%s", before.String(), after.String())
	}
}

// TestPlanStores plans core's store as a planner reads it: bbolt while one
// core instance holds the target, else PostgreSQL with as many cores as
// the target needs (at least two), a primary and a standby sized from
// their CPU per verification, up to the commit ceiling. Instances of 2
// cores at 50 % CPU: one holds 1 core, 2,000 payloads a second on bbolt.
func TestPlanStores(t *testing.T) {
	in := DefaultInput
	in.AsyncShare, in.ImageShare, in.CoresPerInstance, in.Utilisation = 0, 0, 2, 0.5
	in.PerCore = PerCore{Edge: 10000, CoreSync: 2000, CoreImage: 20, CoreAsync: 1000, Dispatcher: 500, Usage: 10000,
		CorePostgres: 1800, Postgres: 2000, PostgresStandby: 10000}
	in.PostgresCeiling = 5000
	plan := func(target float64) (Output, string) {
		t.Helper()
		in.Target = target
		out, err := Plan(in)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		out.Print(&b)
		return out, b.String()
	}
	tier := func(out Output, name string) *Tier {
		for i := range out.Tiers {
			if out.Tiers[i].Name == name {
				return &out.Tiers[i]
			}
		}
		return nil
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

	// 1,000/s: 0.5 cores, one bbolt instance holds them; PostgreSQL is
	// offered too, not planned: no PostgreSQL tier.
	out, text := plan(1000)
	if c := tier(out, "core"); out.Store != Bbolt || c.Instances != 1 || !near(c.Cores, 0.5) || tier(out, "postgres") != nil ||
		!out.Stores[0].Offered || !out.Stores[1].Offered {
		t.Errorf("1000/s: store %s, core %+v, stores %+v\n%s", out.Store, c, out.Stores, text)
	}

	// 2,100/s: 1.05 cores on bbolt, more than one instance holds; on
	// PostgreSQL a verification costs core 1/1800 s: 1.17 cores in two
	// instances, the primary 1.05 cores busy (a server of 3 cores at
	// 50 %), the standby 0.21.
	out, text = plan(2100)
	c, pg := tier(out, "core"), tier(out, "postgres")
	if out.Store != Postgres || out.Stores[0].Offered || c.Instances != 2 || !near(c.Cores, 2100.0/1800) ||
		pg == nil || pg.Instances != 2 || !near(pg.Cores, 1.05+0.21) || out.Stores[1].ServerCores != 3 {
		t.Errorf("2100/s: store %s, core %+v, postgres %+v, stores %+v\n%s", out.Store, c, pg, out.Stores, text)
	}
	for _, s := range []string{
		"bbolt     core 1.05 cores busy in one instance (one file, one writer); NOT offered: needs 1.05 cores, more than one instance of 2 cores at 50 % CPU (1.00)",
		"postgres  core 1.17 cores busy in 2 instances of 2 cores; PostgreSQL primary 1.05 cores busy, standby 0.21: two servers of 3 cores at 50 % CPU",
		"commit ceiling 5000 verifications/s, the target 42 % of it; offered",
		"store on PostgreSQL                2100      18000     0.12",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("2100/s: printed plan lacks %q:\n%s", s, text)
		}
	}

	// 4,000/s: 2.22 cores, three instances; PostgreSQL's primary 2 cores
	// busy, a server of 4.
	out, _ = plan(4000)
	if c := tier(out, "core"); c.Instances != 3 || out.Stores[1].ServerCores != 4 {
		t.Errorf("4000/s: core %+v, stores %+v", c, out.Stores)
	}

	// 6,000/s: above the commit ceiling, which cores do not raise: no store
	// is offered, and the plan says so.
	out, text = plan(6000)
	if out.Stores[1].Offered || !strings.Contains(text, "NOT offered: the target is above PostgreSQL's commit ceiling of 5000 verifications/s") {
		t.Errorf("6000/s: stores %+v\n%s", out.Stores, text)
	}

	// A store that costs core less than bbolt (its pages are PostgreSQL's
	// work): the store's line takes cores away.
	in.PerCore.CorePostgres = 4000
	out, _ = plan(3000)
	if c := tier(out, "core"); out.Store != Postgres || !near(c.Cores, 0.75) || c.Instances != 2 || !near(out.Stores[1].Work.Cores, -0.75) {
		t.Errorf("PostgreSQL cheaper for core: core %+v, stores %+v", c, out.Stores)
	}
}
