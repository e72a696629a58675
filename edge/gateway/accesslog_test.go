package gateway_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/slip"
)

// TestAccessLog: every answer, forwarded or the edge's own, carries an
// X-Request-Id the client can quote, and the access log has one line for it
// under that id: what was asked, the answer's status and (for the edge's
// own refusals) catalog code, the caller's ids once authenticated, the
// client's address and sizes, and never a key.
func TestAccessLog(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	badKey := "00000000-0000-4000-8000-000000000000"
	type sent struct {
		a                  answer
		method, path, code string
		service, branch    string
		status, bytesIn    int
	}
	var all []sent
	// branch is the caller's branch id; its service is svc-a.
	send := func(method, path, body string, status int, code, branch string, header ...string) answer {
		t.Helper()
		a := e.do(t, method, path, body, header...)
		if a.status != status {
			t.Fatalf("%s %s: %d %s, want %d", method, path, a.status, a.raw, status)
		}
		service := ""
		if branch != "" {
			service = "svc-a"
		}
		all = append(all, sent{a: a, method: method, path: path, code: code, service: service, branch: branch,
			status: status, bytesIn: len(body)})
		return a
	}
	send("POST", "/v2/verify/bank", payload("015353134529BPM00001"), 200, "", "a-main", bearer(keyMain)...)
	send("GET", "/v2/info", "", 401, "INVALID_API_KEY", "", bearer(badKey)...)
	send("GET", "/me", "", 401, "MISSING_API_KEY", "")
	forged := send("GET", "/v2/info", "", 200, "", "a-main", append(bearer(keyMain), "X-Request-Id", "forged-id")...)
	send("GET", "/v2/nope", "", 404, "NOT_FOUND", "")
	send("GET", "/health", "", 200, "", "")
	send("GET", "/v2/info", "", 403, "IP_NOT_ALLOWED", "a-ip", bearer(keyIP)...)
	// A query string (here a slip payload) is not written; nor is anything
	// of a signed request's credentials.
	p := slip.Bank{BankCode: "004", TransRef: "015353134529BPM00002"}.Encode()
	send("GET", "/verify?payload="+p+"&checkDuplicate=true", "", 200, "", "a-main", bearer(keyMain)...)
	sig := e.signed(keyMain, secretA, "GET", "/v2/info", "", 0, "")
	send("GET", "/v2/info", "", 200, "", "a-main", sig...)
	send("GET", "/openapi.json", "", 200, "", "")
	send("OPTIONS", "/v2/verify/bank", "", 404, "NOT_FOUND", "")
	// A HEAD answer goes out without its body: bytes_out 0.
	res, err := http.Head(e.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("HEAD /health: %d", res.StatusCode)
	}
	all = append(all, sent{a: answer{status: 200, header: res.Header}, method: "HEAD", path: "/health", status: 200})
	// The branch's bank budget is 5 a second and the edge's clock stands
	// still: the third verification from here on is refused.
	for range 3 {
		if a := e.do(t, "POST", "/v2/verify/bank", payload("015353134529BPM00003"), bearer(keyMain)...); a.status == 429 {
			t.Fatalf("refused early: %s", a.raw)
		} else {
			all = append(all, sent{a: a, method: "POST", path: "/v2/verify/bank", service: "svc-a", branch: "a-main",
				status: a.status, bytesIn: len(payload("015353134529BPM00003"))})
		}
	}
	send("POST", "/v2/verify/bank", payload("015353134529BPM00004"), 429, "RATE_LIMIT_EXCEEDED", "a-main", bearer(keyMain)...)

	if got := forged.header.Get("X-Request-Id"); got == "forged-id" {
		t.Error("a client chose its own request id")
	}
	lines, raw := e.accessLog(t)
	byID := map[string]map[string]any{}
	for _, l := range lines {
		byID[l["id"].(string)] = l
	}
	if len(byID) != len(lines) || len(lines) != len(all) {
		t.Fatalf("%d lines, %d ids, for %d requests:\n%s", len(lines), len(byID), len(all), raw)
	}
	for _, s := range all {
		id := s.a.header.Get("X-Request-Id")
		l, ok := byID[id]
		if !ok {
			t.Errorf("%s %s: answer's X-Request-Id %q has no line", s.method, s.path, id)
			continue
		}
		path, _, _ := strings.Cut(s.path, "?")
		want := map[string]any{
			"msg": "access", "tier": "edge", "method": s.method, "path": path, "status": float64(s.status),
			"ip": "127.0.0.1", "bytes_in": float64(s.bytesIn), "bytes_out": float64(len(s.a.raw)),
		}
		if s.code != "" {
			want["code"] = s.code
		}
		if s.service != "" {
			want["service"], want["branch"] = s.service, s.branch
		}
		for k, v := range want {
			if l[k] != v {
				t.Errorf("%s %s: %s = %v, want %v", s.method, s.path, k, l[k], v)
			}
		}
		for _, k := range []string{"code", "service", "branch"} {
			if _, ok := want[k]; !ok && l[k] != nil {
				t.Errorf("%s %s: %s = %v, want none", s.method, s.path, k, l[k])
			}
		}
		if d, ok := l["duration_us"].(float64); !ok || d < 0 {
			t.Errorf("%s %s: duration_us = %v", s.method, s.path, l["duration_us"])
		}
	}
	signature := sig[slices.Index(sig, "X-Signature")+1]
	for name, secret := range map[string]string{"branch key": keyMain, "unknown key": badKey, "edge token": testnet.EdgeToken,
		"signature": signature, "signing secret": secretA, "query string": "payload=", "slip payload": p} {
		if strings.Contains(raw, secret) {
			t.Errorf("the access log holds the %s", name)
		}
	}
	// Ids are unique per edge: its random prefix and a counter.
	seq := func(id string) uint64 {
		n, err := strconv.ParseUint(id[strings.LastIndexByte(id, '-')+1:], 16, 64)
		if err != nil {
			t.Fatalf("request id %q: %v", id, err)
		}
		return n
	}
	if a, b := seq(all[0].a.header.Get("X-Request-Id")), seq(all[1].a.header.Get("X-Request-Id")); b != a+1 {
		t.Errorf("request ids %d then %d", a, b)
	}
}

// TestAccessLogUnparsedRequest: a request fasthttp cannot read still gets
// an id and a line, with its refusal's code and no method or path (the
// request was discarded; whatever they were, they are unknown).
func TestAccessLogUnparsedRequest(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	res := e.raw(t, "POST /v2/verify/bank HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
	res.Body.Close()
	id := res.Header.Get("X-Request-Id")
	if res.StatusCode != 400 || id == "" {
		t.Fatalf("answer %d with id %q, want 400 with an id", res.StatusCode, id)
	}
	lines, raw := e.accessLog(t)
	if len(lines) != 1 || lines[0]["id"] != id || lines[0]["code"] != "VALIDATION_ERROR" ||
		lines[0]["method"] != "" || lines[0]["path"] != "" || lines[0]["status"] != 400.0 {
		t.Fatalf("log, want one VALIDATION_ERROR line under %s without method or path:\n%s", id, raw)
	}
}
