package capacity

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestPlan checks the model's arithmetic on round numbers.
func TestPlan(t *testing.T) {
	in := DefaultInput
	in.PerCore = PerCore{Edge: 10000, CoreSync: 2000, CoreAsync: 1000, Dispatcher: 500, Usage: 10000}
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

func TestPlanRefusesBadInput(t *testing.T) {
	in := DefaultInput
	in.Target, in.AsyncShare, in.PerCore.Usage, in.Utilisation = 0, 2, 0, 0
	_, err := Plan(in)
	for _, s := range []string{"target", "async share", "usage", "utilisation"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("error %v does not name %s", err, s)
		}
	}
}

// TestSourceSurvivesJSON: a plan read back from bench.json says where its
// per-core numbers came from, as the printed one did.
func TestSourceSurvivesJSON(t *testing.T) {
	in := DefaultInput
	in.Source = Source{Dispatcher: "measured: async-callbacks", Usage: "measured: usage-drain"}
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
	if before.String() != after.String() || !strings.Contains(after.String(), "measured: usage-drain") {
		t.Errorf("printed before JSON:\n%s\nafter:\n%s", before.String(), after.String())
	}
}
