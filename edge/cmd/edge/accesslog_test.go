package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

// TestAccessLogRotation runs the edge as a process with its access log in a
// file: a line per answer arrives within the flush interval, and after the
// file is moved away and the edge gets SIGHUP, new lines go to a new file
// at the configured path while the moved one keeps the old; SIGTERM writes
// what waits.
func TestAccessLogRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the edge as a process")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "edge-access.log")
	addr := testnet.FreeAddr(t)
	edge := testnet.Start(t, testnet.Build(t, "edge/cmd/edge"), "SLIP_EDGE_ADDR="+addr, "SLIP_CORE_ADDR="+testnet.FreeAddr(t),
		"SLIP_EDGE_TOKEN="+edgeToken, "SLIP_KAFKA_ADDR=off", "SLIP_EDGE_METRICS_ADDR=off", "SLIP_EDGE_DRAIN=0s",
		"SLIP_EDGE_ACCESS_LOG="+path)
	testnet.WaitTCP(t, addr, 30*time.Second)
	defer http.DefaultClient.CloseIdleConnections()
	get := func(p string) string {
		t.Helper()
		res, err := http.Get("http://" + addr + p)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Fatalf("GET %s: %d", p, res.StatusCode)
		}
		return res.Header.Get("X-Request-Id")
	}
	lines := func(file string) string { b, _ := os.ReadFile(file); return string(b) }
	waitFor := func(file, id string) {
		t.Helper()
		testnet.Eventually(t, 10*time.Second, func() bool { return strings.Contains(lines(file), `"id":"`+id+`"`) },
			func() string { return fmt.Sprintf("no line for %s in %s:\n%s", id, filepath.Base(file), lines(file)) })
	}
	ids := []string{get("/v2/first")}
	waitFor(path, ids[0])
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(edge.Pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// The edge reopens when the signal reaches it; from then on its chunks
	// go to the new file. Without the reopen they would all go on into the
	// moved file and the new one would never appear.
	testnet.Eventually(t, 10*time.Second, func() bool {
		ids = append(ids, get("/v2/next"))
		return strings.Contains(lines(path), `"msg":"access"`)
	}, func() string { return "no line in a new file at the path; the moved one:\n" + lines(path+".1") })
	if edge.Exited() {
		t.Fatalf("the edge exited on SIGHUP:\n%s", edge.Output())
	}
	edge.Stop() // SIGTERM: the edge writes what waits
	old, cur := lines(path+".1"), lines(path)
	if !strings.Contains(old, `"id":"`+ids[0]+`"`) {
		t.Errorf("the moved file lost the first line:\n%s", old)
	}
	for _, id := range ids {
		if n := strings.Count(old+cur, `"id":"`+id+`"`); n != 1 {
			t.Errorf("request %s has %d lines across both files", id, n)
		}
	}
	if n := strings.Count(old+cur, "\n"); n != len(ids) {
		t.Errorf("%d lines for %d requests", n, len(ids))
	}
}
