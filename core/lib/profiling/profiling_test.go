package profiling

import (
	"bytes"
	"compress/gzip"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestServe runs Serve on a real listener and asks it as `go tool pprof`
// would: the index lists the profiles, a heap profile and a one-second CPU
// profile come back as gzipped pprof data, the command line is not served
// and an overlong profile is refused.
func TestServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if !Is(ctx.Path()) {
			ctx.SetStatusCode(fasthttp.StatusNotFound)
			return
		}
		Serve(ctx)
	}}
	go srv.Serve(ln)
	defer srv.Shutdown()
	base := "http://" + ln.Addr().String()
	get := func(path string) (int, string, []byte) {
		t.Helper()
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, res.Header.Get("Content-Type"), body
	}
	isProfile := func(path string, body []byte) {
		t.Helper()
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%s: not a gzipped profile: %v (%q)", path, err, body[:min(len(body), 80)])
		}
		raw, err := io.ReadAll(zr)
		if err != nil || len(raw) == 0 {
			t.Fatalf("%s: %d bytes, %v", path, len(raw), err)
		}
	}

	code, ctype, body := get("/debug/pprof/")
	if code != 200 || !strings.HasPrefix(ctype, "text/html") || !strings.Contains(string(body), "goroutine") || !strings.Contains(string(body), "heap") {
		t.Fatalf("index: %d %s\n%s", code, ctype, body)
	}
	if code, _, body := get("/debug/pprof"); code != 200 || !strings.Contains(string(body), "heap") { // redirected to the index
		t.Errorf("/debug/pprof: %d", code)
	}
	for _, path := range []string{"/debug/pprof/heap", "/debug/pprof/goroutine", "/debug/pprof/profile?seconds=1"} {
		code, ctype, body := get(path)
		if code != 200 || ctype != "application/octet-stream" {
			t.Fatalf("%s: %d %s %q", path, code, ctype, body[:min(len(body), 200)])
		}
		isProfile(path, body)
	}
	if code, _, body := get("/debug/pprof/goroutine?debug=1"); code != 200 || !strings.Contains(string(body), "goroutine profile:") {
		t.Errorf("goroutine text: %d %s", code, body)
	}
	for path, want := range map[string]int{
		"/debug/pprof/cmdline":            404,
		"/debug/pprof/nosuch":             404,
		"/debug/pprof/profile?seconds=61": 400,
		"/debug/pprof/trace?seconds=3600": 400,
	} {
		if code, _, body := get(path); code != want {
			t.Errorf("%s: %d, want %d: %s", path, code, want, body)
		}
	}
}

func TestIs(t *testing.T) {
	for path, want := range map[string]bool{
		"/debug/pprof": true, "/debug/pprof/": true, "/debug/pprof/heap": true,
		"/debug/pprofx": false, "/debug": false, "/metrics": false, "/v2/debug/pprof/": false,
	} {
		if got := Is([]byte(path)); got != want {
			t.Errorf("Is(%q) = %v", path, got)
		}
	}
}
