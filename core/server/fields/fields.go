// Package fields reads the fields of a request: a JSON object body's, or
// form and query values, each read strictly (a string is a string, a whole
// number exact), with the checks the public and the admin API share.
package fields

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
)

// Set is the fields of a request: a JSON object's (JSON), or form or
// query values, where every value is a string (Form).
type Set struct {
	json map[string]json.RawMessage
	form map[string]string
}

// Form returns the fields of form or query values.
func Form(values map[string]string) Set { return Set{form: values} }

// Has reports whether field name is there.
func (f Set) Has(name string) bool {
	_, j := f.json[name]
	_, v := f.form[name]
	return j || v
}

// Want adds name's failure to fe: "is required: what" when the field is
// not there, "must be what" when it is there but wrong.
func (f Set) Want(fe *api.FieldErrors, name, what string) {
	if f.Has(name) {
		fe.Add(name, "must be "+what)
		return
	}
	fe.Add(name, "is required: "+what)
}

// Str returns field name as a string: false unless it is one.
func (f Set) Str(name string) (string, bool) {
	if v, ok := f.form[name]; ok {
		return v, true
	}
	// The body is valid JSON (JSON): a string of plain ASCII without
	// escapes is its own text, as nearly every payload and remark is.
	if raw := f.json[name]; len(raw) >= 2 && raw[0] == '"' && plainASCII(raw[1:len(raw)-1]) {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	return s, f.decode(name, &s)
}

// Boolean returns field name as a boolean: false unless it is one.
func (f Set) Boolean(name string) (bool, bool) {
	if v, ok := f.form[name]; ok {
		b, err := strconv.ParseBool(v)
		return b, err == nil && (v == "true" || v == "false")
	}
	var b bool
	return b, f.decode(name, &b)
}

// Number returns field name as a number: false unless it is one.
func (f Set) Number(name string) (float64, bool) {
	if v, ok := f.form[name]; ok {
		n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return n, err == nil
	}
	// A JSON number is read as encoding/json reads it (strconv.ParseFloat,
	// out of range refused).
	if raw := f.json[name]; len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		n, err := strconv.ParseFloat(string(raw), 64)
		return n, err == nil
	}
	var n float64
	return n, f.decode(name, &n)
}

// Integer returns field name as a whole number, exactly: a JSON number
// beyond 2^53 is not rounded through a float64 (9007199254740993 stays
// itself), and one written with a fraction or an exponent counts only when
// it is whole and exact.
func (f Set) Integer(name string) (int64, bool) {
	if v, ok := f.form[name]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		return n, err == nil
	}
	var n int64
	if f.decode(name, &n) {
		return n, true
	}
	x, ok := f.Number(name)
	if !ok || x != math.Trunc(x) || math.Abs(x) > 1<<53 {
		return 0, false
	}
	return int64(x), true
}

// decode reads JSON field name into dst: false unless it is there with
// dst's type (null is no string, boolean or number; encoding/json would
// leave dst as it was and call it a success).
func (f Set) decode(name string, dst any) bool {
	return !f.Null(name) && json.Unmarshal(f.json[name], dst) == nil
}

// Only records every field not in allowed as unknown: the first ones by
// name, and how many more. It sorts only the names it reports, so a body of
// 700,000 fields costs one pass.
func (f Set) Only(fe *api.FieldErrors, allowed ...string) {
	var first []string // the smallest unknown names, in order
	n := 0
	see := func(name string) {
		if slices.Contains(allowed, name) {
			return
		}
		n++
		if len(first) == api.MaxNamedFields && name >= first[len(first)-1] {
			return
		}
		i, _ := slices.BinarySearch(first, name)
		if len(first) == api.MaxNamedFields {
			first = first[:len(first)-1]
		}
		first = slices.Insert(first, i, name)
	}
	for k := range f.json {
		see(k)
	}
	for k := range f.form {
		see(k)
	}
	for _, name := range first {
		fe.Add(name, "unknown field")
	}
	fe.More(n - len(first))
}

// Null reports whether a JSON field is present and null.
func (f Set) Null(name string) bool { return string(f.json[name]) == "null" }

// Body reads the request's JSON object body, adding to fe every field
// not in allowed (Only).
func Body(ctx *fasthttp.RequestCtx, fe *api.FieldErrors, allowed ...string) (Set, error) {
	f, err := JSON(ctx.PostBody())
	if err == nil {
		f.Only(fe, allowed...)
	}
	return f, err
}

// Raw returns JSON field name as sent (nil when it is not there).
func (f Set) Raw(name string) json.RawMessage { return f.json[name] }

// Put sets JSON field name of a JSON object's fields to raw.
func (f Set) Put(name string, raw json.RawMessage) { f.json[name] = raw }

// Into decodes JSON field name into v, refusing a field v does not have
// (an account's name with a misspelt "en").
func (f Set) Into(name string, v any) error {
	d := json.NewDecoder(bytes.NewReader(f.json[name]))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// Name refuses, naming field, a name that api.NameProblem refuses
// (control or bidirectional formatting characters), and reports whether
// the name may be stored.
func Name(fe *api.FieldErrors, field, name string) bool {
	if p := api.NameProblem(name); p != "" {
		fe.Add(field, p)
		return false
	}
	return true
}

// Param returns path parameter name of the request's route ("" when the
// route has none).
func Param(ctx *fasthttp.RequestCtx, name string) string {
	v, _ := ctx.UserValue(name).(string)
	return v
}
