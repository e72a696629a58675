// Command upstream is the trivial server every proxy of the proxycompare
// benchmark sits in front of. For the edge it plays core:
//
//   - GET /health answers 200 {"success":true};
//   - GET /internal/auth/branch/<sha256 hex of the key> answers 200 with the
//     bench branch's api.BranchAuth for the one configured key, 404 for any
//     other digest (and 401 without the right X-Slip-Edge-Token, which is
//     checked on /internal/* only);
//   - any other request (POST /v2/verify/bank, ...) answers 200 with a small
//     fixed JSON body, whatever its headers, so the bare proxy and nginx get
//     the same answer as the edge.
//
// The branch's plan rates are high enough (10,000,000/s by default) that the
// edge's rate limiter takes a token on every request but never refuses one.
package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"flag"
	"log"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/bench/proxycompare/serve"

	"github.com/slipverify/slipverify/core/api"
)

// verifyBody is what every forwarded request gets: about 200 bytes, shaped
// like a successful verification.
var verifyBody = []byte(`{"success":true,"data":{"transRef":"015353134529BPM05470","date":"2024-06-01T13:45:29+07:00","amount":1500,` +
	`"sender":{"bank":"004","name":"MR. SOMCHAI T"},"receiver":{"bank":"014","name":"ACME CO., LTD."},"ref1":"INV-2024-0001"}}`)

var healthBody = []byte(`{"success":true}`)

func main() {
	addr := flag.String("addr", "127.0.0.1:18181", "listen address")
	key := flag.String("key", "", "the bench branch key (UUID v4) the auth route knows")
	secret := flag.String("secret", "", "the bench branch's signing secret (empty: the key cannot sign)")
	token := flag.String("token", "", "X-Slip-Edge-Token required on /internal/*")
	rate := flag.Int("rate", 10_000_000, "the branch's bank and wallet rates, requests per second")
	ipAllow := flag.String("ip-allow", "127.0.0.0/8", "comma-separated IP allow list of the branch")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile here until SIGTERM/SIGINT")
	flag.Parse()
	if *key == "" || len(*token) < 32 {
		log.Fatal("upstream: -key and -token (32+ characters) are required")
	}

	sum := sha256.Sum256([]byte(*key))
	authPath := []byte(api.PathBranchAuth + hex.EncodeToString(sum[:]))
	authBody, err := json.Marshal(struct {
		Success bool           `json:"success"`
		Data    api.BranchAuth `json:"data"`
	}{true, api.BranchAuth{
		ServiceID: "svc-bench", BranchID: "br-bench", ServiceState: "active", BranchActive: true,
		IPAllow: strings.Split(*ipAllow, ","), RateBank: *rate, RateWallet: *rate, SigningSecret: *secret,
	}})
	if err != nil {
		log.Fatal(err)
	}
	notFound := []byte(`{"success":false,"error":{"code":"INVALID_API_KEY","message":"unknown key"}}`)
	unauthorized := []byte(`{"success":false,"error":{"code":"UNAUTHORIZED","message":"bad edge token"}}`)
	tok := []byte(*token)

	handler := func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		path := ctx.Path()
		switch {
		case len(path) >= 10 && string(path[:10]) == "/internal/":
			if subtle.ConstantTimeCompare(ctx.Request.Header.Peek(api.HeaderEdgeToken), tok) != 1 {
				ctx.SetStatusCode(fasthttp.StatusUnauthorized)
				ctx.SetBody(unauthorized)
				return
			}
			if ctx.IsGet() && string(path) == string(authPath) {
				ctx.SetBody(authBody)
				return
			}
			ctx.SetStatusCode(fasthttp.StatusNotFound)
			ctx.SetBody(notFound)
		case string(path) == "/health":
			ctx.SetBody(healthBody)
		default:
			ctx.SetBody(verifyBody)
		}
	}

	srv := &fasthttp.Server{
		Handler:               handler,
		Name:                  "upstream",
		NoDefaultDate:         true,
		NoDefaultServerHeader: true,
		IdleTimeout:           2 * time.Minute,
	}
	serve.Run(srv, *addr, *cpuprofile)
}
