package dev_test

import (
	"bufio"
	"bytes"
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
// through one core is a duplicate at the other; the core that answered it
// killed, every next request is answered by the other, the killed one is
// started again and every other process keeps running; stopped and started
// again, the stack keeps its data.
func TestMakeRunPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole stack with PostgreSQL")
	}
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
	settings := []string{"SLIP_STORE=postgres", "SLIP_CORE_ADDR=" + strings.Join(cores, ","),
		"SLIP_ADMIN_ADDR=" + strings.Join(admins, ","), "SLIP_POSTGRES_ADDR=" + strings.Join(pg, ",")}
	s := startStack(t, dataDir, p, settings...)
	for _, line := range []string{"stack: PostgreSQL on " + pg[0] + ", its synchronous standby on " + pg[1],
		"stack: 2 cores on PostgreSQL: " + cores[0] + " (pid ", "stack: ready on http://" + p.edge} {
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
	first := answered(t, cores)
	if first[0]+first[1] != 1 {
		t.Fatalf("core answers %v after one verification, want 1 in all", first)
	}
	// Again until the other core has answered it (the edge takes turns
	// between idle cores): a duplicate there too.
	other := 0
	if first[0] == 1 {
		other = 1
	}
	for i := 0; answered(t, cores)[other] == 0; i++ {
		if i == 10 {
			t.Fatalf("10 requests, none reached %s: the edge sends to one core only", cores[other])
		}
		verify(true)
	}

	// The core that answered first, killed: the other answers everything.
	killed := 1 - other
	syscall.Kill(corePID(t, dataDir, cores[killed]), syscall.SIGKILL)
	for range 10 {
		verify(true)
	}
	exited, back := "stack: core on "+cores[killed]+" exited (137); starting it again in 1s", "stack: core on "+cores[killed]+" is back"
	testnet.Eventually(t, time.Minute, func() bool { return strings.Contains(s.Output(), back) },
		func() string { return "the killed core did not come back:\n" + s.Output() })
	if out := s.Output(); !strings.Contains(out, exited) || s.Exited() || strings.Contains(out, "a tier exited") {
		t.Fatalf("a core killed, the rest of the stack did not keep running:\n%s", out)
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

// answered is how many requests each core has answered
// (slip_core_answers_total of every code).
func answered(t *testing.T, cores []string) []int {
	t.Helper()
	n := make([]int, len(cores))
	for i, addr := range cores {
		res, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if name, value, ok := strings.Cut(sc.Text(), " "); ok && strings.HasPrefix(name, "slip_core_answers_total{") {
				v, _ := strconv.Atoi(value)
				n[i] += v
			}
		}
		res.Body.Close()
	}
	return n
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
