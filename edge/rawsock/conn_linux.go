//go:build linux && !race && !msan && !asan

package rawsock

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

func wrap(c net.Conn, client bool) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	x := &conn{TCPConn: tc, raw: raw, client: client, lastSent: -idleProbe} // a first request probes
	x.readFn, x.writeFn = x.read, x.write
	x.rd.apply, x.wd.apply = (*net.TCPConn).SetReadDeadline, (*net.TCPConn).SetWriteDeadline
	tc.SetDeadline(time.Time{}) // the runtime's deadlines are what deadline takes them for: none
	return x
}

// conn is a TCP connection whose Read and Write are raw system calls. Like
// a *net.TCPConn, it may be used by several goroutines at once (a client
// connection by one at a time): a Read or Write that finds another of its
// kind running (its call busy) makes Go's own call, which waits behind it
// for the connection.
type conn struct {
	*net.TCPConn
	raw             syscall.RawConn
	r, w            call
	rd, wd          deadline
	readFn, writeFn func(fd uintptr) bool // bound once: no allocation per call

	// client: the connection asks and the peer answers (see WrapClient).
	// A short Write is held in held until the next Read, which sends it and
	// then waits for the answer before its first read(2), unless the last
	// request went out (lastSent, on the monotonic clock since clockBase)
	// idleProbe or longer before.
	client   bool
	held     []byte
	lastSent time.Duration
}

// maxHeld is the longest Write a client connection holds for the next
// Read: a request head and a small body. Longer ones (images) go out at once.
const maxHeld = 4096

// idleProbe: a request on a client connection that sent none for this long
// goes out as any write, and its Read reads before it waits. While the
// connection was idle, the peer may have closed it, and the poller has
// forgotten that readiness by the time a Read starts: a peer that closed
// and answers the request with a reset wakes the Read anyway, but one that
// only stopped sending, or is gone, would leave it waiting until its
// deadline. The read sees the end at once.
const idleProbe = 100 * time.Millisecond

// clockBase makes time.Since read only the monotonic clock.
var clockBase = time.Now()

// since is the time since clockBase, the clock of idleProbe; tests move it.
var since = func() time.Duration { return time.Since(clockBase) }

// call is one Read's or Write's buffer and outcome, owned by whoever set
// busy.
type call struct {
	busy  atomic.Bool
	buf   []byte
	n     int
	errno syscall.Errno
	stuck bool // a write(2) that wrote nothing and said nothing

	// A Read's request to send first (client connections): what is left
	// of it, and the error that stopped it.
	send    []byte
	sendErr syscall.Errno
}

// Read reads like (*net.TCPConn).Read: io.EOF at the end, a *net.OpError
// otherwise (a passed deadline's is a timeout).
func (c *conn) Read(p []byte) (int, error) {
	c.rd.begin(c.TCPConn)
	n, err := c.read1(p)
	c.rd.end()
	return n, err
}

func (c *conn) read1(p []byte) (int, error) {
	if len(p) == 0 || !c.r.busy.CompareAndSwap(false, true) {
		if err := c.sendHeld(); err != nil {
			return 0, err
		}
		return c.TCPConn.Read(p)
	}
	var now time.Duration
	if len(c.held) > 0 {
		now = since()
		if now-c.lastSent >= idleProbe {
			if err := c.sendHeld(); err != nil {
				c.r.busy.Store(false)
				return 0, err
			}
			c.lastSent = now
		}
	}
	c.r.buf, c.r.n, c.r.errno = p, 0, 0
	c.r.send, c.r.sendErr = c.held, 0
	err := c.raw.Read(c.readFn)
	n, errno := c.r.n, c.r.errno
	unsent, sendErr := c.r.send, c.r.sendErr
	if len(unsent) < len(c.held) { // read sent some of it
		c.lastSent = now
	}
	c.r.buf, c.r.send = nil, nil
	c.r.busy.Store(false)
	switch {
	case sendErr != 0:
		c.held = c.held[:0]
		return 0, c.opError("write", os.NewSyscallError("write", sendErr))
	case len(unsent) > 0 && err == nil: // no room for all of it: the rest goes out when there is, then Read waits for the answer
		c.held = c.held[:0]
		if _, err := c.send(unsent); err != nil {
			return 0, err
		}
		return c.read1(p)
	}
	if len(unsent) == 0 { // sent; otherwise the call failed before read ran, and the next Read sends it
		c.held = c.held[:0]
	}
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case errno != 0:
		return 0, c.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// sendHeld writes the held request, if any, through Write's path.
func (c *conn) sendHeld() error {
	if len(c.held) == 0 {
		return nil
	}
	h := c.held
	c.held = h[:0]
	_, err := c.send(h)
	return err
}

// Write writes all of p unless an error stops it, like
// (*net.TCPConn).Write, waiting for room through the poller.
func (c *conn) Write(p []byte) (int, error) {
	if c.client {
		if len(c.held) == 0 && len(p) <= maxHeld {
			c.held = append(c.held, p...)
			return len(p), nil
		}
		if err := c.sendHeld(); err != nil {
			return 0, err
		}
	}
	return c.send(p)
}

// send writes all of p unless an error stops it.
func (c *conn) send(p []byte) (int, error) {
	c.wd.begin(c.TCPConn)
	defer c.wd.end()
	if !c.w.busy.CompareAndSwap(false, true) {
		return c.TCPConn.Write(p)
	}
	c.w.buf, c.w.n, c.w.errno, c.w.stuck = p, 0, 0, false
	err := c.raw.Write(c.writeFn)
	n, errno, stuck := c.w.n, c.w.errno, c.w.stuck
	c.w.buf = nil
	c.w.busy.Store(false)
	switch {
	case err != nil:
		return n, c.opError("write", err)
	case errno != 0:
		return n, c.opError("write", os.NewSyscallError("write", errno))
	case stuck:
		return n, c.opError("write", io.ErrUnexpectedEOF) // as internal/poll does
	}
	return n, nil
}

// read makes one read(2) into c.r.buf; false asks the poller to wait until
// the socket is readable.
//
// A held request goes first, and then read waits for the answer without a
// read(2): the poller forgot the socket's readiness just before this call
// (RawConn.Read does that first), so what the peer sends after the request,
// its answer, marks it readable again. A read(2) right after the request
// would only find nothing, as the peer has not seen the request yet.
func (c *conn) read(fd uintptr) bool {
	if len(c.r.send) > 0 {
		n, e := writeAll(fd, c.r.send)
		c.r.send = c.r.send[n:]
		switch {
		case e != 0 && e != syscall.EAGAIN:
			c.r.sendErr = e
			return true
		case len(c.r.send) > 0:
			return true // no room: Read sends the rest through Write's path
		}
		return false
	}
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.r.buf[0])), uintptr(len(c.r.buf)))
		switch e {
		case 0:
			c.r.n = int(n)
			return true
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.r.errno = e
			return true
		}
	}
}

// write writes the rest of c.w.buf; false asks the poller to wait until
// the socket has room.
func (c *conn) write(fd uintptr) bool {
	n, e := writeAll(fd, c.w.buf[c.w.n:])
	c.w.n += n
	switch {
	case e == syscall.EAGAIN:
		return false
	case e != 0:
		c.w.errno = e
	case c.w.n < len(c.w.buf):
		c.w.stuck = true
	}
	return true
}

// writeAll makes write(2) calls until all of b is written, one fails (its
// errno: EAGAIN when the socket has no room) or one writes nothing and
// says nothing (errno 0, n short of len(b)). n is what was written.
func writeAll(fd uintptr, b []byte) (n int, errno syscall.Errno) {
	for n < len(b) {
		w, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[n])), uintptr(len(b)-n))
		switch {
		case e == syscall.EINTR:
		case e != 0:
			return n, e
		case w == 0:
			return n, 0
		default:
			n += int(w)
		}
	}
	return n, 0
}

// opError makes err what *net.TCPConn would return: a *net.OpError named
// after the operation (RawConn's own errors say "raw-read", "raw-write"),
// which fasthttp and net.Error users look into.
func (c *conn) opError(op string, err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		e := *oe
		e.Op = op
		return &e
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// ReadFrom is (*net.TCPConn).ReadFrom after a held request, within the
// write deadline.
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if err := c.sendHeld(); err != nil {
		return 0, err
	}
	c.wd.begin(c.TCPConn)
	defer c.wd.end()
	return c.TCPConn.ReadFrom(r)
}

// WriteTo is (*net.TCPConn).WriteTo after a held request, within the read
// deadline.
func (c *conn) WriteTo(w io.Writer) (int64, error) {
	if err := c.sendHeld(); err != nil {
		return 0, err
	}
	c.rd.begin(c.TCPConn)
	defer c.rd.end()
	return c.TCPConn.WriteTo(w)
}

// CloseWrite sends a held request, then shuts the sending side.
func (c *conn) CloseWrite() error {
	if err := c.sendHeld(); err != nil {
		return err
	}
	return c.TCPConn.CloseWrite()
}

// SetReadDeadline sets the deadline of reads (see deadline).
func (c *conn) SetReadDeadline(t time.Time) error { return c.rd.set(c.TCPConn, t) }

// SetWriteDeadline sets the deadline of writes (see deadline).
func (c *conn) SetWriteDeadline(t time.Time) error { return c.wd.set(c.TCPConn, t) }

// SetDeadline sets both.
func (c *conn) SetDeadline(t time.Time) error {
	return errors.Join(c.rd.set(c.TCPConn, t), c.wd.set(c.TCPConn, t))
}

// deadlineSlack is how much later than asked a deadline moved forward may
// take effect.
const deadlineSlack = 100 * time.Millisecond

// deadline is the deadline of a connection's reads or of its writes.
//
// fasthttp sets three deadlines on the connection of every request it
// serves and two on every request it sends, each the time now plus its
// timeout. Handing one to Go's runtime costs two clock reads and a timer
// update, about 85 ns here: more than 2 % of the edge's time a request. So
// a deadline reaches the runtime only when a call of its direction starts,
// or at once while one is under way; and not even then when the runtime's
// is no earlier than asked and at most deadlineSlack later. A deadline
// moved forward is handed on deadlineSlack later than asked, so that the
// moves of the next requests fall within it, unless it is that close to
// now already. One moved back by more than deadlineSlack, or lifted, is
// handed on as asked. A call thus never ends before its deadline, and may
// end up to deadlineSlack after it.
type deadline struct {
	mu    sync.Mutex
	asked time.Time // the caller's
	given time.Time // the runtime's
	calls int       // calls of this direction under way
	apply func(*net.TCPConn, time.Time) error
}

func (d *deadline) set(c *net.TCPConn, t time.Time) error {
	var err error
	d.mu.Lock()
	d.asked = t
	if d.calls > 0 {
		err = d.hand(c)
	}
	d.mu.Unlock()
	return err
}

// begin is called as a call starts, end as it returns.
func (d *deadline) begin(c *net.TCPConn) {
	d.mu.Lock()
	d.calls++
	d.hand(c) // an error means the connection is closed, which the call reports
	d.mu.Unlock()
}

func (d *deadline) end() {
	d.mu.Lock()
	d.calls--
	d.mu.Unlock()
}

// hand gives the runtime the deadline asked, if it needs to.
func (d *deadline) hand(c *net.TCPConn) error {
	switch {
	case d.asked.IsZero():
		if d.given.IsZero() {
			return nil
		}
		d.given = time.Time{}
	case d.given.IsZero() || d.given.Before(d.asked):
		moved := !d.given.IsZero()
		d.given = d.asked
		if moved && time.Until(d.asked) > deadlineSlack { // moved forward, and ahead: a little further
			d.given = d.asked.Add(deadlineSlack)
		}
	case d.given.Sub(d.asked) <= deadlineSlack:
		return nil
	default: // moved back
		d.given = d.asked
	}
	return d.apply(c, d.given)
}
