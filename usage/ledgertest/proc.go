package ledgertest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// Build compiles the program of pkg (a path below the module root, such
// as "usage/cmd/usage") into the test's temporary directory.
func Build(tb testing.TB, root, pkg string) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, "./"+pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// Proc is a program the test runs as a real process, with its output kept
// and shown when the test fails.
type Proc struct {
	bin  string
	env  []string
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	out  bytes.Buffer
}

// Run starts bin with the test's environment plus env; it is stopped with
// SIGTERM when the test ends.
func Run(tb testing.TB, bin string, env ...string) *Proc {
	tb.Helper()
	p := &Proc{bin: bin, env: env}
	p.Start(tb)
	tb.Cleanup(func() {
		p.Signal(syscall.SIGTERM)
		if tb.Failed() {
			tb.Logf("%s output:\n%s", filepath.Base(bin), p.Output())
		}
	})
	return p
}

// Start starts the program (again).
func (p *Proc) Start(tb testing.TB) {
	tb.Helper()
	p.cmd = exec.Command(p.bin)
	p.cmd.Env = append(os.Environ(), p.env...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	p.done = done
	go func(cmd *exec.Cmd) { cmd.Wait(); close(done) }(p.cmd)
}

// Signal sends sig and waits for the program to exit.
func (p *Proc) Signal(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(sig)
	<-p.done
}

// Exited reports whether the program has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *Proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// Output is what the program wrote so far, across restarts.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}
