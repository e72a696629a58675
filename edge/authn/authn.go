// Package authn reads the credentials of a request: Bearer keys (spec 5.1)
// and HMAC-SHA256 signed requests (spec 5.2). It is on every request's path
// and allocates nothing; byte slices it returns alias the request and are
// valid only while the request is.
package authn

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"sync"
)

// Window is how far a signed request's timestamp may be from the server's
// clock, either way.
const Window = 5 * 60 // seconds

// Bearer returns the key of an Authorization header value "Bearer <key>",
// exactly so: the scheme as the spec writes it, one space, then the key.
// Load balancers hash on the header's bytes to send one key to one edge
// (its nonces and rate buckets), so every accepted spelling of a key must
// be the same string: "bearer <key>" or "Bearer  <key>" would be another
// edge's key. ok is false for anything else or an empty key.
func Bearer(h []byte) (key []byte, ok bool) {
	const scheme = "Bearer "
	if len(h) <= len(scheme) || string(h[:len(scheme)]) != scheme || bytes.ContainsAny(h[len(scheme):], " \t") {
		return nil, false
	}
	return h[len(scheme):], true
}

// ParseTimestamp reads X-Timestamp: Unix seconds, decimal digits only.
func ParseTimestamp(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 12 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// InWindow reports whether timestamp ts is within Window seconds of now.
func InWindow(ts, now int64) bool { return ts-now <= Window && now-ts <= Window }

// SignedPath returns the PATH of the string-to-sign for a request URI as
// sent: the path and, when present, ?query, without the /v2 prefix. A URI
// in absolute form (http://host/v2/info, which HTTP/1.1 servers accept)
// counts from its path, as it would have been sent to the host.
func SignedPath(requestURI []byte) []byte {
	if i := bytes.Index(requestURI, []byte("://")); i > 0 && requestURI[0] != '/' {
		rest := requestURI[i+3:]
		switch j := bytes.IndexAny(rest, "/?"); {
		case j < 0:
			return []byte("/")
		case rest[j] == '?':
			return append([]byte("/"), rest[j:]...)
		default:
			requestURI = rest[j:]
		}
	}
	if len(requestURI) >= 4 && string(requestURI[:3]) == "/v2" && (requestURI[3] == '/' || requestURI[3] == '?') {
		return requestURI[3:]
	}
	if string(requestURI) == "/v2" {
		return []byte("/")
	}
	return requestURI
}

// AppendStringToSign appends METHOD\nPATH\nTIMESTAMP\nNONCE\nBODY_SHA256 to
// dst, where BODY_SHA256 is the lowercase hex SHA-256 of the raw body.
func AppendStringToSign(dst, method, path, timestamp, nonce, body []byte) []byte {
	dst = append(dst, method...)
	dst = append(dst, '\n')
	dst = append(dst, path...)
	dst = append(dst, '\n')
	dst = append(dst, timestamp...)
	dst = append(dst, '\n')
	dst = append(dst, nonce...)
	dst = append(dst, '\n')
	sum := sha256.Sum256(body)
	return hex.AppendEncode(dst, sum[:])
}

// Signer checks signatures made with one secret. It is safe for concurrent
// use; each check borrows a keyed HMAC from a pool, so a hot secret costs no
// allocation per request. crypto/hmac keeps the key's inner and outer pad
// states after its first Reset and restores them on every later one, so a
// check hashes only the string to sign and the inner digest.
type Signer struct{ pool sync.Pool }

// mac is a pooled HMAC with room for its sum: Sum through the hash.Hash
// interface would move a stack buffer to the heap on every check.
type mac struct {
	h   hash.Hash
	sum [sha256.Size]byte
}

// NewSigner returns a Signer for secret (its UTF-8 bytes are the HMAC key).
func NewSigner(secret string) *Signer {
	key := []byte(secret)
	return &Signer{pool: sync.Pool{New: func() any { return &mac{h: hmac.New(sha256.New, key)} }}}
}

// sum returns the HMAC-SHA256 of stringToSign in m, borrowed from the pool;
// the caller puts m back when done with the sum.
func (s *Signer) sum(stringToSign []byte) (m *mac, sum []byte) {
	m = s.pool.Get().(*mac)
	m.h.Reset()
	m.h.Write(stringToSign)
	return m, m.h.Sum(m.sum[:0])
}

// Verify reports whether signatureHex (hex, either case) is the
// HMAC-SHA256 of stringToSign, comparing in constant time. It allocates
// nothing.
func (s *Signer) Verify(stringToSign, signatureHex []byte) bool {
	var got [sha256.Size]byte
	if len(signatureHex) != 2*sha256.Size {
		return false
	}
	if _, err := hex.Decode(got[:], signatureHex); err != nil {
		return false
	}
	m, want := s.sum(stringToSign)
	ok := hmac.Equal(got[:], want)
	s.pool.Put(m)
	return ok
}

// Sign returns the lowercase hex signature of stringToSign, as a client
// computes it.
func (s *Signer) Sign(stringToSign []byte) string {
	m, sum := s.sum(stringToSign)
	sig := hex.EncodeToString(sum)
	s.pool.Put(m)
	return sig
}
