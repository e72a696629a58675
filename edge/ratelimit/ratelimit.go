// Package ratelimit is the edge's per-branch rate limit: a token bucket per
// key (branch and budget, bank or wallet), refilled continuously and holding
// one second of requests, and the adaptive factor that scales every branch's
// plan rate down when core is overloaded and back up when it is healthy.
//
// The limit is enforced per edge process. With several edges the load
// balancer hashes on the key header, so one branch meets one edge.
package ratelimit

import (
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"time"
)

// Decision is the outcome of one Take, with the values of the rate headers.
type Decision struct {
	// Allowed reports whether the request may proceed; when false the caller
	// answers 429 RATE_LIMIT_EXCEEDED.
	Allowed bool
	// Limit is the rate in force, in requests per second (X-RateLimit-Limit);
	// at least 1.
	Limit int
	// Remaining is how many requests could be sent immediately after this
	// one, 0 to Limit (X-RateLimit-Remaining).
	Remaining int
	// Reset is the number of seconds, rounded up, until the bucket is full
	// again if nothing more is sent (X-RateLimit-Reset); 0 when it is full.
	Reset int
	// RetryAfter is the number of seconds, rounded up and at least 1, until a
	// request would be allowed (Retry-After); set only when !Allowed.
	RetryAfter int
}

const (
	numShards = 64
	// maxLimit bounds the rate so the emission interval stays at least 1 ns.
	maxLimit = int64(time.Second)
	// sweepEvery is how often a shard drops the buckets that are full again.
	sweepEvery = 10 * time.Second
	// shrinkAbove is the map size above which a sweep that leaves the map a
	// quarter of its peak rebuilds it, since Go maps never give back memory.
	shrinkAbove = 1024
)

// Limiter holds one token bucket per key. It is safe for concurrent use.
//
// A bucket is kept as GCRA state, the theoretical arrival time (tat) of the
// next request at the current rate: the bucket is full when tat <= now, and
// tat-now is the part of the one-second burst already spent. That is one
// integer per key, exact in nanoseconds, and a full bucket is the same as no
// bucket, so idle keys are dropped and memory follows the active branches.
type Limiter struct {
	now    func() time.Time
	seed   maphash.Seed
	shards [numShards]shard
}

type shard struct {
	mu        sync.Mutex
	m         map[string]*bucket
	nextSweep int64 // unix ns
	peak      int   // largest len(m) since the map was made
	_         [64]byte
}

type bucket struct {
	tat   int64 // unix ns
	limit int64 // the rate tat was computed at, tokens per second
}

// New returns a Limiter reading time from now (time.Now when nil).
func New(now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	l := &Limiter{now: now, seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = make(map[string]*bucket)
	}
	return l
}

// Take spends one token of key's bucket at rate requests per second and
// reports the decision. The rate may differ from call to call (the adaptive
// limit); it is taken as max(1, floor(rate)), at most 1e9, and NaN counts as
// 1, so Limit is the integer the headers show.
//
// When the rate changes, the bucket is rescaled so that a change never hands
// out a burst: on a decrease the bucket keeps the same fraction of its
// capacity (a full bucket stays full, a half-spent one is half-spent at the
// lower rate); on an increase it keeps the same number of tokens, and fills
// towards the larger capacity at the new, faster rate.
//
// Take does not retain key. For a key already in use it allocates nothing
// (fast path); a new key costs one allocation for the bucket and a copy of
// the key.
func (l *Limiter) Take(key string, rate float64) Decision { return l.TakeAt(key, rate, l.now()) }

// TakeAt is Take at time t, for a caller that has read the clock already
// (on the edge's request path a clock read costs more than the take).
func (l *Limiter) TakeAt(key string, rate float64, t time.Time) Decision {
	s := &l.shards[maphash.String(l.seed, key)%numShards]
	now := t.UnixNano()
	s.mu.Lock()
	s.sweep(now)
	b := s.m[key]
	if b == nil {
		b = s.insert(strings.Clone(key), now)
	}
	d := b.take(now, limitOf(rate))
	s.mu.Unlock()
	return d
}

// PeekAt is the state of key's bucket at time t under rate, as TakeAt
// would report it, without taking a token: the rate headers of an answer
// refused for another reason. An unknown key is a full bucket, and stays
// unknown.
func (l *Limiter) PeekAt(key string, rate float64, t time.Time) Decision {
	s := &l.shards[maphash.String(l.seed, key)%numShards]
	now, limit := t.UnixNano(), limitOf(rate)
	s.mu.Lock()
	var b bucket
	if p := s.m[key]; p != nil {
		b = *p
	}
	s.mu.Unlock()
	step, burst, tat := b.at(now, limit)
	return Decision{
		Allowed:   tat+step-now <= burst,
		Limit:     int(limit),
		Remaining: int(max(0, now+burst-tat) / step),
		Reset:     ceilSeconds(tat - now),
	}
}

// Len returns the number of buckets held, that is of keys not yet full
// again or not yet swept; for metrics and tests.
func (l *Limiter) Len() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// insert adds a full bucket for key, which must not alias caller memory.
func (s *shard) insert(key string, now int64) *bucket {
	b := &bucket{tat: now}
	s.m[key] = b
	s.peak = max(s.peak, len(s.m))
	return b
}

// sweep drops full buckets at most once per sweepEvery (slow path, amortised
// over the shard's calls) and rebuilds a map that has shrunk well below its
// peak, so a burst of many branches does not hold memory for ever.
func (s *shard) sweep(now int64) {
	if now < s.nextSweep {
		return
	}
	s.nextSweep = now + int64(sweepEvery)
	for k, b := range s.m {
		if b.tat <= now {
			delete(s.m, k)
		}
	}
	if s.peak > shrinkAbove && len(s.m) < s.peak/4 {
		m := make(map[string]*bucket, 2*len(s.m))
		for k, b := range s.m {
			m[k] = b
		}
		s.m, s.peak = m, len(m)
	}
}

func limitOf(rate float64) int64 {
	switch {
	case !(rate >= 1): // also NaN
		return 1
	case rate >= float64(maxLimit):
		return maxLimit
	}
	return int64(rate)
}

// at is the bucket under limit at now: the emission interval t = 1s/limit,
// the burst tolerance limit*t (one second, less rounding) and the
// theoretical arrival time max(tat, now).
func (b *bucket) at(now, limit int64) (t, burst, tat int64) {
	if b.limit != limit {
		b.rescale(now, limit)
	}
	t = maxLimit / limit
	return t, limit * t, max(b.tat, now)
}

// take is the GCRA step: a request is allowed when tat+t-now <= burst (see
// at), and then tat advances by t.
func (b *bucket) take(now, limit int64) Decision {
	t, burst, tat := b.at(now, limit)
	next := tat + t
	if next-now > burst {
		return Decision{
			Limit:      int(limit),
			Reset:      ceilSeconds(tat - now),
			RetryAfter: max(1, ceilSeconds(next-burst-now)),
		}
	}
	b.tat = next
	return Decision{
		Allowed:   true,
		Limit:     int(limit),
		Remaining: int((now + burst - next) / t),
		Reset:     ceilSeconds(next - now),
	}
}

// rescale moves tat from b.limit to limit as documented on Take: tokens are
// multiplied by min(1, new/old).
func (b *bucket) rescale(now, limit int64) {
	old := b.limit
	b.limit = limit
	if old == 0 || b.tat <= now { // new or full: full at any rate
		return
	}
	oldT := maxLimit / old
	tokens := max(0, float64(old*oldT-(b.tat-now))/float64(oldT))
	tokens *= min(1, float64(limit)/float64(old))
	used := float64(limit) - tokens
	b.tat = now + int64(math.Ceil(used*float64(maxLimit/limit)))
}

func ceilSeconds(ns int64) int {
	if ns <= 0 {
		return 0
	}
	return int((ns + int64(time.Second) - 1) / int64(time.Second))
}
