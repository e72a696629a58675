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
	if p != (capacity.PerCore{Edge: 9000, CoreSync: 1500, CoreImage: 40, CoreAsync: 700, Dispatcher: 1600, Usage: 30000}) {
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
	in.PerCore = capacity.PerCore{Edge: 1000, CoreSync: 100, CoreImage: 5, CoreAsync: 50, Dispatcher: 10, Usage: 10}
	in.Source = capacity.Source{Edge: "given", CoreSync: "given", CoreImage: "given", CoreAsync: "given", Dispatcher: "given", Usage: "given"}
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
