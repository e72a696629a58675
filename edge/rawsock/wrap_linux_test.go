//go:build linux && !race && !msan && !asan

package rawsock_test

import (
	"net"
	"testing"
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
