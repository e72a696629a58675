package yield_test

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/testnet"
	"github.com/slipverify/slipverify/edge/yield"
)

// pair returns both ends of a loopback TCP connection.
func pair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// watched records, at each Read, whether the goroutine the test started
// has run yet. Its writes go nowhere, so no system call between starting
// that goroutine and the read can give the goroutine a chance to run.
type watched struct {
	net.Conn
	ran    *atomic.Bool
	sawRun []bool
}

func (w *watched) Write(b []byte) (int, error) { return len(b), nil }

func (w *watched) Read(b []byte) (int, error) {
	w.sawRun = append(w.sawRun, w.ran.Load())
	return w.Conn.Read(b)
}

// serve accepts n connections on a yielding listener of g, and has each
// read one request: with the answers not written yet, n requests are being
// served.
func serve(t *testing.T, g *yield.Gate, n int) []net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	yl := yield.Listener(ln, g)
	t.Cleanup(func() { yl.Close() })
	var served []net.Conn
	for range n {
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
		c, err := yl.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := client.Write([]byte("q")); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		served = append(served, c)
	}
	return served
}

// yielded reports whether a read after a write on a connection of g lets a
// goroutine made runnable before the write run first. On one P nothing
// else can run it in between.
func yielded(t *testing.T, g *yield.Gate) bool {
	t.Helper()
	client, server := pair(t)
	var ran atomic.Bool
	w := &watched{Conn: client, ran: &ran}
	c := yield.Conn(w, g)
	if _, err := server.Write([]byte("ab")); err != nil {
		t.Fatal(err)
	}
	go ran.Store(true) // runnable, but this goroutine holds the only P
	if _, err := c.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := io.ReadFull(c, buf); err != nil || buf[0] != 'a' {
		t.Fatalf("read %q, %v", buf, err)
	}
	// The next read, with no write in between, never yields.
	ran.Store(false)
	go ran.Store(true)
	if _, err := io.ReadFull(c, buf); err != nil || buf[0] != 'b' {
		t.Fatalf("read %q, %v", buf, err)
	}
	if len(w.sawRun) != 2 || w.sawRun[1] {
		t.Fatalf("other goroutine had run at each read: %v, want [any false]", w.sawRun)
	}
	return w.sawRun[0]
}

// A read after a write yields while more requests are being served than
// there are Ps, and not otherwise: a connection that answered or closed no
// longer counts.
func TestYieldsWhileBusy(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	g := yield.NewGate()
	if yielded(t, g) {
		t.Fatal("yielded with no request being served")
	}
	served := serve(t, g, 3)
	if !yielded(t, g) {
		t.Fatal("did not yield with 3 requests being served on 1 P")
	}
	if _, err := served[0].Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	if !yielded(t, g) {
		t.Fatal("did not yield with 2 requests being served on 1 P")
	}
	served[1].Close()
	if yielded(t, g) {
		t.Fatal("yielded with 1 request being served on 1 P")
	}
}

// watchedListener accepts watched connections.
type watchedListener struct {
	net.Listener
	ran  *atomic.Bool
	last **watched
}

func (l watchedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	*l.last = &watched{Conn: c, ran: l.ran}
	return *l.last, nil
}

// A client's connection never yields, busy or not: the client's next
// request cannot come before it has read the answer.
func TestClientConnectionsDoNotYield(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	g := yield.NewGate()
	serve(t, g, 3)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		ran atomic.Bool
		w   *watched
	)
	yl := yield.Listener(watchedListener{ln, &ran, &w}, g)
	defer yl.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := yl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := client.Write([]byte("12")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	go ran.Store(true)
	if _, err := c.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil || buf[0] != '2' {
		t.Fatalf("read %q, %v", buf, err)
	}
	if len(w.sawRun) != 2 || w.sawRun[1] {
		t.Fatalf("other goroutine had run at each read: %v, want [false false]", w.sawRun)
	}
	if !yielded(t, g) {
		t.Fatal("the gate closed: the test no longer checks a busy edge")
	}
}

// Deadlines, close and addresses are the connection's own.
func TestConnKeepsDeadlinesAndClose(t *testing.T) {
	client, server := pair(t)
	c := yield.Conn(client, yield.NewGate())
	if err := c.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want a deadline error", err)
	}
	if c.RemoteAddr().String() != server.LocalAddr().String() {
		t.Fatalf("remote address %s, want %s", c.RemoteAddr(), server.LocalAddr())
	}
	c.Close()
	if _, err := server.Read(make([]byte, 2)); err != nil {
		t.Fatalf("server read the byte: %v", err)
	}
	if _, err := server.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("server read after close: %v, want EOF", err)
	}
}

// BenchmarkRoundTrips runs 64 request–answer loops over loopback TCP
// against an echo server in the same process, plain and yielding (the
// server's connections counting the requests they serve, the clients'
// yielding while there are more than Ps). It measures the wrapper on both
// ends of every exchange; the gain shows against a server in another
// process (bench/proxycompare).
func BenchmarkRoundTrips(b *testing.B) {
	for _, yielding := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "yield"}[yielding]
		b.Run(name, func(b *testing.B) {
			const conns = 64
			g := yield.NewGate()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			addr := ln.Addr().String()
			if yielding {
				ln = yield.Listener(ln, g)
			}
			testnet.Serve(b, ln, func(c net.Conn) {
				buf := make([]byte, 64)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
			})
			cs := make([]net.Conn, conns)
			for i := range cs {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				if yielding {
					c = yield.Conn(c, g)
				}
				cs[i] = c
			}
			b.ReportAllocs()
			b.ResetTimer()
			var next atomic.Int64
			var wg sync.WaitGroup
			for _, c := range cs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					buf := make([]byte, 32)
					for next.Add(1) <= int64(b.N) {
						if _, err := c.Write(buf); err != nil {
							b.Error(err)
							return
						}
						if _, err := io.ReadFull(c, buf); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}
