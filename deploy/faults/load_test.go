//go:build faults

package faults_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/slipverify/slipverify/bench/scenario"
	"github.com/slipverify/slipverify/core/slip"
)

const (
	rate          = 100              // requests per second offered during each fault
	batchSize     = 3                // slips of one async batch
	clientTimeout = 15 * time.Second // a request unanswered this long is a hang
)

// kind is one kind of request of a load.
type kind int

const (
	bankV2      kind = iota // v2 bank slip by payload, Bearer key, a new slip
	bankSigned              // the same, HMAC-signed with the branch key
	wallet                  // v2 wallet slip, a new one
	image                   // v2 bank slip as a picture upload (multipart), a new slip
	v1Fresh                 // v1 POST /verify with checkDuplicate, a new slip
	v1Repeat                // v1 again with a slip v1 sent before: duplicate_slip, free
	cross                   // branch b verifies a slip branch a verified: charged to b too
	quotaFresh              // a new slip on the quota branch, at its limit
	quotaChange             // b2b: the quota branch's limit adjusted up by one
	asyncOne                // async submit of a new slip, called back through the hook proxy
	batch                   // async batch of batchSize new slips; the receiver fails each first callback
)

// profile is a row's traffic: the kinds of one cycle, sent in turn.
type profile struct {
	name  string
	cycle []kind
}

var (
	mixed = profile{"mixed", []kind{bankV2, bankSigned, wallet, v1Fresh, v1Repeat, bankV2, cross, quotaFresh, image, asyncOne,
		bankV2, quotaFresh, batch, cross, bankSigned, bankV2, wallet, quotaChange, v1Fresh, asyncOne}}
	asyncHeavy = profile{"async", []kind{asyncOne, batch, bankV2, asyncOne, cross, asyncOne, quotaFresh, quotaChange, v1Fresh, asyncOne}}
)

// sample is one request's timing as the client saw it.
type sample struct {
	sent   time.Time
	took   time.Duration
	failed bool // a 5xx, or no answer
}

// pair is what a load asked of one slip on one branch: every request for
// it and what each got. A pair is charged at most once, whatever was sent.
type pair struct {
	kind    kind
	br      branch
	payload string
	wallet  bool
	ok      int      // accepted: a 2xx answer, or an async job done with success
	refused []string // what the other answers were
	jobs    []string // accepted async jobs
}

// load is one row's client traffic at a fixed rate, open loop (a slow
// answer does not slow the offer), each outcome recorded per request as the
// client saw it.
type load struct {
	s    *stack
	br   branches
	prof profile

	mu                 sync.Mutex
	pairs              map[string]*pair // by branch and payload
	jobs               map[string]*pair // accepted jobs
	sent, accepted     int              // requests, 2xx answers
	refused            map[string]int   // refusals by what the client saw
	slowest            time.Duration
	samples            []sample // every request's, in the order answered
	aSlips, v1Slips    []string // a's accepted v2 bank slips (for cross), its v1 slips sent
	crossed            int      // aSlips crossed so far
	quotaSent, quotaOK int      // b2b quota changes
	offered            atomic.Int64
	wg                 sync.WaitGroup
}

func newLoad(s *stack, br branches, prof profile) *load {
	return &load{s: s, br: br, prof: prof, pairs: map[string]*pair{}, jobs: map[string]*pair{}, refused: map[string]int{}}
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
			l.one(l.prof.cycle[i%len(l.prof.cycle)])
		}()
	}
}

// one sends one request of kind k and records what came back. It reports
// whether the platform accepted it.
func (l *load) one(k kind) bool {
	c, ps := l.request(k)
	start := time.Now()
	a, err := l.s.send(c)
	took := time.Since(start)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent++
	l.slowest = max(l.slowest, took)
	l.samples = append(l.samples, sample{start, took, err != nil || a.status >= 500})
	what := ""
	switch {
	case err != nil:
		what = transportError(err)
	case !a.ok():
		what = a.what()
	case k == quotaChange:
		l.quotaOK++
	case k == asyncOne || k == batch:
		ids := a.body.Data.JobIDs
		if k == asyncOne {
			ids = []string{a.body.Data.JobID}
		}
		if len(ids) != len(ps) || ids[0] == "" {
			what = fmt.Sprintf("%d without its jobs: %.60s", a.status, a.raw)
			break
		}
		for i, p := range ps {
			p.jobs = append(p.jobs, ids[i])
			l.jobs[ids[i]] = p
		}
	default:
		for _, p := range ps {
			p.ok++
		}
		if k == bankV2 {
			l.aSlips = append(l.aSlips, ps[0].payload)
		}
	}
	if what != "" {
		l.refused[what]++
		for _, p := range ps {
			p.refused = append(p.refused, what)
		}
		return false
	}
	l.accepted++
	return true
}

// request builds the request of kind k and the pairs it asks about.
func (l *load) request(k kind) (call, []*pair) {
	a, b, q := l.br.a, l.br.b, l.br.q
	switch k {
	case bankSigned:
		p := l.pair(k, a, bankSlip(), false)
		return call{method: "POST", path: "/v2/verify/bank", body: payloadBody(p.payload, ""), key: a.key, signed: true}, []*pair{p}
	case wallet:
		p := l.pair(k, a, walletSlip(), true)
		return call{method: "POST", path: "/v2/verify/wallet", body: payloadBody(p.payload, ""), key: a.key}, []*pair{p}
	case image:
		p := l.pair(k, a, bankSlip(), false)
		body, ct, err := pictures().Append(nil, 0, p.payload)
		if err != nil {
			panic(err) // a payload of ours that cannot be drawn
		}
		return call{method: "POST", path: "/v2/verify/bank", body: body, contentType: ct, key: a.key}, []*pair{p}
	case v1Fresh, v1Repeat:
		l.mu.Lock()
		var payload string
		if k == v1Repeat && len(l.v1Slips) > 0 {
			payload = l.v1Slips[len(l.v1Slips)-1]
		} else {
			payload = bankSlip()
			l.v1Slips = append(l.v1Slips, payload)
		}
		l.mu.Unlock()
		p := l.pair(k, a, payload, false)
		body, _ := json.Marshal(map[string]any{"payload": p.payload, "checkDuplicate": true})
		return call{method: "POST", path: "/verify", body: body, key: a.key}, []*pair{p}
	case cross:
		l.mu.Lock()
		payload := ""
		if l.crossed < len(l.aSlips) {
			payload = l.aSlips[l.crossed]
			l.crossed++
		}
		l.mu.Unlock()
		if payload == "" {
			return l.request(bankV2)
		}
		p := l.pair(k, b, payload, false)
		return call{method: "POST", path: "/v2/verify/bank", body: payloadBody(p.payload, ""), key: b.key}, []*pair{p}
	case quotaFresh:
		p := l.pair(k, q, bankSlip(), false)
		return call{method: "POST", path: "/v2/verify/bank", body: payloadBody(p.payload, ""), key: q.key}, []*pair{p}
	case quotaChange:
		l.mu.Lock()
		l.quotaSent++
		l.mu.Unlock()
		body, _ := json.Marshal(map[string]any{"amount": 1})
		return call{method: "POST", path: "/b2b/branches/" + q.id + "/quota/adjust", body: body, key: l.s.b2bKey, signed: true}, nil
	case asyncOne:
		p := l.pair(k, a, bankSlip(), false)
		return call{method: "POST", path: "/v2/verify/bank/async", body: payloadBody(p.payload, l.s.hookURL), key: a.key}, []*pair{p}
	case batch:
		ps := make([]*pair, batchSize)
		items := make([]map[string]string, batchSize)
		for i := range ps {
			ps[i] = l.pair(k, a, bankSlip(), false)
			items[i] = map[string]string{"payload": ps[i].payload}
		}
		body, _ := json.Marshal(map[string]any{"items": items, "callbackUrl": l.s.hookURL})
		return call{method: "POST", path: "/v2/verify/bank/async/batch", body: body, key: a.key}, ps
	}
	p := l.pair(bankV2, a, bankSlip(), false)
	return call{method: "POST", path: "/v2/verify/bank", body: payloadBody(p.payload, ""), key: a.key}, []*pair{p}
}

// pair returns the pair of payload on branch br, new or as asked before.
func (l *load) pair(k kind, br branch, payload string, wallet bool) *pair {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := br.id + "/" + payload
	p := l.pairs[key]
	if p == nil {
		p = &pair{kind: k, br: br, payload: payload, wallet: wallet}
		l.pairs[key] = p
	}
	return p
}

func payloadBody(payload, callback string) []byte {
	m := map[string]string{"payload": payload}
	if callback != "" {
		m["callbackUrl"] = callback
	}
	b, _ := json.Marshal(m)
	return b
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

// unknownOutcome reports whether a refusal leaves the client not knowing
// whether its request took effect: the edge lost core's answer, or the
// client lost the edge's. Any other refusal says it did not.
func unknownOutcome(what string) bool {
	switch what {
	case "500 API_SERVER_ERROR", "500 api_server_error", "connection lost", "client timeout":
		return true
	}
	return false
}

// timing returns how many requests failed (a 5xx or no answer), in how
// many distinct seconds of the clock (Unix seconds) such a request was
// sent, and the 99th percentile of the latency of the requests sent
// from held to until.
func (l *load) timing(held, until time.Time) (failed, seconds int, p99 time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	secs := map[int64]bool{}
	var during []time.Duration
	for _, x := range l.samples {
		if x.failed {
			failed++
			secs[x.sent.Unix()] = true
		}
		if !x.sent.Before(held) && !x.sent.After(until) {
			during = append(during, x.took)
		}
	}
	if len(during) > 0 {
		slices.Sort(during)
		p99 = during[(len(during)*99+99)/100-1]
	}
	return failed, len(secs), p99
}

// refusals lists the refusals, most frequent first.
func (l *load) refusals() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	whats := make([]string, 0, len(l.refused))
	for what := range l.refused {
		whats = append(whats, what)
	}
	sort.Slice(whats, func(i, j int) bool {
		if l.refused[whats[i]] != l.refused[whats[j]] {
			return l.refused[whats[i]] > l.refused[whats[j]]
		}
		return whats[i] < whats[j]
	})
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

// ref is a new slip reference: letters and digits.
func ref(prefix string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(uuid.NewString(), "-", ""))[:19]
}

func bankSlip() string { return slip.Bank{BankCode: "004", TransRef: ref("F")}.Encode() }

func walletSlip() string {
	return slip.Wallet{EventType: "P2P", TransactionID: ref("W"), Date: "20112026"}.Encode()
}

var (
	picsOnce sync.Once
	pics     *scenario.Pictures
)

// pictures are the bench's slip pictures: a picture of a new slip costs a
// few milliseconds.
func pictures() *scenario.Pictures {
	picsOnce.Do(func() {
		var err error
		if pics, err = scenario.SlipPictures(); err != nil {
			panic(err)
		}
	})
	return pics
}
