package slip

// This file holds the EMVCo TLV pieces that are not specific to slips, so
// that a PromptPay QR generator can reuse them: AppendTLV, AppendCRC, CRC16.

// crcTable is the byte-at-a-time table of CRC-16/CCITT-FALSE (polynomial
// 0x1021, not reflected).
var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// crcUpdate continues a CRC-16/CCITT-FALSE over s. It lets the parser check
// a CRC over "prefix + 04" without building that string.
func crcUpdate[T string | []byte](crc uint16, s T) uint16 {
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^s[i]]
	}
	return crc
}

// CRC16 returns the CRC-16/CCITT-FALSE of s (polynomial 0x1021, initial value
// 0xFFFF, no reflection, no final XOR), the checksum of EMVCo QR payloads.
// For a payload it covers everything up to and including the CRC tag and its
// length, for example "...9104" or "...6304".
func CRC16(s string) uint16 {
	return crcUpdate(0xFFFF, s)
}

// appendHeader appends a tag and a 2-digit length. Like promptparse, it
// writes only the last two digits of a length above 99.
func appendHeader(dst []byte, tag string, n int) []byte {
	dst = append(dst, tag...)
	return append(dst, byte('0'+n/10%10), byte('0'+n%10))
}

// AppendTLV appends one EMVCo data object to dst and returns the extended
// buffer: tag (two decimal digits), the length of value as two decimal
// digits, then value. EMVCo values are 1 to 99 bytes long; AppendTLV has no
// error to return, so the caller checks. A longer value is written with its
// length modulo 100, as promptparse does, which no strict parser accepts.
func AppendTLV(dst []byte, tag, value string) []byte {
	dst = appendHeader(dst, tag, len(value))
	return append(dst, value...)
}

// AppendCRC seals a payload: it appends tag and the length "04" to dst, then
// the CRC16 of all of dst so far as 4 hex digits, and returns the extended
// buffer. dst must hold the whole payload from its first byte. The digits are
// upper case when upper is set: PromptPay payloads and bank slips use upper
// case, wallet slips lower case.
func AppendCRC(dst []byte, tag string, upper bool) []byte {
	dst = append(dst, tag...)
	dst = append(dst, "04"...)
	c := crcUpdate(0xFFFF, dst)
	digits := "0123456789abcdef"
	if upper {
		digits = "0123456789ABCDEF"
	}
	return append(dst, digits[c>>12], digits[c>>8&0xF], digits[c>>4&0xF], digits[c&0xF])
}

// tagSet records which of the tags 00-99 a payload has used, to refuse
// duplicates without allocating.
type tagSet [2]uint64

// add marks tag n and reports whether it was new.
func (s *tagSet) add(n int) bool {
	w, b := n/64, uint64(1)<<(n%64)
	if s[w]&b != 0 {
		return false
	}
	s[w] |= b
	return true
}

// header reads the tag and length at s[i:]. ok is false unless four decimal
// digits are there. The tag is returned as a number, 0-99.
func header(s string, i int) (tag, n int, ok bool) {
	if len(s)-i < 4 {
		return 0, 0, false
	}
	d0, d1, d2, d3 := s[i]-'0', s[i+1]-'0', s[i+2]-'0', s[i+3]-'0'
	if d0 > 9 || d1 > 9 || d2 > 9 || d3 > 9 {
		return 0, 0, false
	}
	return int(d0)*10 + int(d1), int(d2)*10 + int(d3), true
}

// parseHex reads 1 to 4 hex digits of either case. It exists because
// strconv.ParseUint also takes a sign, underscores and a 0x prefix.
func parseHex(s string) (uint16, bool) {
	if len(s) == 0 || len(s) > 4 {
		return 0, false
	}
	var v uint16
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint16(c)
	}
	return v, true
}
