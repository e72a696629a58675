package server_test

import (
	"encoding/base64"
	"testing"

	"github.com/slipverify/slipverify/core/store"
)

// The shapes the commercial API's clients read, where the spec leaves them
// open: the v1 slip itself, the v1 request names, /api/v1, matchedAccount,
// amountInOrder, proxies, /me and /v2/info.

// withAccounts seeds the service with a juristic account of the listed
// slip's receiver, typed by its name, and a personal one typed at creation.
func withAccounts(r *store.Records) {
	r.Accounts = append(r.Accounts,
		store.BankAccount{ID: "acc-scb", ServiceID: "svc", BankCode: "014", BankNumber: "1234456789",
			Name: store.AccountName{TH: "บริษัท ทดสอบสลิป จำกัด", EN: "SLIP TEST CO LTD"}, Branches: []string{"br-main"}, Active: true},
		store.BankAccount{ID: "acc-kb", ServiceID: "svc", BankCode: "004", BankNumber: "9876543210", Type: "JURISTIC",
			Name: store.AccountName{TH: "นาย สมชาย ใจดี"}, Branches: []string{"br-main"}, Active: true})
}

func TestV1AnswersTheSlip(t *testing.T) {
	c := startCore(t, withAccounts)
	p := bankPayload("004", "LISTEDREF0001")
	for _, k := range []call{
		{method: "GET", path: "/verify?payload=" + p},
		{method: "GET", path: "/api/v1/verify?payload=" + p + "&checkDuplicate=false"},
		{method: "POST", path: "/verify", body: map[string]any{"payload": p}},
		{method: "POST", path: "/api/v1/verify", body: map[string]any{"payload": p}},
	} {
		k.branch = "br-main"
		a := c.do(t, k)
		d, _ := a.body["data"].(map[string]any)
		if a.status != 200 || a.body["status"] != 200.0 || d["payload"] != p || d["transRef"] != "LISTEDREF0001" ||
			get(d, "amount", "amount") != 100.5 || get(d, "receiver", "bank", "id") != "014" ||
			get(d, "receiver", "account", "proxy", "type") != "BILLERID" || get(d, "receiver", "account", "proxy", "account") != "xxxxxxxxx5678" ||
			get(d, "sender", "account", "proxy") != nil || d["rawSlip"] != nil || d["isDuplicate"] != nil {
			t.Errorf("%s %s: %s", k.method, k.path, a.raw)
		}
	}
	// The duplicate under /api/v1 as at the root.
	a := c.do(t, call{method: "POST", path: "/api/v1/verify", branch: "br-main", body: map[string]any{"payload": p, "checkDuplicate": true}})
	a.v1err(t, 400, "duplicate_slip")
	if get(a.body, "data", "receiver", "account", "proxy", "type") != "BILLERID" || get(a.body, "data", "firstVerifiedAt") == nil {
		t.Errorf("duplicate_slip data is not the full slip: %s", a.raw)
	}
	// An unknown path under /api/v1 is a v1 not_found.
	c.do(t, call{method: "GET", path: "/api/v1/nothing", branch: "br-main"}).v1err(t, 404, "not_found")
}

func TestV1RequestNames(t *testing.T) {
	c := startCore(t, nil)
	p := bankPayload("004", "IMAGENAMES01")
	b64 := base64.StdEncoding.EncodeToString(qrPNG(t, p))
	for _, body := range []map[string]any{
		{"image": b64},
		{"image": "data:image/png;base64," + b64, "checkDuplicate": false},
		{"base64": b64},
		{"base64": "data:image/jpeg;base64," + b64},
		{"data": b64},
	} {
		a := c.do(t, call{method: "POST", path: "/api/v1/verify", branch: "br-main", body: body})
		if a.status != 200 || get(a.body, "data", "payload") != p {
			t.Errorf("%.40v: %s", body, a.raw)
		}
	}
	a := c.do(t, call{method: "POST", path: "/verify", branch: "br-main", body: map[string]any{"image": b64, "base64": b64}})
	a.v1err(t, 400, "invalid_request")
	a = c.do(t, call{method: "POST", path: "/verify", branch: "br-main", body: map[string]any{"image": "not base64!"}})
	a.v1err(t, 400, "invalid_image") // an image that cannot be read
	// image is v1's name: v2 takes base64 (with or without the prefix).
	c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main", body: map[string]any{"image": b64}}).v2err(t, 400, "VALIDATION_ERROR")
	d := c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main",
		body: map[string]any{"base64": "data:image/png;base64," + b64}}).data(t)
	if get(d, "rawSlip", "payload") != p {
		t.Errorf("v2 base64 with a data URL prefix: %v", d)
	}
}

func TestV2MatchedAccount(t *testing.T) {
	c := startCore(t, withAccounts)
	p := bankPayload("004", "LISTEDREF0001")
	a := c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main",
		body: map[string]any{"payload": p, "matchAccount": true, "matchAmount": 100.5}})
	d := a.data(t)
	if a.body["message"] == "" || a.body["message"] == nil {
		t.Errorf("v2 envelope without message: %s", a.raw)
	}
	want := map[string]any{"id": "acc-scb", "nameTh": "บริษัท ทดสอบสลิป จำกัด", "nameEn": "SLIP TEST CO LTD",
		"type": "JURISTIC", "bankNumber": "1234456789"}
	for k, v := range want {
		if got := get(d, "matchedAccount", k); got != v {
			t.Errorf("matchedAccount.%s = %v, want %v", k, got, v)
		}
	}
	if get(d, "matchedAccount", "bank", "code") != "014" || get(d, "matchedAccount", "bank", "shortCode") != "SCB" ||
		get(d, "matchedAccount", "bank", "nameEn") != "Siam Commercial Bank" || get(d, "matchedAccount", "bank", "nameTh") != "ธนาคารไทยพาณิชย์" {
		t.Errorf("matchedAccount.bank: %v", get(d, "matchedAccount", "bank"))
	}
	if d["amountInOrder"] != 100.5 || d["isAmountMatched"] != true || d["isAccountMatched"] != true ||
		get(d, "rawSlip", "receiver", "account", "proxy", "type") != "BILLERID" {
		t.Errorf("answer: %v", d)
	}
	// A check that finds no account: null, as without a check.
	d = c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main",
		body: map[string]any{"payload": p, "bankAccountId": "acc-kb"}}).data(t)
	if v, ok := d["matchedAccount"]; !ok || v != nil || d["isAccountMatched"] != false {
		t.Errorf("no account matched: %v", d)
	}
	d = c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main", body: map[string]any{"payload": p}}).data(t)
	if v, ok := d["matchedAccount"]; !ok || v != nil {
		t.Errorf("no check asked: %v", d)
	}
	if _, ok := d["amountInOrder"]; ok {
		t.Errorf("amountInOrder without matchAmount: %v", d)
	}
	// Account types: given at creation, or told by the name.
	list := c.do(t, call{method: "GET", path: "/bank-accounts", branch: "br-main"})
	types := map[string]any{}
	for _, a := range list.body["data"].([]any) {
		types[get(a, "id").(string)] = get(a, "type")
	}
	if types["acc-scb"] != "JURISTIC" || types["acc-kb"] != "JURISTIC" {
		t.Errorf("account types: %v", types)
	}
	for _, tc := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"bankCode": "004", "bankNumber": "1112223334", "name": map[string]any{"th": "นางสาว มาลี ดีใจ"}}, "PERSONAL"},
		{map[string]any{"bankCode": "004", "bankNumber": "1112223335", "name": map[string]any{"th": "ร้าน กาแฟ", "en": "COFFEE CO., LTD."}}, "JURISTIC"},
		{map[string]any{"bankCode": "004", "bankNumber": "1112223336", "name": map[string]any{"th": "บจก. ทดสอบ"}, "type": "PERSONAL"}, "PERSONAL"},
	} {
		a := c.do(t, call{method: "POST", path: "/bank-accounts", branch: "br-main", body: tc.body})
		if a.status != 201 || get(a.body, "data", "type") != tc.want {
			t.Errorf("create %v: want type %s, got %s", tc.body, tc.want, a.raw)
		}
	}
	a = c.do(t, call{method: "POST", path: "/bank-accounts", branch: "br-main",
		body: map[string]any{"bankCode": "004", "bankNumber": "1112223337", "name": map[string]any{"th": "ก"}, "type": "COMPANY"}})
	a.v2err(t, 400, "VALIDATION_ERROR")
}

func TestMeAndInfo(t *testing.T) {
	c := startCore(t, func(r *store.Records) { r.Branches[1].LimitQuota = ptr(int64(5)) })
	c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main", body: map[string]any{"payload": bankPayload("004", "MEREF0001")}}).data(t)
	c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-sub", body: map[string]any{"payload": bankPayload("004", "MEREF0002")}}).data(t)
	for _, tc := range []struct {
		branch    string
		remaining float64
	}{{"br-main", 998}, {"br-sub", 4}} {
		for _, path := range []string{"/me", "/api/v1/me"} {
			a := c.do(t, call{method: "GET", path: path, branch: tc.branch})
			d, _ := a.body["data"].(map[string]any)
			if a.status != 200 || d["application"] != "Shop" || d["usedQuota"] != 2.0 || d["maxQuota"] != 1000.0 ||
				d["remainingQuota"] != tc.remaining || d["currentCredit"] != 0.0 {
				t.Errorf("%s as %s: %s", path, tc.branch, a.raw)
			}
			if v, ok := d["expiredAt"]; !ok || v != nil {
				t.Errorf("%s: expiredAt must be null: %s", path, a.raw)
			}
		}
	}
	d := c.do(t, call{method: "GET", path: "/v2/info", branch: "br-sub"}).data(t)
	checks := map[string]any{
		"application.name": "Shop", "application.autoRenew.expired": false, "application.autoRenew.quota": true,
		"application.quota.used": 2.0, "application.quota.max": 1000.0, "application.quota.remaining": 998.0,
		"application.quota.totalUsed": 2.0, "branch.name": "Sub", "branch.isActive": true, "branch.quota.used": 1.0,
		"branch.quota.totalUsed": 1.0, "account.credit": 0.0, "remainingQuota": 4.0, "branch.limitQuota": 5.0,
	}
	for path, want := range checks {
		if got := get(d, splitDots(path)...); got != want {
			t.Errorf("/v2/info %s = %v, want %v", path, got, want)
		}
	}
	for _, path := range []string{"account.email", "product.name", "application.autoRenew.expiresAt"} {
		keys := splitDots(path)
		parent, _ := get(d, keys[:len(keys)-1]...).(map[string]any)
		if v, ok := parent[keys[len(keys)-1]]; !ok || v != nil {
			t.Errorf("/v2/info %s must be present and null: %v", path, d)
		}
	}
}

func splitDots(p string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '.' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return out
}
