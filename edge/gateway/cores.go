package gateway

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/edge/config"
)

// Cores are the core processes behind the edge, each with a pool of
// connections of its own. A request of a service (it carries hService, as
// every request forward sends does) goes to that service's core: of the
// ready cores, the one whose weight for the service is highest, the weight
// a hash of the service id and the core's address (rendezvous hashing).
// Why: cores that share one PostgreSQL database each put the verifications
// they hold in one transaction, which locks the quota counter rows of every
// service and branch in it until its commit (which waits for the standby).
// A service's requests spread over two cores make the two cores' batches
// wait on each other's locks of that service's rows; kept on one core, they
// share its batches and no other core waits on them. The weight depends on
// the service and the address alone, so every edge sends a service to the
// same core, and when a core leaves or joins only the services whose core
// it is move.
//
// The service's core is passed over while it holds as many requests in
// flight as the bound (spillBound: 1.25 times the ready cores' average,
// counting the request being placed; each edge counts its own requests
// only, the ones it can see), and the next core in the service's
// order that holds fewer takes the request (consistent hashing with
// bounded loads, Mirrokni et al.): one busy service spills onto the other
// cores rather than holding one core while another idles. A request
// without a service (the auth cache's lookups) goes to the ready core with
// the fewest requests in flight (ties in turn, so that one request at a
// time goes round); so does a service's when every core left to try is at
// the bound. A core is ready while it answers its /ready probe; it is
// dropped at once when a connection to it fails, or when a probe fails (it
// is stopping, or down), and taken back when a probe answers again: its
// services go to their next cores meanwhile, and come back with it.
//
// A request goes to a second core only when not a byte of it reached the
// first: a connection refused or not made, or pooled connections that core
// had closed (errCoreClosed), or every connection to it busy. Once a byte
// has gone, core may have acted on the request (a bank lookup may be
// billed), and the request is never sent again. When no ready core is left
// to try, the cores not ready are tried in turn, by the same rule: a probe
// may be behind, and a core that is stopping still answers for a while.
//
// Cores is the fasthttp.RoundTripper of the edge's client of core, so the
// request path and the auth cache's lookups are balanced by one rule.
type Cores struct {
	cfg   CoresConfig
	list  atomic.Pointer[[]*backend]
	turn  atomic.Uint32 // where the next pick starts looking: ties go round
	names bool          // some entry is a host name, resolved again and again

	probing sync.Mutex   // one probe round at a time
	probed  atomic.Int64 // when the last round began, by cfg.Now, in Unix nanoseconds

	resolving sync.Mutex // one change of the list at a time
	set       *metrics.Set
	failovers *metrics.Counter

	stop chan struct{}
	done chan struct{}
}

// CoresConfig configures Cores.
type CoresConfig struct {
	Addrs        []string                                                 // host:port each; a host name stands for every address it resolves to
	Client       func(addr string) *fasthttp.HostClient                   // a new client of the core at addr
	EdgeToken    string                                                   // sent with each probe: a core that refuses it is not ready
	ProbeEvery   time.Duration                                            // how often each core's /ready is asked
	ResolveEvery time.Duration                                            // how often host names are resolved again
	Resolve      func(ctx context.Context, host string) ([]string, error) // nil: the system's resolver
	Now          func() time.Time                                         // the clock of the probe interval
	Log          *slog.Logger
}

// backend is one core.
type backend struct {
	addr  string
	seed  uint64               // hash64 of addr: the core's part of each service's weight
	hc    *fasthttp.HostClient // requests
	probe *fasthttp.HostClient // readiness probes
	ready atomic.Bool
}

// newBackend is the core at addr, its requests on hc. Each probe makes a
// connection of its own, so that it finds out whether core accepts
// connections, and takes nothing from the requests' pool.
func newBackend(addr string, hc *fasthttp.HostClient) *backend {
	return &backend{addr: addr, seed: hash64([]byte(addr)), hc: hc, probe: &fasthttp.HostClient{
		Addr: addr, Name: "edge", NoDefaultUserAgentHeader: true, MaxConns: 4, DialTimeout: dialCore,
	}}
}

// probeTimeout bounds one readiness probe.
const probeTimeout = time.Second

// errNoCore is the error of a request with no core to try; NewCores
// leaves at least one, so it is there for an empty list's sake only.
var errNoCore = errors.New("no core to send the request to")

// errCoreUnreachable marks a connection to a core that could not be made:
// not a byte of the request left.
var errCoreUnreachable = errors.New("core unreachable")

// NewCores resolves the names among cfg.Addrs and probes every core once
// before it returns, so the edge's first answers know which cores are
// ready. Start keeps probing and resolving; Close stops it.
func NewCores(cfg CoresConfig) *Cores {
	if cfg.Resolve == nil {
		cfg.Resolve = net.DefaultResolver.LookupHost
	}
	cs := &Cores{cfg: cfg, set: metrics.NewSet()}
	cs.failovers = cs.set.NewCounter(`edge_core_failovers_total`)
	cs.names = slices.ContainsFunc(cfg.Addrs, isName)
	cs.list.Store(&[]*backend{})
	cs.probed.Store(cfg.Now().UnixNano())
	cs.refresh(context.Background(), nil) // probes every core
	return cs
}

// oneCore is the Cores of hc alone, a client of one core (a Gateway made
// without Cores): not resolved, probed when /health finds a probe due.
func oneCore(hc *fasthttp.HostClient, edgeToken string, now func() time.Time, log *slog.Logger) *Cores {
	cs := &Cores{cfg: CoresConfig{EdgeToken: edgeToken, ProbeEvery: time.Second, Now: now, Log: log}, set: metrics.NewSet()}
	cs.failovers = cs.set.NewCounter(`edge_core_failovers_total`)
	cs.list.Store(&[]*backend{{addr: hc.Addr, seed: hash64([]byte(hc.Addr)), hc: hc, probe: hc}})
	cs.probed.Store(now().UnixNano())
	cs.probeAll()
	return cs
}

// Start probes the cores every cfg.ProbeEvery and resolves the names every
// cfg.ResolveEvery, until Close.
func (cs *Cores) Start() {
	cs.stop, cs.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(cs.done)
		probe := time.NewTicker(cs.cfg.ProbeEvery)
		defer probe.Stop()
		var resolve <-chan time.Time
		if cs.names {
			t := time.NewTicker(cs.cfg.ResolveEvery)
			defer t.Stop()
			resolve = t.C
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { <-cs.stop; cancel() }()
		for {
			select {
			case <-cs.stop:
				return
			case <-probe.C:
				cs.probeDue(cs.cfg.Now())
			case <-resolve:
				cs.Resolve(ctx)
			}
		}
	}()
}

// Close stops probing and resolving and closes the idle connections to
// every core.
func (cs *Cores) Close() {
	if cs.stop != nil {
		close(cs.stop)
		<-cs.done
	}
	for _, b := range *cs.list.Load() {
		b.hc.CloseIdleConnections()
	}
}

// RoundTrip sends req to a core and reads its answer into res (see Cores).
// It never asks the calling client to send req again.
func (cs *Cores) RoundTrip(_ *fasthttp.HostClient, req *fasthttp.Request, res *fasthttp.Response) (bool, error) {
	list := *cs.list.Load()
	key := serviceKey(req.Header.PeekCanonical(hService))
	var tried uint64 // by index in list (at most 64 cores)
	err := errNoCore
	for range list {
		i := cs.pick(list, tried, key)
		if i < 0 {
			break
		}
		if tried != 0 {
			cs.failovers.Inc()
		}
		tried |= 1 << i
		b := list[i]
		if err = b.hc.Do(req, res); err == nil || !unsent(err) {
			return false, err
		}
		if errors.Is(err, errCoreUnreachable) && b.ready.Swap(false) {
			cs.cfg.Log.Warn("core dropped: a connection to it failed", "core", b.addr, "err", err)
		}
	}
	return false, err
}

// unsent reports whether err says that not a byte of the request reached
// core: the connection could not be made, the pooled connections tried were
// closed by core, or every connection of the core's pool is busy.
func unsent(err error) bool {
	return errors.Is(err, errCoreUnreachable) || errors.Is(err, errCoreClosed) || errors.Is(err, fasthttp.ErrNoFreeConns)
}

// serviceKey is the key of the service whose id is id in the cores'
// rendezvous order; 0, no service, when id is empty, and never else.
func serviceKey(id []byte) uint64 {
	if len(id) == 0 {
		return 0
	}
	return hash64(id) | 1
}

// pick returns the index in list of the core a request of the service of
// key (serviceKey; 0: none) goes to next, of those not in tried: the ready
// one first in the service's rendezvous order that holds fewer requests in
// flight than spillBound, else leastInFlight's choice. Fast path: two loads
// per core and a hash for each that may take the request; nothing is
// allocated.
func (cs *Cores) pick(list []*backend, tried uint64, key uint64) int {
	if key == 0 || len(list) == 0 {
		return cs.leastInFlight(list, tried)
	}
	total, ready := 0, 0
	for _, b := range list {
		if b.ready.Load() {
			total += b.hc.PendingRequests()
			ready++
		}
	}
	if ready == 0 {
		return cs.leastInFlight(list, tried)
	}
	bound := spillBound(total, ready)
	best, bestWeight := -1, uint64(0)
	for i, b := range list {
		if tried&(1<<i) != 0 || !b.ready.Load() || b.hc.PendingRequests() >= bound {
			continue
		}
		// Highest weight first: the order is the service's alone, the
		// same on every edge, and a core's leaving changes no other
		// core's place in it.
		if w := mix(key ^ b.seed); best < 0 || w > bestWeight {
			best, bestWeight = i, w
		}
	}
	if best < 0 { // slow path: every core left to try is at the bound, or none is ready
		return cs.leastInFlight(list, tried)
	}
	return best
}

// loadFactor is the bound on a core's requests in flight, in percent of
// the ready cores' average, at which a service's requests spill to its next
// core. 125: with two cores a busy service keeps up to 5/8 of the edge's
// requests in flight on its core, in its batches there, and the rest go to
// the other core, which does not idle. A factor nearer 100 spills sooner,
// putting a busy service in more cores' batches and back in their waits on
// its counter rows; a greater one lets one service hold its core's CPU
// while another core idles. (brpc's bounded-load hashing defaults to 1.25
// too.) The ceiling in spillBound keeps a lone request at home: with the
// edge idle the bound is one.
const loadFactor = 125

// spillBound is how many requests in flight a core may hold and still take
// a service's request: ceil(loadFactor% × (total+1) / ready), where total
// is the ready cores' requests in flight together, and the 1 the request
// being placed. Some ready core always holds fewer: their loads add up to
// total, below ready × bound.
func spillBound(total, ready int) int {
	return (loadFactor*(total+1) + 100*ready - 1) / (100 * ready)
}

// leastInFlight returns the index in list of the ready core not in tried
// with the fewest requests in flight, else (none ready) any not in tried,
// in turn; -1 when every core was tried. One atomic add, then a load or two
// per core.
func (cs *Cores) leastInFlight(list []*backend, tried uint64) int {
	n := len(list)
	if n == 0 {
		return -1
	}
	start := int(cs.turn.Add(1) % uint32(n))
	best, bestLoad, fallback := -1, 0, -1
	for k := range n {
		i := start + k
		if i >= n {
			i -= n
		}
		if tried&(1<<i) != 0 {
			continue
		}
		b := list[i]
		if !b.ready.Load() {
			if fallback < 0 {
				fallback = i
			}
			continue
		}
		if load := b.hc.PendingRequests(); best < 0 || load < bestLoad {
			best, bestLoad = i, load
		}
	}
	if best < 0 {
		return fallback
	}
	return best
}

// hash64 is a hash of b, eight bytes a step. A fixed function, not
// hash/maphash and its random seed: every edge, and every run of one, must
// give a service the same order of cores, or two edges would send one
// service to two cores. Each step is a bijection of the state, so ids of
// one length never collide; mix spreads the result over every bit.
func hash64(b []byte) uint64 {
	h := uint64(len(b))
	for ; len(b) >= 8; b = b[8:] {
		h = (h ^ binary.LittleEndian.Uint64(b)) * 0x9e3779b97f4a7c15
		h ^= h >> 32
	}
	for _, c := range b {
		h = (h ^ uint64(c)) * 0x9e3779b97f4a7c15
		h ^= h >> 32
	}
	return mix(h)
}

// mix is murmur3's 64-bit finalizer: each bit of x moves about half the
// bits of the result, as a service's weight for a core, mix(key ^ seed),
// needs of every bit of both.
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// Ready reports whether some core is ready, probing the cores first when
// the last round began a probe interval or more before now. A caller that
// finds a round due waits for it.
func (cs *Cores) Ready(now time.Time) bool {
	cs.probeDue(now)
	for _, b := range *cs.list.Load() {
		if b.ready.Load() {
			return true
		}
	}
	return false
}

// probeDue runs a probe round when one is due at now.
func (cs *Cores) probeDue(now time.Time) {
	due := func() bool { return now.UnixNano()-cs.probed.Load() >= int64(cs.cfg.ProbeEvery) }
	if !due() {
		return
	}
	cs.probing.Lock()
	defer cs.probing.Unlock()
	if !due() { // a round ran while this one waited
		return
	}
	cs.probed.Store(now.UnixNano())
	cs.probeAll()
}

// probeAll asks every core's /ready at once and waits for the answers.
func (cs *Cores) probeAll() {
	var wg sync.WaitGroup
	for _, b := range *cs.list.Load() {
		wg.Go(func() { cs.probe(b) })
	}
	wg.Wait()
}

// probe asks b's /ready, with the edge token (a core that refuses it is of
// no use), and marks b ready or not by the answer.
func (cs *Cores) probe(b *backend) {
	req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(res)
	req.SetRequestURI("http://" + b.addr + "/ready")
	req.Header.SetCanonical(hEdgeToken, []byte(cs.cfg.EdgeToken))
	if b.probe != b.hc {
		req.SetConnectionClose()
	}
	err := b.probe.DoTimeout(req, res, probeTimeout)
	ok := err == nil && res.StatusCode() == fasthttp.StatusOK
	switch was := b.ready.Swap(ok); {
	case ok && !was:
		cs.cfg.Log.Info("core ready", "core", b.addr)
	case !ok && was && err != nil:
		cs.cfg.Log.Warn("core dropped: its readiness probe failed", "core", b.addr, "err", err)
	case !ok && was:
		cs.cfg.Log.Warn("core dropped: not ready", "core", b.addr, "status", res.StatusCode())
	}
}

// Resolve resolves the host names of the configured cores again and
// adopts the result: a core added is probed before requests go to it; a
// core gone gets no new request, and its connections close as its
// requests in flight end. A resolution that fails changes nothing.
func (cs *Cores) Resolve(ctx context.Context) {
	cs.refresh(ctx, *cs.list.Load())
}

// refresh makes the list of cores from the configured entries, taking the
// cores of old that remain as they are; old is nil the first time.
func (cs *Cores) refresh(ctx context.Context, old []*backend) {
	cs.resolving.Lock()
	defer cs.resolving.Unlock()
	var addrs []string
	for _, entry := range cs.cfg.Addrs {
		got, err := cs.expand(ctx, entry)
		if err != nil && old != nil {
			cs.cfg.Log.Warn("resolving a core's name failed: the cores stay as they were", "entry", entry, "err", err)
			return
		}
		if err != nil { // the first time: each connection resolves the name itself
			cs.cfg.Log.Warn("resolving a core's name failed: connections resolve it", "entry", entry, "err", err)
			got = []string{entry}
		}
		addrs = append(addrs, got...)
	}
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	if len(addrs) > config.MaxCores {
		cs.cfg.Log.Warn("more cores than an edge balances over: the first are taken", "cores", len(addrs), "taken", config.MaxCores)
		addrs = addrs[:config.MaxCores]
	}
	list := make([]*backend, 0, len(addrs))
	var added []*backend
	for _, a := range addrs {
		if i := slices.IndexFunc(old, func(b *backend) bool { return b.addr == a }); i >= 0 {
			list = append(list, old[i])
			continue
		}
		b := newBackend(a, cs.cfg.Client(a))
		list = append(list, b)
		added = append(added, b)
	}
	if len(added) == 0 && len(list) == len(old) {
		return
	}
	var wg sync.WaitGroup
	for _, b := range added {
		wg.Go(func() { cs.probe(b) }) // ready or not before its first request
		cs.set.NewGauge(readyGauge(b.addr), func() float64 { return b2f(b.ready.Load()) })
		cs.set.NewGauge(inflightGauge(b.addr), func() float64 { return float64(b.hc.PendingRequests()) })
	}
	wg.Wait()
	cs.list.Store(&list)
	for _, b := range added {
		if old != nil {
			cs.cfg.Log.Info("core added", "core", b.addr, "ready", b.ready.Load())
		}
	}
	for _, b := range old {
		if !slices.Contains(list, b) {
			cs.cfg.Log.Info("core gone", "core", b.addr)
			cs.set.UnregisterMetric(readyGauge(b.addr))
			cs.set.UnregisterMetric(inflightGauge(b.addr))
			b.hc.CloseIdleConnections()
		}
	}
}

func readyGauge(addr string) string { return fmt.Sprintf(`edge_core_ready{core=%q}`, addr) }
func inflightGauge(addr string) string {
	return fmt.Sprintf(`edge_core_inflight_requests{core=%q}`, addr)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// isName reports whether entry's host is a name rather than an address.
func isName(entry string) bool {
	host, _, _ := net.SplitHostPort(entry) // checked by the configuration
	_, err := netip.ParseAddr(host)
	return err != nil
}

// expand returns the cores of one configured entry: itself when its host
// is an address, else an address for each one its name resolves to.
func (cs *Cores) expand(ctx context.Context, entry string) ([]string, error) {
	if !isName(entry) {
		return []string{entry}, nil
	}
	host, port, _ := net.SplitHostPort(entry)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ips, err := cs.cfg.Resolve(rctx, host)
	if err == nil && len(ips) == 0 {
		err = errors.New("no address")
	}
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		out = append(out, net.JoinHostPort(ip, port))
	}
	return out, nil
}
