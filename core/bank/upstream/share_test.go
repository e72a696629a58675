package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/slipverify/slipverify/core/bank"
)

func TestReserve(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 0, 2: 1, 7: 1, 8: 1, 9: 2, 64: 8, 100: 13} {
		if got := Reserve(n); got != want {
			t.Errorf("Reserve(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestMayTake is the rule sharing 64 slots (8 of them the reserve).
func TestMayTake(t *testing.T) {
	for _, tc := range []struct {
		name               string
		free, held, others int
		want               bool
		n, reserve         int // zero: 64 and 8
	}{
		{name: "no slot free", free: 0, held: 0, others: 3, want: false},
		{name: "a service alone takes the idle slots", free: 9, held: 55, want: true},
		{name: "a service alone stops at the reserve", free: 8, held: 56, want: false},
		{name: "a service holding nothing takes the reserve", free: 8, held: 0, others: 1, want: true},
		{name: "... down to its last slot", free: 1, held: 0, others: 1, want: true},
		{name: "one of two below its share, 64/3, takes the reserve", free: 8, held: 21, others: 1, want: true},
		{name: "one of two at its share does not", free: 8, held: 22, others: 1, want: false},
		{name: "one of three below its share, 64/4", free: 3, held: 15, others: 2, want: true},
		{name: "one of three at its share", free: 3, held: 16, others: 2, want: false},
		{name: "beyond the reserve, any service", free: 9, held: 40, others: 5, want: true},
		{name: "one slot: no reserve", n: 1, reserve: 0, free: 1, held: 0, want: true},
		{name: "two slots: a service alone keeps one free", n: 2, reserve: 1, free: 1, held: 1, want: false},
		{name: "two slots: the other service takes it", n: 2, reserve: 1, free: 1, held: 0, others: 1, want: true},
	} {
		n, reserve := tc.n, tc.reserve
		if n == 0 {
			n, reserve = 64, 8
		}
		if got := mayTake(n, reserve, tc.free, tc.held, tc.others); got != tc.want {
			t.Errorf("%s: mayTake(n %d, reserve %d, free %d, held %d, others %d) = %v", tc.name, n, reserve, tc.free, tc.held, tc.others, got)
		}
	}
}

// TestSharesEvenOut: two services flooding a bank; as the first one's
// lookups end, the slots go to the second up to its share, and then back
// to the reserve; a service holding nothing has no entry.
func TestSharesEvenOut(t *testing.T) {
	s := newSlots(64)
	take := func(svc string, n int) int {
		got := 0
		for range n {
			if s.take(svc) {
				got++
			}
		}
		return got
	}
	if got := take("a", 70); got != 56 {
		t.Fatalf("a alone took %d slots, want 56", got)
	}
	if got := take("b", 20); got != 8 {
		t.Fatalf("b took %d slots, want the reserve, 8", got)
	}
	for range 14 { // 14 of a's lookups end, one at a time, and both ask again
		s.give("a")
		take("a", 1)
		take("b", 1)
	}
	if s.held["a"] != 42 || s.held["b"] != 22 || s.inUse != 64 {
		t.Fatalf("held %v, %d in use; want a 42, b 22 (past 64/3)", s.held, s.inUse)
	}
	for range 8 { // more end: the reserve fills again, for a third service
		s.give("a")
		take("a", 1)
		take("b", 1)
	}
	if s.held["a"] != 34 || s.held["b"] != 22 || take("c", 20) != 8 {
		t.Fatalf("held %v, want a 34, b 22, and the reserve for c", s.held)
	}
	for svc, n := range map[string]int{"a": 34, "b": 22, "c": 8} {
		for range n {
			s.give(svc)
		}
	}
	if len(s.held) != 0 || s.inUse != 0 {
		t.Errorf("nothing held: %v, %d in use", s.held, s.inUse)
	}
}

// TestGuardShares: the guard refuses a flooding service's lookup beyond
// its part with the error of a full cap (API_SERVER_ERROR), counted apart,
// and serves another service meanwhile.
func TestGuardShares(t *testing.T) {
	set := metrics.NewSet()
	g := NewGuard("test", Limits{MaxConcurrent: 8}, new(clock).Now, set)
	a := bank.WithService(context.Background(), "svc-a")
	b := bank.WithService(context.Background(), "svc-b")
	leave := make(chan struct{})
	var wg sync.WaitGroup
	hold := func(ctx context.Context) {
		inside := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.Do(ctx, 0, func(context.Context) error { close(inside); <-leave; return nil }); err != nil {
				t.Error(err)
				close(inside)
			}
		}()
		<-inside
	}
	for range 7 {
		hold(a)
	}
	err := g.Do(a, 0, func(context.Context) error { return nil })
	if !errors.Is(err, ErrRefused) || !errors.Is(err, bank.ErrUpstream) {
		t.Fatalf("a's 8th lookup of 8 slots: %v, want refused", err)
	}
	hold(b) // the reserve
	if err := g.Do(a, 0, func(context.Context) error { return nil }); !errors.Is(err, ErrRefused) {
		t.Fatalf("a with no slot free: %v", err)
	}
	close(leave)
	wg.Wait()
	if err := g.Do(b, 0, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if len(g.slots.held) != 0 || g.slots.inUse != 0 {
		t.Errorf("after the lookups: held %v, %d in use", g.slots.held, g.slots.inUse)
	}
	var out bytes.Buffer
	set.WritePrometheus(&out)
	for _, want := range []string{
		`slip_core_bank_refused_total{upstream="test",reason="share"} 1`,
		`slip_core_bank_refused_total{upstream="test",reason="concurrency"} 1`,
		`slip_core_bank_lookups_total{upstream="test",outcome="found"} 9`,
		`slip_core_bank_inflight_lookups{upstream="test"} 0`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, out.String())
		}
	}
}

func nothing(context.Context) error { return nil }

// TestGuardAllocs: taking and giving back a slot allocates nothing.
func TestGuardAllocs(t *testing.T) {
	g := NewGuard("test", Limits{MaxConcurrent: 64, PerSecond: 1 << 30}, new(clock).Now, nil)
	ctx := bank.WithService(context.Background(), "svc")
	if n := testing.AllocsPerRun(1000, func() { _ = g.Do(ctx, 0, nothing) }); n != 0 {
		t.Errorf("%v allocations a lookup, want 0", n)
	}
}

// BenchmarkGuard measures the slots' hot path: a slot taken and given back
// around a lookup that costs nothing, by one service and by 64 at once.
func BenchmarkGuard(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		g := NewGuard("test", Limits{MaxConcurrent: 64}, new(clock).Now, nil)
		ctx := bank.WithService(context.Background(), "svc")
		b.ReportAllocs()
		for b.Loop() {
			if err := g.Do(ctx, 0, nothing); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		// Room for every goroutine beyond the reserve: none is refused.
		g := NewGuard("test", Limits{MaxConcurrent: 64 + 2*runtime.GOMAXPROCS(0)}, new(clock).Now, nil)
		ctxs := make([]context.Context, 64)
		for i := range ctxs {
			ctxs[i] = bank.WithService(context.Background(), fmt.Sprintf("svc-%d", i))
		}
		var next sync.Mutex
		i := 0
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			next.Lock()
			ctx := ctxs[i%len(ctxs)]
			i++
			next.Unlock()
			for pb.Next() {
				if err := g.Do(ctx, 0, nothing); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
