package server_test

import (
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/slip"
)

// tenant is the identity of a /b2b request of svc, as the edge forwards it.
var tenant = []string{api.HeaderB2BClient, "client-0", api.HeaderService, "svc"}

// TestVerifyConditions: the listed slip (100.50 THB, dated 2026-11-20
// 11:35:51 +07:00, verified on 2026-11-22 10:00 +07:00) against date and
// amount conditions, on v2 bank and wallet: the answer says whether they
// hold, and each verification is charged whether they do or not.
func TestVerifyConditions(t *testing.T) {
	c := startCore(t, nil)
	listed := bankPayload("004", "LISTEDREF0001")
	verify := func(branch string, body map[string]any) map[string]any {
		t.Helper()
		body["payload"] = listed
		return c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: branch, body: body}).data(t)
	}
	rows := []struct {
		name        string
		body        map[string]any
		amount      bool
		date        any // nil: isDateMatched absent
		usedAfter   float64
		branch      string
		isDuplicate bool
	}{
		{"no condition", map[string]any{}, false, nil, 1, "br-main", false},
		{"amount range holds", map[string]any{"amountMin": 100, "amountMax": 100.5}, true, nil, 1, "br-main", true},
		{"amount below the minimum", map[string]any{"amountMin": 100.51}, false, nil, 1, "br-main", true},
		{"matchAmount and a range: every one must hold", map[string]any{"matchAmount": 100.5, "amountMax": 100}, false, nil, 1, "br-main", true},
		{"date within the window", map[string]any{"dateFrom": "2026-11-20T11:35:51+07:00", "dateTo": "2026-11-20T05:00:00Z"}, false, true, 1, "br-main", true},
		{"date after dateTo (another offset)", map[string]any{"dateTo": "2026-11-20T04:35:50Z"}, false, false, 1, "br-main", true},
		{"older than maxAge", map[string]any{"maxAge": "24h"}, false, false, 1, "br-main", true},
		{"within maxAge", map[string]any{"maxAge": "72h", "amountMin": 1}, true, true, 1, "br-main", true},
		// Another branch's verification of the slip is charged, the
		// conditions failing or not.
		{"failed conditions are charged", map[string]any{"dateFrom": "2026-11-21T00:00:00+07:00", "matchAmount": 99}, false, false, 1, "br-sub", true},
	}
	for _, row := range rows {
		d := verify(row.branch, row.body)
		if d["isAmountMatched"] != row.amount || d["isDateMatched"] != row.date || d["isDuplicate"] != row.isDuplicate {
			t.Errorf("%s: isAmountMatched %v, isDateMatched %v, isDuplicate %v; want %v, %v, %v",
				row.name, d["isAmountMatched"], d["isDateMatched"], d["isDuplicate"], row.amount, row.date, row.isDuplicate)
		}
		if used, _, _ := c.usage(t, row.branch); used != row.usedAfter {
			t.Errorf("%s: branch usedQuota %v, want %v", row.name, used, row.usedAfter)
		}
	}

	// A new slip failing its conditions is charged, as one meeting them.
	_, _, before := c.usage(t, "br-main")
	d := c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main",
		body: map[string]any{"payload": bankPayload("004", "CONDNEW0001"), "amountMin": 1e9}}).data(t)
	if _, _, after := c.usage(t, "br-main"); d["isAmountMatched"] != false || after != before+1 {
		t.Errorf("a new slip failing amountMin: isAmountMatched %v, service usedQuota %v → %v", d["isAmountMatched"], before, after)
	}

	// The wallet route takes the same conditions.
	w := slip.Wallet{EventType: "P2P", TransactionID: "50012345678901", Date: "20112026"}.Encode()
	d = c.do(t, call{method: "POST", path: "/v2/verify/wallet", branch: "br-main",
		body: map[string]any{"payload": w, "amountMin": 0.01, "dateFrom": "2020-01-01T00:00:00+07:00"}}).data(t)
	if d["isAmountMatched"] != true || d["isDateMatched"] != true {
		t.Errorf("wallet: %v", d)
	}

	for body, field := range map[string]string{
		`{"payload":"` + listed + `","amountMin":5,"amountMax":4}`:                                       "amountMin: must not be above amountMax",
		`{"payload":"` + listed + `","amountMax":1.005}`:                                                 "amountMax: must have at most 2 decimal places",
		`{"payload":"` + listed + `","dateFrom":"2026-11-20"}`:                                           "dateFrom: must be an RFC 3339",
		`{"payload":"` + listed + `","dateFrom":"2026-11-20T00:00:00Z","maxAge":"1h"}`:                   "maxAge: give dateFrom or maxAge, not both",
		`{"payload":"` + listed + `","maxAge":"-1h"}`:                                                    "maxAge: must be a duration",
		`{"payload":"` + listed + `","dateFrom":"2026-11-21T00:00:00Z","dateTo":"2026-11-20T00:00:00Z"}`: "dateFrom: must not be after dateTo",
	} {
		a := c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main", body: []byte(body)})
		if a.v2err(t, 400, "VALIDATION_ERROR"); !strings.Contains(a.raw, field) {
			t.Errorf("%s: %s, want it to name %q", body, a.raw, field)
		}
	}
	// v1 has no conditions.
	c.do(t, call{method: "POST", path: "/verify", branch: "br-main",
		body: map[string]any{"payload": listed, "maxAge": "1h"}}).v1err(t, 400, "invalid_request")
}

// TestBranchConditions: a branch's defaults apply to its v2 verifications
// where the request sets no condition of their kind, and a request's own
// conditions of a kind replace them.
func TestBranchConditions(t *testing.T) {
	c := startCore(t, nil)
	path := "/b2b/branches/br-main/conditions"
	if d := c.do(t, call{method: "GET", path: path, header: tenant}).data(t); d["maxAge"] != nil || d["amountMin"] != nil {
		t.Errorf("a branch without defaults: %v", d)
	}
	put := c.do(t, call{method: "PUT", path: path, header: tenant, body: map[string]any{"maxAge": "24h", "amountMin": 200}}).data(t)
	if put["maxAge"] != "24h0m0s" || put["amountMin"] != 200.0 || put["dateFrom"] != nil {
		t.Errorf("PUT answered %v", put)
	}
	if d := c.do(t, call{method: "GET", path: path, header: tenant}).data(t); d["maxAge"] != "24h0m0s" {
		t.Errorf("GET after PUT: %v", d)
	}
	listed := bankPayload("004", "LISTEDREF0001")
	d := c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main", body: map[string]any{"payload": listed}}).data(t)
	if d["isDateMatched"] != false || d["isAmountMatched"] != false {
		t.Errorf("defaults maxAge 24h, amountMin 200 on a slip of 100.50 two days old: %v", d)
	}
	d = c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main",
		body: map[string]any{"payload": listed, "dateFrom": "2026-11-01T00:00:00+07:00", "matchAmount": 100.5}}).data(t)
	if d["isDateMatched"] != true || d["isAmountMatched"] != true {
		t.Errorf("a request's own conditions replace the defaults of their kind: %v", d)
	}
	// Another branch has none of them.
	d = c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-sub", body: map[string]any{"payload": listed}}).data(t)
	if _, ok := d["isDateMatched"]; ok {
		t.Errorf("br-sub has no defaults: %v", d)
	}
	c.do(t, call{method: "PUT", path: path, header: tenant, body: map[string]any{"maxAge": "soon"}}).v2err(t, 400, "VALIDATION_ERROR")
	c.do(t, call{method: "PUT", path: path, header: tenant, body: map[string]any{"matchAmount": 5}}).v2err(t, 400, "VALIDATION_ERROR")
	c.do(t, call{method: "PUT", path: "/b2b/branches/br-exp/conditions", header: tenant, body: map[string]any{}}).v2err(t, 404, "NOT_FOUND")
	if d := c.do(t, call{method: "PUT", path: path, header: tenant, body: map[string]any{}}).data(t); d["maxAge"] != nil {
		t.Errorf("PUT {} keeps %v", d)
	}
	d = c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main", body: map[string]any{"payload": listed}}).data(t)
	if _, ok := d["isDateMatched"]; ok || d["isAmountMatched"] != false {
		t.Errorf("defaults removed: %v", d)
	}
}

// TestPendingRetryAfter: SLIP_PENDING tells the client how long to wait,
// in the body and in Retry-After, in both versions.
func TestPendingRetryAfter(t *testing.T) {
	c := startCore(t, nil)
	pending := bankPayload("006", "PENDINGREF01")
	for _, k := range []call{
		{method: "POST", path: "/v2/verify/bank", branch: "br-main", body: map[string]any{"payload": pending}},
		{method: "POST", path: "/verify", branch: "br-main", body: map[string]any{"payload": pending}},
	} {
		req, _ := http.NewRequest(k.method, c.url+k.path, strings.NewReader(`{"payload":"`+pending+`"}`))
		req.Header.Set(api.HeaderEdgeToken, edgeToken)
		req.Header.Set(api.HeaderService, "svc")
		req.Header.Set(api.HeaderBranch, k.branch)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		want := `{"success":false,"error":{"code":"SLIP_PENDING","message":"Slip is too recent to verify; try again in a few minutes","retryAfter":30}}`
		if k.path == "/verify" {
			want = `{"status":404,"message":"slip_pending","retryAfter":30}`
		}
		if res.StatusCode != 404 || string(raw) != want || res.Header.Get("Retry-After") != "30" {
			t.Errorf("%s: %d %s, Retry-After %q; want 404 %s, Retry-After 30", k.path, res.StatusCode, raw, res.Header.Get("Retry-After"), want)
		}
	}
}

// TestReread: a slip the service verified is read again by its reference,
// from any of its branches, free; one it never verified is SLIP_NOT_FOUND.
func TestReread(t *testing.T) {
	c := startCore(t, nil)
	path := "/v2/slips/LISTEDREF0001"
	c.do(t, call{method: "GET", path: path, branch: "br-main"}).v2err(t, 404, "SLIP_NOT_FOUND")
	c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-sub", body: map[string]any{"payload": bankPayload("004", "LISTEDREF0001")}}).data(t)
	c.clock.Advance(time.Hour)
	for range 3 {
		d := c.do(t, call{method: "GET", path: path, branch: "br-main"}).data(t)
		if d["branchId"] != "br-sub" || d["firstVerifiedAt"] != "2026-11-22T10:00:00+07:00" || d["amountInSlip"] != 100.5 ||
			d["kind"] != "bank" || get(d, "rawSlip", "transRef") != "LISTEDREF0001" || get(d, "rawSlip", "ref1") != "INV-1" {
			t.Errorf("re-read: %v", d)
		}
	}
	if used, _, svc := c.usage(t, "br-main"); used != 0 || svc != 1 {
		t.Errorf("re-reads charged: br-main used %v, service used %v; want 0 and 1", used, svc)
	}
	w := slip.Wallet{EventType: "P2P", TransactionID: "50012345678901", Date: "20112026"}.Encode()
	c.do(t, call{method: "POST", path: "/v2/verify/wallet", branch: "br-main", body: map[string]any{"payload": w}}).data(t)
	if d := c.do(t, call{method: "GET", path: "/v2/slips/50012345678901", branch: "br-main"}).data(t); d["kind"] != "wallet" || d["amountInSlip"] == nil {
		t.Errorf("wallet re-read: %v", d)
	}
	c.do(t, call{method: "GET", path: "/v2/slips/NOTVERIFIED1", branch: "br-main"}).v2err(t, 404, "SLIP_NOT_FOUND")
	c.do(t, call{method: "GET", path: "/v2/slips/not-a-ref", branch: "br-main"}).v2err(t, 404, "SLIP_NOT_FOUND")
	// Another service never verified it.
	c.do(t, call{method: "GET", path: path, branch: "br-user", service: "svc-user"}).v2err(t, 404, "SLIP_NOT_FOUND")
}

// TestHistory: a branch lists its verifications newest first, filtered,
// a page at a time, and as CSV; /b2b lists every branch's.
func TestHistory(t *testing.T) {
	c := startCore(t, nil)
	verify := func(branch, ref, remark string, extra ...any) {
		t.Helper()
		body := map[string]any{"payload": bankPayload("004", ref), "remark": remark}
		for i := 0; i+1 < len(extra); i += 2 {
			body[extra[i].(string)] = extra[i+1]
		}
		c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: branch, body: body}).data(t)
		c.clock.Advance(time.Second)
	}
	verify("br-main", "LISTEDREF0001", "order 1", "matchAmount", 100.5, "maxAge", "72h")
	verify("br-sub", "HISTREF00002", "sub order")
	verify("br-main", "HISTREF00003", "order 3")
	verify("br-main", "LISTEDREF0001", "again")  // a self-duplicate: free, not listed again
	verify("br-sub", "LISTEDREF0001", "sub dup") // another branch's duplicate: charged, listed
	verify("br-main", "HISTREF00004", "=cmd()")

	list := func(path string, header ...string) map[string]any {
		t.Helper()
		return c.do(t, call{method: "GET", path: path, branch: "br-main", header: header}).data(t)
	}
	refs := func(d map[string]any) string {
		var out []string
		for _, it := range d["items"].([]any) {
			out = append(out, it.(map[string]any)["transRef"].(string))
		}
		return strings.Join(out, ",")
	}
	d := list("/v2/verifications")
	if got := refs(d); got != "HISTREF00004,HISTREF00003,LISTEDREF0001" || d["nextCursor"] != nil {
		t.Errorf("br-main's history: %s (next %v)", got, d["nextCursor"])
	}
	first := d["items"].([]any)[2].(map[string]any)
	want := map[string]any{"verifiedAt": "2026-11-22T10:00:00.000+07:00", "branchId": "br-main", "kind": "bank", "amount": 100.5,
		"sendingBank": "004", "receivingBank": "014", "isDuplicate": false, "isAmountMatched": true, "isDateMatched": true,
		"remark": "order 1", "mode": "sync", "jobId": nil}
	for k, v := range want {
		if first[k] != v {
			t.Errorf("item %s = %v, want %v", k, first[k], v)
		}
	}
	for q, want := range map[string]string{
		"?limit=1":                           "HISTREF00004",
		"?remark=order+3":                    "HISTREF00003",
		"?isDuplicate=false&amountMax=100.5": "LISTEDREF0001",
		"?amountMax=100":                     "",
		"?from=2026-11-22T10:00:01%2B07:00&to=2026-11-22T10:00:03%2B07:00": "HISTREF00003",
	} {
		if got := refs(list("/v2/verifications" + q)); got != want {
			t.Errorf("%s: %s, want %s", q, got, want)
		}
	}
	// Pages follow each other to the end.
	var pages []string
	next := ""
	for {
		d := list("/v2/verifications?limit=2" + next)
		pages = append(pages, refs(d))
		cur, _ := d["nextCursor"].(string)
		if cur == "" {
			break
		}
		next = "&cursor=" + url.QueryEscape(cur)
	}
	if got := strings.Join(pages, "|"); got != "HISTREF00004,HISTREF00003|LISTEDREF0001" {
		t.Errorf("pages: %s", got)
	}
	// /b2b lists every branch, newest first, or the one named.
	b2b := func(q string) string {
		return refs(c.do(t, call{method: "GET", path: "/b2b/verifications" + q, header: tenant}).data(t))
	}
	if got := b2b(""); got != "HISTREF00004,LISTEDREF0001,HISTREF00003,HISTREF00002,LISTEDREF0001" {
		t.Errorf("the service's history: %s", got)
	}
	if got := b2b("?branchId=br-sub&isDuplicate=true"); got != "LISTEDREF0001" {
		t.Errorf("br-sub's duplicates: %s", got)
	}
	var merged []string
	next = ""
	for range 10 {
		d := c.do(t, call{method: "GET", path: "/b2b/verifications?limit=2" + next, header: tenant}).data(t)
		merged = append(merged, refs(d))
		cur, _ := d["nextCursor"].(string)
		if cur == "" {
			break
		}
		next = "&cursor=" + url.QueryEscape(cur)
	}
	if got := strings.Join(merged, "|"); got != "HISTREF00004,LISTEDREF0001|HISTREF00003,HISTREF00002|LISTEDREF0001" {
		t.Errorf("the service's pages: %s", got)
	}
	c.do(t, call{method: "GET", path: "/b2b/verifications?branchId=br-exp", header: tenant}).v2err(t, 404, "NOT_FOUND")
	for _, q := range []string{"?limit=0", "?limit=1001", "?cursor=xyz", "?from=yesterday", "?isDuplicate=maybe", "?branchId=br-sub", "?page=2"} {
		c.do(t, call{method: "GET", path: "/v2/verifications" + q, branch: "br-main"}).v2err(t, 400, "VALIDATION_ERROR")
	}

	// CSV: the same page, with the next page's cursor in a header.
	req, _ := http.NewRequest("GET", c.url+"/v2/verifications?limit=2", nil)
	for k, v := range map[string]string{api.HeaderEdgeToken: edgeToken, api.HeaderService: "svc", api.HeaderBranch: "br-main", "Accept": "text/csv"} {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	rows, err := csv.NewReader(res.Body).ReadAll()
	if err != nil || res.Header.Get("Content-Type") != "text/csv; charset=utf-8" || res.Header.Get("X-Next-Cursor") == "" || len(rows) != 3 {
		t.Fatalf("CSV: %v %q next %q: %v", err, res.Header.Get("Content-Type"), res.Header.Get("X-Next-Cursor"), rows)
	}
	if got := fmt.Sprintln(rows[0][:5], rows[1][3], rows[1][10], rows[2][3], strings.Index(rows[2][4], ".") == len(rows[2][4])-3); got != "[verifiedAt branchId kind transRef amount] HISTREF00004 '=cmd() HISTREF00003 true\n" {
		t.Errorf("CSV rows: %s", got)
	}
}
