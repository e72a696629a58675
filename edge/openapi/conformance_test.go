package openapi_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/pgtest"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/slip"
	"github.com/slipverify/slipverify/edge/authn"
	"github.com/slipverify/slipverify/edge/openapi"
)

// The conformance test runs the real core and edge programs and checks that
// what they answer on every documented route is what openapi.json says.

const (
	kMain  = "11111111-1111-4111-8111-111111111111"
	kOff   = "33333333-3333-4333-8333-333333333333"
	kIP    = "22222222-2222-4222-8222-222222222222"
	kExp   = "55555555-5555-4555-8555-555555555555"
	kBan   = "66666666-6666-4666-8666-666666666666"
	kUser  = "77777777-7777-4777-8777-777777777777"
	kTiny  = "88888888-8888-4888-8888-888888888888"
	kSlow  = "99999999-9999-4999-8999-999999999999"
	kSlow2 = "9a9a9a9a-9a9a-4a9a-8a9a-9a9a9a9a9a9a"
	kNone  = "44444444-4444-4444-8444-444444444444" // not in the seed

	clientFull   = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	secretFull   = "conformance-client-secret-01"
	clientRead   = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	secretRead   = "conformance-readonly-secret"
	allPerms     = `["branch:read","branch:write","quota:read","quota:write","bank-account:read","bank-account:write"]`
	listedRef    = "LISTEDREF0001"
	pendingRef   = "PENDINGREF01"
	notFoundRef  = "NOTFOUNDREF1"
	upstreamRef  = "UPSTREAMREF1"
	receiverJSON = `{"bank":{"id":"014","name":"Siam Commercial Bank","short":"SCB"},"account":{"name":{"th":"บริษัท ทดสอบสลิป จำกัด","en":"SLIP TEST CO LTD"},"bank":{"type":"BANKAC","account":"xxx-x-x5678-x"}},"merchantId":null}`
	senderJSON   = `{"bank":{"id":"004","short":"KBANK"},"account":{"name":{"th":"นาย ทดสอบ ระบบ"},"bank":{"type":"BANKAC","account":"xxx-x-x1234-x"}}}`
)

func seedJSON(now time.Time) string {
	branch := func(id, key string, main, active bool, ip string) string {
		return fmt.Sprintf(`{"id":%q,"name":%q,"main":%t,"key":%q,"active":%t,"ipAllow":[%q],"limitQuota":null,"webhookUrl":null,"webhookSecret":null}`,
			id, id, main, key, active, ip)
	}
	service := func(id, state string, userBanned bool, limit, rate int, branches, extra string) string {
		return fmt.Sprintf(`{"id":%q,"name":%q,"state":%q,"userBanned":%t,"quota":{"limit":%d,"cycleAnchorDay":1},"rate":{"bank":%d,"wallet":%d},"branches":[%s]%s}`,
			id, id, state, userBanned, limit, rate, rate, branches, extra)
	}
	main := service("svc", "active", false, 100000, 1000,
		strings.Join([]string{branch("br-main", kMain, true, true, "*"), branch("br-off", kOff, false, false, "*"),
			branch("br-ip", kIP, false, true, "10.9.9.9")}, ","),
		`,"b2bClients":[{"key":"`+clientFull+`","secret":"`+secretFull+`","permissions":`+allPerms+`},`+
			`{"key":"`+clientRead+`","secret":"`+secretRead+`","permissions":["quota:read"]}],`+
			`"bankAccounts":[{"id":"acc-1","bankCode":"014","bankNumber":"1234565678","name":{"th":"บริษัท ทดสอบสลิป จำกัด","en":"SLIP TEST CO LTD"},"branches":["br-main"]},`+
			`{"id":"acc-gsb","bankCode":"030","bankNumber":"0200123456","name":{"th":"ร้าน ออมสิน","en":""},"branches":["br-main"]}]`)
	slipJSON := func(code, ref, date string) string {
		return fmt.Sprintf(`{"bankCode":%q,"transRef":%q,"amount":100.5,"date":%q,"ref1":"INV-1","sender":%s,"receiver":%s}`,
			code, ref, date, senderJSON, receiverJSON)
	}
	return `{"services":[` + strings.Join([]string{main,
		service("svc-exp", "expired", false, 100, 10, branch("exp-main", kExp, true, true, "*"), ""),
		service("svc-ban", "banned", false, 100, 10, branch("ban-main", kBan, true, true, "*"), ""),
		service("svc-user", "active", true, 100, 10, branch("user-main", kUser, true, true, "*"), ""),
		service("svc-tiny", "active", false, 1, 10, branch("tiny-main", kTiny, true, true, "*"), ""),
		service("svc-slow", "active", false, 1000, 1, branch("slow-main", kSlow, true, true, "*")+","+
			branch("slow-sub", kSlow2, false, true, "*"), ""),
	}, ",") + `],"sandbox":{"pendingBank":"006","slips":[` +
		slipJSON("004", listedRef, "2026-11-20T11:35:51+07:00") + "," +
		slipJSON("006", pendingRef, now.Add(-time.Minute).Format(time.RFC3339)) +
		`],"notFound":["` + notFoundRef + `"],"upstreamError":["` + upstreamRef + `"]}}`
}

// TestMain removes the programs the conformance test builds.
func TestMain(m *testing.M) { testnet.Main(m) }

// stack is core and edge running for one test, and the document to hold
// their answers to.
type stack struct {
	url  string
	spec *openapi.Spec
	seen map[string]bool // "METHOD /templated/path status"
}

// startStack starts one core on bbolt, or (postgres) two cores on one
// PostgreSQL database, and the edge in front.
func startStack(t *testing.T, postgres bool) *stack {
	seed := testnet.Seed(t, seedJSON(time.Now()))
	settings := []string{"SLIP_EGRESS_ALLOW_CIDRS="} // no broker: jobs wait in core's outbox
	cores := 1
	if postgres {
		settings = append(settings, "SLIP_STORE="+pgtest.Start(t).Database(t))
		cores = 2
	}
	var addrs []string
	for range cores {
		addrs = append(addrs, testnet.StartCore(t, seed, settings...).Addr)
	}
	edge := testnet.StartEdge(t, strings.Join(addrs, ","), "SLIP_EDGE_METRICS_ADDR="+testnet.FreeAddr(t), "SLIP_TRUSTED_PROXIES=")
	return &stack{url: edge.URL(), spec: load(t), seen: map[string]bool{}}
}

// req is one request of the conformance run.
type req struct {
	method, path string
	body         []byte
	contentType  string
	header       []string
}

// b2b sends a request signed with the full B2B client's key and checks
// its answer as do does.
func (st *stack) b2b(t *testing.T, method, path string, body any, status int, code string) map[string]any {
	t.Helper()
	var b []byte
	if body != nil {
		b = js(body)
	}
	return st.do(t, req{method: method, path: path, body: b, header: signed(clientFull, secretFull, method, path, b, 0, "")}, status, code)
}

// do sends r, then checks the answer against the document: the status is
// documented, the body validates, the documented headers are sent, and
// the status and code are the ones expected.
func (st *stack) do(t *testing.T, r req, status int, code string) map[string]any {
	t.Helper()
	hr, err := http.NewRequest(r.method, st.url+r.path, bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	if r.body != nil {
		ct := r.contentType
		if ct == "" {
			ct = "application/json"
		}
		hr.Header.Set("Content-Type", ct)
	}
	for i := 0; i+1 < len(r.header); i += 2 {
		hr.Header.Set(r.header[i], r.header[i+1])
	}
	res, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	name := r.method + " " + r.path
	if err := st.spec.ValidateResponse(r.method, r.path, res.StatusCode, raw); err != nil {
		t.Errorf("%s: %v\nbody: %s", name, err, raw)
	}
	op, ok := st.spec.Operation(r.method, r.path)
	if !ok {
		t.Fatalf("%s: no operation", name)
	}
	st.seen[fmt.Sprintf("%s %s %d", op.Method, op.Path, res.StatusCode)] = true
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers as sent: a whole number beyond 2^53 stays exact
	dec.Decode(&m)
	got := ""
	if e, ok := m["error"].(map[string]any); ok {
		got, _ = e["code"].(string)
	} else if msg, ok := m["message"].(string); ok && res.StatusCode >= 400 {
		got = msg // v1: an error's message is its code
	}
	// The edge sends the rate headers on every answer of a limited route
	// after the limit was taken: not on refusals of authentication, state
	// and IP (401, 403 other than the quota), which come first.
	limitTaken := op.Budget != "" && res.StatusCode != 401 &&
		(res.StatusCode != 403 || got == "QUOTA_EXCEEDED" || got == "quota_exceeded")
	// Every answer carries its request id.
	for _, h := range op.Responses[strconv.Itoa(res.StatusCode)].Headers {
		need := limitTaken || h == "X-Request-Id"
		if h == "Retry-After" { // on a 429, and on a pending slip's 404
			need = res.StatusCode == 429 || got == "SLIP_PENDING" || got == "slip_pending"
		}
		if need && res.Header.Get(h) == "" {
			t.Errorf("%s %d: documented header %s not sent", name, res.StatusCode, h)
		}
	}
	for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After", "X-Request-Id"} {
		if res.Header.Get(h) != "" && !slices.Contains(op.Responses[strconv.Itoa(res.StatusCode)].Headers, h) {
			t.Errorf("%s %d: sent %s, which is not documented", name, res.StatusCode, h)
		}
	}
	if res.StatusCode != status || got != code {
		t.Errorf("%s: got %d %q, want %d %q\nbody: %s", name, res.StatusCode, got, status, code, raw)
	}
	return m
}

func bearer(key string) []string { return []string{"Authorization", "Bearer " + key} }

func uuid4() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// signed returns the headers of a request signed as spec 5.2 says; skew
// moves the timestamp, nonce "" makes a fresh one.
func signed(key, secret, method, uri string, body []byte, skew time.Duration, nonce string) []string {
	ts := strconv.FormatInt(time.Now().Add(skew).Unix(), 10)
	if nonce == "" {
		nonce = uuid4()
	}
	sts := authn.AppendStringToSign(nil, []byte(method), authn.SignedPath([]byte(uri)), []byte(ts), []byte(nonce), body)
	return []string{"X-API-Key", key, "X-Timestamp", ts, "X-Nonce", nonce, "X-Signature", authn.NewSigner(secret).Sign(sts)}
}

func js(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func payload(code, ref string) string { return slip.Bank{BankCode: code, TransRef: ref}.Encode() }

var refSeq struct {
	sync.Mutex
	n int
}

// fresh returns a payload of a slip no test verified before: the sandbox
// answers it with a synthetic slip.
func fresh() string {
	refSeq.Lock()
	defer refSeq.Unlock()
	refSeq.n++
	return payload("004", fmt.Sprintf("FRESH%08d%d", refSeq.n, time.Now().UnixNano()%1e6))
}

func form(t *testing.T, part string, file []byte, fields map[string]string) ([]byte, string) {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if part != "" {
		fw, err := w.CreateFormFile(part, "slip.png")
		if err != nil {
			t.Fatal(err)
		}
		fw.Write(file)
	}
	for k, v := range fields {
		w.WriteField(k, v)
	}
	w.Close()
	return b.Bytes(), w.FormDataContentType()
}

// TestConformance runs every documented operation against the edge and
// core, on each store: one core on bbolt, and two cores sharing PostgreSQL,
// between which the edge balances the requests.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs core and edge")
	}
	t.Run("bbolt", func(t *testing.T) { conformance(t, startStack(t, false)) })
	t.Run("postgres", func(t *testing.T) { conformance(t, startStack(t, true)) })
}

func conformance(t *testing.T, st *stack) {
	post := func(path string, body any, h ...string) req {
		return req{method: "POST", path: path, body: js(body), header: h}
	}
	get := func(path string, h ...string) req { return req{method: "GET", path: path, header: h} }
	notImage := []byte("this is not an image at all")

	t.Run("health", func(t *testing.T) {
		st.do(t, get("/health"), 200, "")
		st.do(t, get("/v2/health"), 200, "")
	})

	t.Run("edge refusals", func(t *testing.T) {
		// A body in a content coding is refused on every route but /health,
		// in the route's version.
		gz := append(bearer(kMain), "Content-Encoding", "gzip")
		for _, path := range []string{"/v2/info", "/banks", "/v2/bank-accounts"} {
			st.do(t, get(path, gz...), 400, "VALIDATION_ERROR")
		}
		st.do(t, get("/me", gz...), 400, "invalid_request")
	})

	t.Run("v2 bank", func(t *testing.T) {
		const p = "/v2/verify/bank"
		listed := payload("004", listedRef)
		d := st.do(t, post(p, map[string]any{"payload": listed, "remark": "order 1", "matchAmount": 100.5}, bearer(kMain)...), 200, "")
		if get := d["data"].(map[string]any); get["isAmountMatched"] != true || get["remark"] != "order 1" {
			t.Errorf("answer: %v", get)
		}
		d = st.do(t, post(p, map[string]any{"payload": listed}, bearer(kMain)...), 200, "")
		if d["data"].(map[string]any)["isDuplicate"] != true {
			t.Errorf("second verification is not a duplicate: %v", d)
		}
		d = st.do(t, post(p, map[string]any{"payload": fresh(), "matchAccount": true}, bearer(kMain)...), 200, "")
		if _, ok := d["data"].(map[string]any)["isAccountMatched"]; !ok {
			t.Errorf("matchAccount answer lacks isAccountMatched: %v", d)
		}
		st.do(t, post(p, map[string]any{"payload": listed, "bankAccountId": "acc-1"}, bearer(kMain)...), 200, "")
		b := js(map[string]any{"payload": fresh()})
		st.do(t, req{method: "POST", path: p, body: b, header: signed(kMain, secretFull, "POST", p, b, 0, "")}, 200, "")
		body, ct := form(t, "", nil, map[string]string{"payload": fresh(), "checkDuplicate": "true"})
		st.do(t, req{method: "POST", path: p, body: body, contentType: ct, header: bearer(kMain)}, 200, "")

		st.do(t, post(p, map[string]any{"payload": listed, "bankAccountId": "acc-1", "matchMode": "NAME"}, bearer(kMain)...), 400, "INVALID_MATCH_MODE")
		st.do(t, post(p, map[string]any{"payload": listed, "matchAccount": true, "bankCode": "999"}, bearer(kMain)...), 400, "INVALID_BANK_CODE")
		st.do(t, post(p, map[string]any{"payload": listed, "bankAccountId": "acc-gsb"}, bearer(kMain)...), 400, "INVALID_EXTRA_VERIFY")
		st.do(t, post(p, map[string]any{"payload": listed, "bankAccountId": "acc-none"}, bearer(kMain)...), 404, "BANK_ACCOUNT_NOT_FOUND")
		st.do(t, post(p, map[string]any{"payload": "not a slip"}, bearer(kMain)...), 404, "SLIP_NOT_FOUND")
		st.do(t, post(p, map[string]any{"payload": payload("004", notFoundRef)}, bearer(kMain)...), 404, "SLIP_NOT_FOUND")
		st.do(t, post(p, map[string]any{"payload": payload("006", pendingRef)}, bearer(kMain)...), 404, "SLIP_PENDING")
		st.do(t, post(p, map[string]any{"payload": payload("004", upstreamRef)}, bearer(kMain)...), 500, "API_SERVER_ERROR")
		st.do(t, post(p, map[string]any{"payload": listed, "amount": 1}, bearer(kMain)...), 400, "VALIDATION_ERROR")
		st.do(t, req{method: "POST", path: p, body: []byte("[1]"), header: bearer(kMain)}, 400, "VALIDATION_ERROR")
		st.do(t, post(p, map[string]any{"url": "ftp://example.com/slip.png"}, bearer(kMain)...), 400, "URL_PROTOCOL_NOT_ALLOWED")
		st.do(t, post(p, map[string]any{"url": "http://127.0.0.1:9/slip.png"}, bearer(kMain)...), 400, "URL_INVALID_IP_RANGE")
		st.do(t, post(p, map[string]any{"base64": base64.StdEncoding.EncodeToString(notImage)}, bearer(kMain)...), 400, "INVALID_IMAGE_FORMAT")
		body, ct = form(t, "image", notImage, nil)
		st.do(t, req{method: "POST", path: p, body: body, contentType: ct, header: bearer(kMain)}, 400, "INVALID_IMAGE_FORMAT")
		// A signed form is checked against its bytes as sent, whatever the
		// order of its parts: the image reaches core's image check.
		for range 5 {
			body, ct = form(t, "image", notImage, map[string]string{"remark": "r", "checkDuplicate": "false", "matchAmount": "1"})
			st.do(t, req{method: "POST", path: p, body: body, contentType: ct, header: signed(kMain, secretFull, "POST", p, body, 0, "")}, 400, "INVALID_IMAGE_FORMAT")
		}
		big := base64.StdEncoding.EncodeToString(make([]byte, 4<<20+1))
		st.do(t, post(p, map[string]any{"base64": big}, bearer(kMain)...), 400, "IMAGE_SIZE_TOO_LARGE")

		st.do(t, post(p, map[string]any{"payload": listed}), 401, "MISSING_API_KEY")
		st.do(t, post(p, map[string]any{"payload": listed}, bearer(kNone)...), 401, "INVALID_API_KEY")
		st.do(t, post(p, map[string]any{"payload": listed}, bearer("not-a-uuid")...), 401, "INVALID_API_KEY")
		st.do(t, post(p, map[string]any{"payload": listed}, bearer(kOff)...), 403, "BRANCH_INACTIVE")
		st.do(t, post(p, map[string]any{"payload": listed}, bearer(kIP)...), 403, "IP_NOT_ALLOWED")
		st.do(t, post(p, map[string]any{"payload": listed}, bearer(kExp)...), 403, "SERVICE_EXPIRED")
		st.do(t, post(p, map[string]any{"payload": listed}, bearer(kBan)...), 403, "SERVICE_BANNED")
		st.do(t, post(p, map[string]any{"payload": listed}, bearer(kUser)...), 403, "USER_BANNED")
		b = js(map[string]any{"payload": listed})
		st.do(t, req{method: "POST", path: p, body: b, header: signed(kMain, "wrong-secret-0000000", "POST", p, b, 0, "")}, 401, "INVALID_SIGNATURE")
		st.do(t, req{method: "POST", path: p, body: b, header: signed(kMain, secretFull, "POST", p, b, -10*time.Minute, "")}, 401, "INVALID_TIMESTAMP")
		h := signed(kMain, secretFull, "POST", p, b, 0, "")
		st.do(t, req{method: "POST", path: p, body: b, header: h}, 200, "")
		st.do(t, req{method: "POST", path: p, body: b, header: h}, 401, "DUPLICATE_NONCE")

		st.do(t, post(p, map[string]any{"payload": fresh()}, bearer(kTiny)...), 200, "")
		st.do(t, post(p, map[string]any{"payload": fresh()}, bearer(kTiny)...), 403, "QUOTA_EXCEEDED")
		st.do(t, post(p, map[string]any{"payload": "not a slip"}, bearer(kSlow)...), 404, "SLIP_NOT_FOUND")
		st.do(t, post(p, map[string]any{"payload": "not a slip"}, bearer(kSlow)...), 429, "RATE_LIMIT_EXCEEDED")
	})

	// Conditions, a pending slip's wait, the free re-read and the history.
	t.Run("history", func(t *testing.T) {
		// The re-read draws on the bank budget, which "v2 bank" used up
		// for kSlow a moment ago (it refills at 1 a second).
		st.do(t, get("/v2/slips/x", bearer(kSlow)...), 429, "RATE_LIMIT_EXCEEDED")
		const p = "/v2/verify/bank"
		listed := payload("004", listedRef)
		mine := fresh()
		mineRef, _ := slip.ParseBank(mine)
		st.do(t, post(p, map[string]any{"payload": mine, "remark": "history"}, bearer(kMain)...), 200, "")
		d := st.do(t, post(p, map[string]any{"payload": listed, "remark": "history", "amountMin": 100, "amountMax": 200,
			"dateFrom": "2026-11-01T00:00:00+07:00", "dateTo": "2026-11-30T00:00:00+07:00"}, bearer(kMain)...), 200, "")
		if got := d["data"].(map[string]any); got["isAmountMatched"] != true || got["isDateMatched"] != true {
			t.Errorf("conditions: %v", got)
		}
		if got := st.do(t, post(p, map[string]any{"payload": fresh(), "maxAge": "1h"}, bearer(kMain)...), 200, "")["data"].(map[string]any); got["isDateMatched"] != false {
			t.Errorf("a synthetic slip is dated in the past: %v", got)
		}
		st.do(t, post(p, map[string]any{"payload": listed, "maxAge": "1h", "dateFrom": "2026-11-01T00:00:00+07:00"}, bearer(kMain)...), 400, "VALIDATION_ERROR")
		w := slip.Wallet{EventType: "P2P", TransactionID: "50012345678911", Date: "20112026"}.Encode()
		st.do(t, post("/v2/verify/wallet", map[string]any{"payload": w, "amountMax": 1}, bearer(kMain)...), 200, "")
		body, ct := form(t, "", nil, map[string]string{"payload": fresh(), "amountMin": "1", "maxAge": "24h"})
		st.do(t, req{method: "POST", path: p, body: body, contentType: ct, header: bearer(kMain)}, 200, "")
		hook := "https://93.184.216.34/hook"
		st.do(t, post("/v2/verify/bank/async", map[string]any{"payload": fresh(), "callbackUrl": hook, "amountMin": 1, "dateTo": "2026-12-01T00:00:00Z"}, bearer(kMain)...), 202, "")
		st.do(t, post("/v2/verify/bank/async/batch", map[string]any{"items": []any{map[string]any{"payload": fresh(), "maxAge": "2h"}}, "callbackUrl": hook}, bearer(kMain)...), 202, "")

		for _, r := range []req{post(p, map[string]any{"payload": payload("006", pendingRef)}, bearer(kMain)...),
			post("/verify", map[string]any{"payload": payload("006", pendingRef)}, bearer(kMain)...)} {
			code := map[bool]string{true: "SLIP_PENDING", false: "slip_pending"}[r.path == p]
			if d := st.do(t, r, 404, code); fmt.Sprint(d["retryAfter"], field(d, "error", "retryAfter")) == "<nil> <nil>" {
				t.Errorf("%s: SLIP_PENDING without retryAfter: %v", r.path, d)
			}
		}

		rr := st.do(t, get("/v2/slips/"+listedRef, bearer(kMain)...), 200, "")
		if got := rr["data"].(map[string]any); got["branchId"] != "br-main" || got["kind"] != "bank" {
			t.Errorf("re-read: %v", got)
		}
		st.do(t, req{method: "GET", path: "/v2/slips/" + listedRef, header: signed(kMain, secretFull, "GET", "/v2/slips/"+listedRef, nil, 0, "")}, 200, "")
		st.do(t, get("/v2/slips/NEVERVERIFIED1", bearer(kMain)...), 404, "SLIP_NOT_FOUND")
		st.do(t, get("/v2/slips/"+listedRef), 401, "MISSING_API_KEY")
		st.do(t, get("/v2/slips/"+listedRef, bearer(kOff)...), 403, "BRANCH_INACTIVE")

		h := st.do(t, get("/v2/verifications?limit=2&remark=history", bearer(kMain)...), 200, "")
		// The listed slip's verification here was a free self-duplicate
		// ("v2 bank" verified it first): listed once, then.
		if items := h["data"].(map[string]any)["items"].([]any); len(items) != 1 || items[0].(map[string]any)["transRef"] != mineRef.TransRef {
			t.Errorf("history by remark: %v", h)
		}
		page := st.do(t, get("/v2/verifications?limit=1", bearer(kMain)...), 200, "")
		cur, _ := page["data"].(map[string]any)["nextCursor"].(string)
		st.do(t, get("/v2/verifications?limit=1&cursor="+cur, bearer(kMain)...), 200, "")
		st.do(t, get("/v2/verifications?limit=5000", bearer(kMain)...), 400, "VALIDATION_ERROR")
		st.do(t, get("/v2/verifications"), 401, "MISSING_API_KEY")
		st.do(t, get("/v2/verifications", bearer(kOff)...), 403, "BRANCH_INACTIVE")
		// CSV: the same listing, in the content type the document names.
		hr, _ := http.NewRequest("GET", st.url+"/v2/verifications?limit=1", nil)
		hr.Header.Set("Authorization", "Bearer "+kMain)
		hr.Header.Set("Accept", "text/csv")
		res, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		op, _ := st.spec.Operation("GET", "/v2/verifications")
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/csv") || !strings.HasPrefix(string(raw), "verifiedAt,branchId,") ||
			res.Header.Get("X-Next-Cursor") == "" || !slices.Contains(op.Responses["200"].Headers, "X-Request-Id") {
			t.Errorf("CSV history: %d %s, next %q\n%s", res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("X-Next-Cursor"), raw)
		}

		b2b := func(method, path string, body any, status int, code string) map[string]any {
			t.Helper()
			return st.b2b(t, method, path, body, status, code)
		}
		b2b("GET", "/b2b/verifications", nil, 200, "")
		b2b("GET", "/b2b/verifications?branchId=br-main&isDuplicate=false&amountMin=1", nil, 200, "")
		b2b("GET", "/b2b/verifications?branchId=br-none", nil, 404, "NOT_FOUND")
		b2b("GET", "/b2b/verifications?from=today", nil, 400, "VALIDATION_ERROR")
		st.do(t, req{method: "GET", path: "/b2b/verifications", header: signed(clientRead, secretRead, "GET", "/b2b/verifications", nil, 0, "")}, 403, "PERMISSION_DENIED")
		const c = "/b2b/branches/br-main/conditions"
		b2b("GET", c, nil, 200, "")
		b2b("PUT", c, map[string]any{"maxAge": "168h", "amountMin": 1}, 200, "")
		if d := st.do(t, post(p, map[string]any{"payload": fresh()}, bearer(kMain)...), 200, ""); d["data"].(map[string]any)["isDateMatched"] != false {
			t.Errorf("the branch's default maxAge: %v", d)
		}
		b2b("PUT", c, map[string]any{"maxAge": "forever"}, 400, "VALIDATION_ERROR")
		b2b("PUT", c, map[string]any{}, 200, "")
		b2b("GET", "/b2b/branches/br-none/conditions", nil, 404, "NOT_FOUND")
		st.do(t, req{method: "PUT", path: c, body: []byte("{}"), header: signed(clientRead, secretRead, "PUT", c, []byte("{}"), 0, "")}, 403, "PERMISSION_DENIED")
	})

	t.Run("v2 wallet", func(t *testing.T) {
		const p = "/v2/verify/wallet"
		w := slip.Wallet{EventType: "P2P", TransactionID: "50012345678901", Date: "20112026"}.Encode()
		st.do(t, post(p, map[string]any{"payload": w, "matchAmount": 1}, bearer(kMain)...), 200, "")
		st.do(t, post(p, map[string]any{"payload": w}, bearer(kMain)...), 200, "")
		// The commercial API's path: the same route, the same slip.
		tw := st.do(t, post("/v2/verify/truewallet", map[string]any{"payload": w}, bearer(kMain)...), 200, "")
		if d, _ := tw["data"].(map[string]any); d["isDuplicate"] != true {
			t.Errorf("/v2/verify/truewallet is not the wallet route: %v", tw)
		}
		st.do(t, post("/v2/verify/truewallet", map[string]any{"payload": w}), 401, "MISSING_API_KEY")
		st.do(t, post(p, map[string]any{"payload": payload("004", listedRef)}, bearer(kMain)...), 404, "SLIP_NOT_FOUND")
		st.do(t, post(p, map[string]any{"payload": w, "matchAccount": true}, bearer(kMain)...), 400, "VALIDATION_ERROR")
		st.do(t, post(p, map[string]any{"payload": w}, bearer(kOff)...), 403, "BRANCH_INACTIVE")
		st.do(t, post(p, map[string]any{"payload": "x"}, bearer(kSlow)...), 404, "SLIP_NOT_FOUND")
		st.do(t, post(p, map[string]any{"payload": "x"}, bearer(kSlow)...), 429, "RATE_LIMIT_EXCEEDED")
	})

	t.Run("async", func(t *testing.T) {
		const p, batch = "/v2/verify/bank/async", "/v2/verify/bank/async/batch"
		hook := "https://93.184.216.34/hook" // an address literal: checked without a lookup
		one := st.do(t, post(p, map[string]any{"payload": fresh(), "callbackUrl": hook}, bearer(kMain)...), 202, "")
		jobID, _ := one["data"].(map[string]any)["jobId"].(string)
		body := js(map[string]any{"items": []any{map[string]any{"payload": fresh()}, map[string]any{"payload": fresh()}}, "callbackUrl": hook})
		st.do(t, req{method: "POST", path: batch, body: body, header: signed(kMain, secretFull, "POST", batch, body, 0, "")}, 202, "")
		st.do(t, get("/v2/verify/bank/jobs/"+jobID, bearer(kMain)...), 200, "")
		st.do(t, get("/v2/verify/bank/jobs/"+jobID, bearer(kIP)...), 403, "IP_NOT_ALLOWED")
		st.do(t, get("/v2/verify/bank/jobs/"+uuid4(), bearer(kMain)...), 404, "JOB_NOT_FOUND")
		st.do(t, get("/v2/verify/bank/jobs/"+jobID), 401, "MISSING_API_KEY")
		st.do(t, post(p, map[string]any{"payload": fresh()}, bearer(kMain)...), 400, "VALIDATION_ERROR")
		st.do(t, post(p, map[string]any{"payload": fresh(), "callbackUrl": "http://93.184.216.34/hook"}, bearer(kMain)...), 400, "INVALID_CALLBACK_URL")
		st.do(t, post(p, map[string]any{"payload": fresh(), "callbackUrl": "https://10.0.0.1/hook"}, bearer(kMain)...), 400, "INVALID_CALLBACK_URL")
		// A URL that would not fit in a callback's Kafka message.
		st.do(t, post(p, map[string]any{"payload": fresh(), "callbackUrl": hook + "?pad=" + strings.Repeat("a", 8192)}, bearer(kMain)...), 400, "VALIDATION_ERROR")
		st.do(t, post(p, map[string]any{"payload": fresh(), "callbackUrl": "https://user:pass@shop.example/hook"}, bearer(kMain)...), 400, "VALIDATION_ERROR")
		st.do(t, post(p, map[string]any{"payload": "x", "callbackUrl": hook}, bearer(kMain)...), 404, "SLIP_NOT_FOUND")
		st.do(t, post(p, map[string]any{"payload": fresh(), "callbackUrl": hook}, bearer(kOff)...), 403, "BRANCH_INACTIVE")
		st.do(t, post(batch, map[string]any{"items": []any{}, "callbackUrl": hook}, bearer(kMain)...), 400, "VALIDATION_ERROR")
		st.do(t, post(batch, map[string]any{"items": []any{}}), 401, "MISSING_API_KEY")
		st.do(t, post(p, map[string]any{"payload": fresh()}), 401, "MISSING_API_KEY")
	})

	t.Run("info", func(t *testing.T) {
		st.do(t, get("/v2/info", bearer(kMain)...), 200, "")
		st.do(t, req{method: "GET", path: "/v2/info", header: signed(kMain, secretFull, "GET", "/v2/info", nil, 0, "")}, 200, "")
		st.do(t, get("/v2/info", bearer(kIP)...), 403, "IP_NOT_ALLOWED")
		st.do(t, get("/v2/info"), 401, "MISSING_API_KEY")
		st.do(t, get("/me", bearer(kMain)...), 200, "")
		st.do(t, get("/me", bearer(kTiny)...), 200, "")
		st.do(t, get("/me"), 401, "unauthorized")
		st.do(t, get("/me", bearer(kOff)...), 403, "application_deactivated")
		st.do(t, get("/me", bearer(kExp)...), 403, "application_expired")
		st.do(t, get("/me", bearer(kIP)...), 403, "access_denied")
	})

	t.Run("v1", func(t *testing.T) {
		dup := fresh()
		st.do(t, get("/verify?payload="+payload("004", listedRef), bearer(kMain)...), 200, "")
		st.do(t, get("/verify?checkDuplicate=true&payload="+dup, bearer(kMain)...), 200, "")
		st.do(t, get("/verify?checkDuplicate=true&payload="+dup, bearer(kMain)...), 400, "duplicate_slip")
		st.do(t, get("/verify?payload=abc", bearer(kMain)...), 400, "invalid_payload")
		st.do(t, get("/verify?payload=abc&checkDuplicate=yes", bearer(kMain)...), 400, "invalid_check_duplicate")
		st.do(t, get("/verify?payload="+payload("004", notFoundRef), bearer(kMain)...), 404, "slip_not_found")

		const p = "/verify"
		again := fresh()
		st.do(t, post(p, map[string]any{"payload": again, "checkDuplicate": true}, bearer(kMain)...), 200, "")
		d := st.do(t, post(p, map[string]any{"payload": again, "checkDuplicate": true}, bearer(kMain)...), 400, "duplicate_slip")
		if _, ok := d["data"].(map[string]any); !ok {
			t.Errorf("duplicate_slip without data: %v", d)
		}
		st.do(t, post(p, map[string]any{"payload": again}, bearer(kMain)...), 200, "")
		st.do(t, post(p, map[string]any{"payload": again, "checkDuplicate": "yes"}, bearer(kMain)...), 400, "invalid_check_duplicate")
		st.do(t, post(p, map[string]any{"payload": again, "remark": "v2 only"}, bearer(kMain)...), 400, "invalid_request")
		st.do(t, post(p, map[string]any{"payload": payload("006", pendingRef)}, bearer(kMain)...), 404, "slip_pending")
		st.do(t, post(p, map[string]any{"payload": payload("004", upstreamRef)}, bearer(kMain)...), 500, "api_server_error")
		st.do(t, post(p, map[string]any{"url": "ftp://example.com/x.png"}, bearer(kMain)...), 400, "invalid_url")
		body, ct := form(t, "file", notImage, nil)
		st.do(t, req{method: "POST", path: p, body: body, contentType: ct, header: bearer(kMain)}, 400, "invalid_image")
		body, ct = form(t, "image", notImage, nil)
		st.do(t, req{method: "POST", path: p, body: body, contentType: ct, header: bearer(kMain)}, 400, "invalid_request")
		// A form that does not parse is core's to refuse, in v1's format.
		st.do(t, req{method: "POST", path: p, body: []byte("--x\r\nnot a part"), contentType: "multipart/form-data; boundary=x", header: bearer(kMain)}, 400, "invalid_request")
		st.do(t, post(p, map[string]any{"payload": again}), 401, "unauthorized")
		st.do(t, post(p, map[string]any{"payload": again}, bearer(kUser)...), 403, "application_deactivated")
		st.do(t, post(p, map[string]any{"payload": fresh()}, bearer(kTiny)...), 403, "quota_exceeded")
		st.do(t, post(p, map[string]any{"payload": "x"}, bearer(kSlow2)...), 400, "invalid_payload")
		st.do(t, post(p, map[string]any{"payload": "x"}, bearer(kSlow2)...), 429, "rate_limit_exceeded")

		w := slip.Wallet{EventType: "P2P", TransactionID: "50012345678902", Date: "21112026"}.Encode()
		st.do(t, post("/verify/wallet", map[string]any{"payload": w, "checkDuplicate": true}, bearer(kMain)...), 200, "")
		st.do(t, post("/verify/wallet", map[string]any{"payload": w, "checkDuplicate": true}, bearer(kMain)...), 400, "duplicate_slip")
		st.do(t, post("/verify/wallet", map[string]any{"payload": w}, bearer(kIP)...), 403, "access_denied")
		st.do(t, post("/verify/truewallet", map[string]any{"payload": w, "checkDuplicate": true}, bearer(kMain)...), 400, "duplicate_slip")
		w2 := slip.Wallet{EventType: "P2P", TransactionID: "50012345678903", Date: "21112026"}.Encode()
		st.do(t, post("/verify/truewallet", map[string]any{"payload": w2}, bearer(kMain)...), 200, "")
	})

	// Every v1 route also answers under /api/v1, the same in every way.
	t.Run("api/v1", func(t *testing.T) {
		const v1 = "/api/v1"
		st.do(t, get(v1+"/me", bearer(kMain)...), 200, "")
		st.do(t, get(v1+"/me"), 401, "unauthorized")
		st.do(t, get(v1+"/verify?payload="+payload("004", listedRef), bearer(kMain)...), 200, "")
		st.do(t, get(v1+"/verify?payload=abc", bearer(kMain)...), 400, "invalid_payload")
		again := fresh()
		st.do(t, post(v1+"/verify", map[string]any{"payload": again, "checkDuplicate": true}, bearer(kMain)...), 200, "")
		st.do(t, post(v1+"/verify", map[string]any{"payload": again, "checkDuplicate": true}, bearer(kMain)...), 400, "duplicate_slip")
		st.do(t, post(v1+"/verify", map[string]any{"payload": fresh()}, bearer(kTiny)...), 403, "quota_exceeded")
		w := slip.Wallet{EventType: "P2P", TransactionID: "50012345678904", Date: "21112026"}.Encode()
		st.do(t, post(v1+"/verify/wallet", map[string]any{"payload": w}, bearer(kMain)...), 200, "")
		st.do(t, post(v1+"/verify/truewallet", map[string]any{"payload": w, "checkDuplicate": true}, bearer(kMain)...), 400, "duplicate_slip")
		w = slip.Wallet{EventType: "P2P", TransactionID: "50012345678905", Date: "21112026"}.Encode()
		st.do(t, post(v1+"/verify/truewallet", map[string]any{"payload": w}, bearer(kMain)...), 200, "")
		st.do(t, post(v1+"/verify/truewallet", map[string]any{"payload": w}, bearer(kIP)...), 403, "access_denied")
		st.do(t, post(v1+"/verify", map[string]any{"payload": "x"}, bearer(kMain)...), 400, "invalid_payload")
	})

	t.Run("utility", func(t *testing.T) {
		for _, prefix := range []string{"", "/v2"} {
			st.do(t, get(prefix+"/banks", bearer(kMain)...), 200, "")
			st.do(t, post(prefix+"/qr/generate", map[string]any{"type": "promptpay", "target": "0812345678", "amount": 10.5}, bearer(kMain)...), 200, "")
			st.do(t, post(prefix+"/qr/generate", map[string]any{"type": "promptpay", "target": "0812345678"}, bearer(kMain)...), 200, "")
			st.do(t, post(prefix+"/qr/generate", map[string]any{"type": "card"}, bearer(kMain)...), 400, "VALIDATION_ERROR")
			st.do(t, get(prefix+"/bank-accounts", bearer(kMain)...), 200, "")
		}
		st.do(t, get("/banks"), 401, "MISSING_API_KEY")
		st.do(t, get("/v2/banks", bearer(kOff)...), 403, "BRANCH_INACTIVE")
		st.do(t, req{method: "GET", path: "/banks", header: signed(kMain, secretFull, "GET", "/banks", nil, 0, "")}, 200, "")

		acc := map[string]any{"bankCode": "004", "bankNumber": "9876543210", "name": map[string]any{"th": "ร้าน ใหม่", "en": "NEW SHOP"}}
		d := st.do(t, post("/bank-accounts", acc, bearer(kMain)...), 201, "")
		st.do(t, post("/v2/bank-accounts", acc, bearer(kMain)...), 409, "BANK_ACCOUNT_DUPLICATE")
		st.do(t, post("/v2/bank-accounts", map[string]any{"bankCode": "030", "bankNumber": "0200999999", "name": map[string]any{"th": "ร้าน สอง"}}, bearer(kMain)...), 201, "")
		st.do(t, post("/v2/bank-accounts", map[string]any{"bankCode": "004", "bankNumber": "12", "name": map[string]any{"th": "x"}}, bearer(kMain)...), 400, "VALIDATION_ERROR")
		st.do(t, post("/bank-accounts", map[string]any{"bankCode": "999", "bankNumber": "1234567", "name": map[string]any{"th": "x"}}, bearer(kMain)...), 400, "INVALID_BANK_CODE")
		id, _ := d["data"].(map[string]any)["id"].(string)
		st.do(t, req{method: "PUT", path: "/bank-accounts/" + id + "/link", header: bearer(kMain)}, 200, "")
		st.do(t, req{method: "PUT", path: "/v2/bank-accounts/acc-1/link", header: bearer(kMain)}, 200, "")
		st.do(t, req{method: "PUT", path: "/v2/bank-accounts/acc-none/link", header: bearer(kMain)}, 404, "BANK_ACCOUNT_NOT_FOUND")
		// Fields the route does not have are refused, not ignored.
		st.do(t, req{method: "PUT", path: "/bank-accounts/" + id + "/link", body: []byte(`{"unlink":true}`), header: bearer(kMain)}, 400, "VALIDATION_ERROR")
		st.do(t, post("/v2/bank-accounts", map[string]any{"bankCode": "004", "bankNumber": "5550001111", "name": map[string]any{"th": "ร้าน", "eng": "SHOP"}}, bearer(kMain)...), 400, "VALIDATION_ERROR")
	})

	t.Run("b2b", func(t *testing.T) {
		b2b := func(method, path string, body any, status int, code string) map[string]any {
			t.Helper()
			return st.b2b(t, method, path, body, status, code)
		}
		b2b("GET", "/b2b/branches", nil, 200, "")
		d := b2b("POST", "/b2b/branches", map[string]any{"name": "Siam Square", "ipAllow": []string{"10.0.0.0/8", "*"},
			"webhookUrl": "https://shop.example/hook", "webhookSecret": "0123456789abcdef", "limitQuota": 50}, 201, "")
		id, _ := d["data"].(map[string]any)["id"].(string)
		b2b("POST", "/b2b/branches", map[string]any{}, 400, "VALIDATION_ERROR")
		b2b("GET", "/b2b/branches/"+id, nil, 200, "")
		b2b("GET", "/b2b/branches/br-none", nil, 404, "NOT_FOUND")
		b2b("PATCH", "/b2b/branches/"+id, map[string]any{"name": "Siam 2", "webhookUrl": nil, "limitQuota": nil}, 200, "")
		b2b("PATCH", "/b2b/branches/"+id, map[string]any{"webhookUrl": "https://shop.example/hook?pad=" + strings.Repeat("a", 8192)}, 400, "VALIDATION_ERROR")
		b2b("PATCH", "/b2b/branches/"+id, map[string]any{"webhookUrl": "https://10.0.0.1/hook"}, 400, "VALIDATION_ERROR")
		b2b("PATCH", "/b2b/branches/"+id, map[string]any{"ipAllow": slices.Repeat([]string{"10.0.0.1"}, 1001)}, 400, "VALIDATION_ERROR")
		if d := b2b("PATCH", "/b2b/branches/"+id, map[string]any{"ipAllow": []string{" 10.0.0.0/8 ", "*"}}, 200, ""); fmt.Sprint(d["data"].(map[string]any)["ipAllow"]) != "[10.0.0.0/8 *]" {
			t.Errorf("ipAllow stored as %v, want it as matched, trimmed", d["data"].(map[string]any)["ipAllow"])
		}
		b2b("PATCH", "/b2b/branches/"+id, map[string]any{"webhookUrl": "https://user:pass@shop.example/hook"}, 400, "VALIDATION_ERROR")
		b2b("PATCH", "/b2b/branches/"+id, map[string]any{"webhookUrl": "https://shop.example:99999/hook"}, 400, "VALIDATION_ERROR")
		b2b("POST", "/b2b/branches", map[string]any{"name": "Silom", "webhookUrl": "https://[::ffff:127.0.0.1]/hook"}, 400, "VALIDATION_ERROR")
		b2b("PATCH", "/b2b/branches/br-main", map[string]any{"active": false}, 400, "VALIDATION_ERROR")
		b2b("PATCH", "/b2b/branches/br-none", map[string]any{"name": "x"}, 404, "NOT_FOUND")
		q := "/b2b/branches/" + id + "/quota"
		b2b("GET", q, nil, 200, "")
		b2b("GET", "/b2b/branches/br-main/quota", nil, 200, "")
		b2b("GET", "/b2b/branches/br-none/quota", nil, 404, "NOT_FOUND")
		b2b("POST", q+"/adjust", map[string]any{"amount": 5}, 400, "VALIDATION_ERROR") // limitQuota is null
		// Whole numbers stay exact beyond a float64's 2^53.
		big := b2b("PUT", q, json.RawMessage(`{"limitQuota":9007199254740993}`), 200, "")
		if got := big["data"].(map[string]any)["limitQuota"]; fmt.Sprint(got) != "9007199254740993" {
			t.Errorf("limitQuota 9007199254740993 stored as %v", got)
		}
		b2b("PUT", q, map[string]any{"limitQuota": 100}, 200, "")
		b2b("PUT", q, map[string]any{}, 400, "VALIDATION_ERROR")
		b2b("PUT", "/b2b/branches/br-main/quota", map[string]any{"limitQuota": 0}, 400, "VALIDATION_ERROR") // below usedQuota
		b2b("PUT", "/b2b/branches/br-none/quota", map[string]any{"limitQuota": 1}, 404, "NOT_FOUND")
		b2b("POST", q+"/adjust", map[string]any{"amount": -10}, 200, "")
		b2b("POST", q+"/adjust", map[string]any{"amount": 1.5}, 400, "VALIDATION_ERROR")
		b2b("POST", q+"/reset", nil, 200, "")
		b2b("POST", "/b2b/branches/br-main/quota/reset", map[string]any{}, 200, "")
		b2b("POST", q+"/reset", map[string]any{"x": 1}, 400, "VALIDATION_ERROR")
		b2b("PUT", q, map[string]any{"limitQuota": nil}, 200, "")
		// A tenant rotates its own branch keys: the new key works at once,
		// the old one for the overlap; a second rotation meanwhile conflicts.
		newKey := d["data"].(map[string]any)["key"]
		rot := b2b("POST", "/b2b/branches/"+id+"/key/rotate", map[string]any{"overlap": "1h"}, 200, "")
		rotated, _ := rot["data"].(map[string]any)["key"].(string)
		b2b("POST", "/b2b/branches/"+id+"/key/rotate", nil, 409, "CONFLICT")
		b2b("POST", "/b2b/branches/"+id+"/key/rotate", map[string]any{"overlap": "169h"}, 400, "VALIDATION_ERROR")
		b2b("POST", "/b2b/branches/br-none/key/rotate", nil, 404, "NOT_FOUND")
		for _, k := range []any{newKey, rotated} {
			st.do(t, get("/v2/info", bearer(fmt.Sprint(k))...), 200, "")
		}

		b2b("GET", "/b2b/bank-accounts", nil, 200, "")
		acc := map[string]any{"bankCode": "PROMPTPAY", "bankNumber": "0812345678", "name": map[string]any{"th": "ร้าน พร้อมเพย์"}, "branches": []string{id}}
		d = b2b("POST", "/b2b/bank-accounts", acc, 201, "")
		b2b("POST", "/b2b/bank-accounts", acc, 409, "BANK_ACCOUNT_DUPLICATE")
		b2b("POST", "/b2b/bank-accounts", map[string]any{"bankCode": "BAD", "bankNumber": "0812345679", "name": map[string]any{"th": "x"}}, 400, "INVALID_BANK_CODE")
		b2b("POST", "/b2b/bank-accounts", map[string]any{"bankCode": "004", "bankNumber": "0812345679", "name": map[string]any{"th": "x"}, "branches": []string{"br-none"}}, 400, "VALIDATION_ERROR")
		accID, _ := d["data"].(map[string]any)["id"].(string)
		link := "/b2b/branches/br-main/bank-accounts/" + accID
		b2b("PUT", link, nil, 200, "")
		b2b("DELETE", link, nil, 200, "")
		b2b("DELETE", link, nil, 404, "BANK_ACCOUNT_NOT_FOUND")
		b2b("PUT", "/b2b/branches/br-none/bank-accounts/"+accID, nil, 404, "NOT_FOUND")
		b2b("PUT", "/b2b/branches/br-main/bank-accounts/acc-none", nil, 404, "BANK_ACCOUNT_NOT_FOUND")

		b2b("DELETE", "/b2b/branches/"+id, nil, 200, "")
		b2b("DELETE", "/b2b/branches/"+id, nil, 404, "NOT_FOUND")
		b2b("DELETE", "/b2b/branches/br-main", nil, 400, "VALIDATION_ERROR")

		st.do(t, req{method: "GET", path: "/b2b/branches", header: signed(clientRead, secretRead, "GET", "/b2b/branches", nil, 0, "")}, 403, "PERMISSION_DENIED")
		st.do(t, req{method: "GET", path: "/b2b/branches/br-main/quota", header: signed(clientRead, secretRead, "GET", "/b2b/branches/br-main/quota", nil, 0, "")}, 200, "")
		st.do(t, req{method: "GET", path: "/b2b/branches", header: signed(kMain, secretFull, "GET", "/b2b/branches", nil, 0, "")}, 401, "INVALID_API_KEY")
		st.do(t, req{method: "GET", path: "/b2b/branches", header: bearer(kMain)}, 401, "MISSING_API_KEY")
		st.do(t, req{method: "GET", path: "/b2b/branches", header: signed(clientFull, secretRead, "GET", "/b2b/branches", nil, 0, "")}, 401, "INVALID_SIGNATURE")
	})

	t.Run("openapi.json", func(t *testing.T) {
		res, err := http.Get(st.url + "/openapi.json")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Skipf("the edge does not serve /openapi.json yet (%d)", res.StatusCode)
		}
		if !bytes.Equal(raw, openapi.Document()) {
			t.Errorf("GET /openapi.json is not the embedded document")
		}
		st.seen["GET /openapi.json 200"] = true
	})

	// Every operation answered at least one success.
	for _, e := range st.spec.Paths() {
		op, _ := st.spec.Operation(e.Method, e.Path)
		ok := false
		for status := range op.Responses {
			ok = ok || status[0] == '2' && st.seen[fmt.Sprintf("%s %s %s", e.Method, e.Path, status)]
		}
		if !ok && e.Path != "/openapi.json" {
			t.Errorf("%s %s: no success answer was checked", e.Method, e.Path)
		}
	}
	var seen []string
	for k := range st.seen {
		seen = append(seen, k)
	}
	slices.Sort(seen)
	t.Logf("checked %d (operation, status) pairs", len(seen))
}

// field walks a decoded JSON value by keys.
func field(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}
