package iplist

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestContains(t *testing.T) {
	l := MustParse(
		"203.0.113.7",
		"198.51.100.0/24",
		" 10.0.0.0/8 ",
		"2001:db8::1",
		"2001:db8:100::/40",
		"::ffff:192.0.2.128/121", // mapped form of 192.0.2.128/25
	)
	f := func(addr string, want bool) {
		t.Helper()
		if got := l.Contains(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Contains(%s) = %v, want %v", addr, got, want)
		}
	}
	f("203.0.113.7", true)
	f("203.0.113.6", false)
	f("203.0.113.8", false)
	f("198.51.100.0", true)
	f("198.51.100.255", true)
	f("198.51.101.0", false)
	f("198.51.99.255", false)
	f("10.255.255.255", true)
	f("11.0.0.0", false)
	f("9.255.255.255", false)
	f("192.0.2.128", true)
	f("192.0.2.255", true)
	f("192.0.2.127", false)
	// IPv4-mapped IPv6 peers match IPv4 entries.
	f("::ffff:203.0.113.7", true)
	f("::ffff:10.1.2.3", true)
	f("::ffff:203.0.113.9", false)
	f("2001:db8::1", true)
	f("2001:db8::2", false)
	f("2001:db8:100::", true)
	f("2001:db8:1ff:ffff:ffff:ffff:ffff:ffff", true)
	f("2001:db8:200::", false)
	f("2001:db8:ff:ffff:ffff:ffff:ffff:ffff", false)
	f("fe80::1%eth0", false)
	f("2001:db8::1%eth0", true) // the zone does not change the address
	// IPv4 entries do not cover the IPv4-compatible (deprecated) ::a.b.c.d.
	f("::203.0.113.7", false)

	if l.Contains(netip.Addr{}) {
		t.Error("the invalid Addr is in a list")
	}
}

func TestContainsEdges(t *testing.T) {
	f := func(entries []string, addr string, want bool) {
		t.Helper()
		l := MustParse(entries...)
		if got := l.Contains(netip.MustParseAddr(addr)); got != want {
			t.Errorf("%v.Contains(%s) = %v, want %v", entries, addr, got, want)
		}
	}
	f([]string{"0.0.0.0/0"}, "255.255.255.255", true)
	f([]string{"0.0.0.0/0"}, "0.0.0.0", true)
	f([]string{"0.0.0.0/0"}, "::1", false)
	f([]string{"::/0"}, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true)
	f([]string{"::/0"}, "::", true)
	f([]string{"::/0"}, "192.0.2.1", false) // ::/0 is every IPv6 address, not IPv4
	f([]string{"::/0"}, "::ffff:192.0.2.1", false)
	f([]string{"255.255.255.255"}, "255.255.255.255", true)
	f([]string{"255.255.255.0/24", "255.255.255.255"}, "255.255.255.254", true)
	f([]string{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true)
	f([]string{"ffff:ffff:ffff:ffff::/64", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}, "ffff:ffff:ffff:ffff::9", true)
	f([]string{"2001:db8::/127"}, "2001:db8::1", true)
	f([]string{"2001:db8::/127"}, "2001:db8::2", false)
	f([]string{"2001:db8::/64"}, "2001:db8::ffff:ffff:ffff:ffff", true)
	f([]string{"2001:db8::/64"}, "2001:db8:0:1::", false)
	f([]string{"2001:db8::/65"}, "2001:db8::7fff:ffff:ffff:ffff", true)
	f([]string{"2001:db8::/65"}, "2001:db8::8000:0:0:0", false)
	f([]string{"*"}, "192.0.2.1", true)
	f([]string{"*"}, "2001:db8::1", true)
	f(nil, "192.0.2.1", false)
	// Overlapping and adjacent entries merge without losing anything.
	f([]string{"10.0.0.0/24", "10.0.1.0/24", "10.0.0.128/25", "10.0.3.0/24"}, "10.0.1.200", true)
	f([]string{"10.0.0.0/24", "10.0.1.0/24", "10.0.0.128/25", "10.0.3.0/24"}, "10.0.2.1", false)
	f([]string{"10.0.0.0/24", "10.0.1.0/24", "10.0.0.128/25", "10.0.3.0/24"}, "10.0.3.1", true)
}

// TestContainsAgainstPrefixes checks the merged, binary-searched ranges
// against the obvious linear scan over many random-ish prefixes.
func TestContainsAgainstPrefixes(t *testing.T) {
	var entries []string
	var prefixes []netip.Prefix
	x := uint32(2463534242)
	next := func() uint32 { x ^= x << 13; x ^= x >> 17; x ^= x << 5; return x }
	for range 300 {
		v := next()
		var p netip.Prefix
		if v%3 == 0 {
			var b [16]byte
			for i := range b {
				b[i] = byte(next())
			}
			b[0], b[1] = 0x20, 0x01
			p = netip.PrefixFrom(netip.AddrFrom16(b), 16+int(next()%113)).Masked()
		} else {
			p = netip.PrefixFrom(addr4(next()&0x0fffffff), 8+int(next()%25)).Masked()
		}
		prefixes = append(prefixes, p)
		entries = append(entries, p.String())
	}
	l := MustParse(entries...)
	for range 20000 {
		var a netip.Addr
		if next()%2 == 0 {
			a = addr4(next() & 0x0fffffff)
		} else {
			p := prefixes[next()%uint32(len(prefixes))]
			a = p.Addr()
			if next()%2 == 0 {
				a = lastAddr(p)
			}
			if n := next() % 3; n == 1 {
				a = a.Next()
			} else if n == 2 {
				a = a.Prev()
			}
			if !a.IsValid() {
				continue
			}
		}
		want := false
		for _, p := range prefixes {
			if p.Contains(a) {
				want = true
				break
			}
		}
		if got := l.Contains(a); got != want {
			t.Fatalf("Contains(%s) = %v, want %v", a, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	_, err := Parse([]string{
		"192.0.2.1",      // 0 ok
		"",               // 1 empty
		"192.0.2.256",    // 2
		"10.0.0.1/8",     // 3 host bits
		"fe80::1%eth0",   // 4 zone
		"2001:db8::/129", // 5
		"localhost",      // 6
		"*",              // 7 ok
		"192.0.2.0/24",   // 8 ok
		"01.2.3.4",       // 9 leading zero
		"1.2.3.4/ 8",     // 10
		"**",             // 11
	})
	if err == nil {
		t.Fatal("no error")
	}
	var bad []int
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ee *EntryError
		if !errors.As(e, &ee) {
			t.Fatalf("%v is not an *EntryError", e)
		}
		bad = append(bad, ee.Index)
		if !strings.Contains(e.Error(), ee.Text) && ee.Text != "" {
			t.Errorf("%q does not quote the entry", e)
		}
	}
	want := []int{1, 2, 3, 4, 5, 6, 9, 10, 11}
	if len(bad) != len(want) {
		t.Fatalf("bad entries %v, want %v (%v)", bad, want, err)
	}
	for i := range want {
		if bad[i] != want[i] {
			t.Fatalf("bad entries %v, want %v", bad, want)
		}
	}
	if !errors.Is(err, ErrHostBits) || !errors.Is(err, ErrZone) || !errors.Is(err, ErrEmpty) || !errors.Is(err, ErrSyntax) {
		t.Errorf("reasons missing from %v", err)
	}
	if !strings.Contains(err.Error(), `entry 3 "10.0.0.1/8": CIDR range has host bits set (did you mean 10.0.0.0/8 or 10.0.0.1/32?)`) {
		t.Errorf("message: %v", err)
	}
}

func TestEmptyAllowsAllString(t *testing.T) {
	var zero List
	if !zero.Empty() || zero.AllowsAll() {
		t.Error("zero List")
	}
	all := MustParse("*")
	if all.Empty() || !all.AllowsAll() {
		t.Error("*")
	}
	l := MustParse("10.0.1.0/24", "10.0.0.0/24", "192.0.2.1", "192.0.2.3", "2001:db8::/33", "2001:db8:8000::/33", "::1", "*")
	if l.Empty() {
		t.Error("non-empty list is Empty")
	}
	want := "*,10.0.0.0/23,192.0.2.1,192.0.2.3,::1,2001:db8::/32"
	if got := l.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := MustParse("10.0.0.0/24", "10.0.1.0/25").String(); got != "10.0.0.0-10.0.1.127" {
		t.Errorf("String() = %q", got)
	}
}

func TestContainsAllocs(t *testing.T) {
	l := MustParse("10.0.0.0/8", "192.0.2.0/24", "2001:db8::/32", "203.0.113.7")
	a4 := netip.MustParseAddr("192.0.2.77")
	a6 := netip.MustParseAddr("2001:db8::77")
	m := netip.MustParseAddr("::ffff:192.0.2.77")
	if n := testing.AllocsPerRun(1000, func() {
		if !l.Contains(a4) || !l.Contains(a6) || !l.Contains(m) {
			t.Fatal("miss")
		}
	}); n != 0 {
		t.Errorf("Contains allocates %v times", n)
	}
}

func BenchmarkContains(b *testing.B) {
	small := MustParse("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "2001:db8::/32")
	var many []string
	for i := range 1000 {
		many = append(many, addr4(uint32(i)<<12).String()+"/24")
	}
	large := MustParse(many...)
	a4 := netip.MustParseAddr("192.168.7.9")
	a6 := netip.MustParseAddr("2001:db8::9")
	miss := netip.MustParseAddr("203.0.113.7")
	b.Run("small/v4", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			small.Contains(a4)
		}
	})
	b.Run("small/v6", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			small.Contains(a6)
		}
	})
	b.Run("1000/miss", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			large.Contains(miss)
		}
	})
}
