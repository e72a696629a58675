package gateway

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/edge/rawsock"
)

// Listen returns ln with every accepted connection read by raw system calls
// (rawsock) and watched by a headConn: the start of each request head is
// kept, so a head fasthttp cannot read (over its 4 KiB buffer, cut short,
// malformed) is refused in its route's version, and a head with a bare line
// feed is refused at once. The server must serve it with ErrorHandler. The
// watch reads the bytes as the client sent them: TLS, were the edge to
// terminate it, would wrap the connections before they reach it, never a
// listener over it.
func Listen(ln net.Listener) net.Listener { return headListener{rawsock.Listen(ln)} }

type headListener struct{ net.Listener }

func (l headListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &headConn{Conn: c, watching: true}, nil
}

// errBareLF is what a headConn's Read returns once it read a line of a
// request head that ends in a bare line feed (LF without CR), or holds a
// bare carriage return (CR without LF).
var errBareLF = errors.New("a request head line ends in a bare line feed or holds a bare carriage return")

// headConn watches the bytes of each request head as fasthttp reads them,
// from the head's first byte to its blank line, and nothing of the body.
//
// A line that ends in a bare LF is refused (RFC 9112 2.2 lets a server
// reject it). fasthttp takes such a line in the middle of a head but waits
// for the CRLF CRLF that ends a head, so a head that ends in bare LFs
// would hang until the read timeout; a front end that counts lines
// otherwise would see another request. The Read that finds one returns the
// bytes up to that LF, the LF made a space, which can complete no head, and
// every Read after it returns errBareLF: fasthttp's head read fails at once.
// A bare CR (RFC 9112 2.2: invalid) is refused the same way, the CR made a
// space: fasthttp would take a line holding one as a field, and a head
// whose blank line has one ("\r\r\n") would hang until the read timeout.
//
// The first bytes of the request line are kept until the next head starts,
// so the ErrorHandler knows the version of the route whatever fasthttp
// discarded. A head starts where the connection starts and after each
// response: fasthttp writes a response once it has read all the client
// sent, or, when the client pipelines, once it waits for the rest of the
// next head, whose start it has then already read. A pipelining client is
// thus served as fasthttp alone would serve it, but for the format: a head
// read in the same Read as the request before it is not watched, and one
// whose start came before the response is watched from where it was cut
// (its refusal may take either version's format).
//
// A connection the edge closes after answering a head it did not read
// whole (over 4 KiB, with a bare LF or CR, cut short by the read timeout),
// or while bytes the client sent wait unread (a body refused from its
// Content-Length, requests pipelined behind a last one), is closed in
// stages (rawsock.CloseDraining): closed at once, it would be reset, and
// the client could lose the answer. A connection the client ended is
// closed at once.
//
// Cost: one IndexByte a line of a head (BenchmarkHeadConnRead: about 0.2 µs
// for a head of 230 bytes, no allocation); one comparison a Read of a body.
// fasthttp uses a connection from one goroutine.
type headConn struct {
	net.Conn
	watching bool // the bytes read next are a head's
	// cut: an answer was written before the head was read whole; eof: a
	// Read found the client's end of the stream. Close reads them, and
	// fasthttp's Shutdown closes an idle connection while its goroutine
	// reads: they are set only then, rarely.
	cut, eof atomic.Bool
	err      error
	lines    int  // complete lines of the head read so far
	lineLen  int  // bytes of the current line so far
	prev     byte // the last byte read
	first    [128]byte
	firstLen int // of first: the start of the request line
}

// Read reads from the connection and watches what it returns.
func (c *headConn) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.Conn.Read(p)
	if err == io.EOF {
		c.eof.Store(true)
	}
	if n > 0 && c.watching {
		n = c.watch(p[:n])
		if n == 0 { // the CR the last Read ended in is a bare one
			return 0, c.err
		}
	}
	if n > 0 {
		c.prev = p[n-1]
	}
	return n, err
}

// watch follows b, the next bytes of a head, and returns how many of them
// to pass on: all, or those up to a bare LF or CR (none when b follows a
// bare CR).
func (c *headConn) watch(b []byte) int {
	if c.lineLen > 0 && c.prev == '\r' && b[0] != '\n' {
		c.err = errBareLF
		return 0
	}
	for i := 0; i < len(b); {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			if k := bytes.IndexByte(b[i:len(b)-1], '\r'); k >= 0 { // the last byte may be a CRLF's CR
				return c.bareCR(b, i, i+k)
			}
			c.keep(b[i:])
			c.lineLen += len(b) - i
			return len(b)
		}
		if j > 1 {
			if k := bytes.IndexByte(b[i:i+j-1], '\r'); k >= 0 {
				return c.bareCR(b, i, i+k)
			}
		}
		c.keep(b[i : i+j])
		end := i + j
		before := c.prev // the byte before the LF: CR, or it ends in a bare LF
		if end > 0 {
			before = b[end-1]
		}
		if before != '\r' {
			c.err = errBareLF
			b[end] = ' ' // what fasthttp has then holds more than line ends, which it would take for a closed connection
			return end + 1
		}
		lineLen := c.lineLen + j
		c.lineLen = 0
		i = end + 1
		switch {
		case lineLen > 1:
			c.lines++
		case c.lines == 0: // an empty line before the request line, which fasthttp skips
			c.firstLen = 0
		default: // the blank line: the body, or the next head, follows
			c.watching = false
			return len(b)
		}
	}
	return len(b)
}

// bareCR refuses the head at b[k], a bare CR in the line that goes on at
// b[i]: the bytes up to it are passed on, the CR made a space, and every
// Read after it fails.
func (c *headConn) bareCR(b []byte, i, k int) int {
	c.keep(b[i:k])
	c.err = errBareLF
	b[k] = ' '
	return k + 1
}

// keep adds b, the next bytes of a line, to the start of the request line
// while it is the line being read.
func (c *headConn) keep(b []byte) {
	if c.lines == 0 {
		c.firstLen += copy(c.first[c.firstLen:], b)
	}
}

// Write writes a response, after which the next head starts. A 100
// Continue asks for the body, which follows: fasthttp flushes it at once,
// in one Write, or in two when the responses a pipelining client has not
// read yet fill its buffer first (the second Write is then the rest of the
// 100 Continue).
func (c *headConn) Write(p []byte) (int, error) {
	if bytes.HasSuffix(p, continued) || len(p) < len(continued) && bytes.HasSuffix(continued, p) {
		c.watching = false
	} else {
		if c.err != nil || c.watching && (c.lines > 0 || c.lineLen > 0) { // the head was refused, or not read whole
			c.cut.Store(true)
		}
		c.watching, c.lines, c.lineLen, c.firstLen = true, 0, 0, 0
	}
	return c.Conn.Write(p)
}

// The bounds of a staged close: a client that sends more, or does not
// close, is reset.
const (
	drainBytes = 1 << 20
	drainWait  = time.Second
)

// Close closes the connection, in stages when the client may still be
// sending (see headConn). Slow path: the check costs a system call on a
// connection the edge ends, none on one the client ended.
func (c *headConn) Close() error {
	if !c.eof.Load() && (c.cut.Load() || rawsock.Unread(c.Conn) > 0) {
		return rawsock.CloseDraining(c.Conn, drainBytes, drainWait)
	}
	return c.Conn.Close()
}

var continued = []byte("HTTP/1.1 100 Continue\r\n\r\n")

// version is the version of the route of the head read last on the
// connection, by the path of its request line as the router reads it; v2
// when its start holds no method and target (nothing to tell). Slow path:
// a refusal.
func (c *headConn) version() api.Version {
	_, target, ok := bytes.Cut(c.first[:c.firstLen], []byte(" "))
	if !ok {
		return api.V2
	}
	if i := bytes.IndexAny(target, " \r"); i >= 0 { // a bare CR may end what was kept
		target = target[:i]
	}
	var u fasthttp.URI
	if u.Parse(nil, target) != nil {
		return api.V2
	}
	return versionOfPath(u.Path())
}

// versionOfConn is the version of the route of the head read last on c, v2
// when c is not watched (Listen).
func versionOfConn(c net.Conn) api.Version {
	if hc, ok := c.(*headConn); ok {
		return hc.version()
	}
	return api.V2
}
