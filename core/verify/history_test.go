package verify_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/slipverify/slipverify/core/slip"
	"github.com/slipverify/slipverify/core/store"
)

// BenchmarkHistoryPage lists pages of a branch's history of 100,000
// verifications: the newest 100, 100 selected by a filter few entries meet
// (a remark one verification in 1,000 carries: 50 in the 50,000 entries a
// listing reads at most), and the newest 100 while
// verifications keep writing to the store.
func BenchmarkHistoryPage(b *testing.B) {
	v := newVerifier(b, 1<<40)
	const n = 100_000
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= n; i = next.Add(1) {
				r := request(slip.Bank{BankCode: "004", TransRef: fmt.Sprintf("HIST%016d", i)}.Encode())
				if i%1000 == 0 {
					r.Remark = "rare"
				}
				if _, err := v.Bank(context.Background(), r); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	rare := "rare"
	page := func(b *testing.B, q store.HistoryQuery, want int) {
		q.ServiceID, q.BranchID, q.Limit = "svc", "br", 100
		got, _, err := v.Store.History(q)
		if err != nil || len(got) != want {
			b.Fatalf("%d items, %v; want %d", len(got), err, want)
		}
	}
	b.Run("newest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			page(b, store.HistoryQuery{}, 100)
		}
	})
	b.Run("filtered", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			page(b, store.HistoryQuery{Remark: &rare}, 50) // the 50 of the 50,000 entries one listing reads at most
		}
	})
	b.Run("while verifying", func(b *testing.B) {
		stop := make(chan struct{})
		var load sync.WaitGroup
		for range 8 {
			load.Add(1)
			go func() {
				defer load.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					p := slip.Bank{BankCode: "004", TransRef: fmt.Sprintf("LOAD%016d", next.Add(1))}.Encode()
					if _, err := v.Bank(context.Background(), request(p)); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		b.ReportAllocs()
		for b.Loop() {
			page(b, store.HistoryQuery{}, 100)
		}
		close(stop)
		load.Wait()
	})
}
