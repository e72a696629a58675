package verify_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/bank/sandbox"
	"github.com/slipverify/slipverify/core/slip"
	"github.com/slipverify/slipverify/core/store"
	"github.com/slipverify/slipverify/core/verify"
)

func newVerifier(tb testing.TB, limit int64) *verify.Verifier {
	tb.Helper()
	st, err := store.Open(filepath.Join(tb.TempDir(), "core.db"), time.Now)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	_, err = st.InsertMissing(store.Records{
		Services: []store.Service{{ID: "svc", State: store.StateActive, QuotaLimit: limit, CycleAnchorDay: 1}},
		Branches: []store.Branch{{ID: "br", ServiceID: "svc", Main: true, Active: true, KeyDigest: store.Digest("k")}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	sb, err := sandbox.New(sandbox.Config{}, time.Now)
	if err != nil {
		tb.Fatal(err)
	}
	return &verify.Verifier{Store: st, Upstream: sb}
}

func request(payload string) verify.Request {
	return verify.Request{Version: api.V2, ServiceID: "svc", BranchID: "br", Source: verify.Source{Payload: payload}}
}

func TestImageSourcesNeedAReader(t *testing.T) {
	v := newVerifier(t, 10)
	_, err := v.Bank(context.Background(), verify.Request{Version: api.V2, ServiceID: "svc", BranchID: "br",
		Source: verify.Source{URL: "https://example.com/slip.png"}})
	var e *api.Error
	if !errors.As(err, &e) || e.Code != api.Validation {
		t.Fatalf("URL source without an image reader: %v", err)
	}
}

// BenchmarkVerifyBankNew verifies a new slip per iteration: payload parse,
// state check, duplicate lookup, quota pre-check, sandbox lookup and one
// durable (fsync'd) consume. In parallel, concurrent consumes share commits;
// with branches=64 they spread over 64 branches of the service, as the bench
// suite's do.
func BenchmarkVerifyBankNew(b *testing.B) {
	for _, c := range []struct {
		parallel bool
		branches int
	}{{false, 1}, {true, 1}, {true, 64}} {
		name := fmt.Sprintf("parallel=%v", c.parallel)
		if c.branches > 1 {
			name += fmt.Sprintf("/branches=%d", c.branches)
		}
		b.Run(name, func(b *testing.B) {
			v := newVerifier(b, 1<<40)
			branches := []string{"br"}
			for i := 1; i < c.branches; i++ {
				branches = append(branches, fmt.Sprintf("br%02d", i))
				if _, err := v.Store.InsertMissing(store.Records{Branches: []store.Branch{{ID: branches[i], ServiceID: "svc",
					Active: true, KeyDigest: store.Digest(branches[i])}}}); err != nil {
					b.Fatal(err)
				}
			}
			var n atomic.Int64
			one := func() {
				i := n.Add(1)
				r := request(slip.Bank{BankCode: "004", TransRef: fmt.Sprintf("BENCH%015d", i)}.Encode())
				r.BranchID = branches[i%int64(len(branches))]
				if _, err := v.Bank(context.Background(), r); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			if c.parallel {
				b.SetParallelism(32)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						one()
					}
				})
				return
			}
			for b.Loop() {
				one()
			}
		})
	}
}

// BenchmarkVerifyBankSelfDuplicate is the read-only fast path: a slip the
// branch verified before is answered from the store, free.
func BenchmarkVerifyBankSelfDuplicate(b *testing.B) {
	v := newVerifier(b, 1<<40)
	p := slip.Bank{BankCode: "004", TransRef: "BENCHDUPLICATE"}.Encode()
	if _, err := v.Bank(context.Background(), request(p)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r, err := v.Bank(context.Background(), request(p))
			if err != nil || !r.IsDuplicate {
				b.Fatal(r, err)
			}
		}
	})
}
