// Package egress is the one way the platform opens connections to addresses
// a client chose: fetching a slip image from a URL and delivering webhooks.
// Both must reach only public addresses (spec 4.1 rule 2, 4.2 rule 3, 6.1),
// because a URL is the client's way to make the platform connect somewhere
// on its behalf (SSRF).
//
// Three layers enforce it. The URL's host is classified before anything is
// sent: an address in any spelling a parser might accept (2130706433,
// 0177.0.0.1, 0x7f.1, [::ffff:127.0.0.1]) is judged as the address it
// denotes. The dialer resolves names itself and dials only allowed
// addresses. And a Control hook on every socket judges the address the
// kernel is about to connect to, so no answer a resolver gives later (DNS
// rebinding) and no rewriting of the host on the way (IDNA mapping of
// fullwidth digits) can reach a blocked address. Redirect targets go
// through all three again. No proxy from the environment is ever used: a
// proxy would make the connection, and its address, someone else's.
package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/slipverify/slipverify/core/api"
)

// Defaults for the zero fields of Config.
const (
	DefaultTimeout  = 10 * time.Second
	DefaultMaxBytes = 4 << 20 // spec 8: images are at most 4 MB
)

const (
	// maxHeaderBytes bounds the response header of any response.
	maxHeaderBytes = 64 << 10
	// drainLimit is how much of a webhook response body is read, and
	// discarded, so that its connection can be reused.
	drainLimit = 16 << 10
)

// Config configures a Client.
type Config struct {
	// Policy says which addresses may be reached; the zero Policy allows
	// public unicast addresses only (SLIP_EGRESS_ALLOW_CIDRS adds more).
	Policy Policy
	// CAFile names a PEM file of extra roots trusted besides the system's
	// (SLIP_EGRESS_CA_FILE); empty adds none.
	CAFile string
	// Timeout bounds a whole Fetch or Post: lookup, connect, TLS,
	// redirects and the body. Zero means DefaultTimeout.
	Timeout time.Duration
	// MaxBytes bounds a fetched body. Zero means DefaultMaxBytes.
	MaxBytes int64
	// MaxRedirects is how many redirects a Fetch follows; zero refuses
	// every redirect. Post never follows one.
	MaxRedirects int
	// Resolver looks up host names; nil means net.DefaultResolver.
	Resolver Resolver
}

// Client fetches images and delivers webhooks through the egress policy. It
// keeps idle connections for reuse and is safe for concurrent use.
type Client struct {
	policy       Policy
	timeout      time.Duration
	maxBytes     int64
	maxRedirects int
	dialer       *dialer
	transport    *http.Transport
	fetch        *http.Client // follows up to maxRedirects checked redirects
	post         *http.Client // follows none
}

// New returns a Client for cfg, or every problem with cfg at once.
func New(cfg Config) (*Client, error) {
	var errs []error
	if cfg.Timeout < 0 {
		errs = append(errs, fmt.Errorf("egress: Timeout %v is negative", cfg.Timeout))
	}
	if cfg.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("egress: MaxBytes %d is negative", cfg.MaxBytes))
	}
	if cfg.MaxRedirects < 0 {
		errs = append(errs, fmt.Errorf("egress: MaxRedirects %d is negative", cfg.MaxRedirects))
	}
	roots, err := rootPool(cfg.CAFile)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c := &Client{
		policy:       cfg.Policy,
		timeout:      cfg.Timeout,
		maxBytes:     cfg.MaxBytes,
		maxRedirects: cfg.MaxRedirects,
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.maxBytes == 0 {
		c.maxBytes = DefaultMaxBytes
	}
	var r Resolver = net.DefaultResolver
	if cfg.Resolver != nil {
		r = cfg.Resolver
	}
	c.dialer = newDialer(cfg.Policy, r)
	c.transport = &http.Transport{
		Proxy:                  nil, // never from the environment
		DialContext:            c.dialer.DialContext,
		TLSClientConfig:        &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true,
		MaxResponseHeaderBytes: maxHeaderBytes,
		// Images do not compress; without transparent gzip the size bound is
		// on what the server sends and Content-Length stays meaningful.
		DisableCompression: true,
		MaxIdleConns:       1024,
		// Callbacks go to few hosts, many at once: keep their connections
		// rather than pay a TLS handshake per delivery.
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   c.timeout,
		ExpectContinueTimeout: time.Second,
	}
	c.fetch = &http.Client{Transport: c.transport, CheckRedirect: c.checkRedirect}
	c.post = &http.Client{Transport: c.transport, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	return c, nil
}

// CheckCAFile reports what is wrong with a CAFile (a configuration's check
// before New): a file that cannot be read or holds no PEM certificates.
func CheckCAFile(caFile string) error {
	_, err := rootPool(caFile)
	return err
}

// rootPool returns the system roots plus those in the PEM file caFile.
func rootPool(caFile string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if caFile == "" {
		return pool, nil
	}
	rest, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("egress: CAFile: %w", err)
	}
	// Every certificate must parse: AppendCertsFromPEM would skip a broken
	// one, and deliveries to the receiver it was for would fail at the
	// handshake instead of the configuration failing its check.
	n := 0
	for {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("egress: CAFile %s: certificate %d: %w", caFile, n+1, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("egress: CAFile %s: no PEM certificates", caFile)
	}
	return pool, nil
}

// CloseIdleConnections closes the connections kept for reuse.
func (c *Client) CloseIdleConnections() { c.transport.CloseIdleConnections() }

// Fetch GETs the image at rawURL and returns its body. Every error is an
// *api.Error:
//
//   - URLProtocolNotAllowed: the scheme is not http or https, also after a
//     redirect; a URL that does not parse, has no host or has a malformed
//     host (a bad IPv6 literal, 1.2.3.256) gets this code too, since the
//     spec's invalid_url condition covers both and there is no other row.
//   - URLInvalidIPRange: the host, a redirect's host or every address a
//     name resolves to is blocked by the policy, or the socket's final
//     address is.
//   - ImageSizeTooLarge: Content-Length or the body exceeds MaxBytes.
//   - ImageURLUnreachable: anything else: lookup failure, refused or
//     timed-out connection, TLS failure, a non-2xx status, too many
//     redirects, a response header over 64 KiB, Timeout elapsed, or ctx
//     done (errors.Is tells context.Canceled apart).
func (c *Client) Fetch(ctx context.Context, rawURL string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	// The URL checked is the one the request carries: parsed once.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, &api.Error{Code: api.URLProtocolNotAllowed, Cause: fmt.Errorf("egress: %w", err)}
	}
	if err := c.checkTarget(req.URL, false); err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "image/*")
	resp, err := c.fetch.Do(req)
	if err != nil {
		return nil, withCode(err, api.ImageURLUnreachable)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &api.Error{Code: api.ImageURLUnreachable,
			Cause: fmt.Errorf("egress: GET %s: status %s", resp.Request.URL.Redacted(), resp.Status)}
	}
	if resp.ContentLength > c.maxBytes {
		return nil, &api.Error{Code: api.ImageSizeTooLarge,
			Cause: fmt.Errorf("egress: Content-Length %d is over %d", resp.ContentLength, c.maxBytes)}
	}
	var buf bytes.Buffer
	if resp.ContentLength > 0 {
		buf.Grow(int(resp.ContentLength))
	}
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, c.maxBytes+1)); err != nil {
		return nil, &api.Error{Code: api.ImageURLUnreachable, Cause: fmt.Errorf("egress: reading body: %w", err)}
	}
	if int64(buf.Len()) > c.maxBytes {
		return nil, &api.Error{Code: api.ImageSizeTooLarge,
			Cause: fmt.Errorf("egress: body is over %d bytes", c.maxBytes)}
	}
	return buf.Bytes(), nil
}

// checkRedirect judges a redirect target as Fetch judges the first URL,
// then counts.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if err := c.checkTarget(req.URL, false); err != nil {
		return err
	}
	if len(via) > c.maxRedirects {
		return &api.Error{Code: api.ImageURLUnreachable,
			Cause: fmt.Errorf("egress: more than %d redirects", c.maxRedirects)}
	}
	return nil
}

// Post delivers a webhook: it POSTs body with header to rawURL and returns
// the response status. A redirect is not followed; its 3xx status is
// returned like any other. The response body is read up to 16 KiB and
// discarded.
//
// The caller checks its own rules on the URL; Post still refuses, with an
// INVALID_CALLBACK_URL *api.Error, a URL that is not https, is malformed,
// or whose every address (or the socket's final address) is blocked, so a
// URL that became unsafe since it was checked is never contacted; a retry
// helps only if the name's addresses change. Network errors and timeouts
// (Timeout bounds the whole delivery) are returned as they come, a
// *url.Error, with status 0.
func (c *Client) Post(ctx context.Context, rawURL string, body []byte, header http.Header) (status int, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return 0, &api.Error{Code: api.InvalidCallbackURL, Cause: fmt.Errorf("egress: %w", err)}
	}
	if err := c.checkTarget(req.URL, true); err != nil {
		return 0, &api.Error{Code: api.InvalidCallbackURL, Cause: err}
	}
	for k, v := range header {
		req.Header[k] = append([]string(nil), v...)
	}
	resp, err := c.post.Do(req)
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) {
			return 0, &api.Error{Code: api.InvalidCallbackURL, Cause: err}
		}
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// The transport hands over the raw connection as the body and stops
		// watching ctx: reading it would wait for as long as the receiver
		// keeps it open. A callback is never an upgrade: a failed delivery.
		return resp.StatusCode, nil
	}
	// Closing the body ends a read the receiver drips out past the timeout.
	stop := context.AfterFunc(ctx, func() { resp.Body.Close() })
	defer stop()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	return resp.StatusCode, nil
}

// CheckCallbackURL checks a callbackUrl at async submit (spec 4.2 rule 3):
// it must be an https URL whose host is an allowed address or a name that
// resolves only to allowed addresses; one blocked address among several is
// enough to refuse, because any of them may be the one dialed later. A name
// that does not resolve is refused too: nothing shows it public. Every
// refusal is an INVALID_CALLBACK_URL *api.Error.
//
// Passing is no promise for later: Post judges the addresses again when it
// connects.
func (c *Client) CheckCallbackURL(ctx context.Context, rawURL string) error {
	u, err := c.callbackTarget(rawURL)
	if err != nil {
		return err
	}
	host := u.Hostname()
	if _, kind := classifyHost(host); kind == hostIP {
		return nil // checkTarget judged it
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	addrs, err := c.dialer.lookup(ctx, host)
	if err != nil {
		return &api.Error{Code: api.InvalidCallbackURL, Cause: err}
	}
	for _, a := range addrs {
		if !c.policy.Allowed(a) {
			return &api.Error{Code: api.InvalidCallbackURL,
				Cause: fmt.Errorf("egress: %s resolves to blocked address %s", host, a)}
		}
	}
	return nil
}

// CheckWebhookURL checks a callback URL without contacting anything, as a
// branch's webhookUrl is set: https, and a host that is an address must be
// allowed; a name is judged at every submit and delivery. A refusal is an
// INVALID_CALLBACK_URL *api.Error.
func (c *Client) CheckWebhookURL(rawURL string) error {
	_, err := c.callbackTarget(rawURL)
	return err
}

// callbackTarget parses a callback URL and judges it as CheckWebhookURL
// does.
func (c *Client) callbackTarget(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, &api.Error{Code: api.InvalidCallbackURL, Cause: fmt.Errorf("egress: %w", err)}
	}
	if err := c.checkTarget(u, true); err != nil {
		return nil, &api.Error{Code: api.InvalidCallbackURL, Cause: err}
	}
	return u, nil
}

// CheckImageURL checks an image URL without contacting anything: its
// scheme must be http or https (URL_PROTOCOL_NOT_ALLOWED) and a host that is
// an address must be allowed (URL_INVALID_IP_RANGE). Fetch judges names
// when it connects. Async submit asks it so a job is refused at once for a
// URL that could never be fetched.
func (c *Client) CheckImageURL(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return &api.Error{Code: api.URLProtocolNotAllowed, Cause: fmt.Errorf("egress: %w", err)}
	}
	return c.checkTarget(u, false)
}

// checkTarget judges u before anything is sent: its scheme (https, or also
// http unless httpsOnly) and its host. A host that is an address in any
// spelling is judged by the policy here; a name is judged when dialed.
func (c *Client) checkTarget(u *url.URL, httpsOnly bool) error {
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && !httpsOnly:
	default:
		want := "http or https"
		if httpsOnly {
			want = "https"
		}
		return &api.Error{Code: api.URLProtocolNotAllowed,
			Cause: fmt.Errorf("egress: scheme %q is not %s", u.Scheme, want)}
	}
	host := u.Hostname()
	a, kind := classifyHost(host)
	switch kind {
	case hostBad:
		return &api.Error{Code: api.URLProtocolNotAllowed, Cause: fmt.Errorf("egress: missing or malformed host %q", host)}
	case hostIP:
		if !c.policy.Allowed(a) {
			return &api.Error{Code: api.URLInvalidIPRange,
				Cause: fmt.Errorf("egress: host %q is blocked address %s", host, a)}
		}
	}
	return nil
}

// withCode returns err as an *api.Error: with the code of the *api.Error it
// wraps (a refusal by checkRedirect or the dialer), if any, else with code.
func withCode(err error, code api.Code) error {
	var ae *api.Error
	if errors.As(err, &ae) {
		code = ae.Code
	}
	return &api.Error{Code: code, Cause: err}
}
