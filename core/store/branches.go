package store

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/api"
)

// Branch is one of a service's branches. KeyDigest is the SHA-256 of its API
// key; WebhookSecret is sealed with the master key.
type Branch struct {
	ID            string     `json:"id"`
	ServiceID     string     `json:"serviceId"`
	Name          string     `json:"name"`
	Main          bool       `json:"main"`
	Active        bool       `json:"active"`
	IPAllow       []string   `json:"ipAllow"`
	LimitQuota    *int64     `json:"limitQuota"`
	WebhookURL    *string    `json:"webhookUrl"`
	WebhookSecret []byte     `json:"webhookSecret,omitempty"`
	KeyDigest     string     `json:"keyDigest"`
	KeyCreatedAt  *time.Time `json:"keyCreatedAt,omitempty"`
	// Previous is the key a rotation replaced, accepted until its
	// ExpiresAt (the end of the rotation's overlap).
	Previous *PreviousKey `json:"previousKey,omitempty"`
}

// Branches returns the branches of a service, main first, then by id.
func (s *Bolt) Branches(serviceID string) ([]Branch, error) {
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
func (s *Bolt) Branch(serviceID, branchID string) (Branch, error) {
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

// liveBranch reads a branch of a service that is not deleted.
func (s *Bolt) liveBranch(tx *bolt.Tx, serviceID, branchID string, b *Branch) error {
	if _, err := liveService(tx, serviceID); err != nil {
		return err
	}
	return branchOf(tx, serviceID, branchID, b)
}

// CreateBranch stores a new branch whose key has digest keyDigest.
func (s *Bolt) CreateBranch(b Branch, c Change) error {
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
func (s *Bolt) UpdateBranch(serviceID, branchID string, c Change, change func(*Branch, Usage) error) (Branch, error) {
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
func (s *Bolt) DeleteBranch(serviceID, branchID string, c Change) error {
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
