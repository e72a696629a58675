package docs_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/edge/docs"
	"github.com/slipverify/slipverify/edge/openapi"
)

func TestMain(m *testing.M) { testnet.Main(m) }

// startEdge runs the edge program alone (no core, no broker: the page and
// the document are the edge's own) and returns its address once /docs
// answers.
func startEdge(t *testing.T) string {
	t.Helper()
	addr := testnet.FreeAddr(t)
	p := testnet.Start(t, testnet.Build(t, "edge/cmd/edge"), "SLIP_EDGE_ADDR="+addr, "SLIP_CORE_ADDR="+testnet.FreeAddr(t),
		"SLIP_EDGE_TOKEN="+testnet.EdgeToken, "SLIP_EDGE_METRICS_ADDR=off", "SLIP_KAFKA_ADDR=off", "SLIP_EDGE_DRAIN=0s",
		"SLIP_EDGE_ACCESS_LOG=off")
	testnet.WaitHTTP(t, "http://"+addr+docs.PagePath, time.Minute, p)
	return addr
}

// TestServedWithoutKey: the page and the bundle answer without a key, the
// bundle gzipped to a client that takes it and byte for byte what was
// embedded, and the page under a policy that lets it reach nothing but the
// edge.
func TestServedWithoutKey(t *testing.T) {
	base := "http://" + startEdge(t)
	res, err := http.Get(base + docs.PagePath)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(res.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("GET /docs: %d %v", res.StatusCode, res.Header)
	}
	req, _ := http.NewRequest("GET", base+docs.BundlePath, nil)
	req.Header.Set("Accept-Encoding", "gzip") // set by hand: the transport then leaves the body as sent
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	zr, err := gzip.NewReader(res.Body)
	if err != nil {
		t.Fatalf("bundle: %d, not gzip: %v", res.StatusCode, err)
	}
	js, _ := io.ReadAll(zr)
	if res.StatusCode != 200 || !bytes.Contains(js, []byte(`ReDoc Version: ","`+docs.Version+`"`)) {
		t.Errorf("bundle: %d, %d bytes, not Redoc %s", res.StatusCode, len(js), docs.Version)
	}
}

// TestPageInChromium loads /docs from a real edge in headless Chromium: every
// operation of the OpenAPI document must be on the rendered page, and the
// browser's console must hold nothing but Redoc's attempt at its footer logo
// on a CDN, which the page's policy blocks (the page reaches nothing beyond
// the edge). It writes a screenshot to $DOCS_SCREENSHOT, or else to the
// test's temporary directory, and logs where. Without Chromium the test
// skips, except under CI.
func TestPageInChromium(t *testing.T) {
	browser := chromium()
	if browser == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium not found: CI must load the API reference page (apt-get install chromium)")
		}
		t.Skip("chromium not found (apt-get install chromium)")
	}
	url := "http://" + startEdge(t) + docs.PagePath
	shot := os.Getenv("DOCS_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "docs.png")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// --virtual-time-budget lets the page run until it is idle (the bundle
	// loaded, the document fetched and rendered) before the DOM and the
	// screenshot are taken, without waiting for wall-clock time.
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir="+t.TempDir(), "--enable-logging=stderr", "--v=0", "--virtual-time-budget=30000",
		"--window-size=1280,1600", "--screenshot="+shot, "--dump-dom", url)
	var dom, log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &dom, &log
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, log.String())
	}
	t.Logf("screenshot of %s: %s", url, shot)
	if fi, err := os.Stat(shot); err != nil || fi.Size() == 0 {
		t.Errorf("no screenshot: %v", err)
	}

	spec, err := openapi.Load()
	if err != nil {
		t.Fatal(err)
	}
	page := dom.String()
	n := 0
	for _, e := range spec.Paths() {
		op, _ := spec.Operation(e.Method, e.Path)
		n++
		if !strings.Contains(page, "/operation/"+op.OperationID+`"`) || !strings.Contains(page, ">"+e.Path+"<") {
			t.Errorf("%s %s (%s) is not on the rendered page", e.Method, e.Path, op.OperationID)
		}
	}
	if n < 40 {
		t.Errorf("only %d operations in the document", n)
	}
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, ":CONSOLE") && !strings.Contains(line, "'https://cdn.redoc.ly/redoc/logo-mini.svg' violates") {
			t.Errorf("console: %s", line)
		}
	}
}

// chromium returns the path of a Chromium (or Chrome) program, or "".
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}
