package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// closingServer answers every request with 200, except that the first
// connection is closed, unanswered, when its third request arrives.
func closingServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var conns atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			first := conns.Add(1) == 1
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for n := 1; ; n++ {
					req, err := http.ReadRequest(r)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if first && n == 3 {
						return
					}
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestReconnectKeepsMeasurements breaks the only connection once: the
// worker dials again and goes on, and every request it completed, before
// and after the break, has its latencies in the result.
func TestReconnectKeepsMeasurements(t *testing.T) {
	addr := closingServer(t)
	g, err := newGen(addr, false, "0b6a4c2e-8f1d-4c3b-9a7e-5d2f1e0c9b8a", "")
	if err != nil {
		t.Fatal(err)
	}
	w, err := g.newWorker()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { w.conn.Close() }()
	res := g.run([]*worker{w}, 1000, 20*time.Millisecond)
	if res.done != 20 || res.errors != 1 || res.ok != 19 {
		t.Fatalf("done %d, errors %d, ok %d; want 20, 1 and 19", res.done, res.errors, res.ok)
	}
	if len(res.lat) != 20 || len(res.svc) != 20 || len(res.lag) != 20 {
		t.Errorf("%d, %d and %d latencies recorded for 20 requests: the reconnect dropped the connection's earlier measurements",
			len(res.lat), len(res.svc), len(res.lag))
	}
}
