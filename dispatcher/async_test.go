package dispatcher_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/slip"
	"github.com/slipverify/slipverify/edge/authn"
)

const (
	keyMain       = "11111111-1111-4111-8111-111111111111"
	keyHook       = "22222222-2222-4222-8222-222222222222" // branch with a webhook URL and no secret
	keyTiny       = "33333333-3333-4333-8333-333333333333" // branch with a limit of 1
	keyOther      = "44444444-4444-4444-8444-444444444444"
	webhookSecret = "whsec_async_e2e_0123456789"
	clientKey     = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	clientSecret  = "async-e2e-client-secret"
	notFoundRef   = "NOTFOUNDREF1"
	upstreamRef   = "UPSTREAMREF1"
)

// receiver is the HTTPS webhook receiver: it records every delivery by
// path and jobId and answers as its path says.
type receiver struct {
	srv    *httptest.Server
	caFile string
	mu     sync.Mutex
	got    map[string][]delivery // jobId -> deliveries, in arrival order
	hits   map[string]int        // path -> requests
}

type delivery struct {
	path      string
	body      []byte
	signature string
	payload   map[string]any
}

func newReceiver(t testing.TB) *receiver {
	r := &receiver{got: map[string][]delivery{}, hits: map[string]int{}}
	r.srv, r.caFile = testnet.TLSServer(t, http.HandlerFunc(r.serve))
	return r
}

func (r *receiver) url(path string) string { return r.srv.URL + path }

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	d := delivery{path: req.URL.Path, body: body, signature: req.Header.Get("X-Service-Signature")}
	json.Unmarshal(body, &d.payload)
	job, _ := d.payload["jobId"].(string)
	r.mu.Lock()
	r.hits[req.URL.Path]++
	n := len(r.got[job])
	if req.URL.Path != "/redirected" {
		r.got[job] = append(r.got[job], d)
	}
	r.mu.Unlock()
	switch req.URL.Path {
	case "/ok", "/redirected":
		w.WriteHeader(http.StatusOK)
	case "/accepted":
		w.WriteHeader(http.StatusAccepted)
	case "/flaky": // 500 to the first delivery of each job, then 200
		if n == 0 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	case "/redirect":
		http.Redirect(w, req, "/redirected", http.StatusFound)
	case "/slow": // holds the delivery until the dispatcher gives up
		<-req.Context().Done()
	default: // "/dead"
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

// deliveries returns the deliveries of a job so far.
func (r *receiver) deliveries(job string) []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got[job]...)
}

// count returns how many jobs have had a delivery.
func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

func (r *receiver) hitsOf(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits[path]
}

// verifySignature checks a callback the way spec 6.3 tells receivers to:
// HMAC-SHA256 of the raw body with the webhook secret, compared in
// constant time.
func verifySignature(body []byte, header, secret string) bool {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	return hmac.Equal([]byte(header), []byte(want))
}

// nodeStringify returns a function that gives back
// JSON.stringify(JSON.parse(body)) as node writes it. Without node the
// test is skipped, except in CI (CI set), where it fails: CI installs node
// (.ci/run).
func nodeStringify(t *testing.T) func(body []byte) []byte {
	t.Helper()
	bin, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node not installed: CI installs it (.ci/run)")
		}
		t.Skip("node not installed (apt-get install nodejs)")
	}
	return func(body []byte) []byte {
		t.Helper()
		cmd := exec.Command(bin, "-e", `process.stdout.write(JSON.stringify(JSON.parse(require("fs").readFileSync(0, "utf8"))))`)
		cmd.Stdin = bytes.NewReader(body)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node: %v\n%s", err, stderr.String())
		}
		return out
	}
}

// stack is broker, core, dispatcher and edge as real processes.
type stack struct {
	edge, core, dispatcher, broker *testnet.Program
	url                            string
}

// TestMain removes the programs the tests build.
func TestMain(m *testing.M) { testnet.Main(m) }

func startStack(t testing.TB, rcv *receiver) *stack {
	t.Helper()
	kafka := testnet.FreeAddr(t)
	common := []string{"SLIP_KAFKA_ADDR=" + kafka, "SLIP_EGRESS_ALLOW_CIDRS=127.0.0.0/8", "SLIP_EGRESS_CA_FILE=" + rcv.caFile}
	s := &stack{}
	s.broker = testnet.StartBroker(t, append(common, "SLIP_BROKER_PARTITIONS=3")...)
	s.core = testnet.StartCore(t, testnet.Seed(t, seedJSON(rcv.url("/ok"))), append(common,
		"SLIP_VERIFY_RETRY_SCHEDULE=100ms,100ms,100ms,100ms", "SLIP_WEBHOOK_RETRY_SCHEDULE=100ms,100ms,100ms")...)
	s.dispatcher = testnet.StartDispatcher(t, kafka, append(common, "SLIP_WEBHOOK_TIMEOUT=1s", "SLIP_DISPATCHER_PER_HOST=4")...)
	s.edge = testnet.StartEdge(t, s.core.Addr, append(common,
		"SLIP_EDGE_AUTH_TTL=1h")...) // record changes reach the edge through slip.config
	s.url = s.edge.URL()
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	return s
}

func seedJSON(hook string) string {
	branch := func(id, key string, limit, webhookURL, secret string) string {
		return fmt.Sprintf(`{"id":%q,"name":%q,"main":%v,"key":%q,"active":true,"ipAllow":["*"],"limitQuota":%s,"webhookUrl":%s,"webhookSecret":%s}`,
			id, id, id == "br-main", key, limit, webhookURL, secret)
	}
	return `{"services":[{"id":"svc","name":"Shop","state":"active","userBanned":false,
	"quota":{"limit":100000,"cycleAnchorDay":1},"rate":{"bank":1000,"wallet":1000},
	"branches":[` + strings.Join([]string{
		branch("br-main", keyMain, "null", "null", `"`+webhookSecret+`"`),
		branch("br-hook", keyHook, "null", `"`+hook+`"`, "null"),
		branch("br-tiny", keyTiny, "1", "null", "null"),
		branch("br-other", keyOther, "null", "null", "null"),
	}, ",") + `],
	"b2bClients":[{"key":"` + clientKey + `","secret":"` + clientSecret + `","permissions":["branch:read","branch:write"]}],
	"bankAccounts":[]}],
	"sandbox":{"notFound":["` + notFoundRef + `"],"upstreamError":["` + upstreamRef + `"]}}`
}

type answer struct {
	status int
	body   map[string]any
	raw    string
}

func (a answer) data() map[string]any { m, _ := a.body["data"].(map[string]any); return m }

func (a answer) code() string {
	e, _ := a.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (s *stack) do(t testing.TB, method, path, key string, body any, header ...string) answer {
	t.Helper()
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	req, err := http.NewRequest(method, s.url+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, raw: string(out)}
	json.Unmarshal(out, &a.body)
	return a
}

// b2b sends a signed management request.
func (s *stack) b2b(t *testing.T, method, path string, body any) answer {
	raw, _ := json.Marshal(body)
	ts, nonce := fmt.Sprint(time.Now().Unix()), uuid.NewString()
	sts := authn.AppendStringToSign(nil, []byte(method), authn.SignedPath([]byte(path)), []byte(ts), []byte(nonce), raw)
	return s.do(t, method, path, "", body, "X-API-Key", clientKey, "X-Timestamp", ts, "X-Nonce", nonce,
		"X-Signature", authn.NewSigner(clientSecret).Sign(sts))
}

func freshPayload() string {
	return slip.Bank{BankCode: "004", TransRef: "A" + strings.ToUpper(strings.ReplaceAll(uuid.NewString(), "-", ""))[:19]}.Encode()
}

func payloadOf(ref string) string { return slip.Bank{BankCode: "004", TransRef: ref}.Encode() }

// submit submits one slip and returns its jobId.
func (s *stack) submit(t *testing.T, key string, body map[string]any) string {
	t.Helper()
	a := s.do(t, "POST", "/v2/verify/bank/async", key, body)
	if a.status != 202 {
		t.Fatalf("submit: %d %s", a.status, a.raw)
	}
	return a.data()["jobId"].(string)
}

func (s *stack) poll(t *testing.T, key, job string) answer {
	t.Helper()
	return s.do(t, "GET", "/v2/verify/bank/jobs/"+job, key, nil)
}

// settled waits until the job's callback deliveries reach n and the
// polled job shows status.
func (s *stack) settled(t *testing.T, rcv *receiver, key, job string, n int, status string) answer {
	t.Helper()
	var a answer
	testnet.Eventually(t, 60*time.Second, func() bool {
		a = s.poll(t, key, job)
		return len(rcv.deliveries(job)) >= n && a.data()["status"] == status
	}, func() string {
		return fmt.Sprintf("job %s: %d deliveries, poll %s", job, len(rcv.deliveries(job)), a.raw)
	})
	return a
}

func TestAsyncEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole stack")
	}
	rcv := newReceiver(t)
	s := startStack(t, rcv)

	t.Run("success, signed as spec 6.3 says", func(t *testing.T) {
		job := s.submit(t, keyMain, map[string]any{"payload": freshPayload(), "callbackUrl": rcv.url("/ok"), "remark": "order 7"})
		a := s.settled(t, rcv, keyMain, job, 1, "done")
		d := rcv.deliveries(job)[0]
		if !verifySignature(d.body, d.signature, webhookSecret) {
			t.Fatalf("signature %q does not verify over %s", d.signature, d.body)
		}
		if d.payload["status"] != "success" || d.payload["batchId"] != nil || d.payload["timestamp"] == "" {
			t.Fatalf("payload %s", d.body)
		}
		data := d.payload["data"].(map[string]any)
		if data["remark"] != "order 7" || data["isDuplicate"] != false {
			t.Fatalf("data %v", data)
		}
		res := a.data()["result"].(map[string]any)
		if res["status"] != "success" || a.data()["error"] != nil {
			t.Fatalf("polled %s", a.raw)
		}
		if a := s.poll(t, keyOther, job); a.status != 404 || a.code() != "JOB_NOT_FOUND" {
			t.Fatalf("another branch polled: %d %s", a.status, a.raw)
		}
	})

	t.Run("a receiver that signs JSON.stringify(JSON.parse(body)) verifies", func(t *testing.T) {
		// Receivers in the wild re-serialise the parsed body and sign that
		// (spec 6.3 says to sign the raw bytes): the body must be what
		// JavaScript writes back, here with what HTML escaping, Go's
		// escaping of U+2028 and JSON's own escapes touch.
		stringify := nodeStringify(t)
		remark := "ชำระ <ค่า> & \"ทดสอบ\" C:\\ใบเสร็จ\tแถว\u2028ใหม่"
		job := s.submit(t, keyMain, map[string]any{"payload": freshPayload(), "callbackUrl": rcv.url("/ok"), "remark": remark})
		s.settled(t, rcv, keyMain, job, 1, "done")
		d := rcv.deliveries(job)[0]
		if data, _ := d.payload["data"].(map[string]any); data["remark"] != remark {
			t.Fatalf("remark %q in %s", data["remark"], d.body)
		}
		js := stringify(d.body)
		if !bytes.Equal(js, d.body) {
			t.Fatalf("JSON.stringify(JSON.parse(body)) differs from the body sent:\n sent %s\n node %s", d.body, js)
		}
		if !verifySignature(js, d.signature, webhookSecret) {
			t.Fatalf("signature %q does not verify over the re-serialised body %s", d.signature, js)
		}
	})

	t.Run("branch webhook URL without a secret", func(t *testing.T) {
		job := s.submit(t, keyHook, map[string]any{"payload": freshPayload()})
		s.settled(t, rcv, keyHook, job, 1, "done")
		if sig := rcv.deliveries(job)[0].signature; sig != "" {
			t.Fatalf("unsigned branch sent signature %q", sig)
		}
	})

	t.Run("not_found after exactly 5 attempts", func(t *testing.T) {
		start := time.Now()
		job := s.submit(t, keyMain, map[string]any{"payload": payloadOf(notFoundRef), "callbackUrl": rcv.url("/ok")})
		s.settled(t, rcv, keyMain, job, 1, "done")
		d := rcv.deliveries(job)[0].payload
		data := d["data"].(map[string]any)
		if d["status"] != "not_found" || data["attempts"] != float64(5) || data["reason"] != "SLIP_NOT_FOUND" || d["error"] != nil {
			t.Fatalf("payload %v", d)
		}
		if el := time.Since(start); el < 400*time.Millisecond {
			t.Fatalf("5 attempts with 4 waits of 100ms took only %v", el)
		}
	})

	t.Run("failed: upstream error", func(t *testing.T) {
		job := s.submit(t, keyMain, map[string]any{"payload": payloadOf(upstreamRef), "callbackUrl": rcv.url("/ok")})
		wantFailed(t, s, rcv, keyMain, job, "API_SERVER_ERROR")
	})

	t.Run("failed: receiver check", func(t *testing.T) {
		// Well formed at submit (a malformed request is refused there, with
		// VALIDATION_ERROR), but the branch has no bank account to match.
		job := s.submit(t, keyMain, map[string]any{"payload": freshPayload(), "matchAccount": true, "callbackUrl": rcv.url("/ok")})
		wantFailed(t, s, rcv, keyMain, job, "BANK_ACCOUNT_NOT_FOUND")
	})

	t.Run("failed: quota ran out after submit", func(t *testing.T) {
		a := s.do(t, "POST", "/v2/verify/bank/async/batch", keyTiny, map[string]any{
			"items": []any{map[string]any{"payload": freshPayload()}, map[string]any{"payload": freshPayload()}}, "callbackUrl": rcv.url("/ok")})
		if a.status != 202 {
			t.Fatalf("batch: %d %s", a.status, a.raw)
		}
		codes := map[string]int{}
		for _, id := range a.data()["jobIds"].([]any) {
			job := id.(string)
			testnet.Eventually(t, 30*time.Second, func() bool { return len(rcv.deliveries(job)) > 0 }, func() string { return job })
			p := rcv.deliveries(job)[0].payload
			code := "success"
			if e, ok := p["error"].(map[string]any); ok {
				code = e["code"].(string)
			}
			codes[p["status"].(string)+"/"+code]++
		}
		if codes["success/success"] != 1 || codes["failed/QUOTA_EXCEEDED"] != 1 {
			t.Fatalf("outcomes %v", codes)
		}
		if a := s.do(t, "POST", "/v2/verify/bank/async", keyTiny, map[string]any{"payload": freshPayload(), "callbackUrl": rcv.url("/ok")}); a.status != 403 || a.code() != "QUOTA_EXCEEDED" {
			t.Fatalf("submit with quota used up: %d %s", a.status, a.raw)
		}
	})

	t.Run("failed: branch deactivated while the job waits", func(t *testing.T) {
		job := s.submit(t, keyOther, map[string]any{"payload": payloadOf(notFoundRef), "callbackUrl": rcv.url("/ok")})
		testnet.Eventually(t, 30*time.Second, func() bool { return s.poll(t, keyOther, job).data()["status"] == "retrying" },
			func() string { return "job never retrying" })
		if a := s.b2b(t, "PATCH", "/b2b/branches/br-other", map[string]any{"active": false}); a.status != 200 {
			t.Fatalf("deactivate: %d %s", a.status, a.raw)
		}

		testnet.Eventually(t, 30*time.Second, func() bool { return len(rcv.deliveries(job)) > 0 }, func() string { return job })
		p := rcv.deliveries(job)[0].payload
		if p["status"] != "failed" || p["data"] != nil || p["error"].(map[string]any)["code"] != "BRANCH_INACTIVE" {
			t.Fatalf("payload %v", p)
		}
	})

	t.Run("batch: one callback per slip", func(t *testing.T) {
		items := []any{}
		for range 5 {
			items = append(items, map[string]any{"payload": freshPayload()})
		}
		a := s.do(t, "POST", "/v2/verify/bank/async/batch", keyMain, map[string]any{"items": items, "callbackUrl": rcv.url("/accepted")})
		if a.status != 202 {
			t.Fatalf("batch: %d %s", a.status, a.raw)
		}
		batch := a.data()["batchId"].(string)
		for _, id := range a.data()["jobIds"].([]any) {
			p := s.settled(t, rcv, keyMain, id.(string), 1, "done")
			if p.data()["batchId"] != batch || rcv.deliveries(id.(string))[0].payload["batchId"] != batch {
				t.Fatalf("job %s: batchId %v", id, p.data()["batchId"])
			}
		}
	})

	t.Run("receiver answers 500 then 200", func(t *testing.T) {
		job := s.submit(t, keyMain, map[string]any{"payload": freshPayload(), "callbackUrl": rcv.url("/flaky")})
		a := s.settled(t, rcv, keyMain, job, 2, "done")
		d := rcv.deliveries(job)
		if !bytes.Equal(d[0].body, d[1].body) || d[0].signature != d[1].signature {
			t.Fatalf("a redelivery differs:\n%s\n%s", d[0].body, d[1].body)
		}
		if a.data()["error"] != nil {
			t.Fatalf("delivered job shows an error: %s", a.raw)
		}
	})

	for _, path := range []string{"/dead", "/redirect", "/slow"} {
		t.Run("receiver always failing: "+path, func(t *testing.T) {
			job := s.submit(t, keyMain, map[string]any{"payload": freshPayload(), "callbackUrl": rcv.url(path)})
			var a answer
			testnet.Eventually(t, 60*time.Second, func() bool {
				a = s.poll(t, keyMain, job)
				e, _ := a.data()["error"].(map[string]any)
				return e["webhook"] == "failed"
			}, func() string { return a.raw })
			if n := len(rcv.deliveries(job)); n != 4 {
				t.Fatalf("%d deliveries, want 4", n)
			}
			e := a.data()["error"].(map[string]any)
			if len(e["delivery"].([]any)) != 4 || a.data()["status"] != "done" || a.data()["result"] == nil {
				t.Fatalf("polled %s", a.raw)
			}
		})
	}
	if n := rcv.hitsOf("/redirected"); n != 0 {
		t.Fatalf("the dispatcher followed a redirect %d times", n)
	}

	t.Run("record changes reach the edge through slip.config", func(t *testing.T) {
		// The edge caches auth records for an hour here, and only the edge
		// checks IP allow lists: a refusal shows it read core's event.
		if a := s.do(t, "GET", "/v2/info", keyHook, nil); a.status != 200 {
			t.Fatalf("info: %d %s", a.status, a.raw)
		}
		if a := s.b2b(t, "PATCH", "/b2b/branches/br-hook", map[string]any{"ipAllow": []string{"10.9.9.9"}}); a.status != 200 {
			t.Fatalf("ipAllow: %d %s", a.status, a.raw)
		}
		changed := time.Now()
		var a answer
		testnet.Eventually(t, 10*time.Second, func() bool {
			a = s.do(t, "GET", "/v2/info", keyHook, nil)
			return a.code() == "IP_NOT_ALLOWED"
		}, func() string { return "the edge still admits the old allow list: " + a.raw })
		t.Logf("the edge applied the new allow list %v after the change", time.Since(changed))
	})

	t.Run("a slow receiver does not hold up a healthy one", func(t *testing.T) {
		for range 8 { // twice the per-host bound
			s.submit(t, keyMain, map[string]any{"payload": freshPayload(), "callbackUrl": rcv.url("/slow")})
		}
		other := newReceiver(t) // another host:port; httptest servers share one certificate
		start := time.Now()
		job := s.submit(t, keyMain, map[string]any{"payload": freshPayload(), "callbackUrl": other.url("/ok")})
		testnet.Eventually(t, 30*time.Second, func() bool { return len(other.deliveries(job)) > 0 }, func() string { return job })
		if el := time.Since(start); el > 900*time.Millisecond {
			t.Fatalf("a healthy callback took %v behind slow ones (delivery timeout 1s)", el)
		}
	})
}

// wantFailed waits for a job's failed callback and checks it carries code.
func wantFailed(t *testing.T, s *stack, rcv *receiver, key, job, code string) {
	t.Helper()
	a := s.settled(t, rcv, key, job, 1, "failed")
	p := rcv.deliveries(job)[0].payload
	e, _ := p["error"].(map[string]any)
	if p["status"] != "failed" || p["data"] != nil || e["code"] != code || e["message"] == "" {
		t.Fatalf("callback %v, want failed %s", p, code)
	}
	pe, _ := a.data()["error"].(map[string]any)
	if pe["code"] != code || a.data()["result"] != nil {
		t.Fatalf("polled %s", a.raw)
	}
}

// TestAsyncCrash kills core (the verification workers) and the dispatcher
// with SIGKILL while jobs flow and restarts them: no job is lost, quota is
// charged once per job, and every callback arrives at least once.
func TestAsyncCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole stack")
	}
	rcv := newReceiver(t)
	s := startStack(t, rcv)
	const batches, size = 20, 10
	var jobs []string
	submit := func(n int) {
		for range n {
			items := []any{}
			for range size {
				items = append(items, map[string]any{"payload": freshPayload()})
			}
			a := s.do(t, "POST", "/v2/verify/bank/async/batch", keyMain, map[string]any{"items": items, "callbackUrl": rcv.url("/ok")})
			if a.status != 202 {
				t.Fatalf("batch: %d %s", a.status, a.raw)
			}
			for _, id := range a.data()["jobIds"].([]any) {
				jobs = append(jobs, id.(string))
			}
		}
	}
	delivered := func() int {
		n := 0
		for _, j := range jobs {
			if len(rcv.deliveries(j)) > 0 {
				n++
			}
		}
		return n
	}
	submit(batches / 2)
	testnet.Eventually(t, 60*time.Second, func() bool { return delivered() > 0 }, func() string { return "no callback yet" })
	s.core.Kill() // mid-stream: jobs queued, running and delivered
	s.core.Restart(t)
	submit(batches / 2)
	s.dispatcher.Kill()
	s.dispatcher.Restart(t)
	testnet.Eventually(t, 120*time.Second, func() bool { return delivered() == len(jobs) },
		func() string { return fmt.Sprintf("%d of %d jobs delivered", delivered(), len(jobs)) })
	for _, j := range jobs {
		p := rcv.deliveries(j)[0].payload
		data, _ := p["data"].(map[string]any)
		if p["status"] != "success" || data["isDuplicate"] != false {
			t.Fatalf("job %s: %v", j, p)
		}
		if a := s.poll(t, keyMain, j); a.data()["status"] != "done" {
			t.Fatalf("job %s polled %s", j, a.raw)
		}
	}
	info := s.do(t, "GET", "/v2/info", keyMain, nil)
	used := info.data()["branch"].(map[string]any)["usedQuota"]
	if used != float64(len(jobs)) {
		t.Fatalf("usedQuota %v after %d jobs of fresh slips: %s", used, len(jobs), info.raw)
	}
}
