package nonce

// ParseUUID parses an X-Nonce value: a version 4 UUID in its 36-character
// textual form, 8-4-4-4-12 hexadecimal digits in upper or lower case (mixed
// case too), with the version digit 4 and the RFC 9562 variant (8, 9, a or
// b). Anything else, including braces, a "urn:uuid:" prefix, 32 bare digits
// or other versions, gives false. The same UUID in two cases parses to the
// same bytes, so changing the case does not make a nonce new.
//
// ParseUUID allocates nothing and does not retain s.
func ParseUUID(s []byte) ([16]byte, bool) {
	var u [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	if s[14] != '4' {
		return u, false
	}
	switch s[19] {
	case '8', '9', 'a', 'b', 'A', 'B':
	default:
		return u, false
	}
	// Invalid digits map to 0xff: one test of the OR of all of them, after
	// the loop, instead of a branch per digit.
	var acc byte
	for j, i := range digitPairs {
		hi, lo := unhex[s[i]], unhex[s[i+1]]
		acc |= hi | lo
		u[j] = hi<<4 | lo
	}
	if acc > 0xf {
		return [16]byte{}, false
	}
	return u, true
}

// digitPairs are the offsets of the 16 digit pairs in the 36-character form.
var digitPairs = [16]uint8{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}

// unhex maps a hex digit to its value and everything else to 0xff.
var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c - 'a' + 10)
		t[c-'a'+'A'] = byte(c - 'a' + 10)
	}
	return t
}()

// AppendUUID appends u in the 36-character textual form, lower case: the
// form ParseUUID reads.
func AppendUUID(dst []byte, u [16]byte) []byte {
	const hex = "0123456789abcdef"
	for i, b := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hex[b>>4], hex[b&0xf])
	}
	return dst
}
