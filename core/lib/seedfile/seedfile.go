// Package seedfile is the seed file's format, its reading and its checks:
// services with their branches, keys, B2B clients and bank accounts, and
// the sandbox bank's scripted slips. Operators write it, core loads it at
// start (core/seed turns it into store records) and the bench writes and
// reads it, so it imports only the contract and the shared runtime: what
// core refuses, the bench refuses.
package seedfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/iplist"
)

// File is a seed file.
type File struct {
	Services []Service `json:"services"`
	// Sandbox is the sandbox bank's configuration, read by that bank.
	Sandbox json.RawMessage `json:"sandbox"`
}

// Service is a service as the seed file writes it.
type Service struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	State      string `json:"state"`
	UserBanned bool   `json:"userBanned"`
	Quota      struct {
		Limit          int64 `json:"limit"`
		CycleAnchorDay int   `json:"cycleAnchorDay"`
	} `json:"quota"`
	Rate         Rate          `json:"rate"`
	PlanName     string        `json:"planName,omitempty"`     // the plan's name, as GET /v2/info shows it
	ContactEmail *string       `json:"contactEmail,omitempty"` // the operator's contact, as GET /v2/info shows it
	Branches     []Branch      `json:"branches"`
	B2BClients   []B2BClient   `json:"b2bClients"`
	BankAccounts []BankAccount `json:"bankAccounts"`
}

// Rate is a service plan's verification rate per budget, in requests per
// second per branch; core's store keeps it as it is.
type Rate struct {
	Bank   int `json:"bank"`
	Wallet int `json:"wallet"`
}

// Branch is a branch as the seed file writes it, with its key in clear.
type Branch struct {
	ID            string   `json:"id"`
	Name          string   `json:"name"`
	Main          bool     `json:"main"`
	Key           string   `json:"key"`
	Active        bool     `json:"active"`
	IPAllow       []string `json:"ipAllow"`
	LimitQuota    *int64   `json:"limitQuota"`
	WebhookURL    *string  `json:"webhookUrl"`
	WebhookSecret *string  `json:"webhookSecret"`
}

// B2BClient is a management client with its key and secret in clear.
type B2BClient struct {
	Name        string   `json:"name,omitempty"`
	Key         string   `json:"key"`
	Secret      string   `json:"secret"`
	Permissions []string `json:"permissions"`
}

// BankAccount is a receiving account linked to branches.
type BankAccount struct {
	ID         string      `json:"id"`
	BankCode   string      `json:"bankCode"`
	BankNumber string      `json:"bankNumber"`
	Name       AccountName `json:"name"`
	Type       string      `json:"type"` // PERSONAL or JURISTIC; empty: as the name tells
	Branches   []string    `json:"branches"`
}

// AccountName is an account holder's Thai and English name; core's store
// keeps it as it is.
type AccountName struct {
	TH string `json:"th"`
	EN string `json:"en"`
}

var (
	uuidV4   = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	hex64    = regexp.MustCompile(`^[0-9a-f]{64}$`)
	digits   = regexp.MustCompile(`^[0-9]{6,20}$`)
	validIDs = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
)

// Read reads and checks the seed file at path. Unknown fields are refused;
// every problem is reported at once.
func Read(path string) (File, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return File{}, err
	}
	var f File
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return File{}, fmt.Errorf("seed %s: %w", path, err)
	}
	if err := f.check(); err != nil {
		return File{}, fmt.Errorf("seed %s: %w", path, err)
	}
	return f, nil
}

func (f File) check() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	ids, keys := map[string]bool{}, map[string]bool{}
	unique := func(kind, id string) {
		if !validIDs.MatchString(id) {
			bad("%s id %q: 1 to 64 letters, digits, '.', '_' or '-'", kind, id)
		}
		if ids[kind+" "+id] {
			bad("%s id %q used twice", kind, id)
		}
		ids[kind+" "+id] = true
	}
	for _, s := range f.Services {
		unique("service", s.ID)
		switch s.State {
		case api.StateActive, api.StateExpired, api.StateBanned:
		default:
			bad("service %s: state %q is not active, expired or banned", s.ID, s.State)
		}
		if s.Quota.Limit < 0 {
			bad("service %s: quota.limit must not be negative", s.ID)
		}
		if s.Quota.CycleAnchorDay < 1 || s.Quota.CycleAnchorDay > 31 {
			bad("service %s: quota.cycleAnchorDay must be 1 to 31", s.ID)
		}
		if s.Rate.Bank < 1 || s.Rate.Wallet < 1 {
			bad("service %s: rate.bank and rate.wallet must be at least 1", s.ID)
		}
		name := func(what, n string) {
			if p := api.NameProblem(n); p != "" {
				bad("%s: %s", what, p)
			}
		}
		name("service "+s.ID+": name", s.Name)
		name("service "+s.ID+": planName", s.PlanName)
		if s.ContactEmail != nil {
			if p := api.EmailProblem(*s.ContactEmail); p != "" {
				bad("service %s: contactEmail: %s", s.ID, p)
			}
		}
		mains, branches := 0, map[string]bool{}
		for _, b := range s.Branches {
			unique("branch", b.ID)
			name("branch "+b.ID+": name", b.Name)
			branches[b.ID] = true
			if b.Main {
				mains++
			}
			if !uuidV4.MatchString(b.Key) {
				bad("branch %s: key must be a lower-case UUID v4", b.ID)
			} else if keys[b.Key] {
				bad("branch %s: key used twice", b.ID)
			}
			keys[b.Key] = true
			for _, msg := range iplist.Check(b.IPAllow) {
				bad("branch %s: ipAllow %s", b.ID, msg)
			}
			if b.LimitQuota != nil && *b.LimitQuota < 0 {
				bad("branch %s: limitQuota must not be negative", b.ID)
			}
		}
		if mains != 1 {
			bad("service %s: needs exactly one main branch, has %d", s.ID, mains)
		}
		for _, c := range s.B2BClients {
			name("service "+s.ID+": b2b client name", c.Name)
			if !hex64.MatchString(c.Key) {
				bad("service %s: b2b client key must be 64 lower-case hex digits", s.ID)
			} else if keys[c.Key] {
				bad("service %s: b2b client key used twice", s.ID)
			}
			keys[c.Key] = true
			if len(c.Secret) < 16 {
				bad("service %s: b2b client secret must be at least 16 characters", s.ID)
			}
			for _, p := range c.Permissions {
				if api.PermissionBit(p) == 0 {
					bad("service %s: unknown b2b permission %q", s.ID, p)
				}
			}
		}
		for _, a := range s.BankAccounts {
			unique("bank account", a.ID)
			name("bank account "+a.ID+": name.th", a.Name.TH)
			name("bank account "+a.ID+": name.en", a.Name.EN)
			if a.Type != "" && !api.ValidAccountType(a.Type) {
				bad("bank account %s: type %q is not PERSONAL or JURISTIC", a.ID, a.Type)
			}
			if _, ok := api.LookupBank(a.BankCode); !ok {
				bad("bank account %s: unknown bankCode %q", a.ID, a.BankCode)
			}
			if !digits.MatchString(a.BankNumber) {
				bad("bank account %s: bankNumber must be 6 to 20 digits", a.ID)
			}
			for _, b := range a.Branches {
				if !branches[b] {
					bad("bank account %s: branch %q is not a branch of service %s", a.ID, b, s.ID)
				}
			}
		}
	}
	return errors.Join(errs...)
}
