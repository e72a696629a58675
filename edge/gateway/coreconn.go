package gateway

import (
	"errors"
	"net"
	"syscall"
)

// errCoreClosed is a request not sent because core had closed its pooled
// connection while it was idle: not a byte of it left, so it can go again
// on another connection.
var errCoreClosed = errors.New("core closed the idle connection; the request was not sent")

// coreConn is a connection to core that refuses to send a request on a
// connection core has closed (errCoreClosed). Only such a request is sent
// again (retryCore): once a byte of a request has gone, core may have acted
// on it (charged a verification, queued a job, moved a quota), and a
// connection cut before its answer leaves the client to decide, told
// API_SERVER_ERROR.
type coreConn struct {
	net.Conn
	raw     syscall.RawConn
	peekFn  func(fd uintptr) // bound once: no allocation per look
	closed  bool             // what the last look saw
	asking  bool             // a request is being written: its first Write looked
	peekBuf [1]byte
}

// watchClosed wraps c, a connection to core just dialled (tcp its
// *net.TCPConn, or nil when it is none: then nothing is looked at).
func watchClosed(c net.Conn, tcp *net.TCPConn) net.Conn {
	if tcp == nil {
		return c
	}
	raw, err := tcp.SyscallConn()
	if err != nil {
		return c
	}
	x := &coreConn{Conn: c, raw: raw}
	x.peekFn = x.peek
	return x
}

// Write writes p; the first Write of a request fails with errCoreClosed,
// sending nothing, if core closed the connection. Every request looks (one
// system call that does not wait): core restarted within milliseconds of a
// connection's last request leaves it closed too.
func (c *coreConn) Write(p []byte) (int, error) {
	if !c.asking {
		c.asking = true
		if c.peerClosed() {
			return 0, errCoreClosed
		}
	}
	return c.Conn.Write(p)
}

// Read reads core's answer: the request has been written.
func (c *coreConn) Read(p []byte) (int, error) {
	c.asking = false
	return c.Conn.Read(p)
}

// peerClosed looks, without waiting or taking anything, whether the socket
// holds core's end of the connection or a reset. Core never sends before it
// is asked, so any byte waiting is an answer nobody asked for: the
// connection is not to be used either.
func (c *coreConn) peerClosed() bool {
	c.closed = false
	if err := c.raw.Control(c.peekFn); err != nil {
		return true
	}
	return c.closed
}

func (c *coreConn) peek(fd uintptr) {
	n, _, err := syscall.Recvfrom(int(fd), c.peekBuf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	c.closed = err == nil || (err != syscall.EAGAIN && err != syscall.EINTR) || n > 0
}
