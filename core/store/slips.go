package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// SlipRecord remembers a verified slip within a service: when and by which
// branches it was verified, and the verified result (JSON) so a duplicate
// can be answered without asking the bank again.
type SlipRecord struct {
	FirstAt  int64           `json:"firstAt"` // Unix seconds
	Branches []string        `json:"branches"`
	Result   json.RawMessage `json:"result"`
	// Job is the async job whose verification recorded the slip, so the
	// job's repeated attempt (after a crash) is not taken for a duplicate.
	Job string `json:"job,omitempty"`
}

// ageKey is the key of the record stored under key in bucketSlipsByAge
// (timeKey of its FirstAt).
func (r *SlipRecord) ageKey(key []byte) []byte { return r.appendAgeKey(nil, key) }

// appendAgeKey appends ageKey(key) to dst.
func (r *SlipRecord) appendAgeKey(dst, key []byte) []byte {
	return append(binary.BigEndian.AppendUint64(dst, uint64(r.FirstAt*1000)), key...)
}

// FirstSeenBy reports whether job first recorded the slip.
func (r *SlipRecord) FirstSeenBy(job string) bool { return job != "" && r.Job == job }

// VerifiedBy reports whether branch verified the slip before.
func (r *SlipRecord) VerifiedBy(branch string) bool { return slices.Contains(r.Branches, branch) }

// SlipKey returns the key under which a service remembers a slip: kind
// ("bank" or "wallet") and the slip's identity within its kind.
func SlipKey(kind string, parts ...string) string {
	n := len(kind)
	for _, p := range parts {
		n += 1 + len(p)
	}
	var k strings.Builder // one allocation: every verification makes one
	k.Grow(n)
	k.WriteString(kind)
	for _, p := range parts {
		k.WriteByte('/')
		k.WriteString(p)
	}
	return k.String()
}

// slipRecordV1 starts a slip record in its binary form: the version byte,
// then FirstAt, Job and Branches (each length-prefixed with a uvarint),
// then Result to the end. Records written before it are JSON objects,
// which start with '{'; both are read.
const slipRecordV1 = 1

// encode appends the binary form of r to dst. A record is written on every
// new slip: no reflection, and no allocation in a dst of maxSize room.
func (r *SlipRecord) encode(dst []byte) []byte {
	dst = append(dst, slipRecordV1)
	dst = binary.AppendVarint(dst, r.FirstAt)
	dst = appendString(dst, r.Job)
	dst = binary.AppendUvarint(dst, uint64(len(r.Branches)))
	for _, b := range r.Branches {
		dst = appendString(dst, b)
	}
	return append(dst, r.Result...)
}

// maxSize bounds the length of r's encoding.
func (r *SlipRecord) maxSize() int {
	n := 1 + 3*binary.MaxVarintLen64 + len(r.Job) + len(r.Result)
	for _, b := range r.Branches {
		n += binary.MaxVarintLen64 + len(b)
	}
	return n
}

func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

var errBadSlipRecord = errors.New("store: slip record does not decode")

// decodeSlipRecord reads a record in either form. raw is copied: bbolt's
// values live only as long as their transaction.
func decodeSlipRecord(raw []byte) (*SlipRecord, error) {
	rec := new(SlipRecord)
	if len(raw) > 0 && raw[0] == '{' {
		return rec, json.Unmarshal(raw, rec)
	}
	if len(raw) == 0 || raw[0] != slipRecordV1 {
		return nil, errBadSlipRecord
	}
	raw = slices.Clone(raw[1:])
	first, n := binary.Varint(raw)
	if n <= 0 {
		return nil, errBadSlipRecord
	}
	rec.FirstAt, raw = first, raw[n:]
	job, raw, ok := cutString(raw)
	if !ok {
		return nil, errBadSlipRecord
	}
	count, n := binary.Uvarint(raw)
	if n <= 0 || count > uint64(len(raw)) {
		return nil, errBadSlipRecord
	}
	rec.Job, raw = job, raw[n:]
	rec.Branches = make([]string, count)
	for i := range rec.Branches {
		if rec.Branches[i], raw, ok = cutString(raw); !ok {
			return nil, errBadSlipRecord
		}
	}
	rec.Result = raw
	return rec, nil
}

// cutString reads a length-prefixed string from the start of raw.
func cutString(raw []byte) (string, []byte, bool) {
	l, n := binary.Uvarint(raw)
	if n <= 0 || l > uint64(len(raw)-n) {
		return "", nil, false
	}
	return string(raw[n : n+int(l)]), raw[n+int(l):], true
}

// recordFirstAt reads only the FirstAt of a stored record, for a check
// that needs no more of it; false when raw is no record.
func recordFirstAt(raw []byte) (int64, bool) {
	if len(raw) > 0 && raw[0] == slipRecordV1 {
		first, n := binary.Varint(raw[1:])
		return first, n > 0
	}
	rec, err := decodeSlipRecord(raw)
	if err != nil {
		return 0, false
	}
	return rec.FirstAt, true
}

// FindSlip returns the service's record of the slip whose transaction
// reference (a bank slip's transRef, a wallet slip's transaction id) is
// ref, and its key; ErrNotFound when the service has none. A reference
// found at several sending banks is the one first verified. It reads one
// key per sending bank the service has records of, no index.
func (s *Bolt) FindSlip(serviceID, ref string) (key string, rec *SlipRecord, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		slips := tx.Bucket(bucketSlips)
		consider := func(k string) error {
			raw := slips.Get(slipRecordKey(serviceID, k))
			if raw == nil {
				return nil
			}
			r, err := decodeSlipRecord(raw)
			if err != nil {
				return err
			}
			if rec == nil || r.FirstAt < rec.FirstAt {
				key, rec = k, r
			}
			return nil
		}
		if err := consider(SlipKey("wallet", ref)); err != nil {
			return err
		}
		banks := slipRecordKey(serviceID, "bank/")
		c := slips.Cursor()
		for k, _ := c.Seek(banks); bytes.HasPrefix(k, banks); {
			code, _, ok := bytes.Cut(k[len(banks):], []byte("/"))
			if !ok {
				break
			}
			if err := consider(SlipKey("bank", string(code), ref)); err != nil {
				return err
			}
			k, _ = c.Seek(append(append(bytes.Clone(banks), code...), '/'+1)) // the next sending bank
		}
		if rec == nil {
			return ErrNotFound
		}
		return nil
	})
	return key, rec, err
}

func slipRecordKey(serviceID, slipKey string) []byte {
	return appendSlipRecordKey(nil, serviceID, slipKey)
}

// appendSlipRecordKey appends the key of a service's record of slipKey to
// dst.
func appendSlipRecordKey(dst []byte, serviceID, slipKey string) []byte {
	dst = append(append(dst, serviceID...), 0)
	return append(dst, slipKey...)
}

// ExpireSlips removes up to max slip records first verified before cutoff:
// a slip verified again after that is a new one, not a duplicate. It
// returns how many it removed.
func (s *Bolt) ExpireSlips(cutoff time.Time, max int) (int, error) {
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
