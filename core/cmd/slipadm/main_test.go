package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unicode"
)

// token is the admin token the tests authenticate with: no output may show
// it.
const token = "adm-tok-5f0c1e7a9b2d4c6e8f1a3b5c7d9e0f12"

// hit is a request the stand-in admin API received.
type hit struct{ method, uri, auth, contentType, body string }

// standIn is an admin API on a real listener: it records each request and
// answers with answer (by default 200 and a small service).
type standIn struct {
	*httptest.Server
	mu     sync.Mutex
	hits   []hit
	answer func(r *http.Request) (int, string)
}

func newStandIn(t *testing.T) *standIn {
	s := &standIn{answer: func(*http.Request) (int, string) {
		return 200, `{"success":true,"message":"ok","data":{"id":"svc-1","name":"Shop"}}`
	}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.hits = append(s.hits, hit{r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("Content-Type"), string(body)})
		answer := s.answer
		s.mu.Unlock()
		code, out := answer(r)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, out)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *standIn) took() []hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]hit(nil), s.hits...)
}

func (s *standIn) reset() {
	s.mu.Lock()
	s.hits = nil
	s.mu.Unlock()
}

// slipadm runs a command line against s with the token in the environment
// and checks that no output shows the token.
func slipadm(t *testing.T, s *standIn, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	env := map[string]string{"SLIP_ADMIN_URL": s.URL, "SLIP_ADMIN_TOKEN": token}
	var out, errOut bytes.Buffer
	code = run(args, func(k string) string { return env[k] }, &out, &errOut)
	if strings.Contains(out.String()+errOut.String(), token) {
		t.Errorf("%q: the output shows the admin token:\n%s\n%s", args, out.String(), errOut.String())
	}
	return code, out.String(), errOut.String()
}

// TestEveryCommandSendsItsRequest: each command of the contract sends its
// method, path and body, with the bearer token; every command in the table
// is exercised here.
func TestEveryCommandSendsItsRequest(t *testing.T) {
	s := newStandIn(t)
	cases := []struct {
		args        []string
		method, uri string
		body        string // JSON; "" for none
	}{
		{[]string{"services", "list"}, "GET", "/admin/v1/services", ""},
		{[]string{"services", "get", "svc-1"}, "GET", "/admin/v1/services/svc-1", ""},
		{[]string{"services", "get", "--service", "a/b c"}, "GET", "/admin/v1/services/a%2Fb%20c", ""},
		{[]string{"services", "create", "--id", "svc-1", "--name", "Shop", "--plan", "pro", "--quota", "1000", "--rate-bank", "10",
			"--rate-wallet", "5", "--anchor-day", "15", "--expires-at", "2027-01-01T00:00:00Z", "--contact-email", "ops@shop.test", "--permissions", "branch:read"},
			"POST", "/admin/v1/services",
			`{"id":"svc-1","name":"Shop","plan":{"name":"pro","quotaLimit":1000,"rateBank":10,"rateWallet":5,"cycleAnchorDay":15},
			  "expiresAt":"2027-01-01T00:00:00Z","contactEmail":"ops@shop.test","permissions":["branch:read"]}`},
		{[]string{"services", "create", "--name", "Shop", "--plan", "pro", "--quota", "1000", "--rate-bank", "10", "--rate-wallet", "5"},
			"POST", "/admin/v1/services", `{"name":"Shop","plan":{"name":"pro","quotaLimit":1000,"rateBank":10,"rateWallet":5,"cycleAnchorDay":1}}`},
		{[]string{"services", "update", "svc-1", "--name", "New", "--expires-at="}, "PATCH", "/admin/v1/services/svc-1", `{"name":"New","expiresAt":null}`},
		{[]string{"services", "update", "svc-1", "--contact-email", "a@b.test"}, "PATCH", "/admin/v1/services/svc-1", `{"contactEmail":"a@b.test"}`},
		{[]string{"services", "state", "svc-1", "--state", "active", "--reason", "paid"}, "PUT", "/admin/v1/services/svc-1/state", `{"state":"active","reason":"paid"}`},
		{[]string{"services", "state", "svc-1", "--state", "banned", "--user-banned", "--reason", "fraud", "--yes"},
			"PUT", "/admin/v1/services/svc-1/state", `{"state":"banned","userBanned":true,"reason":"fraud"}`},
		{[]string{"services", "plan", "svc-1", "--quota", "500", "--effective", "nextPeriod"}, "PUT", "/admin/v1/services/svc-1/plan", `{"quotaLimit":500,"effective":"nextPeriod"}`},
		{[]string{"services", "plan", "svc-1", "--plan", "max", "--rate-bank", "20", "--rate-wallet", "30", "--anchor-day", "5", "--effective", "now"},
			"PUT", "/admin/v1/services/svc-1/plan", `{"name":"max","rateBank":20,"rateWallet":30,"cycleAnchorDay":5,"effective":"now"}`},
		{[]string{"services", "delete", "svc-1", "--reason", "closed", "--yes"}, "DELETE", "/admin/v1/services/svc-1", `{"reason":"closed"}`},

		{[]string{"keys", "list", "--service", "svc-1", "--branch", "br-main"}, "GET", "/admin/v1/services/svc-1/branches/br-main/keys", ""},
		{[]string{"keys", "rotate", "--service", "svc-1", "--branch", "br-main", "--overlap", "1h"}, "POST", "/admin/v1/services/svc-1/branches/br-main/key/rotate", `{"overlap":"1h"}`},
		{[]string{"keys", "rotate", "svc-1", "br-main"}, "POST", "/admin/v1/services/svc-1/branches/br-main/key/rotate", `{}`},
		{[]string{"keys", "rotate", "svc-1", "br-main", "--force", "--yes"}, "POST", "/admin/v1/services/svc-1/branches/br-main/key/rotate", `{"force":true}`},
		{[]string{"keys", "revoke-previous", "svc-1", "br-main", "--yes"}, "POST", "/admin/v1/services/svc-1/branches/br-main/key/revoke-previous", ""},

		{[]string{"clients", "list", "svc-1"}, "GET", "/admin/v1/services/svc-1/clients", ""},
		{[]string{"clients", "create", "svc-1", "--name", "pos", "--permissions", "branch:read, quota:read"},
			"POST", "/admin/v1/services/svc-1/clients", `{"name":"pos","permissions":["branch:read","quota:read"]}`},
		{[]string{"clients", "update", "svc-1", "cl-1", "--permissions", "branch:read"}, "PATCH", "/admin/v1/services/svc-1/clients/cl-1", `{"permissions":["branch:read"]}`},
		{[]string{"clients", "delete", "svc-1", "cl-1", "--yes"}, "DELETE", "/admin/v1/services/svc-1/clients/cl-1", ""},
		{[]string{"clients", "rotate-secret", "--service", "svc-1", "--client", "cl-1", "--overlap", "0s"}, "POST", "/admin/v1/services/svc-1/clients/cl-1/secret/rotate", `{"overlap":"0s"}`},

		{[]string{"tokens", "list"}, "GET", "/admin/v1/tokens", ""},
		{[]string{"tokens", "create", "--name", "ci", "--scope", "read", "--expires-at", "2027-01-01T00:00:00Z"}, "POST", "/admin/v1/tokens",
			`{"name":"ci","scope":"read","expiresAt":"2027-01-01T00:00:00Z"}`},
		{[]string{"tokens", "delete", "tok-1", "--yes"}, "DELETE", "/admin/v1/tokens/tok-1", ""},

		{[]string{"audit"}, "GET", "/admin/v1/audit", ""},
		{[]string{"audit", "--limit", "10", "--cursor", "c1"}, "GET", "/admin/v1/audit?cursor=c1&limit=10", ""},
		{[]string{"audit", "--service", "svc-1", "--action", "service.plan", "--since", "2026-01-01T00:00:00Z", "--until", "2026-02-01T00:00:00+07:00"},
			"GET", "/admin/v1/audit?action=service.plan&service=svc-1&since=2026-01-01T00%3A00%3A00Z&until=2026-02-01T00%3A00%3A00%2B07%3A00", ""},
		{[]string{"export"}, "GET", "/admin/v1/export", ""},

		{[]string{"b2b", "get", "svc-1", "/branches?limit=5"}, "GET", "/admin/v1/services/svc-1/b2b/branches?limit=5", ""},
		{[]string{"b2b", "post", "svc-1", "/branches", "--body", `{"name":"Sub"}`}, "POST", "/admin/v1/services/svc-1/b2b/branches", `{"name":"Sub"}`},
		{[]string{"b2b", "put", "svc-1", "/branches/br-2/quota", "--body", `{"limitQuota":10}`}, "PUT", "/admin/v1/services/svc-1/b2b/branches/br-2/quota", `{"limitQuota":10}`},
		{[]string{"b2b", "patch", "svc-1", "/branches/br-2", "--body", `{"active":false}`}, "PATCH", "/admin/v1/services/svc-1/b2b/branches/br-2", `{"active":false}`},
		{[]string{"b2b", "delete", "svc-1", "/branches/br-2", "--yes"}, "DELETE", "/admin/v1/services/svc-1/b2b/branches/br-2", ""},
	}
	tested := map[string]bool{}
	for _, c := range cases {
		s.reset()
		code, _, stderr := slipadm(t, s, c.args...)
		if code != 0 {
			t.Errorf("%q: exit %d: %s", c.args, code, stderr)
			continue
		}
		if cmd, _ := find(c.args); cmd != nil {
			tested[cmd.name()] = true
		}
		hits := s.took()
		if len(hits) != 1 {
			t.Errorf("%q: %d requests, want 1", c.args, len(hits))
			continue
		}
		h := hits[0]
		if h.method != c.method || h.uri != c.uri {
			t.Errorf("%q: sent %s %s, want %s %s", c.args, h.method, h.uri, c.method, c.uri)
		}
		if h.auth != "Bearer "+token {
			t.Errorf("%q: Authorization %q", c.args, h.auth)
		}
		switch {
		case c.body == "" && h.body != "":
			t.Errorf("%q: sent body %s, want none", c.args, h.body)
		case c.body != "" && !sameJSON(t, h.body, c.body):
			t.Errorf("%q: sent body %s, want %s", c.args, h.body, c.body)
		case c.body != "" && h.contentType != "application/json":
			t.Errorf("%q: Content-Type %q", c.args, h.contentType)
		}
	}
	for _, c := range commands {
		if !tested[c.name()] {
			t.Errorf("%s: no case sends it", c.name())
		}
	}
}

func sameJSON(t *testing.T, got, want string) bool {
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		return false
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("the test's JSON %s: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}

// TestGlobalFlagsAnywhere: -o, --url and --token work before the noun,
// between noun and verb and after the flags; --url and --token win over the
// environment; -o json prints the answer's data, indented.
func TestGlobalFlagsAnywhere(t *testing.T) {
	s := newStandIn(t)
	want := "{\n  \"id\": \"svc-1\",\n  \"name\": \"Shop\"\n}\n"
	for _, args := range [][]string{
		{"-o", "json", "services", "get", "svc-1"},
		{"services", "-o", "json", "get", "svc-1"},
		{"services", "get", "svc-1", "-o", "json"},
		{"services", "get", "--output=json", "--service", "svc-1"},
		{"--o=json", "services", "get", "svc-1"},
	} {
		code, out, errOut := slipadm(t, s, args...)
		if code != 0 || out != want || errOut != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want stdout %q", args, code, out, errOut, want)
		}
	}

	s.reset()
	env := map[string]string{"SLIP_ADMIN_URL": "http://127.0.0.1:1", "SLIP_ADMIN_TOKEN": "from-the-environment"}
	var out, errOut bytes.Buffer
	if code := run([]string{"--url", s.URL + "/", "services", "list", "--token", token}, func(k string) string { return env[k] }, &out, &errOut); code != 0 {
		t.Fatalf("--url and --token: exit %d: %s", code, errOut.String())
	}
	if h := s.took(); len(h) != 1 || h[0].auth != "Bearer "+token || h[0].uri != "/admin/v1/services" {
		t.Errorf("--url and --token: the stand-in got %+v", h)
	}
}

// TestTableOutput: a list prints as aligned columns (the command's chosen
// ones, nested members by dotted path, "-" for null, lists comma-joined);
// one record prints as "key: value" lines in the server's order.
func TestTableOutput(t *testing.T) {
	s := newStandIn(t)
	s.answer = func(r *http.Request) (int, string) {
		switch r.URL.Path {
		case "/admin/v1/services":
			return 200, `{"success":true,"message":"ok","data":[
				{"id":"svc-demo","name":"Demo shop","state":"active","userBanned":false,"expiresAt":null,"plan":{"name":"pro","quotaLimit":100000},"usage":{"usedQuota":12}},
				{"id":"svc-b","name":"B","state":"banned","userBanned":true,"expiresAt":"2027-01-01T00:00:00Z","plan":{"name":"free","quotaLimit":100},"usage":{"usedQuota":100}}]}`
		case "/admin/v1/services/svc-1/clients":
			return 200, `{"success":true,"message":"ok","data":[{"id":"cl-1","name":"pos","permissions":["branch:read","quota:read"],"signer":null}]}`
		}
		return 200, `{"success":true,"message":"ok","data":{"id":"svc-demo","name":"Demo shop","state":"active","expiresAt":null,
			"plan":{"name":"pro","quotaLimit":100000},"pendingPlan":null,"usage":{"periodStart":"2026-11-01T00:00:00+07:00","usedQuota":12}}}`
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"services", "list"}, "" +
			"id        name       state   userBanned  plan.name  plan.quotaLimit  usage.usedQuota  expiresAt\n" +
			"svc-demo  Demo shop  active  false       pro        100000           12               -\n" +
			"svc-b     B          banned  true        free       100              100              2027-01-01T00:00:00Z\n"},
		{[]string{"clients", "list", "svc-1"}, "" +
			"id    name  permissions             signer\n" +
			"cl-1  pos   branch:read,quota:read  -\n"},
		{[]string{"services", "get", "svc-demo"}, "" +
			"id:                 svc-demo\n" +
			"name:               Demo shop\n" +
			"state:              active\n" +
			"expiresAt:          -\n" +
			"plan.name:          pro\n" +
			"plan.quotaLimit:    100000\n" +
			"pendingPlan:        -\n" +
			"usage.periodStart:  2026-11-01T00:00:00+07:00\n" +
			"usage.usedQuota:    12\n"},
	} {
		code, out, errOut := slipadm(t, s, c.args...)
		if code != 0 || out != c.want {
			t.Errorf("%q: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", c.args, code, errOut, out, c.want)
		}
	}
}

// TestSecretsShownOnce: an answer holding a credential is printed in full
// and stderr says it is shown only now; an answer without one says nothing.
func TestSecretsShownOnce(t *testing.T) {
	s := newStandIn(t)
	s.answer = func(*http.Request) (int, string) {
		return 201, `{"success":true,"message":"created","data":{"id":"svc-1","name":"Shop",
			"mainBranch":{"id":"br-main","key":"key-main-1"},
			"client":{"id":"cl-1","key":"key-client-1","secret":"b2bsec_1","permissions":["branch:read"]}}}`
	}
	create := []string{"services", "create", "--name", "Shop", "--plan", "pro", "--quota", "1", "--rate-bank", "1", "--rate-wallet", "1"}
	for _, format := range []string{"table", "json"} {
		code, out, errOut := slipadm(t, s, append(create, "-o", format)...)
		if code != 0 {
			t.Fatalf("-o %s: exit %d: %s", format, code, errOut)
		}
		for _, secret := range []string{"key-main-1", "key-client-1", "b2bsec_1"} {
			if !strings.Contains(out, secret) {
				t.Errorf("-o %s: stdout lacks %s:\n%s", format, secret, out)
			}
		}
		if !strings.Contains(errOut, "shown only now") {
			t.Errorf("-o %s: stderr %q does not say the credentials are shown only now", format, errOut)
		}
		if format == "json" && !json.Valid([]byte(out)) {
			t.Errorf("-o json: stdout is not JSON:\n%s", out)
		}
	}
	if code, out, _ := slipadm(t, s, append(create, "-o", "table")...); code != 0 || !strings.Contains(out, "client.secret:       b2bsec_1\n") {
		t.Errorf("table: the secret is not a key: value line:\n%s", out)
	}
	if _, _, errOut := slipadm(t, s, "services", "get", "svc-1"); errOut != "" {
		t.Errorf("services get: stderr %q, want nothing", errOut)
	}
}

// TestDestructiveNeedsYes: each destructive command refuses without --yes
// (exit 2, saying so) and sends nothing.
func TestDestructiveNeedsYes(t *testing.T) {
	s := newStandIn(t)
	for _, args := range [][]string{
		{"services", "delete", "svc-1", "--reason", "x"},
		{"services", "state", "svc-1", "--state", "banned", "--reason", "x"},
		{"services", "state", "svc-1", "--state", "active", "--user-banned", "--reason", "x"},
		{"keys", "revoke-previous", "svc-1", "br-main"},
		{"keys", "rotate", "svc-1", "br-main", "--force"},
		{"clients", "delete", "svc-1", "cl-1"},
		{"clients", "rotate-secret", "svc-1", "cl-1", "--force"},
		{"tokens", "delete", "tok-1"},
		{"tokens", "delete", "tok-1", "--yes=false"},
		{"b2b", "delete", "svc-1", "/branches/br-2"},
	} {
		code, out, errOut := slipadm(t, s, args...)
		if code != 2 || out != "" || !strings.Contains(errOut, "refusing "+args[0]+" "+args[1]) || !strings.Contains(errOut, "add --yes") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and a refusal naming --yes", args, code, out, errOut)
		}
	}
	if h := s.took(); len(h) != 0 {
		t.Errorf("refused commands sent %+v", h)
	}
}

// TestErrorAnswer: a refusal prints "error CODE: message" on stderr and
// exits 1, whether in the v2 envelope or a bare status from a proxy.
func TestErrorAnswer(t *testing.T) {
	s := newStandIn(t)
	for _, c := range []struct {
		code       int
		body, want string
	}{
		{409, `{"success":false,"error":{"code":"CONFLICT","message":"an overlap is open until 2026-11-27T10:00:00Z"}}`, "error CONFLICT: an overlap is open until 2026-11-27T10:00:00Z\n"},
		{401, `{"success":false,"error":{"code":"UNAUTHORIZED","message":"unknown or revoked admin token"}}`, "error UNAUTHORIZED: unknown or revoked admin token\n"},
		{200, `{"success":false,"error":{"code":"VALIDATION_ERROR","message":"quotaLimit: below the 12 used"}}`, "error VALIDATION_ERROR: quotaLimit: below the 12 used\n"},
		{502, "<html>\n<b>Bad Gateway</b>\n</html>", "error HTTP_502: <html> <b>Bad Gateway</b> </html>\n"},
	} {
		s.answer = func(*http.Request) (int, string) { return c.code, c.body }
		code, out, errOut := slipadm(t, s, "keys", "rotate", "svc-1", "br-main")
		if code != 1 || out != "" || errOut != c.want {
			t.Errorf("%d %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.code, c.body, code, out, errOut, c.want)
		}
	}
}

// TestTokenNeverShown: the admin token is in no output, even when the
// server echoes it, the server is down, or the command line is wrong (the
// slipadm helper checks every run for it).
func TestTokenNeverShown(t *testing.T) {
	s := newStandIn(t)
	s.answer = func(r *http.Request) (int, string) {
		msg, _ := json.Marshal("bad header " + r.Header.Get("Authorization"))
		return 401, `{"success":false,"error":{"code":"UNAUTHORIZED","message":` + string(msg) + `}}`
	}
	if code, _, errOut := slipadm(t, s, "tokens", "list"); code != 1 || !strings.Contains(errOut, "error UNAUTHORIZED: bad header Bearer [token]") {
		t.Errorf("echoed token: exit %d, stderr %q", code, errOut)
	}
	slipadm(t, s, "tokens", "list", "-h")
	slipadm(t, s, "tokens", "create", "--scope", "admin")
	slipadm(t, s, "tokens", "delete", "tok-1")
	s.Close()
	if code, _, errOut := slipadm(t, s, "tokens", "list"); code != 1 || !strings.HasPrefix(errOut, "slipadm: ") {
		t.Errorf("server down: exit %d, stderr %q", code, errOut)
	}
}

// TestAuditFollowsCursor: audit prints one page and the cursor of the next;
// with --all it follows nextCursor, keeping the filters, to the last page;
// a cursor answered twice stops it.
func TestAuditFollowsCursor(t *testing.T) {
	s := newStandIn(t)
	s.answer = func(r *http.Request) (int, string) {
		if r.URL.Query().Get("cursor") == "c2" {
			return 200, `{"success":true,"message":"ok","data":{"items":[{"id":"a3","action":"service.create","actor":{"type":"seed","id":"seed"}}],"nextCursor":null}}`
		}
		return 200, `{"success":true,"message":"ok","data":{"items":[
			{"id":"a1","at":"2026-11-26T10:00:00Z","action":"service.plan","serviceId":"svc-1","actor":{"type":"admin","id":"tok-1","name":"ops"},"target":{"type":"service","id":"svc-1"},"reason":"upgrade"},
			{"id":"a2","at":"2026-11-26T09:00:00Z","action":"service.state","serviceId":"svc-1","actor":{"type":"admin","id":"tok-1","name":"ops"},"target":{"type":"service","id":"svc-1"},"reason":"paid"}],
			"nextCursor":"c2"}}`
	}
	code, out, errOut := slipadm(t, s, "audit", "--service", "svc-1")
	want := "" +
		"at                    actor.type  actor.name  action         serviceId  target.type  target.id  reason\n" +
		"2026-11-26T10:00:00Z  admin       ops         service.plan   svc-1      service      svc-1      upgrade\n" +
		"2026-11-26T09:00:00Z  admin       ops         service.state  svc-1      service      svc-1      paid\n"
	if code != 0 || out != want || !strings.Contains(errOut, "--cursor c2") {
		t.Errorf("one page: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, errOut, out, want)
	}
	if h := s.took(); len(h) != 1 {
		t.Errorf("one page: %d requests", len(h))
	}

	s.reset()
	code, out, errOut = slipadm(t, s, "audit", "--service", "svc-1", "--all", "-o", "json")
	var got struct {
		Items      []struct{ ID string }
		NextCursor *string
	}
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("--all: exit %d, %v, stderr %q, stdout %s", code, err, errOut, out)
	}
	if len(got.Items) != 3 || got.Items[2].ID != "a3" || got.NextCursor != nil {
		t.Errorf("--all: got %s", out)
	}
	if h := s.took(); len(h) != 2 || h[1].uri != "/admin/v1/audit?cursor=c2&service=svc-1" {
		t.Errorf("--all: requests %+v", h)
	}

	s.answer = func(*http.Request) (int, string) {
		return 200, `{"success":true,"message":"ok","data":{"items":[],"nextCursor":"same"}}`
	}
	if code, _, errOut := slipadm(t, s, "audit", "--all"); code != 1 || !strings.Contains(errOut, "twice") {
		t.Errorf("a repeated cursor: exit %d, stderr %q", code, errOut)
	}
}

// TestUsageErrors: a wrong command line exits 2 with the reason and the
// command's help, and sends nothing.
func TestUsageErrors(t *testing.T) {
	s := newStandIn(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "usage: slipadm <noun> <verb>"},
		{[]string{"servces", "list"}, `unknown command "servces list"`},
		{[]string{"services", "explode"}, `unknown command "services explode"`},
		{[]string{"services", "create", "--name", "x", "--quota", "many"}, `--plan is required; --quota "many": want a whole number; --rate-bank is required; --rate-wallet is required`},
		{[]string{"services", "get"}, "--service is required"},
		{[]string{"services", "get", "svc-1", "svc-2"}, `unexpected argument "svc-2"`},
		{[]string{"services", "get", "--service", ""}, "--service must not be empty"},
		{[]string{"services", "state", "svc-1", "--state", "paused", "--reason", "x"}, `--state "paused": want active or banned`},
		{[]string{"services", "plan", "svc-1", "--quota", "5"}, "--effective is required"},
		{[]string{"services", "update", "svc-1"}, "nothing to change"},
		{[]string{"services", "list", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"services", "list", "-o", "yaml"}, `-o "yaml": want table or json`},
		{[]string{"services", "list", "-o"}, "-o needs a value"},
		{[]string{"tokens", "create", "--name", "ci", "--scope", "admin"}, `--scope "admin": want read or write`},
		{[]string{"b2b", "get", "svc-1", "branches"}, `--path "branches": want a path starting with /`},
		{[]string{"b2b", "post", "svc-1", "/branches", "--body", "{name:"}, "--body: not JSON"},
		// The signer is the service's first client: no flag offers what
		// the server would refuse.
		{[]string{"clients", "create", "svc-1", "--name", "pos", "--signer", "x"}, "flag provided but not defined: -signer"},
		{[]string{"clients", "update", "svc-1", "cl-1", "--signer", "true"}, "flag provided but not defined: -signer"},
	} {
		code, out, errOut := slipadm(t, s, c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "usage: slipadm") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2, %q and the usage", c.args, code, out, errOut, c.want)
		}
		if len(c.args) >= 2 && strings.HasPrefix(c.want, "--") && !strings.Contains(errOut, "usage: slipadm "+c.args[0]+" "+c.args[1]) {
			t.Errorf("%q: stderr lacks the command's own help:\n%s", c.args, errOut)
		}
	}
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"SLIP_ADMIN_URL": s.URL}, "no admin token: set SLIP_ADMIN_TOKEN or --token"},
		{map[string]string{"SLIP_ADMIN_URL": "127.0.0.1:8085", "SLIP_ADMIN_TOKEN": token}, `admin URL "127.0.0.1:8085": want scheme, host and port`},
		{map[string]string{"SLIP_ADMIN_URL": s.URL + "/admin/v1", "SLIP_ADMIN_TOKEN": token}, "want scheme, host and port"},
	} {
		var out, errOut bytes.Buffer
		code := run([]string{"services", "list"}, func(k string) string { return c.env[k] }, &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), c.want) || strings.Contains(errOut.String(), token) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.env, code, errOut.String(), c.want)
		}
	}
	if h := s.took(); len(h) != 0 {
		t.Errorf("usage errors sent %+v", h)
	}
}

// TestHelp: -h prints a command's flags and help lists every command, on
// stdout with exit 0.
func TestHelp(t *testing.T) {
	s := newStandIn(t)
	code, out, _ := slipadm(t, s, "keys", "rotate", "-h")
	for _, want := range []string{"usage: slipadm keys rotate [flags] [service] [branch]", "-overlap duration", "-force", "-yes", "--token TOKEN"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("keys rotate -h: exit %d, stdout lacks %q:\n%s", code, want, out)
		}
	}
	code, out, _ = slipadm(t, s, "help")
	for _, c := range commands {
		if code != 0 || !strings.Contains(out, "  "+c.name()+" ") {
			t.Errorf("help: exit %d, lacks %s", code, c.name())
		}
	}
}

// TestUnprintableNamesEscaped: names stored with control or bidirectional
// formatting characters (a tenant's branch name that would retitle and
// clear the terminal, overrides that reorder text, a C1 CSI) reach the
// operator's terminal escaped, in tables, records, JSON and errors; the
// JSON stays JSON with the same values.
func TestUnprintableNamesEscaped(t *testing.T) {
	s := newStandIn(t)
	const (
		hostile = `\u001b]0;OWNED\u0007\u001b[2J` // as JSON carries it
		bidi    = "invoice\u202eexe.pdf\u2066"    // raw in the JSON text, as encoding/json leaves it
		c1      = "csi\u009b2J"
	)
	s.answer = func(r *http.Request) (int, string) {
		switch r.URL.Path {
		case "/admin/v1/services/svc-1/b2b/branches":
			return 200, `{"success":true,"message":"ok","data":[{"id":"br-1","name":"` + hostile + `"},{"id":"br-2","name":"` + bidi + `"},{"id":"br-3","name":"` + c1 + `"}]}`
		case "/admin/v1/services/svc-1":
			return 200, `{"success":true,"message":"ok","data":{"id":"svc-1","name":"` + bidi + `","contactEmail":"` + hostile + `","plan":{"name":"` + c1 + `"},"odd\u001bkey":1}}`
		}
		return 400, `{"success":false,"error":{"code":"VALIDATION_ERROR","message":"name: \u001b[2J ` + bidi + `"}}`
	}
	unsafe := func(out string) []rune {
		var bad []rune
		for _, r := range out {
			if r != '\n' && !unicode.IsPrint(r) {
				bad = append(bad, r)
			}
		}
		return bad
	}
	for _, c := range []struct {
		args  []string
		shows []string
	}{
		{[]string{"b2b", "get", "svc-1", "/branches"}, []string{`\u001b]0;OWNED\u0007\u001b[2J`, `invoice\u202eexe.pdf\u2066`, `csi\u009b2J`}},
		{[]string{"services", "get", "svc-1"}, []string{`name:`, `invoice\u202eexe.pdf\u2066`, `\u001b]0;OWNED\u0007\u001b[2J`, `plan.name:`, `odd\u001bkey:`}},
		{[]string{"b2b", "get", "svc-1", "/branches", "-o", "json"}, []string{`"name": "\u001b]0;OWNED\u0007\u001b[2J"`, `"name": "invoice\u202eexe.pdf\u2066"`}},
		{[]string{"services", "get", "svc-1", "-o", "json"}, []string{`"name": "invoice\u202eexe.pdf\u2066"`}},
		{[]string{"services", "list"}, []string{`error VALIDATION_ERROR: name: \u001b[2J invoice\u202eexe.pdf\u2066`}},
	} {
		_, out, errOut := slipadm(t, s, c.args...)
		if bad := unsafe(out + errOut); len(bad) > 0 {
			t.Errorf("%q: prints %q raw:\n%s%s", c.args, bad, out, errOut)
		}
		for _, want := range c.shows {
			if !strings.Contains(out+errOut, want) {
				t.Errorf("%q: does not show %s:\n%s%s", c.args, want, out, errOut)
			}
		}
	}
	// -o json is still the server's data.
	_, out, _ := slipadm(t, s, "services", "get", "svc-1", "-o", "json")
	var got struct{ Name, ContactEmail string }
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Name != "invoice\u202eexe.pdf\u2066" || got.ContactEmail != "\u001b]0;OWNED\u0007\u001b[2J" {
		t.Errorf("-o json: %v %+v\n%s", err, got, out)
	}
}
