package server_test

import (
	"encoding/json"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
)

// FuzzVerifyBody sends arbitrary bodies, content types and query strings
// through core's handler: every answer must be a well-formed v1 or v2 body
// with a status the catalog allows, never a 500 or a crash.
func FuzzVerifyBody(f *testing.F) {
	c := startCore(f, nil)
	h := c.handler
	for _, s := range []string{
		`{"payload":"` + bankPayload("004", "FUZZSEED1") + `","checkDuplicate":true,"matchAmount":1.5,"remark":"x"}`,
		`{"payload":null}`, `{"base64":"AAAA"}`, `{"url":"http://x"}`, `[]`, `{`, `"x"`, `{"payload":"` + bankPayload("006", "PENDINGREF01") + `"}`,
		"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nxx\r\n--B--\r\n",
	} {
		f.Add("/v2/verify/bank", "application/json", s)
		f.Add("/verify", "multipart/form-data; boundary=B", s)
		f.Add("/verify/wallet", "application/json", s)
	}
	paths := []string{"/v2/verify/bank", "/v2/verify/wallet", "/verify", "/verify/wallet"}
	f.Fuzz(func(t *testing.T, path, contentType, body string) {
		var ctx fasthttp.RequestCtx
		ctx.Init(new(fasthttp.Request), nil, nil)
		p := paths[len(path)%len(paths)]
		method := "POST"
		if len(contentType)%5 == 0 && p == "/verify" {
			method, p = "GET", p+"?"+body
		}
		ctx.Request.Header.SetMethod(method)
		ctx.Request.SetRequestURI(p)
		ctx.Request.Header.SetContentType(contentType)
		ctx.Request.Header.Set(api.HeaderEdgeToken, edgeToken)
		ctx.Request.Header.Set(api.HeaderService, "svc")
		ctx.Request.Header.Set(api.HeaderBranch, "br-main")
		ctx.Request.SetBodyString(body)
		h(&ctx)
		status := ctx.Response.StatusCode()
		if status >= 500 && status != 500 || status == 500 && !json.Valid(ctx.Response.Body()) {
			t.Fatalf("%s %s: status %d %s", method, p, status, ctx.Response.Body())
		}
		var out struct {
			Success *bool `json:"success"`
			Status  *int  `json:"status"`
			Error   *struct{ Code string }
			Message string
		}
		if err := json.Unmarshal(ctx.Response.Body(), &out); err != nil {
			t.Fatalf("%s %s: body not JSON: %q", method, p, ctx.Response.Body())
		}
		if status == 500 {
			t.Fatalf("%s %s %q: internal error %s", method, p, body, ctx.Response.Body())
		}
		if out.Success == nil && out.Status == nil {
			t.Fatalf("%s %s: neither a v1 nor a v2 body: %s", method, p, ctx.Response.Body())
		}
	})
}
