//go:build faults

package faults_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/pgtest"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/deploy/faults/tcpproxy"
)

// Phases of each fault, counted in requests offered, so a slow machine
// stretches them instead of shortening the load.
const (
	before = 100 // offered before the fault
	during = 150 // offered while the fault holds
	after  = 200 // offered once the platform answers again
)

// fault is one row of the matrix: inject applies it and returns what
// removes it; when remove returns, the faulted part runs again. It holds
// while hold requests are offered (or longer, while inject or remove
// takes).
type fault struct {
	name   string
	load   profile
	inject func(t *testing.T, s *stack) (remove func())
	hold   int
	clean  bool // no client may see a 5xx or a lost connection
}

// row is a row whose fault holds while during requests are offered.
func row(name string, load profile, inject func(*testing.T, *stack) func()) fault {
	return fault{name: name, load: load, inject: inject, hold: during}
}

// longRow is a row whose fault holds long.
func longRow(name string, load profile, inject func(*testing.T, *stack) func()) fault {
	return fault{name: name, load: load, inject: inject, hold: long}
}

// cleanRow is a row under which no request may fail.
func cleanRow(name string, load profile, inject func(*testing.T, *stack) func()) fault {
	return fault{name: name, load: load, inject: inject, hold: during, clean: true}
}

// long is the hold of a fault that must outlast the edge's wait for core
// (2 s) and the dispatcher's for a callback (1 s).
const long = 300

var matrix = []fault{
	row("kill -9 edge", mixed, kill(edgeProc)),
	row("kill -9 core", mixed, kill(coreProc)),
	row("kill -9 dispatcher", asyncHeavy, kill(dispatcherProc)),
	row("kill -9 usage", mixed, kill(usageProc)),
	row("kill -9 broker", mixed, kill(brokerProc)),
	row("broker stopped (SIGTERM), restarted", mixed, func(t *testing.T, s *stack) func() {
		s.broker.Stop()
		return func() { s.broker.Restart(t) }
	}),
	row("broker frozen (SIGSTOP): every link to it hangs", mixed, freeze(brokerProc)),
	row("kill -9 ClickHouse", mixed, killClickHouse),
	row("ClickHouse stopped (SIGTERM), restarted", mixed, func(t *testing.T, s *stack) func() {
		if err := s.ch.Stop(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		return restartClickHouse(t, s)
	}),
	row("core slowed to 1/5 speed", mixed, slowCore),
	row("disk full for core's bbolt", mixed, diskFull),
	longRow("edge→core partitioned 3 s", mixed, partition(edgeCoreLink)),
	row("edge→core delayed 200 ms each way", mixed, delay(edgeCoreLink, 200*time.Millisecond)),
	longRow("edge→core delayed 1.5 s each way for 3 s (past the edge's 2 s wait)", mixed, delay(edgeCoreLink, 1500*time.Millisecond)),
	row("edge→core connections reset every 300 ms, 100 ms delay", mixed, resets(edgeCoreLink)),
	longRow("usage→ClickHouse partitioned 3 s", mixed, partition(usageCHLink)),
	longRow("dispatcher→receiver partitioned 3 s", asyncHeavy, partition(hookLink)),
	longRow("dispatcher→receiver delayed 600 ms each way for 3 s (answers outlast the 1 s wait)", asyncHeavy, delay(hookLink, 600*time.Millisecond)),
	row("kill -9 broker while core is slowed", mixed, both(kill(brokerProc), slowCore)),
	row("kill -9 core while dispatcher→receiver is partitioned", asyncHeavy, both(kill(coreProc), partition(hookLink))),
	row("kill -9 ClickHouse while edge→core is delayed 200 ms", mixed, both(killClickHouse, delay(edgeCoreLink, 200*time.Millisecond))),
	row("cluster: kill -9 of the replica the usage tier writes to", mixed, killReplica),
	{name: "cluster: ZooKeeper stopped for 30 s", load: mixed, inject: stopZooKeeper, hold: 3000},
	row("cluster: usage killed between insert and offset commit", mixed, killBeforeCommit),
}

// pgMatrix is the rows of the stack whose cores keep their state in
// PostgreSQL, under the same load and audit.
var pgMatrix = []fault{
	row("kill -9 of one of two cores", mixed, kill(coreProc)),
	row("kill -9 of the PostgreSQL primary (Patroni and its PostgreSQL): the synchronous standby promoted", mixed, crashPrimary),
	longRow("one core partitioned from PostgreSQL 3 s", mixed, partition(pgLinks(0))),
	row("PostgreSQL restarted: patronictl restart of both members", mixed, restartPostgres),
	cleanRow("rolling restart of both cores (SIGTERM, exit, start, back in the edge; one after the other)", mixed, rollingRestart),
}

// The parts a fault acts on.
func edgeProc(s *stack) *testnet.Program       { return s.edge }
func coreProc(s *stack) *testnet.Program       { return s.cores[0] }
func dispatcherProc(s *stack) *testnet.Program { return s.dispatcher }
func usageProc(s *stack) *testnet.Program      { return s.usage }
func brokerProc(s *stack) *testnet.Program     { return s.broker }
func edgeCoreLink(s *stack) []*tcpproxy.Proxy  { return []*tcpproxy.Proxy{s.edgeCore} }
func usageCHLink(s *stack) []*tcpproxy.Proxy   { return []*tcpproxy.Proxy{s.usageCH} }
func hookLink(s *stack) []*tcpproxy.Proxy      { return []*tcpproxy.Proxy{s.hook} }

// pgLinks is the link of core i to PostgreSQL: its proxy to each member.
func pgLinks(i int) link {
	return func(s *stack) []*tcpproxy.Proxy { return s.pgLinks[i] }
}

// kill kills a tier with SIGKILL; removing the fault starts it again and
// waits for its /health.
func kill(proc func(*stack) *testnet.Program) func(*testing.T, *stack) func() {
	return func(t *testing.T, s *stack) func() {
		p := proc(s)
		p.Kill()
		return func() { p.Restart(t) }
	}
}

// freeze stops a process with SIGSTOP: its connections stay open and its
// port accepts, but nothing answers, as over a link that drops every packet.
func freeze(proc func(*stack) *testnet.Program) func(*testing.T, *stack) func() {
	return func(t *testing.T, s *stack) func() {
		p := proc(s).Pid()
		syscall.Kill(p, syscall.SIGSTOP)
		return func() { syscall.Kill(p, syscall.SIGCONT) }
	}
}

func killClickHouse(t *testing.T, s *stack) func() {
	s.ch.Kill()
	return restartClickHouse(t, s)
}

func restartClickHouse(t *testing.T, s *stack) func() {
	return func() {
		if err := s.ch.Restart(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// killReplica kills the first replica of the cluster, the one the cluster's
// usage tier inserts into while it answers: the tier goes on with the
// other, and the killed one catches up once started again (every row
// checks each replica holds every event).
func killReplica(t *testing.T, s *stack) func() {
	r := s.cluster.Replicas[0]
	r.Kill()
	return func() {
		if err := r.Restart(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// stopZooKeeper stops the cluster's ZooKeeper: the replicated tables turn
// read-only, so the cluster's usage tier holds its batch and retries, and
// goes on once ZooKeeper is back. Removing the fault fails the row when no
// insert failed meanwhile (the inserts did not pause).
func stopZooKeeper(t *testing.T, s *stack) func() {
	failures := usageMetric(t, s.usageCluster, "usage_insert_failures_total")
	if err := s.cluster.ZooKeeper.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	return func() {
		if usageMetric(t, s.usageCluster, "usage_insert_failures_total") == failures {
			t.Error("no insert into the cluster failed while ZooKeeper was stopped: the inserts did not pause")
		}
		if err := s.cluster.ZooKeeper.Restart(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// killBeforeCommit freezes the broker (SIGSTOP), so the cluster's usage
// tier can insert the batches it holds but not commit their offsets, waits
// for such an insert, and kills the tier with SIGKILL. Removing the fault
// thaws the broker and starts the tier again, which inserts those events
// once more: every row checks they count once.
func killBeforeCommit(t *testing.T, s *stack) func() {
	inserted := usageMetric(t, s.usageCluster, "usage_rows_inserted_total")
	syscall.Kill(s.broker.Pid(), syscall.SIGSTOP)
	if !waitFor(10*time.Second, func() bool {
		return usageMetric(t, s.usageCluster, "usage_rows_inserted_total") > inserted
	}) {
		t.Error("no batch was inserted while the broker was frozen: the usage tier was not killed between insert and commit")
	}
	s.usageCluster.Kill()
	return func() {
		syscall.Kill(s.broker.Pid(), syscall.SIGCONT)
		s.usageCluster.Restart(t)
	}
}

// crashPrimary kills the PostgreSQL primary's member with SIGKILL, Patroni
// and its PostgreSQL at once, as when its machine fails, and waits until
// Patroni has promoted the synchronous standby (once the dead leader's
// lock expires, about pgtest.TTL seconds). Removing the fault starts the
// member again, and waits until it has rejoined as the new primary's
// synchronous standby (rewound with pg_rewind when it needs it): with
// synchronous_mode_strict no commit returns before.
func crashPrimary(t *testing.T, s *stack) func() {
	old := s.pg.Primary()
	if old == nil {
		t.Fatal("no PostgreSQL primary")
	}
	old.Crash()
	testnet.Eventually(t, 3*pgtest.TTL*time.Second, func() bool {
		p := s.pg.Primary()
		return p != nil && p != old
	}, func() string { return "no member promoted after the primary " + old.Name + " crashed" })
	return func() {
		old.Start()
		s.pg.WaitHealthy(t, 2*time.Minute)
	}
}

// restartPostgres restarts PostgreSQL as an operator does to apply a
// setting: patronictl restart of the cluster, each member in turn, the
// primary in place (no failover). With synchronous_mode_strict, commits
// wait while the standby restarts, and fail while the primary does.
// Removing the fault waits until the standby is synchronous again.
func restartPostgres(t *testing.T, s *stack) func() {
	s.pg.RestartAll(t)
	return func() { s.pg.WaitHealthy(t, 2*time.Minute) }
}

// rollingRestart restarts every core in turn, as a deploy does: SIGTERM
// (the core fails /ready for SLIP_CORE_DRAIN, then finishes what it holds
// and exits), start again, and wait until the edge sends to it again,
// before the next core. Every request is answered by the other core
// meanwhile.
func rollingRestart(t *testing.T, s *stack) func() {
	for _, c := range s.cores {
		c.Stop()
		c.Restart(t)
		testnet.Eventually(t, time.Minute, func() bool { return s.edgeTakes(t, c.Addr) },
			func() string { return "the edge did not take core " + c.Addr + " back" })
	}
	return func() {}
}

// edgeTakes reports whether the edge counts the core at addr ready.
func (s *stack) edgeTakes(t *testing.T, addr string) bool {
	return metric(t, "http://"+s.edgeMetrics, fmt.Sprintf(`edge_core_ready{core=%q}`, addr)) == 1
}

// usageMetric reads a counter from a usage tier's /metrics.
func usageMetric(t *testing.T, p *testnet.Program, name string) float64 {
	return metric(t, p.URL(), name)
}

// metric reads a series from the /metrics of the listener at url.
func metric(t *testing.T, url, name string) float64 {
	res, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return 0
}

// waitFor polls cond every 20 ms until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(20 * time.Millisecond) { // polling interval
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// link is the proxies of a link a fault acts on: one, or one for each
// PostgreSQL member a core reaches.
type link func(*stack) []*tcpproxy.Proxy

// each applies fn to every proxy of l.
func (l link) each(s *stack, fn func(*tcpproxy.Proxy)) {
	for _, px := range l(s) {
		fn(px)
	}
}

// partition holds every byte through a link until the fault is removed.
func partition(l link) func(*testing.T, *stack) func() {
	return func(t *testing.T, s *stack) func() {
		l.each(s, (*tcpproxy.Proxy).Partition)
		return func() { l.each(s, (*tcpproxy.Proxy).Heal) }
	}
}

// delay adds d each way through a link.
func delay(l link, d time.Duration) func(*testing.T, *stack) func() {
	return func(t *testing.T, s *stack) func() {
		l.each(s, func(px *tcpproxy.Proxy) { px.SetDelay(d) })
		return func() { l.each(s, func(px *tcpproxy.Proxy) { px.SetDelay(0) }) }
	}
}

// resets resets every connection through a link every 300 ms, with 100 ms
// of delay each way so that some are cut with a request delivered and its
// answer on the way back.
func resets(l link) func(*testing.T, *stack) func() {
	return func(t *testing.T, s *stack) func() {
		undelay := delay(l, 100*time.Millisecond)(t, s)
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			tick := time.NewTicker(300 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					l.each(s, (*tcpproxy.Proxy).Reset)
				}
			}
		}()
		return func() { close(stop); <-done; undelay() }
	}
}

// both applies two faults at once and removes them in reverse order.
func both(f1, f2 func(*testing.T, *stack) func()) func(*testing.T, *stack) func() {
	return func(t *testing.T, s *stack) func() {
		r1 := f1(t, s)
		r2 := f2(t, s)
		return func() { r2(); r1() }
	}
}

// slowCore throttles core the way a container's CPU quota does: stopped
// for 80 ms of every 100 ms.
func slowCore(t *testing.T, s *stack) func() {
	pid := coreProc(s).Pid()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		defer syscall.Kill(pid, syscall.SIGCONT)
		for {
			syscall.Kill(pid, syscall.SIGSTOP)
			select {
			case <-stop:
				return
			case <-time.After(80 * time.Millisecond):
			}
			syscall.Kill(pid, syscall.SIGCONT)
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() { close(stop); <-done }
}

// diskFull fills the disk core's data is on; removing the fault frees
// the space.
func diskFull(t *testing.T, s *stack) func() {
	if s.smallDisk != "" {
		t.Skip(s.smallDisk)
	}
	filler := filepath.Join(s.coreDir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for {
		if _, err = f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling core's disk: %v", err)
	}
	return func() {
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
	}
}

// result is one row of the table.
type result struct {
	fault, load                string
	sent, accepted             int
	refused                    string
	lost, double               int
	chargedRefused             int    // pairs charged though every answer was an error, one of them definite
	chargedUnknown             int    // pairs charged though every answer was an error, each leaving the outcome unknown
	quota                      string // b2b quota changes: accepted of sent, and how far the limit moved
	jobs, called, repeats      int
	hookRefused                int // first callbacks of batch jobs the receiver refused
	slowest, recovery, drained time.Duration
	failedSeconds              int           // seconds of the clock in which a request was sent that got a 5xx or no answer
	p99Held                    time.Duration // of the requests sent while the fault held
	problems                   []string
}

// TestFaultMatrix runs every fault of matrix in turn on a stack with one
// core on bbolt, and prints what clients saw and what was charged.
func TestFaultMatrix(t *testing.T) { runMatrix(t, bbolt, matrix) }

// TestFaultMatrixPostgreSQL runs the rows of pgMatrix on a stack with two
// cores on PostgreSQL run by Patroni.
func TestFaultMatrixPostgreSQL(t *testing.T) { runMatrix(t, onPostgres, pgMatrix) }

// runMatrix runs every fault in turn on one stack, each with branches of
// its own.
func runMatrix(t *testing.T, top topology, faults []fault) {
	rows := make([]branches, len(faults))
	for i := range rows {
		rows[i] = rowBranches(i)
	}
	pictures() // drawn once, before any load
	s := startStack(t, top, rows)
	var results []result
	for i, f := range faults {
		ok := t.Run(f.name, func(t *testing.T) {
			r := runFault(t, s, f, rows[i])
			results = append(results, r)
			for _, p := range r.problems {
				t.Error(p)
			}
		})
		if !ok && s.anyExited() {
			break // a tier did not come back: the next rows would measure that
		}
	}
	fmt.Printf("\n%s:\n%s", top.name, table(results))
	if n := s.rcv.badSignatures(); n > 0 {
		t.Errorf("%d callbacks with a bad signature", n)
	}
}

func (s *stack) anyExited() bool {
	for _, p := range append([]*testnet.Program{s.broker, s.usage, s.usageCluster, s.dispatcher, s.edge}, s.cores...) {
		if p != nil && p.Exited() {
			return true
		}
	}
	return s.pg != nil && s.pg.Exited()
}

// runFault offers the load, injects the fault, removes it, and then checks
// every request: what was accepted was charged once, what was refused was
// not charged, every accepted job was called back, and the ledger equals
// core's counters.
func runFault(t *testing.T, s *stack, f fault, br branches) result {
	l := newLoad(s, br, f.load)
	ctx, cancel := context.WithCancel(context.Background())
	offered := &l.offered
	done := make(chan struct{})
	go func() { l.run(ctx); close(done) }()
	stopLoad := sync.OnceFunc(func() { cancel(); <-done })
	defer stopLoad() // also when the fault skips or fails the test
	waitOffered := func(n int64) {
		testnet.Eventually(t, time.Minute, func() bool { return offered.Load() >= n },
			func() string { return fmt.Sprintf("%d of %d requests offered", offered.Load(), n) })
	}

	waitOffered(before)
	injected := time.Now()
	remove := f.inject(t, s)
	waitOffered(before + int64(f.hold))
	removed := time.Now()
	remove()
	held := time.Since(injected)
	for !l.one(bankV2) { // the first request the platform accepts again
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	r := result{fault: f.name, load: f.load.name, recovery: time.Since(removed)}
	waitOffered(offered.Load() + after)
	stopLoad()

	r.drained = l.settle(t, &r, removed)
	l.audit(t, &r)
	l.mu.Lock()
	r.sent, r.accepted, r.slowest = l.sent, l.accepted, l.slowest
	l.mu.Unlock()
	r.refused = l.refusals()
	var failed int
	failed, r.failedSeconds, r.p99Held = l.timing(injected, injected.Add(held))
	if f.clean && failed > 0 {
		r.problems = append(r.problems, fmt.Sprintf("%d requests failed (a 5xx or no answer) in a row where none may", failed))
	}
	if n := l.refusedAs("500 INTERNAL_SERVER_ERROR") + l.refusedAs("500 server_error"); n > 0 {
		r.problems = append(r.problems, fmt.Sprintf("%d requests answered INTERNAL_SERVER_ERROR (a failure the platform did not expect)", n))
	}
	if n := l.refusedAs("client timeout"); n > 0 {
		r.problems = append(r.problems, fmt.Sprintf("%d requests hung past %v", n, clientTimeout))
	}
	return r
}

// settle waits until every accepted job has ended and been called back and
// the ledger holds as many billable verifications of the row's branches as
// core counted, and returns how long after the fault's removal that was.
// Each job's end counts for its slip: done with success is accepted.
func (l *load) settle(t *testing.T, r *result, removed time.Time) time.Duration {
	ended := map[string]string{} // job → its end as polled
	deadline := time.Now().Add(2 * time.Minute)
	var pending []string
	var ledgers []map[string]int64
	var core map[string]int64
	var err error
	for {
		pending = pending[:0]
		for job := range l.jobs {
			if ended[job] == "" {
				ended[job] = l.poll(job)
			}
			if ended[job] == "" || l.s.rcv.delivered(job).taken == 0 {
				pending = append(pending, job)
			}
		}
		ledgers, core, err = l.counts()
		if len(pending) == 0 && err == nil && l.equal(ledgers, core) {
			break
		}
		if time.Now().After(deadline) {
			r.problems = append(r.problems, fmt.Sprintf("not settled in 2m: %d of %d jobs not ended or not called back (first %v); ledgers %v, core %v (%v)",
				len(pending), len(l.jobs), first(pending), ledgers, core, err))
			break
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	took := time.Since(removed)
	for job, p := range l.jobs {
		r.jobs++
		switch end := ended[job]; end {
		case "done success":
			p.ok++
		case "":
			p.refused = append(p.refused, "job not ended")
		default:
			p.refused = append(p.refused, "job "+end)
		}
		d := l.s.rcv.delivered(job)
		r.hookRefused += d.refused
		if d.taken > 0 {
			r.called++
			r.repeats += d.taken - 1
		}
	}
	if r.called < r.jobs {
		r.problems = append(r.problems, fmt.Sprintf("%d of %d accepted jobs never called back", r.jobs-r.called, r.jobs))
	}
	return took
}

// poll returns a job's end ("done success", "failed CODE", ...), or "" while
// it runs.
func (l *load) poll(job string) string {
	a, err := l.s.do("GET", "/v2/verify/bank/jobs/"+job, l.br.a.key, nil)
	if err != nil || !a.ok() {
		return ""
	}
	d := a.body.Data
	switch {
	case d.Status == "done" && d.Result != nil:
		return "done " + d.Result.Status
	case d.Status == "failed" && d.Error != nil:
		return "failed " + d.Error.Code
	}
	return ""
}

// counts returns every ledger's and core's billable verifications of the
// row's branches.
func (l *load) counts() (ledgers []map[string]int64, core map[string]int64, err error) {
	for _, lg := range l.s.ledgers() {
		n, err := lg.read()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", lg.name, err)
		}
		ledgers = append(ledgers, n)
	}
	core, err = l.s.coreTotals()
	return ledgers, core, err
}

// equal reports whether every ledger holds what core counted.
func (l *load) equal(ledgers []map[string]int64, core map[string]int64) bool {
	for _, ledger := range ledgers {
		for _, b := range []branch{l.br.a, l.br.b, l.br.q} {
			if ledger[b.id] != core[b.id] {
				return false
			}
		}
	}
	return true
}

func first(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return s[0]
}

// audit asks core, slip by slip, which pairs it charged: it sets each of
// the row's branches' limit to what it used (a b2b quota change), so that
// verifying a pair again is answered free (200) when the branch verified
// the slip before, and refused QUOTA_EXCEEDED when it did not, charging
// nothing either way. Then an accepted pair not charged is lost, a pair
// charged with only errors answered was charged but refused, and a branch's
// counter above its charged pairs charged some twice.
func (l *load) audit(t *testing.T, r *result) {
	q, err := l.quota(l.br.q.id)
	switch {
	case err != nil:
		r.problems = append(r.problems, fmt.Sprintf("reading the quota branch: %v", err))
	case q.LimitQuota == nil || q.UsedQuota > *q.LimitQuota:
		r.problems = append(r.problems, fmt.Sprintf("the quota branch used %d of a limit of %v", q.UsedQuota, q.LimitQuota))
	default:
		moved := int(*q.LimitQuota) - quotaStart
		r.quota = fmt.Sprintf("%d/%d, +%d", l.quotaOK, l.quotaSent, moved)
		if moved > l.quotaSent {
			r.problems = append(r.problems, fmt.Sprintf("%d quota changes sent moved the limit by %d", l.quotaSent, moved))
			r.double += moved - l.quotaSent
		}
	}
	for _, b := range []branch{l.br.a, l.br.b, l.br.q} {
		if err := l.capAtUsed(b); err != nil {
			r.problems = append(r.problems, err.Error())
			return
		}
	}
	pairs := make([]*pair, 0, len(l.pairs))
	for _, p := range l.pairs {
		pairs = append(pairs, p)
	}
	charged := make([]bool, len(pairs))
	var mu sync.Mutex
	var failed []string
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				c, err := l.charged(pairs[i])
				mu.Lock()
				charged[i] = c
				if err != nil {
					failed = append(failed, err.Error())
				}
				mu.Unlock()
			}
		})
	}
	for i := range pairs {
		work <- i
	}
	close(work)
	wg.Wait()
	if len(failed) > 0 {
		r.problems = append(r.problems, fmt.Sprintf("audit: %d of %d pairs not told (first: %s)", len(failed), len(pairs), failed[0]))
		return
	}
	perBranch := map[string]int64{}
	var unexplained []string
	for i, p := range pairs {
		accepted := p.ok > 0
		if charged[i] {
			perBranch[p.br.id]++
		}
		switch {
		case accepted && !charged[i]:
			r.lost++
		case !accepted && charged[i] && allUnknown(p.refused):
			r.chargedUnknown++
		case !accepted && charged[i]:
			r.chargedRefused++
			unexplained = append(unexplained, fmt.Sprintf("%s on %s: %v", kindName(p.kind), p.br.id, p.refused))
		}
	}
	if len(unexplained) > 0 {
		r.problems = append(r.problems, fmt.Sprintf("%d pairs charged though refused with a definite answer: %s",
			len(unexplained), strings.Join(unexplained[:min(3, len(unexplained))], "; ")))
	}
	// A job whose submit was answered 500 may have charged after the
	// drain: the ledger gets its event a flush later.
	var ledgers []map[string]int64
	var core map[string]int64
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		ledgers, core, err = l.counts()
		if err == nil && l.equal(ledgers, core) {
			break
		}
		if time.Now().After(deadline) {
			if err != nil {
				r.problems = append(r.problems, err.Error())
				return
			}
			break // the figures below say how they differ
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	names := l.s.ledgers()
	for _, b := range []branch{l.br.a, l.br.b, l.br.q} {
		r.double += int(max(0, core[b.id]-perBranch[b.id]))
		r.lost += int(max(0, perBranch[b.id]-core[b.id]))
		if core[b.id] != perBranch[b.id] {
			r.problems = append(r.problems, fmt.Sprintf("%s: %d slips charged, core counted %d", b.id, perBranch[b.id], core[b.id]))
		}
		for i, ledger := range ledgers {
			r.double += int(max(0, ledger[b.id]-core[b.id]))
			r.lost += int(max(0, core[b.id]-ledger[b.id]))
			if ledger[b.id] != core[b.id] {
				r.problems = append(r.problems, fmt.Sprintf("%s: core counted %d, the %s %d", b.id, core[b.id], names[i].name, ledger[b.id]))
			}
		}
	}
	if r.lost > 0 {
		r.problems = append(r.problems, fmt.Sprintf("%d accepted verifications not charged", r.lost))
	}
}

// allUnknown reports whether a pair's refusals left the client not knowing
// whether it was charged: each left the outcome unknown, or answered as a
// request after such a one must (v1's duplicate_slip, for the slip the
// first request had verified).
func allUnknown(whats []string) bool {
	unknown := false
	for _, w := range whats {
		switch {
		case unknownOutcome(w):
			unknown = true
		case w != "400 duplicate_slip":
			return false
		}
	}
	return unknown
}

type quotaRecord struct {
	LimitQuota *int64
	UsedQuota  int64
}

// quota reads a branch's quota record through the b2b API.
func (l *load) quota(branchID string) (quotaRecord, error) {
	a, err := l.s.b2b("GET", "/b2b/branches/"+branchID+"/quota", nil)
	if err != nil {
		return quotaRecord{}, err
	}
	if !a.ok() || a.body.Data.Branch == nil {
		return quotaRecord{}, fmt.Errorf("quota of %s: %s", branchID, a.what())
	}
	return quotaRecord{a.body.Data.Branch.LimitQuota, a.body.Data.Branch.UsedQuota}, nil
}

// capAtUsed sets a branch's limit to its used quota.
func (l *load) capAtUsed(b branch) error {
	q, err := l.quota(b.id)
	if err != nil {
		return err
	}
	a, err := l.s.b2b("PUT", "/b2b/branches/"+b.id+"/quota", map[string]any{"limitQuota": q.UsedQuota})
	if err != nil {
		return err
	}
	if !a.ok() {
		return fmt.Errorf("capping %s at %d: %s", b.id, q.UsedQuota, a.what())
	}
	return nil
}

// charged verifies a pair again on v2 with its branch at its limit: 200
// says the branch had verified the slip (charged), QUOTA_EXCEEDED that it
// had not. A transient refusal is asked again.
func (l *load) charged(p *pair) (bool, error) {
	path := "/v2/verify/bank"
	if p.wallet {
		path = "/v2/verify/wallet"
	}
	var what string
	for range 5 {
		a, err := l.s.send(call{method: "POST", path: path, body: payloadBody(p.payload, ""), key: p.br.key})
		switch {
		case err != nil:
			what = transportError(err)
		case a.status == 200:
			return true, nil
		case a.body.Error.Code == "QUOTA_EXCEEDED":
			return false, nil
		default:
			what = a.what()
		}
	}
	return false, fmt.Errorf("%s on %s: %s", kindName(p.kind), p.br.id, what)
}

func kindName(k kind) string {
	return [...]string{"bank v2", "bank v2 signed", "wallet", "image", "v1", "v1 repeat", "cross-branch", "quota branch",
		"quota change", "async", "batch"}[k]
}

// table is the matrix in markdown.
func table(rows []result) string {
	var b strings.Builder
	b.WriteString("\n| fault | load | sent | accepted | refused (what clients saw) | lost | double-charged | charged but refused | charged, answered 500 or not at all | quota changes (ok/sent, limit moved) | jobs called back | callbacks refused by the receiver | repeats | slowest answer | recovery | drained | seconds with failures | p99 while held |\n")
	b.WriteString("|---|---|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %d | %d | %d | %d | %s | %d/%d | %d | %d | %s | %s | %s | %d | %s |\n", r.fault, r.load, r.sent, r.accepted, r.refused,
			r.lost, r.double, r.chargedRefused, r.chargedUnknown, r.quota, r.called, r.jobs, r.hookRefused, r.repeats,
			r.slowest.Round(time.Millisecond), r.recovery.Round(time.Millisecond), r.drained.Round(time.Millisecond),
			r.failedSeconds, r.p99Held.Round(time.Millisecond))
	}
	b.WriteString("\nrecovery: from the fault's removal to the first request accepted again; drained: to every accepted job\n" +
		"ended and called back and the ledger equal to core's counters; seconds with failures: seconds of the clock in which\n" +
		"a request was sent that got a 5xx or no answer; p99 while held: of the requests sent from the fault's injection\n" +
		"to the end of its removal.\n")
	return b.String()
}
