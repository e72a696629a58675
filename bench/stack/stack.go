// Package stack starts a fresh dev stack for a bench run, exactly as a user
// does (make run), on free loopback ports with a temporary data directory and
// the bench seed, with core's state in bbolt (one core) or in PostgreSQL
// (SLIP_STORE=postgres: a primary, its synchronous standby and several
// cores), and reads the CPU time each tier's processes have used, so a run
// can state throughput per core of each tier.
package stack

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options of a stack.
type Options struct {
	// Repo is the repository root, where make run is run.
	Repo string
	// Seed is the seed file the stack loads.
	Seed string
	// DataDir holds the stack's data; empty: a temporary directory removed
	// by Stop.
	DataDir string
	// Env adds variables (NAME=value), after the ones Start sets.
	Env []string
	// Log is the file the stack's output goes to; empty: a file in the
	// temporary directory.
	Log string
	// Ready bounds the wait for the edge's /health (default 3 minutes: the
	// first start builds the programs).
	Ready time.Duration
	// Store is where core keeps its state: Bbolt (or empty), one core on
	// bbolt's file; Postgres, make run's SLIP_STORE=postgres, a PostgreSQL
	// primary and its synchronous standby shared by Cores cores behind
	// the edge. PostgreSQL runs as its own user when the stack runs as
	// root, so Start lets every user through the directory above DataDir
	// (search permission only, not listing).
	Store string
	// Cores is the number of cores on PostgreSQL (default 2).
	Cores int
}

// The stores a stack keeps core's state in.
const (
	Bbolt    = "bbolt"
	Postgres = "postgres"
)

// Stack is a running dev stack.
type Stack struct {
	// Edge is the edge's address (host:port), the only one clients use.
	Edge string
	// EdgeMetrics, Core and Usage are the addresses (host:port) of the
	// edge's metrics listener, the first core's listener and the usage
	// tier's, each serving GET /metrics: what the bench reads to tell a
	// settled stack. Cores are every core's listeners, Core first.
	EdgeMetrics, Core, Usage string
	Cores                    []string
	// Store is where core keeps its state (Bbolt or Postgres).
	Store string

	cmd  *exec.Cmd
	log  *os.File // the stack's combined output
	done chan error
	tmp  string
	stop sync.Once
	err  error // of the first Stop
}

// freeAddrs returns n loopback addresses whose ports are free now, each
// different: all are held open until the last is picked, since a port
// closed at once may be handed out again by the next pick.
func freeAddrs(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// listeners are the n addresses a variable lists.
type listeners struct {
	name string
	n    int
}

// letThrough lets every user search dir (o+x), as PostgreSQL's user must
// to reach the data directory in it when the stack runs as root (make run
// refuses otherwise); it does not let them list it.
func letThrough(dir string) error {
	if os.Geteuid() != 0 {
		return nil // PostgreSQL runs as this user
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	return os.Chmod(dir, fi.Mode().Perm()|0o001)
}

// Start runs make run in its own process group and waits until the edge
// answers /health with 200.
func Start(o Options) (*Stack, error) {
	if o.Repo == "" || o.Seed == "" {
		return nil, errors.New("stack: needs the repository root and a seed file")
	}
	if _, err := os.Stat(filepath.Join(o.Repo, "deploy", "dev", "run.sh")); err != nil {
		return nil, fmt.Errorf("stack: %s is not the repository root (no deploy/dev/run.sh)", o.Repo)
	}
	switch o.Store {
	case "":
		o.Store = Bbolt
	case Bbolt, Postgres:
	default:
		return nil, fmt.Errorf("stack: store %q: want %s or %s", o.Store, Bbolt, Postgres)
	}
	cores := 1
	if o.Store == Postgres {
		cores = o.Cores
		if cores == 0 {
			cores = 2
		}
	}
	seed, err := filepath.Abs(o.Seed)
	if err != nil {
		return nil, err
	}
	s := &Stack{done: make(chan error, 1), Store: o.Store}
	if o.DataDir == "" || o.Log == "" {
		if s.tmp, err = os.MkdirTemp("", "slipbench-"); err != nil {
			return nil, err
		}
	}
	if o.DataDir == "" {
		o.DataDir = filepath.Join(s.tmp, "data")
	}
	if o.Log == "" {
		o.Log = filepath.Join(s.tmp, "stack.log")
	}
	if s.log, err = os.Create(o.Log); err != nil {
		s.cleanup()
		return nil, fmt.Errorf("stack: %w", err)
	}
	env := append(os.Environ(), "SLIP_DATA_DIR="+o.DataDir, "SLIP_SEED="+seed, "SLIP_EDGE_DRAIN=100ms")
	if o.Store == Postgres {
		env = append(env, "SLIP_STORE=postgres")
		if err := letThrough(filepath.Dir(o.DataDir)); err != nil {
			s.cleanup()
			return nil, fmt.Errorf("stack: %w", err)
		}
	}
	// Every listener of every tier on a free port, so the bench never meets
	// another stack on this machine; a list of them where make run takes
	// one per core (and PostgreSQL's primary and standby).
	addr := map[string]string{}
	names := []listeners{{"SLIP_EDGE_ADDR", 1}, {"SLIP_CORE_ADDR", cores}, {"SLIP_EDGE_METRICS_ADDR", 1}, {"SLIP_KAFKA_ADDR", 1},
		{"SLIP_CLICKHOUSE_ADDR", 1}, {"SLIP_CLICKHOUSE_HTTP_ADDR", 1}, {"SLIP_USAGE_ADDR", 1}, {"SLIP_DISPATCHER_ADDR", 1},
		{"SLIP_ADMIN_ADDR", cores}}
	if o.Store == Postgres {
		names = append(names, listeners{"SLIP_POSTGRES_ADDR", 2}) // the primary, the standby
	}
	var all int
	for _, n := range names {
		all += n.n
	}
	free, err := freeAddrs(all)
	if err != nil {
		s.cleanup()
		return nil, fmt.Errorf("stack: %w", err)
	}
	for _, n := range names {
		addr[n.name], free = strings.Join(free[:n.n], ","), free[n.n:]
		env = append(env, n.name+"="+addr[n.name])
	}
	env = append(env, o.Env...)
	for _, kv := range o.Env {
		if name, v, ok := strings.Cut(kv, "="); ok && addr[name] != "" {
			addr[name] = v
		}
	}
	s.Edge, s.EdgeMetrics, s.Usage = addr["SLIP_EDGE_ADDR"], addr["SLIP_EDGE_METRICS_ADDR"], addr["SLIP_USAGE_ADDR"]
	s.Cores = strings.Split(addr["SLIP_CORE_ADDR"], ",")
	s.Core = s.Cores[0]
	s.cmd = exec.Command("make", "-s", "run")
	s.cmd.Dir = o.Repo
	s.cmd.Env = env
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		s.cleanup()
		return nil, fmt.Errorf("stack: make run: %w", err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	ready := o.Ready
	if ready == 0 {
		ready = 3 * time.Minute
	}
	deadline := time.Now().Add(ready)
	c := &http.Client{Timeout: time.Second}
	for {
		if res, err := c.Get("http://" + s.Edge + "/health"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return s, nil
			}
		}
		select {
		case err := <-s.done:
			s.cleanup()
			return nil, fmt.Errorf("stack: make run exited (%v) before it was ready:\n%s", err, tail(s.Output()))
		case <-time.After(100 * time.Millisecond): // polling interval
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("stack: not ready within %v:\n%s", ready, tail(s.Output()))
		}
	}
}

// Exited returns why the stack exited, or nil while it runs.
func (s *Stack) Exited() error {
	select {
	case err := <-s.done:
		s.done <- err // keep it for Stop
		if err == nil {
			err = errors.New("make run exited")
		}
		return fmt.Errorf("stack: exited (%v):\n%s", err, tail(s.Output()))
	default:
		return nil
	}
}

// Output returns what the stack printed so far.
func (s *Stack) Output() string {
	raw, _ := os.ReadFile(s.log.Name())
	return string(raw)
}

// Stop sends SIGTERM to the whole stack, as Ctrl-C does, waits for it (then
// kills what is left after 30 s) and removes a temporary data directory.
// Later calls return the first call's answer.
func (s *Stack) Stop() error {
	s.stop.Do(func() { s.err = s.terminate() })
	return s.err
}

func (s *Stack) terminate() error {
	pg := -s.cmd.Process.Pid
	syscall.Kill(pg, syscall.SIGTERM)
	var err error
	select {
	case err = <-s.done:
	case <-time.After(30 * time.Second):
		syscall.Kill(pg, syscall.SIGKILL)
		err = errors.New("stack: did not stop on SIGTERM within 30s; killed")
		<-s.done
	}
	s.cleanup()
	if err != nil && strings.Contains(err.Error(), "signal") {
		err = nil // make itself dies of the signal it forwards
	}
	return err
}

func (s *Stack) cleanup() {
	if s.log != nil {
		s.log.Close()
	}
	if s.tmp != "" {
		os.RemoveAll(s.tmp)
	}
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// CPU is the CPU time (user + system) each tier's processes have used, by
// program name (core, edge, broker, postgres, …), every process of a name
// summed: both cores of a stack on PostgreSQL are "core", its primary and
// standby with all their backends "postgres". A key with a slash is a part
// of the key before it, not more CPU: "postgres/primary" and
// "postgres/standby" split "postgres" by server.
type CPU map[string]time.Duration

// Sub returns c - o per tier.
func (c CPU) Sub(o CPU) CPU {
	out := CPU{}
	for k, v := range c {
		out[k] = v - o[k]
	}
	return out
}

// clockTick is the kernel's USER_HZ, the unit of /proc/<pid>/stat times; it
// is 100 on every Linux platform Go supports.
const clockTick = 100

// CPU returns the CPU time used so far by every process of the stack
// below make and its run script, by program name, with what each one's
// children that exited and were reaped used: PostgreSQL's postmaster
// starts backends and autovacuum workers that come and go, and their CPU
// is the postmaster's once they are gone. (A core that exits and is
// started again by make run is reaped by the script, whose CPU is not
// counted: its time until then is lost.) It returns an empty map where
// /proc is missing.
func (s *Stack) CPU() CPU {
	out := CPU{}
	for _, p := range descendants(s.cmd.Process.Pid) {
		name, cpu, ok := procStat(p)
		if !ok || name == "make" || name == "bash" || name == "run.sh" || name == "sh" {
			continue
		}
		out[name] += cpu
		if name == "postgres" {
			if c := pgCluster(p); c != "" {
				out[name+"/"+c] += cpu
			}
		}
	}
	return out
}

// procStat reads a process's name and the user+system CPU time of it and
// of its reaped children.
func procStat(pid int) (string, time.Duration, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, false
	}
	// The name is in parentheses and may hold spaces; fields follow the
	// last ')'.
	open, close := bytes.IndexByte(raw, '('), bytes.LastIndexByte(raw, ')')
	if open < 0 || close < open {
		return "", 0, false
	}
	f := strings.Fields(string(raw[close+1:]))
	if len(f) < 15 {
		return "", 0, false
	}
	var ticks int64
	for _, i := range []int{11, 12, 13, 14} { // fields 14 to 17: utime, stime, cutime, cstime
		t, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += t
	}
	return string(raw[open+1 : close]), time.Duration(ticks) * time.Second / clockTick, true
}

// pgCluster returns the cluster_name of the PostgreSQL server process pid
// belongs to ("primary", "standby"; make run sets it), or "".
func pgCluster(pid int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	return clusterOf(string(raw))
}

// clusterOf returns the cluster_name in a PostgreSQL process's command
// line (/proc/<pid>/cmdline), or "": a backend's is its title, "postgres:
// primary: ...", the postmaster's its arguments, NUL-separated,
// "cluster_name=primary" among them.
func clusterOf(cmdline string) string {
	if rest, ok := strings.CutPrefix(cmdline, "postgres: "); ok {
		if name, _, ok := strings.Cut(rest, ":"); ok && !strings.Contains(name, " ") {
			return name
		}
		return ""
	}
	for _, arg := range strings.Split(cmdline, "\x00") {
		if v, ok := strings.CutPrefix(arg, "cluster_name="); ok {
			return v
		}
	}
	return ""
}

// descendants returns the process ids below root.
func descendants(root int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(raw, ')')
		f := strings.Fields(string(raw[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], pid)
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
