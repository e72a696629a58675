package dev_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

// TestMakeRunPostgres starts SLIP_STORE=postgres make run: PostgreSQL with
// a synchronous standby and two cores behind the edge. A slip verified
// once is a duplicate whichever core answers; each core killed in turn,
// every request meanwhile is answered by the other, the killed one is
// started again and taken back by the edge, and every other process keeps
// running; stopped and started again, the stack keeps its data.
func TestMakeRunPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole stack with PostgreSQL")
	}
	l := postgresLayout(t)
	dataDir, p, cores, pg, settings := l.dataDir, l.ports, l.cores, l.pg, l.settings
	s := startStack(t, dataDir, p, settings...)
	testnet.Eventually(t, 10*time.Second, func() bool { return strings.Contains(s.Output(), "stack: ready on http://"+p.edge) },
		func() string { return "no stack: ready line:\n" + s.Output() })
	for _, line := range []string{"stack: PostgreSQL on " + pg[0] + ", its synchronous standby on " + pg[1],
		"stack: 2 cores on PostgreSQL: " + cores[0] + " (pid "} {
		if !strings.Contains(s.Output(), line) {
			t.Fatalf("no %q in the stack's output:\n%s", line, s.Output())
		}
	}

	const payload = "0041000600000101030040220LS2FLLDUC7V3LSUPD7VW5102TH91046AA6"
	verify := func(wantDuplicate bool) {
		t.Helper()
		status, body := request(t, s, "POST", "/v2/verify/bank", `{"payload":"`+payload+`"}`)
		if status != 200 || testnet.JSONAt(body, "data", "isDuplicate") != wantDuplicate {
			t.Fatalf("verify: %d %v, want 200 with isDuplicate %v\n%s", status, body, wantDuplicate, s.Output())
		}
	}
	verify(false)
	for range 4 { // the service's core (the other sees the slip once it is killed, below)
		verify(true)
	}
	// Each core killed in turn, the other answering meanwhile: one of them
	// did not see the slip's first verification, and calls it a duplicate.
	for i, addr := range cores {
		pid := corePID(t, dataDir, addr)
		syscall.Kill(pid, syscall.SIGKILL)
		// Dead, its connections closed: a request sent while it was dying
		// may have reached it, and may fail. A killed process's threads
		// end one by one, and its sockets close with the last: its
		// listener refusing connections says they have.
		testnet.Eventually(t, 10*time.Second, func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err != nil
		}, func() string { return addr + " did not die of SIGKILL" })
		for range 10 {
			verify(true)
		}
		back := "stack: core on " + addr + " is back"
		testnet.Eventually(t, time.Minute, func() bool { return strings.Contains(s.Output(), back) },
			func() string { return addr + " killed did not come back:\n" + s.Output() })
		exited := "stack: core on " + addr + " exited (137); starting it again in 1s"
		if out := s.Output(); !strings.Contains(out, exited) || s.Exited() || strings.Contains(out, "a tier exited") {
			t.Fatalf("a core killed, the rest of the stack did not keep running:\n%s", out)
		}
		// Taken back by the edge before the other core is killed.
		testnet.Eventually(t, 10*time.Second, func() bool { return edgeReady(t, p.metrics, addr) },
			func() string { return fmt.Sprintf("the edge did not take core %d (%s) back", i+1, addr) })
	}
	verify(true)
	s.stop(t, syscall.SIGTERM)

	s = startStack(t, dataDir, p, settings...)
	if strings.Contains(s.Output(), "stack: making PostgreSQL's primary") || strings.Contains(s.Output(), "stack: copying PostgreSQL's standby") {
		t.Errorf("started again, the stack made its databases anew:\n%s", s.Output())
	}
	verify(true)
	s.stop(t, syscall.SIGTERM)
}

// layout is where SLIP_STORE=postgres make run listens and keeps its data
// in a test: two cores, PostgreSQL's primary and its standby, on free ports.
type layout struct {
	dataDir   string
	ports     ports
	cores, pg []string
	settings  []string // make run's, beside startStack's
}

func postgresLayout(t *testing.T) layout {
	t.Helper()
	if env, err := os.ReadFile("../env/core.env"); err != nil || !bytes.Contains(env, []byte("\nSLIP_STORE=")) {
		t.Skip("core has no PostgreSQL store yet (deploy/env/core.env lists no SLIP_STORE)")
	}
	// Not t.TempDir: PostgreSQL runs as its own user, which must get
	// through every directory above its data.
	dataDir, err := os.MkdirTemp("", "slip-postgres-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) }) // last: after the stack's processes are gone
	p := freePorts(t)
	cores := []string{p.core, testnet.FreeAddr(t)}
	admins := []string{p.admin, testnet.FreeAddr(t)}
	pg := []string{testnet.FreeAddr(t), testnet.FreeAddr(t)}
	p.more = append([]string{cores[1], admins[1]}, pg...)
	return layout{dataDir: dataDir, ports: p, cores: cores, pg: pg, settings: []string{"SLIP_STORE=postgres",
		"SLIP_CORE_ADDR=" + strings.Join(cores, ","), "SLIP_ADMIN_ADDR=" + strings.Join(admins, ","), "SLIP_POSTGRES_ADDR=" + strings.Join(pg, ",")}}
}

// edgeReady reports whether the edge whose metrics listener is metrics
// sends requests to core (its edge_core_ready gauge).
func edgeReady(t *testing.T, metrics, core string) bool {
	t.Helper()
	res, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	want := `edge_core_ready{core="` + core + `"} 1`
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if sc.Text() == want {
			return true
		}
	}
	return false
}

// corePID is the process of the stack in dataDir's core on addr.
func corePID(t *testing.T, dataDir, addr string) int {
	t.Helper()
	marks := [][]byte{[]byte("\x00SLIP_DATA_DIR=" + dataDir + "\x00"), []byte("\x00SLIP_CORE_ADDR=" + addr + "\x00")}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range procs {
		comm, _ := os.ReadFile(dir + "/comm")
		env, _ := os.ReadFile(dir + "/environ")
		env = append([]byte{0}, env...)
		if string(comm) == "core\n" && bytes.Contains(env, marks[0]) && bytes.Contains(env, marks[1]) {
			pid, _ := strconv.Atoi(filepath.Base(dir))
			return pid
		}
	}
	t.Fatalf("no core of the stack on %s", addr)
	return 0
}
