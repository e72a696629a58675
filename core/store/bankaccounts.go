package store

import (
	"encoding/json"
	"errors"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/seedfile"
	"github.com/slipverify/slipverify/core/receiver"
)

// BankAccount is a receiving account of a service, linked to branches.
// Type is receiver.Personal or receiver.Juristic; empty (an account
// created without one) means the type its name tells.
type BankAccount struct {
	ID         string      `json:"id"`
	ServiceID  string      `json:"serviceId"`
	BankCode   string      `json:"bankCode"`
	BankNumber string      `json:"bankNumber"`
	Name       AccountName `json:"name"`
	Type       string      `json:"type,omitempty"`
	Branches   []string    `json:"branches"`
	Active     bool        `json:"active"`
}

// AccountType returns the account's type: as given, or as its name tells.
func (a BankAccount) AccountType() string {
	if a.Type != "" {
		return a.Type
	}
	return receiver.AccountType(a.Name.TH, a.Name.EN)
}

// AccountName is an account holder's Thai and English name: the seed
// file's, kept as it is written there.
type AccountName = seedfile.AccountName

// Accounts returns a service's bank accounts; with branchID, only those
// linked to that branch.
func (s *Bolt) Accounts(serviceID, branchID string) ([]BankAccount, error) {
	var out []BankAccount
	err := s.db.View(func(tx *bolt.Tx) error {
		all, err := accountsOf(tx, serviceID)
		for _, a := range all {
			if branchID == "" || slices.Contains(a.Branches, branchID) {
				out = append(out, a)
			}
		}
		return err
	})
	return out, err
}

// Bounds on one service's bank accounts: each is read (in the one write
// transaction at a time) whenever the service creates another, and by
// every receiver check.
const (
	MaxAccountsPerService = 1000
	MaxAccountBranches    = 1000 // branches one account is linked to at creation
)

// accountsOf returns a service's bank accounts, ordered by id.
func accountsOf(tx *bolt.Tx, serviceID string) ([]BankAccount, error) {
	var out []BankAccount
	err := accountsByService.each(tx, serviceID, func(v []byte) error {
		var a BankAccount
		err := json.Unmarshal(v, &a)
		out = append(out, a)
		return err
	})
	return out, err
}

// CreateAccount stores a bank account, refusing with ErrAccountDuplicate an
// active account of the service with the same bankCode and bankNumber, and
// with ErrNotFound a branch to link that is not the service's. A branch
// listed twice is linked once: a.Branches is left as stored.
func (s *Bolt) CreateAccount(a *BankAccount, c Change) error {
	return s.change(a.ServiceID, func(tx *bolt.Tx) error {
		all, err := accountsOf(tx, a.ServiceID)
		if err != nil {
			return err
		}
		if err := CheckAccount(all, a); err != nil {
			return err
		}
		for _, b := range a.Branches {
			var br Branch
			if err := branchOf(tx, a.ServiceID, b, &br); err != nil {
				return err
			}
		}
		if tx.Bucket(bucketAccounts).Get([]byte(a.ID)) != nil {
			return refuse("id: an account with this id exists")
		}
		if err := putJSON(tx.Bucket(bucketAccounts), a.ID, *a); err != nil {
			return err
		}
		if err := accountsByService.add(tx, a.ServiceID, a.ID); err != nil {
			return err
		}
		return s.audit(tx, c, "account.create", a.ServiceID, api.AuditTarget{Type: "account", ID: a.ID}, nil, *a)
	})
}

// CheckAccount refuses a new account a of a service holding all: past
// MaxAccountsPerService, with more than MaxAccountBranches branches, or
// with ErrAccountDuplicate an active account with the same bankCode and
// bankNumber. A branch listed twice is linked once: a.Branches is left as
// it is to be stored.
func CheckAccount(all []BankAccount, a *BankAccount) error {
	if len(all) >= MaxAccountsPerService {
		return refuse("a service holds at most %d bank accounts", MaxAccountsPerService)
	}
	for _, o := range all {
		if o.Active && o.BankCode == a.BankCode && o.BankNumber == a.BankNumber {
			return ErrAccountDuplicate
		}
	}
	if len(a.Branches) > MaxAccountBranches {
		return refuse("branches: at most %d", MaxAccountBranches)
	}
	a.Branches = distinct(a.Branches)
	return nil
}

// Link links (link true) or unlinks the account to a branch and returns
// the action's name for the audit log. Unlinking an account that is not
// linked is ErrNotFound.
func (a *BankAccount) Link(branchID string, link bool) (action string, err error) {
	i := slices.Index(a.Branches, branchID)
	switch {
	case link && i < 0:
		a.Branches = append(a.Branches, branchID)
	case !link && i < 0:
		return "", ErrNotFound
	case !link:
		a.Branches = slices.Delete(slices.Clone(a.Branches), i, i+1)
	}
	if link {
		return "account.link", nil
	}
	return "account.unlink", nil
}

// distinct returns ids without repeats, in their first order.
func distinct(ids []string) []string {
	out := ids[:0:0]
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// ErrAccountDuplicate refuses a second active account with the same bank
// code and number in a service.
var ErrAccountDuplicate = errors.New("store: duplicate bank account")

// LinkAccount links (link true) or unlinks an account of a service to one
// of its branches. Unlinking an account that is not linked is ErrNotFound.
func (s *Bolt) LinkAccount(serviceID, branchID, accountID string, link bool, c Change) (BankAccount, error) {
	var a BankAccount
	err := s.change(serviceID, func(tx *bolt.Tx) error {
		a = BankAccount{}
		var br Branch
		if err := branchOf(tx, serviceID, branchID, &br); err != nil {
			return err
		}
		if err := getJSON(tx.Bucket(bucketAccounts), accountID, &a); err != nil {
			return err
		}
		if a.ServiceID != serviceID {
			return ErrNotFound
		}
		action, err := a.Link(branchID, link)
		if err != nil {
			return err
		}
		if err := putJSON(tx.Bucket(bucketAccounts), a.ID, a); err != nil {
			return err
		}
		return s.audit(tx, c, action, serviceID, api.AuditTarget{Type: "account", ID: accountID}, nil, a)
	})
	return a, err
}
