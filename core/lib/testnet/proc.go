package testnet

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildMu  sync.Mutex
	builtDir string
	built    = map[string]string{}
	inMain   bool // Main runs the tests
)

// Main runs the tests of a package that starts programs and then removes
// the programs Build made. Such a package's TestMain calls it:
//
//	func TestMain(m *testing.M) { testnet.Main(m) }
func Main(m *testing.M) {
	inMain = true
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

// Build compiles the program of a package of this module (such as
// "core/cmd/core") once per test binary and returns the path of the
// executable. The package's TestMain must call Main, which removes it.
func Build(tb testing.TB, pkg string) string {
	tb.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if !inMain {
		tb.Fatal("testnet.Build: the package's TestMain must call testnet.Main, which removes the programs built")
	}
	if bin, ok := built[pkg]; ok {
		return bin
	}
	root, err := moduleRoot()
	if err != nil {
		tb.Fatal(err)
	}
	if builtDir == "" {
		if builtDir, err = os.MkdirTemp("", "slipverify-bin"); err != nil {
			tb.Fatal(err)
		}
	}
	bin := filepath.Join(builtDir, strings.ReplaceAll(pkg, "/", "_"))
	cmd := exec.Command("go", "build", "-o", bin, "./"+pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	built[pkg] = bin
	return bin
}

// moduleRoot finds the directory of go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Log is a program's output, kept for the test: it may be written while it
// is read.
type Log struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write keeps p.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Proc is a program a test runs as a real process. Its output is kept and
// printed when the test fails.
type Proc struct {
	tb   testing.TB
	bin  string
	args []string             // StartCommand's
	attr *syscall.SysProcAttr // StartCommand's: nil, as this process
	env  []string
	cmd  *exec.Cmd
	done chan struct{}
	out  Log
}

// Start runs bin with the test's environment plus env until the test ends
// (then SIGTERM and a wait for its exit). Of a variable set twice in env,
// the last value counts.
func Start(tb testing.TB, bin string, env ...string) *Proc {
	tb.Helper()
	return startProc(tb, &Proc{tb: tb, bin: bin, env: env})
}

func startProc(tb testing.TB, p *Proc) *Proc {
	tb.Helper()
	p.start()
	tb.Cleanup(func() {
		p.Stop()
		if tb.Failed() {
			tb.Logf("%s output:\n%s", filepath.Base(p.bin), p.Output())
		}
	})
	return p
}

func (p *Proc) start() {
	p.tb.Helper()
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.SysProcAttr = p.attr
	p.cmd.Env = append(os.Environ(), p.env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		p.tb.Fatal(err)
	}
	done := make(chan struct{})
	p.done = done
	go func(cmd *exec.Cmd) { cmd.Wait(); close(done) }(p.cmd)
}

// Output returns what the program wrote so far, across restarts.
func (p *Proc) Output() string { return p.out.String() }

// Stop sends SIGTERM and waits for the program to exit.
func (p *Proc) Stop() { p.signal(syscall.SIGTERM) }

// Kill kills the program with SIGKILL, as a crash would, and waits.
func (p *Proc) Kill() { p.signal(syscall.SIGKILL) }

func (p *Proc) signal(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(sig)
	<-p.done
}

// Restart starts the program again, with the same environment, after it
// stopped.
func (p *Proc) Restart() {
	p.tb.Helper()
	p.Stop()
	fmt.Fprintf(&p.out, "--- restart ---\n")
	p.start()
}

// Pid is the process id of the program's current run.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the program has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Running is what a wait for a program watches: whether it has exited
// (then the wait fails at once) and what it wrote. A Proc is one.
type Running interface {
	Exited() bool
	Output() string
}

// poll is the interval of the waits below: a poll, not a wait for time to
// pass.
const poll = 20 * time.Millisecond

// probe asks for health: no connection is kept (an idle one could hold a
// program's shutdown), and a program that accepts but never answers fails
// the attempt, not the wait.
var probe = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// WaitHTTP polls url until it answers 200, failing the test after timeout
// or when p (if not nil) exits first.
func WaitHTTP(tb testing.TB, url string, timeout time.Duration, p Running) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		res, err := probe.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("status %d", res.StatusCode)
		}
		if p != nil && p.Exited() {
			tb.Fatalf("the program exited before %s answered:\n%s", url, p.Output())
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s did not answer 200 within %v: %v", url, timeout, err)
		}
		time.Sleep(poll)
	}
}

// Eventually polls cond until it holds, failing the test with what() after
// timeout.
func Eventually(tb testing.TB, timeout time.Duration, cond func() bool, what func() string) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("not within %v: %s", timeout, what())
		}
		time.Sleep(poll)
	}
}

// Listening reports whether addr accepts a TCP connection now.
func Listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// WaitTCP polls addr until it accepts a connection, failing the test after
// timeout.
func WaitTCP(tb testing.TB, addr string, timeout time.Duration) {
	tb.Helper()
	Eventually(tb, timeout, func() bool { return Listening(addr) },
		func() string { return addr + " accepts no connection" })
}

// RunFunc is a program's run function: it serves until ctx ends, reading
// its settings with getenv.
type RunFunc func(ctx context.Context, args []string, getenv func(string) string) error

// RunInProcess runs a program's run function in this process with the settings
// env until the test ends (then it stops it and fails the test on its
// error), and returns once url answers 200.
func RunInProcess(tb testing.TB, run RunFunc, env map[string]string, url string) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &served{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.err = run(ctx, nil, func(k string) string { return env[k] })
	}()
	tb.Cleanup(func() {
		cancel()
		<-p.done
		if p.err != nil {
			tb.Errorf("the program: %v", p.err)
		}
	})
	WaitHTTP(tb, url, 10*time.Second, p)
}

// served is a run function running in this process, as a Running.
type served struct {
	done chan struct{}
	err  error // set before done closes
}

func (p *served) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *served) Output() string {
	if p.Exited() && p.err != nil {
		return p.err.Error()
	}
	return ""
}
