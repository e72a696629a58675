package store

import (
	"encoding/binary"
	"encoding/json"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/api"
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
	q := tx.Bucket(bucketQuota)
	var br quota.Counter
	if branchID != "" {
		br = readCounter(q, "b/"+branchID)
	}
	return UsageAt(sv, t, readCounter(q, "s/"+sv.ID), br)
}

// UsageAt is the usage in the period of sv holding t, of the counters svc
// and br as stored: a counter of an earlier period counts nothing used.
func UsageAt(sv *Service, t time.Time, svc, br quota.Counter) Usage {
	period := sv.PeriodStart(t).Unix()
	return Usage{Service: svc.In(period), Branch: br.In(period), PeriodStart: period}
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

// BranchQuota is a branch's quota record (spec 2.2) and its service's.
type BranchQuota struct {
	Branch  Branch
	Usage   Usage
	Service Service
}

// Quota returns the quota records of a branch and its service.
func (s *Bolt) Quota(serviceID, branchID string) (BranchQuota, error) {
	var q BranchQuota
	err := s.db.View(func(tx *bolt.Tx) error { return s.quotaOf(tx, serviceID, branchID, &q) })
	return q, err
}

func (s *Bolt) quotaOf(tx *bolt.Tx, serviceID, branchID string, q *BranchQuota) error {
	if err := branchOf(tx, serviceID, branchID, &q.Branch); err != nil {
		return err
	}
	if err := getJSON(tx.Bucket(bucketServices), serviceID, &q.Service); err != nil {
		return err
	}
	now := s.now()
	q.Service = q.Service.At(now)
	q.Usage = periodUsage(tx, &q.Service, branchID, now)
	return nil
}

// ChangeQuota applies change to a branch's quota atomically with every
// verification: change sees the branch's current usage and returns the new
// limit and whether usedQuota resets, or an ErrRule refusal.
func (s *Bolt) ChangeQuota(serviceID, branchID, action string, c Change, change func(q BranchQuota) (limit *int64, reset bool, err error)) (BranchQuota, error) {
	var q BranchQuota
	err := s.change(serviceID, func(tx *bolt.Tx) error {
		q = BranchQuota{}
		if err := s.quotaOf(tx, serviceID, branchID, &q); err != nil {
			return err
		}
		before := q.Branch
		limit, reset, err := change(q)
		if err != nil {
			return err
		}
		q.Branch.LimitQuota = limit
		if reset {
			q.Usage.Branch.Used = 0
			if err := writeCounter(tx.Bucket(bucketQuota), "b/"+branchID, q.Usage.Branch); err != nil {
				return err
			}
		}
		if err := putJSON(tx.Bucket(bucketBranches), branchID, q.Branch); err != nil {
			return err
		}
		return s.audit(tx, c, action, serviceID, api.AuditTarget{Type: "branch", ID: branchID}, before, q.Branch)
	})
	return q, err
}

// ServiceCounters is a service's quota counters in its current billing
// period (starting at PeriodStart, Unix seconds), with its branches'.
type ServiceCounters struct {
	Service     Service
	PeriodStart int64
	Counter     quota.Counter
	Branches    []BranchCounter
}

// BranchCounter is one branch's counter.
type BranchCounter struct {
	BranchID string
	Counter  quota.Counter
}

// Counters returns every service's and branch's quota counters as of at,
// read in one transaction so they agree with each other, services and
// branches sorted by id.
func (s *Bolt) Counters() (at time.Time, out []ServiceCounters, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		at = s.now() // in the transaction: no unit consumed after it is in what it reads
		q := tx.Bucket(bucketQuota)
		index := map[string]int{}
		err := tx.Bucket(bucketServices).ForEach(func(k, v []byte) error {
			var sv Service
			if err := json.Unmarshal(v, &sv); err != nil {
				return err
			}
			sv = sv.At(at)
			period := sv.PeriodStart(at).Unix()
			index[sv.ID] = len(out)
			out = append(out, ServiceCounters{Service: sv, PeriodStart: period, Counter: readCounter(q, "s/"+sv.ID).In(period)})
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bucketBranches).ForEach(func(_, v []byte) error {
			var b Branch
			if err := json.Unmarshal(v, &b); err != nil {
				return err
			}
			if i, ok := index[b.ServiceID]; ok {
				sc := &out[i]
				sc.Branches = append(sc.Branches, BranchCounter{BranchID: b.ID, Counter: readCounter(q, "b/"+b.ID).In(sc.PeriodStart)})
			}
			return nil
		})
	})
	for i := range out {
		slices.SortFunc(out[i].Branches, func(a, b BranchCounter) int { return strings.Compare(a.BranchID, b.BranchID) })
	}
	return at, out, err
}
