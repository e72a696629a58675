package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/quota"
)

// Kind is a kind of record a store holds, as a copy from one store to
// another reads, counts and checks them. Source.Each gives each record of
// a kind as the value its constant names.
type Kind string

// The kinds, in the order a copy takes them.
const (
	KindServices        Kind = "services"         // Service
	KindBranches        Kind = "branches"         // Branch
	KindDeletedBranches Kind = "deleted branches" // DeletedBranch
	KindKeys            Kind = "key digests"      // KeyOwner
	KindClients         Kind = "b2b clients"      // B2BClient
	KindAccounts        Kind = "bank accounts"    // BankAccount
	KindConditions      Kind = "conditions"       // BranchDefaults
	KindCounters        Kind = "counters"         // CounterRecord
	KindAdminTokens     Kind = "admin tokens"     // AdminToken
	KindSlips           Kind = "slips"            // Slip
	KindHistory         Kind = "history"          // Verification
	KindNonces          Kind = "nonces"           // ClaimedNonce
	KindJobs            Kind = "jobs"             // Job
	KindAudit           Kind = "audit"            // AuditEntry
	KindOutbox          Kind = "outbox"           // Message
)

// Kinds lists every kind, in the order a copy takes them: first the
// records an operator manages (few), then those every verification adds.
var Kinds = []Kind{KindServices, KindBranches, KindDeletedBranches, KindKeys, KindClients, KindAccounts, KindConditions,
	KindCounters, KindAdminTokens, KindSlips, KindHistory, KindNonces, KindJobs, KindAudit, KindOutbox}

// Source reads every record a store holds, kind by kind: the side a copy
// reads from, and each side of the check that follows it.
type Source interface {
	// Each calls fn with every record of kind k, each a value of the type
	// the kind's constant names, in no promised order.
	Each(k Kind, fn func(rec any) error) error
}

// DeletedBranch is the mark a deleted branch leaves, so the seed does not
// bring it back.
type DeletedBranch struct {
	ID string
	At time.Time // UTC
}

// KeyOwner is an API key's digest and the branch it is a key of (the
// current key, or the previous one of a rotation).
type KeyOwner struct{ Digest, BranchID string }

// BranchDefaults is a branch's default conditions.
type BranchDefaults struct {
	BranchID   string
	Conditions Conditions
}

// CounterRecord is a quota counter: Scope is "s/" and a service's id, or
// "b/" and a branch's.
type CounterRecord struct {
	Scope   string
	Counter quota.Counter
}

// Slip is a service's record of a slip, under its key (SlipKey).
type Slip struct {
	ServiceID, Key string
	Record         *SlipRecord
}

// ClaimedNonce is a signed request's nonce, remembered until the Unix
// minute ForgetMinute.
type ClaimedNonce struct {
	ServiceID, Value string
	ForgetMinute     int64
}

// AuditEntry is an audit record as written (api.AuditRecord's JSON, Doc),
// with what it is looked up by.
type AuditEntry struct {
	AtMs              int64
	ServiceID, Action string
	Doc               []byte
}

// Canonical returns the encoding of a record that a check compares: the
// same record gives the same bytes whichever store it was read from. It
// reuses the stores' own encodings where there is one (a slip record's
// binary form, a history entry's, an outbox message's); a record that
// is JSON in both stores is its JSON.
func Canonical(rec any) ([]byte, error) {
	switch r := rec.(type) {
	case Service, Branch, B2BClient, BankAccount, AdminToken, Job:
		return json.Marshal(r)
	case BranchDefaults:
		c, err := json.Marshal(r.Conditions)
		return append([]byte(r.BranchID+"\x00"), c...), err
	case DeletedBranch:
		return []byte(r.ID + "\x00" + r.At.UTC().Format(time.RFC3339Nano)), nil
	case KeyOwner:
		return []byte(r.Digest + "\x00" + r.BranchID), nil
	case CounterRecord:
		b := append([]byte(r.Scope), 0)
		for _, n := range []int64{r.Counter.Period, r.Counter.Used, r.Counter.Total} {
			b = binary.BigEndian.AppendUint64(b, uint64(n))
		}
		return b, nil
	case Slip:
		return r.Record.encode(append(appendSlipRecordKey(nil, r.ServiceID, r.Key), 0)), nil
	case Verification:
		return r.appendEntry(nil), nil
	case ClaimedNonce:
		return nonceKey(r), nil
	case AuditEntry:
		b := binary.BigEndian.AppendUint64(nil, uint64(r.AtMs))
		b = append(append(append(append(b, r.ServiceID...), 0), r.Action...), 0)
		return append(b, r.Doc...), nil
	case Message:
		// The number is part of it: the outbox's order is what it means.
		return append(binary.BigEndian.AppendUint64(nil, r.Seq), encodeMessage(r)...), nil
	}
	return nil, fmt.Errorf("store: no canonical form of %T", rec)
}

// Sum is what a check compares of one kind of records: how many there are,
// and the sum (mod 2^256) of the SHA-256 of each one's canonical encoding,
// which is the same whatever order the records are read in.
type Sum struct {
	Count  int64
	Digest [sha256.Size]byte
}

func (s *Sum) add(canonical []byte) {
	d := sha256.Sum256(canonical)
	var carry uint64
	for i := len(d) - 8; i >= 0; i -= 8 {
		var n uint64
		n, carry = bits.Add64(binary.BigEndian.Uint64(s.Digest[i:]), binary.BigEndian.Uint64(d[i:]), carry)
		binary.BigEndian.PutUint64(s.Digest[i:], n)
	}
	s.Count++
}

// Tally reads every record of src and returns each kind's Sum; progress,
// when not nil, is told of the start of each kind (n 0) and of every
// 10,000th record.
func Tally(src Source, progress func(k Kind, n int64)) (map[Kind]Sum, error) {
	out := make(map[Kind]Sum, len(Kinds))
	for _, k := range Kinds {
		var s Sum
		if progress != nil {
			progress(k, 0)
		}
		err := src.Each(k, func(rec any) error {
			c, err := Canonical(rec)
			if err != nil {
				return err
			}
			if s.add(c); progress != nil && s.Count%10_000 == 0 {
				progress(k, s.Count)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = s
	}
	return out, nil
}

// Export reads a store's bbolt file, read-only, as a Source: what a copy to
// another store reads. It holds the file's lock shared, so no core can open
// it meanwhile (and it cannot be opened while a core has it).
type Export struct {
	db  *bolt.DB
	now time.Time
	// DeadEntries counts the history entries the last Each(KindHistory)
	// left out because their slip record is gone (Bolt.History hides them
	// too).
	DeadEntries int64
}

var _ Source = (*Export)(nil)

// ErrInUse refuses to export a file a core has open.
var ErrInUse = errors.New("store: the file is in use")

// knownBuckets are the buckets of schemaVersion: what Export reads, or
// what is made of it (indexes and the meta bucket).
var knownBuckets = append(slices.Clone(allBuckets), bucketConditions)

// OpenExport opens the store's file at path read-only, waiting up to wait
// for its lock: ErrInUse when a core holds it. now decides which nonces are
// still live. The file must be of this build's schema, and hold no bucket
// this build does not know: a record of a kind Export does not read is
// never left behind.
func OpenExport(path string, now time.Time, wait time.Duration) (*Export, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: wait})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("%s: %w", path, ErrInUse)
	} else if err != nil {
		return nil, err
	}
	err = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return errors.New("not a store: no meta bucket")
		}
		if v := string(meta.Get([]byte("schema"))); v != strconv.Itoa(schemaVersion) {
			return fmt.Errorf("the file is of schema %q, this build exports schema %d: start this build's core on it once (it upgrades the file), stop it, then copy", v, schemaVersion)
		}
		return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			if !slices.ContainsFunc(knownBuckets, func(b []byte) bool { return bytes.Equal(b, name) }) {
				return fmt.Errorf("the file holds a bucket %q this build does not know: copy it with the build that wrote it", name)
			}
			return nil
		})
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Export{db: db, now: now}, nil
}

// Close releases the file.
func (e *Export) Close() error { return e.db.Close() }

// Each calls fn with every record of kind k, in one read transaction.
// Indexes (records by service, jobs by due time, slip records by age, the
// unfinished jobs' counts, admin tokens by digest) are not records: the
// store that takes the records makes its own.
func (e *Export) Each(k Kind, fn func(rec any) error) error {
	return e.db.View(func(tx *bolt.Tx) error {
		switch k {
		case KindServices:
			return eachJSON[Service](tx.Bucket(bucketServices), fn)
		case KindBranches:
			return eachJSON[Branch](tx.Bucket(bucketBranches), fn)
		case KindDeletedBranches:
			return tx.Bucket(bucketBranchesDeleted).ForEach(func(id, v []byte) error {
				at, err := time.Parse(time.RFC3339, string(v))
				if err != nil {
					return fmt.Errorf("deleted branch %q: %w", id, err)
				}
				return fn(DeletedBranch{ID: string(id), At: at.UTC()})
			})
		case KindKeys:
			return tx.Bucket(bucketKeys).ForEach(func(k, v []byte) error { return fn(KeyOwner{Digest: string(k), BranchID: string(v)}) })
		case KindClients:
			return eachJSON[B2BClient](tx.Bucket(bucketB2B), fn)
		case KindAccounts:
			return eachJSON[BankAccount](tx.Bucket(bucketAccounts), fn)
		case KindConditions:
			b := tx.Bucket(bucketConditions)
			if b == nil {
				return nil // made by the first write of one
			}
			return b.ForEach(func(id, v []byte) error {
				var c Conditions
				if err := json.Unmarshal(v, &c); err != nil {
					return fmt.Errorf("%q: %w", id, err)
				}
				return fn(BranchDefaults{BranchID: string(id), Conditions: c})
			})
		case KindCounters:
			return e.counters(tx, fn)
		case KindAdminTokens:
			return eachJSON[AdminToken](tx.Bucket(bucketAdminTokens), fn)
		case KindSlips:
			return tx.Bucket(bucketSlips).ForEach(func(k, v []byte) error {
				svc, key, ok := bytes.Cut(k, []byte{0})
				rec, err := decodeSlipRecord(v)
				if !ok || err != nil {
					return fmt.Errorf("slip record %q does not decode: %v", k, err)
				}
				return fn(Slip{ServiceID: string(svc), Key: string(key), Record: rec})
			})
		case KindHistory:
			return e.history(tx, fn)
		case KindNonces:
			live := uint64(e.now.Unix()/60 + 1) // as ExpireNonces
			return tx.Bucket(bucketNonces).ForEach(func(k, _ []byte) error {
				n, ok := splitNonceKey(k)
				if !ok {
					return fmt.Errorf("nonce %q does not decode", k)
				}
				if uint64(n.ForgetMinute) < live {
					return nil
				}
				return fn(n)
			})
		case KindJobs:
			return eachJSON[Job](tx.Bucket(bucketJobs), fn)
		case KindAudit:
			return tx.Bucket(bucketAudit).ForEach(func(k, v []byte) error {
				var r api.AuditRecord
				if len(k) != 16 || json.Unmarshal(v, &r) != nil {
					return fmt.Errorf("audit record %x does not decode", k)
				}
				at, _ := splitTimeKey(k[:8])
				return fn(AuditEntry{AtMs: at, ServiceID: r.ServiceID, Action: r.Action, Doc: bytes.Clone(v)})
			})
		case KindOutbox:
			// Numbered from 1 in their order: the history's entries share
			// the sequence in bbolt, and a store that takes them numbers
			// its messages without gaps.
			var seq uint64
			return tx.Bucket(bucketOutbox).ForEach(func(k, v []byte) error {
				if isHistoryKey(k) {
					return nil
				}
				m, err := decodeMessage(v)
				if err != nil {
					return fmt.Errorf("outbox entry %x: %w", k, err)
				}
				seq++
				m.Seq = seq
				return fn(m)
			})
		}
		return fmt.Errorf("store: no kind %q", k)
	})
}

// eachJSON calls fn with each record of b decoded as a T.
func eachJSON[T any](b *bolt.Bucket, fn func(rec any) error) error {
	return b.ForEach(func(k, v []byte) error {
		var r T
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("%q: %w", k, err)
		}
		return fn(r)
	})
}

// counters gives the stored counters, and a zero one for each service and
// branch that has none yet: bbolt writes a counter at the first charge,
// where a store whose writes lock their counters' rows has one from the
// start.
func (e *Export) counters(tx *bolt.Tx, fn func(rec any) error) error {
	seen := map[string]bool{}
	err := tx.Bucket(bucketQuota).ForEach(func(k, v []byte) error {
		seen[string(k)] = true
		return fn(CounterRecord{Scope: string(k), Counter: readCounter(tx.Bucket(bucketQuota), string(k))})
	})
	if err != nil {
		return err
	}
	for _, x := range []struct {
		b      []byte
		prefix string
	}{{bucketServices, "s/"}, {bucketBranches, "b/"}} {
		err := tx.Bucket(x.b).ForEach(func(id, _ []byte) error {
			if scope := x.prefix + string(id); !seen[scope] {
				return fn(CounterRecord{Scope: scope})
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// history gives every branch's entries: those of its runs and those still
// waiting in the outbox, merged in key order. An entry whose slip record is
// gone is left out, as History leaves it out (prune removes it later). Two
// entries of one branch for one slip in one millisecond, which bbolt keeps
// side by side, take the next free milliseconds, as a store whose entries
// are keyed by branch, time and slip keeps them (see dedup).
func (e *Export) history(tx *bolt.Tx, fn func(rec any) error) error {
	e.DeadEntries = 0
	waiting := map[string][]kv{} // by prefix, in key order
	outbox := tx.Bucket(bucketOutbox).Cursor()
	for k, v := outbox.Seek(seqKey(historyFrom(tx))); k != nil; k, v = outbox.Next() {
		if !isHistoryKey(k) {
			continue
		}
		prefix, key, value, ok := cutEntry(v)
		if !ok {
			return errBadHistory
		}
		waiting[string(prefix)] = append(waiting[string(prefix)], kv{key, value})
	}
	for _, w := range waiting {
		slices.SortStableFunc(w, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
	}
	slips := tx.Bucket(bucketSlips)
	var d dedup
	emit := func(prefix []byte, x kv) error {
		serviceID := string(prefix[:bytes.IndexByte(prefix, 0)])
		if !liveEntry(slips, serviceID, prefix, x.k) {
			e.DeadEntries++
			return nil
		}
		v, err := decodeVerification(prefix, x.k, x.v)
		if err != nil {
			return err
		}
		d.next(&v)
		return fn(v)
	}
	var cur []byte // the prefix of the branch being read
	var pending []kv
	flush := func() error {
		for _, x := range pending {
			if err := emit(cur, x); err != nil {
				return err
			}
		}
		pending = nil
		return nil
	}
	c := tx.Bucket(bucketHistory).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		prefix, ok := keyPrefix(k)
		if !ok || !isRunOf(k, prefix) {
			return errBadHistory
		}
		if !bytes.Equal(prefix, cur) {
			if err := flush(); err != nil {
				return err
			}
			cur, pending, d = bytes.Clone(prefix), waiting[string(prefix)], dedup{}
			delete(waiting, string(prefix))
		}
		entries, err := decodeRun(k, v)
		if err != nil {
			return err
		}
		for _, x := range entries {
			for len(pending) > 0 && bytes.Compare(pending[0].k, x.k) < 0 {
				if err := emit(cur, pending[0]); err != nil {
					return err
				}
				pending = pending[1:]
			}
			if err := emit(cur, x); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	for _, prefix := range slices.Sorted(maps.Keys(waiting)) { // branches with no run yet
		cur, pending, d = []byte(prefix), waiting[prefix], dedup{}
		if err := flush(); err != nil {
			return err
		}
	}
	return nil
}

// dedup moves the entries of one branch, read in key order, off the
// milliseconds taken by an entry of the same slip before them: to the first
// free one after.
type dedup struct {
	last  string           // the key (time and slip) of the entry before
	taken map[string]int64 // by slip, the last millisecond an entry moved to
}

func (d *dedup) next(v *Verification) {
	key := func() string { return strconv.FormatInt(v.At.UnixMilli(), 10) + "\x00" + v.SlipKey }
	ms, moved := v.At.UnixMilli(), false
	if t, ok := d.taken[v.SlipKey]; ok && ms <= t {
		ms, moved = t+1, true
	} else if key() == d.last {
		ms, moved = ms+1, true
	}
	if moved {
		if d.taken == nil {
			d.taken = map[string]int64{}
		}
		d.taken[v.SlipKey] = ms
		v.At = time.UnixMilli(ms)
	}
	d.last = key()
}
