package accesslog

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

// syncBuffer is a writer tests read while the log's goroutine writes.
type syncBuffer struct{ testnet.Log }

func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.SplitAfter(s.String(), "\n") {
		if line == "" {
			continue
		}
		if !strings.HasSuffix(line, "}\n") {
			t.Fatalf("line not ended by a newline: %q", line)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line is not one JSON object: %v: %q", err, line)
		}
		out = append(out, m)
	}
	return out
}

var start = time.Date(2026, 11, 22, 3, 4, 5, 123456789, time.FixedZone("ICT", 7*3600))

func entry(path string) *Entry {
	return &Entry{
		Start: start, ID: []byte("0a1b2c3d4e5f-1f"), Method: []byte("POST"), Path: []byte(path),
		Status: 429, Code: "RATE_LIMIT_EXCEEDED", Duration: 1234567 * time.Nanosecond,
		IP: netip.MustParseAddr("203.0.113.9"), Service: []byte("svc-1"), Branch: []byte("br-1"),
		BytesIn: 87, BytesOut: 112,
	}
}

func TestLine(t *testing.T) {
	var w syncBuffer
	l := New(&w, Config{FlushInterval: time.Hour})
	l.Write(entry("/v2/verify/bank"))
	l.Write(&Entry{Start: start, ID: []byte("x-2"), Method: []byte("GET"), Path: []byte("/health"), Status: 200})
	l.Flush()
	lines := w.lines(t)
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2", len(lines))
	}
	want := map[string]any{
		"time": "2026-11-21T20:04:05.123456789Z", "level": "INFO", "msg": "access", "tier": "edge",
		"id": "0a1b2c3d4e5f-1f", "method": "POST", "path": "/v2/verify/bank", "status": 429.0,
		"code": "RATE_LIMIT_EXCEEDED", "duration_us": 1234.0, "ip": "203.0.113.9",
		"service": "svc-1", "branch": "br-1", "bytes_in": 87.0, "bytes_out": 112.0,
	}
	for k, v := range want {
		if lines[0][k] != v {
			t.Errorf("%s = %v, want %v", k, lines[0][k], v)
		}
	}
	if len(lines[0]) != len(want) {
		t.Errorf("fields %v, want exactly %v", lines[0], want)
	}
	// Absent facts are absent fields, not empty ones.
	for _, k := range []string{"code", "ip", "service", "branch", "b2b_client"} {
		if _, ok := lines[1][k]; ok {
			t.Errorf("second line has %s: %v", k, lines[1])
		}
	}
	if l.Lines() != 2 || l.Dropped() != 0 {
		t.Errorf("lines %d dropped %d, want 2 and 0", l.Lines(), l.Dropped())
	}
}

// TestHostileRequestParts: whatever bytes a client puts in the method or
// the path, each request stays one JSON line whose fields say what was
// sent (invalid UTF-8 as U+FFFD), and no request can forge another line.
func TestHostileRequestParts(t *testing.T) {
	paths := []string{
		"/v2/verify/bank\n{\"msg\":\"access\",\"status\":200}",
		`/a"b\c`, "/ctl\x00\x01\x1f\x7f\t\r", "/ไทย/ok", "/bad\xff\xfeutf8\xe0\x80", "/" + strings.Repeat("%", 3000),
		"/ff\b\f\u2028\u2029<&>",
	}
	var w syncBuffer
	l := New(&w, Config{FlushInterval: time.Hour})
	for _, p := range paths {
		e := entry(p)
		e.Method = []byte("GE\"T\n")
		l.Write(e)
	}
	l.Flush()
	lines := w.lines(t)
	if len(lines) != len(paths) {
		t.Fatalf("%d lines for %d requests", len(lines), len(paths))
	}
	for i, p := range paths {
		want := strings.ToValidUTF8(p, "\uFFFD")
		if p == "/bad\xff\xfeutf8\xe0\x80" {
			want = "/bad\uFFFD\uFFFDutf8\uFFFD\uFFFD" // one U+FFFD per invalid byte, as encoding/json writes them
		}
		if lines[i]["path"] != want || lines[i]["method"] != "GE\"T\n" {
			t.Errorf("line %d: path %q method %q, want %q", i, lines[i]["path"], lines[i]["method"], want)
		}
	}
}

// blockingWriter holds every Write until released.
type blockingWriter struct {
	syncBuffer
	release chan struct{}
	entered chan struct{}
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	return b.syncBuffer.Write(p)
}

// TestSlowWriterNeverBlocksRequests: while the writer is stuck, Write
// returns at once; past MaxPending lines are dropped and counted, and the
// rest arrive in order once the writer moves again.
func TestSlowWriterNeverBlocksRequests(t *testing.T) {
	w := &blockingWriter{release: make(chan struct{}), entered: make(chan struct{}, 1)}
	l := New(w, Config{FlushInterval: time.Hour, FlushBytes: 1, MaxPending: 4 << 10})
	l.Write(entry("/first")) // FlushBytes reached: the writer takes it and blocks
	<-w.entered
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 1000 {
			l.Write(entry(fmt.Sprintf("/later-%03d", i)))
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Write blocked behind a stuck writer")
	}
	if l.Dropped() == 0 {
		t.Fatal("no line dropped though 1000 lines exceed MaxPending")
	}
	close(w.release)
	testnet.Eventually(t, 10*time.Second, func() bool { return l.Lines()+l.Dropped() == 1001 },
		func() string {
			return fmt.Sprintf("%d lines written, %d dropped, want 1001 in all", l.Lines(), l.Dropped())
		})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := w.lines(t)
	if uint64(len(lines)) != l.Lines() || lines[0]["path"] != "/first" {
		t.Fatalf("%d lines written (counted %d), first %v", len(lines), l.Lines(), lines[0]["path"])
	}
	// The kept lines are the first ones, in order; the rest were dropped.
	for i, line := range lines[1:] {
		if want := fmt.Sprintf("/later-%03d", i); line["path"] != want {
			t.Fatalf("line %d is %v, want %s", i+1, line["path"], want)
		}
	}
	// Lines are kept while fewer than MaxPending bytes wait.
	n := len(l.appendLine(nil, entry("/later-000")))
	if kept, want := len(lines)-1, (4<<10+n-1)/n; kept != want {
		t.Errorf("%d lines kept while the writer was stuck, want %d (%d-byte lines, MaxPending 4 KiB)", kept, want, n)
	}
}

// TestFlushBytesWakesWriter: a full chunk is written without waiting for
// the interval.
func TestFlushBytesWakesWriter(t *testing.T) {
	var w syncBuffer
	l := New(&w, Config{FlushInterval: time.Hour, FlushBytes: 1 << 10})
	defer l.Close()
	for range 10 {
		l.Write(entry("/v2/verify/bank"))
	}
	testnet.Eventually(t, 10*time.Second, func() bool { return l.Lines() > 0 },
		func() string { return "no chunk written before the interval" })
}

func TestOpen(t *testing.T) {
	if l, err := Open("off", nil, Config{}); l != nil || err != nil {
		t.Fatalf("off: %v, %v", l, err)
	}
	path := filepath.Join(t.TempDir(), "access.log")
	if err := os.WriteFile(path, []byte("kept\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(path, nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	l.Write(entry("/v2/verify/bank"))
	if err := l.Close(); err != nil { // Close writes what waits
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(b), "kept\n{") || strings.Count(string(b), "\n") != 2 {
		t.Fatalf("file not appended to: %q", b)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "no", "such", "dir", "a.log"), nil, Config{}); err == nil {
		t.Fatal("a file that cannot be created opened")
	}
}

func TestWriteAllocs(t *testing.T) {
	var w syncBuffer
	l := New(&w, Config{FlushInterval: time.Hour, MaxPending: 1 << 30})
	defer l.Close()
	e := entry("/v2/verify/bank")
	if n := testing.AllocsPerRun(1000, func() { l.Write(e) }); n != 0 {
		t.Fatalf("Write allocates %.1f times per line", n)
	}
}

// BenchmarkWrite is the request path's cost of a line: formatting it into
// the buffer (the writer's system calls are amortised over a chunk and run
// on the log's goroutine; here chunks go to io.Discard every 256 lines).
func BenchmarkWrite(b *testing.B) {
	l := New(io.Discard, Config{FlushInterval: time.Hour})
	defer l.Close()
	e := entry("/v2/verify/bank")
	b.ReportAllocs()
	for i := range b.N {
		l.Write(e)
		if i%256 == 255 {
			l.Flush()
		}
	}
	if l.Dropped() != 0 {
		b.Fatalf("%d lines dropped", l.Dropped())
	}
}

// TestReopen: after the file is moved away (rotation), Reopen sends the
// next lines to a new file at the path; the moved file keeps the earlier
// ones.
func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	l, err := Open(path, nil, Config{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	l.Write(entry("/before"))
	l.Flush()
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	l.Write(entry("/waiting")) // appended before the reopen, written after it
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	l.Write(entry("/after"))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string][]string{path + ".1": {"/before"}, path: {"/waiting", "/after"}} {
		b, _ := os.ReadFile(file)
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("%s: %v: %q", file, err, line)
			}
			got = append(got, m["path"].(string))
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s holds %v, want %v", filepath.Base(file), got, want)
		}
	}
	if s, _ := Open("stderr", io.Discard, Config{}); s.Reopen() != nil || s.Close() != nil {
		t.Error("Reopen or Close of a stderr log failed")
	}
}

// failingWriter refuses every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }

// TestLossesCounted: lines a failed write lost and lines after Close are
// counted, not silently gone; closing twice is harmless.
func TestLossesCounted(t *testing.T) {
	l := New(failingWriter{}, Config{FlushInterval: time.Hour})
	for range 3 {
		l.Write(entry("/v2/verify/bank"))
	}
	l.Flush()
	if l.Failed() != 3 || l.Lines() != 0 {
		t.Fatalf("failed %d written %d, want 3 and 0", l.Failed(), l.Lines())
	}
	var w syncBuffer
	l = New(&w, Config{FlushInterval: time.Hour})
	l.Write(entry("/before"))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l.Write(entry("/after"))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if lines := w.lines(t); len(lines) != 1 || l.Dropped() != 1 {
		t.Fatalf("%d lines written, %d dropped; want the line before Close written and the one after dropped", len(lines), l.Dropped())
	}
}
