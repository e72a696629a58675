package seed

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/secret"
	"github.com/slipverify/slipverify/core/store"
)

// The dev stack's seed and the architecture's example must both load.
func TestReadsShippedSeeds(t *testing.T) {
	for _, p := range []string{"../../deploy/dev/seed.json", "../bank/sandbox/testdata/seed.example.json"} {
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

// Loading twice inserts nothing the second time; secrets are stored sealed,
// keys as digests.
func TestLoadIsIdempotent(t *testing.T) {
	f, err := Read("../../deploy/dev/seed.json")
	if err != nil {
		t.Fatal(err)
	}
	box, _ := secret.New(strings.Repeat("cd", 32))
	path := filepath.Join(t.TempDir(), "core.db")
	st, err := store.Open(path, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	n, err := st.InsertMissing(f.Records(box))
	if err != nil || n == 0 {
		t.Fatalf("first load: %d, %v", n, err)
	}
	if n, err = st.InsertMissing(f.Records(box)); err != nil || n != 0 {
		t.Fatalf("second load inserted %d (%v), want 0", n, err)
	}
	st.Close()
	raw, _ := os.ReadFile(path)
	for _, b := range f.Services[0].Branches {
		if strings.Contains(string(raw), b.Key) {
			t.Errorf("branch key %s stored in clear", b.ID)
		}
	}
	for _, c := range f.Services[0].B2BClients {
		if strings.Contains(string(raw), c.Secret) || strings.Contains(string(raw), c.Key) {
			t.Error("b2b key or secret stored in clear")
		}
	}
}
