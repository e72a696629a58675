// Package jsonw appends JSON values to a buffer without reflection, byte
// for byte as encoding/json writes them (HTML characters, U+2028 and
// U+2029 escaped; invalid UTF-8 as U+FFFD): the types on core's hot path
// and the edge's access log write themselves with it, and a test holds
// both string writers to encoding/json's bytes.
package jsonw

import (
	"math"
	"strconv"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// String appends s as a JSON string, as json.Marshal writes it.
func String[S ~string | ~[]byte](dst []byte, s S) []byte {
	return appendString(dst, s, &htmlSafe)
}

// StringNoHTML appends s as a JSON string as a json.Encoder with
// SetEscapeHTML(false) writes it: as String, but <, > and & stay as they
// are. It is for text people and log tools read and nobody pastes into a
// page (the edge's access log, whose paths are the client's); the escaping
// that JSON itself needs is the same, so a line cannot be broken or forged.
func StringNoHTML[S ~string | ~[]byte](dst []byte, s S) []byte {
	return appendString(dst, s, &safe)
}

// safe and htmlSafe tell which ASCII bytes stand in a JSON string as they
// are, as encoding/json's tables of the same names do: not the quote, the
// backslash or a control character, and for htmlSafe not <, > or & either.
var safe, htmlSafe = func() (s, h [utf8.RuneSelf]bool) {
	for b := byte(0x20); b < utf8.RuneSelf; b++ {
		s[b] = b != '"' && b != '\\'
		h[b] = s[b] && b != '<' && b != '>' && b != '&'
	}
	return s, h
}()

// appendString is encoding/json's string encoder, one rule for strings and
// byte slices alike: keep holds the ASCII bytes written as they are.
func appendString[S ~string | ~[]byte](dst []byte, s S, keep *[utf8.RuneSelf]bool) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if keep[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		// At most one rune's bytes: converting a byte slice's copies them
		// to the stack, so neither kind of s allocates.
		c, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Float appends f as encoding/json writes a float64; a NaN or an infinity,
// which encoding/json refuses, as null.
func Float(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' { // e-09 → e-9, as encoding/json
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// Bool appends b.
func Bool(dst []byte, b bool) []byte { return strconv.AppendBool(dst, b) }

// Field appends a field's name and colon: after the object's opening brace
// when first, else after a comma.
func Field(dst []byte, name string, first bool) []byte {
	if first {
		dst = append(dst, '{')
	} else {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...) // field names are plain ASCII constants
	return append(dst, '"', ':')
}
