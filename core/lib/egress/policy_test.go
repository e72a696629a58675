package egress

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// TestAllowedRanges walks every blocked range of the default policy: its
// first and last address and its public neighbours.
func TestAllowedRanges(t *testing.T) {
	var p Policy // the default: public unicast only
	f := func(addr string, want bool) {
		t.Helper()
		a, err := netip.ParseAddr(addr)
		if err != nil {
			t.Fatalf("bad test address %q: %v", addr, err)
		}
		if got := p.Allowed(a); got != want {
			t.Errorf("Allowed(%s) = %v, want %v", addr, got, want)
		}
	}
	blocked := func(addr string) { t.Helper(); f(addr, false) }
	public := func(addr string) { t.Helper(); f(addr, true) }

	// unspecified / "this network" 0.0.0.0/8
	blocked("0.0.0.0")
	blocked("0.255.255.255")
	public("1.0.0.0")
	// RFC 1918
	blocked("10.0.0.0")
	blocked("10.255.255.255")
	public("9.255.255.255")
	public("11.0.0.0")
	blocked("172.16.0.0")
	blocked("172.31.255.255")
	public("172.15.255.255")
	public("172.32.0.0")
	blocked("192.168.0.0")
	blocked("192.168.255.255")
	public("192.167.255.255")
	public("192.169.0.0")
	// CGNAT 100.64.0.0/10
	blocked("100.64.0.0")
	blocked("100.127.255.255")
	public("100.63.255.255")
	public("100.128.0.0")
	// loopback
	blocked("127.0.0.1")
	blocked("127.0.0.2")
	blocked("127.255.255.255")
	public("126.255.255.255")
	public("128.0.0.0")
	// link-local, cloud metadata
	blocked("169.254.0.0")
	blocked("169.254.169.254")
	blocked("169.254.255.255")
	public("169.253.255.255")
	public("169.255.0.0")
	// 192.0.0.0/24 IETF protocol assignments, 192.0.2.0/24 TEST-NET-1
	blocked("192.0.0.0")
	blocked("192.0.0.170")
	blocked("192.0.0.255")
	public("192.0.1.0")
	blocked("192.0.2.0")
	blocked("192.0.2.255")
	public("192.0.3.0")
	// 6to4 relay anycast
	blocked("192.88.99.1")
	public("192.88.98.255")
	public("192.88.100.0")
	// benchmarking 198.18.0.0/15
	blocked("198.18.0.0")
	blocked("198.19.255.255")
	public("198.17.255.255")
	public("198.20.0.0")
	// TEST-NET-2, TEST-NET-3
	blocked("198.51.100.0")
	blocked("198.51.100.255")
	public("198.51.99.255")
	public("198.51.101.0")
	blocked("203.0.113.0")
	blocked("203.0.113.255")
	public("203.0.112.255")
	public("203.0.114.0")
	// multicast, reserved, broadcast
	blocked("224.0.0.0")
	blocked("224.0.0.1")
	blocked("239.255.255.255")
	public("223.255.255.255")
	blocked("240.0.0.0")
	blocked("254.255.255.255")
	blocked("255.255.255.255")
	// ordinary public addresses
	public("8.8.8.8")
	public("1.1.1.1")
	public("157.240.1.35")

	// IPv6 unspecified, loopback, IPv4-compatible ::/96
	blocked("::")
	blocked("::1")
	blocked("::7f00:1")
	blocked("::8.8.8.8")
	blocked("::ffff:ffff")
	// IPv4-mapped: blocked outright, even for a public IPv4 address
	blocked("::ffff:0:0")
	blocked("::ffff:127.0.0.1")
	blocked("::ffff:10.0.0.1")
	blocked("::ffff:8.8.8.8")
	blocked("::ffff:255.255.255.255")
	// SIIT ::ffff:0:0:0/96
	blocked("::ffff:0:808:808")
	// NAT64
	blocked("64:ff9b::")
	blocked("64:ff9b::808:808")
	blocked("64:ff9b::ffff:ffff")
	blocked("64:ff9b:1::1")
	blocked("64:ff9b:1:ffff:ffff:ffff:ffff:ffff")
	// discard 100::/64
	blocked("100::")
	blocked("100::ffff:ffff:ffff:ffff")
	// below 2000::/3
	blocked("1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")
	public("2000::1")
	// 2001::/23 IETF assignments: Teredo 2001::/32, benchmarking 2001:2::/48
	blocked("2001::")
	blocked("2001::1")
	blocked("2001:0:ffff:ffff:ffff:ffff:ffff:ffff")
	blocked("2001:2::1")
	blocked("2001:10::1")
	blocked("2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff")
	public("2001:200::1")
	public("2001:4860:4860::8888")
	// documentation 2001:db8::/32, 3fff::/20
	blocked("2001:db8::")
	blocked("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff")
	public("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff")
	public("2001:db9::")
	blocked("3fff::")
	blocked("3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff")
	public("3fff:1000::")
	public("3ffe:ffff::1")
	// 6to4 2002::/16
	blocked("2002::")
	blocked("2002:7f00:1::1")
	blocked("2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff")
	public("2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff")
	public("2003::1")
	public("2606:4700:4700::1111")
	// above 2000::/3
	blocked("4000::1")
	blocked("5f00::1")
	// unique-local fc00::/7
	blocked("fc00::")
	blocked("fd12:3456:789a::1")
	blocked("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")
	// link-local fe80::/10, site-local fec0::/10
	blocked("fe80::")
	blocked("fe80::1")
	blocked("febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff")
	blocked("fec0::1")
	blocked("feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")
	// multicast ff00::/8
	blocked("ff00::")
	blocked("ff02::1")
	blocked("ff0e::1")
	blocked("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")
	// zones
	blocked("fe80::1%eth0")
	blocked("2606:4700:4700::1111%eth0")

	if p.Allowed(netip.Addr{}) {
		t.Error("Allowed(zero Addr) = true")
	}
}

// TestAllowedAllowList checks the allow list's reach: it opens exactly what
// it names, never a mapped form it does not name, never a zone.
func TestAllowedAllowList(t *testing.T) {
	f := func(allow, addr string, want bool) {
		t.Helper()
		pfx, err := ParsePrefixes(allow)
		if err != nil {
			t.Fatal(err)
		}
		p := NewPolicy(pfx)
		if got := p.Allowed(netip.MustParseAddr(addr)); got != want {
			t.Errorf("allow %q: Allowed(%s) = %v, want %v", allow, addr, got, want)
		}
	}
	f("127.0.0.1/32", "127.0.0.1", true)
	f("127.0.0.1/32", "127.0.0.2", false)
	f("127.0.0.1/32", "::ffff:127.0.0.1", false)
	f("127.0.0.1/32", "8.8.8.8", true) // public stays public
	f("127.0.0.0/8", "127.9.9.9", true)
	f("127.0.0.0/8", "::ffff:127.9.9.9", false)
	f("127.0.0.0/8", "::1", false)
	f("127.0.0.0/8, ::ffff:127.0.0.1", "::ffff:127.0.0.1", true)
	f("127.0.0.0/8, ::ffff:127.0.0.1", "::ffff:127.0.0.2", false)
	f("::ffff:10.0.0.0/104", "::ffff:10.1.2.3", true)
	f("::ffff:10.0.0.0/104", "10.1.2.3", false)
	f("10.0.0.0/8", "10.1.2.3", true)
	f("10.0.0.0/8", "::ffff:10.1.2.3", false)
	f("10.0.0.0/8", "2002:a01:203::1", false) // 6to4 of 10.1.2.3
	f("fe80::/10", "fe80::1", true)
	f("fe80::/10", "fe80::1%eth0", false)
	f("fd00::/8", "fd00::1", true)
	f("fd00::/8", "fc00::1", false)
	f("10.1.2.3/8", "10.200.0.1", true) // masked
	f("", "10.0.0.1", false)

	// reachable: a socket to a.b.c.d is fine when ::ffff:a.b.c.d is allowed.
	p := NewPolicy([]netip.Prefix{netip.MustParsePrefix("::ffff:127.0.0.1/128")})
	if !p.reachable(netip.MustParseAddr("127.0.0.1")) {
		t.Error("reachable(127.0.0.1) = false with ::ffff:127.0.0.1 allowed")
	}
	if p.reachable(netip.MustParseAddr("127.0.0.2")) {
		t.Error("reachable(127.0.0.2) = true")
	}
	if (Policy{}).reachable(netip.MustParseAddr("127.0.0.1")) {
		t.Error("default policy: reachable(127.0.0.1) = true")
	}
}

func TestParsePrefixes(t *testing.T) {
	got, err := ParsePrefixes(" 127.0.0.0/8 ,::1,\t10.1.2.3/8,, 192.168.1.7 ,")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("127.0.0.0/8"),
		netip.MustParsePrefix("::1/128"),
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("192.168.1.7/32"),
	}
	if len(got) != len(want) {
		t.Fatalf("ParsePrefixes = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("item %d = %v, want %v", i, got[i], want[i])
		}
	}

	if got, err := ParsePrefixes("  "); err != nil || got != nil {
		t.Errorf("ParsePrefixes(blank) = %v, %v; want nil, nil", got, err)
	}

	_, err = ParsePrefixes("bad, 10.0.0.0/33, 127.0.0.1, fe80::1%eth0, 1.2.3.4/x")
	if err == nil {
		t.Fatal("ParsePrefixes accepted bad items")
	}
	for _, item := range []string{`"bad"`, `"10.0.0.0/33"`, `"fe80::1%eth0"`, `"1.2.3.4/x"`} {
		if !strings.Contains(err.Error(), item) {
			t.Errorf("error does not report %s: %v", item, err)
		}
	}
	if strings.Contains(err.Error(), `"127.0.0.1"`) {
		t.Errorf("error reports a good item: %v", err)
	}
}

// refBlocked is the default block list again, as text for net.ParseCIDR:
// the reference is reached through package net, not netip.
var refBlocked = func() (nets []*net.IPNet) {
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
		"198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
		"2001::/23", "2001:db8::/32", "2002::/16", "3fff::/20",
	} {
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			panic(err)
		}
		nets = append(nets, n)
	}
	return nets
}()

// refAllowed is the default policy computed another way: on net.IP bytes,
// IPv6 outside 2000::/3 by its top three bits.
func refAllowed(a netip.Addr) bool {
	if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
		return false
	}
	ip := net.IP(a.AsSlice())
	if len(ip) == net.IPv6len && ip[0]>>5 != 1 {
		return false
	}
	for _, n := range refBlocked {
		if len(n.IP) == len(ip) && n.Contains(ip) {
			return false
		}
	}
	return true
}

// TestAllowedMatchesReference compares Allowed with refAllowed on random
// addresses and on addresses around every range boundary.
func TestAllowedMatchesReference(t *testing.T) {
	var p Policy
	check := func(a netip.Addr) {
		t.Helper()
		if got, want := p.Allowed(a), refAllowed(a); got != want {
			t.Fatalf("Allowed(%s) = %v, reference %v", a, got, want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 50000 {
		var b4 [4]byte
		var b16 [16]byte
		for i := range b4 {
			b4[i] = byte(r.Uint32())
		}
		for i := range b16 {
			b16[i] = byte(r.Uint32())
		}
		check(netip.AddrFrom4(b4))
		check(netip.AddrFrom16(b16))
		b16[0] = 0x20 | b16[0]&0x1f // inside 2000::/3, where the special ranges are
		check(netip.AddrFrom16(b16))
		check(netip.AddrFrom16(b16).WithZone("eth0"))
		check(netip.AddrFrom4(b4).Unmap())
		check(netip.AddrFrom16(netip.AddrFrom4(b4).As16())) // mapped
	}
	var bounds []netip.Prefix
	bounds = append(bounds, blocked4[:]...)
	bounds = append(bounds, blocked6[:]...)
	bounds = append(bounds, global6,
		netip.MustParsePrefix("::ffff:0:0/96"), netip.MustParsePrefix("64:ff9b::/96"),
		netip.MustParsePrefix("fc00::/7"), netip.MustParsePrefix("fe80::/10"))
	for _, pf := range bounds {
		first := pf.Masked().Addr()
		last := first
		for i := pf.Bits(); i < first.BitLen(); i++ {
			last = setBit(last, i)
		}
		for _, a := range []netip.Addr{first, last, first.Prev(), last.Next(), first.Next(), last.Prev()} {
			if a.IsValid() {
				check(a)
			}
		}
	}
}

func setBit(a netip.Addr, i int) netip.Addr {
	if a.Is4() {
		b := a.As4()
		b[i/8] |= 0x80 >> (i % 8)
		return netip.AddrFrom4(b)
	}
	b := a.As16()
	b[i/8] |= 0x80 >> (i % 8)
	return netip.AddrFrom16(b)
}

var benchAddrs = []netip.Addr{
	netip.MustParseAddr("8.8.8.8"),
	netip.MustParseAddr("127.0.0.1"),
	netip.MustParseAddr("203.0.113.9"),
	netip.MustParseAddr("2606:4700:4700::1111"),
	netip.MustParseAddr("::ffff:10.0.0.1"),
	netip.MustParseAddr("fe80::1%eth0"),
}

// TestAllowedAllocs guards the fast path: judging an address allocates
// nothing.
func TestAllowedAllocs(t *testing.T) {
	p := NewPolicy([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("fd00::/8")})
	n := testing.AllocsPerRun(100, func() {
		for _, a := range benchAddrs {
			p.Allowed(a)
			p.reachable(a)
		}
	})
	if n != 0 {
		t.Errorf("Allowed allocates %v times per run", n)
	}
}

func BenchmarkAllowed(b *testing.B) {
	p := NewPolicy([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("fd00::/8")})
	for _, a := range benchAddrs {
		b.Run(a.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Allowed(a)
			}
		})
	}
}
