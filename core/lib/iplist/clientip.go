package iplist

import (
	"bytes"
	"net/netip"
)

// ClientIP returns the address a request came from, given the TCP peer, the
// X-Forwarded-For header value xff (nil when absent) and the trusted proxies
// (SLIP_TRUSTED_PROXIES).
//
// Only a trusted peer may speak for someone else: when the peer is not in
// trusted, xff is ignored (anyone can send the header) and the peer is the
// client. When it is, ClientIP walks xff from the right, since each proxy
// appends the address it received the request from, and returns the first
// address not in trusted. Entries to the left of that one were written by the
// client and are never believed.
//
// Where the walk finds no untrusted address it answers with the nearest hop
// it can still vouch for:
//   - every entry is trusted (an internal caller behind the proxy): the
//     left-most entry, the origin;
//   - a malformed entry ends the walk (a trusted proxy wrote something like
//     "unknown", so what lies beyond it is unknown): the last valid entry
//     walked, to its right, or the peer if there is none.
//
// Entries are separated by commas, with optional spaces or tabs; empty
// entries are skipped (RFC 9110 list syntax). An entry is an IPv4 or IPv6
// address, optionally with a port ("192.0.2.1:443", "[2001:db8::1]:443") or
// brackets ("[2001:db8::1]"); zones are malformed. When a request carries
// several X-Forwarded-For headers the caller joins their values with commas,
// in order, before calling (fasthttp's Peek returns only the first).
//
// The result is unmapped (an IPv4 client reached over a dual-stack socket is
// 192.0.2.1, not ::ffff:192.0.2.1) and carries no zone. ClientIP allocates
// nothing and does not retain xff.
func ClientIP(peer netip.Addr, xff []byte, trusted List) netip.Addr {
	peer = peer.Unmap().WithZone("")
	if !trusted.Contains(peer) {
		return peer
	}
	best := peer
	for end := len(xff); end > 0; {
		start := bytes.LastIndexByte(xff[:end], ',') + 1
		e := trimOWS(xff[start:end])
		end = start - 1
		if len(e) == 0 {
			continue
		}
		a, ok := parseEntry(e)
		if !ok {
			return best
		}
		a = a.Unmap()
		if !trusted.Contains(a) {
			return a
		}
		best = a
	}
	return best
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// parseEntry parses one X-Forwarded-For element: an address, "[v6]",
// "[v6]:port" or "v4:port".
func parseEntry(b []byte) (netip.Addr, bool) {
	if len(b) > 0 && b[0] == '[' {
		i := bytes.IndexByte(b, ']')
		if i < 0 {
			return netip.Addr{}, false
		}
		if rest := b[i+1:]; len(rest) > 0 && !isPort(rest) {
			return netip.Addr{}, false
		}
		a, ok := parseAddr(b[1:i])
		if !ok || !a.Is6() {
			return netip.Addr{}, false
		}
		return a, true
	}
	if a, ok := parseAddr(b); ok {
		return a, true
	}
	// "v4:port": exactly one colon, IPv4 before it.
	i := bytes.IndexByte(b, ':')
	if i < 0 || !isPort(b[i:]) {
		return netip.Addr{}, false
	}
	a, ok := parse4(b[:i])
	return a, ok
}

// isPort reports whether b is ":" followed by 1 to 5 decimal digits.
func isPort(b []byte) bool {
	if len(b) < 2 || len(b) > 6 || b[0] != ':' {
		return false
	}
	for _, c := range b[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseAddr is netip.ParseAddr for a byte slice, without zones: it accepts
// exactly what netip.ParseAddr accepts when the input has no '%' (the fuzz
// test holds it to that), and allocates nothing, where ParseAddr would need a
// string copy of the header and allocates its error on malformed input.
func parseAddr(b []byte) (netip.Addr, bool) {
	for _, c := range b {
		switch c {
		case '.':
			return parse4(b)
		case ':':
			return parse6(b)
		case '%':
			return netip.Addr{}, false
		}
	}
	return netip.Addr{}, false
}

// parse4 parses dotted-decimal IPv4 as netip does: four fields, each 0-255,
// no leading zeros.
func parse4(b []byte) (netip.Addr, bool) {
	var f [4]byte
	ok := parse4Fields(b, &f)
	if !ok {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4(f), true
}

func parse4Fields(b []byte, f *[4]byte) bool {
	pos, val, digits := 0, 0, 0
	for i, c := range b {
		switch {
		case c >= '0' && c <= '9':
			if digits == 1 && val == 0 {
				return false // leading zero
			}
			val = val*10 + int(c-'0')
			digits++
			if val > 255 {
				return false
			}
		case c == '.':
			if i == 0 || i == len(b)-1 || b[i-1] == '.' || pos == 3 {
				return false
			}
			f[pos] = byte(val)
			pos, val, digits = pos+1, 0, 0
		default:
			return false
		}
	}
	if pos != 3 || digits == 0 {
		return false
	}
	f[3] = byte(val)
	return true
}

// parse6 parses textual IPv6 as netip does (RFC 4291 section 2.2, with an
// optional embedded IPv4 tail), zones excluded.
func parse6(s []byte) (netip.Addr, bool) {
	var ip [16]byte
	ellipsis := -1 // byte index where "::" stands, or -1
	if len(s) >= 2 && s[0] == ':' && s[1] == ':' {
		ellipsis = 0
		s = s[2:]
		if len(s) == 0 {
			return netip.AddrFrom16(ip), true
		}
	}
	i := 0
	for i < 16 {
		off, acc := 0, uint32(0)
	digits:
		for ; off < len(s); off++ {
			c := s[off]
			switch {
			case c >= '0' && c <= '9':
				acc = acc<<4 + uint32(c-'0')
			case c >= 'a' && c <= 'f':
				acc = acc<<4 + uint32(c-'a'+10)
			case c >= 'A' && c <= 'F':
				acc = acc<<4 + uint32(c-'A'+10)
			default:
				break digits
			}
			if off > 3 {
				return netip.Addr{}, false
			}
		}
		if off == 0 {
			return netip.Addr{}, false
		}
		if off < len(s) && s[off] == '.' {
			// Embedded IPv4: must fill the last four bytes.
			if (ellipsis < 0 && i != 12) || i+4 > 16 {
				return netip.Addr{}, false
			}
			var f [4]byte
			if !parse4Fields(s, &f) {
				return netip.Addr{}, false
			}
			copy(ip[i:], f[:])
			i += 4
			s = nil
			break
		}
		ip[i], ip[i+1] = byte(acc>>8), byte(acc)
		i += 2
		s = s[off:]
		if len(s) == 0 {
			break
		}
		if s[0] != ':' || len(s) == 1 {
			return netip.Addr{}, false
		}
		s = s[1:]
		if s[0] == ':' {
			if ellipsis >= 0 {
				return netip.Addr{}, false
			}
			ellipsis = i
			s = s[1:]
			if len(s) == 0 {
				break
			}
		}
	}
	if len(s) != 0 {
		return netip.Addr{}, false
	}
	if i < 16 {
		if ellipsis < 0 {
			return netip.Addr{}, false
		}
		n := 16 - i
		for j := i - 1; j >= ellipsis; j-- {
			ip[j+n] = ip[j]
		}
		clear(ip[ellipsis : ellipsis+n])
	} else if ellipsis >= 0 {
		return netip.Addr{}, false // "::" must stand for at least one group
	}
	return netip.AddrFrom16(ip), true
}
