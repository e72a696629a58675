package openapi

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The JSON Schema subset the validator implements: the keywords the
// document uses. Parse refuses a schema with any other keyword, so a
// document cannot silently ask for a check that is not made.
var (
	// assertions are checked.
	assertions = map[string]bool{
		"$ref": true, "type": true, "enum": true, "const": true,
		"properties": true, "required": true, "additionalProperties": true,
		"items": true, "minItems": true, "maxItems": true,
		"allOf": true, "anyOf": true, "oneOf": true,
		"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
		"minLength": true, "maxLength": true, "pattern": true,
	}
	// annotations are ignored (format included: it is an annotation in
	// JSON Schema 2020-12 unless a vocabulary says otherwise).
	annotations = map[string]bool{
		"description": true, "title": true, "format": true, "example": true, "examples": true,
		"default": true, "deprecated": true, "readOnly": true, "writeOnly": true,
		"contentMediaType": true, "contentEncoding": true, "$comment": true,
	}
	typeNames = map[string]bool{
		"null": true, "boolean": true, "object": true, "array": true, "number": true, "integer": true, "string": true,
	}
)

// maxRefDepth bounds $ref chains that consume no part of the value, so a
// schema referring to itself cannot loop.
const maxRefDepth = 64

// resolve returns the value a local JSON pointer ("#/components/schemas/X")
// names in the document.
func (s *Spec) resolve(ref string) (any, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	if strings.Contains(frag, "%") {
		var err error
		if frag, err = url.PathUnescape(frag); err != nil {
			return nil, false
		}
	}
	var cur any = s.root
	if frag == "" {
		return cur, true
	}
	if frag[0] != '/' {
		return nil, false
	}
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			if cur, ok = c[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// deref follows the $ref of an OpenAPI object (response, parameter, path
// item, header) until it reaches one without.
func (s *Spec) deref(v any) any {
	for range maxRefDepth {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return v
		}
		if v, ok = s.resolve(ref); !ok {
			return nil
		}
	}
	return nil
}

// check walks the document: every $ref must resolve, and every schema must
// keep to the subset the validator implements.
func (s *Spec) check(node any, ptr string, problems *[]string) {
	switch n := node.(type) {
	case map[string]any:
		if ref, ok := n["$ref"]; ok {
			s.checkRef(ref, ptr, problems)
		}
		for _, k := range sortedKeys(n) {
			child := ptr + "/" + escape(k)
			switch {
			case k == "example" || k == "examples":
				// values, not document structure
			case k == "schema":
				s.checkSchema(n[k], child, problems)
			case k == "schemas" && ptr == "#/components":
				m, _ := n[k].(map[string]any)
				for _, name := range sortedKeys(m) {
					s.checkSchema(m[name], child+"/"+escape(name), problems)
				}
			default:
				s.check(n[k], child, problems)
			}
		}
	case []any:
		for i, e := range n {
			s.check(e, ptr+"/"+strconv.Itoa(i), problems)
		}
	}
}

func (s *Spec) checkRef(ref any, ptr string, problems *[]string) {
	r, ok := ref.(string)
	if !ok {
		*problems = append(*problems, ptr+": $ref is not a string")
		return
	}
	if _, ok := s.resolve(r); !ok {
		*problems = append(*problems, fmt.Sprintf("%s: $ref %q does not resolve", ptr, r))
	}
}

func (s *Spec) checkSchema(schema any, ptr string, problems *[]string) {
	if _, ok := schema.(bool); ok {
		return
	}
	m, ok := schema.(map[string]any)
	if !ok {
		*problems = append(*problems, ptr+": schema is not an object or a boolean")
		return
	}
	bad := func(format string, a ...any) { *problems = append(*problems, ptr+": "+fmt.Sprintf(format, a...)) }
	for _, k := range sortedKeys(m) {
		v := m[k]
		switch {
		case annotations[k] || strings.HasPrefix(k, "x-"):
		case !assertions[k]:
			bad("keyword %q is not implemented by the validator", k)
		case k == "$ref":
			s.checkRef(v, ptr, problems)
		case k == "type":
			names, ok := typeList(v)
			for _, n := range names {
				ok = ok && typeNames[n]
			}
			if !ok {
				bad("type %v is not a type name or a list of them", v)
			}
		case k == "properties":
			props, ok := v.(map[string]any)
			if !ok {
				bad("properties is not an object")
			}
			for _, name := range sortedKeys(props) {
				s.checkSchema(props[name], ptr+"/properties/"+escape(name), problems)
			}
		case k == "items" || k == "additionalProperties":
			s.checkSchema(v, ptr+"/"+k, problems)
		case k == "allOf" || k == "anyOf" || k == "oneOf":
			list, ok := v.([]any)
			if !ok || len(list) == 0 {
				bad("%s is not a non-empty array", k)
			}
			for i, e := range list {
				s.checkSchema(e, ptr+"/"+k+"/"+strconv.Itoa(i), problems)
			}
		case k == "required":
			list, ok := v.([]any)
			for _, e := range list {
				_, isStr := e.(string)
				ok = ok && isStr
			}
			if !ok {
				bad("required is not an array of names")
			}
		case k == "enum":
			if list, ok := v.([]any); !ok || len(list) == 0 {
				bad("enum is not a non-empty array")
			}
		case k == "pattern":
			p, _ := v.(string)
			re, err := regexp.Compile(p)
			if err != nil {
				bad("pattern %q: %v", p, err)
				continue
			}
			s.patterns[p] = re
		case k == "const":
		default: // numeric bounds
			if _, ok := rat(v); !ok {
				bad("%s is not a number", k)
			}
		}
	}
}

func escape(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

func typeList(v any) ([]string, bool) {
	switch t := v.(type) {
	case string:
		return []string{t}, true
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, len(out) > 0
	}
	return nil, false
}

// validate returns every problem of value v against schema; path names v.
func (s *Spec) validate(schema, v any, path string) []Problem {
	return s.validateDepth(schema, v, path, 0)
}

func (s *Spec) validateDepth(schema, v any, path string, depth int) []Problem {
	if b, ok := schema.(bool); ok {
		if b {
			return nil
		}
		return []Problem{{path, "no value is allowed here"}}
	}
	m, ok := schema.(map[string]any)
	if !ok {
		return []Problem{{path, "schema is not an object"}}
	}
	var ps []Problem
	add := func(format string, a ...any) { ps = append(ps, Problem{path, fmt.Sprintf(format, a...)}) }

	if ref, ok := m["$ref"].(string); ok {
		target, found := s.resolve(ref)
		switch {
		case !found:
			add("$ref %q does not resolve", ref)
		case depth >= maxRefDepth:
			add("$ref %q nests too deep", ref)
		default:
			ps = append(ps, s.validateDepth(target, v, path, depth+1)...)
		}
	}
	if t, ok := m["type"]; ok {
		names, _ := typeList(t)
		if !slices.ContainsFunc(names, func(n string) bool { return hasType(v, n) }) {
			add("want %s, got %s", strings.Join(names, " or "), typeOf(v))
			return ps // the other keywords would only repeat the mismatch
		}
	}
	if c, ok := m["const"]; ok && !equal(c, v) {
		add("want %s, got %s", show(c), show(v))
	}
	if e, ok := m["enum"].([]any); ok && !slices.ContainsFunc(e, func(x any) bool { return equal(x, v) }) {
		add("%s is not one of %s", show(v), showList(e))
	}
	switch val := v.(type) {
	case map[string]any:
		ps = append(ps, s.object(m, val, path, depth)...)
	case []any:
		if items, ok := m["items"]; ok {
			for i, e := range val {
				ps = append(ps, s.validateDepth(items, e, path+"["+strconv.Itoa(i)+"]", depth)...)
			}
		}
		if n, ok := rat(m["minItems"]); ok && big.NewRat(int64(len(val)), 1).Cmp(n) < 0 {
			add("want at least %s items, got %d", n.RatString(), len(val))
		}
		if n, ok := rat(m["maxItems"]); ok && big.NewRat(int64(len(val)), 1).Cmp(n) > 0 {
			add("want at most %s items, got %d", n.RatString(), len(val))
		}
	case string:
		n := big.NewRat(int64(utf8.RuneCountInString(val)), 1)
		if min, ok := rat(m["minLength"]); ok && n.Cmp(min) < 0 {
			add("want at least %s characters, got %s", min.RatString(), n.RatString())
		}
		if max, ok := rat(m["maxLength"]); ok && n.Cmp(max) > 0 {
			add("want at most %s characters, got %s", max.RatString(), n.RatString())
		}
		if p, ok := m["pattern"].(string); ok {
			re := s.patterns[p]
			if re == nil {
				add("pattern %q was not compiled", p)
			} else if !re.MatchString(val) {
				add("%s does not match pattern %s", show(val), p)
			}
		}
	case json.Number:
		x, _ := rat(val)
		if b, ok := rat(m["minimum"]); ok && x.Cmp(b) < 0 {
			add("want at least %s, got %s", b.RatString(), val)
		}
		if b, ok := rat(m["maximum"]); ok && x.Cmp(b) > 0 {
			add("want at most %s, got %s", b.RatString(), val)
		}
		if b, ok := rat(m["exclusiveMinimum"]); ok && x.Cmp(b) <= 0 {
			add("want more than %s, got %s", b.RatString(), val)
		}
		if b, ok := rat(m["exclusiveMaximum"]); ok && x.Cmp(b) >= 0 {
			add("want less than %s, got %s", b.RatString(), val)
		}
	}
	if list, ok := m["allOf"].([]any); ok {
		for _, sub := range list {
			ps = append(ps, s.validateDepth(sub, v, path, depth)...)
		}
	}
	if list, ok := m["anyOf"].([]any); ok {
		if matched, closest := s.alternatives(list, v, path, depth); len(matched) == 0 {
			ps = append(ps, closest.report(path, "anyOf")...)
		}
	}
	if list, ok := m["oneOf"].([]any); ok {
		matched, closest := s.alternatives(list, v, path, depth)
		switch {
		case len(matched) == 0:
			ps = append(ps, closest.report(path, "oneOf")...)
		case len(matched) > 1:
			add("matches alternatives %v of oneOf, want exactly one", matched)
		}
	}
	return ps
}

// object checks the keywords of an object value.
func (s *Spec) object(m map[string]any, val map[string]any, path string, depth int) []Problem {
	var ps []Problem
	props, _ := m["properties"].(map[string]any)
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			name, _ := r.(string)
			if _, ok := val[name]; !ok {
				ps = append(ps, Problem{join(path, name), "missing required property"})
			}
		}
	}
	extra, hasExtra := m["additionalProperties"]
	for _, k := range sortedKeys(val) {
		if sub, ok := props[k]; ok {
			ps = append(ps, s.validateDepth(sub, val[k], join(path, k), depth)...)
			continue
		}
		if !hasExtra {
			continue
		}
		if b, ok := extra.(bool); ok && !b {
			ps = append(ps, Problem{join(path, k), "property not allowed"})
			continue
		}
		ps = append(ps, s.validateDepth(extra, val[k], join(path, k), depth)...)
	}
	return ps
}

// closest holds the alternatives of a oneOf or anyOf that fail with the
// fewest problems: the ones the value most likely meant.
type closest struct {
	indexes  []int
	problems []Problem
	count    int
}

// report explains that no alternative matched, with the problems of the
// closest ones.
func (c closest) report(path, kw string) []Problem {
	msg := fmt.Sprintf("matches no alternative of %s; the closest (#%d) fails as follows", kw, c.indexes[0])
	if len(c.indexes) > 1 {
		msg = fmt.Sprintf("matches no alternative of %s; the closest (%v) fail as follows", kw, c.indexes)
	}
	return append([]Problem{{path, msg}}, c.problems...)
}

// alternatives returns the indexes of the schemas of list that v matches
// and, for when none does, the closest.
func (s *Spec) alternatives(list []any, v any, path string, depth int) ([]int, closest) {
	var matched []int
	var c closest
	for i, sub := range list {
		p := s.validateDepth(sub, v, path, depth)
		switch {
		case len(p) == 0:
			matched = append(matched, i)
		case c.indexes == nil || len(p) < c.count:
			c = closest{[]int{i}, p, len(p)}
		case len(p) == c.count:
			c.indexes = append(c.indexes, i)
			c.problems = append(c.problems, p...)
		}
	}
	return matched, c
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// hasType reports whether v is of the JSON Schema type name.
func hasType(v any, name string) bool {
	switch name {
	case "null":
		return v == nil
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		r, ok := rat(n)
		return ok && r.IsInt()
	}
	return false
}

func typeOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// rat returns a JSON number exactly.
func rat(v any) (*big.Rat, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(string(n))
	return r, ok
}

// equal compares JSON values; numbers compare by value (1 equals 1.0).
func equal(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		rx, okx := rat(x)
		ry, oky := rat(y)
		return okx && oky && rx.Cmp(ry) == 0
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equal(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

// show renders a value for a message, shortened.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 60 {
		return string(b[:57]) + "..."
	}
	return string(b)
}

func showList(list []any) string {
	const most = 8
	parts := make([]string, 0, most)
	for i, e := range list {
		if i == most {
			parts = append(parts, fmt.Sprintf("... (%d values)", len(list)))
			break
		}
		parts = append(parts, show(e))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// enumAt returns the values a schema allows at a property path (for
// example error.code): the enum or const found there, intersected across
// allOf and joined across oneOf and anyOf. ok is false when the schema says
// nothing about that path.
func (s *Spec) enumAt(schema any, path []string) ([]string, bool) {
	return s.enumAtDepth(schema, path, 0)
}

func (s *Spec) enumAtDepth(schema any, path []string, depth int) ([]string, bool) {
	m, ok := schema.(map[string]any)
	if !ok || depth > maxRefDepth {
		return nil, false
	}
	var sets [][]string // all hold: intersect
	if ref, ok := m["$ref"].(string); ok {
		if target, found := s.resolve(ref); found {
			if set, ok := s.enumAtDepth(target, path, depth+1); ok {
				sets = append(sets, set)
			}
		}
	}
	if len(path) == 0 {
		if e, ok := m["enum"].([]any); ok {
			sets = append(sets, strs(e))
		}
		if c, ok := m["const"]; ok {
			sets = append(sets, strs([]any{c}))
		}
	} else if props, ok := m["properties"].(map[string]any); ok {
		if sub, ok := props[path[0]]; ok {
			if set, ok := s.enumAtDepth(sub, path[1:], depth); ok {
				sets = append(sets, set)
			}
		}
	}
	if list, ok := m["allOf"].([]any); ok {
		for _, sub := range list {
			if set, ok := s.enumAtDepth(sub, path, depth); ok {
				sets = append(sets, set)
			}
		}
	}
	for _, kw := range []string{"oneOf", "anyOf"} {
		list, ok := m[kw].([]any)
		if !ok {
			continue
		}
		var union []string
		found := false
		for _, sub := range list {
			if set, ok := s.enumAtDepth(sub, path, depth); ok {
				union, found = append(union, set...), true
			}
		}
		if found {
			sets = append(sets, union)
		}
	}
	if len(sets) == 0 {
		return nil, false
	}
	out := slices.Clone(sets[0])
	for _, set := range sets[1:] {
		out = slices.DeleteFunc(out, func(x string) bool { return !slices.Contains(set, x) })
	}
	slices.Sort(out)
	return slices.Compact(out), true
}

func strs(list []any) []string {
	out := make([]string, 0, len(list))
	for _, e := range list {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
