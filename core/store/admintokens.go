package store

import (
	"encoding/json"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/api"
)

// bucketAdminTokens holds the operators' named tokens by id, and
// bucketAdminTokenDigests their ids by the digest of the token.
var (
	bucketAdminTokens       = []byte("admin-tokens")
	bucketAdminTokenDigests = []byte("admin-token-digests")
)

// AdminToken is an operator's named token of the admin API, stored by the
// digest of the token.
type AdminToken struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Scope     string     `json:"scope"` // read or write
	Digest    string     `json:"digest"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// Admin token scopes.
const (
	ScopeRead  = "read"
	ScopeWrite = "write"
)

// CreateAdminToken stores a new token.
func (s *Bolt) CreateAdminToken(t AdminToken, c Change) error {
	return s.write(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketAdminTokens).Get([]byte(t.ID)) != nil || tx.Bucket(bucketAdminTokenDigests).Get([]byte(t.Digest)) != nil {
			return ErrExists
		}
		if err := errors.Join(putJSON(tx.Bucket(bucketAdminTokens), t.ID, t),
			tx.Bucket(bucketAdminTokenDigests).Put([]byte(t.Digest), []byte(t.ID))); err != nil {
			return err
		}
		return s.audit(tx, c, "token.create", "", api.AuditTarget{Type: "token", ID: t.ID}, nil, t)
	})
}

// DeleteAdminToken revokes a token: it is refused from now on.
func (s *Bolt) DeleteAdminToken(id string, c Change) error {
	return s.write(func(tx *bolt.Tx) error {
		var t AdminToken
		if err := getJSON(tx.Bucket(bucketAdminTokens), id, &t); err != nil {
			return err
		}
		if err := errors.Join(tx.Bucket(bucketAdminTokens).Delete([]byte(id)),
			tx.Bucket(bucketAdminTokenDigests).Delete([]byte(t.Digest))); err != nil {
			return err
		}
		return s.audit(tx, c, "token.delete", "", api.AuditTarget{Type: "token", ID: id}, t, nil)
	})
}

// AdminTokens returns the named tokens, by id.
func (s *Bolt) AdminTokens() ([]AdminToken, error) {
	var out []AdminToken
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAdminTokens).ForEach(func(_, v []byte) error {
			var t AdminToken
			err := json.Unmarshal(v, &t)
			out = append(out, t)
			return err
		})
	})
	return out, err
}

// AdminTokenByDigest returns the token of a digest, ErrNotFound for an
// unknown, revoked or expired one.
func (s *Bolt) AdminTokenByDigest(digest string) (AdminToken, error) {
	var t AdminToken
	err := s.db.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketAdminTokenDigests).Get([]byte(digest))
		if id == nil {
			return ErrNotFound
		}
		if err := getJSON(tx.Bucket(bucketAdminTokens), string(id), &t); err != nil {
			return err
		}
		if t.ExpiresAt != nil && !s.now().Before(*t.ExpiresAt) {
			return ErrNotFound
		}
		return nil
	})
	return t, err
}
