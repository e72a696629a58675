package gateway_test

import (
	"bytes"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/promptpay"
	"github.com/slipverify/slipverify/core/slip"
)

// bigSlipPNG is a picture of the slip QR code of transRef at the size of a
// phone photo: a 1150×1150 PNG stored without compression, just under the
// 4 MiB an image may have.
func bigSlipPNG(t testing.TB, transRef string) []byte {
	t.Helper()
	qr, err := promptpay.PNG(slip.Bank{BankCode: "004", TransRef: transRef}.Encode(), 400)
	if err != nil {
		t.Fatal(err)
	}
	code, err := png.Decode(bytes.NewReader(qr))
	if err != nil {
		t.Fatal(err)
	}
	m := image.NewRGBA(image.Rect(0, 0, 1150, 1150))
	draw.Draw(m, m.Bounds(), image.White, image.Point{}, draw.Src)
	draw.Draw(m, code.Bounds().Add(image.Pt(375, 375)), code, code.Bounds().Min, draw.Src)
	var b bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.NoCompression}).Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	if b.Len() < 3_900_000 || b.Len() > 4<<20 {
		t.Fatalf("the picture has %d bytes, want a big one under 4 MiB", b.Len())
	}
	return b.Bytes()
}

// TestUploadsOnIdleCoreConnections: big uploads that a client sends as curl
// does (Expect: 100-continue), forwarded on pooled connections to core that
// have been quiet for longer than core's write timeout, are all answered,
// and the rate factor, every tenant's, stays 1. Core's write timeout is cut
// to 100 ms so that the wait for it is short: it is the kernel's deadline
// on core's socket, which no test clock moves.
func TestUploadsOnIdleCoreConnections(t *testing.T) {
	const writeTimeout = 100 * time.Millisecond
	core := testnet.StartCore(t, seed, "SLIP_CORE_WRITE_TIMEOUT="+writeTimeout.String())
	e := startEdge(t, core)
	const parallel = 10
	pictures := make([][]byte, parallel)
	for i := range pictures {
		pictures[i] = bigSlipPNG(t, fmt.Sprintf("IDLEREF%05d", i))
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: parallel, ExpectContinueTimeout: 5 * time.Second}}
	defer client.CloseIdleConnections()

	all := func(what string, send func(i int) (int, string, string)) {
		t.Helper()
		var wg sync.WaitGroup
		for i := range parallel {
			wg.Go(func() {
				status, limit, body := send(i)
				if status >= 500 || status == 0 {
					t.Errorf("%s %d: %d %s", what, i, status, body)
				} else if limit != "1000000" {
					t.Errorf("%s %d: X-RateLimit-Limit %q, want the plan's 1000000", what, i, limit)
				}
			})
		}
		wg.Wait()
	}
	// Every connection of the edge's pool to core answers once, leaving
	// core's write deadline behind on it.
	all("a first payload", func(i int) (int, string, string) {
		a := e.do(t, "POST", "/v2/verify/bank", payload(fmt.Sprintf("WARMREF%05d", i)), bearer(keyFast)...)
		return a.status, a.header.Get("X-RateLimit-Limit"), a.raw
	})
	time.Sleep(2 * writeTimeout) // the pooled connections are idle past core's deadline
	e.clock.Advance(time.Second) // and the rate factor's interval has ended

	upload := func(i int) (int, string, string) {
		var body bytes.Buffer
		w := multipart.NewWriter(&body)
		part, _ := w.CreateFormFile("image", "slip.png")
		part.Write(pictures[i])
		w.Close()
		req, _ := http.NewRequest("POST", e.url+"/v2/verify/bank", &body)
		req.Header.Set("Content-Type", w.FormDataContentType())
		req.Header.Set("Authorization", "Bearer "+keyFast)
		req.Header.Set("Expect", "100-continue")
		res, err := client.Do(req)
		if err != nil {
			return 0, "", err.Error()
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header.Get("X-RateLimit-Limit"), string(b)
	}
	all("an upload with Expect", upload)
	e.clock.Advance(time.Second) // what the uploads did to the factor shows now
	a := e.do(t, "POST", "/v2/verify/bank", payload("AFTERREF0001"), bearer(keyFast)...)
	a.want(t, 200, "")
	if l := a.header.Get("X-RateLimit-Limit"); l != "1000000" {
		t.Errorf("after the uploads: X-RateLimit-Limit %s, want the plan's 1000000", l)
	}
}

// TestCoreDownKeepsFactor: requests that fail because core is unreachable
// are answered API_SERVER_ERROR, and do not lower the rate factor: a failed
// connection is not core saying it is overloaded, and every tenant's limit
// would pay for it once core is back.
func TestCoreDownKeepsFactor(t *testing.T) {
	core := testnet.StartCore(t, seed)
	e := startEdge(t, core)
	e.do(t, "POST", "/v2/verify/bank", payload("DOWNREF00001"), bearer(keyFast)...).want(t, 200, "") // the key's record is cached
	core.Kill()
	for i := range 3 {
		e.do(t, "POST", "/v2/verify/bank", payload(fmt.Sprintf("DOWNREF%05d", i+2)), bearer(keyFast)...).want(t, 500, "API_SERVER_ERROR")
	}
	core.Restart(t)
	e.clock.Advance(time.Second) // the interval of the failures has ended
	a := e.do(t, "POST", "/v2/verify/bank", payload("DOWNREF00009"), bearer(keyFast)...)
	a.want(t, 200, "")
	if l := a.header.Get("X-RateLimit-Limit"); l != "1000000" {
		t.Errorf("after core was unreachable: X-RateLimit-Limit %s, want the plan's 1000000", l)
	}
}
