package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/edge/authn"
)

// TestCredentialsNotForwarded: core learns the caller from the edge's
// identity headers and receives none of the credential that proved it: no
// Authorization for a Bearer key; no X-API-Key, X-Signature, X-Timestamp or
// X-Nonce for a signed request, of a branch or of a B2B client.
func TestCredentialsNotForwarded(t *testing.T) {
	s := startStack(t, nil)
	signed := func(key, method, uri string) []string {
		ts, nonce := fmt.Sprint(time.Now().Unix()), uuid.NewString()
		sts := authn.AppendStringToSign(nil, []byte(method), authn.SignedPath([]byte(uri)), []byte(ts), []byte(nonce), nil)
		return []string{"X-API-Key", key, "X-Timestamp", ts, "X-Nonce", nonce, "X-Signature", authn.NewSigner(clientSecret).Sign(sts)}
	}
	cases := map[string][]string{ // the request's marker in its query: its credential
		"/v2/info?case=bearer":   {"Authorization", "Bearer " + keyMain},
		"/v2/info?case=signed":   signed(keyMain, "GET", "/v2/info?case=signed"),
		"/b2b/branches?case=b2b": signed(clientKey, "GET", "/b2b/branches?case=b2b"),
	}
	for uri, header := range cases {
		req, _ := http.NewRequest("GET", s.url+uri, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", uri, res.StatusCode, body)
		}
	}
	got := map[string]http.Header{}
	for _, r := range s.rec.requests(t) {
		got[r.uri] = r.header
	}
	for uri := range cases {
		h, ok := got[uri]
		if !ok {
			t.Errorf("core never received GET %s", uri)
			continue
		}
		for _, name := range []string{"Authorization", "X-API-Key", "X-Signature", "X-Timestamp", "X-Nonce"} {
			if v := h.Values(name); len(v) > 0 {
				t.Errorf("GET %s: core received %s: %q", uri, name, v)
			}
		}
		if h.Get(api.HeaderService) != "svc" || h.Get(api.HeaderEdgeToken) != edgeToken {
			t.Errorf("GET %s: core received no identity: %v", uri, strings.Join(headerNames(h), ", "))
		}
	}
}

func headerNames(h http.Header) []string {
	var names []string
	for k := range h {
		names = append(names, k)
	}
	return names
}
