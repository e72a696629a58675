package seedfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The dev stack's seed and the architecture's example must both load.
func TestReadsShippedSeeds(t *testing.T) {
	for _, p := range []string{"../../../deploy/dev/seed.json", "../../bank/sandbox/testdata/seed.example.json"} {
		f, err := Read(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if len(f.Services) == 0 || len(f.Sandbox) == 0 {
			t.Errorf("%s: no services or no sandbox", p)
		}
	}
}

func TestReadReportsEveryProblem(t *testing.T) {
	bad := `{"services":[{"id":"s 1","name":"x","state":"paused","quota":{"limit":-1,"cycleAnchorDay":40},
	  "rate":{"bank":0,"wallet":1},
	  "branches":[{"id":"b","name":"b","main":false,"key":"NOT-A-UUID","active":true,"ipAllow":["*"],"limitQuota":-5}],
	  "b2bClients":[{"key":"abc","secret":"short","permissions":["branch:read","root"]}],
	  "bankAccounts":[{"id":"a","bankCode":"999","bankNumber":"12","name":{"th":"x","en":"x"},"branches":["nope"]}]}]}`
	p := filepath.Join(t.TempDir(), "seed.json")
	os.WriteFile(p, []byte(bad), 0o600)
	_, err := Read(p)
	if err == nil {
		t.Fatal("bad seed accepted")
	}
	for _, want := range []string{`service id "s 1"`, "state", "quota.limit", "cycleAnchorDay", "rate.bank",
		"key must be a lower-case UUID v4", "limitQuota", "exactly one main branch", "64 lower-case hex",
		"secret must be at least 16", `permission "root"`, "unknown bankCode", "bankNumber", `branch "nope"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	os.WriteFile(p, []byte(`{"services":[],"extra":1}`), 0o600)
	if _, err := Read(p); err == nil || !strings.Contains(err.Error(), "extra") {
		t.Errorf("unknown field accepted: %v", err)
	}
}

// A seed's names follow the API's rule: no control or bidirectional
// formatting characters, in any name it sets.
func TestReadRefusesUnsafeNames(t *testing.T) {
	bad := `{"services":[{"id":"s","name":"Shop\u202e","state":"active","quota":{"limit":1,"cycleAnchorDay":1},
	  "rate":{"bank":1,"wallet":1},"planName":"pro\u0000","contactEmail":"ops\u0085@shop.example",
	  "branches":[{"id":"b","name":"\u001b]0;OWNED\u0007\u001b[2J","main":true,"key":"046745d7-0d0a-43c1-ad0d-0d2bb1f9edc2","active":true}],
	  "b2bClients":[{"name":"pos\u2066","key":"2a232a59efdb410251b6ccd2a186633fa1be58370cddcb8c2fbab4f61bdcbef8","secret":"0123456789abcdef","permissions":["branch:read"]}],
	  "bankAccounts":[{"id":"a","bankCode":"014","bankNumber":"1234567890","name":{"th":"สมชาย\u200f","en":"SOMCHAI\u007f"},"branches":["b"]}]}]}`
	p := filepath.Join(t.TempDir(), "seed.json")
	os.WriteFile(p, []byte(bad), 0o600)
	_, err := Read(p)
	if err == nil {
		t.Fatal("a seed with unsafe names accepted")
	}
	for _, want := range []string{
		"service s: name: must not hold bidirectional formatting characters (U+202E)",
		"service s: planName: must not hold control characters (U+0000)",
		"service s: contactEmail: must not hold control characters (U+0085)",
		"branch b: name: must not hold control characters (U+001B)",
		"service s: b2b client name: must not hold bidirectional formatting characters (U+2066)",
		"bank account a: name.th: must not hold bidirectional formatting characters (U+200F)",
		"bank account a: name.en: must not hold control characters (U+007F)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
}
