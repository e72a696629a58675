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
//
// A client connection (WrapClient) also saves the read that would find
// nothing: the edge's request to core goes out from the read that waits for
// core's answer, after the poller has forgotten the socket's last
// readiness, so the poller wakes the read when the answer comes. On one
// core at 15,000 requests/s the edge made 5.5 system calls a request
// instead of 6.5, and took 5 % less CPU a request.
//
// Deadlines reach the runtime only when a call starts or is waiting, and a
// deadline moved forward by less than 100 ms stays where it is: fasthttp
// moves five of them on every request, and each move handed on costs two
// clock reads and a timer update (3 % of the edge's CPU). A deadline thus
// takes effect up to 100 ms late, never early.
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
func Wrap(c net.Conn) net.Conn { return wrap(c, false) }

// WrapClient is Wrap for the connection of a client that writes a request
// and then reads its answer, used by one goroutine at a time (a
// fasthttp.HostClient's connection to its upstream). A Write of up to 4
// KiB is held until the next Read, which sends it and waits for the answer
// through the poller before its first read(2): one system call fewer per
// request than a read that would find nothing yet. An error in sending
// then comes from that Read. ReadFrom, WriteTo and CloseWrite send a held
// request first; Close drops it.
//
// The first request on the connection, and one after 100 ms without a
// request, are sent as any write and read before waiting: the peer may have
// closed the connection while it was idle, and a peer that then neither
// answers nor resets (one that shut only its sending side, or a host that
// is gone) must be seen at once. A peer that does so within 100 ms of a
// request, or that sends before it is asked (an HTTP server never does),
// is heard only at its next sending or at the read deadline.
func WrapClient(c net.Conn) net.Conn { return wrap(c, true) }
