package report

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/bench/load"
)

// mixedRun makes a mixed run on a manual clock: 100 requests 100 ms apart
// (so none waits for another), one in ten a picture (bank-image) answered
// in 40 ms, the first two of them refused; the rest payloads answered in
// 2 ms, one in ten of them duplicates. Core used 0.2 CPU-seconds.
func mixedRun(t *testing.T) *Scenario {
	t.Helper()
	s, _ := load.NewSchedule(load.Stage{Duration: 10 * time.Second, From: 10, To: 10})
	clk := load.NewManualClock(time.Unix(1_800_000_000, 0))
	res, err := load.Run(context.Background(), load.Plan{Schedule: s, Clock: clk, MaxInFlight: 1}, func(_ context.Context, r load.Request) load.Outcome {
		switch {
		case r.Seq%10 == 0:
			clk.Advance(40 * time.Millisecond)
			if r.Seq < 20 {
				return load.Outcome{Code: "500", Part: "bank-image"}
			}
			return load.Outcome{Code: "200", OK: true, Part: "bank-image"}
		case r.Seq%10 == 5:
			clk.Advance(2 * time.Millisecond)
			return load.Outcome{Code: "200", OK: true, Part: "duplicates"}
		}
		clk.Advance(2 * time.Millisecond)
		return load.Outcome{Code: "200", OK: true, Part: "bank-v2"}
	})
	if err != nil {
		t.Fatal(err)
	}
	sc := FromResult("mixed", "about", "open", "10/s 10s", 1, res)
	sc.SetKinds(res.Parts, func(part string) string {
		if part == "bank-image" {
			return "image"
		}
		return "payload"
	})
	sc.SetCPU(map[string]time.Duration{"core": 200 * time.Millisecond})
	return sc
}

// pure is a scenario run on its own whose core served perCore
// verifications a CPU-second.
func pure(name string, perCore float64) *Scenario {
	return &Scenario{Name: name, PerCore: map[string]float64{"core": perCore}}
}

// TestKinds reports a mix's pictures and payloads apart: counts, shares,
// latency over each kind's own requests, and core's CPU per verification
// of each kind derived from the mix's scenarios run on their own (bank-v2
// 250 µs, duplicates 100 µs, bank-image 20 ms), in the table, the HTML and
// the JSON; the derived costs are set against the CPU the mix measured.
func TestKinds(t *testing.T) {
	mix := mixedRun(t)
	if len(mix.Kinds) != 2 {
		t.Fatalf("kinds %+v", mix.Kinds)
	}
	img, pay := mix.Kinds[0], mix.Kinds[1]
	if img.Name != "image" || img.Requests != 10 || img.OK != 8 || img.Failed != 2 || img.Share != 0.1 ||
		img.Latency.P50 < 40 || img.Latency.P50 > 41 || img.OKLatency.Count != 8 {
		t.Errorf("image %+v", img)
	}
	if pay.Name != "payload" || pay.Requests != 90 || pay.OK != 90 || pay.OKByPart["bank-v2"] != 80 || pay.OKByPart["duplicates"] != 10 ||
		pay.Latency.P99 < 2 || pay.Latency.P99 > 2.1 {
		t.Errorf("payload %+v", pay)
	}
	if want := 8 / mix.Elapsed; math.Abs(img.Verifications-want) > 1e-9 {
		t.Errorf("image verif/s %v, want %v", img.Verifications, want)
	}
	r := &Report{Version: Version, Created: time.Now(), Scenarios: []*Scenario{pure("bank-v2", 4000), mix, pure("duplicates", 10000), pure("bank-image", 50)}}
	r.DeriveKindCPU()
	img, pay = mix.Kinds[0], mix.Kinds[1]
	// Payload: (80 × 250 + 10 × 100) / 90 µs. Together: 8 × 20 ms + 90 ×
	// 233.3 µs = 0.181 s of the 0.2 s measured.
	if math.Abs(img.CoreCPU-20000) > 1e-6 || math.Abs(pay.CoreCPU-21000.0/90) > 1e-6 || math.Abs(mix.CoreCPUExplained-0.905) > 1e-9 {
		t.Errorf("core CPU: image %v µs, payload %v µs, explained %v; want 20000, 233.3, 0.905", img.CoreCPU, pay.CoreCPU, mix.CoreCPUExplained)
	}
	var b strings.Builder
	r.Table(&b)
	table := b.String()
	for _, re := range []string{
		`(?m)^ *scenario +kind +requests +share +verif/s +p50 ms +p90 ms +p99 ms +p99\.9 ms +max ms +ok p50 ms +ok p99 ms +errors +core CPU µs/verif *$`,
		`(?m)^ *mixed +image +10 +10\.0% +1 +40\.\d +40\.\d +40\.\d +40\.\d +40\.\d +40\.\d +40\.\d +20\.0% +20,000 *$`,
		`(?m)^ *mixed +payload +90 +90\.0% +9 +2\.\d\d +2\.\d\d +2\.\d\d +2\.\d\d +2\.\d\d +2\.\d\d +2\.\d\d +0 +233 *$`,
		`\n  image: core CPU per verification derived: bank-image on its own in this run\n`,
		`\n  payload: core CPU per verification derived: bank-v2, duplicates on their own in this run, weighted by the mix's successful requests\n`,
		`\n  the kinds' derived costs account for 90 % of the 0\.2 s of core CPU the run measured\n`,
	} {
		if !regexp.MustCompile(re).MatchString(table) {
			t.Errorf("table lacks %s:\n%s", re, table)
		}
	}
	dir := t.TempDir()
	if err := r.WriteHTML(filepath.Join(dir, "r.html")); err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(filepath.Join(dir, "r.html"))
	for _, want := range []string{"<h3>By kind</h3>", "<th>core CPU µs/verif</th>", "<td>image</td><td>10</td><td>10.0%</td>", "<td>20,000</td>", "<td>233</td>",
		"Image: core CPU per verification derived: bank-image on its own in this run.", "The kinds&#39; derived costs account for 90 %"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if err := r.WriteJSON(filepath.Join(dir, "r.json")); err != nil {
		t.Fatal(err)
	}
	back, err := Read(filepath.Join(dir, "r.json"))
	if err != nil {
		t.Fatal(err)
	}
	if k := back.Find("mixed").Kinds; len(k) != 2 || k[0].CoreCPU != 20000 || k[0].Latency != img.Latency || k[1].OKByPart["duplicates"] != 10 || back.Find("mixed").CoreCPUExplained != mix.CoreCPUExplained {
		t.Errorf("kinds read back %+v", k)
	}

	// Without duplicates on their own, the payloads' cost is bank-v2's,
	// and says what it left out; without bank-image, the pictures' cost is
	// not known, nor what the kinds add up to.
	r.Scenarios = []*Scenario{pure("bank-v2", 4000), mix}
	r.DeriveKindCPU()
	img, pay = mix.Kinds[0], mix.Kinds[1]
	if img.CoreCPU != 0 || img.CoreCPUSource != "not derived: bank-image not run on its own in this run" ||
		pay.CoreCPU != 250 || pay.CoreCPUSource != "derived: bank-v2 on its own in this run; left out, not run on their own: duplicates" || mix.CoreCPUExplained != 0 {
		t.Errorf("with bank-v2 alone: image %v %q, payload %v %q, explained %v", img.CoreCPU, img.CoreCPUSource, pay.CoreCPU, pay.CoreCPUSource, mix.CoreCPUExplained)
	}
	b.Reset()
	r.Table(&b)
	if !regexp.MustCompile(`(?m)^ *mixed +image +10 .* 20\.0% +- *$`).MatchString(b.String()) || strings.Contains(b.String(), "account for") {
		t.Errorf("table without bank-image's own run:\n%s", b.String())
	}

	// A report without a mix has no kind table.
	b.Reset()
	(&Report{Version: Version, Scenarios: []*Scenario{pure("bank-v2", 4000)}}).Table(&b)
	if strings.Contains(b.String(), "by kind") {
		t.Errorf("a report without a mix has a kind table:\n%s", b.String())
	}
}

// TestCompareKinds: a mix's kinds are compared one by one, so a dearer
// picture shows though the mix's whole hides it.
func TestCompareKinds(t *testing.T) {
	old, cur := mixedRun(t), mixedRun(t)
	old.Kinds[0].CoreCPU, cur.Kinds[0].CoreCPU = 20000, 30000
	var b strings.Builder
	Compare(&b, &Report{Version: Version, Scenarios: []*Scenario{old}}, &Report{Version: Version, Scenarios: []*Scenario{cur}})
	for _, re := range []string{`(?m)^ *mixed +image core µs/verif +20000 +30000 +\+50\.0% *$`, `(?m)^ *mixed +payload p99 ms +2\.\d\d +2\.\d\d += *$`} {
		if !regexp.MustCompile(re).MatchString(b.String()) {
			t.Errorf("compare lacks %s:\n%s", re, b.String())
		}
	}
}

func TestMicros(t *testing.T) {
	f := func(v float64, want string) {
		t.Helper()
		if got := micros(v); got != want {
			t.Errorf("micros(%v) = %q, want %q", v, got, want)
		}
	}
	f(45.3, "45.3")
	f(287.4, "287")
	f(1652.4, "1,650")
	f(19607.8, "19,600")
	f(1234567, "1,230,000")
}
