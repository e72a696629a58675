package gateway_test

import (
	"io"
	"strings"
	"testing"

	"github.com/slipverify/slipverify/core/testnet"
)

// TestOneSpellingOfCredentials: the edge takes one spelling of each
// credential, because load balancers hash on the credential headers to
// send a key to one edge (its nonces and rate buckets). A header the edge
// ignored, repeated, or spelled another way would send a replay of a
// signed request, or a share of a branch's rate, to another edge.
func TestOneSpellingOfCredentials(t *testing.T) {
	e := startEdge(t, startCore(t, seed))
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

// TestCompressedBodiesRefused: a body with a Content-Encoding is refused
// at the edge, whose size limit applies to bodies as sent: a gzipped
// multipart form of 300 KiB would inflate to hundreds of MiB further on.
func TestCompressedBodiesRefused(t *testing.T) {
	e := startEdge(t, startCore(t, seed))
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
	e := startEdge(t, startCore(t, seed))
	for path, trailer := range map[string]string{"/v2/info": "X-Slip-Edge-Token", "/me": "X-Slip-Branch, X-Request-Id"} {
		res := e.raw(t, "GET "+path+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+keyMain+"\r\nTrailer: "+trailer+"\r\n\r\n")
		raw, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			t.Errorf("%s with Trailer: %s: %d %s", path, trailer, res.StatusCode, raw)
		}
	}
}
