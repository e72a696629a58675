package suite

import (
	"testing"

	"github.com/slipverify/slipverify/bench/capacity"
	"github.com/slipverify/slipverify/bench/report"
)

// measuredReport is a report whose sync and async scenarios measured every
// tier's per-core number.
func measuredReport() *report.Report {
	return &report.Report{Version: report.Version, Scenarios: []*report.Scenario{
		{Name: "bank-v2 peak", PerCore: map[string]float64{"edge": 9000, "core": 1500, "usage": 30000}},
		{Name: "async-single", PerCore: map[string]float64{"core": 700, "dispatcher": 1600, "usage": 25000}},
		{Name: "bank-image", PerCore: map[string]float64{"edge": 800, "core": 40, "usage": 900}},
	}}
}

// TestModelMeasured checks that measured numbers replace the defaults,
// each naming the scenario it came from.
func TestModelMeasured(t *testing.T) {
	out := Model(measuredReport(), capacity.DefaultInput)
	if out == nil {
		t.Fatal("no model")
	}
	p, src := out.Input.PerCore, out.Input.Source
	d := capacity.DefaultPerCore
	if p != (capacity.PerCore{Edge: 9000, CoreSync: 1500, CoreImage: 40, CoreAsync: 700, Dispatcher: 1600, Usage: 30000,
		CorePostgres: d.CorePostgres, Postgres: d.Postgres, PostgresStandby: d.PostgresStandby}) {
		t.Errorf("per core %+v", p)
	}
	if src.Edge != "measured: bank-v2 peak" || src.CoreImage != "measured: bank-image" || src.CoreAsync != "measured: async-single" || src.Usage != "measured: bank-v2 peak" {
		t.Errorf("sources %+v", src)
	}
}

// TestModelMixedNotPayload: a mixed run's core number blends its pictures
// in, which the model adds apart, so it never stands for core's payloads
// (the default does, said so); the edge and usage may still take it.
func TestModelMixedNotPayload(t *testing.T) {
	rep := &report.Report{Version: report.Version, Scenarios: []*report.Scenario{
		{Name: "mixed", PerCore: map[string]float64{"edge": 5000, "core": 900, "usage": 20000}},
	}}
	out := Model(rep, capacity.DefaultInput)
	if out == nil {
		t.Fatal("no model")
	}
	p, src := out.Input.PerCore, out.Input.Source
	if p.CoreSync != capacity.DefaultPerCore.CoreSync || src.CoreSync != "" || p.CoreImage != capacity.DefaultPerCore.CoreImage {
		t.Errorf("core from a mix: %+v from %+v", p, src)
	}
	if p.Edge != 5000 || src.Edge != "measured: mixed" {
		t.Errorf("edge %v from %q, want mixed's 5000", p.Edge, src.Edge)
	}
}

// TestModelGivenWins gives every tier's number, as loadgen's per-core
// flags do: each stands, though the report measured all of them.
func TestModelGivenWins(t *testing.T) {
	in := capacity.DefaultInput
	in.PerCore = capacity.PerCore{Edge: 1000, CoreSync: 100, CoreImage: 5, CoreAsync: 50, Dispatcher: 10, Usage: 10,
		CorePostgres: 80, Postgres: 60, PostgresStandby: 300}
	in.PostgresCeiling = 20000
	in.Source = capacity.Source{Edge: "given", CoreSync: "given", CoreImage: "given", CoreAsync: "given", Dispatcher: "given", Usage: "given",
		CorePostgres: "given", Postgres: "given", PostgresStandby: "given", PostgresCeiling: "given"}
	out := Model(measuredReport(), in)
	if out == nil {
		t.Fatal("no model")
	}
	if out.Input.PerCore != in.PerCore || out.Input.Source != in.Source {
		t.Errorf("given numbers were replaced: %+v from %+v", out.Input.PerCore, out.Input.Source)
	}
	for _, tier := range out.Tiers {
		if tier.Source != "given" {
			t.Errorf("%s: source %q, want given", tier.Name, tier.Source)
		}
	}
}

// TestModelStores plans from runs side by side on both stores, as loadgen
// suite -store bbolt,postgres makes them: core's payloads on bbolt come
// from the bbolt runs, on PostgreSQL from the PostgreSQL runs with
// PostgreSQL's primary, standby and commit ceiling, each the median of the
// runs; a rate one core instance holds stays on bbolt, a rate above it is
// planned on PostgreSQL with more cores.
func TestModelStores(t *testing.T) {
	bbolt := func(core float64) *report.Report {
		return &report.Report{Version: report.Version, Store: "bbolt", Cores: 1, Scenarios: []*report.Scenario{
			{Name: "bank-v2 peak", PerCore: map[string]float64{"edge": 9000, "core": core, "usage": 30000}},
		}}
	}
	pg := func(core, primary, best float64) *report.Report {
		return &report.Report{Version: report.Version, Store: "postgres", Cores: 2, Scenarios: []*report.Scenario{
			{Name: "bank-v2 peak", Units: 1, Steps: []report.Step{{OKRate: best / 2}, {OKRate: best}, {OKRate: best * 0.9}},
				PerCore: map[string]float64{"edge": 9000, "core": core, "postgres": primary / 2, "postgres/primary": primary, "postgres/standby": 4 * primary, "usage": 30000}},
		}}
	}
	in := capacity.DefaultInput
	in.AsyncShare, in.ImageShare = 0, 0
	in.Target = 1000
	out, err := ModelOf(in, bbolt(5000), pg(2500, 1900, 2100), bbolt(6000), pg(3000, 2000, 2400), bbolt(7000), pg(2000, 2100, 2300))
	if err != nil {
		t.Fatal(err)
	}
	p, src := out.Input.PerCore, out.Input.Source
	if p.CoreSync != 6000 || p.CorePostgres != 2500 || p.Postgres != 2000 || p.PostgresStandby != 8000 || out.Input.PostgresCeiling != 2300 {
		t.Errorf("per core %+v, ceiling %v; want the medians: 6000 on bbolt, 2500 on PostgreSQL, primary 2000, standby 8000, ceiling 2300", p, out.Input.PostgresCeiling)
	}
	if src.CoreSync != "measured: bank-v2 peak, median of 3 runs" || src.CorePostgres != "measured: bank-v2 peak on PostgreSQL, median of 3 runs" ||
		src.PostgresCeiling != "measured: bank-v2 peak on PostgreSQL's best step, a floor, median of 3 runs" {
		t.Errorf("sources %+v", src)
	}
	// 1,000/s: 1000/6000 = 0.17 cores, one instance of 2 at 60 % holds it.
	if out.Store != capacity.Bbolt {
		t.Errorf("1000/s planned on %s, want bbolt", out.Store)
	}
	// 9,000/s needs 1.5 cores on bbolt, more than one instance holds,
	// and is above PostgreSQL's ceiling: PostgreSQL planned, not offered.
	in.Target = 9000
	if out, err = ModelOf(in, bbolt(6000), pg(2500, 2000, 2300)); err != nil || out.Store != capacity.Postgres || out.Stores[1].Offered {
		t.Errorf("9000/s: %v, %+v", err, out)
	}
}
