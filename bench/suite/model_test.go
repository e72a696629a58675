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
	if p != (capacity.PerCore{Edge: 9000, CoreSync: 1500, CoreAsync: 700, Dispatcher: 1600, Usage: 30000}) {
		t.Errorf("per core %+v", p)
	}
	if src.Edge != "measured: bank-v2 peak" || src.CoreAsync != "measured: async-single" || src.Usage != "measured: bank-v2 peak" {
		t.Errorf("sources %+v", src)
	}
}

// TestModelGivenWins gives every tier's number, as loadgen's per-core
// flags do: each stands, though the report measured all of them.
func TestModelGivenWins(t *testing.T) {
	in := capacity.DefaultInput
	in.PerCore = capacity.PerCore{Edge: 1000, CoreSync: 100, CoreAsync: 50, Dispatcher: 10, Usage: 10}
	in.Source = capacity.Source{Edge: "given", CoreSync: "given", CoreAsync: "given", Dispatcher: "given", Usage: "given"}
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
