package store

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/quota"
)

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
func (s *Store) Counters() (at time.Time, out []ServiceCounters, err error) {
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
