package openapi_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/verify"
	"github.com/slipverify/slipverify/edge/gateway"
	"github.com/slipverify/slipverify/edge/openapi"
)

func load(t testing.TB) *openapi.Spec {
	t.Helper()
	s, err := openapi.Load()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// raw is the document as plain JSON.
func raw(t testing.TB) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(openapi.Document(), &doc); err != nil {
		t.Fatalf("document is not JSON: %v", err)
	}
	return doc
}

func TestDocumentIsOpenAPI31(t *testing.T) {
	doc := raw(t)
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Fatalf("openapi = %q, want 3.1.x", v)
	}
	for _, k := range []string{"info", "paths", "components"} {
		if _, ok := doc[k].(map[string]any); !ok {
			t.Errorf("document has no %s object", k)
		}
	}
	load(t)
}

// TestRefsResolve walks the document on its own, independently of Parse:
// every $ref is a local JSON pointer to something that exists.
func TestRefsResolve(t *testing.T) {
	doc := raw(t)
	n := 0
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"]; ok {
				n++
				s, _ := ref.(string)
				if _, err := pointer(doc, s); err != nil {
					t.Errorf("%s: $ref %q: %v", at, s, err)
				}
			}
			for k, e := range x {
				walk(e, at+"/"+k)
			}
		case []any:
			for i, e := range x {
				walk(e, at+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(doc, "#")
	if n < 100 {
		t.Errorf("only %d $refs: components are not used", n)
	}
}

func pointer(doc map[string]any, ref string) (any, error) {
	frag, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("not a local pointer")
	}
	var cur any = doc
	for _, tok := range strings.Split(frag, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%q: parent is not an object", tok)
		}
		if cur, ok = m[tok]; !ok {
			return nil, fmt.Errorf("%q: no such member", tok)
		}
	}
	return cur, nil
}

func TestOperationIDsUnique(t *testing.T) {
	s := load(t)
	seen := map[string]string{}
	for _, e := range s.Paths() {
		op, _ := s.Operation(e.Method, e.Path)
		if op.OperationID == "" || op.Summary == "" {
			t.Errorf("%s %s: operationId %q, summary %q", e.Method, e.Path, op.OperationID, op.Summary)
		}
		if prev, dup := seen[op.OperationID]; dup {
			t.Errorf("operationId %s used by %s and %s %s", op.OperationID, prev, e.Method, e.Path)
		}
		seen[op.OperationID] = e.Method + " " + e.Path
	}
}

// served are the routes the edge answers outside gateway.Routes.
var served = []openapi.Endpoint{{Method: "GET", Path: "/openapi.json"}}

// TestEveryRouteDocumented: the document and the edge's routing table name
// the same operations, with the same authentication, rate budget,
// permission and version.
func TestEveryRouteDocumented(t *testing.T) {
	s := load(t)
	documented := map[openapi.Endpoint]bool{}
	for _, e := range s.Paths() {
		documented[e] = true
	}
	routes := map[openapi.Endpoint]bool{}
	for _, rt := range gateway.Routes {
		e := openapi.Endpoint{Method: rt.Method, Path: rt.Path}
		routes[e] = true
		if !documented[e] {
			t.Errorf("route %s %s has no operation in openapi.json", rt.Method, rt.Path)
			continue
		}
		op, _ := s.Operation(rt.Method, rt.Path)
		if op.Path != rt.Path {
			t.Errorf("%s %s resolves to the operation of %s", rt.Method, rt.Path, op.Path)
		}
		checkRoute(t, rt, op)
	}
	for _, e := range served {
		routes[e] = true
		if !documented[e] {
			t.Errorf("%s %s has no operation in openapi.json", e.Method, e.Path)
		}
	}
	for e := range documented {
		if !routes[e] {
			t.Errorf("openapi.json documents %s %s, which is not a route of the edge", e.Method, e.Path)
		}
	}
}

var (
	bearerOnly = [][]string{{"bearerAuth"}}
	signedOnly = [][]string{{"signedKey", "signedNonce", "signedSignature", "signedTimestamp"}}
	either     = append(slices.Clone(bearerOnly), signedOnly...)
	rateHeader = []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}
)

func checkRoute(t *testing.T, rt gateway.Route, op openapi.Op) {
	t.Helper()
	name := rt.Method + " " + rt.Path
	want := map[gateway.Auth][][]string{gateway.AuthNone: nil, gateway.AuthBearer: bearerOnly,
		gateway.AuthBranch: either, gateway.AuthClient: signedOnly}[rt.Auth]
	if !slices.EqualFunc(op.Security, want, slices.Equal) {
		t.Errorf("%s: security %v, want %v", name, op.Security, want)
	}
	budget := map[gateway.Budget]string{gateway.Unlimited: "", gateway.BankBudget: "bank", gateway.WalletBudget: "wallet"}[rt.Budget]
	if op.Budget != budget {
		t.Errorf("%s: x-rate-budget %q, want %q", name, op.Budget, budget)
	}
	if op.Permission != rt.Permission {
		t.Errorf("%s: x-permission %q, want %q", name, op.Permission, rt.Permission)
	}
	if rt.Auth != gateway.AuthNone && op.Version != rt.Version.String() {
		t.Errorf("%s: x-api-version %q, want %s", name, op.Version, rt.Version)
	}
	var ok string
	for status, r := range op.Responses {
		if status[0] == '2' {
			ok = status
		}
		hasRate := !slices.ContainsFunc(rateHeader, func(h string) bool { return !slices.Contains(r.Headers, h) })
		others := slices.DeleteFunc(slices.Clone(r.Headers), func(h string) bool { return h == "X-Request-Id" })
		switch {
		case !slices.Contains(r.Headers, "X-Request-Id"):
			t.Errorf("%s %s: no X-Request-Id, which every answer carries", name, status)
		case rt.Budget == gateway.Unlimited && len(others) > 0 && (status != "429" || !slices.Equal(others, []string{"Retry-After"})):
			// no rate headers; a 429 (a full nonce store, the async
			// routes' bound on unfinished jobs) carries Retry-After alone
			t.Errorf("%s %s: unlimited route documents headers %v", name, status, others)
		case rt.Budget != gateway.Unlimited && (status[0] == '2' || status == "429") && !hasRate:
			t.Errorf("%s %s: limited route lacks rate headers: %v", name, status, r.Headers)
		case rt.Budget != gateway.Unlimited && status == "429" && !slices.Contains(r.Headers, "Retry-After"):
			t.Errorf("%s 429: no Retry-After", name)
		}
	}
	if ok == "" {
		t.Errorf("%s: no success response", name)
	}
	if rt.Auth != gateway.AuthNone {
		for _, status := range []string{"401", "500"} {
			if _, found := op.Responses[status]; !found {
				t.Errorf("%s: no %s response", name, status)
			}
		}
	}
	if rt.Permission != "" && !slices.Contains(op.Responses["403"].Codes, "PERMISSION_DENIED") {
		t.Errorf("%s: 403 lacks PERMISSION_DENIED", name)
	}
	if rt.Budget != gateway.Unlimited {
		code := map[api.Version]string{api.V1: "rate_limit_exceeded", api.V2: "RATE_LIMIT_EXCEEDED"}[rt.Version]
		if !slices.Contains(op.Responses["429"].Codes, code) {
			t.Errorf("%s: 429 lacks %s", name, code)
		}
	}
}

// TestErrorCodesMatchCatalog: every code a response documents is a code of
// the error catalog with that HTTP status in the operation's version, and
// the body the catalog renders for it validates.
func TestErrorCodesMatchCatalog(t *testing.T) {
	s := load(t)
	for _, e := range s.Paths() {
		op, _ := s.Operation(e.Method, e.Path)
		v := api.V2
		if op.Version == "v1" {
			v = api.V1
		}
		for key, r := range op.Responses {
			status, err := strconv.Atoi(key)
			if err != nil {
				t.Errorf("%s %s: response %q is not a status", e.Method, e.Path, key)
				continue
			}
			if status >= 400 && len(r.Codes) == 0 {
				t.Errorf("%s %s %d: no error codes documented", e.Method, e.Path, status)
			}
			for _, code := range r.Codes {
				row, ok := catalogRow(v, code, status)
				if !ok && !(op.Path == "/health" || op.Path == "/v2/health") {
					t.Errorf("%s %s %d: %s has no catalog row with that status in %s", e.Method, e.Path, status, code, v)
					continue
				}
				if !ok {
					continue // health answers API_SERVER_ERROR with 503: checked by TestHealthBodies
				}
				ae := api.E(row.Code)
				if row.Code == api.DuplicateSlip {
					ae.Data = verify.WalletDuplicate{WalletSlip: bank.WalletSlip{TransactionID: "50012345678901", Amount: 1,
						Date: "2026-11-20T10:00:00+07:00", Sender: bank.WalletParty{Name: "a"}, Receiver: bank.WalletParty{Name: "b"}},
						FirstVerifiedAt: "2026-11-20T10:05:00+07:00"}
				}
				st, body := api.RenderError(v, ae)
				if err := s.ValidateResponse(e.Method, e.Path, st, body); err != nil {
					t.Errorf("catalog body of %s: %v", code, err)
				}
			}
		}
	}
}

func catalogRow(v api.Version, code string, status int) (api.Row, bool) {
	for _, r := range api.Rows() {
		if v == api.V2 && r.V2Code == code && r.V2Status == status || v == api.V1 && r.V1Code == code && r.V1Status == status {
			return r, true
		}
	}
	return api.Row{}, false
}

// TestCodeEnumsMatchCatalog: the shared code enums list exactly the
// catalog's codes.
func TestCodeEnumsMatchCatalog(t *testing.T) {
	doc := raw(t)
	var v1, v2 []string
	for _, r := range api.Rows() {
		if r.V2Code != "" {
			v2 = append(v2, r.V2Code)
		}
		v1 = append(v1, r.V1Code)
	}
	check := func(schema string, want []string) {
		got := enumOf(t, doc, schema)
		slices.Sort(want)
		want = slices.Compact(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s enum %v, catalog %v", schema, got, want)
		}
	}
	check("V2ErrorCode", v2)
	check("V1ErrorCode", v1)
	var codes []string
	for _, b := range bank.Banks() {
		codes = append(codes, b.Code)
	}
	check("BankCode", codes)
	check("ExtraVerify", []string{bank.ExtraVerifyAccountLast4, bank.ExtraVerifyReceiverName})
}

func enumOf(t *testing.T, doc map[string]any, schema string) []string {
	v, err := pointer(doc, "#/components/schemas/"+schema+"/enum")
	if err != nil {
		t.Fatalf("%s: %v", schema, err)
	}
	var out []string
	for _, e := range v.([]any) {
		out = append(out, e.(string))
	}
	slices.Sort(out)
	return out
}

// TestExamplesValidate: every example of a response validates against its
// own schema.
func TestExamplesValidate(t *testing.T) {
	s := load(t)
	doc := raw(t)
	n := 0
	for path, item := range doc["paths"].(map[string]any) {
		for method, o := range item.(map[string]any) {
			resps, _ := o.(map[string]any)["responses"].(map[string]any)
			for status, r := range resps {
				rm := r.(map[string]any)
				if ref, ok := rm["$ref"].(string); ok {
					x, _ := pointer(doc, ref)
					rm = x.(map[string]any)
				}
				content, _ := rm["content"].(map[string]any)
				mt, _ := content["application/json"].(map[string]any)
				ex, ok := mt["example"]
				if !ok {
					continue
				}
				n++
				body, _ := json.Marshal(ex)
				code, _ := strconv.Atoi(status)
				if err := s.ValidateResponse(method, path, code, body); err != nil {
					t.Errorf("example: %v", err)
				}
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d examples", n)
	}
}

func TestOperationMatching(t *testing.T) {
	s := load(t)
	cases := []struct {
		method, path, want string
		params             map[string]string
	}{
		{"GET", "/b2b/branches/br-1/quota", "/b2b/branches/{branch}/quota", map[string]string{"branch": "br-1"}},
		{"post", "/b2b/branches/br-1/quota/reset", "/b2b/branches/{branch}/quota/reset", map[string]string{"branch": "br-1"}},
		{"DELETE", "/b2b/branches/br-1/bank-accounts/acc-9", "/b2b/branches/{branch}/bank-accounts/{account}",
			map[string]string{"branch": "br-1", "account": "acc-9"}},
		{"GET", "/b2b/branches", "/b2b/branches", nil},
		{"GET", "/verify?payload=abc", "/verify", nil},
		{"PUT", "/v2/bank-accounts/acc-1/link", "/v2/bank-accounts/{account}/link", map[string]string{"account": "acc-1"}},
		{"GET", "/openapi.json", "/openapi.json", nil},
	}
	for _, c := range cases {
		op, ok := s.Operation(c.method, c.path)
		if !ok || op.Path != c.want || !mapsEqual(op.Params, c.params) {
			t.Errorf("Operation(%s %s) = %q %v %v, want %q %v", c.method, c.path, op.Path, op.Params, ok, c.want, c.params)
		}
	}
	for _, c := range [][2]string{
		{"GET", "/b2b/branches/"}, {"GET", "/b2b/branches//quota"}, {"PUT", "/b2b/branches"},
		{"GET", "/v2/verify/bank"}, {"GET", "/nothing"}, {"GET", "/b2b/branches/a/b/c/d"},
	} {
		if op, ok := s.Operation(c[0], c[1]); ok {
			t.Errorf("Operation(%s %s) matched %s", c[0], c[1], op.Path)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestHealthBodies: the bodies the edge answers /health with (copied from
// edge/gateway/forward.go, which keeps them unexported).
func TestHealthBodies(t *testing.T) {
	s := load(t)
	for _, path := range []string{"/health", "/v2/health"} {
		for _, c := range []struct {
			status int
			body   string
		}{
			{200, `{"success":true,"message":"success","data":{"status":"ok","tier":"edge","core":"ok"}}`},
			{503, `{"success":false,"error":{"code":"API_SERVER_ERROR","message":"core is unreachable"}}`},
			{503, `{"success":false,"error":{"code":"API_SERVER_ERROR","message":"edge is shutting down"}}`},
		} {
			if err := s.ValidateResponse("GET", path, c.status, []byte(c.body)); err != nil {
				t.Error(err)
			}
		}
	}
}

// TestServesItself: the document validates as the answer of GET
// /openapi.json.
func TestServesItself(t *testing.T) {
	if err := load(t).ValidateResponse("GET", "/openapi.json", 200, openapi.Document()); err != nil {
		t.Fatal(err)
	}
}
