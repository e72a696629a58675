package authcache

import (
	"encoding/json"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		service := "svc-new"
		if n.Add(1) == 1 {
			asked <- struct{}{}
			<-release
			service = "svc-old"
		}
		json.NewEncoder(w).Encode(map[string]any{"success": true, "data": api.BranchAuth{
			ServiceID: service, BranchID: "br", ServiceState: "active", BranchActive: true, IPAllow: []string{"*"}, RateBank: 10, RateWallet: 10}})
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	c, err := New(Config{Core: &fasthttp.HostClient{Addr: ln.Addr().String()}, EdgeToken: "token", TTL: time.Minute, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
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
