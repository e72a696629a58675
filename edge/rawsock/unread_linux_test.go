//go:build linux

package rawsock_test

import (
	"io"
	"testing"

	"github.com/slipverify/slipverify/edge/rawsock"
)

// TestUnread: Unread counts what the socket received and was not read.
func TestUnread(t *testing.T) {
	s, c := pair(t)
	if n := rawsock.Unread(s); n != 0 {
		t.Errorf("before anything was sent: %d", n)
	}
	c.Write([]byte("twelve bytes")) // one segment: there whole once a byte is
	io.ReadFull(s, make([]byte, 5))
	if n := rawsock.Unread(s); n != 7 {
		t.Errorf("after 5 of 12 read: %d unread, want 7", n)
	}
	s.Close()
	if n := rawsock.Unread(s); n != 0 {
		t.Errorf("closed: %d", n)
	}
}
