package suite

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/slipverify/slipverify/bench/report"
	"github.com/slipverify/slipverify/bench/stack"
)

// Probe is one series of a tier's Prometheus metrics and the value it has
// on a settled stack.
type Probe struct {
	Name   string  // in the report: "usage Kafka lag"
	URL    string  // the metrics endpoint
	Series string  // the series as written, labels included
	Want   float64 // its value on a settled stack
}

// Settler waits after a scenario until the stack has settled: every probe
// reads its value, on every poll for Hold in a row, within Max.
type Settler struct {
	Probes []Probe
	// Poll is the time between readings (default 100 ms).
	Poll time.Duration
	// Hold is how long the probes must keep their values: a tier may
	// publish a value it measured a while ago, and the state counts only
	// once a reading taken after it was reached agrees (default 0).
	Hold time.Duration
	// Max bounds the wait (default a minute): then the next scenario
	// begins anyway, and the report says what had not settled.
	Max    time.Duration
	Client *http.Client // default: a client with a 2 s timeout
}

// usageLagInterval is how often the usage tier measures its consumer lag
// (usage/cmd/usage's lagInterval): the gauge may be that old.
const usageLagInterval = 2 * time.Second

// StackSettler is the Settler of a dev stack: core's outbox empty (all it
// wrote is in Kafka), the usage tier's Kafka lag 0 (all of it is in
// ClickHouse), and the edge's adaptive rate factor back at 1 (limits no
// longer lowered by the last scenario's load), for a poll longer than
// the usage tier's lag measurement.
//
// With several cores (on PostgreSQL) every core's outbox gauge is read.
func StackSettler(st *stack.Stack) *Settler {
	var probes []Probe
	for _, c := range st.Cores {
		name := "core outbox"
		if len(st.Cores) > 1 {
			name = "core " + c + " outbox"
		}
		probes = append(probes, Probe{Name: name, URL: "http://" + c + "/metrics", Series: "slip_core_outbox_messages", Want: 0})
	}
	return &Settler{
		Probes: append(probes,
			Probe{Name: "usage Kafka lag", URL: "http://" + st.Usage + "/metrics", Series: "usage_consumer_lag_messages", Want: 0},
			Probe{Name: "edge rate factor", URL: "http://" + st.EdgeMetrics + "/metrics", Series: "edge_rate_factor", Want: 1}),
		Hold: usageLagInterval + 500*time.Millisecond,
		Max:  time.Minute,
	}
}

// StoreCommits reads what the store of the cores at addrs (host:port) has
// committed so far, summed: their slip_core_store_commits_total and
// slip_core_store_writes_total.
func StoreCommits(addrs []string) func() (report.Commits, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	return func() (report.Commits, error) {
		var sum report.Commits
		for _, a := range addrs {
			body, err := get(context.Background(), c, "http://"+a+"/metrics")
			if err != nil {
				return sum, err
			}
			commits, ok1 := seriesValue(body, "slip_core_store_commits_total")
			writes, ok2 := seriesValue(body, "slip_core_store_writes_total")
			if !ok1 || !ok2 {
				return sum, fmt.Errorf("core %s: no store commit counters", a)
			}
			sum.Commits += commits
			sum.Writes += writes
		}
		return sum, nil
	}
}

// Describe puts in words what s waits for, for the report.
func (s *Settler) Describe() string {
	want := make([]string, len(s.Probes))
	for i, p := range s.Probes {
		want[i] = fmt.Sprintf("%s %g", p.Name, p.Want)
	}
	return fmt.Sprintf("%s (held %g s, at most %g s; a scenario's CPU counts until the stack settled)",
		strings.Join(want, ", "), s.Hold.Seconds(), s.max().Seconds())
}

func (s *Settler) max() time.Duration {
	if s.Max <= 0 {
		return time.Minute
	}
	return s.Max
}

// Wait polls the probes until the stack has settled or the bound has
// passed. mark, when not nil, runs at each reading that begins a run of
// settled readings: the moment the stack settled, once the run lasts Hold.
func (s *Settler) Wait(ctx context.Context, mark func()) *report.Settle {
	poll, bound := s.Poll, s.max()
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	c := s.Client
	if c == nil {
		c = &http.Client{Timeout: 2 * time.Second}
	}
	start := time.Now()
	var since time.Time // the first of the current run of settled readings; zero: none
	for {
		left := s.read(ctx, c)
		now := time.Now()
		switch {
		case len(left) > 0:
			since = time.Time{}
		case since.IsZero():
			since = now
			if mark != nil {
				mark()
			}
		}
		if !since.IsZero() && now.Sub(since) >= s.Hold {
			return &report.Settle{Seconds: since.Sub(start).Seconds(), Settled: true}
		}
		if now.Sub(start) >= bound {
			if len(left) == 0 {
				left = []string{fmt.Sprintf("settled only %.1f s before the bound, of the %v needed", now.Sub(since).Seconds(), s.Hold)}
			}
			return &report.Settle{Seconds: now.Sub(start).Seconds(), Left: left}
		}
		select {
		case <-ctx.Done():
			return &report.Settle{Seconds: time.Since(start).Seconds(), Left: append(left, "stopped: "+ctx.Err().Error())}
		case <-time.After(poll):
		}
	}
}

// read reads every probe once (each endpoint once) and returns those not
// at their value, in words.
func (s *Settler) read(ctx context.Context, c *http.Client) []string {
	type scrape struct {
		body []byte
		err  error
	}
	scrapes := map[string]scrape{}
	var left []string
	for _, p := range s.Probes {
		sc, ok := scrapes[p.URL]
		if !ok {
			sc.body, sc.err = get(ctx, c, p.URL)
			scrapes[p.URL] = sc
		}
		if sc.err != nil {
			left = append(left, fmt.Sprintf("%s: %v", p.Name, sc.err))
			continue
		}
		v, ok := seriesValue(sc.body, p.Series)
		switch {
		case !ok:
			left = append(left, fmt.Sprintf("%s: no series %s at %s", p.Name, p.Series, p.URL))
		case v != p.Want:
			left = append(left, fmt.Sprintf("%s %g (want %g)", p.Name, v, p.Want))
		}
	}
	return left
}

func get(ctx context.Context, c *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, err
	}
	res, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, res.Status)
	}
	return body, nil
}

// seriesValue returns the value of series in Prometheus text format, the
// series written exactly as given (name, then labels if any).
func seriesValue(text []byte, series string) (float64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte(series))
		if !ok || len(rest) == 0 || rest[0] != ' ' {
			continue
		}
		f := strings.Fields(string(rest))
		if len(f) == 0 {
			return 0, false
		}
		v, err := strconv.ParseFloat(f[0], 64)
		return v, err == nil
	}
	return 0, false
}
