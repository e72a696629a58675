package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bucketHistory is every branch's history of verifications: one entry for
// each verification that charged quota or first recorded a slip for the
// branch (Apply). An entry's key is service NUL branch NUL time (Unix ms,
// big-endian) and the slip's key, so that a branch's entries are one range
// in time order; its value holds what a listing shows and filters on
// (History), so a page reads no slip record. The entries are kept in runs:
// a run is a branch's entries in key order, under the key service NUL
// branch NUL the time of its newest entry, holding those after the run
// before it (runs of a branch never overlap), each as its time (8 bytes),
// its slip key and its value (a uvarint of the length before each). One
// put stores a run, where it took one a entry. The newest entries wait in
// the outbox (note).
var bucketHistory = []byte("history-runs")

// bucketHistoryEntries is where a store of before the runs kept an entry
// under its own key: Open moves them into runs.
var bucketHistoryEntries = []byte("history")

// runBytes is the size up to which a branch's newest run takes the next
// entries: beyond it, they start a run of their own.
const runBytes = 4096

// Verification is one entry of a branch's history.
type Verification struct {
	At                  time.Time
	ServiceID, BranchID string
	// SlipKey is the slip's key (SlipKey): its kind, the sending bank and
	// the transaction reference.
	SlipKey string
	Amount  float64
	// ReceivingBank is the receiving bank's code ("" for a wallet slip).
	ReceivingBank string
	Duplicate     bool
	AmountMatched bool
	// DateMatched is whether the slip's date met the date conditions;
	// nil when none applied.
	DateMatched *bool
	Remark      string
	JobID       string // the async job's; "" for a synchronous verification
}

// Flags of an entry's first byte.
const (
	histDuplicate = 1 << iota
	histAmountMatched
	histDateChecked
	histDateMatched
)

// historyPrefix is the start of every key of a branch's entries.
func historyPrefix(serviceID, branchID string) []byte {
	return appendHistoryPrefix(nil, serviceID, branchID)
}

func appendHistoryPrefix(dst []byte, serviceID, branchID string) []byte {
	dst = append(append(dst, serviceID...), 0)
	return append(append(dst, branchID...), 0)
}

// appendKey appends v's key to dst.
func (v *Verification) appendKey(dst []byte) []byte {
	dst = appendHistoryPrefix(dst, v.ServiceID, v.BranchID)
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.At.UnixMilli()))
	return append(dst, v.SlipKey...)
}

// maxSize bounds the length of v's entry (appendEntry).
func (v *Verification) maxSize() int {
	return binary.MaxVarintLen64 + len(v.ServiceID) + len(v.BranchID) + 2 + 8 + len(v.SlipKey) +
		9 + 3*binary.MaxVarintLen64 + len(v.ReceivingBank) + len(v.Remark) + len(v.JobID)
}

// appendValue appends v's value to dst.
func (v *Verification) appendValue(dst []byte) []byte {
	var flags byte
	if v.Duplicate {
		flags |= histDuplicate
	}
	if v.AmountMatched {
		flags |= histAmountMatched
	}
	if v.DateMatched != nil {
		flags |= histDateChecked
		if *v.DateMatched {
			flags |= histDateMatched
		}
	}
	dst = append(dst, flags)
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(v.Amount))
	dst = appendString(dst, v.ReceivingBank)
	dst = appendString(dst, v.Remark)
	return appendString(dst, v.JobID)
}

var errBadHistory = errors.New("store: history entry does not decode")

// decodeVerification reads the entry (k, v) of bucketHistory, whose
// service and branch are prefix's. It copies what it keeps.
func decodeVerification(prefix, k, v []byte) (Verification, error) {
	var out Verification
	if len(k) < len(prefix)+8 || len(v) < 9 {
		return out, errBadHistory
	}
	svc, br, _ := strings.Cut(string(prefix[:len(prefix)-1]), "\x00")
	out.ServiceID, out.BranchID = svc, br
	out.At = time.UnixMilli(int64(binary.BigEndian.Uint64(k[len(prefix):])))
	out.SlipKey = string(k[len(prefix)+8:])
	flags := v[0]
	out.Duplicate, out.AmountMatched = flags&histDuplicate != 0, flags&histAmountMatched != 0
	if flags&histDateChecked != 0 {
		m := flags&histDateMatched != 0
		out.DateMatched = &m
	}
	out.Amount = math.Float64frombits(binary.BigEndian.Uint64(v[1:9]))
	rest, ok := v[9:], true
	for _, dst := range []*string{&out.ReceivingBank, &out.Remark, &out.JobID} {
		if *dst, rest, ok = cutString(rest); !ok {
			return out, errBadHistory
		}
	}
	return out, nil
}

// The newest entries of the history wait in the outbox (bucketOutbox),
// each under the key of the sequence number it takes there followed by
// historyMark (9 bytes: messages have 8), with as value the entry's key in
// bucketHistory (a uvarint of its length first) and value. A verification
// writes its usage message there in the same transaction: the entry goes
// to a page the transaction writes anyway rather than to one of its own,
// which, read, rewritten and synced with every transaction, was most of
// what an entry cost. Once historyBatch sequence numbers have gone by since
// the first waiting entry (metaHistoryFrom), the write that takes the last
// copies the waiting entries to bucketHistory, where the entries of a
// branch share its pages, and Ack removes them from the outbox with the
// messages. A listing reads both; publishers read messages only.
const historyMark = 'h'

// metaHistoryFrom, in bucketMeta, is the outbox sequence number from
// which entries of the history wait there (big-endian; absent: 0).
var metaHistoryFrom = []byte("history-from")

// historyBatch is how many outbox sequence numbers go by before the
// entries waiting there move to bucketHistory: a listing reads them all.
const historyBatch = 1024

func historyKey(seq uint64) []byte { return append(seqKey(seq), historyMark) }

func isHistoryKey(k []byte) bool { return len(k) == 9 }

// waitingFrom is the outbox sequence number from which entries of the
// history wait there, as the running transaction of the committer has
// left it.
func (s *Bolt) waitingFrom() uint64 {
	if s.historyMoved != 0 {
		return s.historyMoved
	}
	return s.historyFrom
}

// historyFrom reads metaHistoryFrom.
func historyFrom(tx *bolt.Tx) uint64 {
	if v := tx.Bucket(bucketMeta).Get(metaHistoryFrom); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// note adds the history entry encoded in entry (appendEntry) to the
// outbox; entry must stay unchanged until tx commits. The entry that
// completes a batch moves the waiting ones to bucketHistory.
func (s *Bolt) note(tx *bolt.Tx, entry []byte) error {
	b := tx.Bucket(bucketOutbox)
	b.FillPercent = 1 // see enqueue
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	var k [9]byte // bbolt copies a key
	if err := b.Put(append(binary.BigEndian.AppendUint64(k[:0], seq), historyMark), entry); err != nil {
		return err
	}
	if seq+1-s.waitingFrom() < s.historyBatch {
		return nil
	}
	return s.index(tx)
}

// appendEntry appends v's entry of bucketHistoryNew: its key and value in
// bucketHistory.
func (v *Verification) appendEntry(dst []byte) []byte {
	keyLen := len(v.ServiceID) + len(v.BranchID) + 2 + 8 + len(v.SlipKey) // appendKey's
	return v.appendValue(v.appendKey(binary.AppendUvarint(dst, uint64(keyLen))))
}

// cutEntry splits an entry of bucketHistoryNew into the key and value it
// has in bucketHistory, and the key's service-and-branch prefix.
func cutEntry(entry []byte) (prefix, key, value []byte, ok bool) {
	l, n := binary.Uvarint(entry)
	if n <= 0 || l > uint64(len(entry)-n) {
		return nil, nil, nil, false
	}
	key, value = entry[n:n+int(l)], entry[n+int(l):]
	if prefix, ok = keyPrefix(key); !ok || len(key) < len(prefix)+8 {
		return nil, nil, nil, false
	}
	return prefix, key, value, true
}

// index moves the entries of the history waiting in the outbox to
// bucketHistory: adds them to their branches' runs, and Ack removes them
// from the outbox with the messages around them. The committer learns the
// outbox sequence number from which entries wait anew once tx commits
// (update).
func (s *Bolt) index(tx *bolt.Tx) error {
	outbox := tx.Bucket(bucketOutbox)
	// The entries are read from the outbox's pages, which nothing frees
	// before the transaction commits; the runs made of them are copies.
	byBranch := map[string][]kv{} // by prefix
	c := outbox.Cursor()
	for k, v := c.Seek(seqKey(s.waitingFrom())); k != nil; k, v = c.Next() {
		if !isHistoryKey(k) {
			continue
		}
		prefix, key, value, ok := cutEntry(v)
		if !ok {
			return errBadHistory
		}
		if branch, ok := byBranch[string(prefix)]; ok { // no key made
			byBranch[string(prefix)] = append(branch, kv{key, value})
		} else {
			byBranch[string(prefix)] = make([]kv, 1, 64)
			byBranch[string(prefix)][0] = kv{key, value}
		}
	}
	for _, prefix := range slices.Sorted(maps.Keys(byBranch)) {
		if err := s.addRuns(tx, []byte(prefix), byBranch[prefix]); err != nil {
			return err
		}
	}
	next := outbox.Sequence() + 1
	s.historyMoved = next
	return tx.Bucket(bucketMeta).Put(metaHistoryFrom, seqKey(next))
}

// kv is an entry of the history: its key and value.
type kv struct{ k, v []byte }

// addRuns adds entries, all of the branch whose keys start with prefix, to
// its runs, after removing up to historyPruned of its expired entries for
// each (prune).
func (s *Bolt) addRuns(tx *bolt.Tx, prefix []byte, entries []kv) error {
	history := tx.Bucket(bucketHistory)
	if err := s.prune(tx, history, prefix, len(entries)*historyPruned); err != nil {
		return err
	}
	slices.SortStableFunc(entries, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
	c := history.Cursor()
	// An entry no newer than the branch's newest run (a clock set back)
	// joins the run whose time it falls in.
	var newest []byte // the branch's newest run's key
	if k, _ := c.Seek(runKey(prefix, math.MaxInt64)); k == nil {
		newest, _ = c.Last()
	} else {
		newest, _ = c.Prev()
	}
	if !isRunOf(newest, prefix) {
		newest = nil
	}
	for len(entries) > 0 && newest != nil && keyMs(entries[0].k, prefix) <= keyMs(newest, prefix) {
		k, v := c.Seek(runKey(prefix, keyMs(entries[0].k, prefix)))
		n := 0
		for n < len(entries) && keyMs(entries[n].k, prefix) <= keyMs(k, prefix) {
			n++
		}
		merged, err := decodeRun(k, v)
		if err != nil {
			return err
		}
		merged = append(merged, entries[:n]...)
		slices.SortStableFunc(merged, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
		if err := history.Put(k, appendRun(nil, prefix, merged)); err != nil {
			return err
		}
		entries = entries[n:]
	}
	// The newer ones extend the newest run up to runBytes, then start runs
	// of their own.
	var run []byte
	if newest != nil && len(entries) > 0 {
		if v := history.Get(newest); len(v) < runBytes {
			run = append(run, v...)
			if err := history.Delete(newest); err != nil {
				return err
			}
		}
	}
	return putRuns(history, prefix, run, entries)
}

// putRuns puts entries, of the branch whose keys start with prefix, in key
// order and newer than its runs, in runs after the start of one, run (nil:
// none); a run ends past runBytes, but never between entries of one
// millisecond.
func putRuns(history *bolt.Bucket, prefix, run []byte, entries []kv) error {
	for i, e := range entries {
		run = appendRunEntry(run, prefix, e)
		if i == len(entries)-1 || len(run) >= runBytes && keyMs(entries[i+1].k, prefix) != keyMs(e.k, prefix) {
			if err := history.Put(runKey(prefix, keyMs(e.k, prefix)), run); err != nil {
				return err
			}
			run = nil
		}
	}
	return nil
}

// moveEntries puts the entries of bucketHistoryEntries, which a store of
// before the runs kept, in runs, and removes that bucket.
func moveEntries(tx *bolt.Tx) error {
	old := tx.Bucket(bucketHistoryEntries)
	if old == nil {
		return nil
	}
	history := tx.Bucket(bucketHistory)
	var prefix []byte
	var branch []kv
	flush := func() error {
		err := putRuns(history, prefix, nil, branch)
		branch = branch[:0]
		return err
	}
	c := old.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		p, ok := keyPrefix(k)
		if !ok || len(k) < len(p)+8 {
			return errBadHistory
		}
		if !bytes.Equal(p, prefix) {
			if err := flush(); err != nil {
				return err
			}
			prefix = p
		}
		branch = append(branch, kv{k, v})
	}
	if err := flush(); err != nil {
		return err
	}
	return tx.DeleteBucket(bucketHistoryEntries)
}

// runKey is the key of the run of the branch whose keys start with prefix
// whose newest entry is of the time ms.
func runKey(prefix []byte, ms int64) []byte {
	return binary.BigEndian.AppendUint64(bytes.Clone(prefix), uint64(ms))
}

func isRunOf(k, prefix []byte) bool { return len(k) == len(prefix)+8 && bytes.HasPrefix(k, prefix) }

// keyMs is the time in an entry's or a run's key that starts with prefix.
func keyMs(k, prefix []byte) int64 { return int64(binary.BigEndian.Uint64(k[len(prefix):])) }

// appendRunEntry appends the entry e, of the branch whose keys start with
// prefix, to a run's value.
func appendRunEntry(dst, prefix []byte, e kv) []byte {
	dst = append(dst, e.k[len(prefix):len(prefix)+8]...)
	dst = append(binary.AppendUvarint(dst, uint64(len(e.k)-len(prefix)-8)), e.k[len(prefix)+8:]...)
	return append(binary.AppendUvarint(dst, uint64(len(e.v))), e.v...)
}

func appendRun(dst, prefix []byte, entries []kv) []byte {
	for _, e := range entries {
		dst = appendRunEntry(dst, prefix, e)
	}
	return dst
}

// decodeRun returns the entries of the run (k, v), their values in v.
func decodeRun(k, v []byte) ([]kv, error) {
	entries, _, err := decodeRunInto(nil, nil, k, v)
	return entries, err
}

// decodeRunInto is decodeRun appending to dst, the keys made in keys
// (both reused: their earlier contents are not kept).
func decodeRunInto(dst []kv, keys []byte, k, v []byte) ([]kv, []byte, error) {
	prefix := k[:len(k)-8]
	dst, keys = dst[:0], keys[:0]
	for rest := v; len(rest) > 0; {
		if len(rest) < 8 {
			return nil, keys, errBadHistory
		}
		ms := rest[:8]
		l, n := binary.Uvarint(rest[8:])
		if n <= 0 || l > uint64(len(rest)-8-n) {
			return nil, keys, errBadHistory
		}
		slip := rest[8+n : 8+n+int(l)]
		rest = rest[8+n+int(l):]
		l, n = binary.Uvarint(rest)
		if n <= 0 || l > uint64(len(rest)-n) {
			return nil, keys, errBadHistory
		}
		at := len(keys)
		keys = append(append(append(keys, prefix...), ms...), slip...)
		dst = append(dst, kv{keys[at:len(keys):len(keys)], rest[n : n+int(l)]})
		rest = rest[n+int(l):]
	}
	return dst, keys, nil
}

// firstRunEntry returns the key of the first entry of the run (k, v).
func firstRunEntry(k, v []byte) ([]byte, bool) {
	if len(v) < 8 {
		return nil, false
	}
	l, n := binary.Uvarint(v[8:])
	if n <= 0 || l > uint64(len(v)-8-n) {
		return nil, false
	}
	return append(append(append(make([]byte, 0, len(k)+int(l)), k[:len(k)-8]...), v[:8]...), v[8+n:8+n+int(l)]...), true
}

// prune removes up to max of the oldest entries of the branch whose keys
// start with prefix whose slip record is gone, when slip records expire:
// the history is kept as long as the slips are. It reads the branch's
// oldest run.
func (s *Bolt) prune(tx *bolt.Tx, history *bolt.Bucket, prefix []byte, max int) error {
	if !s.slipAges {
		return nil
	}
	k, v := history.Cursor().Seek(prefix)
	if !isRunOf(k, prefix) {
		return nil
	}
	slips := tx.Bucket(bucketSlips)
	serviceID := string(prefix[:bytes.IndexByte(prefix, 0)])
	if first, ok := firstRunEntry(k, v); ok && liveEntry(slips, serviceID, prefix, first) {
		return nil // the oldest lives: nothing to read further
	}
	entries, err := decodeRun(k, v)
	if err != nil {
		return err
	}
	dead := 0
	for dead < len(entries) && dead < max && !liveEntry(slips, serviceID, prefix, entries[dead].k) {
		dead++
	}
	switch {
	case dead == 0:
		return nil
	case dead == len(entries):
		return history.Delete(k)
	}
	return history.Put(k, appendRun(nil, prefix, entries[dead:]))
}

// liveEntry reports whether the slip record of the history entry with key
// k is the one it was made with: kept, and first verified no later than
// the entry (a slip forgotten and verified anew has a later record).
func liveEntry(slips *bolt.Bucket, serviceID string, prefix, k []byte) bool {
	if len(k) < len(prefix)+8 {
		return false
	}
	var kb [keyRoom]byte // bbolt's Get keeps no key: on the stack
	raw := slips.Get(append(append(append(kb[:0], serviceID...), 0), k[len(prefix)+8:]...))
	first, ok := recordFirstAt(raw)
	return ok && first*1000 <= int64(binary.BigEndian.Uint64(k[len(prefix):]))
}

// HistoryQuery selects entries of a service's history, newest first.
type HistoryQuery struct {
	ServiceID string
	// BranchID selects one branch; "" every branch of the service.
	BranchID string
	// From (inclusive) and To (exclusive) bound the time; zero: unbounded.
	From, To time.Time
	// Duplicate, when set, selects entries with that isDuplicate.
	Duplicate *bool
	// AmountMin and AmountMax, when set, bound the slip's amount.
	AmountMin, AmountMax *float64
	// Remark, when set, selects entries with exactly that remark.
	Remark *string
	// After continues a listing after the entry a Cursor named.
	After Cursor
	Limit int
}

// Cursor is where a listing stopped: the last entry it read (its time,
// branch and slip key), or empty for the start.
type Cursor struct {
	AtMs     int64
	BranchID string
	SlipKey  string
}

// maxHistoryScan bounds the entries one listing reads: a filter that
// selects few of a large history answers the entries it found so far and
// a cursor to go on from, rather than read it all in one request.
const maxHistoryScan = 50_000

// History lists the entries of q, newest first (by time, then branch and
// slip key), at most q.Limit of them, and the cursor to list the next ones
// from (nil when none follow).
func (s *Bolt) History(q HistoryQuery) ([]Verification, *Cursor, error) {
	var out []Verification
	var next *Cursor
	err := s.db.View(func(tx *bolt.Tx) error {
		out, next = nil, nil
		b, slips := tx.Bucket(bucketHistory), tx.Bucket(bucketSlips)
		var heads []*historyHead
		var last Cursor // the last entry read
		add := func(br string, c entryCursor) {
			h := &historyHead{prefix: historyPrefix(q.ServiceID, br), branch: br, c: c}
			if h.start(q) {
				heads = append(heads, h)
			}
		}
		var read []*runs // a run that does not decode fails the listing
		for _, br := range historyBranches(b, q.ServiceID, q.BranchID) {
			r := &runs{c: b.Cursor()}
			read = append(read, r)
			add(br, r)
		}
		failed := func() error {
			for _, r := range read {
				if r.err != nil {
					return r.err
				}
			}
			return nil
		}
		for br, c := range waiting(tx, q.ServiceID, q.BranchID) {
			add(br, c)
		}
		for scanned := 0; len(heads) > 0; scanned++ {
			top := 0
			for i, h := range heads[1:] {
				if h.after(heads[top]) {
					top = i + 1
				}
			}
			h := heads[top]
			if len(out) == q.Limit || scanned == maxHistoryScan {
				if len(out) == q.Limit { // go on after the last one listed
					l := out[len(out)-1]
					last = Cursor{AtMs: l.At.UnixMilli(), BranchID: l.BranchID, SlipKey: l.SlipKey}
				} // else stopped short: go on after the last one read
				next = &last
				return failed()
			}
			v, err := decodeVerification(h.prefix, h.k, h.v)
			if err != nil {
				return err
			}
			if q.selects(&v) && (!s.slipAges || liveEntry(slips, q.ServiceID, h.prefix, h.k)) {
				out = append(out, v)
			}
			last = Cursor{AtMs: h.ms(), BranchID: h.branch, SlipKey: v.SlipKey}
			if !h.next(q) {
				heads = append(heads[:top], heads[top+1:]...)
			}
		}
		return failed()
	})
	return out, next, err
}

func (q *HistoryQuery) selects(v *Verification) bool {
	switch {
	case q.Duplicate != nil && v.Duplicate != *q.Duplicate,
		q.AmountMin != nil && v.Amount < *q.AmountMin,
		q.AmountMax != nil && v.Amount > *q.AmountMax,
		q.Remark != nil && v.Remark != *q.Remark:
		return false
	}
	return true
}

// historyBranches returns the branch, or every branch of the service with
// a history (deleted ones too), one seek each.
func historyBranches(b *bolt.Bucket, serviceID, branchID string) []string {
	if branchID != "" {
		return []string{branchID}
	}
	prefix := []byte(serviceID + "\x00")
	var out []string
	c := b.Cursor()
	for k, _ := c.Seek(prefix); bytes.HasPrefix(k, prefix); {
		br, _, ok := bytes.Cut(k[len(prefix):], []byte{0})
		if !ok {
			break
		}
		out = append(out, string(br))
		k, _ = c.Seek(append(historyPrefix(serviceID, string(br))[:len(prefix)+len(br)], 1)) // past the branch's NUL
	}
	return out
}

// historyHead walks one branch's entries backwards: those of bucketHistory
// or those waiting in the outbox.
type historyHead struct {
	prefix []byte
	branch string
	c      entryCursor
	k, v   []byte
}

// entryCursor walks entries of the history in key order.
type entryCursor interface {
	Seek(seek []byte) (key, value []byte)
	Last() (key, value []byte)
	Prev() (key, value []byte)
}

// waiting returns, by branch, the entries of the history waiting in the
// outbox of the service (and of the branch, when not ""), each branch's as
// a cursor.
func waiting(tx *bolt.Tx, serviceID, branchID string) map[string]*entries {
	want := []byte(serviceID + "\x00")
	if branchID != "" {
		want = historyPrefix(serviceID, branchID)
	}
	var out map[string]*entries
	c := tx.Bucket(bucketOutbox).Cursor()
	for k, v := c.Seek(seqKey(historyFrom(tx))); k != nil; k, v = c.Next() {
		if !isHistoryKey(k) {
			continue
		}
		prefix, key, value, ok := cutEntry(v)
		if !ok || !bytes.HasPrefix(key, want) {
			continue
		}
		br := string(prefix[len(serviceID)+1 : len(prefix)-1])
		if out == nil {
			out = make(map[string]*entries)
		}
		e := out[br]
		if e == nil {
			e = &entries{}
			out[br] = e
		}
		e.kv = append(e.kv, kv{key, value})
	}
	for _, e := range out {
		slices.SortStableFunc(e.kv, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
	}
	return out
}

// entries is an entryCursor over entries in memory, sorted by key.
type entries struct {
	kv []kv
	i  int
}

func (e *entries) Seek(k []byte) ([]byte, []byte) {
	e.i, _ = slices.BinarySearchFunc(e.kv, k, func(x kv, k []byte) int { return bytes.Compare(x.k, k) })
	return e.at()
}

func (e *entries) Last() ([]byte, []byte) {
	e.i = len(e.kv) - 1
	return e.at()
}

func (e *entries) Prev() ([]byte, []byte) {
	e.i = max(e.i-1, -1)
	return e.at()
}

func (e *entries) at() ([]byte, []byte) {
	if e.i < 0 || e.i >= len(e.kv) {
		return nil, nil
	}
	return e.kv[e.i].k, e.kv[e.i].v
}

// runs is an entryCursor over the entries of bucketHistory's runs, in key
// order: runs of a branch never overlap, so their order is their entries'.
type runs struct {
	c    *bolt.Cursor
	run  entries // the entries of the run c is on
	keys []byte  // their keys
	err  error   // a run that did not decode
}

func (r *runs) load(k, v []byte) bool {
	if k == nil {
		r.run = entries{}
		return false
	}
	var err error
	if r.run.kv, r.keys, err = decodeRunInto(r.run.kv, r.keys, k, v); err != nil {
		r.err, r.run = err, entries{}
		return false
	}
	return true
}

// Seek places r on the first entry at or after k.
func (r *runs) Seek(k []byte) ([]byte, []byte) {
	prefix, ok := keyPrefix(k)
	if !ok {
		return nil, nil
	}
	ms := append(append([]byte(nil), k[len(prefix):min(len(k), len(prefix)+8)]...), make([]byte, 8)...)[:8]
	for rk, rv := r.c.Seek(append(bytes.Clone(prefix), ms...)); r.load(rk, rv); rk, rv = r.c.Next() {
		if ek, ev := r.run.Seek(k); ek != nil {
			return ek, ev
		}
	}
	return nil, nil
}

func (r *runs) Last() ([]byte, []byte) {
	if !r.load(r.c.Last()) {
		return nil, nil
	}
	return r.run.Last()
}

func (r *runs) Prev() ([]byte, []byte) {
	if ek, ev := r.run.Prev(); ek != nil {
		return ek, ev
	}
	if !r.load(r.c.Prev()) {
		return nil, nil
	}
	return r.run.Last()
}

// keyPrefix returns the service-and-branch prefix of an entry's key.
func keyPrefix(k []byte) ([]byte, bool) {
	svc := bytes.IndexByte(k, 0)
	if svc < 0 {
		return nil, false
	}
	br := bytes.IndexByte(k[svc+1:], 0)
	if br < 0 {
		return nil, false
	}
	return k[:svc+br+2], true
}

func (h *historyHead) ms() int64 { return int64(binary.BigEndian.Uint64(h.k[len(h.prefix):])) }

// after reports whether h's entry comes before o's in the listing: later,
// or at the same time of a greater branch or slip key.
func (h *historyHead) after(o *historyHead) bool {
	if a, b := h.ms(), o.ms(); a != b {
		return a > b
	}
	if h.branch != o.branch {
		return h.branch > o.branch
	}
	return bytes.Compare(h.k, o.k) > 0
}

// start places h on the branch's newest entry the listing may show: before
// q.To and after q.After in the listing's order.
func (h *historyHead) start(q HistoryQuery) bool {
	bound := append(bytes.Clone(h.prefix), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	if !q.To.IsZero() {
		bound = binary.BigEndian.AppendUint64(bytes.Clone(h.prefix), uint64(max(q.To.UnixMilli(), 0)))
	}
	if a := q.After; a.AtMs != 0 || a.BranchID != "" || a.SlipKey != "" {
		var after []byte
		switch {
		case h.branch < a.BranchID: // entries up to a's time
			after = binary.BigEndian.AppendUint64(bytes.Clone(h.prefix), uint64(a.AtMs+1))
		case h.branch == a.BranchID: // entries before a's
			after = append(binary.BigEndian.AppendUint64(bytes.Clone(h.prefix), uint64(a.AtMs)), a.SlipKey...)
		default: // entries before a's time
			after = binary.BigEndian.AppendUint64(bytes.Clone(h.prefix), uint64(a.AtMs))
		}
		if bytes.Compare(after, bound) < 0 {
			bound = after
		}
	}
	k, v := h.c.Seek(bound)
	if k == nil {
		k, v = h.c.Last()
	} else {
		k, v = h.c.Prev()
	}
	h.k, h.v = k, v
	return h.valid(q)
}

// next moves h to the branch's entry before, reporting whether there is
// one the listing may show.
func (h *historyHead) next(q HistoryQuery) bool {
	h.k, h.v = h.c.Prev()
	return h.valid(q)
}

func (h *historyHead) valid(q HistoryQuery) bool {
	return bytes.HasPrefix(h.k, h.prefix) && len(h.k) >= len(h.prefix)+8 &&
		(q.From.IsZero() || h.ms() >= q.From.UnixMilli())
}
