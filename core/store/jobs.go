package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ErrJobExists refuses to create a job whose id is taken.
var ErrJobExists = errors.New("store: job exists")

// ErrTooManyJobs refuses jobs that would take a branch past its bound of
// unfinished jobs.
var ErrTooManyJobs = errors.New("store: too many unfinished jobs")

// Job is an async verification as core keeps it. The store keeps it durable and
// indexed; what its fields mean is the business of the package that runs
// jobs. DueAt (Unix milliseconds, 0 for none) is when the job next needs
// attention; Created (Unix milliseconds) starts its retention.
type Job struct {
	ID        string `json:"jobId"`
	BatchID   string `json:"batchId,omitempty"`
	ServiceID string `json:"serviceId"`
	BranchID  string `json:"branchId"`
	Created   int64  `json:"created"`
	DueAt     int64  `json:"dueAt,omitempty"`
	Status    string `json:"status"`

	Request     json.RawMessage `json:"request,omitempty"` // the verification to run; none once finished
	CallbackURL string          `json:"callbackUrl"`
	Attempt     int             `json:"attempt"` // the attempt running or next to run, from 1

	Result   json.RawMessage `json:"result,omitempty"`   // the polled result of a done job
	Error    json.RawMessage `json:"error,omitempty"`    // the polled error object
	Callback json.RawMessage `json:"callback,omitempty"` // the callback, kept for redeliveries
	Delivery int             `json:"delivery,omitempty"` // the delivery running or next to run, from 1
	Outcomes json.RawMessage `json:"outcomes,omitempty"` // the failed deliveries so far
	Settled  bool            `json:"settled,omitempty"`  // the callback was delivered or given up
}

// Finished reports whether the job has its outcome: a result or an error.
// The store counts each branch's unfinished jobs.
func (j Job) Finished() bool { return len(j.Result) > 0 || len(j.Error) > 0 }

// CreateJobs stores jobs, all or none, with msgs in the outbox, in one
// transaction: when it returns nil, every job is durable and its message
// will reach the broker. A branch holds at most maxUnfinished unfinished
// jobs (0: no bound); jobs that would take one past it are refused with
// ErrTooManyJobs. nonce is the signed request's that submits them, claimed
// for the first job's service.
func (s *Bolt) CreateJobs(jobs []Job, msgs []Message, maxUnfinished int, nonce Nonce) error {
	return s.write(func(tx *bolt.Tx) error {
		if len(jobs) > 0 {
			if err := nonce.claim(tx, jobs[0].ServiceID); err != nil {
				return err
			}
		}
		b := tx.Bucket(bucketJobs)
		adding := map[string]int{} // unfinished jobs added, by branch key
		for _, j := range jobs {
			if b.Get([]byte(j.ID)) != nil {
				return ErrJobExists
			}
			if !j.Finished() {
				adding[unfinishedKey(j)]++
			}
		}
		for k, n := range adding {
			if maxUnfinished > 0 && unfinished(tx, k)+n > maxUnfinished {
				return ErrTooManyJobs
			}
		}
		for _, j := range jobs {
			if err := putJob(tx, j, 0); err != nil {
				return err
			}
			if err := countUnfinished(tx, Job{}, j); err != nil {
				return err
			}
			if err := tx.Bucket(bucketJobsByAge).Put(timeKey(j.Created, j.ID), nil); err != nil {
				return err
			}
		}
		return s.enqueue(tx, msgs...)
	})
}

// Job returns a job by id, or ErrNotFound.
func (s *Bolt) Job(id string) (Job, error) {
	var j Job
	err := s.db.View(func(tx *bolt.Tx) error { return getJSON(tx.Bucket(bucketJobs), id, &j) })
	return j, err
}

// UpdateJob changes a job atomically: change edits the job and returns the
// messages to publish with the change. A change that returns an error
// leaves the job as it was; ErrNotFound tells of a job that is gone.
func (s *Bolt) UpdateJob(id string, change func(j *Job) ([]Message, error)) (Job, error) {
	var j Job
	err := s.write(func(tx *bolt.Tx) error {
		j = Job{}
		if err := getJSON(tx.Bucket(bucketJobs), id, &j); err != nil {
			return err
		}
		old := j
		msgs, err := change(&j)
		if err != nil {
			return err
		}
		if err := putJob(tx, j, old.DueAt); err != nil {
			return err
		}
		if err := countUnfinished(tx, old, j); err != nil {
			return err
		}
		return s.enqueue(tx, msgs...)
	})
	return j, err
}

// putJob writes j and moves its place in the due index from oldDue to
// j.DueAt.
func putJob(tx *bolt.Tx, j Job, oldDue int64) error {
	due := tx.Bucket(bucketJobsDue)
	if oldDue != 0 && oldDue != j.DueAt {
		if err := due.Delete(timeKey(oldDue, j.ID)); err != nil {
			return err
		}
	}
	if j.DueAt != 0 {
		if err := due.Put(timeKey(j.DueAt, j.ID), nil); err != nil {
			return err
		}
	}
	return putJSON(tx.Bucket(bucketJobs), j.ID, j)
}

// DueJobs returns the ids of up to max jobs due at or before now, earliest
// first, and when the next later job is due (zero when none is).
func (s *Bolt) DueJobs(now time.Time, max int) (ids []string, next time.Time, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketJobsDue).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			at, id := splitTimeKey(k)
			if at > now.UnixMilli() || len(ids) == max {
				next = time.UnixMilli(at)
				return nil
			}
			ids = append(ids, id)
		}
		return nil
	})
	return ids, next, err
}

// ExpireJobs removes up to max jobs created before cutoff and returns how
// many it removed.
func (s *Bolt) ExpireJobs(cutoff time.Time, max int) (int, error) {
	return s.expireByAge(bucketJobsByAge, cutoff, max, func(tx *bolt.Tx, id string) error {
		jobs := tx.Bucket(bucketJobs)
		var j Job
		if err := getJSON(jobs, id, &j); err == nil {
			if j.DueAt != 0 {
				if err := tx.Bucket(bucketJobsDue).Delete(timeKey(j.DueAt, id)); err != nil {
					return err
				}
			}
			if err := countUnfinished(tx, j, Job{}); err != nil {
				return err
			}
		}
		return jobs.Delete([]byte(id))
	})
}

// InBatches runs expire (ExpireJobs or ExpireSlips, bound to a cutoff)
// with batches of 1,000 until one removes fewer, so the writes of
// verifications are not held up behind one long transaction meanwhile. It
// returns how many it removed in all.
func InBatches(expire func(max int) (int, error)) (int, error) {
	const batch = 1000
	total := 0
	for {
		n, err := expire(batch)
		total += n
		if err != nil || n < batch {
			return total, err
		}
	}
}

// expireByAge removes, oldest first, up to max entries of index (timeKey
// of a creation time, then an id) created before cutoff, calling drop to
// remove what each names, in one transaction. It returns how many it
// removed.
func (s *Bolt) expireByAge(index []byte, cutoff time.Time, max int, drop func(tx *bolt.Tx, id string) error) (int, error) {
	n := 0
	err := s.write(func(tx *bolt.Tx) error {
		n = 0
		age := tx.Bucket(index).Cursor()
		for k, _ := age.First(); k != nil && n < max; k, _ = age.First() {
			at, id := splitTimeKey(k)
			if at >= cutoff.UnixMilli() {
				break
			}
			if err := errors.Join(drop(tx, id), age.Delete()); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// UnfinishedJobs returns how many jobs of a branch have no outcome yet.
func (s *Bolt) UnfinishedJobs(serviceID, branchID string) (int, error) {
	var n int
	err := s.db.View(func(tx *bolt.Tx) error {
		n = unfinished(tx, unfinishedKey(Job{ServiceID: serviceID, BranchID: branchID}))
		return nil
	})
	return n, err
}

// unfinishedKey is the key of a job's branch in bucketJobsUnfinished.
func unfinishedKey(j Job) string { return j.ServiceID + "\x00" + j.BranchID }

// unfinished returns the count of the branch with key k.
func unfinished(tx *bolt.Tx, k string) int {
	v := tx.Bucket(bucketJobsUnfinished).Get([]byte(k))
	if len(v) != 8 {
		return 0
	}
	return int(binary.BigEndian.Uint64(v))
}

// countUnfinished moves the branches' counts from job before to job after;
// a zero Job stands for none (created, removed).
func countUnfinished(tx *bolt.Tx, before, after Job) error {
	if before.ID != "" && !before.Finished() {
		if err := addUnfinished(tx, unfinishedKey(before), -1); err != nil {
			return err
		}
	}
	if after.ID != "" && !after.Finished() {
		return addUnfinished(tx, unfinishedKey(after), 1)
	}
	return nil
}

func addUnfinished(tx *bolt.Tx, k string, d int) error {
	b := tx.Bucket(bucketJobsUnfinished)
	n := unfinished(tx, k) + d
	if n <= 0 {
		return b.Delete([]byte(k))
	}
	return b.Put([]byte(k), binary.BigEndian.AppendUint64(nil, uint64(n)))
}

// countAllUnfinished builds bucketJobsUnfinished, for a store written
// before it.
func countAllUnfinished(tx *bolt.Tx) error {
	return tx.Bucket(bucketJobs).ForEach(func(id, v []byte) error {
		var j Job
		if err := json.Unmarshal(v, &j); err != nil {
			return fmt.Errorf("job %q: %w", id, err)
		}
		return countUnfinished(tx, Job{}, j)
	})
}

// timeKey orders keys by a Unix millisecond time, then id.
func timeKey(ms int64, id string) []byte {
	return append(binary.BigEndian.AppendUint64(nil, uint64(ms)), id...)
}

func splitTimeKey(k []byte) (int64, string) {
	return int64(binary.BigEndian.Uint64(k)), string(bytes.Clone(k[8:]))
}
