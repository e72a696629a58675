package main

import (
	"encoding/json"
	"os"
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
