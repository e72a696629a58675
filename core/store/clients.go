package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/api"
)

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

// serviceSeqKey orders a service's B2B clients by creation.
func serviceSeqKey(serviceID string, seq uint64) []byte {
	k := append([]byte(serviceID), 0, 0, 0, 0, 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint64(k[len(serviceID)+1:], seq)
	return k
}

// Client returns the B2B client whose key has digest keyDigest, with its
// service as it stands now; a deleted service's clients are ErrNotFound.
func (s *Bolt) Client(keyDigest string) (sv Service, c B2BClient, err error) {
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

// Clients returns a service's B2B clients in creation order.
func (s *Bolt) Clients(serviceID string) ([]B2BClient, error) {
	var out []B2BClient
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = clientsOf(tx, serviceID)
		return err
	})
	return out, err
}

func clientsOf(tx *bolt.Tx, serviceID string) ([]B2BClient, error) {
	var out []B2BClient
	prefix := append([]byte(serviceID), 0)
	c := tx.Bucket(bucketB2BByService).Cursor()
	for k, d := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, d = c.Next() {
		var cl B2BClient
		if err := getJSON(tx.Bucket(bucketB2B), string(d), &cl); err != nil {
			return nil, err
		}
		out = append(out, cl)
	}
	return out, nil
}

// clientByID reads the client of a live service whose ID is id.
func (s *Bolt) clientByID(tx *bolt.Tx, serviceID, id string) (B2BClient, error) {
	if _, err := liveService(tx, serviceID); err != nil {
		return B2BClient{}, err
	}
	list, err := clientsOf(tx, serviceID)
	if err != nil {
		return B2BClient{}, err
	}
	for _, c := range list {
		if c.ID() == id {
			return c, nil
		}
	}
	return B2BClient{}, ErrNotFound
}

// CreateClient adds a B2B client to a live service.
func (s *Bolt) CreateClient(c B2BClient, ch Change) (B2BClient, error) {
	err := s.write(func(tx *bolt.Tx) error {
		if _, err := liveService(tx, c.ServiceID); err != nil {
			return err
		}
		if tx.Bucket(bucketB2B).Get([]byte(c.KeyDigest)) != nil {
			return ErrExists
		}
		seq, err := tx.Bucket(bucketB2B).NextSequence()
		if err != nil {
			return err
		}
		c.Seq = seq
		if err := errors.Join(putJSON(tx.Bucket(bucketB2B), c.KeyDigest, c),
			tx.Bucket(bucketB2BByService).Put(serviceSeqKey(c.ServiceID, seq), []byte(c.KeyDigest))); err != nil {
			return err
		}
		return s.audit(tx, ch, "client.create", c.ServiceID, api.AuditTarget{Type: "client", ID: c.ID()}, nil, c)
	})
	return c, err
}

// UpdateClient applies change to a client (its name and permissions).
func (s *Bolt) UpdateClient(serviceID, id string, ch Change, change func(*B2BClient)) (B2BClient, error) {
	var c B2BClient
	err := s.write(func(tx *bolt.Tx) error {
		var err error
		if c, err = s.clientByID(tx, serviceID, id); err != nil {
			return err
		}
		before := c
		change(&c)
		if err := putJSON(tx.Bucket(bucketB2B), c.KeyDigest, c); err != nil {
			return err
		}
		return s.audit(tx, ch, "client.update", serviceID, api.AuditTarget{Type: "client", ID: id}, before, c)
	})
	return c, err
}

// DeleteClient removes a client: its key is refused from now on.
func (s *Bolt) DeleteClient(serviceID, id string, ch Change) error {
	return s.write(func(tx *bolt.Tx) error {
		c, err := s.clientByID(tx, serviceID, id)
		if err != nil {
			return err
		}
		if err := errors.Join(tx.Bucket(bucketB2B).Delete([]byte(c.KeyDigest)),
			tx.Bucket(bucketB2BByService).Delete(serviceSeqKey(serviceID, c.Seq))); err != nil {
			return err
		}
		return s.audit(tx, ch, "client.delete", serviceID, api.AuditTarget{Type: "client", ID: id}, c, nil)
	})
}

// RotateClientSecret gives a client a new secret, sealed by seal for the
// client's key digest; the one it had keeps verifying signatures for
// overlap (0: not at all).
func (s *Bolt) RotateClientSecret(serviceID, id string, overlap time.Duration, force bool, ch Change,
	seal func(keyDigest string) []byte) (B2BClient, error) {
	var c B2BClient
	err := s.write(func(tx *bolt.Tx) error {
		var err error
		if c, err = s.clientByID(tx, serviceID, id); err != nil {
			return err
		}
		before := c
		if err := c.Rotate(seal(c.KeyDigest), overlap, force, s.now()); err != nil {
			return err
		}
		if err := putJSON(tx.Bucket(bucketB2B), c.KeyDigest, c); err != nil {
			return err
		}
		return s.audit(tx, ch, "client.secret.rotate", serviceID, api.AuditTarget{Type: "client", ID: id}, before, c)
	})
	return c, err
}

// Rotate gives c the sealed secret at now; the one it had keeps verifying
// signatures for overlap (0: not at all). While a previous secret's
// overlap is open, a rotation is ErrOverlapOpen unless force.
func (c *B2BClient) Rotate(sealed []byte, overlap time.Duration, force bool, now time.Time) error {
	if c.Previous != nil && now.Before(c.Previous.ExpiresAt) && !force {
		return ErrOverlapOpen
	}
	c.Previous = nil
	if overlap > 0 {
		c.Previous = &PreviousSecret{Secret: c.Secret, ExpiresAt: now.Add(overlap)}
	}
	c.Secret = sealed
	return nil
}
