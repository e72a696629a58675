package suite

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipverify/slipverify/bench/load"
	"github.com/slipverify/slipverify/bench/report"
	"github.com/slipverify/slipverify/bench/scenario"
	"github.com/slipverify/slipverify/bench/stack"
	"github.com/slipverify/slipverify/bench/tenant"
	"github.com/slipverify/slipverify/bench/webhook"
)

// asyncEdge is an in-process stand-in for the stack's async route: it
// accepts every submit with 202 and a job id, then posts the job's signed
// callback to the callbackUrl, trusting the receiver's CA as core does.
// Every third job fails with QUOTA_EXCEEDED, as when quota runs out after
// the submit was accepted.
func asyncEdge(t *testing.T, seed *tenant.Seed, caFile string) string {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	secrets := map[string]string{}
	for _, b := range seed.Branches {
		secrets["Bearer "+b.Key] = b.WebhookSecret
	}
	var n atomic.Int64
	var posts sync.WaitGroup
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			CallbackURL string `json:"callbackUrl"`
		}
		if r.URL.Path != "/v2/verify/bank/async" || json.NewDecoder(r.Body).Decode(&req) != nil || req.CallbackURL == "" {
			http.Error(w, `{"success":false,"error":{"code":"VALIDATION_ERROR"}}`, 400)
			return
		}
		id := n.Add(1)
		job := fmt.Sprintf("job-%d", id)
		body := fmt.Sprintf(`{"jobId":%q,"status":"success","data":{}}`, job)
		if id%3 == 0 {
			body = fmt.Sprintf(`{"jobId":%q,"status":"failed","error":{"code":"QUOTA_EXCEEDED"}}`, job)
		}
		m := hmac.New(sha256.New, []byte(secrets[r.Header.Get("Authorization")]))
		m.Write([]byte(body))
		sig := "sha256=" + hex.EncodeToString(m.Sum(nil))
		w.WriteHeader(202)
		fmt.Fprintf(w, `{"success":true,"data":{"jobId":%q}}`, job)
		posts.Go(func() {
			cb, _ := http.NewRequest("POST", req.CallbackURL, strings.NewReader(body))
			cb.Header.Set("X-Service-Signature", sig)
			if res, err := hc.Do(cb); err == nil {
				res.Body.Close()
			}
		})
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(); posts.Wait() })
	return ln.Addr().String()
}

// TestAsyncVerifications runs async-single against an edge whose jobs fail
// one time in three after their submit was accepted: the scenario's
// verifications and per-core numbers count the successful callbacks, not
// the accepted submits, and the failed callbacks are errors.
func TestAsyncVerifications(t *testing.T) {
	seed, err := tenant.Read(filepath.Join("..", "seed.json"))
	if err != nil {
		t.Fatal(err)
	}
	wh, err := webhook.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	client := scenario.NewClient(asyncEdge(t, seed, wh.CAFile), 64)
	defer client.CloseIdle()
	var reads atomic.Int64
	cpu := func() stack.CPU { // core used 3 CPU-seconds during the run
		return stack.CPU{"core": time.Duration(reads.Add(1)-1) * 3 * time.Second}
	}
	r := &Runner{Env: &scenario.Env{Client: client, Seed: seed, Run: scenario.RunID(), Webhook: wh}, CPU: cpu, CallbackWait: time.Minute}
	sc, _ := scenario.Get("async-single")
	out, err := r.Run(context.Background(), "", sc, Open(100, 300*time.Millisecond, 64))
	if err != nil {
		t.Fatal(err)
	}
	cb := out.Callbacks
	if out.OK != 30 || cb == nil || cb.Stats.Delivered != 30 || cb.Stats.Succeeded != 20 || cb.Stats.Status["failed QUOTA_EXCEEDED"] != 10 {
		t.Fatalf("ok %d, callbacks %+v", out.OK, cb)
	}
	if span := max(cb.Seconds, out.Elapsed); cb.Seconds <= 0 || !near(out.Verifications*span, 20) {
		t.Errorf("verif/s %v over %v s: %v verifications, want the 20 successful callbacks (submits accepted at %v/s)",
			out.Verifications, span, out.Verifications*span, out.OKRate)
	}
	if !near(out.PerCore["core"], 20.0/3) {
		t.Errorf("core per core %v, want 20 successful callbacks / 3 CPU-s", out.PerCore["core"])
	}
	var b bytes.Buffer
	(&report.Report{Version: report.Version, Scenarios: []*report.Scenario{out}}).Table(&b)
	if !strings.Contains(b.String(), "33.3%") || !strings.Contains(b.String(), "callback failed QUOTA_EXCEEDED ×10") {
		t.Errorf("the failed callbacks are not errors:\n%s", b.String())
	}
}

func near(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }

// TestRunnerMixKinds runs a mix of bank-v2 and bank-image against a
// trivial edge: the runner reports its pictures and payloads apart, each
// kind's requests adding up to the run's; with the mix's scenarios run on
// their own in the same report (core charged 1 CPU-second for each run),
// each kind gets core's CPU per verification of its scenario.
func TestRunnerMixKinds(t *testing.T) {
	seed, err := tenant.Read(filepath.Join("..", "seed.json"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte(`{"success":true,"data":{}}`))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	mix := filepath.Join(t.TempDir(), "mix.json")
	if err := os.WriteFile(mix, []byte(`{"name":"t","weights":{"bank-v2":4,"bank-image":1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	client := scenario.NewClient(ln.Addr().String(), 64)
	defer client.CloseIdle()
	var reads atomic.Int64
	cpu := func() stack.CPU { return stack.CPU{"core": time.Duration(reads.Add(1)-1) * time.Second} }
	r := &Runner{Env: &scenario.Env{Client: client, Seed: seed, Run: scenario.RunID(), Mix: mix}, CPU: cpu}
	rep := &report.Report{Version: report.Version}
	for _, name := range []string{"mixed", "bank-v2", "bank-image"} {
		sc, _ := scenario.Get(name)
		out, err := r.Run(context.Background(), "", sc, load.Plan{Workers: []int{4}, Requests: 200})
		if err != nil {
			t.Fatal(err)
		}
		rep.Scenarios = append(rep.Scenarios, out)
	}
	rep.DeriveKindCPU()
	m := rep.Find("mixed")
	if m.OK != 200 || len(m.Kinds) != 2 || m.Kinds[0].Name != scenario.KindImage || m.Kinds[1].Name != scenario.KindPayload {
		t.Fatalf("mixed: ok %d, kinds %+v", m.OK, m.Kinds)
	}
	img, pay := m.Kinds[0], m.Kinds[1]
	if img.OK+pay.OK != 200 || img.OK < 20 || img.OK > 60 || img.Latency.Count != img.Requests {
		t.Errorf("images %d, payloads %d of 200 requests, want about 40 images", img.OK, pay.OK)
	}
	for _, k := range m.Kinds {
		own := rep.Find(map[string]string{"image": "bank-image", "payload": "bank-v2"}[k.Name])
		if want := 1e6 / own.PerCore["core"]; !near(k.CoreCPU, want) || !strings.HasPrefix(k.CoreCPUSource, "derived: "+own.Name) {
			t.Errorf("%s: core %v µs from %q, want %s's %v µs", k.Name, k.CoreCPU, k.CoreCPUSource, own.Name, want)
		}
	}
	if rep.Find("bank-v2").Kinds != nil {
		t.Error("a scenario of one kind reports kinds")
	}
}
