package store

import (
	"bytes"
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/api"
)

// bucketNonces holds the nonces of signed requests claimed by the writes
// they made, each keyed by the minute in which it is forgotten (Unix minutes,
// big-endian), its service and itself: ExpireNonces reads them oldest first.
var bucketNonces = []byte("nonces")

var claimed = []byte{1}

// Nonce is a signed request's nonce, claimed by the write the request makes
// (Change.Nonce, Effect.Nonce): a second write with the same nonce is
// refused DUPLICATE_NONCE, whichever edge accepted the two copies. The
// zero Nonce claims nothing (a Bearer request, an operator's change).
type Nonce struct {
	Value string    // X-Nonce as the client sent it
	At    time.Time // X-Timestamp: the nonce is remembered api.NonceWindow after it
}

// claim records n for service in tx, or refuses a nonce claimed before: a
// copy of a request has the same timestamp, so the same key.
func (n Nonce) claim(tx *bolt.Tx, serviceID string) error {
	if n.Value == "" {
		return nil
	}
	key := nonceKey(ClaimedNonce{ServiceID: serviceID, Value: n.Value, ForgetMinute: n.At.Add(api.NonceWindow).Unix()/60 + 1})
	b := tx.Bucket(bucketNonces)
	if b.Get(key) != nil {
		return api.E(api.DuplicateNonce)
	}
	return b.Put(key, claimed) // not empty: Get tells an empty value put in the same transaction from none
}

// ClaimNonce claims n for service in a write of its own, for a request
// that makes no other (a verification answered from the slip's record). The
// zero Nonce writes nothing.
func (s *Bolt) ClaimNonce(serviceID string, n Nonce) error {
	if n.Value == "" {
		return nil
	}
	return s.write(func(tx *bolt.Tx) error { return n.claim(tx, serviceID) })
}

// ExpireNonces forgets up to max of the nonces no edge would take a
// request with any more at now, and returns how many it forgot.
func (s *Bolt) ExpireNonces(now time.Time, max int) (int, error) {
	var cutoff [8]byte
	binary.BigEndian.PutUint64(cutoff[:], uint64(now.Unix()/60)+1)
	expired := func(k []byte) bool { return k != nil && bytes.Compare(k[:8], cutoff[:]) < 0 }
	// Most minutes have nothing to forget: a look first spares them a
	// write (and its disk sync).
	var due bool
	if err := s.db.View(func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketNonces).Cursor().First()
		due = expired(k)
		return nil
	}); err != nil || !due {
		return 0, err
	}
	n := 0
	err := s.write(func(tx *bolt.Tx) error {
		n = 0
		c := tx.Bucket(bucketNonces).Cursor()
		for k, _ := c.First(); n < max && expired(k); k, _ = c.First() {
			if err := c.Delete(); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// nonceKey is a nonce's key in bucketNonces: the minute it is forgotten
// in, its service and itself.
func nonceKey(n ClaimedNonce) []byte {
	k := make([]byte, 8, 8+len(n.ServiceID)+1+len(n.Value))
	binary.BigEndian.PutUint64(k, uint64(n.ForgetMinute))
	return append(append(append(k, n.ServiceID...), 0), n.Value...)
}

// splitNonceKey is nonceKey's inverse.
func splitNonceKey(k []byte) (ClaimedNonce, bool) {
	if len(k) < 9 {
		return ClaimedNonce{}, false
	}
	svc, value, ok := bytes.Cut(k[8:], []byte{0})
	return ClaimedNonce{ServiceID: string(svc), Value: string(value), ForgetMinute: int64(binary.BigEndian.Uint64(k))}, ok
}
