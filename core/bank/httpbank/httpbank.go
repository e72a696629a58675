// Package httpbank connects core to an upstream bank gateway over HTTP
// (Connector), and serves the same gateway protocol in front of any
// bank.Connector (Handler), so tests and load rigs can run the sandbox bank
// as an upstream.
//
// # Gateway protocol
//
// Two endpoints under the configured base URL, both POST with a JSON body
// (Content-Type: application/json):
//
//	POST {base}/slips/bank    {"bankCode": "004", "transRef": "LS2FLLDUC7V3LSUPD7VW"}
//	POST {base}/slips/wallet  {"transactionId": "57283950822875"}
//
// The gateway answers HTTP 200 with a JSON object whose status says what the
// bank knows:
//
//	{"status": "found", "slip": {...}}  the transfer; slip is a bank.Slip or a
//	                                    bank.WalletSlip, with the requested
//	                                    transRef or transactionId
//	{"status": "not_found"}             bank.ErrNotFound
//	{"status": "pending"}               bank.ErrPending
//
// Unknown fields are ignored. Anything else is bank.ErrUpstream, wrapped with
// what went wrong: any other status (Handler sends {"status": "error",
// "message": "..."} with HTTP 502 when its connector fails, and HTTP 400 for
// a malformed request), any HTTP status but 200 (redirects are not followed),
// a body that is not such an object, a found slip without a slip or for
// another reference, a body over MaxReplySize, the timeout, a cancelled
// context, or a connection error. A cancelled or expired context is also
// visible with errors.Is(err, context.Canceled or context.DeadlineExceeded).
//
// # One request per call
//
// The upstream may bill per lookup, so a call sends exactly one request and
// never retries it: not on an error status, not on a timeout, not on a broken
// connection; redirects are refused rather than followed. Retrying is the
// caller's decision (core's async retry schedule). The one repeat that can
// happen is net/http's resend of a request on a reused keep-alive connection
// that the server closed before any byte of the request was written to it:
// the upstream never saw that request, so it cannot have billed it.
package httpbank

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/slipverify/slipverify/core/bank"
)

// MaxReplySize is the largest reply body, in bytes, the connector reads; a
// longer reply is an upstream error. A slip is about 1 KiB.
const MaxReplySize = 1 << 20

// DefaultTimeout bounds a call when Config.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// Paths of the gateway protocol, relative to the base URL.
const (
	bankPath   = "slips/bank"
	walletPath = "slips/wallet"
)

// Reply statuses of the gateway protocol.
const (
	statusFound    = "found"
	statusNotFound = "not_found"
	statusPending  = "pending"
	statusError    = "error"
)

// bankRequest is the body of POST {base}/slips/bank.
type bankRequest struct {
	BankCode string `json:"bankCode"`
	TransRef string `json:"transRef"`
}

// walletRequest is the body of POST {base}/slips/wallet.
type walletRequest struct {
	TransactionID string `json:"transactionId"`
}

// reply is the body of every gateway answer; Slip is set when Status is
// statusFound, Message may be when it is statusError.
type reply[T any] struct {
	Status  string `json:"status"`
	Slip    *T     `json:"slip,omitempty"`
	Message string `json:"message,omitempty"`
}

// Config configures a Connector.
type Config struct {
	// URL is the gateway's base URL, http or https; the endpoints are
	// resolved below its path.
	URL string
	// Timeout bounds one call, connection and reply included; zero means
	// DefaultTimeout.
	Timeout time.Duration
	// Client sends the requests; nil means a client of this package's own,
	// tuned to keep connections to the gateway alive. The connector uses a
	// copy of it that does not follow redirects.
	Client *http.Client
}

// Connector is a bank.Connector that asks an upstream gateway. It is safe for
// concurrent use.
type Connector struct {
	bankURL   string
	walletURL string
	timeout   time.Duration
	client    *http.Client
}

var _ bank.Connector = (*Connector)(nil)

// shown is u as an error message shows it: no password, and no query,
// which may carry a token.
func shown(u *url.URL) string {
	c := *u
	if c.RawQuery != "" {
		c.RawQuery = "..."
	}
	c.Fragment = ""
	return c.Redacted()
}

// New returns a connector to the gateway at cfg.URL, reporting every
// problem of cfg at once.
func New(cfg Config) (*Connector, error) {
	var errs []error
	base, err := url.Parse(cfg.URL)
	switch {
	case err != nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the text, which may hold a password
		}
		errs = append(errs, fmt.Errorf("httpbank: URL: %w", err))
	case base.Scheme != "http" && base.Scheme != "https":
		errs = append(errs, fmt.Errorf("httpbank: URL %q: scheme must be http or https", shown(base)))
	case base.Host == "":
		errs = append(errs, fmt.Errorf("httpbank: URL %q: no host", shown(base)))
	case base.RawQuery != "" || base.Fragment != "":
		errs = append(errs, fmt.Errorf("httpbank: URL %q: a base URL takes no query or fragment", shown(base)))
	}
	if cfg.Timeout < 0 {
		errs = append(errs, fmt.Errorf("httpbank: Timeout %v is negative", cfg.Timeout))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	client := &http.Client{Transport: newTransport()}
	if cfg.Client != nil {
		c := *cfg.Client // a copy: the caller's client keeps its redirect policy
		client = &c
	}
	// A redirect would send the lookup a second time; answer with the 3xx
	// itself, which is then an upstream error.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	return &Connector{
		bankURL:   base.JoinPath(bankPath).String(),
		walletURL: base.JoinPath(walletPath).String(),
		timeout:   timeout,
		client:    client,
	}, nil
}

// newTransport returns the transport of the default client. Core sends every
// lookup to one host, so it keeps many idle connections to it: net/http's
// default of 2 per host would open and close a connection for nearly every
// request under load, paying a handshake each time and piling up TIME_WAIT
// sockets.
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           512,
		MaxIdleConnsPerHost:    256,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    5 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// Bank asks the gateway for the transfer (bankCode, transRef) with one
// request.
func (c *Connector) Bank(ctx context.Context, bankCode, transRef string) (bank.Slip, error) {
	req, err := json.Marshal(bankRequest{BankCode: bankCode, TransRef: transRef})
	if err != nil {
		return bank.Slip{}, fmt.Errorf("%w: httpbank: encode request: %w", bank.ErrUpstream, err)
	}
	var s bank.Slip
	err = c.call(ctx, c.bankURL, req, func(body []byte) (err error) {
		s, err = decodeReply(body, transRef, func(s *bank.Slip) string { return s.TransRef })
		return err
	})
	return s, err
}

// Wallet asks the gateway for the wallet transfer transactionID with one
// request.
func (c *Connector) Wallet(ctx context.Context, transactionID string) (bank.WalletSlip, error) {
	req, err := json.Marshal(walletRequest{TransactionID: transactionID})
	if err != nil {
		return bank.WalletSlip{}, fmt.Errorf("%w: httpbank: encode request: %w", bank.ErrUpstream, err)
	}
	var w bank.WalletSlip
	err = c.call(ctx, c.walletURL, req, func(body []byte) (err error) {
		w, err = decodeReply(body, transactionID, func(w *bank.WalletSlip) string { return w.TransactionID })
		return err
	})
	return w, err
}

// bufPool holds reply buffers. Buffers grown past maxPooledBuffer by a large
// reply are left to the garbage collector rather than pinned in the pool.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBuffer = 64 << 10

// call POSTs body to endpoint once and hands the 200 reply body to decode.
// The slice passed to decode is valid only until decode returns.
func (c *Connector) call(ctx context.Context, endpoint string, body []byte, decode func([]byte) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: httpbank: %w", bank.ErrUpstream, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")

	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: httpbank: %w", bank.ErrUpstream, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// Read a little so a short error page leaves the connection
		// reusable; a long one closes it.
		_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
		return fmt.Errorf("%w: httpbank: POST %s: HTTP %d", bank.ErrUpstream, endpoint, resp.StatusCode)
	}

	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= maxPooledBuffer {
			bufPool.Put(buf)
		}
	}()
	n, err := buf.ReadFrom(io.LimitReader(resp.Body, MaxReplySize+1))
	if err != nil {
		return fmt.Errorf("%w: httpbank: POST %s: read reply: %w", bank.ErrUpstream, endpoint, err)
	}
	if n > MaxReplySize {
		return fmt.Errorf("%w: httpbank: POST %s: reply exceeds %d bytes", bank.ErrUpstream, endpoint, MaxReplySize)
	}
	return decode(buf.Bytes())
}

// decodeReply reads a gateway reply about ref, of which ref(slip) names the
// reference a found slip carries. Every malformed reply is bank.ErrUpstream.
func decodeReply[T any](body []byte, want string, ref func(*T) string) (T, error) {
	var zero T
	var r reply[T]
	if err := json.Unmarshal(body, &r); err != nil {
		return zero, fmt.Errorf("%w: httpbank: malformed reply: %w", bank.ErrUpstream, err)
	}
	switch r.Status {
	case statusFound:
		if r.Slip == nil {
			return zero, fmt.Errorf("%w: httpbank: reply found without a slip", bank.ErrUpstream)
		}
		if got := ref(r.Slip); got != want {
			return zero, fmt.Errorf("%w: httpbank: asked for %q, reply is for %.100q", bank.ErrUpstream, want, got)
		}
		return *r.Slip, nil
	case statusNotFound:
		return zero, bank.ErrNotFound
	case statusPending:
		return zero, bank.ErrPending
	case statusError:
		return zero, fmt.Errorf("%w: httpbank: gateway error: %.200q", bank.ErrUpstream, r.Message)
	default:
		return zero, fmt.Errorf("%w: httpbank: unknown reply status %.40q", bank.ErrUpstream, r.Status)
	}
}
