package gateway_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/edge/authn"
	"github.com/slipverify/slipverify/edge/config"
	"github.com/slipverify/slipverify/edge/gateway"
	"github.com/slipverify/slipverify/edge/openapi"
)

const (
	keyMain   = "11111111-1111-4111-8111-111111111111"
	keyIP     = "22222222-2222-4222-8222-222222222222"
	keyOff    = "33333333-3333-4333-8333-333333333333"
	keyExp    = "55555555-5555-4555-8555-555555555555"
	keyBan    = "66666666-6666-4666-8666-666666666666"
	keyUser   = "77777777-7777-4777-8777-777777777777"
	keyNoSign = "88888888-8888-4888-8888-888888888888"
	keyFast   = "99999999-9999-4999-8999-999999999999"
	keyAFast  = "44444444-4444-4444-8444-444444444444" // svc-a's second branch
	secretA   = "svc-a-first-client-secret"
)

var (
	specOnce sync.Once
	spec     *openapi.Spec
	specErr  error
)

// apiDoc is the edge's OpenAPI document.
func apiDoc(t testing.TB) *openapi.Spec {
	specOnce.Do(func() { spec, specErr = openapi.Load() })
	if specErr != nil {
		t.Fatal(specErr)
	}
	return spec
}

// TestMain removes the core program the tests build: every test runs it as
// a process (testnet.StartCore) behind an in-process edge.
func TestMain(m *testing.M) { testnet.Main(m) }

// clock is the edge's settable clock.
type clock = testnet.Clock

func newClock() *clock { return testnet.NewClock(time.Now()) }

// edge is an edge in this process, on a real listener, in front of core.
type edge struct {
	url    string
	gw     *gateway.Gateway
	clock  *clock
	access string // the access log's file
}

// rawConn is a TCP connection to the edge, for requests an HTTP client would
// not send as written and answers read byte for byte. It gives up after 10
// seconds and closes when the test ends.
func (e *edge) rawConn(t testing.TB) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	return conn
}

// raw writes request to a new connection to the edge, exactly as given, and
// reads the answer.
func (e *edge) raw(t testing.TB, request string) *http.Response {
	t.Helper()
	conn := e.rawConn(t)
	io.WriteString(conn, request)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%q: no answer: %v", strings.SplitN(request, "\r\n", 2)[0], err)
	}
	return res
}

func startEdge(t testing.TB, core *testnet.Program, env ...string) *edge {
	t.Helper()
	vars := map[string]string{"SLIP_CORE_ADDR": core.Addr, "SLIP_EDGE_TOKEN": testnet.EdgeToken,
		"SLIP_EDGE_ACCESS_LOG": filepath.Join(t.TempDir(), "access.log")}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	cfg, err := config.Load(nil, func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	gw, err := gateway.FromConfig(cfg, clk.Now, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: gw.Handler(), ErrorHandler: gw.ErrorHandler, HeaderReceived: gw.HeaderReceived, MaxRequestBodySize: 8 << 20,
		Logger: discardLogger{}, NoDefaultServerHeader: true, DisablePreParseMultipartForm: true}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(gateway.Listen(ln)) // as the edge program serves
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections() // unused connections would hold Shutdown
		srv.Shutdown()
		gw.Close()
	})
	return &edge{url: "http://" + ln.Addr().String(), gw: gw, clock: clk, access: vars["SLIP_EDGE_ACCESS_LOG"]}
}

// accessLog returns the access log's lines so far, each checked to be one
// JSON object.
func (e *edge) accessLog(t testing.TB) (lines []map[string]any, raw string) {
	t.Helper()
	e.gw.AccessLog().Flush()
	b, err := os.ReadFile(e.access)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("access log line is not a JSON object: %v: %q", err, line)
		}
		lines = append(lines, m)
	}
	return lines, string(b)
}

// answer is a response as a client sees it.
type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (e *edge) do(t testing.TB, method, path, body string, header ...string) answer {
	t.Helper()
	req, _ := http.NewRequest(method, e.url+path, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, header: res.Header, raw: string(raw)}
	if err := json.Unmarshal(raw, &a.body); err != nil {
		t.Fatalf("%s %s: body is not JSON: %q", method, path, raw)
	}
	// Every answer a client receives must be what the API document says; an
	// unknown endpoint's answer, the error envelope of its version.
	doc := apiDoc(t)
	if _, known := doc.Operation(method, path); !known {
		schema := "V1Error"
		seg, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
		seg, _, _ = strings.Cut(seg, "?")
		switch seg {
		case "v2", "b2b", "banks", "qr", "bank-accounts", "health": // as openapi.json says
			schema = "V2Error"
		}
		if err := doc.ValidateSchema(schema, raw); err != nil || res.StatusCode != 404 {
			t.Errorf("%s %s (no such endpoint) %d: %v\n%s", method, path, res.StatusCode, err, raw)
		}
	} else if err := doc.ValidateResponse(method, path, res.StatusCode, raw); err != nil {
		t.Errorf("%s %s %d: the answer does not follow openapi.json: %v\n%s", method, path, res.StatusCode, err, raw)
	}
	return a
}

func bearer(key string) []string { return []string{"Authorization", "Bearer " + key} }

// signed returns the headers of a request signed as a client signs it.
func (e *edge) signed(key, secret, method, uri, body string, skew time.Duration, nonce string) []string {
	ts := fmt.Sprint(e.clock.Now().Add(skew).Unix())
	if nonce == "" {
		nonce = uuid.NewString()
	}
	sts := authn.AppendStringToSign(nil, []byte(method), authn.SignedPath([]byte(uri)), []byte(ts), []byte(nonce), []byte(body))
	return []string{"X-API-Key", key, "X-Timestamp", ts, "X-Nonce", nonce, "X-Signature", authn.NewSigner(secret).Sign(sts)}
}

func (a answer) code() string {
	if e, ok := a.body["error"].(map[string]any); ok {
		return e["code"].(string)
	}
	if m, ok := a.body["message"].(string); ok && a.status >= 400 {
		return m
	}
	return ""
}

func (a answer) want(t testing.TB, status int, code string) {
	t.Helper()
	if a.status != status || a.code() != code {
		t.Errorf("want %d %s, got %d %s", status, code, a.status, a.raw)
	}
}

// get walks a decoded JSON value by keys.
var get = testnet.JSONAt

// discardLogger silences fasthttp's messages about requests the tests
// refuse on purpose.
type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}
