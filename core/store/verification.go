package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/quota"
)

// Snapshot is everything a verification's decision reads, from one
// transaction at one time: the caller's service and branch, the slip's
// record and this period's counters.
type Snapshot struct {
	Service Service
	Branch  Branch
	// Slip is the service's record of the slip; nil when it never
	// verified it (or when no slip was asked for).
	Slip  *SlipRecord
	Usage Usage
	// Conditions are the branch's default conditions, read by Snapshot;
	// Apply's snapshot leaves them zero: they are not part of the
	// decision. Shared with other snapshots: never change what they point to.
	Conditions Conditions
	// At is the snapshot's time: the period its counters are of, and, in
	// Apply, the time of the verification's record and usage event.
	At time.Time
}

// QuotaLeft reports whether the service and the branch may both consume
// one more unit in the snapshot's period.
func (s *Snapshot) QuotaLeft() bool {
	return s.Usage.Service.Allows(&s.Service.QuotaLimit) && s.Usage.Branch.Allows(s.Branch.LimitQuota)
}

// Snapshot reads what a verification of slipKey by a branch needs ("" for
// no slip). It fails with ErrNotFound for an unknown service or branch, or
// a branch of another service.
func (s *Bolt) Snapshot(serviceID, branchID, slipKey string) (Snapshot, error) {
	var snap Snapshot
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		snap, err = s.snapshot(tx, serviceID, branchID, slipKey, true)
		return err
	})
	return snap, err
}

// snapshot reads a Snapshot in tx, with the branch's default conditions
// when conditions is set.
func (s *Bolt) snapshot(tx *bolt.Tx, serviceID, branchID, slipKey string, conditions bool) (Snapshot, error) {
	snap := Snapshot{At: s.now()}
	sv, err := s.records.service(tx, serviceID)
	if err != nil {
		return snap, err
	}
	br, err := s.records.branch(tx, branchID)
	if err != nil {
		return snap, err
	}
	if err := snap.Of(sv, br); err != nil {
		return snap, err
	}
	if slipKey != "" {
		var kb [keyRoom]byte // bbolt's Get keeps no key: on the stack
		if raw := tx.Bucket(bucketSlips).Get(appendSlipRecordKey(kb[:0], serviceID, slipKey)); raw != nil {
			if snap.Slip, err = decodeSlipRecord(raw); err != nil {
				return snap, err
			}
		}
	}
	snap.Usage = periodUsage(tx, &snap.Service, branchID, snap.At)
	if conditions {
		snap.Conditions, err = s.records.branchConditions(tx, branchID)
	}
	return snap, err
}

// keyRoom is the room of the stack buffers keys are built in for reads:
// a longer key is built on the heap.
const keyRoom = 192

// Effect is what a verification writes once it is decided.
type Effect struct {
	// Charge takes one unit of the branch's and the service's quota.
	Charge bool
	// Result is the verified slip, remembered when the service has no
	// record of it (a record of the slip is always kept: created, or the
	// branch added to it).
	Result []byte
	// JobID is the async job verifying, remembered with a new record.
	JobID string
	// Usage returns the verification's usage event, told whether it was
	// charged and at what time: it is written with the effect, so core's
	// counters and the ledger agree on the verification's period.
	Usage func(charged bool, at time.Time) Message
	// Nonce is the signed request's, claimed with the effect.
	Nonce Nonce
	// Listed adds the verification to its branch's history, as History
	// describes it; Apply sets History's time, service, branch and slip
	// key.
	Listed  bool
	History Verification
}

// Of sets the snapshot's service, as it stands at its time, and branch:
// ErrNotFound for a branch of another service or a deleted service.
func (s *Snapshot) Of(sv *Service, br *Branch) error {
	if br.ServiceID != sv.ID || sv.State == StateDeleted {
		return ErrNotFound
	}
	s.Service, s.Branch = sv.At(s.At), *br
	return nil
}

// Charged returns the service's and the branch's counters after the
// charge of one unit in the snapshot's period.
func (s *Snapshot) Charged() (svc, brc quota.Counter) {
	svc, brc = s.Usage.Service, s.Usage.Branch
	svc.Period, brc.Period = s.Usage.PeriodStart, s.Usage.PeriodStart
	svc.Used, svc.Total = svc.Used+1, svc.Total+1
	brc.Used, brc.Total = brc.Used+1, brc.Total+1
	return svc, brc
}

// Record returns the slip record the effect e leaves, and whether it is
// to be written (false: the stored one stands, the branch verified the
// slip before) and whether it is a new one, of e's result. A new record's
// branches are appended to room[:0] (nil for none): room for one keeps a
// record that is only encoded off the heap.
func (s *Snapshot) Record(e *Effect, room []string) (rec SlipRecord, write, fresh bool, err error) {
	switch old := s.Slip; {
	case old != nil && old.VerifiedBy(s.Branch.ID):
		return rec, false, false, nil
	case old != nil:
		return SlipRecord{FirstAt: old.FirstAt, Branches: append(slices.Clip(old.Branches), s.Branch.ID), Result: old.Result, Job: old.Job}, true, false, nil
	case e.Result == nil:
		return rec, false, false, errNoResult
	}
	return SlipRecord{FirstAt: s.At.Unix(), Branches: append(room[:0], s.Branch.ID), Result: e.Result, Job: e.JobID}, true, true, nil
}

// Entry returns e's history entry (History) with the verification's time,
// service, branch and slip key set.
func (s *Snapshot) Entry(e *Effect, slipKey string) *Verification {
	h := &e.History
	h.At, h.ServiceID, h.BranchID, h.SlipKey = s.At, s.Service.ID, s.Branch.ID, slipKey
	return h
}

// historyPruned is how many expired history entries of its branch an
// entry's move to bucketHistory removes at most (see Bolt.prune).
const historyPruned = 2

var errNoResult = errors.New("store: a new slip record needs a result")

// Apply decides a verification again on a fresh snapshot, in the write
// transaction, and writes the effect decide returns: the charge, the slip's
// record and the usage event. When decide fails, Apply writes nothing and
// returns its error. It returns the snapshot decide saw.
func (s *Bolt) Apply(serviceID, branchID, slipKey string, decide func(Snapshot) (Effect, error)) (Snapshot, error) {
	var snap Snapshot
	err := s.c.Write(func(tx *bolt.Tx) error {
		var err error
		if snap, err = s.snapshot(tx, serviceID, branchID, slipKey, false); err != nil {
			return err
		}
		e, err := decide(snap)
		if err != nil {
			return err
		}
		return s.apply(tx, &snap, slipKey, e)
	}, true)
	return snap, err
}

func (s *Bolt) apply(tx *bolt.Tx, snap *Snapshot, slipKey string, e Effect) error {
	if err := e.Nonce.claim(tx, snap.Service.ID); err != nil {
		return err
	}
	if e.Charge {
		svc, brc := snap.Charged()
		q := tx.Bucket(bucketQuota)
		if err := errors.Join(writeCounter(q, "s/"+snap.Service.ID, svc), writeCounter(q, "b/"+snap.Branch.ID, brc)); err != nil {
			return err
		}
	}
	if e.Usage != nil {
		if err := s.enqueueUsage(tx, e.Usage(e.Charge, snap.At), e.Charge); err != nil {
			return err
		}
	}
	var room [1]string // the record is encoded below, not kept
	rec, write, fresh, err := snap.Record(&e, room[:])
	if err != nil {
		return err
	}
	h := snap.Entry(&e, slipKey)
	// One allocation holds every key and value this write puts: bbolt
	// keeps a value until the transaction commits (so none is reused) and
	// copies a key.
	size := 0
	if write {
		size += 2*(len(snap.Service.ID)+1+len(slipKey)) + 8 + rec.maxSize()
	}
	if e.Listed {
		size += h.maxSize()
	}
	buf := make([]byte, 0, size)
	if e.Listed {
		var entry []byte
		entry, buf = split(h.appendEntry(buf))
		if err := s.note(tx, entry); err != nil {
			return err
		}
	}
	if !write {
		return nil
	}
	var key, val []byte
	key, buf = split(appendSlipRecordKey(buf, snap.Service.ID, slipKey))
	if fresh && s.slipAges {
		var age []byte
		age, buf = split(rec.appendAgeKey(buf, key))
		if err := tx.Bucket(bucketSlipsByAge).Put(age, nil); err != nil {
			return err
		}
	}
	val, _ = split(rec.encode(buf))
	return tx.Bucket(bucketSlips).Put(key, val)
}

// split returns b capped at its length, and the empty rest of its array to
// append the next slice to: what is appended there never overwrites b.
func split(b []byte) (taken, rest []byte) { return b[:len(b):len(b)], b[len(b):] }

// enqueueUsage adds a usage event to the outbox. The event of an attempt
// that consumed quota always goes in, in the transaction that consumed it,
// so the ledger can equal core's counters: past the outbox limit only the
// disk bounds them (and a full disk refuses the verification, consuming
// nothing). Any other event is dropped and counted when the outbox is full:
// a verification never fails for want of room to report it.
func (s *Bolt) enqueueUsage(tx *bolt.Tx, m Message, billable bool) error {
	if !billable && !s.c.Outbox.Room(s.enqueued) {
		return nil
	}
	return s.enqueue(tx, m)
}

// decoded keeps the service and branch records decoded: a verification
// reads both, and decoding their JSON was most of its cost. An entry is
// used only while its record's bytes are what they were when it was
// decoded, so a record changed by any writer is decoded anew.
type decoded struct {
	services   recordCache[Service]
	branches   recordCache[Branch]
	conditions recordCache[Conditions] // the branches' defaults, read on every v2 verification
}

// branchConditions returns the default conditions of a branch
// (conditionsOf), decoded once while unchanged.
func (d *decoded) branchConditions(tx *bolt.Tx, branchID string) (Conditions, error) {
	b := tx.Bucket(bucketConditions)
	if b == nil {
		return Conditions{}, nil
	}
	c, err := d.conditions.read(b, branchID)
	if errors.Is(err, ErrNotFound) {
		return Conditions{}, nil
	} else if err != nil {
		return Conditions{}, err
	}
	return *c, nil
}

func (d *decoded) service(tx *bolt.Tx, id string) (*Service, error) {
	return d.services.read(tx.Bucket(bucketServices), id)
}

func (d *decoded) branch(tx *bolt.Tx, id string) (*Branch, error) {
	return d.branches.read(tx.Bucket(bucketBranches), id)
}

// recordCache holds decoded records of one kind by id.
type recordCache[T any] struct {
	m sync.Map // id → *cachedRecord[T]
	n atomic.Int64
}

type cachedRecord[T any] struct {
	raw []byte
	v   T
}

// maxDecoded bounds the entries of each kind; past it, the records not
// held are decoded on every read (the cache is an optimisation, not a
// store).
const maxDecoded = 100_000

// read returns the decoded record stored under id in b. The value is
// shared: callers copy it before they change it.
func (c *recordCache[T]) read(b *bolt.Bucket, id string) (*T, error) {
	raw := b.Get([]byte(id))
	if raw == nil {
		return nil, ErrNotFound
	}
	if e, ok := c.m.Load(id); ok {
		if r := e.(*cachedRecord[T]); bytes.Equal(r.raw, raw) {
			return &r.v, nil
		}
	}
	r := &cachedRecord[T]{raw: bytes.Clone(raw)}
	if err := json.Unmarshal(raw, &r.v); err != nil {
		return nil, err
	}
	if _, loaded := c.m.Swap(id, r); !loaded && c.n.Add(1) > maxDecoded {
		c.m.Delete(id)
		c.n.Add(-1)
	}
	return &r.v, nil
}
