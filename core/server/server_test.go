package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/bank/sandbox"
	"github.com/slipverify/slipverify/core/lib/egress"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/secret"
	"github.com/slipverify/slipverify/core/server"
	"github.com/slipverify/slipverify/core/slip"
	"github.com/slipverify/slipverify/core/store"
	"github.com/slipverify/slipverify/core/verify"
)

const edgeToken = "test-edge-token-0123456789abcdef0123"

// clock is a settable test clock.
type clock = testnet.Clock

func ptr[T any](v T) *T                   { return &v }
func bankPayload(code, ref string) string { return slip.Bank{BankCode: code, TransRef: ref}.Encode() }

// core is core's server on a real loopback listener with a fresh store.
type core struct {
	url     string
	clock   *clock
	store   store.Store
	handler fasthttp.RequestHandler
	srv     *fasthttp.Server
	server  *server.Server
}

var listed = sandbox.Slip{
	BankCode: "004", TransRef: "LISTEDREF0001", Amount: 100.5, Date: "2026-11-20T11:35:51+07:00",
	Fee: 0, Ref1: "INV-1",
	Sender: bank.Party{Bank: bank.BankRef{ID: "004", Name: "Kasikorn Bank", Short: "KBANK"},
		Account: bank.Account{Name: bank.AccountName{TH: "นาย ทดสอบ ระบบ", EN: "MR. TEST SYSTEM"},
			Bank: bank.AccountBank{Type: "BANKAC", Account: "xxx-x-x1234-x"}}},
	Receiver: bank.Receiver{Bank: bank.BankRef{ID: "014", Name: "Siam Commercial Bank", Short: "SCB"},
		Account: bank.Account{Name: bank.AccountName{TH: "บริษัท ทดสอบสลิป จำกัด", EN: "SLIP TEST CO LTD"},
			Bank:  bank.AccountBank{Type: "BANKAC", Account: "xxx-x-x5678-x"},
			Proxy: &bank.Proxy{Type: bank.ProxyBiller, Account: "xxxxxxxxx5678"}}},
}

func startCore(t testing.TB, mutate func(*store.Records)) *core {
	t.Helper()
	return startCoreWith(t, mutate, nil)
}

// startCoreWith is startCore with the sandbox bank wrapped by wrap, if set.
func startCoreWith(t testing.TB, mutate func(*store.Records), wrap func(bank.Connector) bank.Connector) *core {
	t.Helper()
	c := testnet.NewClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.FixedZone("ICT", 7*3600)))
	st, err := store.Open(filepath.Join(t.TempDir(), "core.db"), c.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	box, _ := secret.New(strings.Repeat("ab", 32))
	r := store.Records{
		Services: []store.Service{
			{ID: "svc", Name: "Shop", State: store.StateActive, QuotaLimit: 1000, CycleAnchorDay: 1, Rate: store.Rate{Bank: 10, Wallet: 10}},
			{ID: "svc-expired", Name: "Old", State: store.StateExpired, QuotaLimit: 10, CycleAnchorDay: 1},
			{ID: "svc-banned", Name: "Bad", State: store.StateBanned, QuotaLimit: 10, CycleAnchorDay: 1},
			{ID: "svc-user", Name: "User banned", State: store.StateActive, UserBanned: true, QuotaLimit: 10, CycleAnchorDay: 1},
		},
		Branches: []store.Branch{
			{ID: "br-main", ServiceID: "svc", Name: "Main", Main: true, Active: true, KeyDigest: store.Digest("k1")},
			{ID: "br-sub", ServiceID: "svc", Name: "Sub", Active: true, KeyDigest: store.Digest("k2")},
			{ID: "br-off", ServiceID: "svc", Name: "Off", Active: false, KeyDigest: store.Digest("k3")},
			{ID: "br-exp", ServiceID: "svc-expired", Main: true, Active: true, KeyDigest: store.Digest("k4")},
			{ID: "br-ban", ServiceID: "svc-banned", Main: true, Active: true, KeyDigest: store.Digest("k5")},
			{ID: "br-user", ServiceID: "svc-user", Main: true, Active: true, KeyDigest: store.Digest("k6")},
		},
	}
	for i, secretText := range []string{"first-client-secret-0001", "second-client-secret-002"} {
		d := store.Digest(fmt.Sprintf("client-key-%d", i))
		r.B2BClients = append(r.B2BClients, store.B2BClient{KeyDigest: d, ServiceID: "svc",
			Secret: box.Seal(secretText, "b2b/"+d), Permissions: []string{"quota:read"}})
	}
	if mutate != nil {
		mutate(&r)
	}
	if _, err := st.InsertMissing(r); err != nil {
		t.Fatal(err)
	}
	pending := listed
	pending.BankCode, pending.TransRef = "006", "PENDINGREF01"
	pending.Date = c.Now().Add(-time.Minute).Format(time.RFC3339)
	sb, err := sandbox.New(sandbox.Config{
		PendingBank:   "006",
		Slips:         []sandbox.Slip{listed, pending},
		NotFound:      []string{"NOTFOUNDREF1"},
		UpstreamError: []string{"UPSTREAMREF1"},
	}, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	fetch, err := egress.New(egress.Config{Policy: egress.NewPolicy([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}), MaxRedirects: 3})
	if err != nil {
		t.Fatal(err)
	}
	var upstream bank.Connector = sb
	if wrap != nil {
		upstream = wrap(sb)
	}
	v := &verify.Verifier{Store: st, Upstream: upstream, Images: verify.Images{Egress: fetch}}
	cs := server.New(v, nil, st, box, edgeToken, 64, slog.New(slog.DiscardHandler))
	h := cs.Handler()
	srv := &fasthttp.Server{Handler: h, MaxRequestBodySize: 8 << 20, DisablePreParseMultipartForm: true} // as core/cmd/core serves
	return &core{url: listen(t, srv), clock: c, store: st, handler: h, srv: srv, server: cs}
}

// listen serves srv on a loopback port until the test ends and returns its
// URL.
func listen(t testing.TB, srv *fasthttp.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		// Connections the client opened but never used would hold
		// Shutdown until the client's idle timeout: close them first.
		http.DefaultClient.CloseIdleConnections()
		srv.Shutdown()
	})
	return "http://" + ln.Addr().String()
}

// heldBank holds every lookup until released, then answers as the bank it
// wraps would, or with the error of a context ended meanwhile.
type heldBank struct {
	bank.Connector
	arrived, release chan struct{}
}

func (h heldBank) Bank(ctx context.Context, code, ref string) (bank.Slip, error) {
	h.arrived <- struct{}{}
	<-h.release
	if err := ctx.Err(); err != nil {
		return bank.Slip{}, err
	}
	return h.Connector.Bank(ctx, code, ref)
}

// TestShutdownFinishesRequests: a verification in flight when core begins
// to shut down finishes and is answered; its bank lookup is not cancelled
// (it may be billed) by the shutdown.
func TestShutdownFinishesRequests(t *testing.T) {
	held := heldBank{arrived: make(chan struct{}), release: make(chan struct{})}
	c := startCoreWith(t, nil, func(b bank.Connector) bank.Connector { held.Connector = b; return held })
	answered := make(chan answer)
	go func() {
		answered <- c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main",
			body: map[string]any{"payload": bankPayload("004", "LISTEDREF0001")}})
	}()
	<-held.arrived
	stopped := make(chan error)
	go func() { stopped <- c.srv.Shutdown() }()
	addr := strings.TrimPrefix(c.url, "http://")
	testnet.Eventually(t, 10*time.Second, func() bool {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err != nil
	}, func() string { return "the listener is still open" })
	close(held.release)
	a := <-answered
	if a.status != 200 {
		t.Errorf("the request in flight at shutdown: %d %s", a.status, a.raw)
	}
	if err := <-stopped; err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// TestReadyWhileDraining: /ready answers as /health until core drains,
// then 503, so the edges stop sending here, while core still answers what
// they send meanwhile.
func TestReadyWhileDraining(t *testing.T) {
	c := startCore(t, nil)
	if a := c.do(t, call{method: "GET", path: "/ready", token: "-"}); a.status != 200 {
		t.Errorf("ready: %d %s", a.status, a.raw)
	}
	c.do(t, call{method: "GET", path: "/ready", token: "wrong"}).v2err(t, 403, "PERMISSION_DENIED")
	c.server.Drain()
	c.do(t, call{method: "GET", path: "/ready"}).v2err(t, 503, "API_SERVER_ERROR")
	if a := c.do(t, call{method: "GET", path: "/health"}); a.status != 200 {
		t.Errorf("health while draining: %d %s", a.status, a.raw)
	}
	a := c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main",
		body: map[string]any{"payload": bankPayload("004", "LISTEDREF0001")}})
	if a.status != 200 {
		t.Errorf("a verification while draining: %d %s", a.status, a.raw)
	}
}

// call is one request to core as the edge would forward it.
type call struct {
	method, path    string
	branch, service string // identity headers; empty branch sends none
	token           string // edge token; "" sends the right one, "-" none
	body            any    // JSON-encoded unless []byte
	contentType     string
	header          []string // more headers, name then value
}

type answer struct {
	status int
	body   map[string]any
	raw    string
}

func (c *core) do(t testing.TB, k call) answer {
	t.Helper()
	var body io.Reader
	switch b := k.body.(type) {
	case nil:
	case []byte:
		body = bytes.NewReader(b)
	default:
		raw, _ := json.Marshal(b)
		body = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(k.method, c.url+k.path, body)
	switch k.token {
	case "":
		req.Header.Set(api.HeaderEdgeToken, edgeToken)
	case "-":
	default:
		req.Header.Set(api.HeaderEdgeToken, k.token)
	}
	if k.branch != "" {
		svc := k.service
		if svc == "" {
			svc = "svc"
		}
		req.Header.Set(api.HeaderService, svc)
		req.Header.Set(api.HeaderBranch, k.branch)
	}
	if k.contentType != "" {
		req.Header.Set("Content-Type", k.contentType)
	}
	for i := 0; i+1 < len(k.header); i += 2 {
		req.Header.Set(k.header[i], k.header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, raw: string(raw)}
	if err := json.Unmarshal(raw, &a.body); err != nil {
		t.Fatalf("%s %s: body is not JSON: %s", k.method, k.path, raw)
	}
	return a
}

// v2err asserts a v2 error body.
func (a answer) v2err(t testing.TB, status int, code string) {
	t.Helper()
	e, _ := a.body["error"].(map[string]any)
	if a.status != status || a.body["success"] != false || e["code"] != code || e["message"] == "" {
		t.Errorf("want %d %s, got %d %s", status, code, a.status, a.raw)
	}
}

// v1err asserts a v1 error body.
func (a answer) v1err(t testing.TB, status int, code string) {
	t.Helper()
	if a.status != status || a.body["status"] != float64(status) || a.body["message"] != code {
		t.Errorf("want %d %s, got %d %s", status, code, a.status, a.raw)
	}
}

func (a answer) data(t testing.TB) map[string]any {
	t.Helper()
	if a.status != 200 {
		t.Fatalf("want 200, got %d %s", a.status, a.raw)
	}
	d, _ := a.body["data"].(map[string]any)
	if d == nil {
		t.Fatalf("no data in %s", a.raw)
	}
	return d
}

// get walks a decoded JSON value by keys.
var get = testnet.JSONAt

func (c *core) usage(t testing.TB, branch string) (branchUsed, branchTotal, serviceUsed float64) {
	t.Helper()
	d := c.do(t, call{method: "GET", path: "/v2/info", branch: branch}).data(t)
	return get(d, "branch", "usedQuota").(float64), get(d, "branch", "totalUsedQuota").(float64), get(d, "service", "usedQuota").(float64)
}

func TestVerifyBankV2ListedSlip(t *testing.T) {
	c := startCore(t, nil)
	p := bankPayload("004", "LISTEDREF0001")
	d := c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main",
		body: map[string]any{"payload": p, "remark": "order #42", "matchAmount": 100.50}}).data(t)
	want := map[string]any{
		"remark": "order #42", "isDuplicate": false, "amountInSlip": 100.5, "isAmountMatched": true,
	}
	for k, v := range want {
		if d[k] != v {
			t.Errorf("%s = %v, want %v", k, d[k], v)
		}
	}
	raw := d["rawSlip"]
	checks := []struct {
		path []string
		want any
	}{
		{[]string{"payload"}, p},
		{[]string{"transRef"}, "LISTEDREF0001"},
		{[]string{"date"}, "2026-11-20T11:35:51+07:00"},
		{[]string{"countryCode"}, "TH"},
		{[]string{"amount", "amount"}, 100.5},
		{[]string{"amount", "local", "amount"}, 100.5},
		{[]string{"amount", "local", "currency"}, "THB"},
		{[]string{"fee"}, 0.0},
		{[]string{"ref1"}, "INV-1"},
		{[]string{"ref2"}, ""},
		{[]string{"ref3"}, ""},
		{[]string{"sender", "bank", "id"}, "004"},
		{[]string{"sender", "bank", "short"}, "KBANK"},
		{[]string{"sender", "account", "name", "th"}, "นาย ทดสอบ ระบบ"},
		{[]string{"sender", "account", "bank", "account"}, "xxx-x-x1234-x"},
		{[]string{"receiver", "bank", "name"}, "Siam Commercial Bank"},
		{[]string{"receiver", "account", "name", "en"}, "SLIP TEST CO LTD"},
		{[]string{"receiver", "account", "bank", "type"}, "BANKAC"},
	}
	for _, ck := range checks {
		if got := get(raw, ck.path...); got != ck.want {
			t.Errorf("rawSlip.%s = %v, want %v", strings.Join(ck.path, "."), got, ck.want)
		}
	}
	if m, ok := raw.(map[string]any)["receiver"].(map[string]any); !ok || m["merchantId"] != nil {
		t.Errorf("receiver.merchantId must be present and null: %v", m)
	} else if _, present := m["merchantId"]; !present {
		t.Error("receiver.merchantId is missing")
	}
	// A different expected amount is not matched; no matchAmount is not matched.
	d = c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main",
		body: map[string]any{"payload": p, "matchAmount": 100.49}}).data(t)
	if d["isAmountMatched"] != false || d["isDuplicate"] != true {
		t.Errorf("second verification: %v", d)
	}
}

func TestDuplicatesAndQuotaV2(t *testing.T) {
	c := startCore(t, nil)
	p := bankPayload("014", "SYNTHETICREF77")
	verify := func(branch string) map[string]any {
		return c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: branch, body: map[string]any{"payload": p}}).data(t)
	}
	first := verify("br-main")
	if first["isDuplicate"] != false {
		t.Fatalf("first verification marked duplicate: %v", first)
	}
	if u, tot, s := c.usage(t, "br-main"); u != 1 || tot != 1 || s != 1 {
		t.Fatalf("after first: branch used %v total %v, service used %v", u, tot, s)
	}
	// Self-duplicate: marked, free, same slip as the first answer.
	again := verify("br-main")
	if again["isDuplicate"] != true || get(again, "rawSlip", "amount", "amount") != get(first, "rawSlip", "amount", "amount") {
		t.Fatalf("self-duplicate: %v", again)
	}
	if u, _, s := c.usage(t, "br-main"); u != 1 || s != 1 {
		t.Fatalf("self-duplicate consumed quota: branch %v service %v", u, s)
	}
	// Duplicate from another branch: marked and charged to that branch.
	other := verify("br-sub")
	if other["isDuplicate"] != true {
		t.Fatalf("other-branch duplicate not marked: %v", other)
	}
	if u, _, s := c.usage(t, "br-sub"); u != 1 || s != 2 {
		t.Fatalf("other-branch duplicate: branch used %v, service used %v; want 1 and 2", u, s)
	}
	// Now br-sub has verified it too: its next one is a free self-duplicate.
	verify("br-sub")
	if u, _, s := c.usage(t, "br-sub"); u != 1 || s != 2 {
		t.Fatalf("second self-duplicate of br-sub consumed: branch %v service %v", u, s)
	}
}

func TestDuplicatesV1(t *testing.T) {
	c := startCore(t, nil)
	p := bankPayload("002", "V1DUPREF0001")
	a := c.do(t, call{method: "POST", path: "/verify", branch: "br-main", body: map[string]any{"payload": p, "checkDuplicate": true}})
	if a.status != 200 || get(a.body, "data", "transRef") != "V1DUPREF0001" || get(a.body, "data", "payload") != p {
		t.Fatalf("v1 success body: %s", a.raw)
	}
	first := a.body["data"].(map[string]any)
	a = c.do(t, call{method: "POST", path: "/verify", branch: "br-main", body: map[string]any{"payload": p, "checkDuplicate": true}})
	a.v1err(t, 400, "duplicate_slip")
	d, _ := a.body["data"].(map[string]any)
	// The full slip as first verified, and when.
	for k, v := range first {
		if fmt.Sprint(d[k]) != fmt.Sprint(v) {
			t.Errorf("duplicate_slip data %s = %v, want %v as first verified", k, d[k], v)
		}
	}
	if d["firstVerifiedAt"] != "2026-11-22T10:00:00+07:00" {
		t.Errorf("duplicate_slip firstVerifiedAt = %v", d["firstVerifiedAt"])
	}
	if u, _, _ := c.usage(t, "br-main"); u != 1 {
		t.Errorf("duplicate_slip consumed quota: used %v", u)
	}
	// Without checkDuplicate the verification is answered and charged.
	a = c.do(t, call{method: "GET", path: "/verify?payload=" + p + "&checkDuplicate=false", branch: "br-main"})
	if a.status != 200 || get(a.body, "data", "transRef") != "V1DUPREF0001" {
		t.Fatalf("v1 GET without checkDuplicate: %s", a.raw)
	}
	if u, _, _ := c.usage(t, "br-main"); u != 2 {
		t.Errorf("v1 verification without checkDuplicate: used %v, want 2", u)
	}
	a = c.do(t, call{method: "GET", path: "/verify?payload=" + p + "&checkDuplicate=true", branch: "br-main"})
	a.v1err(t, 400, "duplicate_slip")
}

func TestWallet(t *testing.T) {
	c := startCore(t, nil)
	p := slip.Wallet{EventType: "P2P", TransactionID: "50001234567890", Date: "20112026"}.Encode()
	d := c.do(t, call{method: "POST", path: "/v2/verify/wallet", branch: "br-main",
		body: map[string]any{"payload": p, "remark": "w", "matchAmount": 1}}).data(t)
	// v2: the bank wrapper around the wallet slip.
	for _, k := range []string{"isDuplicate", "matchedAccount", "amountInSlip", "amountInOrder", "isAmountMatched", "remark", "rawSlip"} {
		if _, ok := d[k]; !ok {
			t.Errorf("wallet answer lacks %s: %v", k, d)
		}
	}
	raw, _ := d["rawSlip"].(map[string]any)
	if raw["transactionId"] != "50001234567890" || d["isDuplicate"] != false || d["remark"] != "w" || d["matchedAccount"] != nil ||
		d["amountInSlip"] != raw["amount"] || d["amountInOrder"] != 1.0 || get(d, "rawSlip", "sender", "name") == nil {
		t.Errorf("wallet answer: %v", d)
	}
	// /v2/verify/truewallet is the same route: the same slip, now a
	// self-duplicate.
	d = c.do(t, call{method: "POST", path: "/v2/verify/truewallet", branch: "br-main", body: map[string]any{"payload": p}}).data(t)
	if d["isDuplicate"] != true || get(d, "rawSlip", "transactionId") != "50001234567890" {
		t.Errorf("wallet duplicate not marked: %v", d)
	}
	// v1: the flat wallet slip, on every v1 wallet path.
	p2 := slip.Wallet{EventType: "P2P", TransactionID: "50001234567891", Date: "20112026"}.Encode()
	for _, path := range []string{"/verify/wallet", "/verify/truewallet", "/api/v1/verify/wallet", "/api/v1/verify/truewallet"} {
		a := c.do(t, call{method: "POST", path: path, branch: "br-main", body: map[string]any{"payload": p2}})
		if a.status != 200 || get(a.body, "data", "transactionId") != "50001234567891" || get(a.body, "data", "amount") == nil ||
			get(a.body, "data", "receiver", "phone") == nil || get(a.body, "data", "rawSlip") != nil {
			t.Errorf("v1 %s: %s", path, a.raw)
		}
	}
	if u, _, _ := c.usage(t, "br-main"); u != 5 {
		t.Errorf("wallet: used %v, want 5 (a v2 self-duplicate free, every v1 charged)", u)
	}
	a := c.do(t, call{method: "POST", path: "/verify/wallet", branch: "br-main", body: map[string]any{"payload": p, "checkDuplicate": true}})
	a.v1err(t, 400, "duplicate_slip")
	a = c.do(t, call{method: "POST", path: "/verify/wallet", branch: "br-main", body: map[string]any{"payload": bankPayload("004", "X1")}})
	a.v1err(t, 400, "invalid_payload")
}

func TestErrorsV2(t *testing.T) {
	c := startCore(t, func(r *store.Records) {
		r.Branches = append(r.Branches, store.Branch{ID: "br-zero", ServiceID: "svc", Active: true, LimitQuota: ptr(int64(0)), KeyDigest: store.Digest("k7")})
	})
	ok := map[string]any{"payload": bankPayload("004", "ANYREF1")}
	f := func(k call, status int, code string) {
		t.Helper()
		if k.method == "" {
			k.method = "POST"
		}
		if k.path == "" {
			k.path = "/v2/verify/bank"
		}
		c.do(t, k).v2err(t, status, code)
	}
	// Without the edge's token: 403, not a verdict on a key.
	f(call{branch: "br-main", token: "-", body: ok}, 403, "PERMISSION_DENIED")
	f(call{branch: "br-main", token: "wrong", body: ok}, 403, "PERMISSION_DENIED")
	f(call{body: ok}, 401, "MISSING_API_KEY")
	f(call{branch: "br-gone", body: ok}, 401, "INVALID_API_KEY")
	f(call{branch: "br-exp", service: "svc", body: ok}, 401, "INVALID_API_KEY") // branch of another service
	f(call{branch: "br-off", body: ok}, 403, "BRANCH_INACTIVE")
	f(call{branch: "br-exp", service: "svc-expired", body: ok}, 403, "SERVICE_EXPIRED")
	f(call{branch: "br-ban", service: "svc-banned", body: ok}, 403, "SERVICE_BANNED")
	f(call{branch: "br-user", service: "svc-user", body: ok}, 403, "USER_BANNED")
	f(call{branch: "br-zero", body: ok}, 403, "QUOTA_EXCEEDED")
	f(call{branch: "br-main", body: map[string]any{"payload": "00020101021129370016A000000677010111"}}, 404, "SLIP_NOT_FOUND")
	f(call{branch: "br-main", body: map[string]any{"payload": bankPayload("004", "NOTFOUNDREF1")}}, 404, "SLIP_NOT_FOUND")
	f(call{branch: "br-main", body: map[string]any{"payload": bankPayload("006", "PENDINGREF01")}}, 404, "SLIP_PENDING")
	f(call{branch: "br-main", body: map[string]any{"payload": bankPayload("004", "UPSTREAMREF1")}}, 500, "API_SERVER_ERROR")
	f(call{branch: "br-main", body: map[string]any{"base64": strings.Repeat("A", 6<<20)}}, 400, "IMAGE_SIZE_TOO_LARGE")
	f(call{branch: "br-main", method: "GET", path: "/v2/nope"}, 404, "NOT_FOUND")
	f(call{branch: "br-main", method: "DELETE", path: "/v2/verify/bank"}, 404, "NOT_FOUND")
	f(call{branch: "br-main", body: []byte("[1,2]")}, 400, "VALIDATION_ERROR")
	f(call{branch: "br-main", body: []byte("{bad json")}, 400, "VALIDATION_ERROR")
	f(call{branch: "br-main", path: "/v2/verify/bank", body: map[string]any{"payload": bankPayload("004", "NULLREF00001"), "matchAccount": nil}}, 400, "VALIDATION_ERROR")
	f(call{branch: "br-main", body: []byte(`{"payload":"` + bankPayload("004", "DUPKEYREF001") + `"}{}`)}, 400, "VALIDATION_ERROR")

	// A field given twice is refused, whichever value a reader would keep.
	dup := c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main",
		body: []byte(`{"payload":"x","remark":"a","payload":"` + bankPayload("004", "DUPKEYREF001") + `"}`)})
	dup.v2err(t, 400, "VALIDATION_ERROR")
	if msg := get(dup.body, "error", "message"); msg != "payload: given more than once" {
		t.Errorf("a field given twice: message %q", msg)
	}
	// So in a multipart form, and in v1's query string.
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	mw.WriteField("payload", bankPayload("004", "DUPKEYREF002"))
	mw.WriteField("remark", "a")
	mw.WriteField("remark", "b")
	mw.Close()
	dup = c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main", body: form.Bytes(), contentType: mw.FormDataContentType()})
	dup.v2err(t, 400, "VALIDATION_ERROR")
	if msg := get(dup.body, "error", "message"); msg != "remark: given more than once" {
		t.Errorf("a form field given twice: message %q", msg)
	}
	c.do(t, call{method: "GET", path: "/verify?payload=" + bankPayload("004", "DUPKEYREF003") + "&payload=" + bankPayload("004", "DUPKEYREF004"),
		branch: "br-main"}).v1err(t, 400, "invalid_request")

	// An amount to match is in baht and satang: no rounding of a third decimal.
	third := c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main",
		body: map[string]any{"payload": bankPayload("004", "ANYREF1"), "matchAmount": 100.004}})
	third.v2err(t, 400, "VALIDATION_ERROR")
	if msg := get(third.body, "error", "message"); msg != "matchAmount: must have at most 2 decimal places" {
		t.Errorf("matchAmount 100.004: message %q", msg)
	}

	// A URL is at most 8192 characters.
	long := c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main",
		body: map[string]any{"url": "https://slips.example/" + strings.Repeat("a", 8192)}})
	long.v2err(t, 400, "VALIDATION_ERROR")
	if msg := get(long.body, "error", "message"); msg != "url: must be at most 8192 characters" {
		t.Errorf("a long url: message %q", msg)
	}

	// Every failing field is named, joined with "; ".
	a := c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main",
		body: map[string]any{"checkDuplicate": "yes", "matchAmount": -1, "remark": 5, "matchAcount": true}})
	a.v2err(t, 400, "VALIDATION_ERROR")
	msg := get(a.body, "error", "message").(string)
	for _, part := range []string{"matchAcount: unknown field", "payload: one of payload, url, base64 or an image is required",
		"remark: must be a string", "checkDuplicate: must be a boolean", "matchAmount: must be a positive number"} {
		if !strings.Contains(msg, part) {
			t.Errorf("message %q does not name %q", msg, part)
		}
	}
	if strings.Count(msg, "; ") != 4 {
		t.Errorf("message %q: want 5 parts joined by '; '", msg)
	}
	// Errors consumed nothing.
	if u, _, _ := c.usage(t, "br-main"); u != 0 {
		t.Errorf("errors consumed quota: used %v", u)
	}
}

func TestErrorsV1(t *testing.T) {
	c := startCore(t, func(r *store.Records) {
		r.Services[0].QuotaLimit = 0
		r.Services = append(r.Services, store.Service{ID: "svc2", State: store.StateActive, QuotaLimit: 10, CycleAnchorDay: 1})
		r.Branches = append(r.Branches, store.Branch{ID: "br-2", ServiceID: "svc2", Main: true, Active: true, KeyDigest: store.Digest("k8")})
	})
	ok := map[string]any{"payload": bankPayload("004", "ANYREF1")}
	f := func(k call, status int, code string) {
		t.Helper()
		if k.method == "" {
			k.method = "POST"
		}
		if k.path == "" {
			k.path = "/verify"
		}
		if k.service == "" {
			k.service = "svc2"
		}
		c.do(t, k).v1err(t, status, code)
	}
	f(call{branch: "br-2", token: "-", body: ok}, 403, "access_denied")
	f(call{branch: "br-2", token: "nope", body: ok}, 403, "access_denied")
	f(call{branch: "br-main", service: "svc", body: ok}, 403, "quota_exceeded")
	f(call{branch: "br-off", service: "svc", body: ok}, 403, "application_deactivated")
	f(call{branch: "br-exp", service: "svc-expired", body: ok}, 403, "application_expired")
	f(call{branch: "br-ban", service: "svc-banned", body: ok}, 403, "application_deactivated")
	f(call{branch: "br-user", service: "svc-user", body: ok}, 403, "application_deactivated")
	f(call{branch: "br-2", body: map[string]any{"payload": "garbage"}}, 400, "invalid_payload")
	f(call{branch: "br-2", method: "GET", path: "/verify?payload=garbage"}, 400, "invalid_payload")
	f(call{branch: "br-2", body: map[string]any{"payload": bankPayload("004", "X"), "checkDuplicate": "true"}}, 400, "invalid_check_duplicate")
	f(call{branch: "br-2", method: "GET", path: "/verify?payload=x&checkDuplicate=1"}, 400, "invalid_check_duplicate")
	f(call{branch: "br-2", body: map[string]any{"payload": bankPayload("004", "X"), "checkDuplicate": nil}}, 400, "invalid_check_duplicate")
	f(call{branch: "br-2", body: map[string]any{"payload": 12}}, 400, "invalid_request")
	f(call{branch: "br-2", body: map[string]any{}}, 400, "invalid_request")
	f(call{branch: "br-2", body: map[string]any{"payload": bankPayload("004", "NOTFOUNDREF1")}}, 404, "slip_not_found")
	f(call{branch: "br-2", body: map[string]any{"payload": bankPayload("006", "PENDINGREF01")}}, 404, "slip_pending")
	f(call{branch: "br-2", body: map[string]any{"payload": bankPayload("004", "UPSTREAMREF1")}}, 500, "api_server_error")
	f(call{branch: "br-2", body: map[string]any{"base64": strings.Repeat("A", 6<<20)}}, 400, "image_size_too_large")
	f(call{branch: "br-2", method: "GET", path: "/nope"}, 404, "not_found")
}

func TestBanksAndHealth(t *testing.T) {
	c := startCore(t, nil)
	a := c.do(t, call{method: "GET", path: "/v2/banks"})
	list, _ := a.body["data"].([]any)
	if a.status != 200 || len(list) < 20 {
		t.Fatalf("banks: %d %.200s", a.status, a.raw)
	}
	found := false
	for _, b := range list {
		if get(b, "code") == "004" && get(b, "short") == "KBANK" && get(b, "nameTh") != "" && get(b, "nameEn") != "" {
			_, found = b.(map[string]any)["extraVerify"].([]any)
		}
	}
	if !found {
		t.Errorf("banks lacks KBANK with names and an extraVerify list: %.300s", a.raw)
	}
	if a := c.do(t, call{method: "GET", path: "/banks", token: "-"}); a.status != 403 {
		t.Errorf("banks without the edge token: %d", a.status)
	}
	// Health needs no token (probes send none), but a wrong one is refused,
	// so an edge with the wrong token finds out from its health check.
	if a := c.do(t, call{method: "GET", path: "/health", token: "-"}); a.status != 200 {
		t.Errorf("health: %d %s", a.status, a.raw)
	}
	if a := c.do(t, call{method: "GET", path: "/health"}); a.status != 200 {
		t.Errorf("health with the edge token: %d %s", a.status, a.raw)
	}
	c.do(t, call{method: "GET", path: "/health", token: "wrong"}).v2err(t, 403, "PERMISSION_DENIED")
}

// TestQuotaUnderConcurrency sends 50 concurrent verifications of distinct
// slips to a branch with 10 left: exactly 10 succeed and exactly 10 are
// consumed, at branch and service level alike.
func TestQuotaUnderConcurrency(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*store.Records)
	}{
		{"branch limit", func(r *store.Records) { r.Branches[0].LimitQuota = ptr(int64(10)) }},
		{"service limit", func(r *store.Records) { r.Services[0].QuotaLimit = 10 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCore(t, tc.mutate)
			var ok, refused atomic.Int32
			var wg sync.WaitGroup
			for i := range 50 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					a := c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main",
						body: map[string]any{"payload": bankPayload("014", fmt.Sprintf("CONCURRENT%04d", i))}})
					switch {
					case a.status == 200:
						ok.Add(1)
					case a.status == 403 && get(a.body, "error", "code") == "QUOTA_EXCEEDED":
						refused.Add(1)
					default:
						t.Errorf("unexpected answer %d %s", a.status, a.raw)
					}
				}()
			}
			wg.Wait()
			if ok.Load() != 10 || refused.Load() != 40 {
				t.Errorf("succeeded %d, refused %d; want 10 and 40", ok.Load(), refused.Load())
			}
			if u, tot, s := c.usage(t, "br-main"); u != 10 || tot != 10 || s != 10 {
				t.Errorf("consumed: branch used %v total %v, service used %v; want 10", u, tot, s)
			}
		})
	}
}

func TestQuotaPeriodRollover(t *testing.T) {
	c := startCore(t, func(r *store.Records) { r.Branches[0].LimitQuota = ptr(int64(1)) })
	v := func(ref string) answer {
		return c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main", body: map[string]any{"payload": bankPayload("004", ref)}})
	}
	v("ROLLREF1").data(t)
	v("ROLLREF2").v2err(t, 403, "QUOTA_EXCEEDED")
	c.clock.Advance(10 * 24 * time.Hour) // Nov 22 → Dec 2: a new period (anchor day 1)
	v("ROLLREF3").data(t)
	if u, tot, _ := c.usage(t, "br-main"); u != 1 || tot != 2 {
		t.Errorf("after rollover: used %v total %v; want 1 and 2", u, tot)
	}
	d := c.do(t, call{method: "GET", path: "/v2/info", branch: "br-main"}).data(t)
	if get(d, "period", "start") != "2026-12-01T00:00:00+07:00" {
		t.Errorf("/v2/info: %v", d)
	}
	me := c.do(t, call{method: "GET", path: "/me", branch: "br-main"})
	if me.body["status"] != 200.0 || get(me.body, "data", "usedQuota") != 1.0 || get(me.body, "data", "remainingQuota") != 0.0 {
		t.Errorf("/me: %s", me.raw)
	}
}

func TestInternalAuth(t *testing.T) {
	c := startCore(t, nil)
	d := c.do(t, call{method: "GET", path: api.PathBranchAuth + store.Digest("k2")}).data(t)
	if d["serviceId"] != "svc" || d["branchId"] != "br-sub" || d["branchActive"] != true ||
		d["signingSecret"] != "first-client-secret-0001" || d["rateBank"] != 10.0 {
		t.Errorf("branch auth: %v", d)
	}
	d = c.do(t, call{method: "GET", path: api.PathClientAuth + store.Digest("client-key-1")}).data(t)
	if d["serviceId"] != "svc" || d["secret"] != "second-client-secret-002" || len(d["permissions"].([]any)) != 1 {
		t.Errorf("client auth: %v", d)
	}
	c.do(t, call{method: "GET", path: api.PathBranchAuth + store.Digest("unknown")}).v2err(t, 401, "INVALID_API_KEY")
	c.do(t, call{method: "GET", path: api.PathClientAuth + store.Digest("k1")}).v2err(t, 401, "INVALID_API_KEY")
	c.do(t, call{method: "GET", path: api.PathBranchAuth + store.Digest("k2"), token: "-"}).v2err(t, 403, "PERMISSION_DENIED")
	// A service without B2B clients signs nothing.
	d = c.do(t, call{method: "GET", path: api.PathBranchAuth + store.Digest("k4")}).data(t)
	if _, ok := d["signingSecret"]; ok {
		t.Errorf("service without B2B clients has a signing secret: %v", d)
	}
}

func TestGenerateQR(t *testing.T) {
	c := startCore(t, nil)
	d := c.do(t, call{method: "POST", path: "/qr/generate", body: map[string]any{"type": "promptpay", "target": "081-234-5678", "amount": 100.5}}).data(t)
	// promptparse generates this payload for 0812345678 and 100.5 (core/promptpay/testdata).
	if d["payload"] != "00020101021229370016A0000006770101110113006681234567853037645802TH5406100.5063045222" {
		t.Errorf("payload %v", d["payload"])
	}
	png, err := base64.StdEncoding.DecodeString(d["image"].(string))
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("image is not a base64 PNG: %v", err)
	}
	a := c.do(t, call{method: "POST", path: "/v2/qr/generate", body: map[string]any{"type": "bitcoin", "target": "", "amount": "x", "extra": 1}})
	a.v2err(t, 400, "VALIDATION_ERROR")
	msg := get(a.body, "error", "message").(string)
	for _, want := range []string{"type:", "target:", "amount:", "extra: unknown field"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not name %q", msg, want)
		}
	}
	c.do(t, call{method: "POST", path: "/qr/generate", body: map[string]any{"type": "promptpay", "target": "12345"}}).v2err(t, 400, "VALIDATION_ERROR")
}

// TestMetrics: core's /metrics counts answers by code and shows its
// outbox and store, without the edge token (the edge forwards no such path).
func TestMetrics(t *testing.T) {
	c := startCore(t, nil)
	// A set another package registers (the bank upstreams' guards do).
	registered := metrics.NewSet()
	registered.GetOrCreateCounter(`slip_core_bank_lookups_total{upstream="kbank",outcome="found"}`).Inc()
	metrics.RegisterSet(registered)
	t.Cleanup(func() { metrics.UnregisterSet(registered, true) })
	c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main", body: map[string]any{"payload": bankPayload("004", "LISTEDREF0001")}})
	for range 2 {
		c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main", body: map[string]any{"payload": bankPayload("004", "NOTFOUNDREF1")}})
	}
	c.do(t, call{method: "GET", path: "/v2/banks", token: "wrong-token"})
	res, err := http.Get(c.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	a := answer{status: res.StatusCode, raw: string(raw)}
	if a.status != 200 {
		t.Fatalf("metrics: %d %s", a.status, a.raw)
	}
	for _, want := range []string{
		`slip_core_answers_total{code="OK"} 1`,
		`slip_core_answers_total{code="SLIP_NOT_FOUND"} 2`,
		`slip_core_answers_total{code="PERMISSION_DENIED"} 1`,
		`slip_core_request_duration_seconds_count 4`,
		`slip_core_store_write_failures_total 0`,
		`slip_core_image_decode_budget_bytes 268435456`, "slip_core_image_decode_bytes ", "slip_core_image_decodes_waiting ",
		"slip_core_outbox_messages ", "slip_core_inflight_requests ", "process_resident_memory_bytes ",
		`slip_core_bank_lookups_total{upstream="kbank",outcome="found"} 1`,
	} {
		if !strings.Contains(a.raw, want) {
			t.Errorf("metrics lack %q:\n%s", want, a.raw)
		}
	}
	if strings.Contains(a.raw, "slip_core_store_bytes 0\n") {
		t.Errorf("the store's size is 0:\n%s", a.raw)
	}
}
