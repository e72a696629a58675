package authn

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// Vectors from testdata/gen.py (Python's hmac and hashlib):
// python3 edge/authn/testdata/gen.py > edge/authn/testdata/signatures.json
type vector struct {
	Name, Secret, Method, RequestURI, Timestamp, Nonce, Body, StringToSign, Signature string
}

func vectors(t testing.TB) []vector {
	raw, err := os.ReadFile("testdata/signatures.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []vector
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatal(err)
	}
	return vs
}

func TestSignatureVectors(t *testing.T) {
	for _, v := range vectors(t) {
		sts := AppendStringToSign(nil, []byte(v.Method), SignedPath([]byte(v.RequestURI)), []byte(v.Timestamp), []byte(v.Nonce), []byte(v.Body))
		if string(sts) != v.StringToSign {
			t.Errorf("%s: string-to-sign\n%q\nwant\n%q", v.Name, sts, v.StringToSign)
		}
		s := NewSigner(v.Secret)
		if got := s.Sign(sts); got != v.Signature {
			t.Errorf("%s: signature %s, want %s", v.Name, got, v.Signature)
		}
		if !s.Verify(sts, []byte(v.Signature)) || !s.Verify(sts, []byte(strings.ToUpper(v.Signature))) {
			t.Errorf("%s: the right signature does not verify", v.Name)
		}
		bad := []byte(v.Signature)
		bad[10] ^= 1
		if s.Verify(sts, bad) || s.Verify(sts, []byte(v.Signature[:63])) || NewSigner(v.Secret+"x").Verify(sts, []byte(v.Signature)) {
			t.Errorf("%s: a wrong signature verifies", v.Name)
		}
	}
}

func TestBearer(t *testing.T) {
	f := func(h, want string, ok bool) {
		t.Helper()
		k, gotOK := Bearer([]byte(h))
		if string(k) != want || gotOK != ok {
			t.Errorf("Bearer(%q) = %q %v, want %q %v", h, k, gotOK, want, ok)
		}
	}
	f("Bearer abc", "abc", true)
	// One spelling only, so a load balancer's hash sends a key to one edge.
	f("bearer abc", "", false)
	f("BEARER abc", "", false)
	f("Bearer  abc", "", false)
	f("Bearer a bc", "", false)
	f("Basic abc", "", false)
	f("Bearer ", "", false)
	f("Bearer", "", false)
	f("Bearerabc", "", false)
	f("", "", false)
}

func TestTimestamps(t *testing.T) {
	f := func(s string, ok bool) {
		t.Helper()
		if _, got := ParseTimestamp([]byte(s)); got != ok {
			t.Errorf("ParseTimestamp(%q) ok = %v", s, got)
		}
	}
	f("1763800000", true)
	f("", false)
	f("-5", false)
	f("1.5", false)
	f("17638000000000", false)
	now := int64(1_763_800_000)
	if !InWindow(now-300, now) || !InWindow(now+300, now) || InWindow(now-301, now) || InWindow(now+301, now) {
		t.Error("window is not ±300 s inclusive")
	}
}

func TestSignedPath(t *testing.T) {
	for in, want := range map[string]string{
		"/v2/info": "/info", "/v2/info?x=1": "/info?x=1", "/v2": "/", "/v2?x": "?x",
		"/v2x/info": "/v2x/info", "/b2b/branches": "/b2b/branches", "/verify": "/verify",
		"http://edge.example/v2/info?x=1": "/info?x=1", "https://edge.example:8443/b2b/branches": "/b2b/branches",
		"http://edge.example": "/", "http://edge.example?x=1": "/?x=1",
	} {
		if got := string(SignedPath([]byte(in))); got != want {
			t.Errorf("SignedPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzSignedHeaders(f *testing.F) {
	for _, v := range vectors(f) {
		f.Add(v.Method, v.RequestURI, v.Timestamp, v.Nonce, v.Body, v.Signature)
	}
	s := NewSigner("fuzz-secret-000000000000")
	f.Fuzz(func(t *testing.T, method, uri, ts, nonce, body, sig string) {
		Bearer([]byte(sig))
		ParseTimestamp([]byte(ts))
		sts := AppendStringToSign(nil, []byte(method), SignedPath([]byte(uri)), []byte(ts), []byte(nonce), []byte(body))
		if s.Verify(sts, []byte(sig)) && sig != s.Sign(sts) && strings.ToLower(sig) != s.Sign(sts) {
			t.Fatalf("accepted a signature that is not the right one: %q", sig)
		}
		if !s.Verify(sts, []byte(s.Sign(sts))) {
			t.Fatal("own signature does not verify")
		}
	})
}

func BenchmarkVerify(b *testing.B) {
	v := vectors(b)[1]
	s := NewSigner(v.Secret)
	buf := make([]byte, 0, 512)
	method, uri, ts, nonce, body, sig := []byte(v.Method), []byte(v.RequestURI), []byte(v.Timestamp), []byte(v.Nonce), []byte(v.Body), []byte(v.Signature)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendStringToSign(buf[:0], method, SignedPath(uri), ts, nonce, body)
		if !s.Verify(buf, sig) {
			b.Fatal("no")
		}
	}
}

// TestVerifyAllocs: checking a signature, valid or not, allocates nothing
// once the signer's pool holds a keyed HMAC.
func TestVerifyAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	v := vectors(t)[1]
	s := NewSigner(v.Secret)
	sts := AppendStringToSign(nil, []byte(v.Method), SignedPath([]byte(v.RequestURI)), []byte(v.Timestamp), []byte(v.Nonce), []byte(v.Body))
	good, bad := []byte(v.Signature), []byte(strings.Repeat("0", 64))
	s.Verify(sts, good)
	if n := testing.AllocsPerRun(100, func() {
		if !s.Verify(sts, good) || s.Verify(sts, bad) {
			t.Fatal("wrong answer")
		}
	}); n != 0 {
		t.Errorf("Verify allocates %.1f times per call", n)
	}
}
