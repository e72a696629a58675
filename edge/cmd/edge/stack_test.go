package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/edge/openapi"
)

// The secrets of the stack these tests run. Each is distinctive, so a test
// can look for it in every byte the programs write.
const (
	edgeToken     = "edge-sec-token-7f3a9c1e5b2d8f4a6c0e9b3d"
	masterKey     = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00"
	keyMain       = "1a2b3c4d-5e6f-4a1b-8c2d-3e4f5a6b7c8d" // branch key with a webhook secret
	keyOther      = "2b3c4d5e-6f7a-4b2c-9d3e-4f5a6b7c8d9e"
	clientKey     = "5ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7"
	clientSecret  = "b2b-sec-secret-4e8a1f7c2b9d"
	webhookSecret = "whsec_sec_9d2c7f1a4e8b3c6d"
)

// seedJSON is one service with a main branch (webhook URL and secret), a
// second branch and a B2B client that may do everything.
func seedJSON(webhookURL string) string {
	return `{"services":[{"id":"svc","name":"Shop","state":"active","userBanned":false,
	"quota":{"limit":1000000,"cycleAnchorDay":1},"rate":{"bank":100000,"wallet":100000},
	"branches":[
	 {"id":"br-main","name":"main","main":true,"key":"` + keyMain + `","active":true,"ipAllow":["*"],"limitQuota":null,
	  "webhookUrl":"` + webhookURL + `","webhookSecret":"` + webhookSecret + `"},
	 {"id":"br-other","name":"other","main":false,"key":"` + keyOther + `","active":true,"ipAllow":["*"],"limitQuota":null,"webhookUrl":null,"webhookSecret":null}],
	"b2bClients":[{"key":"` + clientKey + `","secret":"` + clientSecret + `",
	 "permissions":["branch:read","branch:write","quota:read","quota:write","bank-account:read","bank-account:write"]}],
	"bankAccounts":[]}]}`
}

// stack is core and the edge as real processes, with a recorder between
// them that keeps every byte the edge sends to core.
type stack struct {
	core, edge *testnet.Program
	edgeAddr   string
	url        string
	coreURL    string
	rec        *recorder
}

// TestMain removes the programs the tests build.
func TestMain(m *testing.M) { testnet.Main(m) }

// startStack starts core and an edge in front of it; edgeEnv adds to or
// overrides the edge's settings.
func startStack(t *testing.T, coreEnv []string, edgeEnv ...string) *stack {
	t.Helper()
	if testing.Short() {
		t.Skip("runs core and the edge as processes")
	}
	s := &stack{}
	seed := testnet.Seed(t, seedJSON("https://shop.example/hooks/slip"))
	s.core = testnet.StartCore(t, seed, append([]string{"SLIP_EDGE_TOKEN=" + edgeToken, "SLIP_MASTER_KEY=" + masterKey}, coreEnv...)...)
	s.rec = newRecorder(t, s.core.Addr)
	s.edge = testnet.StartEdge(t, s.rec.addr, append([]string{"SLIP_EDGE_TOKEN=" + edgeToken}, edgeEnv...)...)
	s.edgeAddr, s.url, s.coreURL = s.edge.Addr, s.edge.URL(), s.core.URL()
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	return s
}

// recorder relays TCP connections to core and keeps what the edge sent on
// each, so a test can read the requests core received.
type recorder struct {
	addr   string
	target string
	mu     sync.Mutex
	conns  []*bytes.Buffer
}

func newRecorder(t *testing.T, target string) *recorder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{addr: ln.Addr().String(), target: target}
	testnet.Serve(t, ln, r.relay)
	return r
}

func (r *recorder) relay(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", r.target)
	if err != nil {
		return
	}
	defer up.Close()
	buf := new(bytes.Buffer)
	r.mu.Lock()
	r.conns = append(r.conns, buf)
	r.mu.Unlock()
	go func() { io.Copy(c, up); c.Close() }()
	io.Copy(up, io.TeeReader(c, lockedWriter{&r.mu, buf}))
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// seen is one request core received from the edge.
type seen struct {
	method, uri string
	header      http.Header
	body        string
}

// requests returns the client requests core received so far, in each
// connection's order; the edge's own auth lookups and readiness probes are
// left out. A byte stream core could not read as requests fails the test.
func (r *recorder) requests(t *testing.T) []seen {
	t.Helper()
	r.mu.Lock()
	var streams [][]byte
	for _, b := range r.conns {
		streams = append(streams, bytes.Clone(b.Bytes()))
	}
	r.mu.Unlock()
	var out []seen
	for _, s := range streams {
		br := bufio.NewReader(bytes.NewReader(s))
		for {
			req, err := http.ReadRequest(br)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("core received bytes that are not a sequence of requests: %v\n%q", err, s)
			}
			body, err := io.ReadAll(req.Body)
			if err != nil {
				t.Fatalf("core received a request with a broken body: %v\n%q", err, s)
			}
			if strings.HasPrefix(req.RequestURI, "/internal/") || req.RequestURI == "/ready" {
				continue
			}
			out = append(out, seen{method: req.Method, uri: req.RequestURI, header: req.Header, body: string(body)})
		}
	}
	return out
}

// rawAnswer is what a client on a raw connection received.
type rawAnswer struct {
	responses []*http.Response
	bodies    []string
	closed    bool // the edge closed the connection
}

// raw sends payload on a new connection, then reads up to want answers and
// whether the edge then closes the connection. An edge that keeps the
// connection open after want answers must answer probe, a request sent
// after the payload, as the next answer (so nothing else was made of the
// payload); the probe's answer is not among the want.
func raw(t *testing.T, addr, payload string, want int, probe string) rawAnswer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second)) // a hung edge fails the test, it does not hang it
	if _, err := io.WriteString(c, payload); err != nil {
		t.Fatal(err)
	}
	var a rawAnswer
	br := bufio.NewReader(c)
	for len(a.responses) < want {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			a.closed = true
			return a
		}
		body, _ := io.ReadAll(res.Body)
		a.responses = append(a.responses, res)
		a.bodies = append(a.bodies, string(body))
		if res.Close {
			break
		}
	}
	if probe != "" {
		io.WriteString(c, probe) // fails when the edge closed: the read below tells
	}
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		a.closed = true
		return a
	}
	body, _ := io.ReadAll(res.Body)
	if probe == "" {
		t.Fatalf("the edge answered what the client did not send: %d %s", res.StatusCode, body)
	}
	if !strings.Contains(string(body), `"probe"`) && res.StatusCode != http.StatusOK {
		t.Fatalf("the answer after the payload is not the probe's: %d %s", res.StatusCode, body)
	}
	return a
}

var (
	specOnce sync.Once
	spec     *openapi.Spec
)

// checkError asserts that body is an error of the spec's format for a
// request to path that got status: the documented answer of the operation,
// or the version's error envelope for statuses the operation does not list.
func checkError(t *testing.T, method, path string, status int, body string) {
	t.Helper()
	loadSpec(t)
	if status < 400 || status >= 500 {
		t.Errorf("%s %s: want a 4xx, got %d %s", method, path, status, body)
		return
	}
	schema := "V1Error"
	if strings.HasPrefix(path, "/v2/") || strings.HasPrefix(path, "/b2b/") {
		schema = "V2Error"
	}
	if _, known := spec.Operation(method, path); known {
		if err := spec.ValidateResponse(method, path, status, []byte(body)); err != nil {
			t.Errorf("%s %s %d: the answer does not follow openapi.json: %v\n%s", method, path, status, err, body)
		}
	} else if err := spec.ValidateSchema(schema, []byte(body)); err != nil {
		t.Errorf("%s %s %d: not the spec's error format: %v\n%s", method, path, status, err, body)
	}
	var env struct {
		Status  string
		Message string
		Error   struct{ Code string }
	}
	json.Unmarshal([]byte(body), &env)
	code := env.Error.Code
	if schema == "V1Error" {
		code = env.Message
	}
	for _, r := range api.Rows() {
		if r.V2Code == code || r.V1Code == code {
			return
		}
	}
	t.Errorf("%s %s: error code %q is not in the catalog: %s", method, path, code, body)
}

// checkRefusal asserts that body is a v2 error: the edge refuses a request
// it cannot parse before it knows the request's path, so before it knows
// its version, and answers in the current version's format.
func checkRefusal(t *testing.T, status int, body string) {
	t.Helper()
	loadSpec(t)
	if status < 400 || status >= 500 {
		t.Errorf("want a 4xx, got %d %s", status, body)
	}
	if err := spec.ValidateSchema("V2Error", []byte(body)); err != nil {
		t.Errorf("%d: not a v2 error: %v: %s", status, err, body)
	}
}

func loadSpec(t *testing.T) {
	specOnce.Do(func() {
		var err error
		if spec, err = openapi.Load(); err != nil {
			t.Fatal(err)
		}
	})
}

// bearerReq is a raw request with the main branch's Bearer key.
func bearerReq(method, path, body string, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n", method, path, keyMain)
	for _, h := range extra {
		b.WriteString(h + "\r\n")
	}
	if body != "" || method == "POST" {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n" + body)
	return b.String()
}
