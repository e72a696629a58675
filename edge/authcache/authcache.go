// Package authcache holds the edge's copy of core's auth records: a
// ristretto cache in front of core's internal auth lookups, with negative
// entries so a flood of unknown keys never reaches core, one lookup in
// flight per key, expiry on the edge's own clock, and records in use
// refreshed ahead of their expiry so their requests never wait for core.
package authcache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/iplist"
	"github.com/slipverify/slipverify/edge/authn"
)

// ErrUnknown means core has no such key.
var ErrUnknown = errors.New("authcache: unknown key")

// ErrTokenRefused means core refused the edge's token: SLIP_EDGE_TOKEN is
// not core's. It is not cached; every caller gets API_SERVER_ERROR, not a
// verdict on its key.
var ErrTokenRefused = errors.New("authcache: core refused the edge token (SLIP_EDGE_TOKEN differs from core's)")

// Kind tells which sort of key a Principal was found by.
type Kind uint8

// Key kinds: a branch's API key (UUID) or a B2B client key (64 hex).
const (
	Branch Kind = 'b'
	Client Kind = 'c'
)

// Principal is who a key acts for, ready for the request path: nothing in it
// changes after it is built, so requests share it without locks.
type Principal struct {
	ServiceID string
	BranchID  string // branch keys only
	ClientID  string // B2B client keys only: the key's digest
	// Refusal is the condition that refuses every request of this key
	// (banned user or service, expired service, inactive branch), or 0;
	// RefusalAt tells it at a request's time.
	Refusal api.Code
	// ServiceEnds, when not zero, is when the service's term ends; from
	// then on the key is refused with RefusalEnded (SERVICE_EXPIRED, or a
	// refusal that comes before it).
	ServiceEnds  time.Time
	RefusalEnded api.Code
	// KeyEnds, when not zero, is when the key stops working: the previous
	// key of a rotation, at the end of its overlap.
	KeyEnds  time.Time
	IPAllow  iplist.List
	RateBank float64
	RateWall float64
	// BankKey and WalletKey name the key's rate limit buckets.
	BankKey, WalletKey string
	// Signer checks signed requests; nil when the key cannot sign (a branch
	// whose service has no B2B client).
	Signer *authn.Signer
	// NonceClient scopes the key's nonces: its signing secret's (see
	// nonceScope).
	NonceClient string
	// PrevSigner checks what the previous signing secret of a rotation
	// signed, until PrevEnds, and PrevNonceClient scopes those nonces; nil
	// outside an overlap.
	PrevSigner      *authn.Signer
	PrevNonceClient string
	PrevEnds        time.Time
	Perms           uint8 // api.PermissionBit set
	// Signed marks the copy of a branch principal used by a signed request
	// (AsSigned): its credential is X-API-Key, not Authorization.
	Signed bool
	// The identity as header values, built once.
	ServiceIDBytes, BranchIDBytes, ClientIDBytes []byte
	signed                                       *Principal
}

// RefusalAt returns the condition refusing a request of the key made at t,
// or 0: the instants core gave (a term's end, a rotation's overlap) are
// kept here, so no request waits for the cached record to expire.
func (p *Principal) RefusalAt(t time.Time) api.Code {
	switch {
	case !p.KeyEnds.IsZero() && !t.Before(p.KeyEnds):
		return api.InvalidAPIKey
	case !p.ServiceEnds.IsZero() && !t.Before(p.ServiceEnds):
		return p.RefusalEnded
	}
	return p.Refusal
}

// AsSigned returns the principal of a signed request by the same key.
func (p *Principal) AsSigned() *Principal { return p.signed }

// ready fills the derived fields of a new principal.
func (p *Principal) ready() *Principal {
	p.ServiceIDBytes, p.BranchIDBytes, p.ClientIDBytes = []byte(p.ServiceID), []byte(p.BranchID), []byte(p.ClientID)
	s := *p
	s.Signed, s.signed = true, nil
	p.signed = &s
	s.signed = &s
	return p
}

type entry struct {
	key        string     // kind byte and key: the cache is keyed by their hash
	p          *Principal // nil: core does not know the key
	expires    int64      // on the cache's clock, Unix nanoseconds
	gen        uint64     // the cache's generation when the lookup began
	refreshing atomic.Bool
}

// Config configures a Cache.
type Config struct {
	Core      *fasthttp.HostClient // core's internal listener
	EdgeToken string
	TTL       time.Duration // how long a record or an absence is believed, from the lookup that asked core
	Timeout   time.Duration // one lookup at core
	MaxKeys   int64         // entries kept at most (ristretto cost 1 each)
}

// Stats counts lookups; read with Stats.
// Hits and Negative were answered from the cache, Misses asked core, Shared
// waited for another caller's question to core, Errors could not ask core.
// Refreshed counts the records read again ahead of their expiry, in the
// background (their failures count as Errors).
type Stats struct {
	Hits, Negative, Misses, Shared, Errors, Refreshed uint64
}

// Cache is the edge's auth cache. It is safe for concurrent use.
type Cache struct {
	cfg    Config
	rc     *ristretto.Cache[uint64, *entry]
	seed   maphash.Seed
	mu     sync.Mutex
	flight map[string]*call
	bg     sync.WaitGroup // refreshes in the background

	ahead int64 // a record in use this close to its expiry (ns) is read again

	gen                                             atomic.Uint64 // see Invalidate
	hits, negative, misses, shared, errs, refreshed atomic.Uint64
}

// Invalidate makes every entry stale at once, including those of lookups
// in flight: the next request of every key asks core again. The edge calls
// it when core reports a change of records on slip.config.
func (c *Cache) Invalidate() { c.gen.Add(1) }

type call struct {
	done chan struct{}
	gen  uint64 // of the cache when the question was asked
	p    *Principal
	err  error
}

// New returns a Cache.
func New(cfg Config) (*Cache, error) {
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = 1 << 20
	}
	rc, err := ristretto.NewCache(&ristretto.Config[uint64, *entry]{
		NumCounters: 10 * cfg.MaxKeys, MaxCost: cfg.MaxKeys, BufferItems: 64,
	})
	if err != nil {
		return nil, err
	}
	return &Cache{cfg: cfg, rc: rc, seed: maphash.MakeSeed(), flight: map[string]*call{}, ahead: int64(cfg.TTL / 4)}, nil
}

// Close releases the cache once the refreshes under way have ended.
func (c *Cache) Close() {
	c.bg.Wait()
	c.rc.Close()
}

// Lookup returns the principal of key (of kind k): from the cache when a
// fresh entry is there, else from core. It returns ErrUnknown for a key core
// does not know, and another error when core cannot be asked.
//
// Fast path: a cached key costs one hash lookup and no allocation. In the
// last quarter of a record's TTL, the first Lookup also starts reading it
// again in the background (see refresh).
func (c *Cache) Lookup(k Kind, key []byte, now time.Time) (*Principal, error) {
	if len(key) > 128 {
		return nil, ErrUnknown
	}
	h := c.hash(k, key)
	if e := c.fresh(h, k, key, now); e != nil {
		if e.p != nil && e.expires-now.UnixNano() < c.ahead {
			c.refresh(e, h, now)
		}
		return c.answer(e)
	}
	return c.miss(k, h, string(byte(k))+string(key), now)
}

// fresh returns the cache's fresh entry for key, or nil.
func (c *Cache) fresh(h uint64, k Kind, key []byte, now time.Time) *entry {
	e, ok := c.rc.Get(h)
	if !ok || e.expires <= now.UnixNano() || e.gen != c.gen.Load() || e.key[0] != byte(k) || e.key[1:] != string(key) {
		return nil
	}
	return e
}

// answer is what a fresh entry says, counted.
func (c *Cache) answer(e *entry) (*Principal, error) {
	if e.p == nil {
		c.negative.Add(1)
		return nil, ErrUnknown
	}
	c.hits.Add(1)
	return e.p, nil
}

// hash is the cache key of a key of kind k.
func (c *Cache) hash(k Kind, key []byte) uint64 {
	var mh maphash.Hash
	mh.SetSeed(c.seed)
	mh.WriteByte(byte(k))
	mh.Write(key)
	return mh.Sum64()
}

// miss asks core, one request per key however many callers wait for it.
func (c *Cache) miss(k Kind, h uint64, ck string, now time.Time) (*Principal, error) {
	c.mu.Lock()
	// A question asked before an invalidation may bring the record as it
	// was: a caller that came after asks again.
	if f, ok := c.flight[ck]; ok && f.gen == c.gen.Load() {
		c.mu.Unlock()
		c.shared.Add(1)
		<-f.done
		return f.p, f.err
	}
	// A lookup may have stored the entry and left the flight between this
	// caller's miss and the lock: look again before asking core.
	if e := c.fresh(h, k, []byte(ck[1:]), now); e != nil {
		c.mu.Unlock()
		return c.answer(e)
	}
	f := c.board(ck)
	c.mu.Unlock()
	c.ask(f, k, h, ck, now, &c.misses)
	return f.p, f.err
}

// refresh reads the record of e, which is in use and expires soon, again in
// the background: e keeps answering until it expires, so no request waits
// for core while the new record is on its way. A request that finds e
// expired before then waits for the same question, as in any miss. One try
// per entry: if it fails, the entry's expiry ends it, as without refresh.
func (c *Cache) refresh(e *entry, h uint64, now time.Time) {
	if !e.refreshing.CompareAndSwap(false, true) {
		return
	}
	c.mu.Lock()
	if _, ok := c.flight[e.key]; ok {
		c.mu.Unlock()
		return
	}
	f := c.board(e.key)
	c.mu.Unlock()
	c.bg.Go(func() { c.ask(f, Kind(e.key[0]), h, e.key, now, &c.refreshed) })
}

// board registers a question to core about ck, in place of one asked
// before an invalidation; c.mu is held.
func (c *Cache) board(ck string) *call {
	f := &call{done: make(chan struct{}), gen: c.gen.Load()}
	c.flight[ck] = f
	return f
}

// ask asks core about ck, caches the answer (a record or its absence) for
// the TTL from now, when the question came, counts it in done, and releases
// the callers waiting for f.
func (c *Cache) ask(f *call, k Kind, h uint64, ck string, now time.Time, done *atomic.Uint64) {
	f.p, f.err = c.fetch(k, ck[1:])
	answered := f.err == nil || errors.Is(f.err, ErrUnknown)
	if answered && f.gen == c.gen.Load() { // else stale already: it would only displace a newer entry
		// Freshness is the entry's own expiry on the cache's clock; a
		// ristretto TTL would cost a clock read on every Get. MaxKeys bounds
		// memory, stale entries are replaced on their next miss.
		c.rc.Set(h, &entry{key: ck, p: f.p, expires: now.Add(c.cfg.TTL).UnixNano(), gen: f.gen}, 1)
		// ristretto applies writes asynchronously: wait, so callers arriving
		// once this lookup leaves the flight find the entry.
		c.rc.Wait()
	}
	c.mu.Lock()
	if c.flight[ck] == f { // not replaced by a question asked after an invalidation
		delete(c.flight, ck)
	}
	c.mu.Unlock()
	close(f.done)
	// Counted once the question is over: whoever reads the count then
	// finds no question in flight.
	if answered {
		done.Add(1)
	} else {
		c.errs.Add(1)
	}
}

// Stats returns the lookup counts so far.
func (c *Cache) Stats() Stats {
	return Stats{Hits: c.hits.Load(), Negative: c.negative.Load(), Misses: c.misses.Load(), Shared: c.shared.Load(),
		Errors: c.errs.Load(), Refreshed: c.refreshed.Load()}
}

// fetch asks core for the record of key.
func (c *Cache) fetch(k Kind, key string) (*Principal, error) {
	sum := sha256.Sum256([]byte(key))
	path := api.PathBranchAuth
	if k == Client {
		path = api.PathClientAuth
	}
	req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(res)
	req.SetRequestURI("http://" + c.cfg.Core.Addr + path + hex.EncodeToString(sum[:]))
	req.Header.Set(api.HeaderEdgeToken, c.cfg.EdgeToken)
	if err := c.cfg.Core.DoTimeout(req, res, c.cfg.Timeout); err != nil {
		return nil, fmt.Errorf("authcache: ask core: %w", err)
	}
	switch res.StatusCode() {
	case fasthttp.StatusOK:
	case fasthttp.StatusUnauthorized, fasthttp.StatusNotFound:
		return nil, ErrUnknown
	case fasthttp.StatusForbidden:
		return nil, ErrTokenRefused
	default:
		return nil, fmt.Errorf("authcache: core answered %d", res.StatusCode())
	}
	if k == Client {
		var env struct{ Data api.ClientAuth }
		if err := json.Unmarshal(res.Body(), &env); err != nil {
			return nil, fmt.Errorf("authcache: core's answer: %w", err)
		}
		return clientPrincipal(env.Data).ready(), nil
	}
	var env struct{ Data api.BranchAuth }
	if err := json.Unmarshal(res.Body(), &env); err != nil {
		return nil, fmt.Errorf("authcache: core's answer: %w", err)
	}
	return branchPrincipal(env.Data)
}

func branchPrincipal(a api.BranchAuth) (*Principal, error) {
	ips, err := iplist.Parse(a.IPAllow)
	if err != nil {
		return nil, fmt.Errorf("authcache: branch %s: ip allow list: %w", a.BranchID, err)
	}
	p := &Principal{
		ServiceID: a.ServiceID, BranchID: a.BranchID, IPAllow: ips,
		RateBank: float64(a.RateBank), RateWall: float64(a.RateWallet),
		BankKey: a.BranchID + "/bank", WalletKey: a.BranchID + "/wallet",
		Refusal: api.CallerRefusal(a.UserBanned, a.ServiceState, a.BranchActive),
	}
	if a.ServiceExpiresAt != nil {
		ended := api.StateAt(a.ServiceState, a.ServiceExpiresAt, *a.ServiceExpiresAt)
		p.ServiceEnds, p.RefusalEnded = *a.ServiceExpiresAt, api.CallerRefusal(a.UserBanned, ended, a.BranchActive)
	}
	if a.KeyExpiresAt != nil {
		p.KeyEnds = *a.KeyExpiresAt
	}
	if a.SigningSecret != "" {
		p.Signer, p.NonceClient = authn.NewSigner(a.SigningSecret), nonceScope(a.SigningSecret)
	}
	p.previous(a.Previous)
	return p.ready(), nil
}

func clientPrincipal(a api.ClientAuth) *Principal {
	p := &Principal{
		ServiceID: a.ServiceID, ClientID: a.ClientID, IPAllow: iplist.MustParse("*"),
		Signer: authn.NewSigner(a.Secret), NonceClient: nonceScope(a.Secret),
		Refusal: api.CallerRefusal(a.UserBanned, a.ServiceState, true),
	}
	if a.ServiceExpiresAt != nil {
		ended := api.StateAt(a.ServiceState, a.ServiceExpiresAt, *a.ServiceExpiresAt)
		p.ServiceEnds, p.RefusalEnded = *a.ServiceExpiresAt, api.CallerRefusal(a.UserBanned, ended, true)
	}
	p.previous(a.Previous)
	for _, name := range a.Permissions {
		p.Perms |= api.PermissionBit(name)
	}
	return p
}

// previous arms the previous signing secret of a rotation, if any.
func (p *Principal) previous(prev *api.PreviousSecret) {
	if prev != nil {
		p.PrevSigner, p.PrevNonceClient, p.PrevEnds = authn.NewSigner(prev.Secret), nonceScope(prev.Secret), prev.ExpiresAt
	}
}

// nonceScope names the nonces of the requests signed with secret. The
// string-to-sign has no key in it, so every key that signs with one secret
// (a B2B client's own, and the branch keys of its service) shares them: a
// signed request replayed with another of those keys is a duplicate too.
// The name is a digest, so the nonce store holds no secret.
func nonceScope(secret string) string {
	sum := sha256.Sum256([]byte("slip nonce scope\x00" + secret))
	return hex.EncodeToString(sum[:16])
}
