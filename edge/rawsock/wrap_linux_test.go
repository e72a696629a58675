//go:build linux && !race && !msan && !asan

package rawsock_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/slipverify/slipverify/edge/rawsock"
)

// TestWrapped: on Linux without the race detector or a sanitizer, accepted connections
// are the raw kind, and keep *net.TCPConn's other methods.
func TestWrapped(t *testing.T) {
	s, _ := pair(t)
	if _, plain := s.(*net.TCPConn); plain {
		t.Fatal("Listen accepted a plain *net.TCPConn; want raw system calls")
	}
	if err := s.(interface{ SetNoDelay(bool) error }).SetNoDelay(true); err != nil {
		t.Error(err)
	}
}

// TestClientIdleProbe: a request after 100 ms without one reads before it
// waits, so a server that shut its sending side while the connection sat
// idle (no reset will come) is seen at once, not at the read deadline.
func TestClientIdleProbe(t *testing.T) {
	s, c := pair(t)
	client := rawsock.WrapClient(c)
	go func() {
		io.ReadFull(s, make([]byte, 2))
		s.Write([]byte("ok"))
		io.Copy(io.Discard, s)
	}()
	client.Write([]byte("hi"))
	if _, err := io.ReadFull(client, make([]byte, 2)); err != nil {
		t.Fatal(err)
	}
	peerEnded(t, c, func() { s.CloseWrite() })
	rawsock.AdvanceClock(t, 100*time.Millisecond)
	exchangeFails(t, client)
}
