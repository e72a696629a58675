package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/slip"
	"github.com/slipverify/slipverify/edge/authn"
)

// TestSecretsNeverLogged runs the broker, core, the dispatcher and the edge
// as processes with known secrets in their configuration, sends them
// requests that carry secrets (valid and invalid credentials, signatures,
// a webhook secret, malformed requests that quote their headers), lets an
// async job's signed callback be delivered, starts each program once more
// with a bad configuration, and then finds none of the secrets in any byte
// the programs wrote.
func TestSecretsNeverLogged(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack as processes")
	}
	var (
		mu       sync.Mutex
		received []string // X-Service-Signature values the receiver got
	)
	rcv, caFile := testnet.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		received = append(received, r.Header.Get("X-Service-Signature"))
		mu.Unlock()
	}))
	kafka := testnet.FreeAddr(t)
	common := []string{"SLIP_KAFKA_ADDR=" + kafka, "SLIP_EDGE_TOKEN=" + edgeToken,
		"SLIP_EGRESS_ALLOW_CIDRS=127.0.0.0/8", "SLIP_EGRESS_CA_FILE=" + caFile}
	broker := testnet.StartBroker(t, append(common, "SLIP_BROKER_PARTITIONS=1")...)
	core := testnet.StartCore(t, testnet.Seed(t, seedJSON(rcv.URL+"/hook")), append(common, "SLIP_MASTER_KEY="+masterKey)...)
	dispatcher := testnet.StartDispatcher(t, kafka, append(common, "SLIP_WEBHOOK_TIMEOUT=5s")...)
	edge := testnet.StartEdge(t, core.Addr, common...)
	coreAddr, edgeAddr, url := core.Addr, edge.Addr, edge.URL()
	defer http.DefaultClient.CloseIdleConnections()

	secrets := map[string]string{"edge token": edgeToken, "master key": masterKey, "branch key": keyMain,
		"other branch key": keyOther, "b2b client key": clientKey, "b2b client secret": clientSecret,
		"webhook secret": webhookSecret}
	do := func(method, path, body string, header ...string) int {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	signed := func(key, secret, method, uri, body string) []string {
		ts, nonce := fmt.Sprint(time.Now().Unix()), uuid.NewString()
		sts := authn.AppendStringToSign(nil, []byte(method), authn.SignedPath([]byte(uri)), []byte(ts), []byte(nonce), []byte(body))
		sig := authn.NewSigner(secret).Sign(sts)
		secrets["request signature "+sig[:8]] = sig
		return []string{"X-API-Key", key, "X-Timestamp", ts, "X-Nonce", nonce, "X-Signature", sig}
	}
	payload := func(ref string) string {
		return `{"payload":"` + slip.Bank{BankCode: "004", TransRef: ref}.Encode() + `"}`
	}
	bearer := func(key string) []string { return []string{"Authorization", "Bearer " + key} }
	wrongKey := "9f8e7d6c-5b4a-4c3d-8e2f-1a0b9c8d7e6f" // well formed, unknown
	wrongSecret := "b2b-sec-wrong-secret-0a1b2c3d"
	secrets["unknown key"], secrets["wrong secret"] = wrongKey, wrongSecret
	newHookSecret := "whsec_sec_new_5e6f7a8b9c0d1e2f"
	secrets["new webhook secret"] = newHookSecret

	want := func(got, status int, what string) {
		t.Helper()
		if got != status {
			t.Errorf("%s: %d, want %d", what, got, status)
		}
	}
	// Valid and refused credentials, both schemes, both versions.
	want(do("POST", "/v2/verify/bank", payload("LOGSREF00001"), bearer(keyMain)...), 200, "Bearer verify")
	want(do("POST", "/verify", payload("LOGSREF00002"), bearer(keyOther)...), 200, "v1 verify")
	want(do("POST", "/v2/verify/bank", payload("LOGSREF00003"), bearer(wrongKey)...), 401, "unknown key")
	want(do("POST", "/verify", payload("LOGSREF00003"), "Authorization", "Bearer "+keyMain+"x"), 401, "malformed key")
	want(do("POST", "/v2/verify/bank", payload("LOGSREF00004"), signed(keyMain, clientSecret, "POST", "/v2/verify/bank", payload("LOGSREF00004"))...), 200, "signed verify")
	want(do("GET", "/b2b/branches", "", signed(clientKey, clientSecret, "GET", "/b2b/branches", "")...), 200, "signed b2b")
	want(do("GET", "/b2b/branches", "", signed(clientKey, wrongSecret, "GET", "/b2b/branches", "")...), 401, "wrong signature")
	want(do("GET", "/b2b/branches", "", "X-API-Key", clientKey, "X-Timestamp", "1", "X-Nonce", uuid.NewString(), "X-Signature", "00"), 401, "stale timestamp")
	hook := `{"webhookSecret":"` + newHookSecret + `"}`
	want(do("PATCH", "/b2b/branches/br-other", hook, signed(clientKey, clientSecret, "PATCH", "/b2b/branches/br-other", hook)...), 200, "set a webhook secret")
	bad := `{"webhookSecret":"` + newHookSecret + `","webhookUrl":"http://10.0.0.1/x"}`
	if got := do("PATCH", "/b2b/branches/br-other", bad, signed(clientKey, clientSecret, "PATCH", "/b2b/branches/br-other", bad)...); got < 400 {
		t.Errorf("a private webhook URL was accepted: %d", got)
	}
	// Internal headers forged by a client, and core asked directly with the
	// right and a wrong token.
	want(do("GET", "/v2/info", "", append(bearer(keyMain), "X-Slip-Edge-Token", edgeToken)...), 200, "forged edge token")
	for _, tok := range []string{edgeToken, edgeToken + "x", "wrong"} {
		req, _ := http.NewRequest("GET", "http://"+coreAddr+"/v2/info", nil)
		req.Header.Set("X-Slip-Edge-Token", tok)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}
	// Malformed requests that carry credentials, which an HTTP parser
	// would quote in its error.
	for _, addr := range []string{edgeAddr, coreAddr} {
		for _, r := range []string{
			"GET /v2/info HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + keyMain + "\r\nBad Header\r\n\r\n",
			"GET /b2b/branches HTTP/1.1\r\nHost: x\r\nX-API-Key: " + clientKey + "\r\nX-Signature: " + clientSecret + "\r\nX-Slip-Edge-Token: " + edgeToken + "\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
			"GET /v2/info HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + keyMain + "\r\nTransfer-Encoding: gzip\r\n\r\n",
			"GET /v2/info HTTP/1.1\r\nHost: x\r\nX-Slip-Edge-Token: " + edgeToken + "\r\nX-A: \x01" + webhookSecret + "\r\n\r\n",
			"GET /v2/info HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + keyMain + "\r\nX-Big: " + strings.Repeat("a", 8000) + "\r\n\r\n",
		} {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(20 * time.Second))
			io.WriteString(c, r)
			io.ReadAll(c)
			c.Close()
		}
	}
	// An async job whose callback core signs with the webhook secret.
	body := `{"payload":"` + slip.Bank{BankCode: "004", TransRef: "LOGSREF00005"}.Encode() + `","callbackUrl":"` + rcv.URL + `/hook"}`
	want(do("POST", "/v2/verify/bank/async", body, bearer(keyMain)...), 202, "async submit")
	testnet.Eventually(t, 60*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(received) > 0 },
		func() string { return "no callback delivered" })
	mu.Lock()
	for _, sig := range received {
		if !strings.HasPrefix(sig, "sha256=") {
			t.Errorf("callback signature %q", sig)
		}
		secrets["callback signature"] = strings.TrimPrefix(sig, "sha256=")
	}
	mu.Unlock()

	// Every program stopped as an operator stops it, so its last words are
	// in its output too.
	outputs := map[string]string{}
	for name, p := range map[string]*testnet.Program{"edge": edge, "dispatcher": dispatcher, "core": core, "broker": broker} {
		p.Stop()
		outputs[name] = p.Output()
	}
	// Bad configurations: each program refuses to start, naming the
	// problem, not the secret it was given.
	badMaster, shortToken := "not-hex-master-key-3c9a7e1f5b2d", "short-token-5b7e"
	secrets["bad master key"], secrets["short edge token"] = badMaster, shortToken
	// A program that starts after all is killed after a minute, and fails
	// the test below. (The dispatcher holds no secret of its own.)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	coreBin, edgeBin := testnet.Build(t, "core/cmd/core"), testnet.Build(t, "edge/cmd/edge")
	for name, run := range map[string]*exec.Cmd{
		"core, bad master key": exec.CommandContext(ctx, coreBin), "core, short token": exec.CommandContext(ctx, coreBin),
		"edge, short token": exec.CommandContext(ctx, edgeBin),
		"core -validate":    exec.CommandContext(ctx, coreBin, "-validate"), "edge -validate": exec.CommandContext(ctx, edgeBin, "-validate"),
	} {
		env := []string{"SLIP_DATA_DIR=" + t.TempDir(), "SLIP_KAFKA_ADDR=" + kafka, "SLIP_CORE_ADDR=" + testnet.FreeAddr(t),
			"SLIP_EDGE_ADDR=" + testnet.FreeAddr(t), "SLIP_SEED=none", "SLIP_EDGE_METRICS_ADDR=off",
			"SLIP_DISPATCHER_ADDR=" + testnet.FreeAddr(t)}
		switch name {
		case "core, bad master key":
			env = append(env, "SLIP_MASTER_KEY="+badMaster, "SLIP_EDGE_TOKEN="+edgeToken)
		case "core -validate", "edge -validate":
			env = append(env, "SLIP_MASTER_KEY="+badMaster, "SLIP_EDGE_TOKEN="+shortToken)
		default:
			env = append(env, "SLIP_MASTER_KEY="+masterKey, "SLIP_EDGE_TOKEN="+shortToken)
		}
		run.Env = append(os.Environ(), env...)
		out, err := run.CombinedOutput()
		if err == nil {
			t.Errorf("%s: started or validated with a bad configuration:\n%s", name, out)
		}
		outputs[name] = string(out)
	}
	for name, text := range outputs {
		if name == "edge" && !strings.Contains(text, "listening") {
			t.Errorf("no output captured from %s", name)
		}
		for what, secret := range secrets {
			if strings.Contains(text, secret) {
				i := strings.Index(text, secret)
				t.Errorf("%s wrote the %s: …%s…", name, what, text[max(0, i-200):min(len(text), i+len(secret)+50)])
			}
		}
	}
}
