// Package rawsock gives the edge TCP connections whose reads and writes
// call read(2) and write(2) without telling the Go scheduler.
//
// A Go read or write of a socket is a system call the scheduler watches: if
// it lasts longer than one tick of the runtime's monitor (20 µs), the
// monitor hands the goroutine's P to another thread, and the thread back in
// Go must wait for a P again. A socket is non-blocking, so its calls never
// wait, but a write to a local peer also runs the peer's side of TCP and
// often outlasts that tick. A raw call holds the P for those microseconds
// instead, as an event loop would: on one core at 8,000 requests/s the edge
// switched threads 0.6 times a request instead of 1.6, and took 15 % less
// CPU a request (bench/proxycompare/README.md). The waiting itself (a read
// with nothing to read, a write to a full buffer) goes through the network
// poller as before, deadlines included, by way of syscall.RawConn.
package rawsock

import "net"

// Listen returns ln with every accepted TCP connection wrapped by Wrap.
func Listen(ln net.Listener) net.Listener { return listener{ln} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Wrap(c), nil
}

// Wrap returns c reading and writing with raw system calls when it is a
// *net.TCPConn on Linux, in a build without the race detector or the memory
// sanitizers (which cannot see what a raw call reads or writes, nor the
// order a socket puts between a write and the read of it); otherwise c as
// it is. The result keeps every
// other method of *net.TCPConn.
func Wrap(c net.Conn) net.Conn { return wrap(c) }
