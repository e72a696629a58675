package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/api"
)

// Digest returns the hex SHA-256 under which a key is stored.
func Digest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// PreviousKey is a rotated branch key during its overlap.
type PreviousKey struct {
	Digest    string     `json:"digest"`
	CreatedAt *time.Time `json:"createdAt,omitempty"`
	ExpiresAt time.Time  `json:"expiresAt"`
}

// BranchByKey returns the branch whose API key has digest keyDigest, with
// its service as it stands now (Service.At), the service's first B2B
// client (nil when it has none) and, for the previous key of a rotation
// still in its overlap, the instant it ends (else nil). A deleted
// service's keys, and a previous key past its overlap, are ErrNotFound.
func (s *Bolt) BranchByKey(keyDigest string) (sv Service, br Branch, first *B2BClient, keyEnds *time.Time, err error) {
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

// RotateBranchKey gives a branch the key of digest newDigest. The key it
// had keeps working for overlap (0: not at all), then is refused. While a
// previous key's overlap is open, a rotation is ErrOverlapOpen unless
// force, which ends that overlap at once.
func (s *Bolt) RotateBranchKey(serviceID, branchID, newDigest string, overlap time.Duration, force bool, c Change) (Branch, error) {
	var b Branch
	err := s.write(func(tx *bolt.Tx) error {
		b = Branch{}
		if err := s.liveBranch(tx, serviceID, branchID, &b); err != nil {
			return err
		}
		before := b
		keys := tx.Bucket(bucketKeys)
		dropped, err := b.Rotate(newDigest, keys.Get([]byte(newDigest)) != nil, overlap, force, s.now())
		if err != nil {
			return err
		}
		for _, d := range dropped {
			if err := keys.Delete([]byte(d)); err != nil {
				return err
			}
		}
		if err := errors.Join(keys.Put([]byte(newDigest), []byte(b.ID)), putJSON(tx.Bucket(bucketBranches), b.ID, b)); err != nil {
			return err
		}
		return s.audit(tx, c, "branch.key.rotate", serviceID, api.AuditTarget{Type: "branch", ID: branchID}, before, b)
	})
	return b, err
}

// Rotate gives b the key of digest newDigest at now; taken says the digest
// is some key's already (ErrExists). The key b had keeps working for
// overlap (0: not at all). While a previous key's overlap is open, a
// rotation is ErrOverlapOpen unless force, which ends that overlap at
// once. It returns the digests of the keys that stop working.
func (b *Branch) Rotate(newDigest string, taken bool, overlap time.Duration, force bool, now time.Time) (dropped []string, err error) {
	if b.Previous != nil && now.Before(b.Previous.ExpiresAt) && !force {
		return nil, ErrOverlapOpen
	}
	if taken {
		return nil, ErrExists
	}
	if b.Previous != nil {
		dropped = append(dropped, b.Previous.Digest)
		b.Previous = nil
	}
	if overlap > 0 {
		b.Previous = &PreviousKey{Digest: b.KeyDigest, CreatedAt: b.KeyCreatedAt, ExpiresAt: now.Add(overlap)}
	} else {
		dropped = append(dropped, b.KeyDigest)
	}
	t := now.UTC()
	b.KeyDigest, b.KeyCreatedAt = newDigest, &t
	return dropped, nil
}

// RevokePreviousKey ends a branch's previous key now.
func (s *Bolt) RevokePreviousKey(serviceID, branchID string, c Change) (Branch, error) {
	var b Branch
	err := s.write(func(tx *bolt.Tx) error {
		b = Branch{}
		if err := s.liveBranch(tx, serviceID, branchID, &b); err != nil {
			return err
		}
		if b.Previous == nil {
			return refuse("branch %s has no previous key", branchID)
		}
		before := b
		if err := tx.Bucket(bucketKeys).Delete([]byte(b.Previous.Digest)); err != nil {
			return err
		}
		b.Previous = nil
		if err := putJSON(tx.Bucket(bucketBranches), b.ID, b); err != nil {
			return err
		}
		return s.audit(tx, c, "branch.key.revoke", serviceID, api.AuditTarget{Type: "branch", ID: branchID}, before, b)
	})
	return b, err
}
