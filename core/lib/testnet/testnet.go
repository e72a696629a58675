// Package testnet is the one harness of the tests that run the platform's
// real programs and listeners: it is imported only by tests, of any tier.
//
// StartCore, StartEdge, StartBroker, StartDispatcher and StartUsage build a
// program once per test binary (Build; the package's TestMain calls Main),
// run it on a free port with a data directory of its own and the shared
// test credentials, wait until it serves, and stop it (SIGTERM, then a wait
// for its exit) when the test ends, printing its output if the test
// failed. Seed writes core's records. A test sets what else its programs need
// in env.
package testnet

import (
	"net"
	"sync"
	"testing"
)

// handedOut holds every address FreeAddr returned in this process.
var handedOut sync.Map

// FreeAddr returns a loopback address with a port free at the time of the
// call, for a program the test starts (which binds it itself). It never
// returns the same address twice in one process: a port just closed may be
// handed out again by the next pick, and a test that picks several before
// starting a stack would give two tiers one port.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if _, taken := handedOut.LoadOrStore(addr, true); !taken {
			return addr
		}
	}
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
