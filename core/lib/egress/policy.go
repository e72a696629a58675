package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Policy decides which addresses the platform may connect to. An address is
// blocked unless it is a public unicast address or the allow list names it;
// the zero Policy allows exactly the public unicast addresses.
//
// A Policy is read-only after NewPolicy and safe for concurrent use.
type Policy struct {
	allow []netip.Prefix
}

// NewPolicy returns the policy that additionally allows every address in
// allow. The prefixes are copied and masked, so "127.0.0.1/8" allows
// 127.0.0.0/8.
//
// An IPv4 prefix never allows the IPv4-mapped IPv6 form of its addresses
// (::ffff:127.0.0.1 is not allowed by 127.0.0.0/8): a client can write the
// mapped form to dodge an allow list meant for IPv4 only, so only an
// explicit ::ffff:0:0/96 sub-prefix in allow lets it through. A prefix that
// happens to cover the mapped range (::/0) does count as naming it.
func NewPolicy(allow []netip.Prefix) Policy {
	if len(allow) == 0 {
		return Policy{}
	}
	p := Policy{allow: make([]netip.Prefix, 0, len(allow))}
	for _, pf := range allow {
		if pf.IsValid() {
			p.allow = append(p.allow, pf.Masked())
		}
	}
	return p
}

// ParsePrefixes parses an allow list such as SLIP_EGRESS_ALLOW_CIDRS: items
// separated by commas, each a CIDR prefix ("10.0.0.0/8", "fd00::/8") or a
// single address ("127.0.0.1", which means /32). Whitespace around items and
// empty items are ignored, so "" is the empty list. Every bad item is
// reported, not only the first; addresses with a zone are bad because a zone
// names an interface, not a destination.
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var (
		out  []netip.Prefix
		errs []error
	)
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		pf, err := parsePrefix(item)
		if err != nil {
			errs = append(errs, fmt.Errorf("egress: allow list item %d %q: %w", i+1, item, err))
			continue
		}
		out = append(out, pf)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func parsePrefix(item string) (netip.Prefix, error) {
	if strings.Contains(item, "/") {
		pf, err := netip.ParsePrefix(item)
		if err != nil {
			return netip.Prefix{}, err
		}
		return pf.Masked(), nil
	}
	a, err := netip.ParseAddr(item)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a.Zone() != "" {
		return netip.Prefix{}, errors.New("address has a zone")
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Allowed reports whether the platform may connect to a. It is the fast
// path of every connection and allocates nothing.
//
// Order: an invalid address or one with a zone (fe80::1%eth0) is refused
// outright; then the allow list wins; then the address must be public
// unicast: not in blocked4, inside 2000::/3 for IPv6 and not in blocked6.
func (p Policy) Allowed(a netip.Addr) bool {
	if !a.IsValid() || a.Zone() != "" {
		return false
	}
	for _, pf := range p.allow {
		if pf.Contains(a) {
			return true
		}
	}
	if a.Is4() {
		for _, pf := range blocked4 {
			if pf.Contains(a) {
				return false
			}
		}
		return true
	}
	// Everything IPv6 outside 2000::/3 is not global unicast: ::/128
	// unspecified, ::1 loopback, ::/96 IPv4-compatible, ::ffff:0:0/96
	// IPv4-mapped, 64:ff9b::/96 and 64:ff9b:1::/48 NAT64, 100::/64 discard,
	// fc00::/7 unique-local, fe80::/10 link-local, fec0::/10 site-local,
	// ff00::/8 multicast, and the unassigned rest. Netip's IsGlobalUnicast
	// is not enough: it calls all of these but four of them global.
	if !global6.Contains(a) {
		return false
	}
	for _, pf := range blocked6 {
		if pf.Contains(a) {
			return false
		}
	}
	return true
}

// reachable reports whether a connection whose socket address is a may
// proceed. It is Allowed, except that an IPv4 socket address is also
// reachable when the allow list names its IPv4-mapped form: dialing
// ::ffff:a.b.c.d opens an IPv4 socket to a.b.c.d, so an operator who allowed
// the mapped form has allowed that socket.
func (p Policy) reachable(a netip.Addr) bool {
	if p.Allowed(a) {
		return true
	}
	return a.Is4() && p.Allowed(netip.AddrFrom16(a.As16()))
}

// global6 is the IPv6 global unicast space IANA allocates from.
var global6 = netip.MustParsePrefix("2000::/3")

// blocked4 lists the IPv4 ranges that are not publicly routable unicast
// (IANA special-purpose registry, RFC 6890 and successors).
var blocked4 = [...]netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network", 0.0.0.0 unspecified
	netip.MustParsePrefix("10.0.0.0/8"),      // RFC 1918 private
	netip.MustParsePrefix("100.64.0.0/10"),   // RFC 6598 carrier-grade NAT
	netip.MustParsePrefix("127.0.0.0/8"),     // loopback
	netip.MustParsePrefix("169.254.0.0/16"),  // link-local (cloud metadata lives here)
	netip.MustParsePrefix("172.16.0.0/12"),   // RFC 1918 private
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // TEST-NET-1 documentation
	netip.MustParsePrefix("192.88.99.0/24"),  // deprecated 6to4 relay anycast
	netip.MustParsePrefix("192.168.0.0/16"),  // RFC 1918 private
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // TEST-NET-2 documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // TEST-NET-3 documentation
	netip.MustParsePrefix("224.0.0.0/4"),     // multicast
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, 255.255.255.255 broadcast
}

// blocked6 lists the special-purpose ranges inside 2000::/3.
var blocked6 = [...]netip.Prefix{
	netip.MustParsePrefix("2001::/23"),     // IETF protocol assignments: Teredo 2001::/32, benchmarking 2001:2::/48, ORCHID
	netip.MustParsePrefix("2001:db8::/32"), // documentation
	netip.MustParsePrefix("2002::/16"),     // 6to4: embeds an IPv4 address
	netip.MustParsePrefix("3fff::/20"),     // documentation (RFC 9637)
}
