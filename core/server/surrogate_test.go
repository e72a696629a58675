package server_test

import (
	"testing"

	"github.com/slipverify/slipverify/core/api"
)

// TestLoneSurrogateRefused: a JSON body whose strings escape a UTF-16
// surrogate that is not half of a pair (which no UTF-8 text holds, and
// encoding/json would read as U+FFFD) is refused as a body that is not UTF-8
// is, on every route that reads a JSON body from a client; an escaped pair,
// and text that only looks like an escape, are taken.
func TestLoneSurrogateRefused(t *testing.T) {
	c, banked := startAsyncCore(t), startCore(t, nil) // banked answers verifications
	listed := bankPayload("004", "LISTEDREF0001")
	refused := func(t *testing.T, c *core, k call) {
		t.Helper()
		k.contentType = "application/json"
		a := c.do(t, k)
		if k.branch != "" && (k.path == "/verify" || k.path == "/verify/wallet") {
			a.v1err(t, 400, "invalid_request")
			return
		}
		a.v2err(t, 400, "VALIDATION_ERROR")
		if msg := get(a.body, "error", "message"); msg != "body: must be UTF-8 text" {
			t.Errorf("%s %s: message %q", k.method, k.path, msg)
		}
	}
	t.Run("kinds", func(t *testing.T) {
		for _, s := range []string{`\ud800`, `\udc00`, `\uDBFF`, `a\ud800b`, `\ud800\u0041`, `\ud800\n`, `\ud800\\`,
			`\ud800\ud800`, `\udc00\ud800`, `\ud83d\ude00\ud800`, `\ud800\"`} {
			refused(t, banked, call{method: "POST", path: "/v2/verify/bank", branch: "br-main",
				body: []byte(`{"payload":"` + listed + `","remark":"` + s + `"}`)})
		}
		refused(t, banked, call{method: "POST", path: "/v2/verify/bank", branch: "br-main", body: []byte(`{"payload":"` + listed + `","\ud800":1}`)})
	})
	t.Run("routes", func(t *testing.T) {
		b2b := []string{api.HeaderB2BClient, "client-0", api.HeaderService, "svc"}
		for _, k := range []call{
			{method: "POST", path: "/verify", branch: "br-main", body: `{"payload":"` + listed + `\ud800"}`},
			{method: "POST", path: "/verify/wallet", branch: "br-main", body: `{"payload":"\udc00"}`},
			{method: "POST", path: "/v2/verify/bank", branch: "br-main", body: `{"payload":"` + listed + `","remark":"\ud800"}`},
			{method: "POST", path: "/v2/verify/wallet", branch: "br-main", body: `{"payload":"x","remark":"\ud800"}`},
			{method: "POST", path: "/v2/verify/bank/async", branch: "br-main", body: `{"payload":"` + listed + `","callbackUrl":"https://127.0.0.1/cb\ud800"}`},
			{method: "POST", path: "/v2/verify/bank/async/batch", branch: "br-main",
				body: `{"callbackUrl":"https://127.0.0.1/cb","items":[{"payload":"` + listed + `","remark":"\udc00"}]}`},
			{method: "POST", path: "/b2b/branches", header: b2b, body: `{"name":"Kiosk \ud800"}`},
			{method: "PATCH", path: "/b2b/branches/br-sub", header: b2b, body: `{"name":"Sub \ud800"}`},
			{method: "PUT", path: "/b2b/branches/br-sub/quota", header: b2b, body: `{"limitQuota":5,"\ud800":1}`},
			{method: "POST", path: "/b2b/branches/br-sub/quota/adjust", header: b2b, body: `{"amount":1,"\udc00":1}`},
			{method: "POST", path: "/b2b/bank-accounts", header: b2b, body: `{"bankCode":"014","bankNumber":"1234567890","name":{"th":"\ud800"}}`},
			{method: "POST", path: "/bank-accounts", branch: "br-main", body: `{"bankCode":"014","bankNumber":"1234567890","name":{"th":"ก\ud800"}}`},
			{method: "POST", path: "/v2/bank-accounts", branch: "br-main", body: `{"bankCode":"014","bankNumber":"1234567890","name":{"th":"ก\ud800"}}`},
			{method: "POST", path: "/qr/generate", body: `{"type":"promptpay","target":"0812345678\ud800"}`},
			{method: "POST", path: "/v2/qr/generate", body: `{"type":"promptpay","target":"0812345678\ud800"}`},
		} {
			k.body = []byte(k.body.(string))
			refused(t, c, k)
		}
	})
	t.Run("taken", func(t *testing.T) {
		for _, x := range []struct{ escaped, remark string }{
			{`\ud83d\ude00`, "😀"}, {`\uD83D\uDE00!`, "😀!"}, {`\\ud800`, `\ud800`}, {`\\\ud83d\ude00`, `\😀`}, {`caf\u00e9`, "café"},
		} {
			d := banked.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main", contentType: "application/json",
				body: []byte(`{"payload":"` + listed + `","remark":"` + x.escaped + `"}`)}).data(t)
			if d["remark"] != x.remark {
				t.Errorf("remark %s: %q, want %q", x.escaped, d["remark"], x.remark)
			}
		}
	})
}
