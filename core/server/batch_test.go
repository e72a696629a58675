package server_test

import (
	"fmt"
	"log/slog"
	"net/netip"
	"runtime"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/jobs"
	"github.com/slipverify/slipverify/core/lib/egress"
	"github.com/slipverify/slipverify/core/secret"
	"github.com/slipverify/slipverify/core/server"
	"github.com/slipverify/slipverify/core/verify"
)

// startAsyncCore is startCore with the async routes: jobs on the same
// store, callback URLs on loopback allowed, no broker (accepted jobs wait in
// the outbox).
func startAsyncCore(t *testing.T) *core {
	t.Helper()
	base := startCore(t, nil)
	fetch, err := egress.New(egress.Config{Policy: egress.NewPolicy([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")})})
	if err != nil {
		t.Fatal(err)
	}
	box, _ := secret.New(strings.Repeat("ab", 32))
	log := slog.New(slog.DiscardHandler)
	v := &verify.Verifier{Store: base.store, Images: verify.Images{Egress: fetch}}
	j := &jobs.Jobs{Store: base.store, Verifier: v, Box: box, Egress: fetch, Now: base.clock.Now, Log: log}
	h := server.New(v, j, base.store, box, edgeToken, 64, log).Handler()
	srv := &fasthttp.Server{Handler: h, MaxRequestBodySize: 8 << 20, DisablePreParseMultipartForm: true}
	return &core{url: listen(t, srv), clock: base.clock, store: base.store, handler: h, srv: srv}
}

// TestAsyncRefusalsBounded: the async routes refuse a body of very many
// fields or items with a message of a few hundred bytes, and neither they
// nor v1's verification spend a copy or map entry per field or item on the
// refusal; a batch within the bounds is still taken, white space and all.
func TestAsyncRefusalsBounded(t *testing.T) {
	c := startAsyncCore(t)
	var many strings.Builder
	many.WriteString(`{"callbackUrl":"https://127.0.0.1/cb"`)
	for i := range 700000 {
		fmt.Fprintf(&many, `,"k%d":1`, i)
	}
	many.WriteString("}")
	a := c.do(t, call{method: "POST", path: "/v2/verify/bank/async", branch: "br-main", body: []byte(many.String()), contentType: "application/json"})
	a.v2err(t, 400, "VALIDATION_ERROR")
	if len(a.raw) > 1000 || !strings.Contains(a.raw, "700001 fields") {
		t.Errorf("async, 700,001 fields: %d bytes: %.300s", len(a.raw), a.raw)
	}

	item := func(ref string) string { return `{"payload":"` + bankPayload("004", ref) + `"}` }
	batch := func(items string) []byte {
		return []byte(`{"callbackUrl":"https://127.0.0.1/cb","items":` + items + `}`)
	}
	million := batch("[" + strings.Repeat("{},", 999999) + "{}]")
	for _, k := range []struct{ name, want string }{
		{"a million items", "items: must hold 1 to 100 requests"},
		{"101 items", "items: must hold 1 to 100 requests"},
		{"no items", "items: must hold 1 to 100 requests"},
		{"items not an array", "items: must be an array of verification requests"},
		{"items null", "items: must be an array of verification requests"},
	} {
		body := million
		switch k.name {
		case "101 items":
			body = batch("[" + strings.Repeat(item("BATCHREF0001")+",", 100) + item("BATCHREF0001") + "]")
		case "no items":
			body = batch("[ ]")
		case "items not an array":
			body = batch(`{"0":{}}`)
		case "items null":
			body = batch("null")
		}
		a := c.do(t, call{method: "POST", path: "/v2/verify/bank/async/batch", branch: "br-main", body: body, contentType: "application/json"})
		a.v2err(t, 400, "VALIDATION_ERROR")
		if msg := get(a.body, "error", "message"); msg != k.want {
			t.Errorf("%s: %q, want %q", k.name, msg, k.want)
		}
	}

	// The work of each refusal, in this process: no copy or map entry per
	// field or item.
	for _, k := range []struct {
		name, path string
		body       []byte
	}{
		{"a million items", "/v2/verify/bank/async/batch", million},
		{"700,001 fields, async", "/v2/verify/bank/async", []byte(many.String())},
		{"700,001 fields, v1", "/verify", []byte(many.String())},
	} {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI(k.path)
		ctx.Request.Header.SetContentType("application/json")
		ctx.Request.Header.Set(api.HeaderEdgeToken, edgeToken)
		ctx.Request.Header.Set(api.HeaderService, "svc")
		ctx.Request.Header.Set(api.HeaderBranch, "br-main")
		ctx.Request.SetBody(k.body)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		c.handler(&ctx)
		runtime.ReadMemStats(&after)
		if ctx.Response.StatusCode() != 400 || len(ctx.Response.Body()) > 1000 {
			t.Errorf("%s: %d %.300s", k.name, ctx.Response.StatusCode(), ctx.Response.Body())
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("%s (%d bytes) refused allocating %d bytes", k.name, len(k.body), n)
		}
	}

	// Items within the bounds, with white space between them: taken.
	a = c.do(t, call{method: "POST", path: "/v2/verify/bank/async/batch", branch: "br-main", contentType: "application/json",
		body: batch("[ " + item("BATCHREF0002") + " ,\n\t" + item("BATCHREF0003") + "\n]")})
	if a.status != 202 {
		t.Fatalf("two items: %d %s", a.status, a.raw)
	}
	if ids, _ := get(a.body, "data", "jobIds").([]any); len(ids) != 2 {
		t.Errorf("two items: %s", a.raw)
	}
}
