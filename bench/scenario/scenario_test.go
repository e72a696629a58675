package scenario

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/slipverify/slipverify/bench/load"
	"github.com/slipverify/slipverify/bench/tenant"
	"github.com/slipverify/slipverify/core/qrscan"
	"github.com/slipverify/slipverify/core/slip"
	"github.com/slipverify/slipverify/edge/authn"
)

func TestPayloads(t *testing.T) {
	run := RunID()
	seen := map[string]bool{}
	for n := range uint64(5000) {
		p := bankPayload(run, 'B', n*7919)
		b, err := slip.ParseBank(p)
		if err != nil {
			t.Fatalf("payload %q: %v", p, err)
		}
		if seen[b.TransRef] {
			t.Fatalf("transRef %s repeats", b.TransRef)
		}
		seen[b.TransRef] = true
		if _, err := slip.ParseWallet(walletPayload(run, n)); err != nil {
			t.Fatalf("wallet payload: %v", err)
		}
	}
	if RunID() == run || len(run) != 8 {
		t.Errorf("run ids %q are not fresh 8-character ids", run)
	}
}

func TestErrorCode(t *testing.T) {
	f := func(status int, body, want string) {
		t.Helper()
		if got := errorCode(status, []byte(body)); got != want {
			t.Errorf("errorCode(%d, %s) = %q, want %q", status, body, got, want)
		}
	}
	f(429, `{"success":false,"error":{"code":"RATE_LIMIT_EXCEEDED","message":"x"}}`, "429 RATE_LIMIT_EXCEEDED")
	f(400, `{"status":400,"message":"duplicate_slip","data":{}}`, "400 duplicate_slip")
	f(502, `<html>bad gateway</html>`, "502")
	if n := testing.AllocsPerRun(100, func() { errorCode(429, []byte(`{"error":{"code":"RATE_LIMIT_EXCEEDED"}}`)) }); n != 0 {
		t.Errorf("a known code allocates %v times", n)
	}
}

func TestNonce(t *testing.T) {
	n := newNonce()
	s := string(n[:])
	if len(s) != 36 || s[14] != '4' || !strings.ContainsRune("89ab", rune(s[19])) || s == string(func() []byte { x := newNonce(); return x[:] }()) {
		t.Errorf("nonce %s is not a fresh UUID v4", s)
	}
}

// TestCorpus checks that every picture of the corpus carries its slip in a
// QR code core's scanner finds, at the sizes phones send.
func TestCorpus(t *testing.T) {
	n := 4
	if testing.Short() {
		n = 2
	}
	imgs, err := Corpus(RunID(), n)
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range imgs {
		i := strings.Index(string(img.Body), "\r\n\r\n")
		j := strings.LastIndex(string(img.Body), "\r\n--")
		got, err := qrscan.Scan(img.Body[i+4:j], nil)
		if err != nil || got != img.Payload {
			t.Errorf("%s (%d bytes): scanned %q, %v; want %q", img.Name, img.Bytes, got, err, img.Payload)
		}
		if img.Bytes < 30_000 || img.Bytes > 4<<20 {
			t.Errorf("%s is %d bytes: not a phone picture's size", img.Name, img.Bytes)
		}
		t.Logf("%s: %d KiB", img.Name, img.Bytes>>10)
	}
}

func TestReadMix(t *testing.T) {
	m, err := ReadMix(filepath.Join("..", "profiles", "production.json"))
	if err != nil || m.Weights["bank-v2"] == 0 {
		t.Fatalf("the production profile: %v %+v", err, m)
	}
	dir := t.TempDir()
	f := func(body, want string) {
		t.Helper()
		p := filepath.Join(dir, "mix.json")
		os.WriteFile(p, []byte(body), 0o600)
		if _, err := ReadMix(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadMix(%s) = %v, want an error with %q", body, err, want)
		}
	}
	f(`{"weights":{"nope":1}}`, `unknown scenario "nope"`)
	f(`{"weights":{"bank-v2":-1,"overload":1}}`, "negative")
	f(`{"weights":{"async-single":1}}`, "cannot be part of a mix")
	f(`{"weights":{}}`, "add up to nothing")
	f(`{"weights":`, "unexpected end")
	if _, err := ReadMix(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("a missing file was read")
	}
	if _, err := Get("nope"); err == nil || !strings.Contains(err.Error(), "bank-v2") {
		t.Errorf("Get of an unknown name: %v", err)
	}
}

// edgeStub is an in-memory HTTP server that answers like the edge's happy
// path and checks each request's credentials, so the generator's own cost
// is measured and its requests are checked for form. With track set it
// also keeps duplicates as core does, per service: a slip (a payload, or an
// uploaded file) seen before is answered isDuplicate true and counted.
type edgeStub struct {
	ln      *fasthttputil.InmemoryListener
	bad     atomic.Int64
	signers map[string]*authn.Signer // by branch key
	service map[string]string        // by branch key

	track   bool
	mu      sync.Mutex
	seen    map[string]bool // service and slip
	repeats atomic.Int64
}

func newStub(tb testing.TB, seed *tenant.Seed) *edgeStub {
	s := &edgeStub{ln: fasthttputil.NewInmemoryListener(), signers: map[string]*authn.Signer{}, service: map[string]string{}, seen: map[string]bool{}}
	for _, b := range seed.Branches {
		s.signers[b.Key] = authn.NewSigner(b.Secret)
		s.service[b.Key] = b.ServiceID
	}
	go fasthttp.Serve(s.ln, func(ctx *fasthttp.RequestCtx) {
		h := &ctx.Request.Header
		key := string(h.Peek("X-API-Key"))
		if sig := h.Peek("X-Signature"); len(sig) > 0 {
			sts := authn.AppendStringToSign(nil, h.Method(), authn.SignedPath(h.RequestURI()), h.Peek("X-Timestamp"), h.Peek("X-Nonce"), ctx.PostBody())
			sg := s.signers[key]
			if sg == nil || !sg.Verify(sts, sig) {
				s.bad.Add(1)
			}
		} else if k, ok := strings.CutPrefix(string(h.Peek("Authorization")), "Bearer "); ok {
			key = k
		} else {
			s.bad.Add(1)
		}
		ctx.Response.Header.Set("X-RateLimit-Limit", "5000")
		if !s.track {
			ctx.SetBodyString(`{"success":true,"data":{}}`)
			return
		}
		slip := string(jsonString(ctx.PostBody(), `"payload":"`))
		if strings.HasPrefix(string(h.ContentType()), "multipart/") {
			sum := sha256.Sum256(ctx.PostBody())
			slip = string(sum[:])
		}
		s.mu.Lock()
		dup := s.seen[s.service[key]+"/"+slip]
		s.seen[s.service[key]+"/"+slip] = true
		s.mu.Unlock()
		if dup {
			s.repeats.Add(1)
		}
		fmt.Fprintf(ctx, `{"success":true,"data":{"isDuplicate":%v}}`, dup)
	})
	tb.Cleanup(func() { s.ln.Close() })
	return s
}

func stubEnv(tb testing.TB) (*Env, *edgeStub) {
	seed, err := tenant.Read(filepath.Join("..", "seed.json"))
	if err != nil {
		tb.Fatal(err)
	}
	s := newStub(tb, seed)
	c := NewClient("edge.test", 64).WithDial(func(string) (net.Conn, error) { return s.ln.Dial() })
	return &Env{Client: c, Seed: seed, Run: RunID(), Mix: filepath.Join("..", "profiles", "production.json")}, s
}

// TestSyncScenarios runs every sync scenario's requests against the stub:
// each is answered 200, carries valid credentials (signatures checked),
// and the rate limit header is read.
func TestSyncScenarios(t *testing.T) {
	env, stub := stubEnv(t)
	for _, sc := range All() {
		if sc.Async {
			continue
		}
		f, err := sc.Build(env)
		if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		res, err := load.Run(context.Background(), load.Plan{Workers: []int{4}, Requests: 200}, f)
		if err != nil || res.OK != 200 || stub.bad.Load() != 0 {
			t.Fatalf("%s: %v, ok %d, codes %v, bad credentials %d", sc.Name, err, res.OK, res.Codes, stub.bad.Load())
		}
		if res.Windows[0].MaxLimit.Load() != 5000 {
			t.Errorf("%s: rate limit header not read", sc.Name)
		}
	}
	if _, err := (&Scenario{Name: "x", Async: true}).Build(env); err == nil {
		t.Error("an async scenario was built without a webhook receiver")
	}
}

// tracked builds scenario name against a stub that counts the slips each
// service sees again.
func tracked(t *testing.T, name string) (*Env, *edgeStub, load.Func) {
	t.Helper()
	env, stub := stubEnv(t)
	stub.track = true
	sc, _ := Get(name)
	f, err := sc.Build(env)
	if err != nil {
		t.Fatal(err)
	}
	return env, stub, f
}

// TestBankImageNewSlips sends more uploads than a branch's service could
// see of a fixed corpus: every one is a picture of a new slip (the stub
// keeps duplicates per service, as core does, by the uploaded file), and
// the pictures carry the slips the requests were made for.
func TestBankImageNewSlips(t *testing.T) {
	env, stub, f := tracked(t, "bank-image")
	n := uint64(len(env.Seed.Branches) * 2)
	res, err := load.Run(context.Background(), load.Plan{Workers: []int{4}, Requests: n}, f)
	if err != nil || res.OK != n {
		t.Fatalf("%v: ok %d of %d, codes %v", err, res.OK, n, res.Codes)
	}
	if stub.repeats.Load() != 0 || res.Codes["200 duplicate"] != 0 {
		t.Errorf("%d uploads repeated a picture the service had seen (%d answered as duplicates)", stub.repeats.Load(), res.Codes["200 duplicate"])
	}
}

// TestDuplicatesCounted runs the duplicates scenario against the stub,
// which keeps duplicates per service: the run counts the repeats the
// server saw (answers with isDuplicate true), which are fewer than the
// nominal 90 % because each pool slot's first draw is new.
func TestDuplicatesCounted(t *testing.T) {
	_, stub, f := tracked(t, "duplicates")
	const n = 3000
	res, err := load.Run(context.Background(), load.Plan{Workers: []int{4}, Requests: n}, f)
	if err != nil || res.OK != n {
		t.Fatalf("%v: ok %d, codes %v", err, res.OK, res.Codes)
	}
	dup := res.Codes["200 duplicate"]
	if dup == 0 || dup != uint64(stub.repeats.Load()) || res.Codes["200"]+dup != n {
		t.Errorf("%d answered as duplicates, the server saw %d repeats; codes %v", dup, stub.repeats.Load(), res.Codes)
	}
	t.Logf("%d of %d requests repeated a slip (%.0f %%)", dup, n, 100*float64(dup)/n)
}

// BenchmarkScenario measures the generator's cost of one request of each
// sync scenario (build, sign, send, read, classify) against an in-memory
// server, without the kernel: the ceiling of requests the generator can
// make per core.
func BenchmarkScenario(b *testing.B) {
	env, _ := stubEnv(b)
	for _, name := range []string{"bank-v2", "bank-v2-signed", "bank-v1", "duplicates", "mixed"} {
		sc, _ := Get(name)
		f, err := sc.Build(env)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var seq atomic.Uint64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if o := f(ctx, load.Request{Seq: seq.Add(1)}); !o.OK {
						b.Fatal(o.Code)
					}
				}
			})
		})
	}
}
