// Package yield makes the edge's connections to core give way to other
// goroutines before they read core's answer, when the edge is busy.
//
// The edge writes a request to core and reads core's answer. Read straight
// after the write, the answer has almost never arrived: the read fails with
// EAGAIN, the goroutine parks, the netpoller wakes it, and it reads again;
// two system calls and a park for one read. Yielding first lets the
// goroutines whose data has arrived run, and under load core has answered
// by the time the yielding goroutine reads: one system call, no park.
//
// A yield is worth it only when other goroutines are waiting to run. When
// some of the runtime's Ps are idle, a yield wakes a thread to run the
// yielding goroutine elsewhere, which costs more than the failed read it
// saves. So a connection yields only while the edge serves more requests
// (read from a client and not yet answered, counted by the Listener's
// connections) than the process has Ps.
//
// Connections from clients count but do not yield: after the edge answers,
// the client's next request cannot come before the client has read the
// answer, so a yield there rarely finds it, and under saturation the
// goroutines cycling through the run queue delay the netpoller, which
// lengthens the tail (wrk's p99 went from about 5 to 8 ms).
package yield

import (
	"net"
	"runtime"
	"sync/atomic"
)

// Gate counts the requests being served and opens yields while there are
// more of them than Ps.
type Gate struct {
	serving atomic.Int64
	min     int64
}

// NewGate returns a gate for this process's GOMAXPROCS.
func NewGate() *Gate { return &Gate{min: int64(runtime.GOMAXPROCS(0))} }

func (g *Gate) open() bool { return g.serving.Load() > g.min }

// Connection states.
const (
	idle    = iota // wrote last (or new): the next read waits for an answer
	reading        // read since the last write, not counted
	serving        // read a request since the last write, counted in the gate
	closed
)

// conn is a connection to an upstream, which yields on the first Read
// after a Write while its gate is open, or a client's connection, which
// counts the requests it reads.
type conn struct {
	net.Conn
	gate   *Gate
	client bool
	state  atomic.Int32
}

// Conn returns c, a connection to an upstream: it yields before the first
// read after each write while g is open.
func Conn(c net.Conn, g *Gate) net.Conn { return &conn{Conn: c, gate: g} }

func (c *conn) Write(b []byte) (int, error) {
	if c.state.Swap(idle) == serving {
		c.gate.serving.Add(-1)
	}
	return c.Conn.Write(b)
}

func (c *conn) Read(b []byte) (int, error) {
	first := c.state.Load() == idle
	if first && !c.client && c.gate.open() {
		runtime.Gosched()
	}
	n, err := c.Conn.Read(b)
	if first && n > 0 {
		if c.client && c.state.CompareAndSwap(idle, serving) {
			c.gate.serving.Add(1)
		} else {
			c.state.CompareAndSwap(idle, reading)
		}
	}
	return n, err
}

func (c *conn) Close() error {
	if c.state.Swap(closed) == serving {
		c.gate.serving.Add(-1)
	}
	return c.Conn.Close()
}

// listener wraps every accepted connection.
type listener struct {
	net.Listener
	gate *Gate
}

// Listener returns ln, its accepted connections counting in g the requests
// they read until they answer them.
func Listener(ln net.Listener, g *Gate) net.Listener { return listener{ln, g} }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c, gate: l.gate, client: true}, nil
}
