package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/api"
)

// Refusals of management changes. Messages name the field and the reason;
// ErrRule wraps them so callers answer VALIDATION_ERROR.
var (
	ErrRule = errors.New("store: change refused")
)

func refuse(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrRule}, a...)...)
}

// BranchQuota is a branch's quota record (spec 2.2) and its service's.
type BranchQuota struct {
	Branch  Branch
	Usage   Usage
	Service Service
}

// Branches returns the branches of a service, main first, then by id.
func (s *Store) Branches(serviceID string) ([]Branch, error) {
	var out []Branch
	err := s.db.View(func(tx *bolt.Tx) error {
		return branchesByService.each(tx, serviceID, func(v []byte) error {
			var b Branch
			err := json.Unmarshal(v, &b)
			out = append(out, b)
			return err
		})
	})
	slices.SortFunc(out, func(a, b Branch) int {
		if a.Main != b.Main {
			if a.Main {
				return -1
			}
			return 1
		}
		return bytes.Compare([]byte(a.ID), []byte(b.ID))
	})
	return out, err
}

// Branch returns a branch of a service, or ErrNotFound.
func (s *Store) Branch(serviceID, branchID string) (Branch, error) {
	var b Branch
	err := s.db.View(func(tx *bolt.Tx) error { return branchOf(tx, serviceID, branchID, &b) })
	return b, err
}

func branchOf(tx *bolt.Tx, serviceID, branchID string, b *Branch) error {
	if err := getJSON(tx.Bucket(bucketBranches), branchID, b); err != nil {
		return err
	}
	if b.ServiceID != serviceID {
		return ErrNotFound
	}
	return nil
}

// CreateBranch stores a new branch whose key has digest keyDigest.
func (s *Store) CreateBranch(b Branch, c Change) error {
	return s.change(b.ServiceID, func(tx *bolt.Tx) error {
		if tx.Bucket(bucketBranches).Get([]byte(b.ID)) != nil || tx.Bucket(bucketKeys).Get([]byte(b.KeyDigest)) != nil {
			return refuse("id: a branch with this id exists")
		}
		if err := putJSON(tx.Bucket(bucketBranches), b.ID, b); err != nil {
			return err
		}
		if err := branchesByService.add(tx, b.ServiceID, b.ID); err != nil {
			return err
		}
		if err := tx.Bucket(bucketKeys).Put([]byte(b.KeyDigest), []byte(b.ID)); err != nil {
			return err
		}
		return s.audit(tx, c, "branch.create", b.ServiceID, api.AuditTarget{Type: "branch", ID: b.ID}, nil, b)
	})
}

// UpdateBranch applies change to a branch of a service atomically and
// returns the result. change returns an error to refuse.
func (s *Store) UpdateBranch(serviceID, branchID string, c Change, change func(*Branch, Usage) error) (Branch, error) {
	var q BranchQuota
	err := s.change(serviceID, func(tx *bolt.Tx) error {
		q = BranchQuota{}
		if err := s.quotaOf(tx, serviceID, branchID, &q); err != nil {
			return err
		}
		before := q.Branch
		if err := change(&q.Branch, q.Usage); err != nil {
			return err
		}
		if err := putJSON(tx.Bucket(bucketBranches), q.Branch.ID, q.Branch); err != nil {
			return err
		}
		return s.audit(tx, c, "branch.update", serviceID, api.AuditTarget{Type: "branch", ID: branchID}, before, q.Branch)
	})
	return q.Branch, err
}

// DeleteBranch deletes a branch that is not its service's main branch,
// with its key and links; its key stops working at once.
func (s *Store) DeleteBranch(serviceID, branchID string, c Change) error {
	return s.change(serviceID, func(tx *bolt.Tx) error {
		var b Branch
		if err := branchOf(tx, serviceID, branchID, &b); err != nil {
			return err
		}
		if b.Main {
			return refuse("branch: the main branch cannot be deleted")
		}
		accounts, err := accountsOf(tx, serviceID)
		if err != nil {
			return err
		}
		for _, a := range accounts {
			if i := slices.Index(a.Branches, branchID); i >= 0 {
				a.Branches = slices.Delete(a.Branches, i, i+1)
				if err := putJSON(tx.Bucket(bucketAccounts), a.ID, a); err != nil {
					return err
				}
			}
		}
		if err := tx.Bucket(bucketKeys).Delete([]byte(b.KeyDigest)); err != nil {
			return err
		}
		if p := b.Previous; p != nil {
			if err := tx.Bucket(bucketKeys).Delete([]byte(p.Digest)); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketQuota).Delete([]byte("b/" + branchID)); err != nil {
			return err
		}
		if err := branchesByService.remove(tx, serviceID, branchID); err != nil {
			return err
		}
		deleted := []byte(s.now().UTC().Format(time.RFC3339))
		if err := tx.Bucket(bucketBranchesDeleted).Put([]byte(branchID), deleted); err != nil {
			return err
		}
		if err := tx.Bucket(bucketBranches).Delete([]byte(branchID)); err != nil {
			return err
		}
		return s.audit(tx, c, "branch.delete", serviceID, api.AuditTarget{Type: "branch", ID: branchID}, b, nil)
	})
}

// Quota returns the quota records of a branch and its service.
func (s *Store) Quota(serviceID, branchID string) (BranchQuota, error) {
	var q BranchQuota
	err := s.db.View(func(tx *bolt.Tx) error { return s.quotaOf(tx, serviceID, branchID, &q) })
	return q, err
}

func (s *Store) quotaOf(tx *bolt.Tx, serviceID, branchID string, q *BranchQuota) error {
	if err := branchOf(tx, serviceID, branchID, &q.Branch); err != nil {
		return err
	}
	if err := getJSON(tx.Bucket(bucketServices), serviceID, &q.Service); err != nil {
		return err
	}
	now := s.now()
	q.Service = q.Service.At(now)
	q.Usage = periodUsage(tx, &q.Service, branchID, now)
	return nil
}

// ChangeQuota applies change to a branch's quota atomically with every
// verification: change sees the branch's current usage and returns the new
// limit and whether usedQuota resets, or an ErrRule refusal.
func (s *Store) ChangeQuota(serviceID, branchID, action string, c Change, change func(q BranchQuota) (limit *int64, reset bool, err error)) (BranchQuota, error) {
	var q BranchQuota
	err := s.change(serviceID, func(tx *bolt.Tx) error {
		q = BranchQuota{}
		if err := s.quotaOf(tx, serviceID, branchID, &q); err != nil {
			return err
		}
		before := q.Branch
		limit, reset, err := change(q)
		if err != nil {
			return err
		}
		q.Branch.LimitQuota = limit
		if reset {
			q.Usage.Branch.Used = 0
			if err := writeCounter(tx.Bucket(bucketQuota), "b/"+branchID, q.Usage.Branch); err != nil {
				return err
			}
		}
		if err := putJSON(tx.Bucket(bucketBranches), branchID, q.Branch); err != nil {
			return err
		}
		return s.audit(tx, c, action, serviceID, api.AuditTarget{Type: "branch", ID: branchID}, before, q.Branch)
	})
	return q, err
}

// Accounts returns a service's bank accounts; with branchID, only those
// linked to that branch.
func (s *Store) Accounts(serviceID, branchID string) ([]BankAccount, error) {
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
func (s *Store) CreateAccount(a *BankAccount, c Change) error {
	return s.change(a.ServiceID, func(tx *bolt.Tx) error {
		all, err := accountsOf(tx, a.ServiceID)
		if err != nil {
			return err
		}
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
func (s *Store) LinkAccount(serviceID, branchID, accountID string, link bool, c Change) (BankAccount, error) {
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
		i := slices.Index(a.Branches, branchID)
		switch {
		case link && i < 0:
			a.Branches = append(a.Branches, branchID)
		case !link && i < 0:
			return ErrNotFound
		case !link:
			a.Branches = slices.Delete(slices.Clone(a.Branches), i, i+1)
		}
		if err := putJSON(tx.Bucket(bucketAccounts), a.ID, a); err != nil {
			return err
		}
		action := "account.link"
		if !link {
			action = "account.unlink"
		}
		return s.audit(tx, c, action, serviceID, api.AuditTarget{Type: "account", ID: accountID}, nil, a)
	})
	return a, err
}
