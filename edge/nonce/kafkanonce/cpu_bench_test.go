package kafkanonce

import (
	"crypto/rand"
	"syscall"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/edge/nonce"
)

// BenchmarkShareCPU measures the CPU this process spends sharing nonces:
// b.N nonces recorded at 20,000 a second (about a signed edge's pace on
// one core), published and read back (an edge reads its own records too),
// with the broker in a process of its own so that its work is not counted.
// It reports the process's CPU per nonce (cpu-µs/nonce); the pacing sleeps
// make ns/op meaningless.
//
//	go test ./edge/nonce/kafkanonce -run '^$' -bench ShareCPU -benchtime 60000x -count 3
func BenchmarkShareCPU(b *testing.B) {
	broker := testnet.StartBroker(b, "SLIP_BROKER_PARTITIONS=6", "SLIP_BROKER_MEMORY=true")
	b.Run("off", func(b *testing.B) { benchShareCPU(b, nil) })
	for _, linger := range []time.Duration{0, 2 * time.Millisecond, 5 * time.Millisecond} {
		b.Run("linger="+linger.String(), func(b *testing.B) {
			e := startEdge(b, broker.Addr, Config{Linger: linger})
			testnet.Eventually(b, 10*time.Second, e.share.Ready, func() string { return "not replayed" })
			benchShareCPU(b, e)
		})
	}
}

// benchShareCPU records b.N nonces in e's store, or, with e nil, in a store
// that shares nothing (the baseline).
func benchShareCPU(b *testing.B, e *edge) {
	if e == nil {
		e = &edge{store: nonce.New(nonce.Config{})}
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	const rate = 20_000
	b.ResetTimer()
	c0, start := cpu(), time.Now()
	var n [16]byte
	rand.Read(n[8:]) // nonces of earlier runs reach this store too
	accepted := uint64(0)
	for i := range b.N {
		n[0], n[1], n[2], n[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
		if e.store.Use("svc", "branch", n, time.Now()) == nil {
			accepted++
		}
		if i%10 == 9 { // pace: 10 nonces per 0.5 ms, about as steady as requests
			if d := time.Until(start.Add(time.Duration(i+1) * time.Second / rate)); d > 0 {
				time.Sleep(d)
			}
		}
	}
	if e.share != nil {
		testnet.Eventually(b, 30*time.Second, func() bool { return e.share.published.Get() >= accepted },
			func() string { return "not published" })
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu()-c0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/nonce")
}

// TestMain removes the broker program BenchmarkShareCPU builds.
func TestMain(m *testing.M) { testnet.Main(m) }
