package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/quota"
)

// Usage is the quota state of a branch and its service in the current period.
type Usage struct {
	Service, Branch quota.Counter
	PeriodStart     int64 // Unix seconds
}

// periodUsage reads the counters of sv and of its branch branchID ("":
// none) in the period holding t.
func periodUsage(tx *bolt.Tx, sv *Service, branchID string, t time.Time) Usage {
	period := sv.PeriodStart(t).Unix()
	q := tx.Bucket(bucketQuota)
	u := Usage{Service: readCounter(q, "s/"+sv.ID).In(period), PeriodStart: period}
	if branchID != "" {
		u.Branch = readCounter(q, "b/"+branchID).In(period)
	}
	return u
}

// readCounter decodes a counter: period, used and total as three big-endian
// int64s. A missing counter is zero.
func readCounter(b *bolt.Bucket, key string) quota.Counter {
	raw := b.Get([]byte(key))
	if len(raw) != 24 {
		return quota.Counter{}
	}
	return quota.Counter{
		Period: int64(binary.BigEndian.Uint64(raw)),
		Used:   int64(binary.BigEndian.Uint64(raw[8:])),
		Total:  int64(binary.BigEndian.Uint64(raw[16:])),
	}
}

func writeCounter(b *bolt.Bucket, key string, c quota.Counter) error {
	raw := make([]byte, 24)
	binary.BigEndian.PutUint64(raw, uint64(c.Period))
	binary.BigEndian.PutUint64(raw[8:], uint64(c.Used))
	binary.BigEndian.PutUint64(raw[16:], uint64(c.Total))
	return b.Put([]byte(key), raw)
}

// ExpireSlips removes up to max slip records first verified before cutoff:
// a slip verified again after that is a new one, not a duplicate. It
// returns how many it removed.
func (s *Store) ExpireSlips(cutoff time.Time, max int) (int, error) {
	if !s.slipAges {
		return 0, errNoSlipAges
	}
	return s.expireByAge(bucketSlipsByAge, cutoff, max, func(tx *bolt.Tx, key string) error {
		return tx.Bucket(bucketSlips).Delete([]byte(key))
	})
}

var errNoSlipAges = errors.New("store: opened without the slip records' index by age (Options.SlipAges)")

// dropSlipAges empties bucketSlipsByAge and forgets that it was built, so
// that a store opened with Options.SlipAges again builds it anew: records
// written meanwhile have no entry in it.
func dropSlipAges(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta.Get(slipsIndexed) == nil {
		return nil // never built, or dropped already
	}
	if err := tx.DeleteBucket(bucketSlipsByAge); err != nil {
		return err
	}
	if _, err := tx.CreateBucket(bucketSlipsByAge); err != nil {
		return err
	}
	return meta.Delete(slipsIndexed)
}

// slipsIndexed is the meta key of indexSlips's progress.
var slipsIndexed = []byte("slips-indexed")

// indexSlips builds bucketSlipsByAge for the slip records of a store
// written before it, in transactions of indexChunk records (millions of
// records in one would hold all their index pages in memory at once),
// resuming where a start cut short left it: meta "slips-indexed" holds the
// last record indexed, and is "done" at the end. A record that does not
// decode is left out of the index (it is never expired), not fatal.
func indexSlips(db *bolt.DB) error {
	key := slipsIndexed
	for {
		done := false
		err := db.Update(func(tx *bolt.Tx) error {
			meta := tx.Bucket(bucketMeta)
			from := meta.Get(key)
			if string(from) == "done" {
				done = true
				return nil
			}
			age, c := tx.Bucket(bucketSlipsByAge), tx.Bucket(bucketSlips).Cursor()
			k, v := c.First()
			if from != nil {
				if k, v = c.Seek(from); k != nil && bytes.Equal(k, from) {
					k, v = c.Next()
				}
			}
			var last []byte
			for n := 0; k != nil && n < indexChunk; k, v = c.Next() {
				if rec, err := decodeSlipRecord(v); err == nil {
					if err := age.Put(rec.ageKey(k), nil); err != nil {
						return err
					}
				}
				last, n = k, n+1
			}
			if k == nil {
				done = true
				return meta.Put(key, []byte("done"))
			}
			return meta.Put(key, bytes.Clone(last))
		})
		if err != nil || done {
			return err
		}
	}
}

// indexChunk is how many slip records indexSlips indexes a transaction.
const indexChunk = 50_000
