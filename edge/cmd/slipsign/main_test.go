package main

import (
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// TestSignMatchesVectors: slipsign signs exactly as the independent
// vectors of edge/authn/testdata say.
func TestSignMatchesVectors(t *testing.T) {
	raw, err := os.ReadFile("../../authn/testdata/signatures.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []struct{ Name, Secret, Method, RequestURI, Timestamp, Nonce, Body, Signature string }
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		var ts int64
		json.Unmarshal([]byte(v.Timestamp), &ts)
		h := Sign("k", v.Secret, v.Method, v.RequestURI, v.Body, time.Unix(ts, 0), v.Nonce)
		if h[1][1] != v.Timestamp || h[2][1] != v.Nonce || h[3][1] != v.Signature {
			t.Errorf("%s: %v, want signature %s", v.Name, h, v.Signature)
		}
	}
}

// TestRunNamesWhatIsMissing: without a key or a secret, run says which; the
// usage text (-h) never shows the secret from the environment.
func TestRunNamesWhatIsMissing(t *testing.T) {
	env := map[string]string{"SLIP_SIGN_KEY": "k", "SLIP_SIGN_SECRET": "secret-do-not-show"}
	getenv := func(k string) string { return env[k] }
	for _, c := range []struct {
		env  map[string]string
		want string
	}{{map[string]string{"SLIP_SIGN_SECRET": "s"}, "SLIP_SIGN_KEY"}, {map[string]string{"SLIP_SIGN_KEY": "k"}, "SLIP_SIGN_SECRET"}} {
		err := run([]string{"GET", "http://127.0.0.1:1/b2b/branches"}, func(k string) string { return c.env[k] }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("without %s: %v", c.want, err)
		}
	}
	r, w, _ := os.Pipe()
	stderr := os.Stderr
	os.Stderr = w
	run([]string{"-h"}, getenv, io.Discard)
	w.Close()
	os.Stderr = stderr
	usage, _ := io.ReadAll(r)
	if !strings.Contains(string(usage), "-secret") || strings.Contains(string(usage), env["SLIP_SIGN_SECRET"]) {
		t.Errorf("usage text:\n%s", usage)
	}
}
