//go:build faults

package faults_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/slipverify/slipverify/core/slip"
)

const (
	rate          = 100              // requests per second offered during each fault
	asyncEvery    = 4                // every 4th request is an async submit
	clientTimeout = 15 * time.Second // a request unanswered this long is a hang
)

// load is one fault's client traffic: fresh slips of one branch at a fixed
// rate, open loop (a slow answer does not slow the offer), each outcome
// recorded as the client saw it.
type load struct {
	s        *stack
	key      string
	mu       sync.Mutex
	slips    []string        // every payload sent, in order
	accepted map[string]bool // payloads the platform accepted (200 verified, 202 queued)
	jobs     []string        // accepted async jobs
	refused  map[string]int  // refusals by what the client saw
	slowest  time.Duration
	offered  atomic.Int64 // requests started by run
	wg       sync.WaitGroup
}

func newLoad(s *stack, key string) *load {
	return &load{s: s, key: key, accepted: map[string]bool{}, refused: map[string]int{}}
}

// run offers requests until ctx ends, then waits for their answers.
func (l *load) run(ctx context.Context) {
	tick := time.NewTicker(time.Second / rate)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			l.wg.Wait()
			return
		case <-tick.C:
		}
		l.offered.Add(1)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.one(i%asyncEvery == 0)
		}()
	}
}

// one sends one fresh slip, sync or async, and records what came back. It
// reports whether the platform accepted it.
func (l *load) one(async bool) bool {
	payload := freshPayload()
	l.mu.Lock()
	l.slips = append(l.slips, payload)
	l.mu.Unlock()
	path, body := "/v2/verify/bank", map[string]any{"payload": payload}
	if async {
		path, body["callbackUrl"] = "/v2/verify/bank/async", l.s.rcv.srv.URL+"/hook"
	}
	start := time.Now()
	a, err := l.s.do("POST", path, l.key, body)
	took := time.Since(start)
	ok := err == nil && a.body.Success && (!async && a.status == 200 || async && a.status == 202 && a.body.Data.JobID != "")
	l.mu.Lock()
	defer l.mu.Unlock()
	l.slowest = max(l.slowest, took)
	switch {
	case ok:
		l.accepted[payload] = true
		if async {
			l.jobs = append(l.jobs, a.body.Data.JobID)
		}
	case err != nil:
		l.refused[transportError(err)]++
	case a.body.Error.Code != "":
		l.refused[fmt.Sprintf("%d %s", a.status, a.body.Error.Code)]++
	default:
		l.refused[fmt.Sprintf("%d %.40s", a.status, a.raw)]++
	}
	return ok
}

// transportError names what a client saw when no answer came.
func transportError(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "client timeout"
	case strings.Contains(err.Error(), "connection refused"):
		return "connection refused"
	default:
		return "connection lost"
	}
}

// refusals lists the refusals, most frequent first.
func (l *load) refusals() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	whats := make([]string, 0, len(l.refused))
	for what := range l.refused {
		whats = append(whats, what)
	}
	sort.Slice(whats, func(i, j int) bool { return l.refused[whats[i]] > l.refused[whats[j]] })
	out := make([]string, len(whats))
	for i, what := range whats {
		out[i] = fmt.Sprintf("%d× %s", l.refused[what], what)
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// refusedAs counts the refusals a client saw as what.
func (l *load) refusedAs(what string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refused[what]
}

func freshPayload() string {
	ref := "F" + strings.ToUpper(strings.ReplaceAll(uuid.NewString(), "-", ""))[:19]
	return slip.Bank{BankCode: "004", TransRef: ref}.Encode()
}
