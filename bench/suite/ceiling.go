package suite

import (
	"context"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/bench/load"
	"github.com/slipverify/slipverify/bench/report"
	"github.com/slipverify/slipverify/bench/scenario"
	"github.com/slipverify/slipverify/bench/tenant"
)

// Ceiling measures the generator itself: the bank-v2 scenario, closed loop,
// against a trivial HTTP server on a loopback listener in this process,
// which answers at once. The server shares the machine with the generator,
// so the number is a floor of what the generator alone can send; a stack
// run far below it is not limited by the generator.
func Ceiling(ctx context.Context, seed *tenant.Seed, step time.Duration) (*report.Scenario, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	body := []byte(`{"success":true,"data":{}}`)
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.Set("X-RateLimit-Limit", "5000")
		ctx.SetBody(body)
	}}
	go srv.Serve(ln)
	defer srv.Shutdown()
	c := scenario.NewClient(ln.Addr().String(), 256)
	defer c.CloseIdle()
	env := &scenario.Env{Client: c, Seed: seed, Run: scenario.RunID()}
	sc, _ := scenario.Get("bank-v2")
	r := &Runner{Env: env}
	s, err := r.Run(ctx, "generator-ceiling", sc, load.Plan{Workers: []int{16, 64}, StepDuration: step})
	if err != nil {
		return nil, err
	}
	s.About = "the generator against a trivial in-process HTTP server (bank-v2 requests): the most this generator sends on this machine"
	return s, nil
}
