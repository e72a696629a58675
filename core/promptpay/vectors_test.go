// The golden vectors in testdata/vectors.json come from promptparse, the
// reference implementation, cross-checked with promptpay-qr. Regenerate them
// from the repository root with:
//
//	mkdir -p /tmp/pp2 && (cd /tmp/pp2 && npm init -y && npm install promptparse@1.6.0 promptpay-qr@0.5.0) &&
//	  PROMPTPARSE_PREFIX=/tmp/pp2 node core/promptpay/testdata/gen.mjs > core/promptpay/testdata/vectors.json
//
// CI has no node: the JSON is committed and only read here.

package promptpay

import (
	"slices"
	"testing"

	"github.com/slipverify/slipverify/core/internal/golden"
)

// vector is one entry of testdata/vectors.json; gen.mjs documents the fields.
type vector struct {
	Name        string   `json:"name"`
	Target      string   `json:"target"`
	Amount      *float64 `json:"amount"`
	Kind        string   `json:"kind"`
	Promptparse struct {
		Type    string `json:"type"`
		Target  string `json:"target"`
		Payload string `json:"payload"`
	} `json:"promptparse"`
	PromptpayQr struct {
		Payload  string `json:"payload"`
		Same     bool   `json:"same"`
		SameTags bool   `json:"sameTags"`
	} `json:"promptpayQr"`
	Tags []string `json:"tags"`
}

func loadVectors(tb testing.TB) []vector {
	tb.Helper()
	return golden.Vectors[vector](tb, "testdata/vectors.json", 40)
}

// TestVectors checks that Payload reproduces promptparse byte for byte, from
// the target as the user typed it, and classifies it as the vector says.
func TestVectors(t *testing.T) {
	kinds := map[Kind]int{}
	for _, v := range loadVectors(t) {
		got, err := Payload(v.Target, v.Amount)
		if err != nil {
			t.Errorf("%s: Payload(%q, %v): %v", v.Name, v.Target, fmtAmount(v.Amount), err)
			continue
		}
		if got != v.Promptparse.Payload {
			t.Errorf("%s: Payload(%q, %v)\n got %s\nwant %s (promptparse)", v.Name, v.Target, fmtAmount(v.Amount), got, v.Promptparse.Payload)
		}
		k, _, err := Classify(v.Target)
		if err != nil || k.String() != v.Kind {
			t.Errorf("%s: Classify(%q) = %v, %v; want %s", v.Name, v.Target, k, err, v.Kind)
		}
		kinds[k]++
	}
	for _, k := range []Kind{Phone, NationalID, EWallet} {
		if kinds[k] == 0 {
			t.Errorf("no vector of kind %v", k)
		}
	}
}

// TestVectorsPromptpayQr checks the payloads against promptpay-qr, the second
// generator: it must carry the same data objects as ours, though in another
// order (tag 58 before 53), so neither its bytes nor its CRC match.
func TestVectorsPromptpayQr(t *testing.T) {
	for _, v := range loadVectors(t) {
		ours, err := Payload(v.Target, v.Amount)
		if err != nil {
			continue // TestVectors reports it
		}
		theirs := v.PromptpayQr.Payload
		if !v.PromptpayQr.SameTags || (theirs == ours) != v.PromptpayQr.Same {
			t.Errorf("%s: vector flags disagree with its payloads; regenerate it", v.Name)
		}
		a, b := dataObjects(t, ours), dataObjects(t, theirs)
		if !slices.Equal(a, b) || !slices.Equal(a, v.Tags) {
			t.Errorf("%s: data objects differ\n ours         %q\n promptpay-qr %q\n gen.mjs      %q", v.Name, a, b, v.Tags)
		}
	}
}

// dataObjects lists the top-level data objects of a payload as "tag=value",
// sorted, without the CRC tag 63, after checking the framing and CRC.
func dataObjects(tb testing.TB, payload string) []string {
	tb.Helper()
	objs, err := parseTLV(payload)
	if err != nil {
		tb.Fatalf("%s: %v", payload, err)
	}
	var out []string
	for _, o := range objs {
		if o.tag != "63" {
			out = append(out, o.tag+"="+o.value)
		}
	}
	slices.Sort(out)
	return out
}

func fmtAmount(a *float64) any {
	if a == nil {
		return "nil"
	}
	return *a
}
