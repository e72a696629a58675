// Package testnet helps tests that start real listeners: it is imported
// only by tests, of any tier.
package testnet

import (
	"net"
	"testing"
)

// FreeAddr returns a loopback address with a port free at the time of the
// call, for a program the test starts (which binds it itself).
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Serve accepts connections on ln until the test ends, when it closes ln,
// and runs handle on each connection in a goroutine of its own, closing the
// connection when handle returns.
func Serve(tb testing.TB, ln net.Listener, handle func(net.Conn)) {
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
}
