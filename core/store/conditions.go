package store

import (
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/api"
)

// bucketConditions holds each branch's default conditions (branch id →
// JSON Conditions), which its v2 verifications apply where the request
// sets none of their kind. A branch without defaults has no key, and a
// store written before them has no bucket: it is made by the first write.
var bucketConditions = []byte("branch-conditions")

// Conditions are what a client expects of a slip besides its being real:
// its amount within [AmountMin, AmountMax] and its date within [DateFrom,
// DateTo], or no older than MaxAge at the verification. A nil bound, or a
// zero MaxAge, is not checked.
type Conditions struct {
	AmountMin *float64      `json:"amountMin,omitempty"`
	AmountMax *float64      `json:"amountMax,omitempty"`
	DateFrom  *time.Time    `json:"dateFrom,omitempty"`
	DateTo    *time.Time    `json:"dateTo,omitempty"`
	MaxAge    time.Duration `json:"maxAge,omitempty"`
}

// HasAmount reports whether c bounds the amount.
func (c *Conditions) HasAmount() bool { return c.AmountMin != nil || c.AmountMax != nil }

// HasDate reports whether c bounds the date.
func (c *Conditions) HasDate() bool { return c.DateFrom != nil || c.DateTo != nil || c.MaxAge != 0 }

// BranchConditions returns the default conditions of a branch of the
// service (the zero Conditions when it has none).
func (s *Bolt) BranchConditions(serviceID, branchID string) (Conditions, error) {
	var c Conditions
	err := s.db.View(func(tx *bolt.Tx) error {
		var b Branch
		if err := branchOf(tx, serviceID, branchID, &b); err != nil {
			return err
		}
		got, err := conditionsOf(tx, branchID)
		c = got
		return err
	})
	return c, err
}

// SetBranchConditions replaces the default conditions of a branch of the
// service (the zero Conditions removes them), audited as c.
func (s *Bolt) SetBranchConditions(serviceID, branchID string, cond Conditions, c Change) error {
	return s.write(func(tx *bolt.Tx) error {
		var b Branch
		if err := branchOf(tx, serviceID, branchID, &b); err != nil {
			return err
		}
		before, err := conditionsOf(tx, branchID)
		if err != nil {
			return err
		}
		bucket, err := tx.CreateBucketIfNotExists(bucketConditions)
		if err != nil {
			return err
		}
		if cond == (Conditions{}) {
			err = bucket.Delete([]byte(branchID))
		} else {
			err = putJSON(bucket, branchID, cond)
		}
		if err != nil {
			return err
		}
		return s.audit(tx, c, "branch.conditions", serviceID, api.AuditTarget{Type: "branch", ID: branchID}, before, cond)
	})
}

// conditionsOf reads a branch's default conditions in tx.
func conditionsOf(tx *bolt.Tx, branchID string) (Conditions, error) {
	var c Conditions
	b := tx.Bucket(bucketConditions)
	if b == nil {
		return c, nil
	}
	raw := b.Get([]byte(branchID))
	if raw == nil {
		return c, nil
	}
	return c, json.Unmarshal(raw, &c)
}
