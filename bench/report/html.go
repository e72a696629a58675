package report

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"os"
	"strings"
)

// WriteHTML writes r as one self-contained page: styles and charts inline,
// no script, nothing fetched.
func (r *Report) WriteHTML(path string) error {
	var b bytes.Buffer
	if err := page.Execute(&b, r); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"num":           num,
	"capitalize":    capitalize,
	"slotWait":      func(s *Scenario) string { return capitalize(slotWait(s)) },
	"errShare":      errShare,
	"overTime":      overTime,
	"vsLoad":        vsLoad,
	"limitLine":     limitLine,
	"codes":         func(s *Scenario) string { return countList(s.ErrorCounts()) },
	"statuses":      func(cb *Callbacks) string { return countList(statusCounts(cb)) },
	"span":          func(s *Scenario) float64 { return max(s.Callbacks.Seconds, s.Elapsed) },
	"settleSummary": func(r *Report) string { return r.settleSummary() },
	"kindRows": func(r *Report) [][]string {
		var rows [][]string
		for _, s := range r.Scenarios {
			if s.Pending == "" {
				rows = append(rows, kindRows(s)...)
			}
		}
		return rows
	},
	"kindHeader": func() []string { return kindHeader },
	"kindNotes":  kindNotes,
	"capacity": func(r *Report) string {
		var b strings.Builder
		r.Capacity.Print(&b)
		return b.String()
	},
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>slipverify bench {{.Created.Format "2006-01-02 15:04"}}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:1em 0}td,th{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:right}
td:first-child,th:first-child{text-align:left}h2{margin-top:2em;border-top:2px solid #333;padding-top:.5em}
.about{color:#555}.charts{display:flex;flex-wrap:wrap;gap:1em}pre{background:#f6f6f6;padding:1em;overflow:auto}
svg text{font:11px system-ui,sans-serif;fill:#333}
</style></head><body>
<h1>slipverify bench</h1>
<p>{{.Created.Format "2006-01-02 15:04 MST"}} · {{.Host.CPUs}} CPUs {{.Host.CPUModel}} · {{.Host.GoVersion}} · edge {{.Target}}{{if .Store}} · core on {{.Store}} ({{.Cores}}){{end}}<br><code>{{.Command}}</code></p>
<p class="about">Latency is measured from the time each request was due (open loop), so queueing behind a slow server counts.
Send→answer leaves that wait out. At most a set number of requests are in flight (the in-flight cap); a request due while all slots are taken by requests the stack has not answered waits for one: that slot wait is the stack's back-pressure, counted in latency and reported apart.
Generator lag is how late the generator itself sent beyond that wait (timer wake-ups, its own work); when it is large the generator, not the stack, set the pace.
Numbers from a shared machine are noisy: compare ratios between runs, not absolute values.</p>
<table><tr><th>scenario</th><th>load</th><th>req/s</th><th>verif/s</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>max ms</th><th>ok p50 ms</th><th>ok p99 ms</th><th>errors</th></tr>
{{range .Scenarios}}{{if .Pending}}<tr><td>{{.Name}}</td><td colspan="11" style="text-align:left">pending: {{.Pending}}</td></tr>{{else}}
<tr><td><a href="#{{.Name}}">{{.Name}}</a></td><td>{{.Load}}</td><td>{{printf "%.0f" .Throughput}}</td><td>{{printf "%.0f" .Verifications}}</td><td>{{num .Latency.P50}}</td><td>{{num .Latency.P90}}</td><td>{{num .Latency.P99}}</td><td>{{num .Latency.P999}}</td><td>{{num .Latency.Max}}</td><td>{{num .OKLatency.P50}}</td><td>{{num .OKLatency.P99}}</td><td>{{errShare .}}</td></tr>{{end}}{{end}}
</table>
<p class="about">p50 … max: every completed request, refusals included; ok p50 and ok p99: successful requests only.</p>
{{with kindRows .}}<h3>By kind</h3>
<p class="about">A mix's pictures (image) and payloads apart, each kind's latency over its own requests. Core's CPU per verification of each kind is derived from the mix's scenarios run on their own (each scenario's section says which).</p>
<table><tr>{{range kindHeader}}<th>{{.}}</th>{{end}}</tr>
{{range .}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>{{end}}
{{with settleSummary .}}<p>Settling: {{.}}.</p>{{end}}
{{if .Capacity}}<h2>Capacity model</h2><pre>{{capacity .}}</pre>{{end}}
{{range .Notes}}<p class="about">{{.}}</p>{{end}}
{{range .Scenarios}}{{if not .Pending}}
<h2 id="{{.Name}}">{{.Name}}</h2><p class="about">{{.About}} — {{.Mode}} loop, {{.Load}}</p>
<p>{{.Requests}} requests in {{printf "%.1f" .Elapsed}} s: {{.OK}} ok, {{.Failed}} failed{{if .Unsent}}, {{.Unsent}} unsent{{end}}.
Successful requests only: p50 {{num .OKLatency.P50}} ms, p90 {{num .OKLatency.P90}} ms, p99 {{num .OKLatency.P99}} ms, max {{num .OKLatency.Max}} ms.
Send→answer p50 {{num .Service.P50}} ms, p99 {{num .Service.P99}} ms; generator lag p50 {{num .Lag.P50}} ms, p99 {{num .Lag.P99}} ms.
{{with slotWait .}}{{.}}.{{end}}
{{with codes .}}Errors: {{.}}.{{end}}
{{range kindNotes .}}<br>{{capitalize .}}.{{end}}
{{if .Duplicates}}Answered as duplicates: {{.Duplicates}} of {{.OK}} successful.{{end}}
{{with .Callbacks}}<br>Callbacks: {{.Stats.Delivered}} of {{.Stats.Expected}} delivered, {{.Stats.Succeeded}} successful ({{.Missing}} missing, {{.Stats.Repeats}} repeats, {{.Stats.BadSig}} bad signatures); submit→callback p50 {{num .Latency.P50}} ms, p99 {{num .Latency.P99}} ms, max {{num .Latency.Max}} ms.
{{with statuses .}}By status: {{.}}.{{end}}{{end}}
{{if .Callbacks}}Verif/s is successful callbacks over {{printf "%.1f" (span .)}} s, from the start to the last of them.{{end}}
{{with .Settle}}<br>{{if .Settled}}After it the stack {{.}}.{{else}}<strong>After it the stack {{.}}.</strong>{{end}}{{end}}</p>
<div class="charts">{{overTime .}}{{vsLoad .}}{{limitLine .}}</div>
{{end}}{{end}}
</body></html>
`))

// capitalize upper-cases the first letter of an ASCII sentence.
func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// series is one line of a chart.
type series struct {
	name   string
	color  string
	points [][2]float64
}

// chart draws lines on linear x and linear or log10 y axes as inline SVG.
func chart(title, xLabel, yLabel string, logY bool, ss []series) template.HTML {
	const w, h, left, right, top, bottom = 520.0, 280.0, 60.0, 15.0, 25.0, 40.0
	minX, maxX, minY, maxY := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, p := range s.points {
			if logY && p[1] <= 0 {
				continue
			}
			minX, maxX = math.Min(minX, p[0]), math.Max(maxX, p[0])
			minY, maxY = math.Min(minY, p[1]), math.Max(maxY, p[1])
		}
	}
	if math.IsInf(minX, 0) {
		return ""
	}
	ty := func(v float64) float64 { return v }
	if logY {
		ty = math.Log10
		minY, maxY = math.Pow(10, math.Floor(math.Log10(minY))), math.Pow(10, math.Ceil(math.Log10(maxY)))
	} else {
		minY, maxY = 0, niceCeil(maxY)
	}
	if maxX == minX {
		maxX = minX + 1
	}
	if ty(maxY) == ty(minY) {
		maxY = minY*10 + 1
	}
	px := func(x float64) float64 { return left + (x-minX)/(maxX-minX)*(w-left-right) }
	py := func(y float64) float64 {
		return h - bottom - (ty(y)-ty(minY))/(ty(maxY)-ty(minY))*(h-top-bottom)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f"><rect width="100%%" height="100%%" fill="#fff"/>`, w, h, w, h)
	fmt.Fprintf(&b, `<text x="%.0f" y="15" font-weight="bold">%s</text>`, left, template.HTMLEscapeString(title))
	// Axes and ticks.
	fmt.Fprintf(&b, `<path d="M%.0f %.0fV%.0fH%.0f" stroke="#333" fill="none"/>`, left, top, h-bottom, w-right)
	var yt []float64
	if logY {
		for v := minY; v <= maxY*1.001; v *= 10 {
			yt = append(yt, v)
		}
	} else {
		for i := range 5 {
			yt = append(yt, maxY*float64(i)/4)
		}
	}
	for _, v := range yt {
		fmt.Fprintf(&b, `<path d="M%.0f %.1fH%.0f" stroke="#eee"/><text x="%.0f" y="%.1f" text-anchor="end">%s</text>`, left, py(v), w-right, left-4, py(v)+4, tick(v))
	}
	for i := range 5 {
		x := minX + (maxX-minX)*float64(i)/4
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`, px(x), h-bottom+15, tick(x))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`, (left+w-right)/2, h-5, template.HTMLEscapeString(xLabel))
	fmt.Fprintf(&b, `<text x="12" y="%.0f" text-anchor="middle" transform="rotate(-90 12 %.0f)">%s</text>`, (top+h-bottom)/2, (top+h-bottom)/2, template.HTMLEscapeString(yLabel))
	for i, s := range ss {
		var d strings.Builder
		for _, p := range s.points {
			if logY && p[1] <= 0 {
				continue
			}
			cmd := "L"
			if d.Len() == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%.1f %.1f", cmd, px(p[0]), py(p[1]))
		}
		fmt.Fprintf(&b, `<path d="%s" stroke="%s" stroke-width="1.8" fill="none"/>`, d.String(), s.color)
		if len(s.points) <= 12 {
			for _, p := range s.points {
				if !logY || p[1] > 0 {
					fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, px(p[0]), py(p[1]), s.color)
				}
			}
		}
		fmt.Fprintf(&b, `<rect x="%.0f" y="%d" width="10" height="3" fill="%s"/><text x="%.0f" y="%d">%s</text>`,
			w-right-110, 30+i*14, s.color, w-right-96, 34+i*14, template.HTMLEscapeString(s.name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // built from numbers and escaped labels only
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func tick(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 1000:
		return fmt.Sprintf("%.0fk", v/1000)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2g", v)
}

// overTime charts p50, p99 and max latency per second, and throughput.
func overTime(s *Scenario) template.HTML {
	var p50, p99, mx, ok, fail series
	p50 = series{name: "p50 ms", color: "#1f77b4"}
	p99 = series{name: "p99 ms", color: "#d62728"}
	mx = series{name: "max ms", color: "#aaa"}
	ok = series{name: "ok/s", color: "#2ca02c"}
	fail = series{name: "failed/s", color: "#d62728"}
	for _, p := range s.Series {
		t := float64(p.T)
		p50.points = append(p50.points, [2]float64{t, p.P50})
		p99.points = append(p99.points, [2]float64{t, p.P99})
		mx.points = append(mx.points, [2]float64{t, p.Max})
		ok.points = append(ok.points, [2]float64{t, float64(p.OK)})
		fail.points = append(fail.points, [2]float64{t, float64(p.Fail)})
	}
	return chart("latency over time", "seconds", "ms (log)", true, []series{p50, p99, mx}) +
		chart("throughput over time", "seconds", "requests/s", false, []series{ok, fail})
}

// vsLoad charts latency against achieved throughput (successful requests
// completed during each step, not the rate offered), one point per step.
func vsLoad(s *Scenario) template.HTML {
	if len(s.Steps) < 2 {
		return ""
	}
	p50 := series{name: "p50 ms", color: "#1f77b4"}
	p99 := series{name: "p99 ms", color: "#d62728"}
	for _, st := range s.Steps {
		p50.points = append(p50.points, [2]float64{st.OKRate, st.Latency.P50})
		p99.points = append(p99.points, [2]float64{st.OKRate, st.Latency.P99})
	}
	return chart("latency vs achieved throughput", "successful requests/s completed in the step", "ms (log)", true, []series{p50, p99})
}

// limitLine charts the X-RateLimit-Limit seen per second, when any was.
func limitLine(s *Scenario) template.HTML {
	if _, hi := limitRange(s); hi == 0 {
		return ""
	}
	lo := series{name: "lowest", color: "#ff7f0e"}
	hi := series{name: "highest", color: "#9467bd"}
	for _, p := range s.Series {
		if p.LimitMax > 0 {
			lo.points = append(lo.points, [2]float64{float64(p.T), float64(p.LimitMin)})
			hi.points = append(hi.points, [2]float64{float64(p.T), float64(p.LimitMax)})
		}
	}
	return chart("X-RateLimit-Limit per branch", "seconds", "requests/s", false, []series{lo, hi})
}
