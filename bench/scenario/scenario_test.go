package scenario

import (
	"context"
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

// TestPicturesScan checks that a picture of each size class carries its
// slip in a QR code core's scanner finds, at the sizes phones send.
func TestPicturesScan(t *testing.T) {
	p, err := SlipPictures()
	if err != nil {
		t.Fatal(err)
	}
	run := RunID()
	for i, c := range p.classes {
		payload := bankPayload(run, 'I', uint64(i))
		body, ct, err := p.Append(nil, i, payload)
		if err != nil || !strings.HasPrefix(ct, "multipart/form-data; boundary=") {
			t.Fatalf("%s: %q, %v", c.name, ct, err)
		}
		file := filePart(body)
		got, err := qrscan.Scan(file, nil)
		if err != nil || got != payload {
			t.Errorf("%s (%d bytes): scanned %q, %v; want %q", c.name, len(file), got, err, payload)
		}
		if len(file) < 30_000 || len(file) > 4<<20 {
			t.Errorf("%s is %d bytes: not a phone picture's size", c.name, len(file))
		}
		t.Logf("%s: %d KiB", c.name, len(file)>>10)
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
// also keeps duplicates as core does, per service, by slip payload: the
// payload sent, or the one core's scanner reads from an uploaded picture
// (a picture it cannot read is answered 400 SLIP_NOT_FOUND); a slip seen
// before is answered isDuplicate true and counted.
type edgeStub struct {
	ln      *fasthttputil.InmemoryListener
	bad     atomic.Int64
	uploads atomic.Int64             // multipart requests (pictures)
	signers map[string]*authn.Signer // by branch key
	service map[string]string        // by branch key

	track   bool
	mu      sync.Mutex
	seen    map[string]bool // service and slip
	scanned []string        // the payloads of uploaded pictures
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
		if strings.HasPrefix(string(h.ContentType()), "multipart/") {
			s.uploads.Add(1)
		}
		if !s.track {
			ctx.SetBodyString(`{"success":true,"data":{}}`)
			return
		}
		slip := string(jsonString(ctx.PostBody(), `"payload":"`))
		upload := strings.HasPrefix(string(h.ContentType()), "multipart/")
		if upload {
			var err error
			if slip, err = qrscan.Scan(filePart(ctx.PostBody()), nil); err != nil {
				ctx.SetStatusCode(400)
				ctx.SetBodyString(`{"success":false,"error":{"code":"SLIP_NOT_FOUND"}}`)
				return
			}
		}
		s.mu.Lock()
		dup := s.seen[s.service[key]+"/"+slip]
		s.seen[s.service[key]+"/"+slip] = true
		if upload {
			s.scanned = append(s.scanned, slip)
		}
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
		f, err := sc.Build(t.Context(), env)
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
	if _, err := (&Scenario{Name: "x", Async: true}).Build(t.Context(), env); err == nil {
		t.Error("an async scenario was built without a webhook receiver")
	}
}

// TestMixedParts runs a mix of one picture to three payloads: every
// outcome names the scenario it drew, the parts' counts are the pictures
// and payloads the edge received, in about the file's proportions, and
// KindOf sorts the parts into images and payloads.
func TestMixedParts(t *testing.T) {
	env, stub := stubEnv(t)
	env.Mix = filepath.Join(t.TempDir(), "mix.json")
	if err := os.WriteFile(env.Mix, []byte(`{"name":"t","weights":{"bank-v2":3,"bank-image":1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	sc, _ := Get("mixed")
	f, err := sc.Build(t.Context(), env)
	if err != nil {
		t.Fatal(err)
	}
	res, err := load.Run(context.Background(), load.Plan{Workers: []int{4}, Requests: 400}, f)
	if err != nil || res.OK != 400 {
		t.Fatalf("%v: ok %d, codes %v", err, res.OK, res.Codes)
	}
	img, pay := res.Parts["bank-image"], res.Parts["bank-v2"]
	if len(res.Parts) != 2 || img == nil || pay == nil {
		t.Fatalf("parts %v, want bank-image and bank-v2", res.Parts)
	}
	if n := img.OK.Load(); int64(n) != stub.uploads.Load() || n < 60 || n > 140 || n+pay.OK.Load() != 400 {
		t.Errorf("bank-image part %d, bank-v2 part %d; the edge received %d pictures of 400 requests, want about 100", n, pay.OK.Load(), stub.uploads.Load())
	}
	for name, want := range map[string]string{"bank-image": KindImage, "bank-v2": KindPayload, "duplicates": KindPayload, "wallet-v2": KindPayload} {
		if got := KindOf(name); got != want {
			t.Errorf("KindOf(%s) = %s, want %s", name, got, want)
		}
	}
}

// tracked builds scenario name against a stub that counts the slips each
// service sees again.
func tracked(t *testing.T, name string) (*Env, *edgeStub, load.Func) {
	t.Helper()
	env, stub := stubEnv(t)
	stub.track = true
	sc, _ := Get(name)
	f, err := sc.Build(t.Context(), env)
	if err != nil {
		t.Fatal(err)
	}
	return env, stub, f
}

// TestBankImageNewSlips sends 32 uploads to the branches of one service,
// more than the 24 pictures bank-image once cycled through: the slip each
// picture holds, as core's scanner reads it, is one the service has not
// seen (the stub keeps duplicates by payload per service, as core does, so
// pictures of one slip in different sizes are repeats too), and it is a
// bank-image slip of this run. Then 16 more with three makers, whose slip
// sequences must not meet.
func TestBankImageNewSlips(t *testing.T) {
	if testing.Short() {
		t.Skip("scans 48 noisy pictures: minutes under the race detector; make test runs it in full without it")
	}
	check := func(name string, n uint64, env *Env, stub *edgeStub, f load.Func) {
		t.Helper()
		res, err := load.Run(context.Background(), load.Plan{Workers: []int{4}, Requests: n}, f)
		if err != nil || res.OK != n {
			t.Fatalf("%s: %v: ok %d of %d, codes %v", name, err, res.OK, n, res.Codes)
		}
		if stub.repeats.Load() != 0 || res.Codes["200 duplicate"] != 0 || uint64(len(stub.scanned)) != n {
			t.Errorf("%s: %d of %d uploads held a slip the service had seen (%d answered as duplicates)", name, stub.repeats.Load(), len(stub.scanned), res.Codes["200 duplicate"])
		}
		for _, p := range stub.scanned {
			if b, err := slip.ParseBank(p); err != nil || !strings.HasPrefix(b.TransRef, env.Run+"I") {
				t.Errorf("%s: an upload holds %q (%v), not a bank-image slip of run %s", name, p, err, env.Run)
			}
		}
	}
	oneService := func(env *Env) {
		env.Seed = &tenant.Seed{Branches: env.Seed.Of(env.Seed.Branches[0].ServiceID)}
	}
	env, stub := stubEnv(t)
	stub.track = true
	oneService(env)
	sc, _ := Get("bank-image")
	f, err := sc.Build(t.Context(), env)
	if err != nil {
		t.Fatal(err)
	}
	check("Build", 32, env, stub, f)

	env, stub = stubEnv(t)
	stub.track = true
	oneService(env)
	pics, err := SlipPictures()
	if err != nil {
		t.Fatal(err)
	}
	check("three makers", 16, env, stub, imageUploads(env, env.Seed.Branches, makePictures(t.Context(), pics, env.Run, 3, pictureDepth)))
}

// TestBankImageTimedPath checks that a bank-image request does no picture
// work of its own: with pictures made ahead and no maker running, a
// request allocates what sending one costs (tens of allocations), not what
// making one does (about 3,600).
func TestBankImageTimedPath(t *testing.T) {
	env, _ := stubEnv(t)
	pics, err := SlipPictures()
	if err != nil {
		t.Fatal(err)
	}
	q := makePictures(t.Context(), pics, env.Run, 0, pictureDepth)
	for i := range pictureDepth {
		p := new(picture)
		if p.body, p.contentType, p.err = pics.Append(nil, i, bankPayload(env.Run, 'I', uint64(i))); p.err != nil {
			t.Fatal(p.err)
		}
		q.ready <- p
	}
	f := imageUploads(env, env.Seed.Of(""), q)
	var seq uint64
	allocs := testing.AllocsPerRun(pictureDepth-1, func() {
		seq++
		if o := f(t.Context(), load.Request{Seq: seq}); !o.OK || o.Prep != 0 {
			t.Fatalf("request %d: %q, waited %v for a picture", seq, o.Code, o.Prep)
		}
	})
	if allocs > 100 {
		t.Errorf("a request allocates %.0f times: it makes its picture", allocs)
	}
	t.Logf("%.0f allocations a request", allocs)
	if o := f(t.Context(), load.Request{Seq: 99}); o.OK || o.Code != "no picture made" {
		t.Errorf("with no picture left and no maker: %+v", o)
	}
}

// TestPictureMakersStop checks that the makers Build starts end with the
// run's context, and a request after that is refused, not left waiting.
func TestPictureMakersStop(t *testing.T) {
	pics, err := SlipPictures()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	q := makePictures(ctx, pics, RunID(), 2, 2)
	for range 3 {
		if p, _ := q.take(t.Context()); p == nil || p.err != nil {
			t.Fatalf("no picture: %+v", p)
		}
	}
	cancel()
	select {
	case <-q.done:
	case <-time.After(time.Minute): // a bound on a failure, not a wait for a time
		t.Fatal("the makers did not stop when the context ended")
	}
	for len(q.ready) > 0 {
		<-q.ready
	}
	if p, _ := q.take(t.Context()); p != nil {
		t.Error("a picture was made after the makers stopped")
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
// make per core. ns/op includes the work of bank-image's picture makers,
// which run beside the requests on the same cores; timed-ns/op is the mean
// time one call spends in the request function as a run times it (calls
// run in parallel, so it is not ns/op's share of the machine; a wait for a
// picture not made yet is left out, as a run counts it as the generator's
// lag): for bank-image, sending a picture, not making it.
func BenchmarkScenario(b *testing.B) {
	env, _ := stubEnv(b)
	for _, name := range []string{"bank-v2", "bank-v2-signed", "bank-v1", "duplicates", "mixed", "bank-image"} {
		b.Run(name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
			defer cancel()
			sc, _ := Get(name)
			f, err := sc.Build(ctx, env)
			if err != nil {
				b.Fatal(err)
			}
			var seq atomic.Uint64
			var timed atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					t0 := time.Now()
					o := f(ctx, load.Request{Seq: seq.Add(1)})
					timed.Add(int64(time.Since(t0) - o.Prep))
					if !o.OK {
						b.Fatal(o.Code)
					}
				}
			})
			b.ReportMetric(float64(timed.Load())/float64(b.N), "timed-ns/op")
		})
	}
}
