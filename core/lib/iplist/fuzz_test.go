package iplist

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, that it accepts a list exactly
// when netip accepts every entry (bar the documented refusals), and that the
// List it builds agrees with netip.Prefix.Contains on addresses near each
// entry's edges.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"192.0.2.1", "10.0.0.0/8", "2001:db8::/32", "*", "::ffff:1.2.3.0/120", "0.0.0.0/0\n::/0",
		"10.0.0.1/8", "fe80::1%eth0", "", "1.2.3.4\n1.2.3.5\n1.2.3.6/31", "garbage",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		entries := strings.Split(s, "\n")
		l, err := Parse(entries)
		var prefixes []netip.Prefix
		all, valid := false, true
		for _, e := range entries {
			e = strings.TrimSpace(e)
			if e == "*" {
				all = true
				continue
			}
			var p netip.Prefix
			var perr error
			if strings.Contains(e, "/") {
				p, perr = netip.ParsePrefix(e)
				if perr == nil && p.Masked() != p {
					perr = ErrHostBits
				}
			} else {
				var a netip.Addr
				a, perr = netip.ParseAddr(e)
				p = netip.PrefixFrom(a, a.BitLen())
			}
			if perr != nil || e == "" || strings.Contains(e, "%") {
				valid = false
				continue
			}
			prefixes = append(prefixes, p)
		}
		if valid != (err == nil) {
			t.Fatalf("Parse(%q) error = %v, want error: %v", entries, err, !valid)
		}
		if err != nil {
			return
		}
		if l.AllowsAll() != all {
			t.Fatalf("AllowsAll = %v", l.AllowsAll())
		}
		contains := func(a netip.Addr) bool {
			if all {
				return true
			}
			a = a.Unmap()
			for _, p := range prefixes {
				pa := p.Addr()
				bits := p.Bits()
				if pa.Is4In6() && bits >= 96 {
					pa, bits = pa.Unmap(), bits-96
				} else if pa.Is6() && a.Is4() {
					continue // IPv6 ranges never reach IPv4 clients
				}
				if netip.PrefixFrom(pa, bits).Contains(a) {
					return true
				}
			}
			return false
		}
		for _, p := range prefixes {
			for _, a := range []netip.Addr{p.Addr(), p.Addr().Prev(), lastAddr(p), lastAddr(p).Next(), p.Addr().Unmap()} {
				if a.IsValid() && l.Contains(a) != contains(a) {
					t.Fatalf("%v.Contains(%s) = %v", entries, a, l.Contains(a))
				}
			}
		}
		// The String form parses back to an equal list when it uses no ranges.
		if str := l.String(); str != "" && !strings.Contains(str, "-") {
			l2, err := Parse(strings.Split(str, ","))
			if err != nil || l2.String() != str {
				t.Fatalf("String %q does not round-trip: %v", str, err)
			}
		}
	})
}

// FuzzClientIP checks that ClientIP never panics, returns the peer for an
// untrusted peer, otherwise returns either the peer or an address written in
// the header, and that the byte parser agrees with netip.ParseAddr.
func FuzzClientIP(f *testing.F) {
	for _, s := range []string{
		"198.51.100.1", "1.1.1.1, 198.51.100.1, 10.2.3.4", "[2001:db8::7]:443", "unknown, 10.0.0.3",
		"::ffff:1.2.3.4", "1:2:3:4:5:6:7:8", ",,, ,", "10.0.0.1:", "[::1", "::1]", "1.2.3.4:5:6",
	} {
		f.Add(s, true)
	}
	trusted := MustParse("10.0.0.0/8", "2001:db8:ffff::/48")
	f.Fuzz(func(t *testing.T, xff string, peerTrusted bool) {
		checkParseAddr(t, []byte(xff))
		peer := netip.MustParseAddr("203.0.113.1")
		if peerTrusted {
			peer = netip.MustParseAddr("10.0.0.1")
		}
		got := ClientIP(peer, []byte(xff), trusted)
		if !peerTrusted {
			if got != peer {
				t.Fatalf("untrusted peer: got %s", got)
			}
			return
		}
		if got == peer {
			return
		}
		// Otherwise got must be one of the header's entries.
		found := false
		for e := range strings.SplitSeq(xff, ",") {
			e = strings.Trim(e, " \t")
			if a, ok := parseEntry([]byte(e)); ok && e != "" && a.Unmap() == got {
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("ClientIP(%q) = %s, not in the header", xff, got)
		}
		// And nothing to its right may be untrusted and well-formed.
		i := strings.LastIndex(xff, ",")
		if i < 0 {
			return
		}
		last := bytes.Trim([]byte(xff[i+1:]), " \t")
		if a, ok := parseEntry(last); len(last) > 0 && ok && !trusted.Contains(a) && a.Unmap() != got {
			t.Fatalf("ClientIP(%q) = %s, skipped untrusted %s", xff, got, a)
		}
	})
}
