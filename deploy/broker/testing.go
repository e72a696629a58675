package broker

import (
	"context"
	"crypto/tls"
	"testing"

	"github.com/slipverify/slipverify/core/lib/kafkalink"
	"github.com/slipverify/slipverify/core/lib/testnet"
)

// StartTest runs a broker in memory with the platform's topics on a free
// loopback port until the test ends, and returns its address.
func StartTest(tb testing.TB, partitions int) string {
	tb.Helper()
	return StartTestConfig(tb, Config{Partitions: partitions})
}

// StartTestConfig runs a broker of c (its TLS and SASL, say) in memory on
// c.Addr (a free loopback port when empty) until the test ends, and returns
// its address.
func StartTestConfig(tb testing.TB, c Config) string {
	tb.Helper()
	if c.Addr == "" {
		c.Addr = testnet.FreeAddr(tb)
	}
	c.Memory = true
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- Run(ctx, c, func([]string) { close(ready) })
	}()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		tb.Fatalf("broker did not start: %v", err)
	}
	tb.Cleanup(func() { cancel(); <-done })
	return c.Addr
}

// StartTestTLS runs a broker in memory on a free loopback port until the
// test ends that speaks TLS only, with cert as its certificate, asks for
// client certificates signed by clientCA (a PEM file; empty: none) and lets
// in the one user of sasl (anyone when it names no mechanism); it returns
// the broker's address.
func StartTestTLS(tb testing.TB, cert tls.Certificate, clientCA string, sasl kafkalink.SASL) string {
	tb.Helper()
	certFile, keyFile := testnet.PEMFiles(tb, cert)
	return StartTestConfig(tb, Config{Partitions: 3, CertFile: certFile, KeyFile: keyFile, ClientCAFile: clientCA, SASL: sasl})
}
