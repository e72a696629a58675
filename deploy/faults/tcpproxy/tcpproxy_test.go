package tcpproxy

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

// echo starts a server that answers each line with the line, until the
// test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	testnet.Serve(t, ln, func(c net.Conn) { io.Copy(c, c) })
	return ln.Addr().String()
}

func start(t *testing.T) *Proxy {
	t.Helper()
	p, err := New(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// client is a connection through the proxy that sends and reads lines.
type client struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *Proxy) *client {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t, c, bufio.NewReader(c)}
}

// roundTrip sends line and returns what came back and how long it took,
// failing after within.
func (c *client) roundTrip(line string, within time.Duration) (string, time.Duration, error) {
	c.t.Helper()
	start := time.Now()
	c.c.SetDeadline(start.Add(within))
	if _, err := io.WriteString(c.c, line+"\n"); err != nil {
		return "", 0, err
	}
	got, err := c.r.ReadString('\n')
	return strings.TrimSuffix(got, "\n"), time.Since(start), err
}

func TestForwards(t *testing.T) {
	c := dial(t, start(t))
	for _, line := range []string{"one", "two", strings.Repeat("x", 100_000)} {
		got, _, err := c.roundTrip(line, 5*time.Second)
		if err != nil || got != line {
			t.Fatalf("sent %.20q, got %.20q, %v", line, got, err)
		}
	}
}

func TestDelay(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	const d = 100 * time.Millisecond
	p.SetDelay(d)
	got, took, err := c.roundTrip("slow", 5*time.Second)
	if err != nil || got != "slow" {
		t.Fatalf("got %q, %v", got, err)
	}
	if took < 2*d { // the delay each way
		t.Errorf("a round trip took %v, want at least %v", took, 2*d)
	}
	p.SetDelay(0)
	if _, took, _ = c.roundTrip("fast", 5*time.Second); took >= d {
		t.Errorf("without delay a round trip took %v", took)
	}
}

// TestPartition: nothing passes while partitioned, on an open connection or
// a new one; once healed, what was held arrives.
func TestPartition(t *testing.T) {
	p := start(t)
	open := dial(t, p)
	if _, _, err := open.roundTrip("before", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Partition()
	fresh := dial(t, p)
	for _, c := range []*client{open, fresh} {
		if got, _, err := c.roundTrip("held", 200*time.Millisecond); !isTimeout(err) {
			t.Fatalf("partitioned: got %q, %v; want a timeout", got, err)
		}
	}
	p.Heal()
	for _, c := range []*client{open, fresh} {
		c.c.SetDeadline(time.Now().Add(5 * time.Second))
		if got, err := c.r.ReadString('\n'); got != "held\n" || err != nil {
			t.Fatalf("healed: got %q, %v; want what was held", got, err)
		}
	}
}

// TestReset: open connections break, new ones work.
func TestReset(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	if _, _, err := c.roundTrip("before", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.SetDelay(time.Second)
	c.c.Write([]byte("in flight\n"))
	p.Reset()
	c.c.SetDeadline(time.Now().Add(5 * time.Second))
	if got, err := c.r.ReadString('\n'); err == nil || isTimeout(err) {
		t.Fatalf("after a reset: got %q, %v; want the connection broken", got, err)
	}
	p.SetDelay(0)
	if got, _, err := dial(t, p).roundTrip("after", 5*time.Second); err != nil || got != "after" {
		t.Fatalf("a new connection: got %q, %v", got, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.Open() > 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	if n := p.Open(); n != 1 {
		t.Errorf("%d connections open, want 1", n)
	}
}

// TestTargetDown: a connection to a target that refuses is closed.
func TestTargetDown(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	p, err := New(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		return // reset before the dial returned
	}
	defer c.Close()
	cl := &client{t, c, bufio.NewReader(c)}
	if _, _, err := cl.roundTrip("anyone?", 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("got %v, want the connection closed", err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
