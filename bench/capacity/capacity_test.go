package capacity

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestPlan checks the model's arithmetic on round numbers, without
// pictures (TestPlanPictures plans them).
func TestPlan(t *testing.T) {
	in := DefaultInput
	in.ImageShare = 0
	in.PerCore = PerCore{Edge: 10000, CoreSync: 2000, CoreImage: 20, CoreAsync: 1000, Dispatcher: 500, Usage: 10000}
	out, err := Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	// 4,000 sync + 1,000 async: edge 5,000 req/s → 0.5 cores → 1 instance,
	// raised to the floor of 2; core 4000/2000 + 1000/1000 = 3 cores →
	// one instance always (of 3/0.6 = 5 cores); dispatcher 1000/500 = 2 cores
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
		"core is one instance, always (one bbolt file), of at least 5 cores", "907 GB a day"} {
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
	in.Target, in.AsyncShare = 1000, 0
	in.PerCore = PerCore{Edge: 10000, CoreSync: 1000, CoreImage: 10, CoreAsync: 500, Dispatcher: 500, Usage: 10000}
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
		"pictures: 10 % of the verifications, 87 % of core's CPU; a picture costs core as much as 100 payloads",
		"core is one instance, always (one bbolt file), of at least 19 cores"} {
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
