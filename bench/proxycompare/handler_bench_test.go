package proxycompare

// Benchmarks of the request path alone, without the kernel: the edge's
// handler and a bare HostClient.Do handler, each forwarding to the same
// upstream handler over an in-memory listener. The difference per op is the
// edge's own work per request (authentication, rate limit, header rewriting,
// metrics), which the wrk runs show only mixed with ~20 µs of system calls.
//
//	go test ./bench/proxycompare -run '^$' -bench . -benchtime 200000x -count 5 -cpu 1
//	go test ./bench/proxycompare -run '^$' -bench 'Edge/bearer' -cpu 1 -cpuprofile /tmp/edge.pprof
//	go tool pprof -top -cum /tmp/edge.pprof

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/iplist"
	"github.com/slipverify/slipverify/edge/authcache"
	"github.com/slipverify/slipverify/edge/gateway"
	"github.com/slipverify/slipverify/edge/nonce"
	"github.com/slipverify/slipverify/edge/ratelimit"
)

const (
	benchKey    = "6f1c2a9e-7b3d-4c5e-9f80-1a2b3c4d5e6f"
	benchSecret = "proxycompare-signing-secret-0123456789abcdef"
	benchToken  = "proxycompare-edge-token-0123456789abcdef"
	benchBody   = `{"payload":"0041000600000101030040220015353134529BPM054705102TH9104C0D5","amount":1500}`
)

// inmemUpstream serves what upstream/main.go serves, on an in-memory
// listener, and returns a HostClient dialing it.
func inmemUpstream(b *testing.B) *fasthttp.HostClient {
	sum := sha256.Sum256([]byte(benchKey))
	authPath := api.PathBranchAuth + hex.EncodeToString(sum[:])
	authBody, _ := json.Marshal(struct {
		Success bool           `json:"success"`
		Data    api.BranchAuth `json:"data"`
	}{true, api.BranchAuth{ServiceID: "svc-bench", BranchID: "br-bench", ServiceState: "active", BranchActive: true,
		IPAllow: []string{"127.0.0.0/8"}, RateBank: 10_000_000, RateWallet: 10_000_000, SigningSecret: benchSecret}})
	verifyBody := []byte(`{"success":true,"data":{"transRef":"015353134529BPM05470","date":"2024-06-01T13:45:29+07:00","amount":1500,` +
		`"sender":{"bank":"004","name":"MR. SOMCHAI T"},"receiver":{"bank":"014","name":"ACME CO., LTD."},"ref1":"INV-2024-0001"}}`)
	ln := fasthttputil.NewInmemoryListener()
	srv := &fasthttp.Server{NoDefaultDate: true, NoDefaultServerHeader: true, Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		switch p := string(ctx.Path()); {
		case p == authPath:
			ctx.SetBody(authBody)
		case len(p) > 10 && p[:10] == "/internal/":
			ctx.SetStatusCode(fasthttp.StatusNotFound)
		default:
			ctx.SetBody(verifyBody)
		}
	}}
	go srv.Serve(ln) //nolint:errcheck
	b.Cleanup(func() { ln.Close() })
	return &fasthttp.HostClient{
		Addr: "upstream", MaxConns: 64, MaxIdleConnDuration: time.Minute, NoDefaultUserAgentHeader: true,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		Dial: func(string) (net.Conn, error) { return ln.Dial() },
	}
}

// edgeHandler builds the edge's handler as gateway.FromConfig does, with its
// client to core replaced by hc.
func edgeHandler(b *testing.B, hc *fasthttp.HostClient) fasthttp.RequestHandler {
	now := time.Now
	auth, err := authcache.New(authcache.Config{Core: hc, EdgeToken: benchToken, TTL: 2 * time.Second, Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(auth.Close)
	adaptive := ratelimit.NewAdaptive(ratelimit.AdaptiveConfig{Now: now})
	g := gateway.New(gateway.Config{
		Core: hc, EdgeToken: benchToken, Auth: auth,
		Nonces: nonce.New(nonce.Config{Window: 5 * time.Minute, MaxEntries: 50_000_000, MaxPerClient: 50_000_000,
			MaxPerService: 50_000_000, Now: now}),
		Limits: ratelimit.New(now), Adaptive: adaptive, Trusted: iplist.List{},
		CoreTimeout: 30 * time.Second, Now: now, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, gateway.NewMetrics(auth, adaptive))
	return g.Handler()
}

// request fills req with the bench request: Bearer, or signed with nonce n.
func request(req *fasthttp.Request, signed bool, n uint64, mac func(string) string) {
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("/v2/verify/bank")
	req.Header.SetHost("edge")
	req.Header.SetContentType("application/json")
	req.SetBodyString(benchBody)
	if !signed {
		req.Header.Set("Authorization", "Bearer "+benchKey)
		return
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	nc := fmt.Sprintf("0badc0de-0000-4000-8000-%012x", n)
	sum := sha256.Sum256([]byte(benchBody))
	req.Header.Set("X-API-Key", benchKey)
	req.Header.Set("X-Timestamp", ts)
	req.Header.Set("X-Nonce", nc)
	req.Header.Set("X-Signature", mac("POST\n/verify/bank\n"+ts+"\n"+nc+"\n"+hex.EncodeToString(sum[:])))
}

func runHandler(b *testing.B, h fasthttp.RequestHandler, signed bool) {
	m := hmac.New(sha256.New, []byte(benchSecret))
	mac := func(s string) string { m.Reset(); m.Write([]byte(s)); return hex.EncodeToString(m.Sum(nil)) }
	remote := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	var ctx fasthttp.RequestCtx
	var seq uint64
	// requests are made ahead, outside the timer, in batches
	const batch = 4096
	reqs := make([]fasthttp.Request, batch)
	fill := func() {
		for i := range reqs {
			reqs[i].Reset()
			seq++
			request(&reqs[i], signed, seq, mac)
		}
	}
	// warm: the first request fetches the key from the upstream
	fill()
	ctx.Init(&reqs[0], remote, nil)
	h(&ctx)
	if ctx.Response.StatusCode() != 200 {
		b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	fill()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % batch
		if j == 0 && i > 0 {
			b.StopTimer()
			fill()
			b.StartTimer()
		}
		ctx.Init(&reqs[j], remote, nil)
		h(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
}

// BenchmarkHandler: bare is HostClient.Do alone (target c without the
// kernel), edge/bearer and edge/signed are targets a and b.
func BenchmarkHandler(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		hc := inmemUpstream(b)
		runHandler(b, func(ctx *fasthttp.RequestCtx) {
			if err := hc.Do(&ctx.Request, &ctx.Response); err != nil {
				ctx.Error(err.Error(), fasthttp.StatusBadGateway)
			}
		}, false)
	})
	b.Run("edge/bearer", func(b *testing.B) { runHandler(b, edgeHandler(b, inmemUpstream(b)), false) })
	b.Run("edge/signed", func(b *testing.B) { runHandler(b, edgeHandler(b, inmemUpstream(b)), true) })
}
