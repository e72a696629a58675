// Package tenant makes and reads the bench seed: services with many
// branches, keys, B2B clients and webhook secrets, with quotas and plan
// rates large enough that only the scenario under test limits a run. The
// file is in the seed format core loads through SLIP_SEED (idempotently),
// and the load generator reads the same file to learn its keys.
package tenant

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/slipverify/slipverify/core/lib/seedfile"
)

// Options shape a generated seed.
type Options struct {
	// Services and Branches: how many bench services, each with that many
	// branches (the first is the main branch).
	Services, Branches int
	// Rate is each bench service's plan rate per branch and budget
	// (requests a second), Quota its monthly quota.
	Rate  int
	Quota int64
	// OverloadBranches and OverloadRate shape the service the overload
	// scenario drives: few branches with a plan rate it can exceed.
	OverloadBranches, OverloadRate int
	// Seed makes the keys and secrets: the same seed, the same file.
	Seed uint64
}

// DefaultOptions is the bench seed committed as bench/seed.json.
var DefaultOptions = Options{Services: 4, Branches: 16, Rate: 5000, Quota: 1_000_000_000, OverloadBranches: 4, OverloadRate: 500, Seed: 8}

// OverloadService is the id of the service the overload scenario uses.
const OverloadService = "bench-overload"

// Branch is one branch as the generator uses it.
type Branch struct {
	ID, ServiceID string
	Key           string
	// Secret is the service's B2B client secret, which signs requests made
	// with the branch key.
	Secret string
	// WebhookSecret signs the branch's callbacks (empty: unsigned).
	WebhookSecret string
}

// Seed is a parsed seed file, reduced to what the generator needs.
type Seed struct {
	Branches []Branch
}

// Of returns the branches of the service id, or of every service but the
// overload one when id is empty.
func (s *Seed) Of(id string) []Branch {
	var out []Branch
	for _, b := range s.Branches {
		if b.ServiceID == id || (id == "" && b.ServiceID != OverloadService) {
			out = append(out, b)
		}
	}
	return out
}

func (o Options) check() error {
	var errs []error
	if o.Services < 1 || o.Branches < 1 || o.OverloadBranches < 1 {
		errs = append(errs, errors.New("tenant: services, branches and overload branches must be at least 1"))
	}
	if o.Rate < 1 || o.OverloadRate < 1 || o.Quota < 1 {
		errs = append(errs, errors.New("tenant: rates and quota must be at least 1"))
	}
	return errors.Join(errs...)
}

// Generate returns the bench seed file for o, as indented JSON.
func Generate(o Options) ([]byte, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(o.Seed, 0x5eed))
	hexOf := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return hex.EncodeToString(b)
	}
	uuid4 := func() string {
		h := []byte(hexOf(16))
		h[12] = '4'
		h[16] = "89ab"[r.IntN(4)]
		s := string(h)
		return s[:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
	}
	svc := func(id, name string, branches, planRate int) seedfile.Service {
		s := seedfile.Service{
			ID: id, Name: name, State: "active", Rate: seedfile.Rate{Bank: planRate, Wallet: planRate},
			B2BClients:   []seedfile.B2BClient{{Key: hexOf(32), Secret: "b2bsec_" + hexOf(24), Permissions: []string{"branch:read", "quota:read"}}},
			BankAccounts: []seedfile.BankAccount{},
		}
		s.Quota.Limit, s.Quota.CycleAnchorDay = o.Quota, 1
		for i := range branches {
			secret := "whsec_" + hexOf(16)
			s.Branches = append(s.Branches, seedfile.Branch{
				ID: fmt.Sprintf("%s-br%02d", id, i+1), Name: fmt.Sprintf("%s branch %d", name, i+1), Main: i == 0,
				Key: uuid4(), Active: true, IPAllow: []string{"*"}, WebhookSecret: &secret,
			})
		}
		return s
	}
	// No scripted slips: every generated payload gets a synthetic slip.
	f := seedfile.File{Sandbox: json.RawMessage(`{"slips":[],"notFound":[]}`)}
	for i := range o.Services {
		f.Services = append(f.Services, svc(fmt.Sprintf("bench-%d", i+1), fmt.Sprintf("Bench shop %d", i+1), o.Branches, o.Rate))
	}
	f.Services = append(f.Services, svc(OverloadService, "Bench overload", o.OverloadBranches, o.OverloadRate))
	out, err := json.MarshalIndent(f, "", "  ")
	return append(out, '\n'), err
}

// Read reads a seed file's branches with their signing and webhook
// secrets: those of active services, active and open to every address
// (the generator's address is not known in advance). A branch whose service
// has no B2B client cannot sign; its Secret is empty.
func Read(path string) (*Seed, error) {
	f, err := seedfile.Read(path) // core's own reader and checks: what it refuses, the bench refuses
	if err != nil {
		return nil, err
	}
	s := &Seed{}
	for _, svc := range f.Services {
		if svc.State != "active" || svc.UserBanned {
			continue
		}
		var secret string
		if len(svc.B2BClients) > 0 {
			secret = svc.B2BClients[0].Secret
		}
		for _, b := range svc.Branches {
			if !b.Active || (len(b.IPAllow) > 0 && !slices.Contains(b.IPAllow, "*")) {
				continue
			}
			br := Branch{ID: b.ID, ServiceID: svc.ID, Key: b.Key, Secret: secret}
			if b.WebhookSecret != nil {
				br.WebhookSecret = *b.WebhookSecret
			}
			s.Branches = append(s.Branches, br)
		}
	}
	if len(s.Branches) == 0 {
		return nil, fmt.Errorf("seed %s: no active branch of an active service open to every address", path)
	}
	return s, nil
}
