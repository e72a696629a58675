package kbank_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/bank/kbank"
	"github.com/slipverify/slipverify/core/bank/upstream"
)

// The fake's slow slip, and a slip it answers at once.
const (
	slowRef   = "SLOW0000000000000001"
	listedRef = "015278145821CTF09876"
)

// flood is n lookups of one service running at once.
type flood struct {
	held, refused int // in the bank's hands; refused before asking it
	res           chan error
	got           []error
	n             int
}

// startFlood starts n lookups of ref under ctx, and returns once each is
// in the bank's hands (the fake told arrived) or was refused without
// asking it; it waits for no time.
func startFlood(ctx context.Context, c *kbank.Connector, n int, ref string, arrived <-chan string) *flood {
	f := &flood{res: make(chan error, n), n: n}
	for range n {
		go func() {
			_, err := c.Bank(ctx, "014", ref)
			f.res <- err
		}()
	}
	// A lookup that ended otherwise (it timed out before reaching the
	// fake) is counted too, so that this never waits forever.
	for f.held+f.refused < n && len(f.got) < n {
		select {
		case <-arrived:
			f.held++
		case err := <-f.res:
			f.got = append(f.got, err)
			if errors.Is(err, upstream.ErrRefused) {
				f.refused++
			}
		}
	}
	return f
}

// wait returns every lookup's error, once all have ended.
func (f *flood) wait() []error {
	for len(f.got) < f.n {
		f.got = append(f.got, <-f.res)
	}
	return f.got
}

// lookups runs n lookups of listedRef at once under ctx and returns their
// errors.
func lookups(ctx context.Context, c *kbank.Connector, n int) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.Bank(ctx, "014", listedRef)
		}()
	}
	wg.Wait()
	return errs
}

// TestOneServiceCannotTakeEverySlot: with the bank slow for service A's
// slips, A's 70 lookups at once take the idle slots but not the reserve,
// and service B's lookups are answered meanwhile.
func TestOneServiceCannotTakeEverySlot(t *testing.T) {
	set := metrics.NewSet()
	r := newRig(t, func(c *kbank.Config) {
		c.Limits = upstream.Limits{MaxConcurrent: 64}
		c.Metrics = set
	})
	arrived := make(chan string, 70)
	r.fake.Slow(slowRef, arrived)
	ctxA, leave := context.WithCancel(bank.WithService(context.Background(), "svc-a"))
	defer leave()
	a := startFlood(ctxA, r.conn, 70, slowRef, arrived)
	if a.held >= 64 || a.held+a.refused != 70 {
		t.Errorf("service A: %d lookups at the bank, %d refused, of 70 on 64 slots: want some slots kept for others", a.held, a.refused)
	}

	ctxB := bank.WithService(context.Background(), "svc-b")
	for i, err := range lookups(ctxB, r.conn, 4) {
		if err != nil {
			t.Errorf("service B's lookup %d while A's wait on the bank: %v", i, err)
		}
	}

	leave() // A's caller gives up: that says nothing of the bank
	for _, err := range a.wait() {
		if err == nil {
			t.Errorf("a slow lookup of A answered")
		}
	}
	if _, err := r.conn.Bank(ctxB, "014", listedRef); err != nil {
		t.Errorf("service B after A's flood: %v", err)
	}
	var b bytes.Buffer
	set.WritePrometheus(&b)
	for _, want := range []string{
		fmt.Sprintf(`slip_core_bank_refused_total{upstream="kbank",reason="share"} %d`, a.refused),
		`slip_core_bank_refused_total{upstream="kbank",reason="concurrency"} 0`,
		`slip_core_bank_refused_total{upstream="kbank",reason="circuit"} 0`,
		`slip_core_bank_inflight_lookups{upstream="kbank"} 0`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, b.String())
		}
	}
}

// TestTimeoutsOpenCircuitOnlyAcrossServices: lookups that time out open
// the circuit only when the bank answered nothing meanwhile and they are
// several services': one service's slow slips are no sign the bank fails.
func TestTimeoutsOpenCircuitOnlyAcrossServices(t *testing.T) {
	for _, tc := range []struct {
		name     string
		services []string // each sends 10 lookups the bank is slow for
		answered bool     // the bank answers service B while they wait
		open     bool
	}{
		{"one service's timeouts", []string{"svc-a", "svc-a"}, false, false},
		{"two services' timeouts while B is answered", []string{"svc-a", "svc-c"}, true, false},
		{"two services' timeouts, nothing answered", []string{"svc-a", "svc-c"}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The lookups' deadline is real: short, and long enough for ten
			// lookups' TLS handshakes at once under the race detector on a
			// busy machine (1 s was not).
			r := newRig(t, func(c *kbank.Config) {
				c.Limits = upstream.Limits{MaxConcurrent: 64}
				c.Timeout = 3 * time.Second
			})
			arrived := make(chan string, 10*len(tc.services))
			r.fake.Slow(slowRef, arrived)
			ctxB := bank.WithService(context.Background(), "svc-b")
			if _, err := r.conn.Bank(ctxB, "014", listedRef); err != nil { // the token, fetched once
				t.Fatal(err)
			}
			var floods []*flood
			for _, s := range tc.services {
				f := startFlood(bank.WithService(context.Background(), s), r.conn, 10, slowRef, arrived)
				if f.held != 10 {
					t.Fatalf("%s: %d of 10 lookups reached the bank", s, f.held)
				}
				floods = append(floods, f)
			}
			if tc.answered {
				if _, err := r.conn.Bank(ctxB, "014", listedRef); err != nil {
					t.Fatalf("service B while the slow lookups wait: %v", err)
				}
			}
			for _, f := range floods {
				for _, err := range f.wait() {
					if !errors.Is(err, bank.ErrUpstream) {
						t.Fatalf("slow lookup: %v, want a timeout", err)
					}
				}
			}
			_, err := r.conn.Bank(ctxB, "014", listedRef)
			if open := errors.Is(err, upstream.ErrRefused); open != tc.open || !open && err != nil {
				t.Errorf("service B after the timeouts: %v; want the circuit open: %v", err, tc.open)
			}
		})
	}
}
