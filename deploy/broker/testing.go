package broker

import (
	"context"
	"testing"

	"github.com/slipverify/slipverify/core/testnet"
)

// StartTest runs a broker in memory with the platform's topics on a free
// loopback port until the test ends, and returns its address.
func StartTest(tb testing.TB, partitions int) string {
	tb.Helper()
	addr := testnet.FreeAddr(tb)
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Addr: addr, Partitions: partitions, Memory: true}, func([]string) { close(ready) })
	}()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		tb.Fatalf("broker did not start: %v", err)
	}
	tb.Cleanup(func() { cancel(); <-done })
	return addr
}
