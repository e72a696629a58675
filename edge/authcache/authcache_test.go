package authcache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/testnet"
)

// TestInvalidateDuringLookup: a request that comes after Invalidate does
// not share a lookup asked before it, which may bring the record as it
// was; it gets the record as core has it now.
func TestInvalidateDuringLookup(t *testing.T) {
	asked := make(chan struct{}, 4)
	release := make(chan struct{})
	var n atomic.Int32
	// core's auth route: the first question waits for release and gets
	// the old record, later ones the new record at once.
	addr := serve(t, func(w http.ResponseWriter, r *http.Request) {
		service := "svc-new"
		if n.Add(1) == 1 {
			asked <- struct{}{}
			<-release
			service = "svc-old"
		}
		json.NewEncoder(w).Encode(map[string]any{"success": true, "data": api.BranchAuth{
			ServiceID: service, BranchID: "br", ServiceState: "active", BranchActive: true, IPAllow: []string{"*"}, RateBank: 10, RateWallet: 10}})
	})
	c := newCache(t, addr, time.Minute)
	key := []byte("6f1c2a9e-7b3d-4c5e-9f80-1a2b3c4d5e6f")
	now := time.Now()
	type answer struct {
		p   *Principal
		err error
	}
	first := make(chan answer, 1)
	go func() { p, err := c.Lookup(Branch, key, now); first <- answer{p, err} }()
	<-asked // the first lookup is at core
	c.Invalidate()
	second := make(chan answer, 1)
	go func() { p, err := c.Lookup(Branch, key, now); second <- answer{p, err} }()
	select {
	case a := <-second:
		if a.err != nil || a.p.ServiceID != "svc-new" {
			t.Errorf("lookup after Invalidate: %+v, %v; want the record of svc-new", a.p, a.err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the lookup after Invalidate waited for the one asked before it")
	}
	close(release)
	if a := <-first; a.err != nil || a.p.ServiceID != "svc-old" {
		t.Errorf("the first lookup: %+v, %v", a.p, a.err)
	}
	// The old record, answered last, did not displace the new one.
	if p, err := c.Lookup(Branch, key, now); err != nil || p.ServiceID != "svc-new" {
		t.Errorf("a lookup after both: %+v, %v; want the record of svc-new", p, err)
	}
	if got := n.Load(); got != 2 {
		t.Errorf("core was asked %d times, want 2", got)
	}
}

// serve runs h on a real listener until the test ends, as core's auth
// routes, and returns its address.
func serve(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// newCache returns a cache asking core at addr, whose records live ttl.
func newCache(t *testing.T, addr string, ttl time.Duration) *Cache {
	t.Helper()
	c, err := New(Config{Core: &fasthttp.HostClient{Addr: addr}, EdgeToken: "token", TTL: ttl, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// standIn is core's branch auth route: it answers the record of each key
// it knows, 404 for any other, and counts the questions.
type standIn struct {
	addr  string
	asked atomic.Int32
}

func newStandIn(t *testing.T, records map[string]api.BranchAuth) *standIn {
	t.Helper()
	byPath := map[string]api.BranchAuth{}
	for key, rec := range records {
		sum := sha256.Sum256([]byte(key))
		byPath[api.PathBranchAuth+hex.EncodeToString(sum[:])] = rec
	}
	s := &standIn{}
	s.addr = serve(t, func(w http.ResponseWriter, r *http.Request) {
		s.asked.Add(1)
		rec, ok := byPath[r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"success": true, "data": rec})
	})
	return s
}

// TestAuthCache: unknown keys are cached as unknown, so a flood of them asks
// core once per TTL; after the TTL core is asked again.
func TestAuthCache(t *testing.T) {
	core := newStandIn(t, nil)
	c := newCache(t, core.addr, 2*time.Second)
	unknown := []byte("aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa")
	now := time.Now()
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, err := c.Lookup(Branch, unknown, now); err != ErrUnknown {
				t.Errorf("an unknown key: %v, want ErrUnknown", err)
			}
		})
	}
	wg.Wait()
	if s := c.Stats(); s.Misses != 1 || s.Negative+s.Misses+s.Shared != 50 || core.asked.Load() != 1 {
		t.Errorf("a flood of one unknown key reached core %d times (stats %+v), want once", core.asked.Load(), s)
	}
	if _, err := c.Lookup(Branch, unknown, now.Add(2100*time.Millisecond)); err != ErrUnknown {
		t.Errorf("an unknown key after the TTL: %v, want ErrUnknown", err)
	}
	if s := c.Stats(); s.Misses != 2 || core.asked.Load() != 2 {
		t.Errorf("after the TTL core was asked %d times in all (stats %+v), want 2", core.asked.Load(), s)
	}
}

// TestAuthRefreshAhead: a key in use is read again from core in the last
// quarter of its record's TTL, in the background, so none of its lookups
// waits for core when the old record expires; a key left unused expires as
// before.
func TestAuthRefreshAhead(t *testing.T) {
	key := "11111111-1111-4111-8111-111111111111"
	core := newStandIn(t, map[string]api.BranchAuth{key: {ServiceID: "svc", BranchID: "br-main",
		ServiceState: "active", BranchActive: true, IPAllow: []string{"*"}, RateBank: 10, RateWallet: 10}})
	c := newCache(t, core.addr, 2*time.Second)
	start := time.Now()
	at := func(d time.Duration) { // d after the first lookup
		t.Helper()
		if p, err := c.Lookup(Branch, []byte(key), start.Add(d)); err != nil || p.BranchID != "br-main" {
			t.Fatalf("at %v: %+v, %v", d, p, err)
		}
	}
	refreshed := func(n uint64) {
		t.Helper()
		testnet.Eventually(t, 10*time.Second, func() bool { return c.Stats().Refreshed == n },
			func() string { return fmt.Sprintf("auth stats %+v, want %d refreshed", c.Stats(), n) })
	}
	at(0)                       // a miss: the record expires at 2 s
	at(1200 * time.Millisecond) // 0.8 s left: a hit, nothing more
	at(1600 * time.Millisecond) // 0.4 s left: a hit, and the record is read again (it expires at 3.6 s)
	refreshed(1)
	at(2100 * time.Millisecond) // the first record has expired; the second answers
	at(3300 * time.Millisecond) // not a miss: the refresh was at 1.6 s, not at 1.2 s
	refreshed(2)                // and 0.3 s left: read again
	if s := c.Stats(); s.Misses != 1 || s.Shared != 0 || s.Errors != 0 {
		t.Errorf("a key in use waited for core: auth stats %+v, want 1 miss, none shared", s)
	}
	at(6 * time.Second) // unused since 3.3 s: its record (to 5.3 s) expired
	if s := c.Stats(); s.Misses != 2 || s.Refreshed != 2 || core.asked.Load() != 4 {
		t.Errorf("after its record expired unused: auth stats %+v, core asked %d times; want 2 misses, 2 refreshed, 4 questions", s, core.asked.Load())
	}
}
