package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/quota"
	"github.com/slipverify/slipverify/core/receiver"
)

// Service is a client account (application). Its plan is its name,
// QuotaLimit, CycleAnchorDay and Rate; Pending, when set, replaces them
// from a later period (At applies it).
type Service struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	State          string `json:"state"` // active, expired, banned or deleted
	UserBanned     bool   `json:"userBanned"`
	QuotaLimit     int64  `json:"quotaLimit"`
	CycleAnchorDay int    `json:"cycleAnchorDay"`
	Rate           Rate   `json:"rate"`
	PlanName       string `json:"planName,omitempty"`
	// ExpiresAt, when set, is the end of the service's term: from then on
	// it is expired (At), with no sweep to wait for.
	ExpiresAt    *time.Time   `json:"expiresAt,omitempty"`
	ContactEmail *string      `json:"contactEmail,omitempty"`
	StateReason  string       `json:"stateReason,omitempty"`
	CreatedAt    *time.Time   `json:"createdAt,omitempty"`
	Pending      *PendingPlan `json:"pendingPlan,omitempty"`
	// AnchorSince is when CycleAnchorDay took effect (Unix seconds; 0: it
	// always was): a plan that moved the anchor starts a period there.
	AnchorSince int64 `json:"anchorSince,omitempty"`
}

// PeriodStart returns the start of the billing period holding t: at the
// anchor day's midnight in Bangkok (quota.PeriodStart), but never before
// the anchor took effect, so the first period under a new anchor runs from
// the old one's end to the new anchor day.
func (sv *Service) PeriodStart(t time.Time) time.Time {
	start := quota.PeriodStart(t, sv.CycleAnchorDay)
	if since := time.Unix(sv.AnchorSince, 0).In(quota.Bangkok); sv.AnchorSince != 0 && start.Before(since) {
		return since
	}
	return start
}

// PeriodEnd returns the start of the period after the one beginning at
// start.
func (sv *Service) PeriodEnd(start time.Time) time.Time {
	return quota.PeriodEnd(quota.PeriodStart(start, sv.CycleAnchorDay), sv.CycleAnchorDay)
}

// Plan is what a service's plan sets.
type Plan struct {
	Name           string `json:"name"`
	QuotaLimit     int64  `json:"quotaLimit"`
	Rate           Rate   `json:"rate"`
	CycleAnchorDay int    `json:"cycleAnchorDay"`
}

// PendingPlan is a plan that applies from the period starting at From
// (Unix seconds).
type PendingPlan struct {
	Plan
	From int64 `json:"from"`
}

// Plan returns the service's plan now in force, as stored.
func (sv *Service) Plan() Plan {
	return Plan{Name: sv.PlanName, QuotaLimit: sv.QuotaLimit, Rate: sv.Rate, CycleAnchorDay: sv.CycleAnchorDay}
}

// setPlan puts p in force.
func (sv *Service) setPlan(p Plan) {
	sv.PlanName, sv.QuotaLimit, sv.Rate, sv.CycleAnchorDay = p.Name, p.QuotaLimit, p.Rate, p.CycleAnchorDay
}

// At returns the service as it stands at t: a pending plan whose period
// has begun in force, and an active service past its end date expired.
// Every reader that decides by a service's plan or state reads it through
// At, so a change made ahead of time takes effect at its instant.
func (sv Service) At(t time.Time) Service {
	if p := sv.Pending; p != nil && t.Unix() >= p.From {
		if p.CycleAnchorDay != sv.CycleAnchorDay {
			sv.AnchorSince = p.From
		}
		sv.setPlan(p.Plan)
		sv.Pending = nil
	}
	sv.State = api.StateAt(sv.State, sv.ExpiresAt, t)
	return sv
}

// Service states (core/api's, the edge reads them too), and deleted: a
// deleted service's keys are unknown keys, and its id is never reused.
const (
	StateActive  = api.StateActive
	StateExpired = api.StateExpired
	StateBanned  = api.StateBanned
	StateDeleted = "deleted"
)

// Rate is a service plan's verification rate per budget, in requests per
// second per branch.
type Rate struct {
	Bank   int `json:"bank"`
	Wallet int `json:"wallet"`
}

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

// PreviousKey is a rotated branch key during its overlap.
type PreviousKey struct {
	Digest    string     `json:"digest"`
	CreatedAt *time.Time `json:"createdAt,omitempty"`
	ExpiresAt time.Time  `json:"expiresAt"`
}

// B2BClient is a management client of a service. Its Secret is sealed with
// the master key; the record is stored under the digest of its key.
type B2BClient struct {
	Seq         uint64   `json:"seq"` // creation order within the store
	KeyDigest   string   `json:"keyDigest"`
	ServiceID   string   `json:"serviceId"`
	Secret      []byte   `json:"secret"`
	Permissions []string `json:"permissions"`
	Name        string   `json:"name,omitempty"`
	// Previous is the secret a rotation replaced, accepted until its
	// ExpiresAt; sealed with the master key like Secret.
	Previous *PreviousSecret `json:"previousSecret,omitempty"`
}

// ID is how the admin API names a client: the start of its key's digest.
func (c *B2BClient) ID() string { return c.KeyDigest[:16] }

// PreviousSecret is a rotated B2B secret during its overlap.
type PreviousSecret struct {
	Secret    []byte    `json:"secret"`
	ExpiresAt time.Time `json:"expiresAt"`
}

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

// AccountName is an account holder's Thai and English name.
type AccountName struct {
	TH string `json:"th"`
	EN string `json:"en"`
}

// Records is a set of records to insert, as a seed file describes them.
type Records struct {
	Services   []Service
	Branches   []Branch
	B2BClients []B2BClient
	Accounts   []BankAccount
}

// InsertMissing inserts, in one transaction, every record whose id (or key
// digest) is not stored yet, and leaves stored ones as they are: records
// changed at run time keep their changes, and a branch deleted at run time
// stays deleted. It returns how many it inserted.
func (s *Store) InsertMissing(r Records) (int, error) {
	n := 0
	err := s.write(func(tx *bolt.Tx) error {
		n = 0
		r.Branches = slices.DeleteFunc(slices.Clone(r.Branches), func(br Branch) bool {
			return tx.Bucket(bucketBranchesDeleted).Get([]byte(br.ID)) != nil
		})
		put := func(bucket []byte, key string, v any) (bool, error) {
			b := tx.Bucket(bucket)
			if b.Get([]byte(key)) != nil {
				return false, nil
			}
			n++
			return true, putJSON(b, key, v)
		}
		// Check references first: a failing write fn must not have written.
		for _, br := range r.Branches {
			if !hasService(tx, r, br.ServiceID) {
				return fmt.Errorf("branch %s: unknown service %s", br.ID, br.ServiceID)
			}
			if id := tx.Bucket(bucketKeys).Get([]byte(br.KeyDigest)); id != nil && string(id) != br.ID {
				return fmt.Errorf("branch %s: its key belongs to branch %s", br.ID, id)
			}
		}
		var errs []error
		for _, sv := range r.Services {
			created, err := put(bucketServices, sv.ID, sv)
			if created && err == nil { // the seed's record of it in the audit log
				err = s.audit(tx, Change{Actor: api.AuditActor{Type: api.ActorSeed, ID: "seed"}}, "service.create", sv.ID,
					api.AuditTarget{Type: "service", ID: sv.ID}, nil, sv)
			}
			errs = append(errs, err)
		}
		for _, br := range r.Branches {
			// A branch's key is indexed when the branch is created, so a key
			// replaced at run time is not brought back by the next start.
			created, err := put(bucketBranches, br.ID, br)
			if created && err == nil {
				err = tx.Bucket(bucketKeys).Put([]byte(br.KeyDigest), []byte(br.ID))
			}
			if created && err == nil {
				err = branchesByService.add(tx, br.ServiceID, br.ID)
			}
			errs = append(errs, err)
		}
		for _, c := range r.B2BClients {
			if tx.Bucket(bucketB2B).Get([]byte(c.KeyDigest)) != nil {
				continue
			}
			seq, err := tx.Bucket(bucketB2B).NextSequence()
			if err == nil {
				c.Seq = seq
				_, err = put(bucketB2B, c.KeyDigest, c)
			}
			if err == nil {
				err = tx.Bucket(bucketB2BByService).Put(serviceSeqKey(c.ServiceID, seq), []byte(c.KeyDigest))
			}
			errs = append(errs, err)
		}
		for _, a := range r.Accounts {
			created, err := put(bucketAccounts, a.ID, a)
			if created && err == nil {
				err = accountsByService.add(tx, a.ServiceID, a.ID)
			}
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
	return n, err
}

func hasService(tx *bolt.Tx, r Records, id string) bool {
	for _, sv := range r.Services {
		if sv.ID == id {
			return true
		}
	}
	return tx.Bucket(bucketServices).Get([]byte(id)) != nil
}

// serviceSeqKey orders a service's B2B clients by creation.
func serviceSeqKey(serviceID string, seq uint64) []byte {
	k := append([]byte(serviceID), 0, 0, 0, 0, 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint64(k[len(serviceID)+1:], seq)
	return k
}

// BranchByKey returns the branch whose API key has digest keyDigest, with
// its service as it stands now (Service.At), the service's first B2B
// client (nil when it has none) and, for the previous key of a rotation
// still in its overlap, the instant it ends (else nil). A deleted
// service's keys, and a previous key past its overlap, are ErrNotFound.
func (s *Store) BranchByKey(keyDigest string) (sv Service, br Branch, first *B2BClient, keyEnds *time.Time, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		now := s.now()
		id := tx.Bucket(bucketKeys).Get([]byte(keyDigest))
		if id == nil {
			return ErrNotFound
		}
		if err := getJSON(tx.Bucket(bucketBranches), string(id), &br); err != nil {
			return err
		}
		if br.KeyDigest != keyDigest {
			if br.Previous == nil || br.Previous.Digest != keyDigest || !now.Before(br.Previous.ExpiresAt) {
				return ErrNotFound
			}
			keyEnds = &br.Previous.ExpiresAt
		}
		if err := getJSON(tx.Bucket(bucketServices), br.ServiceID, &sv); err != nil {
			return err
		}
		if sv = sv.At(now); sv.State == StateDeleted {
			return ErrNotFound
		}
		prefix := append([]byte(sv.ID), 0)
		if k, d := tx.Bucket(bucketB2BByService).Cursor().Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) {
			first = new(B2BClient)
			return getJSON(tx.Bucket(bucketB2B), string(d), first)
		}
		return nil
	})
	return sv, br, first, keyEnds, err
}

// Client returns the B2B client whose key has digest keyDigest, with its
// service as it stands now; a deleted service's clients are ErrNotFound.
func (s *Store) Client(keyDigest string) (sv Service, c B2BClient, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		if err := getJSON(tx.Bucket(bucketB2B), keyDigest, &c); err != nil {
			return err
		}
		if err := getJSON(tx.Bucket(bucketServices), c.ServiceID, &sv); err != nil {
			return err
		}
		if sv = sv.At(s.now()); sv.State == StateDeleted {
			return ErrNotFound
		}
		return nil
	})
	return sv, c, err
}
