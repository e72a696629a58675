// Package dev_test drives the dev stack as a new user does: make run, then
// real requests.
package dev_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

// demoKey is the seed's main branch key (deploy/dev/seed.json).
const demoKey = "046745d7-0d0a-43c1-ad0d-0d2bb1f9edc2"

// stack is one `make run` in its own process group.
type stack struct {
	cmd  *exec.Cmd
	addr string   // the edge: the only address a client uses
	env  []string // the settings make run was given
	out  testnet.Log
	done chan struct{} // closed when make has exited
}

// Exited reports whether make has exited.
func (s *stack) Exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Output is what make and the tiers wrote so far.
func (s *stack) Output() string { return s.out.String() }

// ports are the stack's listeners for one test; more are those of a mode
// that has more (a second core, PostgreSQL).
type ports struct {
	edge, core, metrics, kafka, usage, admin string
	more                                     []string
}

func freePorts(t *testing.T) ports {
	return ports{edge: testnet.FreeAddr(t), core: testnet.FreeAddr(t), metrics: testnet.FreeAddr(t), kafka: testnet.FreeAddr(t),
		usage: testnet.FreeAddr(t), admin: testnet.FreeAddr(t)}
}

// startStack runs make run with its listeners on p, its data in dataDir and
// the settings extra, and returns once the edge answers /health.
func startStack(t *testing.T, dataDir string, p ports, extra ...string) *stack {
	t.Helper()
	addr := p.edge
	cmd := exec.Command("make", "-s", "run")
	cmd.Dir = "../.."
	env := []string{"SLIP_DATA_DIR=" + dataDir, "SLIP_CORE_ADDR=" + p.core,
		"SLIP_EDGE_ADDR=" + p.edge, "SLIP_EDGE_METRICS_ADDR=" + p.metrics, "SLIP_DISPATCHER_ADDR=" + testnet.FreeAddr(t), "SLIP_EDGE_DRAIN=100ms", "SLIP_KAFKA_ADDR=" + p.kafka,
		"SLIP_CLICKHOUSE_ADDR=" + testnet.FreeAddr(t), "SLIP_CLICKHOUSE_HTTP_ADDR=" + testnet.FreeAddr(t), "SLIP_USAGE_ADDR=" + p.usage,
		"SLIP_ADMIN_ADDR=" + p.admin}
	env = append(env, extra...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 10 * time.Second // a tier left running holds make's output open
	s := &stack{cmd: cmd, addr: addr, env: env, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &s.out, &s.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the tiers get SIGTERM when run.sh dies
		waitClosed(t, p)
		waitGone(t, dataDir) // a tier may still write its data after its listener closed
	})
	testnet.WaitHTTP(t, "http://"+addr+"/health", 3*time.Minute, s) // the first run builds
	return s
}

// stop sends sig to make and run.sh, as Ctrl-C at the terminal (SIGINT)
// or a supervisor stopping the process group (SIGTERM) does, and waits.
// make itself dies of the signal (GNU make re-raises it; on SIGTERM it
// first sends run.sh one more); run.sh stops the tiers, each in a session
// of its own, in the reverse order of their start, so core has shut down
// before the broker does. They must shut down cleanly and free their ports.
func (s *stack) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	syscall.Kill(-s.cmd.Process.Pid, sig)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("make run did not stop on %v:\n%s", sig, s.Output())
	}
	out := s.Output()
	if !strings.Contains(out, `"msg":"shutting down","tier":"core"`) || !strings.Contains(out, `"msg":"shutting down","tier":"edge"`) ||
		!strings.Contains(out, `"msg":"shutting down","tier":"broker"`) ||
		strings.Contains(out, "a tier exited") ||
		strings.Contains(out, `"level":"ERROR"`) {
		t.Errorf("the stack did not stop cleanly:\n%s", out)
	}
	// In order: the edge (after its drain) before core, core before the
	// broker. A signal to every tier at once would have core first.
	edge, core, broker := strings.Index(out, `"msg":"shutting down","tier":"edge"`),
		strings.Index(out, `"msg":"shutting down","tier":"core"`), strings.Index(out, `"msg":"shutting down","tier":"broker"`)
	if !(edge < core && core < broker) {
		t.Errorf("the tiers did not stop in order (edge, core, broker):\n%s", out)
	}
	if testnet.Listening(s.addr) {
		t.Errorf("%s still listens after the stack stopped", s.addr)
	}
}

func request(t *testing.T, s *stack, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+s.addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+demoKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not JSON: %s", raw)
	}
	return res.StatusCode, m
}

// TestMakeRun starts the stack with make run, verifies the seed's listed
// slip through the edge with the seed's key, stops it with Ctrl-C's SIGINT,
// starts it again and finds its data kept; then stops it in the other ways
// a stack is stopped.
func TestMakeRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole stack")
	}
	dataDir := t.TempDir()
	p := freePorts(t)
	s := startStack(t, dataDir, p)
	// The seed's listed KBANK slip (deploy/dev/seed.json).
	const payload = "0041000600000101030040220LS2FLLDUC7V3LSUPD7VW5102TH91046AA6"
	status, body := request(t, s, "POST", "/v2/verify/bank", `{"payload":"`+payload+`"}`)
	data, _ := body["data"].(map[string]any)
	if status != 200 || data["amountInSlip"] != 100.5 || data["isDuplicate"] != false {
		t.Fatalf("verify: %d %v", status, body)
	}
	s.stop(t, syscall.SIGINT)

	s = startStack(t, dataDir, p)
	status, body = request(t, s, "GET", "/v2/info", "")
	if status != 200 {
		t.Fatalf("info: %d %v", status, body)
	}
	if used := body["data"].(map[string]any)["branch"].(map[string]any)["totalUsedQuota"]; used != 1.0 {
		t.Errorf("after restart totalUsedQuota = %v, want 1: data was not kept", used)
	}
	status, body = request(t, s, "POST", "/v2/verify/bank", `{"payload":"`+payload+`"}`)
	if status != 200 || body["data"].(map[string]any)["isDuplicate"] != true {
		t.Errorf("after restart the slip is not a duplicate: %d %v", status, body)
	}
	s.stopScriptTwice(t, p)

	s = startStack(t, dataDir, p)
	s.stop(t, syscall.SIGTERM)

	// make and run.sh killed outright: the tiers, each in a session of its
	// own, get SIGTERM as their parent-death signal and stop.
	s = startStack(t, dataDir, p)
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
	waitClosed(t, p)
}

// waitClosed waits until none of the stack's listeners accepts connections.
func waitClosed(t *testing.T, p ports) {
	t.Helper()
	for _, addr := range append([]string{p.edge, p.core, p.kafka}, p.more...) {
		testnet.Eventually(t, 30*time.Second, func() bool { return !testnet.Listening(addr) }, func() string { return addr + " still listens: a tier outlived run.sh" })
	}
}

// waitGone waits until no process runs with SLIP_DATA_DIR=dataDir in its
// environment: every tier of the stack has exited, so its data directory
// can go.
func waitGone(t *testing.T, dataDir string) {
	t.Helper()
	mark := []byte("\x00SLIP_DATA_DIR=" + dataDir + "\x00")
	var left []string
	testnet.Eventually(t, 30*time.Second, func() bool {
		left = left[:0]
		procs, _ := filepath.Glob("/proc/[0-9]*/environ")
		for _, f := range procs {
			env, err := os.ReadFile(f)
			if err == nil && bytes.Contains(append([]byte{0}, env...), mark) {
				cmd, _ := os.ReadFile(filepath.Join(filepath.Dir(f), "cmdline"))
				left = append(left, fmt.Sprintf("%s (%s)", filepath.Dir(f), bytes.ReplaceAll(bytes.TrimRight(cmd, "\x00"), []byte{0}, []byte{' '})))
			}
		}
		return len(left) == 0
	}, func() string { return fmt.Sprintf("processes of the stack still run: %v", left) })
}

// stopScriptTwice signals run.sh alone, as a supervisor or an impatient
// user's kill does, and again while it is stopping the tiers: the second
// signal must not cut the stop short and leave tiers running.
func (s *stack) stopScriptTwice(t *testing.T, p ports) {
	t.Helper()
	children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", s.cmd.Process.Pid, s.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	script, err := strconv.Atoi(strings.Fields(string(children))[0])
	if err != nil {
		t.Fatalf("make run's child: %q: %v", children, err)
	}
	syscall.Kill(script, syscall.SIGTERM)
	testnet.Eventually(t, 20*time.Second, func() bool { return !testnet.Listening(p.edge) },
		func() string { return "the edge still listens after SIGTERM" })
	syscall.Kill(script, syscall.SIGTERM) // the edge is down: run.sh is stopping the rest
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("make run did not stop:\n%s", s.Output())
	}
	for _, addr := range []string{p.core, p.kafka} {
		if testnet.Listening(addr) {
			t.Errorf("%s still listens after run.sh stopped: a tier was left running", addr)
		}
	}
}
