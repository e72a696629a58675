package egress

import (
	"math"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// hostKind is what a URL host denotes.
type hostKind uint8

const (
	hostBad  hostKind = iota // neither an address nor a usable name
	hostIP                   // an address literal in some form
	hostName                 // a name for the resolver
)

// classifyHost says what the host of a URL (brackets removed, as
// url.URL.Hostname returns it) denotes, and the address when it is one.
//
// Names that some parser on the way (the URL parser, getaddrinfo's
// inet_aton, a browser following a redirect) would read as an IPv4 address
// are read as that address here, so the policy judges the address and not
// the spelling: 2130706433, 0177.0.0.1, 0x7f.0.0.1, 127.1 and 127.0.0.1. are
// all 127.0.0.1. A host whose last label is a number (digits, or 0x and hex
// digits) but which is no valid address (1.2.3.256, 08.1, example.1) is
// hostBad, as in the WHATWG URL standard: no DNS name ends in a numeric
// label, and refusing such hosts leaves no spelling that some resolver might
// read as an address. Empty labels are hostBad too. IPv6 literals must parse
// with netip; a zone is kept so that the policy refuses it.
func classifyHost(h string) (netip.Addr, hostKind) {
	if h == "" {
		return netip.Addr{}, hostBad
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a, hostIP
	}
	if strings.ContainsAny(h, ":%[]") {
		return netip.Addr{}, hostBad // a malformed IPv6 literal or zone
	}
	s := strings.TrimSuffix(h, ".") // "127.0.0.1." is an absolute name for a resolver
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return netip.Addr{}, hostBad // empty label
	}
	if !endsInNumber(s) {
		return netip.Addr{}, hostName
	}
	a, ok := parseIPv4Loose(s)
	if !ok {
		return netip.Addr{}, hostBad
	}
	return a, hostIP
}

// endsInNumber reports whether the last label of s is decimal digits, or
// 0x followed by hex digits (none counts): the WHATWG test for a host that
// must be an IPv4 address.
func endsInNumber(s string) bool {
	last := s[strings.LastIndexByte(s, '.')+1:]
	if last == "" {
		return false
	}
	if len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		for i := 2; i < len(last); i++ {
			if digitValue(last[i]) >= 16 {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			return false
		}
	}
	return true
}

// parseIPv4Loose parses s as inet_aton(3) and the WHATWG URL standard do:
// one to four parts separated by dots, each decimal, octal (leading 0) or
// hex (leading 0x, where "0x" alone is 0); every part but the last is one
// byte and the last fills the remaining bytes, so "127.1" is 127.0.0.1 and
// "2130706433" is 127.0.0.1 too.
func parseIPv4Loose(s string) (netip.Addr, bool) {
	var parts [4]uint64
	n := 0
	for {
		if n == len(parts) {
			return netip.Addr{}, false
		}
		part, rest, more := strings.Cut(s, ".")
		v, ok := parseIPv4Number(part)
		if !ok {
			return netip.Addr{}, false
		}
		parts[n] = v
		n++
		if !more {
			break
		}
		s = rest
	}
	v := parts[n-1]
	if v >= 1<<(8*(5-n)) {
		return netip.Addr{}, false
	}
	for i := range n - 1 {
		if parts[i] > 0xff {
			return netip.Addr{}, false
		}
		v |= parts[i] << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// parseIPv4Number parses one part of a loose IPv4 address. Values beyond 32
// bits fail, however many digits they have (strtoul saturates there too).
func parseIPv4Number(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := uint64(10)
	switch {
	case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
		base, p = 16, p[2:]
	case len(p) >= 2 && p[0] == '0':
		base, p = 8, p[1:]
	}
	var v uint64
	for i := 0; i < len(p); i++ {
		d := digitValue(p[i])
		if d >= base {
			return 0, false
		}
		v = v*base + d
		if v > math.MaxUint32 {
			return 0, false
		}
	}
	return v, true
}

// digitValue is the value of the hex digit c, or 16 when c is none.
func digitValue(c byte) uint64 {
	switch {
	case '0' <= c && c <= '9':
		return uint64(c - '0')
	case 'a' <= c && c <= 'f':
		return uint64(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return uint64(c-'A') + 10
	}
	return 16
}

// HostKey is the server a URL names, as one string however the URL spells
// it: a name as Go's transport dials it, mapped to ASCII (IDNA: fullwidth
// letters and digits, the Unicode and the punycode spelling of a name), an
// address in its canonical form (127.1, 2130706433, 0x7f000001 and
// fullwidth １２７．０．０．１ are all 127.0.0.1), a name in lower case
// without its trailing dot, and the port as a number, 443 when the URL
// gives none. Bounds per server key on it.
func HostKey(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	port := u.Port()
	if n, err := strconv.ParseUint(port, 10, 16); err == nil {
		port = strconv.FormatUint(n, 10) // 0443 is 443
	} else {
		port = "443"
	}
	h := u.Hostname()
	if !isASCII(h) {
		if a, err := idna.Lookup.ToASCII(h); err == nil {
			h = a // as net/http's transport maps a host before it dials
		}
	}
	h = strings.ToLower(h)
	if a, kind := classifyHost(h); kind == hostIP {
		h = a.String()
	} else {
		h = strings.TrimSuffix(h, ".")
	}
	return net.JoinHostPort(h, port)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
