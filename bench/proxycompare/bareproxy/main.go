// Command bareproxy is the baseline of the proxycompare benchmark: a
// fasthttp reverse proxy that forwards every request, as received, to one
// upstream over pooled keep-alive connections and copies the answer back.
// No authentication, no header rewriting, no metrics: the cost of fasthttp
// itself, against which the edge's own work shows. -edge-timeouts adds the
// edge's server and client timeouts, whose deadlines are set per request.
package main

import (
	"flag"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/bench/proxycompare/serve"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18182", "listen address")
	upstream := flag.String("upstream", "127.0.0.1:18181", "upstream address")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile here until SIGTERM/SIGINT")
	timeouts := flag.Bool("edge-timeouts", false, "set the edge's read/write timeouts on the server and the client "+
		"(30 s each, so a deadline is set on every request), to measure what they cost")
	flag.Parse()

	up := &fasthttp.HostClient{
		Addr:                     *upstream,
		MaxConns:                 4096,
		MaxIdleConnDuration:      time.Minute,
		NoDefaultUserAgentHeader: true,
	}
	if *timeouts {
		up.ReadTimeout, up.WriteTimeout = 30*time.Second, 30*time.Second
	}
	handler := func(ctx *fasthttp.RequestCtx) {
		if err := up.Do(&ctx.Request, &ctx.Response); err != nil {
			ctx.Response.Reset()
			ctx.Error(err.Error(), fasthttp.StatusBadGateway)
		}
	}

	srv := &fasthttp.Server{
		Handler:               handler,
		Name:                  "bareproxy",
		NoDefaultDate:         true,
		NoDefaultServerHeader: true,
		IdleTimeout:           2 * time.Minute,
	}
	if *timeouts {
		srv.ReadTimeout, srv.WriteTimeout = 30*time.Second, 30*time.Second
	}
	serve.Run(srv, *addr, *cpuprofile)
}
