package seed

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/seedfile"
	"github.com/slipverify/slipverify/core/secret"
	"github.com/slipverify/slipverify/core/store"
)

// Loading twice inserts nothing the second time; secrets are stored sealed,
// keys as digests.
func TestLoadIsIdempotent(t *testing.T) {
	f, err := seedfile.Read("../../deploy/dev/seed.json")
	if err != nil {
		t.Fatal(err)
	}
	box, _ := secret.New(strings.Repeat("cd", 32))
	path := filepath.Join(t.TempDir(), "core.db")
	st, err := store.Open(path, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	n, err := st.InsertMissing(Records(f, box))
	if err != nil || n == 0 {
		t.Fatalf("first load: %d, %v", n, err)
	}
	if n, err = st.InsertMissing(Records(f, box)); err != nil || n != 0 {
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

// A seed's plan name, contact email and client names reach the store.
func TestReadKeepsPlanContactAndClientName(t *testing.T) {
	good := `{"services":[{"id":"s","name":"Shop","state":"active","quota":{"limit":1,"cycleAnchorDay":1},
	  "rate":{"bank":1,"wallet":1},"planName":"starter","contactEmail":"ops@shop.example",
	  "branches":[{"id":"b","name":"สาขา ลาดพร้าว","main":true,"key":"046745d7-0d0a-43c1-ad0d-0d2bb1f9edc2","active":true}],
	  "b2bClients":[{"name":"pos","key":"2a232a59efdb410251b6ccd2a186633fa1be58370cddcb8c2fbab4f61bdcbef8","secret":"0123456789abcdef","permissions":["branch:read"]}]}]}`
	p := filepath.Join(t.TempDir(), "seed.json")
	os.WriteFile(p, []byte(good), 0o600)
	f, err := seedfile.Read(p)
	if err != nil {
		t.Fatal(err)
	}
	box, _ := secret.New(strings.Repeat("cd", 32))
	r := Records(f, box)
	if sv := r.Services[0]; sv.PlanName != "starter" || sv.ContactEmail == nil || *sv.ContactEmail != "ops@shop.example" {
		t.Errorf("service record: %+v", sv)
	}
	if c := r.B2BClients[0]; c.Name != "pos" {
		t.Errorf("client record: %+v", c)
	}
}
