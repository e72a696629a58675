//go:build faults

package faults_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/slipverify/slipverify/core/testnet"
)

// Phases of each fault, counted in requests offered, so a slow machine
// stretches them instead of shortening the load.
const (
	before = 100 // offered before the fault
	during = 150 // offered while the fault holds
	after  = 200 // offered once the platform answers again
)

// fault is one row of the matrix: inject applies it and returns what
// removes it; when remove returns, the faulted part runs again.
type fault struct {
	name   string
	inject func(t *testing.T, s *stack) (remove func())
}

var matrix = []fault{
	{"kill -9 edge", kill(func(s *stack) *testnet.Program { return s.edge })},
	{"kill -9 core", kill(func(s *stack) *testnet.Program { return s.core })},
	{"kill -9 dispatcher", kill(func(s *stack) *testnet.Program { return s.dispatcher })},
	{"kill -9 usage", kill(func(s *stack) *testnet.Program { return s.usage })},
	{"broker stopped, restarted", func(t *testing.T, s *stack) func() {
		s.broker.Stop()
		return func() { s.broker.Restart(t) }
	}},
	{"ClickHouse stopped, restarted", func(t *testing.T, s *stack) func() {
		if err := s.ch.Stop(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := s.ch.Restart(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}},
	{"core slowed to 1/5 speed", slowCore},
	{"disk full for core's bbolt", diskFull},
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

// slowCore throttles core the way a container's CPU quota does: stopped
// for 80 ms of every 100 ms.
func slowCore(t *testing.T, s *stack) func() {
	pid := s.core.Pid()
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
	fault                      string
	sent, accepted             int
	refused                    string
	lost, duplicated           int
	slowest, recovery, drained time.Duration
	problems                   []string
}

// TestFaultMatrix runs every fault in turn on one stack, each with a
// branch of its own, and prints what clients saw and what was lost.
func TestFaultMatrix(t *testing.T) {
	keys := make([]string, len(matrix))
	for i := range keys {
		keys[i] = uuid.NewString()
	}
	s := startStack(t, keys)
	var rows []result
	for i, f := range matrix {
		ok := t.Run(f.name, func(t *testing.T) {
			r := runFault(t, s, f, fmt.Sprintf("br-%d", i), keys[i])
			rows = append(rows, r)
			for _, p := range r.problems {
				t.Error(p)
			}
		})
		if !ok && s.anyExited() {
			break // a tier did not come back: the next rows would measure that
		}
	}
	fmt.Print(table(rows))
	if n := s.rcv.badSignatures(); n > 0 {
		t.Errorf("%d callbacks with a bad signature", n)
	}
}

func (s *stack) anyExited() bool {
	for _, p := range []*testnet.Program{s.broker, s.core, s.usage, s.dispatcher, s.edge} {
		if p.Exited() {
			return true
		}
	}
	return false
}

// runFault offers the load, injects the fault, removes it, and then checks
// that every accepted verification is recorded and billed once and every
// accepted job answered and called back.
func runFault(t *testing.T, s *stack, f fault, branch, key string) result {
	l := newLoad(s, key)
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
	remove := f.inject(t, s)
	waitOffered(before + during)
	removed := time.Now()
	remove()
	for !l.one(false) { // the first request the platform accepts again
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	r := result{fault: f.name, recovery: time.Since(removed)}
	waitOffered(offered.Load() + after)
	stopLoad()

	r.drained = l.settle(t, branch, removed)
	l.audit(t, branch, &r)
	l.mu.Lock()
	r.sent, r.accepted, r.slowest = len(l.slips), len(l.accepted), l.slowest
	l.mu.Unlock()
	r.refused = l.refusals()
	if n := l.refusedAs("500 INTERNAL_SERVER_ERROR"); n > 0 {
		r.problems = append(r.problems, fmt.Sprintf("%d requests answered INTERNAL_SERVER_ERROR (a failure the platform did not expect)", n))
	}
	if n := l.refusedAs("client timeout"); n > 0 {
		r.problems = append(r.problems, fmt.Sprintf("%d requests hung past %v", n, clientTimeout))
	}
	return r
}

// settle waits until every accepted job is done and called back and the
// ledger holds as many billable verifications of the branch as core
// counted, and returns how long after the fault's removal that was.
func (l *load) settle(t *testing.T, branch string, removed time.Time) time.Duration {
	answered := map[string]bool{}
	var pending []string
	var ledger, core int64
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pending = pending[:0]
		for _, job := range l.jobs {
			if !answered[job] {
				a, err := l.s.do("GET", "/v2/verify/bank/jobs/"+job, l.key, nil)
				answered[job] = err == nil && a.body.Data.Status == "done" &&
					a.body.Data.Result != nil && a.body.Data.Result.Status == "success"
			}
			if !answered[job] || !l.s.rcv.delivered(job) {
				pending = append(pending, job)
			}
		}
		var err1, err2 error
		ledger, err1 = l.s.ledgerBillable(branch)
		core, err2 = l.s.coreUsed(branch)
		if len(pending) == 0 && err1 == nil && err2 == nil && ledger == core {
			return time.Since(removed)
		}
		if time.Now().After(deadline) {
			t.Errorf("not settled in 2m: %d of %d jobs unanswered or not called back (first %v); ledger %d, core %d (%v %v)",
				len(pending), len(l.jobs), first(pending), ledger, core, err1, err2)
			return time.Since(removed)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return s[0]
}

// audit verifies every slip sent once more: core must know each accepted
// one (isDuplicate, and free: a self-duplicate costs no quota), and the
// rest are billed now. Then each slip has been billed exactly once, in
// core and in the ledger, or something was lost or billed twice.
func (l *load) audit(t *testing.T, branch string, r *result) {
	l.mu.Lock()
	slips := append([]string(nil), l.slips...)
	l.mu.Unlock()
	var forgot, failed atomic.Int64
	work := make(chan string)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				a, err := l.s.do("POST", "/v2/verify/bank", l.key, map[string]any{"payload": p})
				switch {
				case err != nil || a.status != 200 || a.body.Data.IsDuplicate == nil:
					failed.Add(1)
				case !*a.body.Data.IsDuplicate && l.accepted[p]:
					forgot.Add(1)
				}
			}
		}()
	}
	for _, p := range slips {
		work <- p
	}
	close(work)
	wg.Wait()
	if failed.Load() > 0 {
		r.problems = append(r.problems, fmt.Sprintf("audit: %d of %d verifications failed", failed.Load(), len(slips)))
	}
	want := int64(len(slips))
	var ledger, core int64
	testnet.Eventually(t, time.Minute, func() bool {
		var err1, err2 error
		ledger, err1 = l.s.ledgerBillable(branch)
		core, err2 = l.s.coreUsed(branch)
		return err1 == nil && err2 == nil && ledger == core && ledger >= want
	}, func() string { return fmt.Sprintf("ledger %d, core %d, slips %d", ledger, core, want) })
	r.lost = int(forgot.Load()) + int(max(0, want-ledger)) + int(max(0, want-core))
	r.duplicated = int(max(0, ledger-want)) + int(max(0, core-want))
	if forgot.Load() > 0 {
		r.problems = append(r.problems, fmt.Sprintf("%d accepted verifications unknown to core afterwards", forgot.Load()))
	}
	if r.lost > 0 || r.duplicated > 0 {
		r.problems = append(r.problems, fmt.Sprintf("%d slips: core billed %d, ledger %d", want, core, ledger))
	}
}

// table is the matrix in markdown.
func table(rows []result) string {
	var b strings.Builder
	b.WriteString("\n| fault | sent | accepted | refused (what clients saw) | lost | duplicated billing | slowest answer | recovery | drained |\n")
	b.WriteString("|---|---:|---:|---|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %d | %d | %s | %s | %s |\n", r.fault, r.sent, r.accepted, r.refused,
			r.lost, r.duplicated, r.slowest.Round(time.Millisecond), r.recovery.Round(time.Millisecond), r.drained.Round(time.Millisecond))
	}
	b.WriteString("\nrecovery: from the fault's removal to the first request accepted again; drained: to every accepted job\n" +
		"answered and called back and the ledger equal to core's counters.\n")
	return b.String()
}
