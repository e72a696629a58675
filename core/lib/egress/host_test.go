package egress

import (
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestClassifyHost(t *testing.T) {
	f := func(host string, wantKind hostKind, want string) {
		t.Helper()
		a, kind := classifyHost(host)
		if kind != wantKind {
			t.Errorf("classifyHost(%q) kind = %d, want %d", host, kind, wantKind)
			return
		}
		if kind == hostIP && a != netip.MustParseAddr(want) {
			t.Errorf("classifyHost(%q) = %s, want %s", host, a, want)
		}
	}
	ip := func(host, want string) { t.Helper(); f(host, hostIP, want) }
	name := func(host string) { t.Helper(); f(host, hostName, "") }
	bad := func(host string) { t.Helper(); f(host, hostBad, "") }

	ip("127.0.0.1", "127.0.0.1")
	ip("2130706433", "127.0.0.1")              // decimal
	ip("017700000001", "127.0.0.1")            // octal, whole
	ip("0x7f000001", "127.0.0.1")              // hex, whole
	ip("0X7F000001", "127.0.0.1")              // upper case
	ip("0177.0.0.1", "127.0.0.1")              // octal parts
	ip("0x7f.0.0.1", "127.0.0.1")              // hex parts
	ip("0x7f.0x0.0x0.0x1", "127.0.0.1")        // hex parts
	ip("0177.0x0.00.1", "127.0.0.1")           // mixed
	ip("127.1", "127.0.0.1")                   // a.b: b fills 24 bits
	ip("127.0.1", "127.0.0.1")                 // a.b.c: c fills 16 bits
	ip("10.0x10000", "10.1.0.0")               // a.b with b > 255
	ip("192.168.0x101", "192.168.1.1")         // a.b.c with c > 255
	ip("127.0.0.1.", "127.0.0.1")              // absolute
	ip("0", "0.0.0.0")                         //
	ip("0x", "0.0.0.0")                        // WHATWG: empty hex is 0
	ip("000000000000000000177.1", "127.0.0.1") // leading zeros
	ip("4294967295", "255.255.255.255")        //
	ip("1.2.3.04", "1.2.3.4")                  // netip refuses leading zeros; octal 04 is 4
	ip("1.2.3.010", "1.2.3.8")                 //
	ip("::1", "::1")                           //
	ip("::ffff:127.0.0.1", "::ffff:127.0.0.1")
	ip("::ffff:7f00:1", "::ffff:127.0.0.1")
	ip("fe80::1%eth0", "fe80::1%eth0")

	name("example.com")
	name("example.com.")
	name("localhost")
	name("1.2.3.example")
	name("example.0x1g") // not a number: a name
	name("0x1g")
	name("xn--l3cb3a7br.com")

	bad("")
	bad(".")
	bad("..")
	bad("a..b")
	bad(".example.com")
	bad("4294967296")              // 2^32
	bad("1.2.3.256")               // last part too big
	bad("1.256.3.4")               // inner part too big
	bad("1.2.16777216")            // a.b.c: c over 16 bits
	bad("1.2.3.4.5")               // five parts
	bad("08.1.1.1")                // 8 is no octal digit
	bad("0x1g.1")                  // not hex, in an address
	bad("example.1")               // ends in a number, is no address
	bad("example.0x1")             //
	bad("1.2.3.4..")               // empty label
	bad("99999999999999999999999") // overflow
	bad("::ffff:0177.0.0.1")       // no loose IPv4 inside IPv6
	bad("[::1]")
	bad("fe80::1%")
	bad("127.0.0.1%eth0")
	bad("1:2")
}

// FuzzHostClassification runs classifyHost on arbitrary hosts: it must not
// panic, and its verdict must agree with refClassify, which reaches the same
// answer by another route (strings.Split, a regexp and strconv for IPv4
// spellings; package net for IPv6). Every host it calls an address is also
// judged by the policy against refAllowed.
func FuzzHostClassification(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1", "2130706433", "0177.0.0.1", "0x7f.0.0.1", "127.1", "127.0.1",
		"0x7F000001", "017700000001", "127.0.0.1.", "0", "0x", "0x.0x", "00", "08",
		"1.2.3.256", "1.2.3.4.5", "example.com", "example.1", "example.0x1g",
		"::1", "::ffff:127.0.0.1", "[::1]", "fe80::1%eth0", "fe80::1%", "a..b", ".",
		"4294967295", "4294967296", "99999999999999999999", "1.0x1000000", "1.0xffffff",
		"255.255.65535", "255.255.65536", "::ffff:0177.0.0.1", "1.2.3.04", "0xffffffff", "::%[", "1.2.3.4%a:b",
	} {
		f.Add(s)
	}
	var p Policy
	f.Fuzz(func(t *testing.T, host string) {
		a, kind := classifyHost(host)
		ra, rkind := refClassify(host)
		if kind != rkind {
			t.Fatalf("classifyHost(%q) kind = %d, reference %d", host, kind, rkind)
		}
		if kind != hostIP {
			return
		}
		if a != ra {
			t.Fatalf("classifyHost(%q) = %s, reference %s", host, a, ra)
		}
		if got, want := p.Allowed(a), refAllowed(a); got != want {
			t.Fatalf("Allowed(%s) (host %q) = %v, reference %v", a, host, got, want)
		}
	})
}

// refEndsInNumber is the WHATWG "ends in a number" test as a regexp.
var refEndsInNumber = regexp.MustCompile(`^(?:[0-9]+|0[xX][0-9a-fA-F]*)$`)

// refClassify is classifyHost written another way.
func refClassify(host string) (netip.Addr, hostKind) {
	if host == "" {
		return netip.Addr{}, hostBad
	}
	if strings.Contains(host, ":") {
		addr, zone, hasZone := strings.Cut(host, "%")
		ip := net.ParseIP(addr)
		if ip == nil || (hasZone && zone == "") { // a zone may hold anything
			return netip.Addr{}, hostBad
		}
		if ip4 := ip.To4(); ip4 != nil && !strings.Contains(addr, ":") {
			return netip.Addr{}, hostBad
		}
		a := netip.AddrFrom16([16]byte(ip.To16()))
		if hasZone {
			a = a.WithZone(zone)
		}
		return a, hostIP
	}
	if strings.ContainsAny(host, "%[]") {
		return netip.Addr{}, hostBad
	}
	labels := strings.Split(host, ".")
	if len(labels) > 1 && labels[len(labels)-1] == "" {
		labels = labels[:len(labels)-1]
	}
	for _, l := range labels {
		if l == "" {
			return netip.Addr{}, hostBad
		}
	}
	if !refEndsInNumber.MatchString(labels[len(labels)-1]) {
		return netip.Addr{}, hostName
	}
	if len(labels) > 4 {
		return netip.Addr{}, hostBad
	}
	vals := make([]uint64, len(labels))
	for i, l := range labels {
		var (
			v   uint64
			err error
		)
		switch {
		case strings.HasPrefix(strings.ToLower(l), "0x"):
			if l[2:] != "" {
				v, err = strconv.ParseUint(l[2:], 16, 32)
			}
		case len(l) > 1 && l[0] == '0':
			v, err = strconv.ParseUint(l[1:], 8, 32)
		default:
			v, err = strconv.ParseUint(l, 10, 32)
		}
		if err != nil {
			return netip.Addr{}, hostBad
		}
		vals[i] = v
	}
	n := len(vals)
	limit := uint64(1)
	for range 5 - n {
		limit *= 256
	}
	total := vals[n-1]
	if total >= limit {
		return netip.Addr{}, hostBad
	}
	scale := uint64(256 * 256 * 256)
	for _, v := range vals[:n-1] {
		if v > 255 {
			return netip.Addr{}, hostBad
		}
		total += v * scale
		scale /= 256
	}
	return netip.AddrFrom4([4]byte{byte(total / (1 << 24)), byte(total / (1 << 16)), byte(total / (1 << 8)), byte(total)}), hostIP
}

// TestHostKey: every spelling of one server is one key, so a bound per
// server cannot be passed by spelling its address another way.
func TestHostKey(t *testing.T) {
	for want, urls := range map[string][]string{
		"127.0.0.1:443": {"https://127.0.0.1/h", "https://127.1/h", "https://2130706433/h", "https://0x7f000001/h",
			"https://0177.0.0.1/h", "https://127.0.0.1./h", "https://127.0.1/h", "https://0x7f.1/h", "https://127.0.0.1:443/h"},
		"example.com:443": {"https://example.com/a", "https://EXAMPLE.com./b", "https://Example.Com:443/c", "https://example.com:0443/d",
			"https://ｅｘａｍｐｌｅ.com/e", "https://ＥＸＡＭＰＬＥ．ｃｏｍ/f", "https://exａmple.com:443/g"},
		"xn--bcher-kva.example:443": {"https://bücher.example/", "https://xn--bcher-kva.example/", "https://BÜCHER.example/",
			"https://XN--BCHER-KVA.example/"},
		"127.0.0.2:443":    {"https://１２７．０．０．２/", "https://127.0.0.2/"},
		"example.com:8443": {"https://example.com:8443/"},
		"[::1]:443":        {"https://[::1]/", "https://[0:0::1]/"},
	} {
		for _, u := range urls {
			if got := HostKey(u); got != want {
				t.Errorf("HostKey(%s) = %s, want %s", u, got, want)
			}
		}
	}
}
