// Package iplist holds IP allow lists and trusted-proxy lists, and picks the
// client address of a request from its peer and X-Forwarded-For header.
//
// A List is parsed once (from a branch's ipAllow field or from
// SLIP_TRUSTED_PROXIES) and then only read, so it is safe for concurrent use
// without locks. Contains and ClientIP are on the request path of every call
// and allocate nothing.
package iplist

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// List is a set of IPv4 and IPv6 addresses: exact addresses, CIDR ranges, or
// everything ("*"). The zero List contains nothing.
//
// Entries are kept as sorted, merged, non-overlapping ranges per family, so
// Contains is a binary search whatever the length of the list.
type List struct {
	all bool
	v4  []range4
	v6  []range6
}

type range4 struct{ lo, hi uint32 }

// u128 is an IPv6 address as a big-endian 128-bit integer.
type u128 struct{ hi, lo uint64 }

type range6 struct{ lo, hi u128 }

// EntryError reports one bad entry of the list given to Parse. Index is the
// entry's position in that list (from 0) and Text the entry as given, so an
// API can name the failing field ("ipAllow[2]").
type EntryError struct {
	Index int
	Text  string
	Err   error
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("entry %d %q: %v", e.Index, e.Text, e.Err)
}

func (e *EntryError) Unwrap() error { return e.Err }

// Reasons an entry is refused, wrapped in EntryError.
var (
	ErrEmpty    = errors.New("empty entry")
	ErrSyntax   = errors.New(`not an IP address, a CIDR range or "*"`)
	ErrZone     = errors.New("IPv6 zones are not allowed")
	ErrHostBits = errors.New("CIDR range has host bits set")
)

// Parse builds a List from entries. Each entry is an exact IPv4 or IPv6
// address ("203.0.113.7", "2001:db8::1"), a CIDR range ("203.0.113.0/24",
// "2001:db8::/32") or "*" (every address). Surrounding spaces are ignored.
//
// Parse refuses, rather than guesses at, entries a person probably mistyped:
// a range with host bits set ("10.0.0.1/8": did they mean 10.0.0.0/8 or
// 10.0.0.1/32?), an IPv6 zone ("fe80::1%eth0"), and empty entries. Every bad
// entry is reported, each as an *EntryError, joined with errors.Join; the List
// is then the zero List.
//
// IPv4-mapped IPv6 entries ("::ffff:192.0.2.1", "::ffff:192.0.2.0/120") are
// stored as the IPv4 entries they denote. IPv6 ranges shorter than /96 do not
// reach IPv4 clients: "::/0" means every IPv6 address, not every address.
//
// Parse(nil) returns the zero List, which contains nothing; whether an empty
// allow list means "nobody" or "no restriction" is the caller's decision
// (Empty tells the two apart from "*").
func Parse(entries []string) (List, error) {
	var (
		l    List
		errs []error
	)
	for i, raw := range entries {
		s := strings.TrimSpace(raw)
		bad := func(err error) { errs = append(errs, &EntryError{Index: i, Text: raw, Err: err}) }
		switch {
		case s == "":
			bad(ErrEmpty)
			continue
		case s == "*":
			l.all = true
			continue
		case strings.Contains(s, "%"):
			bad(ErrZone)
			continue
		}
		var p netip.Prefix
		if strings.Contains(s, "/") {
			var err error
			if p, err = netip.ParsePrefix(s); err != nil {
				bad(ErrSyntax)
				continue
			}
			if m := p.Masked(); m != p {
				bad(fmt.Errorf("%w (did you mean %s or %s/%d?)", ErrHostBits, m, p.Addr(), p.Addr().BitLen()))
				continue
			}
		} else {
			a, err := netip.ParseAddr(s)
			if err != nil {
				bad(ErrSyntax)
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		l.add(p)
	}
	if len(errs) > 0 {
		return List{}, errors.Join(errs...)
	}
	l.v4 = merge(l.v4, func(a, b range4) int { return cmp.Compare(a.lo, b.lo) },
		func(prev, next range4) (range4, bool) {
			if prev.hi == ^uint32(0) || next.lo <= prev.hi+1 {
				prev.hi = max(prev.hi, next.hi)
				return prev, true
			}
			return prev, false
		})
	l.v6 = merge(l.v6, func(a, b range6) int { return a.lo.cmp(b.lo) },
		func(prev, next range6) (range6, bool) {
			if prev.hi == maxU128 || next.lo.cmp(prev.hi.inc()) <= 0 {
				if next.hi.cmp(prev.hi) > 0 {
					prev.hi = next.hi
				}
				return prev, true
			}
			return prev, false
		})
	return l, nil
}

// Check returns what Parse finds wrong with entries, one message for each
// bad entry (its index, its text and why); none when Parse takes them all.
// Core checks an allow list with it before it stores one, so every list the
// edge reads is one it can parse.
func Check(entries []string) []string {
	_, err := Parse(entries)
	var out []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, e.Error())
		}
	}
	return out
}

// MustParse is Parse for lists fixed in code and tests; it panics on error.
func MustParse(entries ...string) List {
	l, err := Parse(entries)
	if err != nil {
		panic(err)
	}
	return l
}

// add records a masked prefix, unmapping IPv4-mapped IPv6 prefixes of /96 or
// longer into IPv4.
func (l *List) add(p netip.Prefix) {
	a, bits := p.Addr(), p.Bits()
	if a.Is4In6() && bits >= 96 {
		a, bits = a.Unmap(), bits-96
	}
	if a.Is4() {
		b := a.As4()
		lo := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		host := uint32(0)
		if bits < 32 {
			host = ^uint32(0) >> bits
		}
		l.v4 = append(l.v4, range4{lo, lo | host})
		return
	}
	lo := toU128(a)
	var host u128
	switch {
	case bits == 0:
		host = maxU128
	case bits < 64:
		host = u128{^uint64(0) >> bits, ^uint64(0)}
	case bits < 128:
		host = u128{0, ^uint64(0) >> (bits - 64)}
	}
	l.v6 = append(l.v6, range6{lo, u128{lo.hi | host.hi, lo.lo | host.lo}})
}

// merge sorts rs and joins overlapping or adjacent ranges.
func merge[R any](rs []R, compare func(a, b R) int, join func(prev, next R) (R, bool)) []R {
	if len(rs) == 0 {
		return nil
	}
	slices.SortFunc(rs, compare)
	out := rs[:1]
	for _, r := range rs[1:] {
		if j, ok := join(out[len(out)-1], r); ok {
			out[len(out)-1] = j
		} else {
			out = append(out, r)
		}
	}
	return slices.Clip(out)
}

// Everything reports whether l holds every IPv4 or every IPv6 address:
// "*", a /0, or ranges that together cover a family (merged by Parse).
func (l List) Everything() bool {
	return l.all || len(l.v4) == 1 && l.v4[0] == range4{0, ^uint32(0)} ||
		len(l.v6) == 1 && l.v6[0] == range6{u128{}, maxU128}
}

// Contains reports whether a is in the list. An IPv4-mapped IPv6 address
// (::ffff:192.0.2.1, as a dual-stack listener reports IPv4 peers) matches the
// IPv4 entries; a zone is ignored. The invalid Addr is in no list, not even
// "*". Contains allocates nothing.
func (l List) Contains(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	if l.all {
		return true
	}
	a = a.Unmap()
	if a.Is4() {
		b := a.As4()
		x := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		// First range whose hi >= x; x is inside when that range starts at or before x.
		i, j := 0, len(l.v4)
		for i < j {
			h := int(uint(i+j) >> 1)
			if l.v4[h].hi < x {
				i = h + 1
			} else {
				j = h
			}
		}
		return i < len(l.v4) && l.v4[i].lo <= x
	}
	x := toU128(a)
	i, j := 0, len(l.v6)
	for i < j {
		h := int(uint(i+j) >> 1)
		if l.v6[h].hi.cmp(x) < 0 {
			i = h + 1
		} else {
			j = h
		}
	}
	return i < len(l.v6) && l.v6[i].lo.cmp(x) <= 0
}

// AllowsAll reports whether the list holds "*".
func (l List) AllowsAll() bool { return l.all }

// Empty reports whether the list holds no entry at all (not even "*").
func (l List) Empty() bool { return !l.all && len(l.v4) == 0 && len(l.v6) == 0 }

// String renders the merged list, for logs and -validate output.
func (l List) String() string {
	var parts []string
	if l.all {
		parts = append(parts, "*")
	}
	for _, r := range l.v4 {
		parts = append(parts, rangeString(addr4(r.lo), addr4(r.hi)))
	}
	for _, r := range l.v6 {
		parts = append(parts, rangeString(r.lo.addr(), r.hi.addr()))
	}
	return strings.Join(parts, ",")
}

func rangeString(lo, hi netip.Addr) string {
	if lo == hi {
		return lo.String()
	}
	// A merged range is shown as a CIDR block when it is exactly one, else as lo-hi.
	for bits := 0; bits <= lo.BitLen(); bits++ {
		if p := netip.PrefixFrom(lo, bits); p.Masked().Addr() == lo && lastAddr(p) == hi {
			return p.String()
		}
	}
	return lo.String() + "-" + hi.String()
}

// lastAddr returns the highest address of the masked prefix p.
func lastAddr(p netip.Prefix) netip.Addr {
	var l List
	l.add(p)
	if len(l.v4) == 1 {
		return addr4(l.v4[0].hi)
	}
	return l.v6[0].hi.addr()
}

func addr4(x uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
}

var maxU128 = u128{^uint64(0), ^uint64(0)}

func toU128(a netip.Addr) u128 {
	b := a.As16()
	var x u128
	for i := range 8 {
		x.hi = x.hi<<8 | uint64(b[i])
		x.lo = x.lo<<8 | uint64(b[i+8])
	}
	return x
}

func (x u128) addr() netip.Addr {
	var b [16]byte
	for i := range 8 {
		b[i] = byte(x.hi >> (56 - 8*i))
		b[i+8] = byte(x.lo >> (56 - 8*i))
	}
	return netip.AddrFrom16(b)
}

func (x u128) cmp(y u128) int {
	if c := cmp.Compare(x.hi, y.hi); c != 0 {
		return c
	}
	return cmp.Compare(x.lo, y.lo)
}

func (x u128) inc() u128 {
	x.lo++
	if x.lo == 0 {
		x.hi++
	}
	return x
}
