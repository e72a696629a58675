// Package proxycompare holds the throughput comparison of the edge against
// a bare fasthttp proxy and nginx (see README.md and run.sh). Its tests
// check the pure-LuaJIT SHA-256/HMAC and the signed requests of
// lua/signed.lua against crypto/hmac and the edge's own verifier, with a
// standalone luajit (the same LuaJIT that wrk embeds; skipped where luajit is
// missing); its benchmarks time the edge's handler against a bare
// HostClient.Do without the kernel (handler_bench_test.go).
package proxycompare

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/edge/authn"
	"github.com/slipverify/slipverify/edge/nonce"
)

func luajit(t *testing.T, env []string, script string) string {
	t.Helper()
	bin, err := exec.LookPath("luajit")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("luajit not installed: CI installs it (.ci/run)")
		}
		t.Skip("luajit not installed (apt-get install luajit)")
	}
	cmd := exec.Command(bin, "-e", script)
	cmd.Dir = "lua"
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("luajit: %v\n%s", err, stderr.String())
	}
	return string(out)
}

func hmacHex(key, msg string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

// luaString quotes s as a Lua long-bracket-free string literal.
func luaString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "\\%d", s[i])
	}
	b.WriteByte('"')
	return b.String()
}

func TestLuaSHA256AndHMAC(t *testing.T) {
	stsExample := "POST\n/verify/bank\n1717225529\n3f1c2a9e-0001-4abc-8000-00000000002a\n" +
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	cases := []struct{ key, msg string }{
		{"key", "The quick brown fox jumps over the lazy dog"}, // the well-known vector
		{"bench-signing-secret-0123456789abcdef", stsExample},
		{"", ""},
		{strings.Repeat("k", 64), "exactly one block of key"},
		{strings.Repeat("long key ", 20), "a key longer than the block is hashed first"},
	}
	// messages of every length around the padding boundaries
	for n := 50; n <= 140; n++ {
		cases = append(cases, struct{ key, msg string }{"s3cr3t", strings.Repeat("x", n)})
	}
	var script strings.Builder
	script.WriteString(`dofile("signed.lua")` + "\n")
	for _, c := range cases {
		fmt.Fprintf(&script, "print(sha256_hex(%s), hmac_sha256_hex(%s, %s))\n", luaString(c.msg), luaString(c.key), luaString(c.msg))
	}
	lines := strings.Split(strings.TrimSpace(luajit(t, nil, script.String())), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("got %d lines, want %d", len(lines), len(cases))
	}
	if want := "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"; !strings.HasSuffix(lines[0], want) {
		t.Errorf("known vector: got %s, want %s", lines[0], want)
	}
	for i, c := range cases {
		sum := sha256.Sum256([]byte(c.msg))
		want := hex.EncodeToString(sum[:]) + "\t" + hmacHex(c.key, c.msg)
		if lines[i] != want {
			t.Errorf("case %d (key %d bytes, msg %d bytes):\n got %s\nwant %s", i, len(c.key), len(c.msg), lines[i], want)
		}
	}
}

// TestSignedRequests runs the wrk callbacks of signed.lua (setup for two
// threads, init, request) and checks each request as the edge would: nonce
// format, timestamp window, signature over the raw body, unique nonces.
func TestSignedRequests(t *testing.T) {
	const key = "6f1c2a9e-7b3d-4c5e-9f80-1a2b3c4d5e6f"
	const secret = "bench-signing-secret-0123456789abcdef"
	const perThread = 300
	script := `
wrk = { host = "127.0.0.1", port = 18180 }
dofile("signed.lua")
local states = {}
for t = 1, 2 do
  local th = { vars = {} }
  function th:set(k, v) self.vars[k] = v end
  setup(th)
  states[t] = th.vars
end
for t = 1, 2 do
  -- a fresh copy of the script per thread, as wrk gives each thread its own state
  local env = setmetatable({}, { __index = _G })
  for k, v in pairs(states[t]) do env[k] = v end
  local chunk = loadfile("signed.lua")
  setfenv(chunk, env)
  chunk()
  env.init({})
  for i = 1, ` + strconv.Itoa(perThread) + ` do
    io.write(env.request())
  end
end
`
	out := luajit(t, []string{"BENCH_KEY=" + key, "BENCH_SECRET=" + secret}, script)
	signer := authn.NewSigner(secret)
	seen := map[string]bool{}
	r := bufio.NewReader(strings.NewReader(out))
	now := time.Now().Unix()
	n := 0
	for {
		req, err := http.ReadRequest(r)
		if err != nil {
			if n != 2*perThread {
				t.Fatalf("read %d requests, want %d: %v", n, 2*perThread, err)
			}
			break
		}
		n++
		var body bytes.Buffer
		body.ReadFrom(req.Body)
		if req.Method != "POST" || req.RequestURI != "/v2/verify/bank" || req.Host != "127.0.0.1:18180" {
			t.Fatalf("request %d: %s %s host %s", n, req.Method, req.RequestURI, req.Host)
		}
		if req.Header.Get("X-API-Key") != key || req.Header.Get("Authorization") != "" {
			t.Fatalf("request %d: key headers %v", n, req.Header)
		}
		if int(req.ContentLength) != body.Len() {
			t.Fatalf("request %d: Content-Length %d, body %d bytes", n, req.ContentLength, body.Len())
		}
		tsRaw := req.Header.Get("X-Timestamp")
		ts, ok := authn.ParseTimestamp([]byte(tsRaw))
		if !ok || !authn.InWindow(ts, now) {
			t.Fatalf("request %d: timestamp %q", n, tsRaw)
		}
		nc := req.Header.Get("X-Nonce")
		if _, ok := nonce.ParseUUID([]byte(nc)); !ok {
			t.Fatalf("request %d: nonce %q is not a UUID v4", n, nc)
		}
		if strings.HasPrefix(nc, "00000000-") {
			t.Fatalf("request %d: nonce %q lacks the run's random bits", n, nc)
		}
		if seen[nc] {
			t.Fatalf("request %d: nonce %q repeated", n, nc)
		}
		seen[nc] = true
		sts := authn.AppendStringToSign(nil, []byte(req.Method), authn.SignedPath([]byte(req.RequestURI)),
			[]byte(tsRaw), []byte(nc), body.Bytes())
		sig := req.Header.Get("X-Signature")
		if !signer.Verify(sts, []byte(sig)) || sig != strings.ToLower(sig) {
			t.Fatalf("request %d: signature %s does not verify over %q", n, sig, sts)
		}
	}
}
