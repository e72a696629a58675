package gateway_test

import (
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

// TestOneSpellingOfCredentials: the edge takes one spelling of each
// credential, because load balancers hash on the credential headers to
// send a key to one edge (its nonces and rate buckets). A header the edge
// ignored, repeated, or spelled another way would send a replay of a
// signed request, or a share of a branch's rate, to another edge.
func TestOneSpellingOfCredentials(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	// A signed request with an Authorization header beside its X-API-Key is
	// refused before its signature and nonce are looked at: sent clean,
	// the same request (same nonce) is then accepted once.
	sig := e.signed(keyMain, secretA, "GET", "/v2/info", "", 0, "")
	e.do(t, "GET", "/v2/info", "", append(sig, "Authorization", "anything")...).want(t, 401, "INVALID_API_KEY")
	e.do(t, "GET", "/v2/info", "", sig...).want(t, 200, "")
	e.do(t, "GET", "/v2/info", "", sig...).want(t, 401, "DUPLICATE_NONCE")
	for name, h := range map[string][]string{
		"scheme in lower case":  {"Authorization", "bearer " + keyMain},
		"scheme in upper case":  {"Authorization", "BEARER " + keyMain},
		"two spaces":            {"Authorization", "Bearer  " + keyMain},
		"two Authorization":     {"Authorization", "Bearer " + keyMain, "Authorization", "Bearer " + keyMain},
		"Bearer and X-API-Key":  {"Authorization", "Bearer " + keyMain, "X-API-Key", keyMain},
		"two X-API-Key, signed": append(e.signed(keyMain, secretA, "GET", "/v2/info", "", 0, ""), "X-API-Key", keyMain),
	} {
		if a := e.do(t, "GET", "/v2/info", "", h...); a.status != 401 || a.code() != "INVALID_API_KEY" {
			t.Errorf("%s: %d %s, want 401 INVALID_API_KEY", name, a.status, a.raw)
		}
	}
	// v1 takes Bearer only, and refuses an X-API-Key beside it too.
	e.do(t, "GET", "/me", "", "Authorization", "Bearer "+keyMain, "X-API-Key", keyMain).want(t, 401, "unauthorized")
	e.do(t, "GET", "/me", "", bearer(keyMain)...).want(t, 200, "")
}

// TestCredentialInTrailerIgnored: a key sent in a chunked body's trailer,
// where load balancers hashing on the credential headers never look, is no
// credential: the request is refused as one without a key. In the head,
// the same signed request is accepted.
func TestCredentialInTrailerIgnored(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	const body = `{"type":"promptpay","target":"0812345678","amount":1}`
	chunked := "Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n" +
		strconv.FormatInt(int64(len(body)), 16) + "\r\n" + body + "\r\n0\r\n"
	for _, c := range []struct {
		name, head, trailer string
		status              int
	}{
		{"key in the trailer", "", "X-API-Key: " + keyMain + "\r\n", 401},
		// A folded line (obs-fold) is refused whatever it holds.
		{"key in the trailer, a folded look-alike in the head", "X-Foo: a\r\n X-API-Key: " + keyMain + "\r\n", "X-API-Key: " + keyMain + "\r\n", 400},
		{"key in the head", "X-API-Key: " + keyMain + "\r\n", "", 200},
	} {
		sig := e.signed(keyMain, secretA, "POST", "/v2/qr/generate", body, 0, "")
		var head strings.Builder
		for i := 0; i < len(sig); i += 2 {
			if sig[i] != "X-API-Key" {
				head.WriteString(sig[i] + ": " + sig[i+1] + "\r\n")
			}
		}
		res := e.raw(t, "POST /v2/qr/generate HTTP/1.1\r\nHost: x\r\n"+head.String()+c.head+chunked+c.trailer+"\r\n")
		raw, _ := io.ReadAll(res.Body)
		if res.StatusCode != c.status || (c.status == 401 && !strings.Contains(string(raw), "MISSING_API_KEY")) ||
			(c.status == 400 && !strings.Contains(string(raw), "VALIDATION_ERROR")) {
			t.Errorf("%s: %d %s, want %d", c.name, res.StatusCode, raw, c.status)
		}
	}
}

// TestCompressedBodiesRefused: a body with a Content-Encoding is refused
// at the edge, whose size limit applies to bodies as sent: a gzipped
// multipart form of 300 KiB would inflate to hundreds of MiB further on.
func TestCompressedBodiesRefused(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	gz, contentType := testnet.GzipForm("image", 64<<20)
	for _, c := range []struct{ path, code string }{{"/v2/verify/bank", "VALIDATION_ERROR"}, {"/v2/verify/bank/async", "VALIDATION_ERROR"}} {
		a := e.do(t, "POST", c.path, string(gz), "Authorization", "Bearer "+keyMain,
			"Content-Type", contentType, "Content-Encoding", "gzip")
		a.want(t, 400, c.code)
		if msg, _ := get(a.body, "error", "message").(string); !strings.Contains(msg, "Content-Encoding") {
			t.Errorf("%s: the message does not say why: %s", c.path, a.raw)
		}
	}
	if a := e.do(t, "POST", "/verify", string(gz), "Authorization", "Bearer "+keyMain,
		"Content-Type", contentType, "Content-Encoding", "gzip"); a.status != 400 {
		t.Errorf("v1: %d %s, want 400", a.status, a.raw)
	}
	// identity is no encoding.
	e.do(t, "POST", "/v2/verify/bank", payload("015353134529BPM00008"), append(bearer(keyMain), "Content-Encoding", "identity")...).want(t, 200, "")
}

// TestTrailerCannotDropInternalHeaders: a request declaring trailers named
// like the edge's internal headers still reaches core with them (fasthttp
// leaves headers named in Trailer out of the head it writes).
func TestTrailerCannotDropInternalHeaders(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	for path, trailer := range map[string]string{"/v2/info": "X-Slip-Edge-Token", "/me": "X-Slip-Branch, X-Request-Id"} {
		res := e.raw(t, "GET "+path+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+keyMain+"\r\nTrailer: "+trailer+"\r\n\r\n")
		raw, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			t.Errorf("%s with Trailer: %s: %d %s", path, trailer, res.StatusCode, raw)
		}
	}
}

// TestFoldedHeadersRefused: a header line folded into the one before
// (obs-fold) is refused with 400 in the route's version, and the connection
// closed, rather than unfolded: a front end that reads it otherwise would
// see a second spelling of the credential, or of the framing.
func TestFoldedHeadersRefused(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	for _, c := range []struct{ name, request, want string }{
		{"a folded credential, v2", "GET /v2/info HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer\r\n " + keyMain + "\r\n\r\n", `"VALIDATION_ERROR"`},
		{"a folded line, tab, v2", "GET /v2/info HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + keyMain + "\r\nX-Note: a\r\n\tb\r\n\r\n", `"VALIDATION_ERROR"`},
		{"a folded line, v1", "GET /me HTTP/1.1\r\nHost: x\r\nX-Note: a\r\n b\r\nAuthorization: Bearer " + keyMain + "\r\n\r\n", `{"status":400,"message":"invalid_request"}`},
	} {
		res := e.raw(t, c.request)
		raw, _ := io.ReadAll(res.Body)
		if res.StatusCode != 400 || !strings.Contains(string(raw), c.want) || !res.Close {
			t.Errorf("%s: %d %s (close %v), want 400 %s and the connection closed", c.name, res.StatusCode, raw, res.Close, c.want)
		}
	}
	// A value with spaces and tabs inside a line is no fold.
	res := e.raw(t, "GET /v2/info HTTP/1.1\r\nHost: x\r\nX-Note: a \t b\r\nAuthorization: Bearer "+keyMain+"\r\n\r\n")
	if res.StatusCode != 200 {
		t.Errorf("spaces inside a value: %d", res.StatusCode)
	}
}
