package upstream

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/lib/testnet"
)

type clock = testnet.Clock

func TestTokensOneFetchForConcurrentCallers(t *testing.T) {
	var fetches atomic.Int32
	release := make(chan struct{})
	tok := NewTokens(func(context.Context) (Token, error) {
		fetches.Add(1)
		<-release
		return Token{Value: "t", Life: time.Hour}, nil
	}, new(clock).Now, time.Minute, nil)
	var wg sync.WaitGroup
	started := make(chan struct{}, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started <- struct{}{}
			if v, err := tok.Get(context.Background()); v != "t" || err != nil {
				t.Errorf("got %q %v", v, err)
			}
		}()
	}
	for range 16 {
		<-started
	}
	close(release)
	wg.Wait()
	if n := fetches.Load(); n != 1 {
		t.Errorf("%d fetches, want 1", n)
	}
}

func TestTokensRetryDropAndExpiry(t *testing.T) {
	clk := new(clock)
	var n atomic.Int32
	tok := NewTokens(func(context.Context) (Token, error) {
		if n.Add(1) == 1 {
			return Token{}, errors.New("connection refused")
		}
		return Token{Value: "t" + string(rune('0'+n.Load())), Life: 10 * time.Minute}, nil
	}, clk.Now, time.Minute, nil)
	v, err := tok.Get(context.Background())
	if err != nil || v != "t2" {
		t.Fatalf("got %q %v, want t2 after one failed fetch", v, err)
	}
	tok.drop("stale") // another token: kept
	if v, _ := tok.Get(context.Background()); v != "t2" {
		t.Errorf("dropping another token lost t2: %q", v)
	}
	tok.drop("t2")
	if v, _ := tok.Get(context.Background()); v != "t3" {
		t.Errorf("after drop: %q, want t3", v)
	}
	clk.Advance(9*time.Minute + time.Second) // last minute of 10: t3 goes on, t4 is fetched behind
	if v, _ := tok.Get(context.Background()); v != "t3" {
		t.Errorf("in the last minute: %q, want t3 while t4 is fetched", v)
	}
	clk.Advance(50 * time.Second) // the last 10 s: t3 is no longer used
	if v, _ := tok.Get(context.Background()); v != "t4" {
		t.Errorf("in the last 10 s: %q, want t4", v)
	}
	if n.Load() != 4 {
		t.Errorf("%d fetches, want 4", n.Load())
	}
}

// TestTokensRefreshBehind: in the refresh window callers go on with the
// old token while one fetch runs; past the old token's use they wait for it.
func TestTokensRefreshBehind(t *testing.T) {
	clk := new(clock)
	var n atomic.Int32
	release := make(chan struct{})
	tok := NewTokens(func(context.Context) (Token, error) {
		if n.Add(1) == 1 {
			return Token{Value: "a", Life: 100 * time.Second}, nil
		}
		<-release
		return Token{Value: "b", Life: 100 * time.Second}, nil
	}, clk.Now, time.Minute, nil)
	ctx := context.Background()
	if v, _ := tok.Get(ctx); v != "a" {
		t.Fatalf("first token %q", v)
	}
	clk.Advance(85 * time.Second)
	for range 3 {
		if v, _ := tok.Get(ctx); v != "a" { // the refresh blocks: a goes on
			t.Fatalf("in the window: %q, want a", v)
		}
	}
	clk.Advance(11 * time.Second) // 96 s of 100: a is no longer used
	got := make(chan string)
	go func() { v, _ := tok.Get(ctx); got <- v }()
	close(release)
	if v := <-got; v != "b" {
		t.Errorf("after the window: %q, want b", v)
	}
	if n.Load() != 2 {
		t.Errorf("%d fetches, want 2: one refresh for every caller", n.Load())
	}
}

func TestTokensWaiterLeaves(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	tok := NewTokens(func(context.Context) (Token, error) { <-release; return Token{Value: "t"}, nil }, new(clock).Now, time.Minute, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tok.Get(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want Canceled", err)
	}
}

func TestSeconds(t *testing.T) {
	for in, want := range map[string]time.Duration{
		`1799`: 1799 * time.Second, `"1799"`: 1799 * time.Second, `" 60 "`: time.Minute, `1.5`: 1500 * time.Millisecond,
		`null`: DefaultLife, `""`: DefaultLife, `0`: DefaultLife,
	} {
		var s Seconds
		if err := json.Unmarshal([]byte(in), &s); err != nil || s.Life() != want {
			t.Errorf("%s: %v %v, want %v", in, s.Life(), err, want)
		}
	}
	for _, in := range []string{`"soon"`, `-1`, `true`, `{}`} {
		var s Seconds
		if err := json.Unmarshal([]byte(in), &s); err == nil {
			t.Errorf("%s: no error", in)
		}
	}
	for tt, want := range map[string]bool{"Bearer": true, "bearer": true, "BearerToken": true, "": true, "MAC": false, "Basic": false} {
		if IsBearer(tt) != want {
			t.Errorf("IsBearer(%q) != %v", tt, want)
		}
	}
}

func TestCheckLookup(t *testing.T) {
	for _, ok := range [][2]string{{"004", "015278145821CTF09876"}, {"014", "a"}} {
		if err := CheckLookup(ok[0], ok[1]); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range [][2]string{{"04", "A"}, {"0a4", "A"}, {"004", ""}, {"004", "A B"}, {"004", "A?x=1"}, {"004", "../x"}} {
		if err := CheckLookup(bad[0], bad[1]); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

var errBank = errors.New("HTTP 503")

func TestCircuit(t *testing.T) {
	clk := new(clock)
	g := NewGuard("test", Limits{FailuresToOpen: 3, OpenFor: time.Minute}, clk.Now, nil)
	calls := 0
	fail := func(context.Context) error { calls++; return errBank }
	ok := func(context.Context) error { calls++; return nil }
	notFound := func(context.Context) error { calls++; return bank.ErrNotFound }
	ctx := context.Background()
	g.Do(ctx, 0, fail)
	g.Do(ctx, 0, fail)
	g.Do(ctx, 0, notFound) // an answer: resets the count
	for range 3 {
		g.Do(ctx, 0, fail)
	}
	if calls != 6 {
		t.Fatalf("%d calls", calls)
	}
	err := g.Do(ctx, 0, ok)
	if !errors.Is(err, bank.ErrUpstream) || !errors.Is(err, ErrRefused) || calls != 6 {
		t.Fatalf("open circuit: err %v calls %d", err, calls)
	}
	clk.Advance(time.Minute)
	if err := g.Do(ctx, 0, fail); err != errBank || calls != 7 { // the probe fails: open again
		t.Fatalf("probe: %v", err)
	}
	if err := g.Do(ctx, 0, ok); !errors.Is(err, ErrRefused) {
		t.Fatalf("after a failed probe: %v", err)
	}
	clk.Advance(time.Minute)
	if err := g.Do(ctx, 0, ok); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if err := g.Do(ctx, 0, ok); err != nil || calls != 9 {
		t.Fatalf("closed again: %v, %d calls", err, calls)
	}
}

func TestCaps(t *testing.T) {
	clk := new(clock)
	g := NewGuard("test", Limits{MaxConcurrent: 1, PerSecond: 2}, clk.Now, nil)
	ctx := context.Background()
	inside := make(chan struct{})
	leave := make(chan struct{})
	done := make(chan error)
	go func() { done <- g.Do(ctx, 0, func(context.Context) error { close(inside); <-leave; return nil }) }()
	<-inside
	if err := g.Do(ctx, 0, func(context.Context) error { return nil }); !errors.Is(err, ErrRefused) {
		t.Errorf("second concurrent call: %v, want refused", err)
	}
	close(leave)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Rate: 2 a second; the call the concurrency cap refused took none.
	if err := g.Do(ctx, 0, func(context.Context) error { return nil }); err != nil {
		t.Errorf("second call in a second: %v", err)
	}
	if err := g.Do(ctx, 0, func(context.Context) error { return nil }); !errors.Is(err, ErrRefused) {
		t.Errorf("third call in a second: %v, want refused", err)
	}
	clk.Advance(500 * time.Millisecond)
	if err := g.Do(ctx, 0, func(context.Context) error { return nil }); err != nil {
		t.Errorf("after half a second: %v", err)
	}
}

// TestSendRepeatsOnlyBeforeAConnection: a connection that fails in the TLS
// handshake carried no request, so Send tries once more; a request that
// reached the server is never sent again.
func TestSendRepeatsOnlyBeforeAConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close() // before the handshake: nothing of the request was sent
		}
	}()
	client := NewClient(&tls.Config{})
	_, err = Send(client, func() (*http.Request, error) {
		return http.NewRequest(http.MethodPost, "https://"+ln.Addr().String()+"/lookup", strings.NewReader("{}"))
	})
	if err == nil || errors.Is(err, ErrMaybeSent) {
		t.Fatalf("err %v, want a connection error that is not ErrMaybeSent", err)
	}
	if n := accepted.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (one repeat before any byte was written)", n)
	}

	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		c, _, _ := w.(http.Hijacker).Hijack()
		c.Close() // after the request: it may have been billed
	}))
	defer srv.Close()
	_, err = Send(srv.Client(), func() (*http.Request, error) {
		return http.NewRequest(http.MethodPost, srv.URL+"/lookup", strings.NewReader("{}"))
	})
	if !errors.Is(err, ErrMaybeSent) || requests.Load() != 1 {
		t.Errorf("err %v after %d requests, want ErrMaybeSent after 1", err, requests.Load())
	}
}
