// Package alerts tests the platform's Prometheus alerting rules
// (slipverify.rules.yml): promtool checks them and runs their unit tests,
// every metric and label value they select is one the programs export, and
// the README says what each alert means.
package alerts

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"gopkg.in/yaml.v3"

	"github.com/slipverify/slipverify/core/bank/upstream"
	"github.com/slipverify/slipverify/core/lib/testnet"
)

const (
	rulesFile = "slipverify.rules.yml"
	testsFile = "slipverify_test.yml"
)

// external are the metrics the rules take from exporters outside the
// platform, by exporter: the test does not look for them in a tier.
var external = map[string]string{
	"node_filesystem_avail_bytes": "node_exporter",
	"node_filesystem_size_bytes":  "node_exporter",
}

func TestMain(m *testing.M) { testnet.Main(m) }

// promtool returns the path of promtool. Without it the test skips, except
// under CI, which must run the rules' tests.
func promtool(t *testing.T) string {
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found: CI must test the alert rules (apt-get install prometheus)")
		}
		t.Skip("promtool not found (apt-get install prometheus)")
	}
	return path
}

// TestPromtool: the rules are valid (promtool check rules) and pass their
// unit tests (promtool test rules), in which each alert fires on series
// that should fire it and stays silent on series that should not.
func TestPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", testsFile}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// rule is one alerting rule of the rules file.
type rule struct {
	Alert string `yaml:"alert"`
	Expr  string `yaml:"expr"`
}

func loadRules(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var rules []rule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatal("no rules")
	}
	return rules
}

// TestEveryAlertTestedAndDocumented: each alert has a unit test in which it
// fires and one in which it stays silent, and a section of README.md (a
// heading with its name) that says what it means and what to do.
func TestEveryAlertTestedAndDocumented(t *testing.T) {
	b, err := os.ReadFile(testsFile)
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range loadRules(t) {
		if !fires[r.Alert] || !silent[r.Alert] {
			t.Errorf("%s: %s has no test in which it fires (%v) or none in which it stays silent (%v)", r.Alert, testsFile, fires[r.Alert], silent[r.Alert])
		}
		if !regexp.MustCompile(`(?m)^### ` + r.Alert + `$`).Match(readme) {
			t.Errorf("%s: README.md has no section ### %s", r.Alert, r.Alert)
		}
	}
}

// TestRulesUseExportedMetrics: every metric the rules select is one a tier
// exports, and every label value they select by equality (or by a regular
// expression that lists values) is on one of its series, in the exposition
// of the programs themselves: core, an edge, a dispatcher and a usage tier
// started for the test, and the bank upstreams' guard (whose metrics core
// registers only with a real upstream configured). A metric renamed in the
// code fails this test instead of silencing its alert.
func TestRulesUseExportedMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the programs")
	}
	rules := loadRules(t)
	want := map[string][]selector{}
	for _, r := range rules {
		for _, s := range selectors(r.Expr) {
			if _, ok := external[s.name]; !ok {
				want[s.name] = append(want[s.name], s)
			}
		}
	}
	if len(want) == 0 {
		t.Fatal("the rules select no metric")
	}

	var bank bytes.Buffer
	set := metrics.NewSet()
	upstream.NewGuard("kbank", upstream.Limits{}, time.Now, set)
	set.WritePrometheus(&bank)

	core := testnet.StartCore(t, "../dev/seed.json")
	edgeMetrics := testnet.FreeAddr(t)
	testnet.StartEdge(t, core.Addr, "SLIP_EDGE_METRICS_ADDR="+edgeMetrics)
	noKafka := testnet.FreeAddr(t) // nobody listens: the consumers retry, /metrics answers meanwhile
	dispatcher := testnet.StartDispatcher(t, noKafka)
	usageAddr := testnet.FreeAddr(t)
	usage := testnet.Start(t, testnet.Build(t, "usage/cmd/usage"), "SLIP_USAGE_ADDR="+usageAddr, "SLIP_KAFKA_ADDR="+noKafka,
		"SLIP_CLICKHOUSE_ADDR="+testnet.FreeAddr(t), "SLIP_EDGE_TOKEN=")
	urls := []string{core.URL() + "/metrics", "http://" + edgeMetrics + "/metrics", dispatcher.URL() + "/metrics", "http://" + usageAddr + "/metrics"}
	testnet.WaitHTTP(t, urls[3], time.Minute, usage)

	// A tier registers some gauges as it starts its loops, after its
	// listener: the scrape is taken again until every metric is there, or
	// the time is up.
	var series map[string][]map[string]string
	var problems []string
	testnet.Eventually(t, 30*time.Second, func() bool {
		series = parseExposition(bank.String())
		for _, u := range urls {
			for name, ls := range parseExposition(scrape(t, u)) {
				series[name] = append(series[name], ls...)
			}
		}
		problems = check(want, series)
		return len(problems) == 0
	}, func() string { return "the rules select what no tier exports:\n" + strings.Join(problems, "\n") })
}

// TestExternalMetricsExported: the metrics the rules take from
// node_exporter are in its exposition, when prometheus-node-exporter (which
// the prometheus package recommends) is installed.
func TestExternalMetricsExported(t *testing.T) {
	bin, err := exec.LookPath("prometheus-node-exporter")
	if err != nil {
		t.Skip("prometheus-node-exporter not found")
	}
	addr := testnet.FreeAddr(t)
	cmd := exec.Command(bin, "--web.listen-address="+addr, "--collector.disable-defaults", "--collector.filesystem")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := "http://" + addr + "/metrics"
	testnet.WaitHTTP(t, url, time.Minute, nil)
	series := parseExposition(scrape(t, url))
	for name, exporter := range external {
		if _, ok := series[name]; !ok {
			t.Errorf("%s exports no %s\n%s", exporter, name, out.String())
		}
	}
}

func scrape(t *testing.T, url string) string {
	res, err := http.Get(url)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// check returns what of want the series lack.
func check(want map[string][]selector, series map[string][]map[string]string) []string {
	var problems []string
	for name, sels := range want {
		all, ok := series[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: no such metric", name))
			continue
		}
		for _, s := range sels {
			for _, m := range s.matchers {
				for _, v := range m.values {
					if !slices.ContainsFunc(all, func(ls map[string]string) bool { return ls[m.label] == v }) {
						problems = append(problems, fmt.Sprintf("%s: no series with %s=%q", name, m.label, v))
					}
				}
			}
		}
	}
	sort.Strings(problems)
	return problems
}

// parseExposition returns the series of a Prometheus text exposition by
// metric name, each as its labels.
func parseExposition(text string) map[string][]map[string]string {
	out := map[string][]map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			continue
		}
		name, ls := line[:end], map[string]string{}
		if line[end] == '{' {
			for _, m := range labelPair.FindAllStringSubmatch(line[end:strings.LastIndexByte(line, '}')+1], -1) {
				ls[m[1]] = strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\n`, "\n").Replace(m[2])
			}
		}
		out[name] = append(out[name], ls)
	}
	return out
}

var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// selector is a metric a rule selects, with the label values it requires.
type selector struct {
	name     string
	matchers []matcher
}

// matcher is a label a selector requires to hold one of values (= "x", or
// =~ "x|y" where every alternative is a plain value). Negative matchers
// and regular expressions of other shapes require nothing of the series.
type matcher struct {
	label  string
	values []string
}

// token is an identifier, a string, or a single character of PromQL.
var token = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\d+[a-zA-Z0-9.]*|=~|!=|!~|\S`)

// notMetric are PromQL's keywords and aggregations (which "by" may
// follow before the "("): an identifier that is one of them, or that a "("
// follows (a function), selects no metric.
var notMetric = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true,
	"without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true, "count": true,
	"count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true}

// grouping are the keywords a list of label names in parentheses follows.
var grouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// selectors returns the metrics expr selects, read as PromQL tokens: an
// identifier that is no keyword, no function and no label in a grouping,
// with its label matchers.
func selectors(expr string) []selector {
	toks := token.FindAllString(expr, -1)
	var out []selector
	for i := 0; i < len(toks); i++ {
		tok := toks[i]
		next := ""
		if i+1 < len(toks) {
			next = toks[i+1]
		}
		switch {
		case tok == "[": // a range or a subquery's: durations
			for i < len(toks) && toks[i] != "]" {
				i++
			}
		case grouping[tok] && next == "(":
			for i < len(toks) && toks[i] != ")" {
				i++
			}
		case !isIdent(tok) || notMetric[tok] || next == "(":
		default:
			s := selector{name: tok}
			if next == "{" {
				i += 2
				for ; i+2 < len(toks) && toks[i] != "}"; i += 3 {
					label, op, value := toks[i], toks[i+1], unquote(toks[i+2])
					switch {
					case op == "=":
						s.matchers = append(s.matchers, matcher{label, []string{value}})
					case op == "=~" && regexp.MustCompile(`^[a-zA-Z0-9_./ -]+(\|[a-zA-Z0-9_./ -]+)*$`).MatchString(value):
						s.matchers = append(s.matchers, matcher{label, strings.Split(value, "|")})
					}
					if i+3 < len(toks) && toks[i+3] == "," {
						i++
					}
				}
			}
			out = append(out, s)
		}
	}
	return out
}

func isIdent(tok string) bool {
	c := tok[0]
	return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') {
		return strings.NewReplacer(`\"`, `"`, `\'`, `'`, `\\`, `\`).Replace(s[1 : len(s)-1])
	}
	return s
}

// TestSelectors: the reading of rule expressions finds each metric and its
// matchers, and nothing else.
func TestSelectors(t *testing.T) {
	got := selectors(`sum by (upstream, instance) (rate(a_total{outcome="error", x!="y"}[5m])) / on() group_left(z)` +
		` b{result=~"http_error|network_error",c=~"x.*"} > 0.2 and predict_linear(c[6h], 24 * 3600) < 0` +
		` or label_replace(d > 1, "topic", "t", "", "") unless bool e offset 5m`)
	want := []selector{
		{"a_total", []matcher{{"outcome", []string{"error"}}}},
		{"b", []matcher{{"result", []string{"http_error", "network_error"}}}},
		{"c", nil}, {"d", nil}, {"e", nil},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}
