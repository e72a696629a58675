package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/quota"
)

// Outcomes of Consume that are answers, not failures.
var (
	ErrQuotaExceeded = errors.New("store: quota exceeded")
	ErrDuplicate     = errors.New("store: duplicate slip")
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

// ageKey is the key of the record stored under key in bucketSlipsByAge.
func (r *SlipRecord) ageKey(key []byte) []byte { return timeKey(r.FirstAt*1000, string(key)) }

// FirstSeenBy reports whether job first recorded the slip.
func (r *SlipRecord) FirstSeenBy(job string) bool { return job != "" && r.Job == job }

// VerifiedBy reports whether branch verified the slip before.
func (r *SlipRecord) VerifiedBy(branch string) bool { return slices.Contains(r.Branches, branch) }

// Policy says how a verification treats a slip seen before.
type Policy uint8

// Policies of the API versions.
const (
	// FreeSelfDuplicate (v2): a slip the same branch verified before is
	// answered free; any other verification consumes quota.
	FreeSelfDuplicate Policy = iota
	// RefuseDuplicate (v1 with checkDuplicate): a slip the service verified
	// before is refused with ErrDuplicate and consumes nothing.
	RefuseDuplicate
	// ChargeAlways (v1 without checkDuplicate): every verification consumes.
	ChargeAlways
)

// Verification is one verified slip to account for.
type Verification struct {
	ServiceID, BranchID string
	SlipKey             string // see SlipKey
	Result              json.RawMessage
	Policy              Policy
	JobID               string // the async job verifying, if any
	// Usage, when set, returns the usage event of this verification, told
	// whether it consumed quota and when: the time whose period it was
	// counted in, so core's counters and the ledger agree on the period of
	// a verification at its very start. It is published with the
	// consumption.
	Usage func(charged bool, at time.Time) Message
}

// Consumed tells what Consume did. Seen is the slip's record as it was
// before this verification, nil when the service had never verified it.
type Consumed struct {
	Seen    *SlipRecord
	Charged bool
}

// SlipKey returns the key under which a service remembers a slip: kind
// ("bank" or "wallet") and the slip's identity within its kind.
func SlipKey(kind string, parts ...string) string {
	k := kind
	for _, p := range parts {
		k += "/" + p
	}
	return k
}

// Consume accounts for a verified slip atomically: it checks the duplicate
// policy, checks and consumes one unit of the branch and service quota, and
// remembers the slip. It returns ErrDuplicate or ErrQuotaExceeded (with
// Seen set) when it refuses; a refused verification changes nothing.
func (s *Store) Consume(v Verification) (Consumed, error) {
	var out Consumed
	err := s.write(func(tx *bolt.Tx) error {
		out = Consumed{}
		now := s.now() // one time for the period, the event and the record
		slips := tx.Bucket(bucketSlips)
		slipKey := []byte(v.ServiceID + "\x00" + v.SlipKey)
		if raw := slips.Get(slipKey); raw != nil {
			out.Seen = new(SlipRecord)
			if err := json.Unmarshal(raw, out.Seen); err != nil {
				return err
			}
		}
		charge := true
		switch {
		case out.Seen != nil && v.Policy == RefuseDuplicate:
			return ErrDuplicate
		case out.Seen != nil && v.Policy == FreeSelfDuplicate && out.Seen.VerifiedBy(v.BranchID):
			charge = false
		}
		if charge {
			if err := s.consume(tx, v.ServiceID, v.BranchID, now); err != nil {
				return err
			}
			out.Charged = true
		}
		if v.Usage != nil {
			if err := s.enqueueUsage(tx, v.Usage(out.Charged, now), out.Charged); err != nil {
				return err
			}
		}
		rec := SlipRecord{FirstAt: now.Unix(), Branches: []string{v.BranchID}, Result: v.Result, Job: v.JobID}
		if out.Seen != nil {
			if out.Seen.VerifiedBy(v.BranchID) {
				return nil
			}
			rec = *out.Seen
			rec.Branches = append(slices.Clip(rec.Branches), v.BranchID)
		} else if err := tx.Bucket(bucketSlipsByAge).Put(rec.ageKey(slipKey), nil); err != nil {
			return err
		}
		return putJSON(slips, string(slipKey), rec)
	})
	return out, err
}

// enqueueUsage adds a usage event to the outbox. The event of an attempt
// that consumed quota always goes in, in the transaction that consumed it,
// so the ledger can equal core's counters: past the outbox limit only the
// disk bounds them (and a full disk refuses the verification, consuming
// nothing). Any other event is dropped and counted when the outbox is full:
// a verification never fails for want of room to report it.
func (s *Store) enqueueUsage(tx *bolt.Tx, m Message, billable bool) error {
	if !billable && s.outboxLen.Load()+s.enqueued >= s.outboxLimit {
		s.dropped.Add(1)
		return nil
	}
	return s.enqueue(tx, m)
}

// consume takes one unit of quota from branch and service in the period of
// now, or fails with ErrQuotaExceeded having written nothing.
func (s *Store) consume(tx *bolt.Tx, serviceID, branchID string, now time.Time) error {
	var sv Service
	var br Branch
	if err := getJSON(tx.Bucket(bucketServices), serviceID, &sv); err != nil {
		return err
	}
	if err := getJSON(tx.Bucket(bucketBranches), branchID, &br); err != nil {
		return err
	}
	period := quota.PeriodStart(now, sv.CycleAnchorDay).Unix()
	q := tx.Bucket(bucketQuota)
	svc, brc := readCounter(q, "s/"+serviceID).In(period), readCounter(q, "b/"+branchID).In(period)
	if !svc.Allows(&sv.QuotaLimit) || !brc.Allows(br.LimitQuota) {
		return ErrQuotaExceeded
	}
	svc.Used, svc.Total = svc.Used+1, svc.Total+1
	brc.Used, brc.Total = brc.Used+1, brc.Total+1
	return errors.Join(writeCounter(q, "s/"+serviceID, svc), writeCounter(q, "b/"+branchID, brc))
}

// Usage is the quota state of a branch and its service in the current period.
type Usage struct {
	Service, Branch quota.Counter
	PeriodStart     int64 // Unix seconds
}

// Usage returns the current quota state of a branch and its service.
func (s *Store) Usage(sv Service, branchID string) (Usage, error) {
	period := quota.PeriodStart(s.now(), sv.CycleAnchorDay).Unix()
	var u Usage
	err := s.db.View(func(tx *bolt.Tx) error {
		q := tx.Bucket(bucketQuota)
		u = Usage{Service: readCounter(q, "s/"+sv.ID).In(period), Branch: readCounter(q, "b/"+branchID).In(period), PeriodStart: period}
		return nil
	})
	return u, err
}

// Slip returns the record of a slip the service verified before, or nil.
func (s *Store) Slip(serviceID, slipKey string) (*SlipRecord, error) {
	var rec *SlipRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketSlips).Get([]byte(serviceID + "\x00" + slipKey))
		if raw == nil {
			return nil
		}
		rec = new(SlipRecord)
		return json.Unmarshal(raw, rec)
	})
	return rec, err
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
	return s.expireByAge(bucketSlipsByAge, cutoff, max, func(tx *bolt.Tx, key string) error {
		return tx.Bucket(bucketSlips).Delete([]byte(key))
	})
}

// indexSlips builds bucketSlipsByAge for the slip records of a store
// written before it, in transactions of indexChunk records (millions of
// records in one would hold all their index pages in memory at once),
// resuming where a start cut short left it: meta "slips-indexed" holds the
// last record indexed, and is "done" at the end. A record that does not
// decode is left out of the index (it is never expired), not fatal.
func indexSlips(db *bolt.DB) error {
	key := []byte("slips-indexed")
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
				var rec SlipRecord
				if json.Unmarshal(v, &rec) == nil {
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
