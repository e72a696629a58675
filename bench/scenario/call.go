package scenario

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/bench/load"
)

// Client sends requests to the edge over pooled keep-alive connections.
// fasthttp's client keeps the generator's own cost per request in the low
// microseconds, so a run measures the stack, not the generator (loadgen
// selftest measures the generator's ceiling).
type Client struct {
	hc   *fasthttp.HostClient
	host string
}

// NewClient returns a client of the edge at addr (host:port) with at most
// maxConns connections.
func NewClient(addr string, maxConns int) *Client {
	return &Client{
		hc: &fasthttp.HostClient{
			Addr: addr, MaxConns: maxConns, MaxIdleConnDuration: time.Minute,
			ReadBufferSize: 16 << 10, WriteBufferSize: 16 << 10, MaxResponseBodySize: 16 << 20,
			NoDefaultUserAgentHeader: true, DisablePathNormalizing: true,
		},
		host: addr,
	}
}

// WithDial makes c connect through dial instead of TCP (an in-memory
// listener in benchmarks of the generator itself).
func (c *Client) WithDial(dial func(addr string) (net.Conn, error)) *Client {
	c.hc.Dial = dial
	return c
}

// Addr returns the address the client talks to.
func (c *Client) Addr() string { return c.host }

// CloseIdle closes the client's idle connections.
func (c *Client) CloseIdle() { c.hc.CloseIdleConnections() }

// newRequest returns a pooled request for method and path on the edge; the
// caller passes it to do, which releases it.
func (c *Client) newRequest(method, path string) *fasthttp.Request {
	req := fasthttp.AcquireRequest()
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	req.Header.SetHost(c.host)
	return req
}

// Answer is what do hands to a scenario that reads the body (async submit).
// Body is valid only until the callback returns.
type Answer struct {
	Status int
	Body   []byte
}

// isDuplicate is how a v2 answer says the slip was verified before (core
// writes it with encoding/json, without spaces).
var isDuplicate = []byte(`"isDuplicate":true`)

// do sends req, releases it and classifies the answer: 2xx is OK, counted
// as "200 duplicate" when the answer says isDuplicate (so a run counts the
// repeats the stack saw, and a scenario of new slips shows any it did not
// mean); anything else is counted by status and error code. read, when set, sees every
// answer before it is released and may turn it into a failure code.
func (c *Client) do(ctx context.Context, req *fasthttp.Request, read func(Answer) string) load.Outcome {
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	defer fasthttp.ReleaseRequest(req)
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Second)
	}
	if err := c.hc.DoDeadline(req, resp, deadline); err != nil {
		return load.Outcome{Code: netCode(err)}
	}
	status := resp.StatusCode()
	o := load.Outcome{RateLimit: int32(atoiBytes(resp.Header.Peek("X-RateLimit-Limit")))}
	body := resp.Body()
	switch {
	case status >= 200 && status < 300:
		o.OK, o.Code = true, statusCode(status)
		if bytes.Contains(body, isDuplicate) {
			o.Code = duplicateCode(status)
		}
	case status == 429 && len(resp.Header.Peek("Retry-After")) == 0:
		o.Code = "429 without Retry-After"
	default:
		o.Code = errorCode(status, body)
	}
	if read != nil {
		if bad := read(Answer{Status: status, Body: body}); bad != "" {
			o.OK, o.Code = false, bad
		}
	}
	return o
}

// netCode names a transport failure by its class.
func netCode(err error) string {
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.Is(err, fasthttp.ErrNoFreeConns):
		return "no free connection"
	case errors.Is(err, fasthttp.ErrConnectionClosed):
		return "connection closed"
	default:
		return "network error"
	}
}

func atoiBytes(b []byte) int {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// interned holds the code strings seen so far, so that counting a code
// allocates only the first time it is seen.
var interned = struct {
	sync.RWMutex
	m map[string]string
}{m: map[string]string{}}

func intern(b []byte) string {
	interned.RLock()
	s, ok := interned.m[string(b)]
	interned.RUnlock()
	if ok {
		return s
	}
	interned.Lock()
	defer interned.Unlock()
	if s, ok = interned.m[string(b)]; !ok {
		s = string(b)
		interned.m[s] = s
	}
	return s
}

func statusCode(status int) string {
	var buf [8]byte
	return intern(strconv.AppendInt(buf[:0], int64(status), 10))
}

// duplicateCode returns "STATUS duplicate".
func duplicateCode(status int) string {
	var buf [24]byte
	return intern(append(strconv.AppendInt(buf[:0], int64(status), 10), " duplicate"...))
}

// errorCode returns "STATUS CODE" from a v2 error body
// ({"success":false,"error":{"code":...}}) or a v1 one ({"message":...}),
// or "STATUS" when the body names no code.
func errorCode(status int, body []byte) string {
	var buf [80]byte
	b := strconv.AppendInt(buf[:0], int64(status), 10)
	code := jsonString(body, `"code":"`)
	if code == nil {
		code = jsonString(body, `"message":"`)
	}
	if code != nil && len(code) <= 64 {
		b = append(append(b, ' '), code...)
	}
	return intern(b)
}

// jsonString returns the string value after key in body, without decoding
// escapes (codes have none), or nil.
func jsonString(body []byte, key string) []byte {
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return nil
	}
	v := body[i+len(key):]
	j := bytes.IndexByte(v, '"')
	if j < 0 {
		return nil
	}
	return v[:j]
}
