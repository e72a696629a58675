package gateway

import (
	"fmt"
	"testing"

	"github.com/valyala/fasthttp"
)

// idleCores are n ready cores, none with a request in flight, at
// addresses as a headless Service's name resolves to (10.0.0.1:8080, ...).
func idleCores(n int) []*backend {
	list := make([]*backend, n)
	for i := range list {
		addr := fmt.Sprintf("10.0.0.%d:8080", i+1)
		list[i] = &backend{addr: addr, seed: hash64([]byte(addr)), hc: &fasthttp.HostClient{Addr: addr}}
		list[i].ready.Store(true)
	}
	return list
}

// homes is the core each of the services svc-0 ... svc-(n-1) goes to, by
// address, with every core idle.
func homes(list []*backend, n int) map[string]string {
	cs := &Cores{}
	out := make(map[string]string, n)
	for i := range n {
		svc := fmt.Sprintf("svc-%d", i)
		out[svc] = list[cs.pick(list, 0, serviceKey([]byte(svc)))].addr
	}
	return out
}

// TestRendezvous: services spread evenly over the cores; a core leaving
// moves its services alone, spread over the rest; a core joining takes
// about its share, from every core, and moves nothing else; the order of
// the list changes nothing (every edge sends a service to the same core).
func TestRendezvous(t *testing.T) {
	const services = 4000
	four := idleCores(5)[:4]
	before := homes(four, services)
	per := map[string]int{}
	for _, addr := range before {
		per[addr]++
	}
	for _, b := range four {
		if n := per[b.addr]; n < services/4*8/10 || n > services/4*12/10 {
			t.Errorf("%d services over 4 cores: %d on %s, want %d ± 20%%", services, n, b.addr, services/4)
		}
	}

	reversed := []*backend{four[3], four[2], four[1], four[0]}
	for svc, addr := range homes(reversed, services) {
		if addr != before[svc] {
			t.Fatalf("the list in another order moves %s from %s to %s", svc, before[svc], addr)
		}
	}

	gone := four[1].addr
	moved := map[string]int{}
	for svc, addr := range homes([]*backend{four[0], four[2], four[3]}, services) {
		switch was := before[svc]; {
		case was == gone:
			moved[addr]++
		case addr != was:
			t.Fatalf("%s left: %s moved from %s to %s", gone, svc, was, addr)
		}
	}
	for _, b := range []*backend{four[0], four[2], four[3]} {
		if moved[b.addr] == 0 {
			t.Errorf("%s left: none of its %d services went to %s", gone, per[gone], b.addr)
		}
	}

	five := idleCores(5)
	joined := five[4].addr
	taken, from := 0, map[string]int{}
	for svc, addr := range homes(five, services) {
		switch {
		case addr == joined:
			taken++
			from[before[svc]]++
		case addr != before[svc]:
			t.Fatalf("%s joined: %s moved from %s to %s", joined, svc, before[svc], addr)
		}
	}
	if taken < services/5*8/10 || taken > services/5*12/10 || len(from) != 4 {
		t.Errorf("%s joined: it took %d services (from %d cores), want %d ± 20%% from each of the 4", joined, taken, len(from), services/5)
	}
}

// TestSpillBound: the bound at which a core passes a service's request on.
func TestSpillBound(t *testing.T) {
	f := func(total, ready, want int) {
		t.Helper()
		if got := spillBound(total, ready); got != want {
			t.Errorf("spillBound(%d in flight, %d ready) = %d, want %d", total, ready, got, want)
		}
	}
	f(0, 1, 2)   // one core: never reached, as its load is total
	f(0, 2, 1)   // idle: the request goes home
	f(1, 2, 2)   // one in flight at home: the next goes home too
	f(2, 2, 2)   // two at home: the next spills
	f(0, 8, 1)   // idle, many cores
	f(1, 8, 1)   // one in flight at home: the next spills, the average being a quarter
	f(15, 2, 10) // ceil(1.25 × 16 / 2)
	f(99, 4, 32) // ceil(1.25 × 100 / 4) = ceil(31.25)
}

// TestPickAllocatesNothing: choosing a core, a service's request or not,
// allocates nothing.
func TestPickAllocatesNothing(t *testing.T) {
	list, cs := idleCores(8), &Cores{}
	svc := []byte("6f1c2b9e-4d7a-4e3b-9a51-0c8d2e7f4a16")
	if n := testing.AllocsPerRun(1000, func() {
		cs.pick(list, 0, serviceKey(svc))
		cs.pick(list, 0, 0)
	}); n != 0 {
		t.Errorf("pick allocates %v times", n)
	}
}

// BenchmarkPick: the choice of a core per request, with a service (its id
// hashed, as RoundTrip does) and without one.
//
//	go test -run '^$' -bench Pick -benchmem ./edge/gateway/
func BenchmarkPick(b *testing.B) {
	svc := []byte("6f1c2b9e-4d7a-4e3b-9a51-0c8d2e7f4a16") // 36 bytes, a UUID
	for _, n := range []int{2, 8} {
		list, cs := idleCores(n), &Cores{}
		b.Run(fmt.Sprintf("cores=%d/service", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				cs.pick(list, 0, serviceKey(svc))
			}
		})
		b.Run(fmt.Sprintf("cores=%d/none", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				cs.pick(list, 0, 0)
			}
		})
	}
}
