package iplist

import (
	"net/netip"
	"strings"
	"testing"
)

func TestClientIP(t *testing.T) {
	trusted := MustParse("10.0.0.0/8", "2001:db8:ffff::/48")
	f := func(peer, xff, want string) {
		t.Helper()
		var h []byte
		if xff != "-" {
			h = []byte(xff)
		}
		got := ClientIP(netip.MustParseAddr(peer), h, trusted)
		if got != netip.MustParseAddr(want) {
			t.Errorf("ClientIP(%s, %q) = %s, want %s", peer, xff, got, want)
		}
	}
	// An untrusted peer is the client, whatever it claims.
	f("203.0.113.9", "-", "203.0.113.9")
	f("203.0.113.9", "198.51.100.1", "203.0.113.9")
	f("::ffff:203.0.113.9", "198.51.100.1", "203.0.113.9")
	// A trusted peer without the header: the peer (a health check, say).
	f("10.0.0.1", "-", "10.0.0.1")
	f("10.0.0.1", "", "10.0.0.1")
	f("10.0.0.1", " , ,", "10.0.0.1")
	// The right-most untrusted address; anything left of it is the client's word.
	f("10.0.0.1", "198.51.100.1", "198.51.100.1")
	f("10.0.0.1", "1.1.1.1, 198.51.100.1", "198.51.100.1")
	f("10.0.0.1", "1.1.1.1,198.51.100.1, 10.2.3.4", "198.51.100.1")
	f("10.0.0.1", "1.1.1.1,198.51.100.1,\t10.2.3.4 ,10.9.9.9", "198.51.100.1")
	f("::ffff:10.0.0.1", "198.51.100.1", "198.51.100.1")
	f("2001:db8:ffff::1", "2001:db8::7, 2001:db8:ffff::2", "2001:db8::7")
	f("10.0.0.1", "::ffff:198.51.100.1", "198.51.100.1")
	f("10.0.0.1", "::ffff:10.1.1.1, 198.51.100.1", "198.51.100.1")
	// A client-forged trusted address left of the real one changes nothing.
	f("10.0.0.1", "10.6.6.6, 198.51.100.1", "198.51.100.1")
	// Every entry trusted: the left-most, the origin inside the network.
	f("10.0.0.1", "10.0.0.5, 10.0.0.6", "10.0.0.5")
	// Ports and brackets.
	f("10.0.0.1", "198.51.100.1:4711", "198.51.100.1")
	f("10.0.0.1", "[2001:db8::7]:443", "2001:db8::7")
	f("10.0.0.1", "[2001:db8::7]", "2001:db8::7")
	f("10.0.0.1", "garbage, [2001:db8::7]:443, 10.0.0.3:1", "2001:db8::7")
	// Malformed entries end the walk at the nearest hop still vouched for.
	f("10.0.0.1", "unknown", "10.0.0.1")
	f("10.0.0.1", "198.51.100.1, unknown", "10.0.0.1")
	f("10.0.0.1", "198.51.100.1, unknown, 10.0.0.7", "10.0.0.7")
	f("10.0.0.1", "198.51.100.1, 10.0.0.7 10.0.0.8", "10.0.0.1")
	f("10.0.0.1", "198.51.100.1, fe80::1%eth0", "10.0.0.1")
	f("10.0.0.1", "198.51.100.1, [198.51.100.2]", "10.0.0.1")
	f("10.0.0.1", "198.51.100.1, 198.51.100.2:99999x", "10.0.0.1")
	f("10.0.0.1", "198.51.100.1, 2001:db8::1:443", "2001:db8::1:443") // a valid IPv6 address, not a port
	f("10.0.0.1", "198.51.100.1, 198.51.100.01", "10.0.0.1")
	// Malformed entries beyond the answer are never read.
	f("10.0.0.1", "%%%, 198.51.100.1", "198.51.100.1")
	// The peer's zone is dropped.
	f("fe80::1%eth0", "-", "fe80::1")
}

func TestClientIPAllocs(t *testing.T) {
	trusted := MustParse("10.0.0.0/8", "2001:db8:ffff::/48")
	peer := netip.MustParseAddr("10.0.0.1")
	for _, xff := range []string{
		"1.1.1.1, 198.51.100.1, 10.2.3.4",
		"[2001:db8::7]:443, 10.0.0.3",
		"unknown, 10.0.0.3",
		"2001:db8::ffff:1.2.3.4",
		strings.Repeat("10.0.0.9,", 50),
	} {
		h := []byte(xff)
		if n := testing.AllocsPerRun(1000, func() { ClientIP(peer, h, trusted) }); n != 0 {
			t.Errorf("ClientIP(%q) allocates %v times", xff, n)
		}
	}
}

func TestParseAddrAgreesWithNetip(t *testing.T) {
	for _, s := range []string{
		"0.0.0.0", "255.255.255.255", "1.2.3.4", "01.2.3.4", "1.2.3", "1.2.3.4.5", "1..2.3", ".1.2.3", "1.2.3.",
		"256.1.1.1", "1.2.3.4 ", "", ".", ":", "::", ":::", "::1", "1::", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9",
		"1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8", "1:2:3:4:5:6::7:8", "1::2::3", "12345::", "::ffff:1.2.3.4",
		"1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:1.2.3.4", "::1.2.3.4", "1.2.3.4::", "::1.2.3.4:5", "1:2:3:4:5:6:7:1.2.3.4",
		"fe80::1%eth0", "%", "ABCD:ef01::", "g::", "1:", ":1", "1:::2", "::ffff:01.2.3.4", "0::0", "0000:0000::0000",
		"1:2:3:4:5:6:7::8", "1:2:3:4:5:6:7:8::", "::1:2:3:4:5:6:7:8", "::1:2:3:4:5:6:7",
	} {
		checkParseAddr(t, []byte(s))
	}
}

func checkParseAddr(t *testing.T, b []byte) {
	t.Helper()
	got, ok := parseAddr(b)
	want, err := netip.ParseAddr(string(b))
	if err == nil && want.Zone() != "" {
		if ok {
			t.Fatalf("parseAddr(%q) accepted a zone", b)
		}
		return
	}
	if ok != (err == nil) || got != want {
		t.Fatalf("parseAddr(%q) = %v, %v; netip.ParseAddr: %v, %v", b, got, ok, want, err)
	}
}

func BenchmarkClientIP(b *testing.B) {
	trusted := MustParse("10.0.0.0/8", "172.16.0.0/12", "2001:db8:ffff::/48")
	peer := netip.MustParseAddr("10.0.0.1")
	for _, c := range []struct{ name, xff string }{
		{"untrusted-peer", ""},
		{"one-hop", "198.51.100.1"},
		{"three-hops", "203.0.113.50, 198.51.100.1, 10.2.3.4, 172.16.0.9"},
		{"ipv6", "2001:db8::7, 2001:db8:ffff::2"},
	} {
		h := []byte(c.xff)
		p := peer
		if c.name == "untrusted-peer" {
			p = netip.MustParseAddr("198.51.100.1")
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ClientIP(p, h, trusted)
			}
		})
	}
}
