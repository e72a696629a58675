package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// show prints an answer's data: as indented JSON, or as a table for a list
// (c.cols, else every member of the records) and "key: value" lines for one
// record, nested members named by their dotted path, in the server's order.
func show(w io.Writer, format string, c *command, data json.RawMessage) error {
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	if format == "json" || c.jsonOnly {
		var b bytes.Buffer
		if err := json.Indent(&b, data, "", "  "); err != nil {
			return err
		}
		// Every line break of indented JSON is its own: one in a string
		// is escaped. Each line's unprintable characters can only be in
		// strings, where \uXXXX means the same.
		lines := strings.Split(b.String(), "\n")
		for i, l := range lines {
			lines[i] = printable(l)
		}
		_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decode(dec)
	if err != nil {
		return err
	}
	if c.pages {
		v = lookup(v, "items")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	switch v := v.(type) {
	case []any:
		cols := c.cols
		if cols == nil {
			cols = columns(v)
		}
		if len(cols) == 0 { // a list of plain values
			for _, it := range v {
				fmt.Fprintln(tw, cell(it))
			}
			break
		}
		head := make([]string, len(cols))
		for i, col := range cols {
			head[i] = printable(col)
		}
		fmt.Fprintln(tw, strings.Join(head, "\t"))
		for _, it := range v {
			row := make([]string, len(cols))
			for i, col := range cols {
				row[i] = cell(lookup(it, col))
			}
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
	case object:
		var leaves []member
		flatten("", v, &leaves)
		for _, m := range leaves {
			fmt.Fprintf(tw, "%s:\t%s\n", printable(m.key), cell(m.val))
		}
	default:
		fmt.Fprintln(tw, cell(v))
	}
	return tw.Flush()
}

// object is a JSON object with its members in the order they came.
type object []member

type member struct {
	key string
	val any
}

// MarshalJSON writes the object back in its order (for a cell).
func (o object) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, m := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(m.key)
		v, err := json.Marshal(m.val)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// decode reads one JSON value: an object as object, an array as []any,
// a number as json.Number (dec.UseNumber), others as encoding/json does.
func decode(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t {
	case json.Delim('{'):
		o := object{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decode(dec)
			if err != nil {
				return nil, err
			}
			o = append(o, member{k.(string), v})
		}
		_, err := dec.Token()
		return o, err
	case json.Delim('['):
		a := []any{}
		for dec.More() {
			v, err := decode(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token()
		return a, err
	}
	return t, nil
}

// flatten appends v's leaves to out, named by their dotted paths under
// prefix. An empty object is a leaf.
func flatten(prefix string, v any, out *[]member) {
	o, ok := v.(object)
	if !ok || len(o) == 0 {
		*out = append(*out, member{prefix, v})
		return
	}
	for _, m := range o {
		key := m.key
		if prefix != "" {
			key = prefix + "." + m.key
		}
		flatten(key, m.val, out)
	}
}

// columns returns the leaves' paths of a list's records, in the order they
// first appear.
func columns(items []any) []string {
	var cols []string
	seen := map[string]bool{}
	for _, it := range items {
		if _, ok := it.(object); !ok {
			continue
		}
		var leaves []member
		flatten("", it, &leaves)
		for _, m := range leaves {
			if !seen[m.key] {
				seen[m.key] = true
				cols = append(cols, m.key)
			}
		}
	}
	return cols
}

// lookup returns the member of v at the dotted path, nil if there is none.
func lookup(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		o, _ := v.(object)
		v = nil
		for _, m := range o {
			if m.key == k {
				v = m.val
				break
			}
		}
	}
	return v
}

// cell renders a value in one table cell: "-" for null or empty, a list of
// plain values comma-separated, anything else nested as compact JSON.
func cell(v any) string {
	switch v := v.(type) {
	case nil:
		return "-"
	case string:
		if v == "" {
			return "-"
		}
		return printable(v)
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case []any:
		parts := make([]string, len(v))
		for i, it := range v {
			switch it.(type) {
			case object, []any:
				b, _ := json.Marshal(v)
				return string(b)
			}
			parts[i] = cell(it)
		}
		if len(parts) == 0 {
			return "-"
		}
		return strings.Join(parts, ",")
	}
	b, _ := json.Marshal(v)
	return printable(string(b))
}

// printable returns s with every character that a terminal would act on or
// that changes how text around it reads written as a JSON escape (\u001b,
// \u202e; a pair of them above U+FFFF), and every byte that is not UTF-8 as
// U+FFFD: control characters (C0, DEL, C1: escape sequences that retitle,
// clear or drive the terminal, line breaks and tabs that break the
// columns), bidirectional overrides and isolates, and every other
// character Go does not call printable (invisible formatting, separators
// other than the space). Everything slipadm prints from an answer passes
// through it, so a name stored before core refused such names cannot
// reach the terminal raw; in JSON the escape means the same character.
func printable(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || !unicode.IsPrint(r) })
	if i < 0 {
		return s // the fast path: nothing to escape
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for _, r := range s[i:] { // a byte that is not UTF-8 comes as U+FFFD
		if r == utf8.RuneError || unicode.IsPrint(r) {
			b.WriteRune(r)
			continue
		}
		if r > 0xffff {
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, "\\u%04x\\u%04x", r1, r2)
			continue
		}
		fmt.Fprintf(&b, "\\u%04x", r)
	}
	return b.String()
}
