// Package banktest holds what tests of bank.Connectors share: the
// conformance suite every connector to a bank's own API runs against its
// fake (Suite), and one benchmark of the lookups a verification makes.
package banktest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/slipverify/slipverify/core/bank"
)

// Refs names the references a connector under benchmark knows: a listed
// bank slip and a reference it answers not found.
type Refs struct {
	ListedBank, ListedRef, NotFoundRef string
}

// Benchmark measures c's lookups: a listed slip, synthetic slips (serially
// and in parallel), a not-found reference and synthetic wallet slips.
func Benchmark(b *testing.B, c bank.Connector, r Refs) {
	ctx := context.Background()
	refs := make([]string, 1024)
	for i := range refs {
		refs[i] = fmt.Sprintf("LOAD%016d", i)
	}
	lookup := func(b *testing.B, name string, f func(i int) error) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := f(i); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
	lookup(b, "listed", func(int) error { _, err := c.Bank(ctx, r.ListedBank, r.ListedRef); return err })
	lookup(b, "synthetic", func(i int) error { _, err := c.Bank(ctx, "014", refs[i%len(refs)]); return err })
	lookup(b, "not-found", func(int) error {
		if _, err := c.Bank(ctx, "004", r.NotFoundRef); !errors.Is(err, bank.ErrNotFound) {
			return fmt.Errorf("want not found, got %v", err)
		}
		return nil
	})
	lookup(b, "wallet-synthetic", func(i int) error { _, err := c.Wallet(ctx, refs[i%len(refs)]); return err })
	b.Run("synthetic-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, err := c.Bank(ctx, "014", refs[i%len(refs)]); err != nil {
					b.Error(err)
					return
				}
				i++
			}
		})
	})
}
