// Package upstream holds what core's connectors to real bank APIs share
// (packages kbank, scb and rdcw): an HTTPS client with an optional client
// certificate, an OAuth token cache, the one-send rule for lookups, and
// per upstream: lookup slots shared fairly among the services asking
// (mayTake), a rate cap, a circuit that opens on the bank's own failures
// (breaker), and metrics.
//
// # Money rules
//
// A bank may bill every lookup it receives. Send therefore sends a lookup
// once, and repeats it only when the connection failed before the request
// could have left core: the dial or TLS handshake failed, so no byte of it
// was written. A timeout, a reset, a 5xx or a malformed reply after that is
// an error, never a second request. Redirects are refused, not followed.
// The one other repeat is Tokens.Send's: a lookup the bank refused because
// the token had expired (it did not run it) is sent once more with a new
// token, and a second refusal is an error.
package upstream

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/lib/tlsfiles"
	"github.com/slipverify/slipverify/core/slip"
)

// MaxReplySize is the largest reply body, in bytes, read from a bank; a
// longer one is an error. A slip is about 1 KiB.
const MaxReplySize = 1 << 20

// TLS holds the files of a connector's TLS settings; each may be empty.
type TLS = tlsfiles.Files

// NewClient returns a client for one bank host over tc that never follows
// a redirect (a redirect would send a lookup twice).
func NewClient(tc *tls.Config) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment,
			DialContext: (&net.Dialer{
				Timeout:   5 * time.Second,
				KeepAlive: 30 * time.Second,
			}).DialContext,
			TLSClientConfig:        tc,
			ForceAttemptHTTP2:      false, // HTTP/1.1 only: its retry rules are the ones Send relies on
			MaxIdleConns:           256,
			MaxIdleConnsPerHost:    128,
			IdleConnTimeout:        90 * time.Second,
			TLSHandshakeTimeout:    5 * time.Second,
			MaxResponseHeaderBytes: 64 << 10,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// NoRedirects returns a copy of c that answers a redirect with the 3xx
// itself.
func NoRedirects(c *http.Client) *http.Client {
	cp := *c
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}

// Reply is a bank's answer: its HTTP status and body.
type Reply struct {
	Status int
	Body   []byte
}

// ErrMaybeSent is wrapped by Send's errors after the request may have
// reached the bank: it must not be sent again.
var ErrMaybeSent = errors.New("the request may have reached the bank")

// Send sends the request newReq builds, reads the reply (up to
// MaxReplySize) and returns it. It sends again only when the first attempt
// failed before a connection was made, which newReq makes possible by
// building a fresh request each time. Errors after a connection was made
// wrap ErrMaybeSent.
func Send(client *http.Client, newReq func() (*http.Request, error)) (Reply, error) {
	for attempt := 0; ; attempt++ {
		req, err := newReq()
		if err != nil {
			return Reply{}, err
		}
		connected := false
		trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected = true }}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		resp, err := client.Do(req)
		if err != nil {
			if !connected && attempt == 0 && req.Context().Err() == nil {
				continue // nothing left core: the bank cannot have seen it
			}
			if connected {
				return Reply{}, fmt.Errorf("%w: %w", ErrMaybeSent, err)
			}
			return Reply{}, err
		}
		body, err := readBody(resp)
		if err == nil {
			// A reply cut short by the deadline can end cleanly on the
			// wire; it is the deadline's, not the bank's answer.
			err = req.Context().Err()
		}
		if err != nil {
			return Reply{Status: resp.StatusCode}, fmt.Errorf("%w: read reply: %w", ErrMaybeSent, err)
		}
		return Reply{Status: resp.StatusCode, Body: body}, nil
	}
}

func readBody(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(resp.Body, MaxReplySize+1))
	if err != nil {
		return nil, err
	}
	if n > MaxReplySize {
		return nil, fmt.Errorf("reply exceeds %d bytes", MaxReplySize)
	}
	return buf.Bytes(), nil
}

// RequestID returns a fresh random id for a request's trace header
// (KBank's rqUID, SCB's requestUId): a UUID v4.
func RequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hex[c>>4], hex[c&0xf])
	}
	return string(out)
}

// CheckLookup validates a lookup before it is sent (and billed): the
// bank code and transRef a slip's QR payload may carry (slip.Bank's rule).
func CheckLookup(bankCode, transRef string) error {
	return slip.Bank{BankCode: bankCode, TransRef: transRef}.Validate()
}

// Unreplayable makes req, a GET without a body, one net/http never sends
// again on its own: it resends a replayable request when a reused
// connection breaks after the request was written, which for a billed
// lookup would be a second bill. A body of no bytes that is not
// http.NoBody makes it unreplayable; "identity" says it has no length to
// find, so the transport sends it as any GET (no body, no Content-Length)
// without first probing the body, a probe that gives up after 200 ms on a
// busy machine and sends the GET chunked.
func Unreplayable(req *http.Request) {
	req.Body = io.NopCloser(empty{})
	req.TransferEncoding = []string{"identity"}
}

type empty struct{}

func (empty) Read([]byte) (int, error) { return 0, io.EOF }

// CheckURL returns the base URL u names, without a trailing slash: https
// (or http, for a local fake), a host, and nothing after the path.
func CheckURL(u string) (string, error) {
	if u == "" {
		return "", errors.New("required")
	}
	p, err := url.Parse(u)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", err
	}
	switch {
	case p.Scheme != "https" && p.Scheme != "http":
		return "", fmt.Errorf("%q: scheme must be https", p.Redacted())
	case p.Host == "":
		return "", fmt.Errorf("%q: no host", p.Redacted())
	case p.User != nil || p.RawQuery != "" || p.Fragment != "":
		return "", fmt.Errorf("%q: takes no user, query or fragment", p.Redacted())
	}
	return strings.TrimSuffix(p.String(), "/"), nil
}

// DefaultTimeout bounds a call to a bank when its setting is zero.
const DefaultTimeout = 10 * time.Second

// Transport is how a connector reaches its upstream; every connector's
// Config holds one.
type Transport struct {
	TLS     TLS
	Timeout time.Duration // one call, token fetch included; zero: DefaultTimeout
	Limits  Limits
	Client  *http.Client     // nil: one made from TLS (tests pass one trusting their own CA); redirects are never followed
	Now     func() time.Time // nil: time.Now
	Metrics *metrics.Set     // nil: not exported
}

// Settings are a connector's Config as Setup reads it, and the names its
// upstream goes by.
type Settings struct {
	Name        string      // the upstream in metrics and errors: kbank
	Prefix      string      // of its settings in messages: SLIP_KBANK
	URL         string      // its scheme and host (and path prefix)
	Credentials [][2]string // each a setting's name after Prefix and its value, all required
	Transport
	// TokenPath is where under URL the upstream hands out access tokens,
	// and Fetch asks it for one (Common.Tokens caches them); nil: the
	// upstream takes none.
	TokenPath string
	Fetch     func(context.Context) (Token, error)
}

// Common is what every connector is built on, made by Setup.
type Common struct {
	Base     string       // the upstream's scheme and host (and path prefix)
	TokenURL string       // Base and Settings.TokenPath
	Client   *http.Client // never follows a redirect
	Now      func() time.Time
	Timeout  time.Duration // one call
	Guard    *Guard
	Tokens   *Tokens // over Settings.Fetch; nil without
}

// Setup checks s and returns what the connector is built on, reporting
// every problem at once.
func Setup(s Settings) (Common, error) {
	var errs []error
	base, err := CheckURL(s.URL)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s_URL: %w", s.Prefix, err))
	}
	for _, c := range s.Credentials {
		if c[1] == "" {
			errs = append(errs, fmt.Errorf("%s_%s: required", s.Prefix, c[0]))
		}
	}
	if s.Timeout < 0 {
		errs = append(errs, fmt.Errorf("%s: timeout %v is negative", s.Prefix, s.Timeout))
	}
	client := s.Client
	if client == nil {
		cfg, err := s.TLS.Config(s.Prefix)
		if err != nil {
			errs = append(errs, err)
		}
		client = NewClient(cfg)
	} else {
		client = NoRedirects(client)
	}
	if err := errors.Join(errs...); err != nil {
		return Common{}, err
	}
	now := s.Now
	if now == nil {
		now = time.Now
	}
	timeout := s.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	c := Common{Base: base, TokenURL: base + s.TokenPath, Client: client, Now: now, Timeout: timeout, Guard: NewGuard(s.Name, s.Limits, now, s.Metrics)}
	if s.Fetch != nil {
		c.Tokens = NewTokens(s.Fetch, now, timeout, c.Guard.TokenFetched)
	}
	return c, nil
}

// Connect returns conn, its Common (com, a field of conn) made by Setup
// from s, or Setup's error.
func Connect[C any](conn *C, com *Common, s Settings) (*C, error) {
	var err error
	if *com, err = Setup(s); err != nil {
		return nil, err
	}
	return conn, nil
}

// Lookup asks the upstream for the slip (bankCode, transRef) with lookup:
// its identity checked first (a malformed one never reaches the bank),
// then lookup under the guard (Guard.Do), within the timeout.
func (c Common) Lookup(ctx context.Context, bankCode, transRef string,
	lookup func(ctx context.Context, bankCode, transRef string) (bank.Slip, error)) (bank.Slip, error) {
	if err := CheckLookup(bankCode, transRef); err != nil {
		return bank.Slip{}, fmt.Errorf("%w: %s: %w", bank.ErrUpstream, c.Guard.name, err)
	}
	var s bank.Slip
	err := c.Guard.Do(ctx, c.Timeout, func(ctx context.Context) error {
		var err error
		s, err = lookup(ctx, bankCode, transRef)
		return err
	})
	return s, err
}
