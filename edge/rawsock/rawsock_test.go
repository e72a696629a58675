package rawsock_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slipverify/slipverify/edge/rawsock"
)

// tcpConn is what the edge and fasthttp use of a TCP connection besides
// net.Conn: the wrapped connection keeps it.
type tcpConn interface {
	net.Conn
	CloseWrite() error
	SetReadBuffer(int) error
	SetWriteBuffer(int) error
	SetLinger(int) error
}

// pair returns a connection accepted through Listen and the client's end,
// both closed at the end of the test.
func pair(t testing.TB) (server tcpConn, client *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := rawsock.Listen(ln).Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); c.Close() })
	tc, ok := s.(tcpConn)
	if !ok {
		t.Fatalf("accepted %T: not a TCP connection", s)
	}
	return tc, c.(*net.TCPConn)
}

// opError checks that err is what a *net.TCPConn returns for op: a
// *net.OpError (fasthttp looks for that type) named after op.
func opError(t *testing.T, err error, op string) *net.OpError {
	t.Helper()
	oe, ok := err.(*net.OpError)
	if !ok {
		t.Fatalf("%s: error %T (%v), want *net.OpError", op, err, err)
	}
	if oe.Op != op {
		t.Errorf("error names the operation %q, want %q: %v", oe.Op, op, err)
	}
	return oe
}

// TestBothWays: 32 MiB each way at once, more than the socket buffers hold,
// so that reads find nothing and writes find no room again and again;
// every byte arrives, in order, and each side then reads the end.
func TestBothWays(t *testing.T) {
	s, c := pair(t)
	up, down := make([]byte, 32<<20), make([]byte, 32<<20)
	rand.Read(up)
	rand.Read(down)
	type result struct {
		got []byte
		err error
	}
	send := func(w tcpConn, b []byte) {
		if _, err := w.Write(b); err != nil {
			t.Error(err)
		}
		w.CloseWrite()
	}
	receive := func(r net.Conn, into chan<- result) {
		b, err := io.ReadAll(r)
		into <- result{b, err}
	}
	fromClient, fromServer := make(chan result), make(chan result)
	go send(c, up)
	go send(s, down)
	go receive(s, fromClient)
	go receive(c, fromServer)
	for _, x := range []struct {
		name string
		r    result
		want []byte
	}{{"the server", <-fromClient, up}, {"the client", <-fromServer, down}} {
		if x.r.err != nil {
			t.Fatalf("%s: %v", x.name, x.r.err)
		}
		if !bytes.Equal(x.r.got, x.want) {
			t.Errorf("%s received %d bytes, not the %d sent", x.name, len(x.r.got), len(x.want))
		}
	}
}

// TestEOF: the peer's orderly close reads as io.EOF, as from a
// *net.TCPConn, after the bytes sent before it; an empty read before that
// reads nothing.
func TestEOF(t *testing.T) {
	s, c := pair(t)
	if n, err := s.Read(nil); n != 0 || err != nil {
		t.Errorf("an empty read: %d bytes, %v; want 0, nil", n, err)
	}
	c.Write([]byte("last"))
	c.Close()
	b := make([]byte, 16)
	n, err := io.ReadFull(s, b[:4])
	if err != nil || string(b[:n]) != "last" {
		t.Fatalf("read %q, %v; want \"last\"", b[:n], err)
	}
	if n, err := s.Read(b); n != 0 || err != io.EOF {
		t.Errorf("after the close: %d bytes, %v; want 0, io.EOF", n, err)
	}
}

// TestReadDeadline: a read waiting for data ends at its deadline with a
// timeout (fasthttp's read and idle timeouts), and the connection stays
// usable once the deadline is moved.
func TestReadDeadline(t *testing.T) {
	s, c := pair(t)
	s.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	n, err := s.Read(make([]byte, 16))
	oe := opError(t, err, "read")
	if n != 0 || !oe.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes, %v; want a timeout", n, err)
	}
	s.SetReadDeadline(time.Time{})
	c.Write([]byte("x"))
	if n, err := s.Read(make([]byte, 16)); n != 1 || err != nil {
		t.Errorf("after the deadline was lifted: %d bytes, %v", n, err)
	}
}

// TestWriteDeadline: a write to a peer that reads nothing ends at its
// deadline with a timeout and the count of what was written.
func TestWriteDeadline(t *testing.T) {
	s, c := pair(t)
	s.SetWriteBuffer(4096)
	c.SetReadBuffer(4096)
	big := make([]byte, 8<<20)
	s.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
	n, err := s.Write(big)
	oe := opError(t, err, "write")
	if !oe.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write: %v; want a timeout", err)
	}
	if n <= 0 || n >= len(big) {
		t.Errorf("write reported %d bytes written; want some, not all %d", n, len(big))
	}
}

// TestPeerReset: a connection reset by the peer is an error of the read
// or write that meets it, carrying the system's error, not an end of file.
func TestPeerReset(t *testing.T) {
	s, c := pair(t)
	c.SetLinger(0) // close with a reset
	c.Close()
	_, err := s.Read(make([]byte, 16))
	opError(t, err, "read")
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("read after a reset: %v; want ECONNRESET", err)
	}
	_, err = s.Write([]byte("anyone?"))
	opError(t, err, "write")
	if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("write after a reset: %v; want EPIPE or ECONNRESET", err)
	}
}

// TestClosed: reading or writing a closed connection says so with
// net.ErrClosed, which fasthttp's server takes for the end of a connection;
// an empty read too, as *net.TCPConn's does.
func TestClosed(t *testing.T) {
	s, _ := pair(t)
	s.Close()
	for _, p := range [][]byte{make([]byte, 16), nil} {
		_, err := s.Read(p)
		opError(t, err, "read")
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("read of %d bytes: %v; want net.ErrClosed", len(p), err)
		}
	}
	_, err := s.Write([]byte("x"))
	opError(t, err, "write")
	if !errors.Is(err, net.ErrClosed) {
		t.Errorf("write: %v; want net.ErrClosed", err)
	}
}

// TestConcurrentReads: four goroutines read one connection at once, two
// with a small buffer and two with a large one, as a net.Conn allows, while
// the peer writes in small pieces; every byte is read once, by one of
// them, and each read fits its buffer. Ten connections in turn, for a
// collision to be likely.
func TestConcurrentReads(t *testing.T) {
	for range 10 {
		concurrentReads(t)
	}
}

func concurrentReads(t *testing.T) {
	s, c := pair(t)
	const size, piece = 4 << 20, 1000
	go func() {
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(i % 251)
		}
		for ; len(b) > 0; b = b[min(piece, len(b)):] {
			c.Write(b[:min(piece, len(b))])
		}
		c.CloseWrite()
	}()
	type tally struct{ n, sum int }
	read := func(buf []byte, into chan<- tally) {
		var got tally
		for {
			n, err := s.Read(buf)
			if n > len(buf) {
				t.Errorf("read %d bytes into a buffer of %d", n, len(buf))
				break
			}
			got.n += n
			for _, v := range buf[:n] {
				got.sum += int(v)
			}
			if err != nil {
				if err != io.EOF {
					t.Error(err)
				}
				break
			}
		}
		into <- got
	}
	tallies := make(chan tally)
	for _, n := range []int{7, 64 << 10, 13, 32 << 10} {
		go read(make([]byte, n), tallies)
	}
	var all tally
	for range 4 {
		got := <-tallies
		all.n += got.n
		all.sum += got.sum
	}
	want := 0
	for i := range size {
		want += i % 251
	}
	if all.n != size || all.sum != want {
		t.Errorf("read %d bytes summing to %d; want %d bytes summing to %d", all.n, all.sum, size, want)
	}
}

// TestConcurrentWrites: four goroutines write one connection at once; each
// Write arrives whole, never interleaved with another's, as with a
// *net.TCPConn.
func TestConcurrentWrites(t *testing.T) {
	s, c := pair(t)
	const block, blocks = 4096, 1000
	done := make(chan struct{})
	for _, id := range []byte("abcd") {
		go func() {
			defer func() { done <- struct{}{} }()
			b := bytes.Repeat([]byte{id}, block)
			for range blocks {
				if _, err := s.Write(b); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	go func() {
		for range 4 {
			<-done
		}
		s.CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4*block*blocks {
		t.Fatalf("received %d bytes, want %d", len(got), 4*block*blocks)
	}
	for i := 0; i < len(got); i += block {
		if b := got[i : i+block]; bytes.Count(b, b[:1]) != block {
			t.Fatalf("the block at %d mixes two writes", i)
		}
	}
}

// TestNoAllocs: a read and a write allocate nothing (the edge's Bearer path
// is allocation-free, sockets included).
func TestNoAllocs(t *testing.T) {
	s, c := pair(t)
	in, out := make([]byte, 64), make([]byte, 64)
	if n := testing.AllocsPerRun(200, func() {
		c.Write(out)
		io.ReadFull(s, in)
		s.Write(in)
		io.ReadFull(c, out)
	}); n != 0 {
		t.Errorf("a read and a write each way allocate %.1f times, want 0", n)
	}
	// A client connection's request goes out with its read: the server
	// answers from its own goroutine.
	client, srv := clientPair(t)
	go answer(srv, 64)
	if n := testing.AllocsPerRun(200, func() {
		client.Write(out)
		io.ReadFull(client, in)
	}); n != 0 {
		t.Errorf("a client connection's request and answer allocate %.1f times, want 0", n)
	}
}

// TestOtherConns: what is not a TCP connection is returned as it is.
func TestOtherConns(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := rawsock.Wrap(a); got != a {
		t.Errorf("Wrap(pipe) = %T, want the pipe itself", got)
	}
}

// BenchmarkPingPong: 64 bytes to an echo peer and back, through Go's own
// calls, raw ones, and raw ones that wait for the echo before reading
// (WrapClient). Run with -cpu 1 to see the single-core case.
func BenchmarkPingPong(b *testing.B) {
	for _, v := range []struct {
		name string
		wrap func(net.Conn) net.Conn
	}{{"go", func(c net.Conn) net.Conn { return c }}, {"raw", rawsock.Wrap}, {"client", rawsock.WrapClient}} {
		b.Run(v.name, func(b *testing.B) {
			s, c := pair(b)
			go io.Copy(s, s)
			conn := v.wrap(c)
			buf := make([]byte, 64)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := conn.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(conn, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// clientPair returns a client connection wrapped by WrapClient that has
// made one exchange, so that its next request (unless the test takes
// longer than the 100 ms of idleness after which a request probes) is held
// for the read of its answer, and the server's end; both are closed at the
// end of the test.
func clientPair(t testing.TB) (client net.Conn, server tcpConn) {
	t.Helper()
	s, c := pair(t)
	client = rawsock.WrapClient(c)
	go func() { // the request goes out with the client's read
		io.ReadFull(s, make([]byte, 2))
		s.Write([]byte("ok"))
	}()
	client.Write([]byte("hi"))
	got := make([]byte, 2)
	if _, err := io.ReadFull(client, got); err != nil || string(got) != "ok" {
		t.Fatalf("first exchange: %q, %v", got, err)
	}
	return client, s
}

// answer serves the client end of clientPair: it reads requests of size
// bytes and answers each with the request reversed, until the connection
// ends.
func answer(s net.Conn, size int) {
	req, res := make([]byte, size), make([]byte, size)
	for {
		if _, err := io.ReadFull(s, req); err != nil {
			return
		}
		for i, b := range req {
			res[size-1-i] = b
		}
		if _, err := s.Write(res); err != nil {
			return
		}
	}
}

// TestClientExchanges: requests of every size around the 4 KiB a client
// connection holds until its read, one after another on one connection,
// each answered before the next, and a request in two writes: every
// answer is the answer to its request.
func TestClientExchanges(t *testing.T) {
	for _, size := range []int{1, 300, 4096, 4097, 1 << 20} {
		c, s := clientPair(t)
		go answer(s, size)
		req, res := make([]byte, size), make([]byte, size)
		for i := range 50 {
			rand.Read(req)
			if i%2 == 1 && size > 1 { // in two writes: the first held, the second sends both
				c.Write(req[:size/2])
				c.Write(req[size/2:])
			} else if n, err := c.Write(req); n != size || err != nil {
				t.Fatalf("size %d: write: %d, %v", size, n, err)
			}
			if _, err := io.ReadFull(c, res); err != nil {
				t.Fatalf("size %d, exchange %d: %v", size, i, err)
			}
			for j := range size {
				if res[j] != req[size-1-j] {
					t.Fatalf("size %d, exchange %d: the answer is not the request's", size, i)
				}
			}
		}
	}
}

// peerEnded returns once the poller has reported that the peer ended its
// side of c (which end does, and which the poller then forgets at the next
// read's start), leaving the end unread.
func peerEnded(t *testing.T, c *net.TCPConn, end func()) {
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan bool)
	go func() {
		waited := false
		raw.Read(func(fd uintptr) bool {
			if !waited { // wait first: the end comes after this read started
				waited = true
				return false
			}
			_, _, err := syscall.Recvfrom(int(fd), make([]byte, 1), syscall.MSG_PEEK)
			return err != syscall.EAGAIN
		})
		close(done)
	}()
	waitingRead(t, "rawsock_test.peerEnded.func1")
	end()
	<-done
}

// exchangeFails: a request on client fails at once, well before its read
// deadline, with an error fasthttp's HostClient retries on another
// connection (io.EOF, ECONNRESET or EPIPE).
func exchangeFails(t *testing.T, client net.Conn) {
	t.Helper()
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	_, err := client.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	if err == nil {
		_, err = client.Read(make([]byte, 64))
	}
	if took := time.Since(start); err == nil || os.IsTimeout(err) || took > 5*time.Second {
		t.Fatalf("request: %v after %v; want an error at once", err, took)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Errorf("request: %v; want io.EOF, ECONNRESET or EPIPE", err)
	}
}

// TestClientServerClosed: the server closed a connection in use (its FIN
// came, and the poller saw it, before the client's next request): the
// request fails at once (the closed socket answers it with a reset), not
// at the read deadline.
func TestClientServerClosed(t *testing.T) {
	s, c := pair(t)
	client := rawsock.WrapClient(c)
	go answer(s, 2)
	client.Write([]byte("hi"))
	io.ReadFull(client, make([]byte, 2))
	peerEnded(t, c, func() { s.Close() })
	exchangeFails(t, client)
}

// TestClientServerHalfClosed: the server only shut its sending side of an
// idle connection and reads on (no reset will come): a request on the
// connection's first use, or after 100 ms without one, reads before it
// waits, and fails at once.
func TestClientServerHalfClosed(t *testing.T) {
	s, c := pair(t)
	client := rawsock.WrapClient(c)
	go io.Copy(io.Discard, s)
	peerEnded(t, c, func() { s.CloseWrite() })
	exchangeFails(t, client)
}

// TestClientReadDeadline: a server that reads the request and never
// answers: the read ends at its deadline with a timeout, and the request
// did reach the server.
func TestClientReadDeadline(t *testing.T) {
	c, s := clientPair(t)
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	c.Write([]byte("ping"))
	_, err := c.Read(make([]byte, 16))
	if oe := opError(t, err, "read"); !oe.Timeout() {
		t.Fatalf("read: %v; want a timeout", err)
	}
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 4)
	if _, err := io.ReadFull(s, got); err != nil || string(got) != "ping" {
		t.Errorf("the server read %q, %v; want the request", got, err)
	}
}

// TestClientDeadlinePassed: a read whose deadline passed before it began
// fails; the request written before it is not lost: it goes out with the
// next read, once the deadline is lifted.
func TestClientDeadlinePassed(t *testing.T) {
	c, s := clientPair(t)
	go answer(s, 4)
	c.Write([]byte("ping"))
	c.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := c.Read(make([]byte, 4)); !os.IsTimeout(err) {
		t.Fatalf("read past its deadline: %v; want a timeout", err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "gnip" {
		t.Errorf("then: %q, %v; want the answer to the request", got, err)
	}
}

// TestClientPeerReset: a request on a connection the server reset fails
// with the system's error, named a write: from the read that sends a held
// request, or from the write itself.
func TestClientPeerReset(t *testing.T) {
	c, s := clientPair(t)
	s.SetLinger(0)
	s.Close()
	_, err := c.Write([]byte("anyone?"))
	if err == nil {
		_, err = c.Read(make([]byte, 16))
	}
	opError(t, err, "write")
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Errorf("exchange after a reset: %v; want ECONNRESET or EPIPE", err)
	}
}

// TestClientWriteOrder: what is written after a request head the
// connection holds, by ReadFrom (io.Copy from a reader that is no
// io.WriterTo) or after CloseWrite, reaches the server after the head, as
// written.
func TestClientWriteOrder(t *testing.T) {
	c, s := clientPair(t)
	c.Write([]byte("HEAD "))
	if _, err := io.Copy(c, io.LimitReader(strings.NewReader("BODY"), 4)); err != nil {
		t.Fatal(err)
	}
	c.Write([]byte(" END"))
	c.(interface{ CloseWrite() error }).CloseWrite()
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := io.ReadAll(s); string(got) != "HEAD BODY END" || err != nil {
		t.Errorf("the server read %q, %v; want \"HEAD BODY END\"", got, err)
	}
}

// TestDeadlineSetDuringRead: a deadline set while a read waits, by another
// goroutine, ends that read, as with a *net.TCPConn; and one set in the
// past before a read ends it before it reads anything, data waiting or not.
func TestDeadlineSetDuringRead(t *testing.T) {
	s, c := pair(t)
	done := make(chan error)
	go func() {
		_, err := s.Read(make([]byte, 16))
		done <- err
	}()
	waitingRead(t, "rawsock_test.TestDeadlineSetDuringRead.func1")
	s.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	select {
	case err := <-done:
		if !os.IsTimeout(err) {
			t.Fatalf("the waiting read: %v; want a timeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting read did not end at the deadline set while it waited")
	}
	c.Write([]byte("x"))
	s.SetReadDeadline(time.Now().Add(time.Minute))
	s.SetReadDeadline(time.Now().Add(-time.Second))
	if n, err := s.Read(make([]byte, 16)); !os.IsTimeout(err) {
		t.Errorf("a read past its deadline: %d bytes, %v; want a timeout", n, err)
	}
}

// TestDeadlineNeverEarly: a read deadline moved forward on every request,
// as fasthttp does, may take effect a little late but never early: a read
// from a silent peer lasts at least until the deadline last asked.
func TestDeadlineNeverEarly(t *testing.T) {
	s, _ := pair(t)
	for range 5 {
		start := time.Now()
		s.SetReadDeadline(start.Add(30 * time.Millisecond))
		_, err := s.Read(make([]byte, 16))
		if took := time.Since(start); !os.IsTimeout(err) || took < 30*time.Millisecond || took > 5*time.Second {
			t.Fatalf("read with a deadline 30 ms ahead: %v after %v", err, took)
		}
	}
}

// waitingRead returns once the goroutine running fn (its name in a stack
// trace) waits in the poller for a socket to be readable.
func waitingRead(t *testing.T, fn string) {
	buf := make([]byte, 1<<20)
	for range 100000 {
		for _, g := range bytes.Split(buf[:runtime.Stack(buf, true)], []byte("\n\n")) {
			if bytes.Contains(g, []byte("internal/poll.(*pollDesc).waitRead")) && bytes.Contains(g, []byte(fn)) {
				return
			}
		}
		runtime.Gosched()
	}
	t.Fatal(fn, ": no read waits")
}

// TestClientCopyAnswer: the answer to a held request read by WriteTo
// (io.Copy from the connection): the request goes out first.
func TestClientCopyAnswer(t *testing.T) {
	c, s := clientPair(t)
	go func() {
		io.ReadFull(s, make([]byte, 4))
		s.Write([]byte("pong"))
		s.Close()
	}()
	c.Write([]byte("ping"))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got bytes.Buffer
	if _, err := io.Copy(&got, c); err != nil || got.String() != "pong" {
		t.Errorf("copied %q, %v; want the answer", got.String(), err)
	}
}

// TestDeadlinePastMovedForward: a deadline in the past moved forward but
// still in the past fails the read at once, data waiting or not.
func TestDeadlinePastMovedForward(t *testing.T) {
	s, c := pair(t)
	s.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := s.Read(make([]byte, 16)); !os.IsTimeout(err) {
		t.Fatalf("a read past its deadline: %v; want a timeout", err)
	}
	c.Write([]byte("x"))
	s.SetReadDeadline(time.Now().Add(-10 * time.Millisecond))
	if n, err := s.Read(make([]byte, 16)); !os.IsTimeout(err) {
		t.Errorf("a read past a deadline moved forward: %d bytes, %v; want a timeout", n, err)
	}
}

// TestDeadlineBeforeWrap: a deadline set on a connection before it is
// wrapped does not stay in force behind the wrapper's back.
func TestDeadlineBeforeWrap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetReadDeadline(time.Now().Add(-time.Second))
	w := rawsock.Wrap(s)
	w.SetReadDeadline(time.Time{})
	c.Write([]byte("x"))
	if n, err := w.Read(make([]byte, 16)); n != 1 || err != nil {
		t.Errorf("read: %d bytes, %v; want the byte waiting", n, err)
	}
}
