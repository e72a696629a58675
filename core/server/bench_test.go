package server_test

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/bank/sandbox"
	"github.com/slipverify/slipverify/core/secret"
	"github.com/slipverify/slipverify/core/server"
	"github.com/slipverify/slipverify/core/slip"
	"github.com/slipverify/slipverify/core/store"
	"github.com/slipverify/slipverify/core/verify"
)

// benchHandler is core's handler over a store of one service and branch,
// answering as cmd/core does, without a listener: what a request costs core
// beyond its socket.
func benchHandler(b *testing.B) fasthttp.RequestHandler {
	b.Helper()
	st, err := store.OpenWith(filepath.Join(b.TempDir(), "core.db"), time.Now, store.Options{}) // no slip retention, as by default
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if _, err := st.InsertMissing(store.Records{
		Services: []store.Service{{ID: "svc", Name: "Shop", State: store.StateActive, QuotaLimit: 1 << 40, CycleAnchorDay: 1,
			Rate: store.Rate{Bank: 100, Wallet: 100}}},
		Branches: []store.Branch{{ID: "br", ServiceID: "svc", Name: "Main", Main: true, Active: true, IPAllow: []string{"*"},
			KeyDigest: store.Digest("k")}},
	}); err != nil {
		b.Fatal(err)
	}
	sb, err := sandbox.New(sandbox.Config{}, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	box, _ := secret.New(strings.Repeat("ab", 32))
	v := &verify.Verifier{Store: st, Upstream: sb}
	return server.New(v, nil, st, box, edgeToken, 1<<20, slog.New(slog.DiscardHandler)).Handler()
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serve runs one request through h as the edge forwards it.
func serve(b *testing.B, h fasthttp.RequestHandler, ctx *fasthttp.RequestCtx, body []byte) {
	ctx.Request.Reset()
	ctx.Response.Reset()
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI("/v2/verify/bank")
	ctx.Request.Header.SetContentType("application/json")
	ctx.Request.Header.Set(api.HeaderEdgeToken, edgeToken)
	ctx.Request.Header.Set(api.HeaderService, "svc")
	ctx.Request.Header.Set(api.HeaderBranch, "br")
	ctx.Request.SetBody(body)
	h(ctx)
	if ctx.Response.StatusCode() != 200 {
		b.Fatalf("%d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
}

// BenchmarkServeVerifyBank is a sync v2 bank verification by payload of a
// new slip (charged, recorded, its usage event in the outbox) and of a
// branch's own duplicate (answered from the record), through core's HTTP
// handler, 64 requests at a time. cpu-ns/op is the process's CPU time per
// verification (the committer and fsync included), the figure a core
// sizes by.
func BenchmarkServeVerifyBank(b *testing.B) {
	for _, dup := range []bool{false, true} {
		b.Run(map[bool]string{false: "new", true: "duplicate"}[dup], func(b *testing.B) {
			h := benchHandler(b)
			var n atomic.Int64
			body := func() []byte {
				ref := "BENCHDUPLICATE01"
				if !dup {
					ref = fmt.Sprintf("BENCH%015d", n.Add(1))
				}
				return []byte(`{"payload":"` + slip.Bank{BankCode: "004", TransRef: ref}.Encode() + `","remark":"order 42","matchAmount":100.5}`)
			}
			serve(b, h, new(fasthttp.RequestCtx), body())
			b.ReportAllocs()
			b.SetParallelism(32)
			cpu := cpuTime()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := new(fasthttp.RequestCtx)
				for pb.Next() {
					serve(b, h, ctx, body())
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
