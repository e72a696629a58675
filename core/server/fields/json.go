package fields

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/slipverify/slipverify/core/api"
)

// errNotObject refuses a body that is not one JSON object.
var errNotObject = api.Errorf(api.Validation, "body: must be a JSON object")

// errNotUTF8 refuses a JSON body that is not UTF-8 (RFC 8259 8.1), or
// whose strings escape a lone UTF-16 surrogate (8.2), which no UTF-8 text
// holds.
var errNotUTF8 = api.Errorf(api.Validation, "body: must be UTF-8 text")

// JSON reads the fields of a JSON object body. A field given twice is refused,
// naming it: JSON parsers disagree on which value counts, so such a body
// means different things to different readers. The values are body's
// bytes, not copies: a Set lives no longer than the request.
func JSON(body []byte) (Set, error) {
	if !json.Valid(body) { // the walk below relies on it
		return Set{}, errNotObject
	}
	if !utf8.Valid(body) || loneSurrogate(body) { // encoding/json would read either, with U+FFFD for each bad byte or escape
		return Set{}, errNotUTF8
	}
	i := skipSpace(body, 0)
	if body[i] != '{' {
		return Set{}, errNotObject
	}
	f := Set{json: make(map[string]json.RawMessage, 8)}
	var fe api.FieldErrors
	n := 0
	for i = skipSpace(body, i+1); body[i] != '}'; {
		end := stringEnd(body, i)
		if n++; n > maxBodyFields { // count the rest: no request has so many
			i = valueEnd(body, skipSpace(body, skipSpace(body, end)+1))
			if i = skipSpace(body, i); body[i] == ',' {
				i = skipSpace(body, i+1)
			}
			continue
		}
		name := string(body[i+1 : end-1])
		if !plainASCII(body[i:end]) { // escapes, or text encoding/json would mend
			json.Unmarshal(body[i:end], &name) // valid: cannot fail
		}
		i = skipSpace(body, skipSpace(body, end)+1) // past the colon
		vend := valueEnd(body, i)
		if _, dup := f.json[name]; dup {
			fe.Add(name, "given more than once")
		}
		f.json[name] = body[i:vend:vend]
		if i = skipSpace(body, vend); body[i] == ',' {
			i = skipSpace(body, i+1)
		}
	}
	if n > maxBodyFields {
		return Set{}, api.Errorf(api.Validation, "body: has "+strconv.Itoa(n)+" fields; a request has at most "+strconv.Itoa(maxBodyFields))
	}
	if err := fe.Err(); err != nil {
		return Set{}, err
	}
	return f, nil
}

// maxBodyFields bounds the fields of one JSON object read: every request
// has a few dozen at most, and a body of 700,000 would cost core a map of
// them (about 80 MB) to name them as unknown.
const maxBodyFields = 1000

// The walk of JSON over valid JSON: i is at the start of a token.

func plainASCII(b []byte) bool {
	for _, c := range b {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

// loneSurrogate reports whether b escapes a UTF-16 surrogate that is not
// half of a pair: a high one (\ud800-\udbff) not followed by the escape
// of a low one (\udc00-\udfff), or a low one alone. A backslash of valid
// JSON starts an escape, in a string.
func loneSurrogate(b []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\\')
		if j < 0 {
			return false
		}
		i += j + 1
		if b[i] != 'u' {
			i++ // \\, \", \n, ...: one character
			continue
		}
		switch surrogate(b[i+1 : i+5]) {
		case 'l':
			return true
		case 'h':
			if i+11 > len(b) || b[i+5] != '\\' || b[i+6] != 'u' || surrogate(b[i+7:i+11]) != 'l' {
				return true
			}
			i += 6
		}
		i += 5
	}
}

// surrogate tells the four hex digits of a \u escape: 'h' for a high
// surrogate, 'l' for a low one, 0 for any other code point.
func surrogate(hex []byte) byte {
	if hex[0] != 'd' && hex[0] != 'D' {
		return 0
	}
	switch hex[1] {
	case '8', '9', 'a', 'b', 'A', 'B':
		return 'h'
	case 'c', 'd', 'e', 'f', 'C', 'D', 'E', 'F':
		return 'l'
	}
	return 0
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the string that starts at i.
func stringEnd(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	return i + 1
}

// valueEnd returns the index after the value that starts at i.
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) && !strings.ContainsRune(",}] \t\n\r", rune(b[i])) {
		i++
	}
	return i
}

// Elements returns the values of the JSON array raw (valid JSON, as JSON
// reads it), slices of it, and false if it is no array. It stops one past
// most: a body of two million empty items would otherwise cost core a copy
// of each (8 s and 200 MB a request) only to refuse them.
func Elements(raw []byte, most int) ([][]byte, bool) {
	if len(raw) == 0 || raw[0] != '[' {
		return nil, false
	}
	out := [][]byte{}
	for i := skipSpace(raw, 1); raw[i] != ']' && len(out) <= most; {
		end := valueEnd(raw, i)
		out = append(out, raw[i:end:end])
		if i = skipSpace(raw, end); raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return out, true
}
