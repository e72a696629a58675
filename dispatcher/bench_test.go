package dispatcher_test

import (
	"sync"
	"testing"
	"time"
)

// BenchmarkAsyncJobs measures async verification end to end on a real
// stack (broker, core, dispatcher and edge as processes): jobs submitted
// through the edge in batches of 100 by 4 clients, each verified by a
// worker and its callback delivered to an HTTPS receiver. jobs/s counts
// from the first submit to the last callback received.
func BenchmarkAsyncJobs(b *testing.B) {
	rcv := newReceiver(b)
	s := startStack(b, rcv)
	const batch, clients = 100, 4
	var mu sync.Mutex
	var jobs []string
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := c * batch; n < b.N; n += clients * batch {
				items := []any{}
				for range min(batch, b.N-n) {
					items = append(items, map[string]any{"payload": freshPayload()})
				}
				a := s.do(b, "POST", "/v2/verify/bank/async/batch", keyMain, map[string]any{"items": items, "callbackUrl": rcv.url("/ok")})
				if a.status != 202 {
					b.Errorf("batch: %d %s", a.status, a.raw)
					return
				}
				mu.Lock()
				for _, id := range a.data()["jobIds"].([]any) {
					jobs = append(jobs, id.(string))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	submitted := time.Since(start)
	for rcv.count() < b.N && !b.Failed() {
		time.Sleep(time.Millisecond) // polling interval
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "jobs/s")
	b.ReportMetric(float64(b.N)/submitted.Seconds(), "submits/s")
}
