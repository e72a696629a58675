package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"github.com/slipverify/slipverify/core/api"
)

// Resolver looks up the addresses of a host name. *net.Resolver is one;
// tests pass a fake that maps test names to listeners.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// dialer is the only way this package opens a connection. It resolves the
// host itself, skips the addresses the policy blocks and dials the others
// as literals, one after another; and the socket's Control hook checks the
// address once more just before connect(2). The hook is what makes DNS
// rebinding useless: whatever answered the lookup, and whatever a later
// layer did with the name, the address the kernel is about to connect to
// is the address judged.
type dialer struct {
	policy   Policy
	resolver Resolver
	net      net.Dialer
}

func newDialer(p Policy, r Resolver) *dialer {
	d := &dialer{policy: p, resolver: r}
	d.net = net.Dialer{
		KeepAlive: 30 * time.Second,
		Control:   d.control,
	}
	return d
}

// minAttempt is the least time one address of several gets before the next
// is tried, as in package net.
const minAttempt = 2 * time.Second

// control refuses the socket unless its final destination is reachable.
func (d *dialer) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &api.Error{Code: api.URLInvalidIPRange,
			Cause: fmt.Errorf("egress: refusing %s connection to unparsable address %q: %v", network, address, err)}
	}
	if !d.policy.reachable(ap.Addr()) {
		return &api.Error{Code: api.URLInvalidIPRange,
			Cause: fmt.Errorf("egress: refusing %s connection to blocked address %s", network, ap)}
	}
	return nil
}

// DialContext dials address ("host:port") for an http.Transport. A host
// whose every address is blocked gives a URLInvalidIPRange *api.Error; a
// host that is malformed gives URLProtocolNotAllowed. Other failures are
// the errors of the last address tried, or of the lookup.
func (d *dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, &api.Error{Code: api.URLProtocolNotAllowed, Cause: fmt.Errorf("egress: dial %q: %w", address, err)}
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, &api.Error{Code: api.URLProtocolNotAllowed, Cause: fmt.Errorf("egress: dial %q: bad port", address)}
	}
	addrs, err := d.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	allowed := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if d.policy.Allowed(a) {
			allowed = append(allowed, a)
		}
	}
	if len(allowed) == 0 {
		return nil, &api.Error{Code: api.URLInvalidIPRange,
			Cause: fmt.Errorf("egress: %s has only blocked addresses %v", host, addrs)}
	}
	var lastErr error
	for i, a := range allowed {
		actx, cancel := attemptContext(ctx, len(allowed)-i)
		c, err := d.net.DialContext(actx, network, netip.AddrPortFrom(a, uint16(port)).String())
		cancel()
		if err == nil {
			return c, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// lookup returns the addresses host denotes: itself when it is an address
// literal in any spelling, else the resolver's answer with IPv4 answers in
// their 4-byte form. Go's resolver hands out IPv4 answers from /etc/hosts
// as ::ffff:a.b.c.d, and a socket to that address is an IPv4 socket, so the
// IPv4 form is the one to judge (the Control hook sees it too). Literals
// are judged as written, so a client cannot use ::ffff:10.0.0.1 to dodge an
// allow list.
func (d *dialer) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	a, kind := classifyHost(host)
	switch kind {
	case hostIP:
		return []netip.Addr{a}, nil
	case hostBad:
		return nil, &api.Error{Code: api.URLProtocolNotAllowed, Cause: fmt.Errorf("egress: malformed host %q", host)}
	}
	addrs, err := d.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("egress: resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("egress: resolve %s: %w", host, errNoAddress)
	}
	out := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		out[i] = a.Unmap()
	}
	return out, nil
}

var errNoAddress = errors.New("no addresses")

// attemptContext bounds one of remaining connection attempts so that a
// black-holed address cannot use up the whole deadline: it gets an equal
// share of what is left, but at least minAttempt.
func attemptContext(ctx context.Context, remaining int) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok || remaining <= 1 {
		return ctx, func() {}
	}
	left := time.Until(dl)
	share := max(left/time.Duration(remaining), min(left, minAttempt))
	return context.WithTimeout(ctx, share)
}
