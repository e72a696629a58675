package openapi_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/server"
	"github.com/slipverify/slipverify/core/slip"
	"github.com/slipverify/slipverify/core/verify"
	"github.com/slipverify/slipverify/edge/openapi"
)

func ptr[T any](v T) *T { return &v }

// bankResult is a full bank verification answer as core builds it.
func bankResult() verify.BankResult {
	return verify.BankResult{
		Remark: "order 1001", IsDuplicate: false, AmountInSlip: 100.5, IsAmountMatched: true,
		IsAccountMatched: ptr(true),
		RawSlip: verify.RawSlip{
			Payload: slip.Bank{BankCode: "004", TransRef: "014242082547BPM04988"}.Encode(),
			Slip: bank.Slip{
				TransRef: "014242082547BPM04988", Date: "2026-11-20T11:35:51+07:00", CountryCode: "TH",
				Amount: bank.Amount{Amount: 100.5, Local: bank.LocalAmount{Amount: 100.5, Currency: "THB"}},
				Fee:    0, Ref1: "INV-1",
				Sender: bank.Party{Bank: bank.BankRef{ID: "004", Name: "Kasikornbank", Short: "KBANK"},
					Account: bank.Account{Name: bank.AccountName{TH: "นาย ทดสอบ ระบบ", EN: "MR. TEST SYSTEM"},
						Bank: bank.AccountBank{Type: "BANKAC", Account: "xxx-x-x1234-x"}}},
				Receiver: bank.Receiver{Bank: bank.BankRef{ID: "014", Name: "Siam Commercial Bank", Short: "SCB"},
					Account: bank.Account{Name: bank.AccountName{TH: "บริษัท ทดสอบสลิป จำกัด", EN: "SLIP TEST CO LTD"},
						Bank: bank.AccountBank{Type: "BANKAC", Account: "xxx-x-x5678-x"}}},
			},
		},
	}
}

func render(t testing.TB, v api.Version, data any) []byte {
	t.Helper()
	b, err := api.RenderOK(v, data)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mutate decodes body, lets change edit it and encodes it again.
func mutate(t testing.TB, body []byte, change func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// at returns the object at a dotted path of m.
func at(m map[string]any, path string) map[string]any {
	for _, k := range strings.Split(path, ".") {
		m = m[k].(map[string]any)
	}
	return m
}

// TestCoreTypesValidate: the answers core's types encode to validate, in
// every variant of their optional and nullable fields.
func TestCoreTypesValidate(t *testing.T) {
	s := load(t)
	full := bankResult()
	bare := bankResult()
	bare.IsAccountMatched = nil
	bare.Remark = ""
	bare.RawSlip.Sender.Bank.Name = ""            // some banks report only id and short
	bare.RawSlip.Receiver.Account.Name.EN = ""    // English name absent
	bare.RawSlip.Receiver.MerchantID = ptr("M-1") // a merchant
	full.MatchedAccount = &verify.MatchedAccount{ID: "acc-1", Bank: verify.MatchedBank{Code: "014", ShortCode: "SCB",
		NameTH: "ธนาคารไทยพาณิชย์", NameEN: "Siam Commercial Bank"}, NameTH: "บริษัท ทดสอบสลิป จำกัด", NameEN: "SLIP TEST CO LTD",
		Type: "JURISTIC", BankNumber: "1234567890"}
	full.AmountInOrder = ptr(100.5)
	full.RawSlip.Receiver.Account.Proxy = &bank.Proxy{Type: bank.ProxyPhone, Account: "xxx-xxx-5678"}
	walletSlip := bank.WalletSlip{TransactionID: "50012345678901", Amount: 50, Date: "2026-11-20T09:12:00+07:00",
		Sender:   bank.WalletParty{Name: "สมชาย ใ***"},
		Receiver: bank.WalletParty{Name: "ร้าน กาแฟ ดอยสูง", Phone: "089-xxx-5678"}}
	wallet := verify.WalletResult{RawSlip: walletSlip, AmountInSlip: 50, AmountInOrder: ptr(50.0), IsAmountMatched: true, Remark: "r"}
	var info server.Info
	info.Application.ID, info.Application.Name, info.Application.State = "svc", "Shop", "active"
	info.Branch.ID, info.Branch.Name, info.Branch.Main, info.Branch.UsedQuota = "br-main", "Main", true, 3
	info.Service.LimitQuota, info.Service.UsedQuota, info.Service.TotalUsedQuota = 1000, 3, 40
	info.RemainingQuota = 997
	info.Period.Start, info.Period.End = "2026-11-01T00:00:00+07:00", "2026-12-01T00:00:00+07:00"
	limited := info
	limited.Branch.LimitQuota = ptr(int64(10))
	me := server.Me{Application: "Shop", UsedQuota: 3, MaxQuota: ptr(int64(1000)), RemainingQuota: ptr(int64(997)), ExpiredAt: ptr("2027-01-01T00:00:00+07:00")}

	quota := server.QuotaRecord{ID: "br-1", Name: "Sub", LimitQuota: ptr(int64(200)), UsedQuota: 15, TotalUsedQuota: 80}
	branch := server.BranchView{ID: "br-1", Name: "Sub", Active: true, IPAllow: []string{"*"}, QuotaRecord: quota}
	hooked := branch
	hooked.WebhookURL, hooked.HasWebhookSecret = ptr("https://shop.example/hook"), true
	created := branch
	created.Key = "6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f"
	account := server.AccountView{ID: "acc-1", BankCode: "004", BankNumber: "1234567890", Type: "PERSONAL", Branches: []string{},
		Active: true}
	account.Name.TH = "ร้าน"

	cases := []struct {
		method, path string
		status       int
		v            api.Version
		data         any
	}{
		{"POST", "/v2/verify/bank", 200, api.V2, full},
		{"POST", "/v2/verify/bank", 200, api.V2, bare},
		{"POST", "/verify", 200, api.V1, bare.RawSlip},
		{"GET", "/verify?payload=x", 200, api.V1, full.RawSlip},
		{"GET", "/api/v1/verify?payload=x", 200, api.V1, full.RawSlip},
		{"POST", "/v2/verify/wallet", 200, api.V2, wallet},
		{"POST", "/v2/verify/truewallet", 200, api.V2, verify.WalletResult{RawSlip: walletSlip}},
		{"POST", "/verify/wallet", 200, api.V1, walletSlip},
		{"POST", "/api/v1/verify/truewallet", 200, api.V1, walletSlip},
		{"GET", "/v2/info", 200, api.V2, info},
		{"GET", "/v2/info", 200, api.V2, limited},
		{"GET", "/me", 200, api.V1, me},
		{"GET", "/api/v1/me", 200, api.V1, server.Me{Application: "Shop"}},
		{"GET", "/banks", 200, api.V2, bank.Banks()},
		{"GET", "/v2/banks", 200, api.V2, bank.Banks()},
		{"POST", "/qr/generate", 200, api.V2, server.QR{Payload: "000201", Image: "iVBORw0KGgo="}},
		{"GET", "/bank-accounts", 200, api.V2, []server.AccountView{account}},
		{"GET", "/v2/bank-accounts", 200, api.V2, []server.AccountView{}},
		{"POST", "/bank-accounts", 201, api.V2, account},
		{"PUT", "/v2/bank-accounts/acc-1/link", 200, api.V2, account},
		{"GET", "/b2b/branches", 200, api.V2, []server.BranchView{branch, hooked}},
		{"POST", "/b2b/branches", 201, api.V2, created},
		{"GET", "/b2b/branches/br-1", 200, api.V2, hooked},
		{"PATCH", "/b2b/branches/br-1", 200, api.V2, branch},
		{"DELETE", "/b2b/branches/br-1", 200, api.V2, map[string]any{"id": "br-1", "deleted": true}},
		{"GET", "/b2b/branches/br-1/quota", 200, api.V2, map[string]any{"branch": quota,
			"service": server.ServiceQuota{LimitQuota: 1000, UsedQuota: 20, TotalUsedQuota: 512}}},
		{"PUT", "/b2b/branches/br-1/quota", 200, api.V2, server.QuotaRecord{ID: "br-1", Name: "Sub"}},
		{"POST", "/b2b/branches/br-1/quota/adjust", 200, api.V2, quota},
		{"POST", "/b2b/branches/br-1/quota/reset", 200, api.V2, quota},
		{"GET", "/b2b/bank-accounts", 200, api.V2, []server.AccountView{account}},
		{"POST", "/b2b/bank-accounts", 201, api.V2, account},
		{"PUT", "/b2b/branches/br-1/bank-accounts/acc-1", 200, api.V2, account},
		{"DELETE", "/b2b/branches/br-1/bank-accounts/acc-1", 200, api.V2, account},
	}
	for _, c := range cases {
		if err := s.ValidateResponse(c.method, c.path, c.status, render(t, c.v, c.data)); err != nil {
			t.Error(err)
		}
	}
}

// TestValidatorFindsDrift: each way a body can differ from its schema is
// reported with the path of the offending value.
func TestValidatorFindsDrift(t *testing.T) {
	s := load(t)
	v2 := render(t, api.V2, bankResult())
	v1 := render(t, api.V1, bankResult().RawSlip)
	dup := func() []byte {
		_, b := api.RenderError(api.V1, &api.Error{Code: api.DuplicateSlip, Data: verify.BankDuplicate{
			Payload: bankResult().RawSlip.Payload, Slip: bankResult().RawSlip.Slip, FirstVerifiedAt: "2026-11-20T10:05:00+07:00"}})
		return b
	}()
	_, notFound := api.RenderError(api.V2, api.E(api.SlipNotFound))
	branches := render(t, api.V2, []server.BranchView{{ID: "br-1", Name: "Sub", IPAllow: []string{"*"}}})
	quota := render(t, api.V2, server.QuotaRecord{ID: "br-1", Name: "Sub", UsedQuota: 1})

	cases := []struct {
		name, method, path string
		status             int
		body               []byte
		want               string // "" when the body is valid
	}{
		{"valid v2 bank", "POST", "/v2/verify/bank", 200, v2, ""},
		{"valid v1 duplicate", "POST", "/verify", 400, dup, ""},
		{"valid 404", "POST", "/v2/verify/bank", 404, notFound, ""},
		{"nullable merchantId", "POST", "/v2/verify/bank", 200, v2, ""},
		{"wrong type", "POST", "/v2/verify/bank", 200, mutate(t, v2, func(m map[string]any) {
			at(m, "data.rawSlip.amount.local")["currency"] = 764
		}), "data.rawSlip.amount.local.currency: want string, got number"},
		{"missing required", "POST", "/v2/verify/bank", 200, mutate(t, v2, func(m map[string]any) {
			delete(at(m, "data.rawSlip"), "transRef")
		}), "data.rawSlip.transRef: missing required property"},
		{"missing receiver merchantId", "POST", "/v2/verify/bank", 200, mutate(t, v2, func(m map[string]any) {
			delete(at(m, "data.rawSlip.receiver"), "merchantId")
		}), "data.rawSlip.receiver.merchantId: missing required property"},
		{"extra property", "POST", "/v2/verify/bank", 200, mutate(t, v2, func(m map[string]any) {
			at(m, "data.rawSlip")["slipId"] = "x"
		}), "data.rawSlip.slipId: property not allowed"},
		{"extra envelope property", "POST", "/v2/verify/bank", 200, mutate(t, v2, func(m map[string]any) {
			m["status"] = 200
		}), "status: property not allowed"},
		{"null where not allowed", "POST", "/v2/verify/bank", 200, mutate(t, v2, func(m map[string]any) {
			at(m, "data.rawSlip.sender.bank")["id"] = nil
		}), "data.rawSlip.sender.bank.id: want string, got null"},
		{"number not null", "POST", "/v2/verify/bank", 200, mutate(t, v2, func(m map[string]any) {
			at(m, "data.rawSlip.receiver")["merchantId"] = 7
		}), "data.rawSlip.receiver.merchantId: want string or null, got number"},
		{"const", "POST", "/v2/verify/bank", 200, mutate(t, v2, func(m map[string]any) {
			m["success"] = false
		}), "success: want true, got false"},
		{"v1 body on a v2 route", "POST", "/v2/verify/bank", 200, v1, "success: missing required property; data.remark: missing required property"},
		{"v2 data on a v1 route", "POST", "/verify", 200, mutate(t, v1, func(m map[string]any) {
			m["data"] = map[string]any{"rawSlip": m["data"]}
		}), "data.payload: missing required property"},
		{"bad enum", "POST", "/v2/verify/bank", 404, mutate(t, notFound, func(m map[string]any) {
			at(m, "error")["code"] = "SLIP_MISSING"
		}), `error.code: "SLIP_MISSING" is not one of`},
		{"code of another status", "POST", "/v2/verify/bank", 404, mutate(t, notFound, func(m map[string]any) {
			at(m, "error")["code"] = "VALIDATION_ERROR"
		}), `error.code: "VALIDATION_ERROR" is not one of ["SLIP_NOT_FOUND", "SLIP_PENDING", "BANK_ACCOUNT_NOT_FOUND"]`},
		{"code of another route", "GET", "/b2b/branches", 403, mutate(t, notFound, func(m map[string]any) {
			at(m, "error")["code"] = "IP_NOT_ALLOWED"
		}), `error.code: "IP_NOT_ALLOWED" is not one of`},
		{"v1 data on another code", "POST", "/verify", 400, mutate(t, dup, func(m map[string]any) {
			m["message"] = "invalid_request"
		}), "data: property not allowed"},
		{"v1 duplicate without data", "POST", "/verify", 400, mutate(t, dup, func(m map[string]any) {
			delete(m, "data")
		}), "data: missing required property"},
		{"v1 status differs from HTTP status", "GET", "/me", 401, []byte(`{"status":403,"message":"unauthorized"}`),
			"status: want 401, got 403"},
		{"quota record where the quota check is due", "GET", "/b2b/branches/br-1/quota", 200, quota,
			"data.branch: missing required property"},
		{"integer", "PUT", "/b2b/branches/br-1/quota", 200, mutate(t, quota, func(m map[string]any) {
			at(m, "data")["usedQuota"] = 1.5
		}), "data.usedQuota: want integer, got number"},
		{"minimum", "PUT", "/b2b/branches/br-1/quota", 200, mutate(t, quota, func(m map[string]any) {
			at(m, "data")["limitQuota"] = -1
		}), "data.limitQuota: want at least 0, got -1"},
		{"array item", "GET", "/b2b/branches", 200, mutate(t, branches, func(m map[string]any) {
			m["data"].([]any)[0].(map[string]any)["ipAllow"] = "*"
		}), "data[0].ipAllow: want array, got string"},
		{"minItems", "GET", "/b2b/branches", 200, []byte(`{"success":true,"data":[]}`), "data: want at least 1 items, got 0"},
		{"undocumented status", "POST", "/v2/verify/bank", 418, v2, "status 418 is not documented"},
		{"no operation", "GET", "/v3/verify", 200, v2, "no operation GET /v3/verify"},
		{"not JSON", "POST", "/v2/verify/bank", 200, []byte(`{"success":true,`), "body is not JSON"},
		{"trailing data", "POST", "/v2/verify/bank", 200, append(append([]byte{}, v2...), "{}"...), "trailing data"},
	}
	for _, c := range cases {
		err := s.ValidateResponse(c.method, c.path, c.status, c.body)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && err == nil:
			t.Errorf("%s: passed, want %q", c.name, c.want)
		case c.want != "" && !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: %v\nwant it to contain %q", c.name, err, c.want)
		}
	}
}

func TestValidationErrorListsEveryProblem(t *testing.T) {
	s := load(t)
	body := mutate(t, render(t, api.V2, bankResult()), func(m map[string]any) {
		d := at(m, "data")
		d["isDuplicate"] = "no"
		delete(d, "remark")
		at(m, "data.rawSlip")["fee"] = nil
	})
	err := s.ValidateResponse("POST", "/v2/verify/bank", 200, body)
	var ve *openapi.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want a *ValidationError", err)
	}
	want := []openapi.Problem{
		{Path: "data.remark", Message: "missing required property"},
		{Path: "data.isDuplicate", Message: "want boolean, got string"},
		{Path: "data.rawSlip.fee", Message: "want number, got null"},
	}
	if len(ve.Problems) != len(want) {
		t.Fatalf("problems %v, want %v", ve.Problems, want)
	}
	for _, w := range want {
		found := false
		for _, p := range ve.Problems {
			found = found || p == w
		}
		if !found {
			t.Errorf("no problem %v in %v", w, ve.Problems)
		}
	}
	if ve.Method != "POST" || ve.Path != "/v2/verify/bank" || ve.Status != 200 {
		t.Errorf("error names %s %s %d", ve.Method, ve.Path, ve.Status)
	}
}

// mini is a document with the given component schemas and no paths.
func mini(schemas string) []byte {
	return []byte(`{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{},"components":{"schemas":` + schemas + `}}`)
}

func TestValidatorKeywords(t *testing.T) {
	s, err := openapi.Parse(mini(`{
		"Pick": {"oneOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]},
		"Overlap": {"oneOf": [{"type": "number"}, {"type": "integer"}]},
		"Any": {"anyOf": [{"const": "a"}, {"type": "boolean"}]},
		"Pos": {"type": "number", "exclusiveMinimum": 0, "maximum": 10},
		"Short": {"type": "string", "minLength": 1, "maxLength": 3, "pattern": "^[a-z]+$"},
		"Num": {"const": 1},
		"Few": {"type": "array", "items": {"$ref": "#/components/schemas/Pos"}, "maxItems": 2},
		"Open": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}},
		"Never": false,
		"All": {"allOf": [{"$ref": "#/components/schemas/Open"}, {"required": ["a"]}]}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		schema, body, want string
	}{
		{"Pick", `"x"`, ""},
		{"Pick", `3`, ""},
		{"Pick", `-1`, "(root): want at least 0, got -1"},
		{"Pick", `true`, "matches no alternative of oneOf"},
		{"Overlap", `2`, "matches alternatives [0 1] of oneOf, want exactly one"},
		{"Overlap", `2.5`, ""},
		{"Any", `"a"`, ""},
		{"Any", `false`, ""},
		{"Any", `"b"`, "matches no alternative of anyOf"},
		{"Pos", `0`, "want more than 0, got 0"},
		{"Pos", `10`, ""},
		{"Pos", `10.01`, "want at most 10, got 10.01"},
		{"Short", `"ab"`, ""},
		{"Short", `""`, "want at least 1 characters"},
		{"Short", `"ก่ข"`, "does not match pattern"},
		{"Short", `"abcd"`, "want at most 3 characters"},
		{"Num", `1.0`, ""},
		{"Num", `1e0`, ""},
		{"Num", `2`, "want 1, got 2"},
		{"Few", `[1, 2]`, ""},
		{"Few", `[1, 2, 3]`, "want at most 2 items"},
		{"Few", `[1, -2]`, "[1]: want more than 0, got -2"},
		{"Open", `{"a": "x", "b": 1}`, ""},
		{"Open", `{"b": "x"}`, "b: want integer, got string"},
		{"Never", `null`, "no value is allowed here"},
		{"All", `{"b": 2}`, "a: missing required property"},
		{"All", `{"a": "x", "b": 2.5}`, "b: want integer, got number"},
	}
	for _, c := range cases {
		err := s.ValidateSchema(c.schema, []byte(c.body))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %s: %v", c.schema, c.body, err)
		case c.want != "" && err == nil:
			t.Errorf("%s %s: passed, want %q", c.schema, c.body, c.want)
		case c.want != "" && !strings.Contains(err.Error(), c.want):
			t.Errorf("%s %s: %v\nwant it to contain %q", c.schema, c.body, err, c.want)
		}
	}
}

// TestParseRefuses: Parse refuses documents the validator could only
// half-check.
func TestParseRefuses(t *testing.T) {
	cases := []struct{ doc, want string }{
		{`{"openapi":"3.0.3","paths":{}}`, `version "3.0.3"`},
		{string(mini(`{"A": {"$ref": "#/components/schemas/B"}}`)), `"#/components/schemas/B" does not resolve`},
		{string(mini(`{"A": {"type": "object", "if": {"required": ["a"]}}}`)), `keyword "if" is not implemented`},
		{string(mini(`{"A": {"type": "strng"}}`)), `type strng is not a type name`},
		{string(mini(`{"A": {"type": "string", "pattern": "("}}`)), `pattern "("`},
		{string(mini(`{"A": {"type": "array", "items": {"uniqueItems": true}}}`)), `keyword "uniqueItems"`},
		{`[1]`, "not a JSON object"},
		{`{`, "document"},
	}
	for _, c := range cases {
		_, err := openapi.Parse([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%s) = %v, want an error containing %q", c.doc, err, c.want)
		}
	}
}
