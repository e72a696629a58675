package store

import (
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/api"
)

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
func (s *Bolt) InsertMissing(r Records) (int, error) {
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
