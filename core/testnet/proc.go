package testnet

import (
	"bytes"
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
)

// Build compiles the program of a package of this module (such as
// "core/cmd/core") once per test binary and returns the path of the
// executable.
func Build(tb testing.TB, pkg string) string {
	tb.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if bin, ok := built[pkg]; ok {
		return bin
	}
	root, err := moduleRoot()
	if err != nil {
		tb.Fatal(err)
	}
	if builtDir == "" {
		// Shared by the tests of this binary; removed with the OS's temp files.
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

// Proc is a program a test runs as a real process. Its output is kept and
// printed when the test fails.
type Proc struct {
	tb   testing.TB
	bin  string
	env  []string
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	out  bytes.Buffer
}

// Start runs bin with the test's environment plus env until the test ends
// (then SIGTERM).
func Start(tb testing.TB, bin string, env ...string) *Proc {
	tb.Helper()
	p := &Proc{tb: tb, bin: bin, env: env}
	p.start()
	tb.Cleanup(func() {
		p.Stop()
		if tb.Failed() {
			tb.Logf("%s output:\n%s", filepath.Base(bin), p.Output())
		}
	})
	return p
}

func (p *Proc) start() {
	p.tb.Helper()
	p.cmd = exec.Command(p.bin)
	p.cmd.Env = append(os.Environ(), p.env...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		p.tb.Fatal(err)
	}
	done := make(chan struct{})
	p.done = done
	go func(cmd *exec.Cmd) { cmd.Wait(); close(done) }(p.cmd)
}

// Write keeps the program's output.
func (p *Proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// Output returns what the program wrote so far, across restarts.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

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
	fmt.Fprintf(p, "--- restart ---\n")
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

// WaitHTTP polls url until it answers 200, failing the test after timeout
// or when p (if not nil) exits first.
func WaitHTTP(tb testing.TB, url string, timeout time.Duration, p *Proc) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		res, err := http.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		if p != nil && p.Exited() {
			tb.Fatalf("%s exited before %s answered:\n%s", filepath.Base(p.bin), url, p.Output())
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s did not answer 200 within %v: %v", url, timeout, err)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not a wait for time to pass
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
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}

// WaitTCP polls addr until it accepts a connection, failing the test after
// timeout.
func WaitTCP(tb testing.TB, addr string, timeout time.Duration) {
	tb.Helper()
	Eventually(tb, timeout, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, func() string { return addr + " accepts no connection" })
}
