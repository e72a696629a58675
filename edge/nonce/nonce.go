// Package nonce remembers the nonces of signed requests, so that a signed
// request is executed at most once.
//
// The Store is a set, not a cache: it never forgets a nonce while a request
// carrying it could still be accepted, and when its memory bound is reached
// it refuses new nonces (ErrFull) rather than evict old ones. Evicting would
// turn a flood into a replay window; refusing turns it into 429s or 503s for
// the flooding client first, which a client can retry.
//
// Nonces are grouped in buckets by the request's timestamp, not by the time
// they arrived. A request is accepted while its timestamp is within Window of
// the clock, so a nonce whose timestamp is ts stays acceptable until
// now > ts+Window; a bucket is due, whole, once every timestamp in it is
// older than now-Window.
//
// Each shard keeps its nonces in open-addressing hash tables (linear
// probing), each entry with the epoch of its bucket, so a new nonce costs
// one probe sequence however many buckets are live (a set per bucket costs a
// lookup, mostly a cache miss, in each of them). A shard has 64 tables, its
// segments, chosen by hash: a table that grows is rebuilt in one pass, and
// that pass covers a 64th of the shard.
//
// When a bucket is due its nonces are forgotten at once: an entry whose
// epoch is below the cutoff counts as absent. Their slots are freed
// gradually: every Use looks at the next few slots of its segment and
// deletes the due entries there (with backward shifting, so a table holds no
// tombstones and a probe ends at the first empty slot). A burst's memory
// goes back when a lap of a table finds it mostly empty; Sweep, and a store
// about to refuse with ErrFull, delete every due entry first.
package nonce

import (
	"errors"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Errors returned by Use. Compare with errors.Is: ErrClientFull is also
// ErrFull.
var (
	// ErrDuplicate: the client used this nonce inside the window (DUPLICATE_NONCE).
	ErrDuplicate = errors.New("nonce: duplicate")
	// ErrOutsideWindow: the timestamp is more than Window from now, either way
	// (INVALID_TIMESTAMP).
	ErrOutsideWindow = errors.New("nonce: timestamp outside the window")
	// ErrBeforeStart: the timestamp is before the second the store was made
	// in (INVALID_TIMESTAMP), and the store was not opened yet (Open). A
	// store cannot know the nonces used before it existed (by the edge
	// before a restart, by other edges) until it has read them, so until
	// then it refuses what was signed before it started: a request captured
	// before a restart cannot be replayed after it. A client whose clock is
	// behind by d is refused for up to d after a start. A request stamped
	// in the future and accepted before the start is not caught by this
	// rule: only Open after reading the nonces of the past window is.
	ErrBeforeStart = errors.New("nonce: timestamp before the store started")
	// ErrFull: the store holds MaxEntries nonces and cannot take one more
	// without forgetting one still inside its window. The caller answers 503
	// (the edge as a whole is saturated) or, for ErrClientFull, 429.
	ErrFull = errors.New("nonce: store full")
	// ErrClientFull: this client holds MaxPerClient nonces; other clients are
	// unaffected. errors.Is(ErrClientFull, ErrFull) is true.
	ErrClientFull error = clientFull{}
	// ErrServiceFull: the clients of this service hold MaxPerService nonces
	// together; other services are unaffected. errors.Is(ErrServiceFull,
	// ErrFull) is true.
	ErrServiceFull error = serviceFull{}
)

type clientFull struct{}

func (clientFull) Error() string        { return "nonce: client's nonce limit reached" }
func (clientFull) Is(target error) bool { return target == ErrFull }

type serviceFull struct{}

func (serviceFull) Error() string        { return "nonce: service's nonce limit reached" }
func (serviceFull) Is(target error) bool { return target == ErrFull }

// Config configures a Store. Zero fields take their defaults.
type Config struct {
	// Window is the timestamp tolerance either way; 5 minutes. There is no
	// separate skew setting: the tolerance is symmetric, so a client clock
	// ahead or behind by up to Window is accepted and its nonces remembered
	// for as long.
	Window time.Duration
	// Bucket is the timestamp span of one bucket; 1 minute. A nonce is kept
	// at most Window+Bucket past its timestamp, and its memory is released
	// within about another Bucket at steady traffic.
	Bucket time.Duration
	// MaxEntries bounds the nonces held, all clients together, due ones not
	// yet deleted included; 4,000,000. Each takes a 32-byte slot in a table
	// that doubles when 3/4 full, so budget at most 86 bytes per nonce
	// (56 measured at a million), about 340 MB for the default bound.
	MaxEntries int
	// MaxPerClient bounds the nonces held for one client; 400,000. It must
	// allow the client's rate limit for Window+Bucket (a branch at 1,000
	// signed requests a second needs 360,000).
	MaxPerClient int
	// MaxPerService bounds the nonces held for all clients of one service
	// together; 2,000,000. A tenant with many clients (a service can make
	// branches) then cannot fill the store for the others.
	MaxPerService int
	// Now is the clock; time.Now.
	Now func() time.Time
	// Journal, when not nil, is told every nonce Use accepts (not those
	// Add takes), after Use has released its locks.
	Journal Journal
}

// Journal is told of the nonces a Store accepted, to pass them on to other
// stores (the other edges, the edge after a restart). Record is called on
// the request path: it must not block, wait on I/O or allocate. service
// and client are the strings given to Use: the journal may keep them, so a
// caller must not pass strings that alias mutable memory. ts is the
// request's timestamp in Unix seconds (rounded down).
type Journal interface {
	Record(service, client string, nonce [16]byte, ts int64)
}

const numShards = 64 // a power of two

// Store is a bounded set of (client, nonce) pairs, bucketed by timestamp. It
// is safe for concurrent use. Services are spread over shards, each with its
// own lock, tables, ring of buckets and per-client and per-service counts,
// so all nonces of a service's clients live in one shard and both bounds are
// checked without global state.
type Store struct {
	window, bucket int64 // ns
	maxEntries     int64
	maxPerClient   int32
	maxPerService  int32
	now            func() time.Time
	started        atomic.Int64 // Unix seconds of New, or math.MinInt64 once opened: see ErrBeforeStart
	seed           maphash.Seed
	journal        Journal

	total     atomic.Int64 // entries in all tables, due ones not yet deleted included
	sweptUpTo atomic.Int64 // cutoff of the last full sweep
	shards    [numShards]shard
}

// key is one remembered nonce. The client is kept as a 64-bit keyed hash
// (random seed per process): the store never retains caller memory, keys
// are fixed-size, and a collision between two clients, which no one can aim
// for, could only refuse a request, never let a replay through.
type key struct {
	client uint64
	nonce  [16]byte
}

// slot is one entry of a segment's table; epoch is noEpoch in an empty slot.
type slot struct {
	key
	epoch int64
}

// segment is one open-addressing table of a shard. A shard's nonces are
// spread over segments by hash, so a table that grows is rebuilt alone: the
// pause is a 1/segments share of the shard's nonces, not all of them.
type segment struct {
	table  []slot // len a power of two; nil when empty
	used   int    // slots holding an entry, due ones included
	cursor int    // the next slot the gradual sweep looks at
}

// segments is the number of segments per shard, a power of two; segShift
// takes a segment's index from the top bits of a hash, the probe's home is
// in the bottom ones.
const (
	segments = 64
	segShift = 64 - 6
)

type shard struct {
	mu       sync.Mutex
	cutoff   int64 // buckets below this epoch are due; never decreases
	segs     [segments]segment
	ring     []bucket
	clients  map[uint64]int32 // nonces held per client in live buckets
	services map[uint64]int32 // nonces held per service in live buckets
	_        [64]byte
}

// bucket counts the nonces of one epoch per client and per service, to
// uncount them when the bucket is due.
type bucket struct {
	epoch      int64 // timestamp / Bucket; noEpoch when unused
	perClient  map[uint64]int32
	perService map[uint64]int32
}

const noEpoch = -1 << 63

const (
	// minTable is the smallest table, in slots.
	minTable = 16
	// sweepPerUse is how many slots of its segment each Use looks at for
	// due entries. At steady traffic a table is more than 3/8 full, so a lap
	// takes fewer Uses than a sixth of the entries it holds: due entries are
	// deleted within a sixth of Window+Bucket after they are due.
	sweepPerUse = 16
	// retainMin is the number of clients below which a dropped bucket's
	// count map is cleared and reused rather than released.
	retainMin = 1024
)

// New returns an empty Store.
func New(cfg Config) *Store {
	if cfg.Window <= 0 {
		cfg.Window = 5 * time.Minute
	}
	if cfg.Bucket <= 0 {
		cfg.Bucket = time.Minute
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 4_000_000
	}
	if cfg.MaxPerClient <= 0 {
		cfg.MaxPerClient = 400_000
	}
	if cfg.MaxPerService <= 0 {
		cfg.MaxPerService = 2_000_000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Store{
		window:        int64(cfg.Window),
		bucket:        int64(cfg.Bucket),
		maxEntries:    int64(cfg.MaxEntries),
		maxPerClient:  int32(min(cfg.MaxPerClient, 1<<31-1)),
		maxPerService: int32(min(cfg.MaxPerService, 1<<31-1)),
		now:           cfg.Now,
		seed:          maphash.MakeSeed(),
		journal:       cfg.Journal,
	}
	s.started.Store(s.now().Unix())
	s.sweptUpTo.Store(noEpoch)
	// Live epochs run from the cutoff, floor((now-W)/B), to floor((now+W)/B):
	// at most ceil(2W/B)+1 of them, plus one for rounding.
	n := int((2*s.window+s.bucket-1)/s.bucket) + 2
	for i := range s.shards {
		sh := &s.shards[i]
		sh.cutoff = noEpoch
		sh.ring = make([]bucket, n)
		for j := range sh.ring {
			sh.ring[j].epoch = noEpoch
		}
		sh.clients = make(map[uint64]int32)
		sh.services = make(map[uint64]int32)
	}
	return s
}

// Use records that client, of service, used nonce on a request stamped ts.
// It returns nil the first time (the nonce is now remembered), ErrDuplicate
// when the client used the nonce before and it is still remembered,
// ErrOutsideWindow when ts is more than Window from now, ErrBeforeStart
// when ts is before the second the store was made in, and ErrFull,
// ErrClientFull or ErrServiceFull when the store cannot remember one more
// nonce for it without forgetting one. A client belongs to one service.
//
// A nonce is unique per client whatever the timestamp: the same nonce on a
// second request with another timestamp is a duplicate too. The same nonce
// under two clients is not. Checks run in that order: window, duplicate,
// bounds.
//
// Use does not retain client or service (its Journal may). It allocates nothing unless its
// segment's table grows (when 3/4 full, so the pass that rebuilds it is paid
// for by as many new nonces as it holds) or shrinks after a burst; it never
// waits on I/O. An accepted nonce is given to the Journal, if any.
func (s *Store) Use(service, client string, nonce [16]byte, ts time.Time) error {
	now := s.now()
	if d := ts.Sub(now); d > time.Duration(s.window) || d < -time.Duration(s.window) {
		return ErrOutsideWindow
	}
	if ts.Unix() < s.started.Load() {
		return ErrBeforeStart
	}
	err := s.insert(service, client, nonce, ts, now)
	if err == nil && s.journal != nil {
		s.journal.Record(service, client, nonce, floorDiv(ts.UnixNano(), int64(time.Second)))
	}
	return err
}

// Add remembers a nonce that another store accepted (another edge, or this
// edge before a restart), so that Use refuses it as a duplicate. It returns
// nil when the nonce is new here, ErrDuplicate when it is known already,
// ErrOutsideWindow when ts is more than Window from now (a nonce past its
// window needs no remembering; one further ahead than Window is refused
// here too, so edges' clocks must agree within the second the edge's
// window has to spare), and ErrFull, ErrClientFull or ErrServiceFull when
// the bounds leave no room: nonces from elsewhere count against the same
// budgets as the store's own. It ignores the before-start rule and does
// not tell the Journal.
func (s *Store) Add(service, client string, nonce [16]byte, ts time.Time) error {
	now := s.now()
	if d := ts.Sub(now); d > time.Duration(s.window) || d < -time.Duration(s.window) {
		return ErrOutsideWindow
	}
	return s.insert(service, client, nonce, ts, now)
}

// SetJournal sets the Journal (see Config.Journal) of a store built
// without one. Call it before the store is used: it is not synchronised
// with Use.
func (s *Store) SetJournal(j Journal) { s.journal = j }

// Open lifts the before-start rule (ErrBeforeStart): the caller has given
// the store, with Add, every nonce that could still be replayed.
func (s *Store) Open() { s.started.Store(math.MinInt64) }

// Opened reports whether Open was called.
func (s *Store) Opened() bool { return s.started.Load() == math.MinInt64 }

// Window returns the store's timestamp tolerance, either way.
func (s *Store) Window() time.Duration { return time.Duration(s.window) }

func (s *Store) insert(service, client string, nonce [16]byte, ts, now time.Time) error {
	nowNs := now.UnixNano()
	epoch := floorDiv(ts.UnixNano(), s.bucket)
	cutoff := floorDiv(nowNs-s.window, s.bucket)
	svc := maphash.String(s.seed, service)
	k := key{client: maphash.String(s.seed, client), nonce: nonce}
	sh := &s.shards[svc%numShards]

	err := s.use(sh, svc, k, epoch, cutoff)
	if err == ErrFull && s.sweepAll(cutoff) {
		// Due entries, in this shard and others, are deleted now.
		err = s.use(sh, svc, k, epoch, cutoff)
	}
	return err
}

func (s *Store) use(sh *shard, svc uint64, k key, epoch, cutoff int64) error {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if cutoff > sh.cutoff {
		s.expire(sh, cutoff)
	}
	h := s.hash(&k)
	seg := &sh.segs[h>>segShift]
	s.sweep(seg, sh.cutoff, sweepPerUse)
	if epoch < sh.cutoff {
		// Only after the clock stepped back: this bucket was dropped already,
		// so the nonce cannot be checked.
		return ErrOutsideWindow
	}
	// One probe sequence whatever the timestamp: a replay may be re-signed
	// with another one.
	i, found := s.find(seg, sh.cutoff, k, h)
	if found && seg.table[i].epoch >= sh.cutoff {
		return ErrDuplicate
	}
	if sh.clients[k.client] >= s.maxPerClient {
		return ErrClientFull
	}
	if sh.services[svc] >= s.maxPerService {
		return ErrServiceFull
	}
	if !found { // a due entry found is taken over: it adds nothing
		if s.total.Add(1) > s.maxEntries {
			s.total.Add(-1)
			return ErrFull
		}
		if 4*(seg.used+1) > 3*len(seg.table) { // at most 3/4 full: probes stay short
			s.resize(seg, sh.cutoff, 2*len(seg.table))
			i, _ = s.find(seg, sh.cutoff, k, h)
		}
		seg.used++
	}
	seg.table[i] = slot{key: k, epoch: epoch}
	b := &sh.ring[uint64(epoch)%uint64(len(sh.ring))]
	if b.epoch != epoch { // an unused slot: its last bucket was dropped
		b.epoch = epoch
	}
	if b.perClient == nil {
		b.perClient = make(map[uint64]int32)
	}
	if b.perService == nil {
		b.perService = make(map[uint64]int32)
	}
	b.perClient[k.client]++
	b.perService[svc]++
	sh.clients[k.client]++
	sh.services[svc]++
	return nil
}

// hash places k: its segment from the top bits, its home slot from the
// bottom ones. The nonce is hashed with the store's seed, so no client can
// aim its nonces at one probe sequence.
func (s *Store) hash(k *key) uint64 { return maphash.Bytes(s.seed, k.nonce[:]) ^ k.client }

// find returns the slot of seg holding k, whose hash is h, or the empty
// slot where k would go.
func (s *Store) find(seg *segment, cutoff int64, k key, h uint64) (int, bool) {
	if seg.table == nil {
		s.resize(seg, cutoff, minTable)
	}
	mask := len(seg.table) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch sl := &seg.table[i]; {
		case sl.epoch == noEpoch:
			return i, false
		case sl.key == k:
			return i, true
		}
	}
}

// remove empties slot i and moves back the entries after it whose probe
// passes through it, so every entry stays reachable from its home and the
// table needs no tombstones.
func (s *Store) remove(seg *segment, i int) {
	mask := len(seg.table) - 1
	for j := (i + 1) & mask; seg.table[j].epoch != noEpoch; j = (j + 1) & mask {
		if h := int(s.hash(&seg.table[j].key)) & mask; (j-h)&mask >= (j-i)&mask {
			seg.table[i] = seg.table[j]
			i = j
		}
	}
	seg.table[i].epoch = noEpoch
	seg.used--
}

// sweep looks at n slots of seg from its cursor on and deletes the entries
// below cutoff there. If it passed the table's end and left the table less
// than 1/8 full, the table is rebuilt to fit what it holds, so the memory
// of a burst goes back to the garbage collector.
func (s *Store) sweep(seg *segment, cutoff int64, n int) {
	if seg.used == 0 {
		return
	}
	deleted, wrapped := 0, false
	for ; n > 0; n-- {
		if sl := &seg.table[seg.cursor]; sl.epoch != noEpoch && sl.epoch < cutoff {
			s.remove(seg, seg.cursor) // an entry from further on may be here now: look again
			deleted++
			continue
		}
		seg.cursor = (seg.cursor + 1) & (len(seg.table) - 1)
		wrapped = wrapped || seg.cursor == 0
	}
	s.total.Add(-int64(deleted))
	if wrapped && 8*seg.used < len(seg.table) && len(seg.table) > minTable {
		s.resize(seg, cutoff, minTable)
	}
}

// lap sweeps every segment of the shard whole: every slot once, plus one
// look more per deletion. Entries move back only into the hole at the
// cursor or ahead of it, so none is passed over.
func (s *Store) lap(sh *shard) {
	for i := range sh.segs {
		seg := &sh.segs[i]
		s.sweep(seg, sh.cutoff, len(seg.table)+seg.used)
	}
}

// resize rebuilds seg's table with the entries not below cutoff, with n
// slots or, if that is not at least twice what it keeps, the next power of
// two that is; an empty segment lets its table go.
func (s *Store) resize(seg *segment, cutoff int64, n int) {
	live := 0
	for i := range seg.table {
		if sl := &seg.table[i]; sl.epoch != noEpoch && sl.epoch >= cutoff {
			live++
		}
	}
	s.total.Add(int64(live - seg.used)) // the due entries left behind
	old := seg.table
	seg.table, seg.used, seg.cursor = nil, live, 0
	if live == 0 && len(old) > 0 {
		return
	}
	for n < 2*(live+1) {
		n *= 2
	}
	seg.table = make([]slot, n)
	for i := range seg.table {
		seg.table[i].epoch = noEpoch
	}
	for i := range old {
		if sl := &old[i]; sl.epoch != noEpoch && sl.epoch >= cutoff {
			j, _ := s.find(seg, cutoff, sl.key, s.hash(&sl.key))
			seg.table[j] = *sl
		}
	}
}

// expire drops the shard's buckets below cutoff: their nonces are forgotten
// at once, since entries below the cutoff count as absent, and their
// clients' and services' counts go down; sweep deletes the entries later.
func (s *Store) expire(sh *shard, cutoff int64) {
	sh.cutoff = cutoff
	for i := range sh.ring {
		b := &sh.ring[i]
		if b.epoch == noEpoch || b.epoch >= cutoff {
			continue
		}
		b.epoch = noEpoch
		b.perClient = uncount(sh.clients, b.perClient)
		b.perService = uncount(sh.services, b.perService)
	}
}

// uncount takes a dropped bucket's counts from the shard's and returns the
// bucket's map emptied for reuse, or nil when it grew large.
func uncount(held, dropped map[uint64]int32) map[uint64]int32 {
	for c, n := range dropped {
		if left := held[c] - n; left > 0 {
			held[c] = left
		} else {
			delete(held, c)
		}
	}
	if len(dropped) > retainMin {
		return nil
	}
	clear(dropped)
	return dropped
}

// sweepAll drops the due buckets of every shard and deletes their entries,
// once per cutoff, and reports whether it ran. Use
// calls it before answering ErrFull, since shards drop their buckets lazily
// and delete their entries gradually.
func (s *Store) sweepAll(cutoff int64) bool {
	for {
		done := s.sweptUpTo.Load()
		if cutoff <= done {
			return false
		}
		if s.sweptUpTo.CompareAndSwap(done, cutoff) {
			break
		}
	}
	s.expireAll(cutoff)
	return true
}

// Sweep drops every bucket that is due, in all shards, and deletes their
// entries: a pass over every table. Use does both lazily, per shard, so
// memory held by clients that went quiet is released only when their shard
// is next used or the store fills up; a caller that wants it back sooner
// calls Sweep now and then (say each Bucket).
func (s *Store) Sweep() { s.expireAll(floorDiv(s.now().UnixNano()-s.window, s.bucket)) }

// expireAll drops the buckets below cutoff in every shard and deletes
// their entries.
func (s *Store) expireAll(cutoff int64) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		if cutoff > sh.cutoff {
			s.expire(sh, cutoff)
		}
		s.lap(sh)
		sh.mu.Unlock()
	}
}

// Len returns the number of nonces held, including due ones not yet
// deleted.
func (s *Store) Len() int { return int(s.total.Load()) }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
