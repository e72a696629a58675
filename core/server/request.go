package server

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"mime/multipart"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/qrscan"
	"github.com/slipverify/slipverify/core/receiver"
	"github.com/slipverify/slipverify/core/verify"
)

// maxRemark bounds the remark a client may have echoed back.
const maxRemark = 255

// maxURL bounds an image, callback or webhook URL (characters): a URL travels
// in a job's record and in its callback's Kafka message, and one too large
// for a message would be refused by the broker.
const maxURL = 8192

const urlTooLong = "must be at most 8192 characters"

// The fields each version's verify request takes.
var (
	v2Fields     = append([]string{"payload", "url", "base64", "remark", "checkDuplicate", "matchAmount"}, conditionFields...)
	v2BankFields = append(v2Fields[:len(v2Fields):len(v2Fields)], "matchAccount", "bankAccountId", "bankCode", "extraVerify", "matchMode")
	// v1 names its base64 field image, as the commercial API does; base64
	// and data (the name of a later edition of its docs) are synonyms.
	v1Fields = []string{"payload", "url", "image", "base64", "data", "checkDuplicate"}
)

// fields reads request fields from a JSON object, or from form or query
// values where every value is a string.
type fields struct {
	json map[string]json.RawMessage
	form map[string]string
}

func (f fields) has(name string) bool {
	_, j := f.json[name]
	_, v := f.form[name]
	return j || v
}

// want adds name's failure to fe: "is required: what" when the field is
// not there, "must be what" when it is there but wrong.
func (f fields) want(fe *api.FieldErrors, name, what string) {
	if f.has(name) {
		fe.Add(name, "must be "+what)
		return
	}
	fe.Add(name, "is required: "+what)
}

func (f fields) str(name string) (string, bool) {
	if v, ok := f.form[name]; ok {
		return v, true
	}
	// The body is valid JSON (jsonFields): a string of plain ASCII without
	// escapes is its own text, as nearly every payload and remark is.
	if raw := f.json[name]; len(raw) >= 2 && raw[0] == '"' && plainASCII(raw[1:len(raw)-1]) {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	return s, f.decode(name, &s)
}

func (f fields) boolean(name string) (bool, bool) {
	if v, ok := f.form[name]; ok {
		b, err := strconv.ParseBool(v)
		return b, err == nil && (v == "true" || v == "false")
	}
	var b bool
	return b, f.decode(name, &b)
}

func (f fields) number(name string) (float64, bool) {
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

// integer returns field name as a whole number, exactly: a JSON number
// beyond 2^53 is not rounded through a float64 (9007199254740993 stays
// itself), and one written with a fraction or an exponent counts only when
// it is whole and exact.
func (f fields) integer(name string) (int64, bool) {
	if v, ok := f.form[name]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		return n, err == nil
	}
	var n int64
	if f.decode(name, &n) {
		return n, true
	}
	x, ok := f.number(name)
	if !ok || x != math.Trunc(x) || math.Abs(x) > 1<<53 {
		return 0, false
	}
	return int64(x), true
}

// decode reads JSON field name into dst: false unless it is there with
// dst's type (null is no string, boolean or number; encoding/json would
// leave dst as it was and call it a success).
func (f fields) decode(name string, dst any) bool {
	return !f.null(name) && json.Unmarshal(f.json[name], dst) == nil
}

// parseVerify reads a verify request: a JSON body, a multipart form with the
// image in part "image" (v2) or "file" (v1), or, for GET, query parameters.
// It names every failing field. A v1 client sending a checkDuplicate that is
// not a boolean gets invalid_check_duplicate.
func parseVerify(ctx *fasthttp.RequestCtx, c caller, bankSlip bool) (verify.Request, error) {
	f, image, err := readFields(ctx, c.version)
	if err != nil {
		return verify.Request{Version: c.version}, err
	}
	allowed := v2Fields
	switch {
	case c.version == api.V1:
		allowed = v1Fields
	case bankSlip:
		allowed = v2BankFields
	}
	return verifyRequest(f, image, c, allowed)
}

// verifyRequest reads a verify request from its fields and uploaded image,
// refusing any field not in allowed.
func verifyRequest(f fields, image []byte, c caller, allowed []string) (verify.Request, error) {
	r := verify.Request{Version: c.version, ServiceID: c.serviceID, BranchID: c.branchID, Nonce: c.nonce}
	var fe api.FieldErrors
	f.only(&fe, allowed...)
	sources := 0
	if image != nil {
		sources++
		r.Source.Image = image
	}
	if f.has("payload") {
		sources++
		s, ok := f.str("payload")
		switch {
		case !ok:
			fe.Add("payload", "must be a string")
		case strings.TrimSpace(s) == "":
			fe.Add("payload", "must not be empty")
		case len(s) > 512:
			fe.Add("payload", "must be at most 512 characters")
		}
		r.Source.Payload = strings.TrimSpace(s) // the slip's payload, as the answer's rawSlip echoes it
	}
	if f.has("url") {
		sources++
		s, ok := f.str("url")
		if !ok || s == "" {
			fe.Add("url", "must be a non-empty string")
		} else if utf8.RuneCountInString(s) > maxURL {
			fe.Add("url", urlTooLong)
		}
		r.Source.URL = s
	}
	for _, name := range base64Fields(allowed) {
		if !f.has(name) {
			continue
		}
		sources++
		if s, ok := f.str(name); !ok || s == "" {
			fe.Add(name, "must be a non-empty string")
		} else if img, err := verify.DecodeBase64(s); err != nil {
			return r, err // an image that cannot be read, as a file or URL's
		} else {
			r.Source.Image = img
		}
	}
	switch {
	case sources == 0 && c.version == api.V1:
		fe.Add("payload", "one of payload, image (base64), url or a file is required")
	case sources == 0:
		fe.Add("payload", "one of payload, url, base64 or an image is required")
	case sources > 1:
		fe.Add("payload", "give only one slip source (payload, url, base64, image or a file)")
	}
	if f.has("remark") {
		s, ok := f.str("remark")
		switch {
		case !ok:
			fe.Add("remark", "must be a string")
		case utf8.RuneCountInString(s) > maxRemark:
			fe.Add("remark", "must be at most 255 characters")
		}
		r.Remark = s
	}
	cdBad := false
	if f.has("checkDuplicate") {
		b, ok := f.boolean("checkDuplicate")
		if cdBad = !ok; cdBad {
			fe.Add("checkDuplicate", "must be a boolean")
		}
		r.CheckDuplicate = b
	}
	r.MatchAmount = amountField(f, &fe, "matchAmount")
	if c.version == api.V2 {
		r.Conditions.Conditions = conditions(f, &fe)
	}
	if cdBad && c.version == api.V1 {
		return r, api.E(api.InvalidCheckDuplicate)
	}
	if err := fe.Err(); err != nil {
		return r, err
	}
	return r, parseReceiver(f, &r)
}

// base64Fields are the fields of allowed that carry an image as base64.
func base64Fields(allowed []string) []string {
	if slices.Contains(allowed, "image") {
		return []string{"image", "base64", "data"}
	}
	return []string{"base64"}
}

// parseReceiver reads the receiver check of a v2 bank verification:
// matchAccount, or bankAccountId, with bankCode, extraVerify and matchMode.
func parseReceiver(f fields, r *verify.Request) error {
	var fe api.FieldErrors
	rc := &verify.ReceiverCheck{}
	match := false
	if f.has("matchAccount") {
		var ok bool
		if match, ok = f.boolean("matchAccount"); !ok {
			fe.Add("matchAccount", "must be a boolean")
		}
	}
	if f.has("bankAccountId") {
		if id, ok := f.str("bankAccountId"); !ok || id == "" {
			fe.Add("bankAccountId", "must be a non-empty string")
		} else {
			rc.AccountID, match = id, true
		}
	}
	for name, dst := range map[string]*string{"bankCode": &rc.BankCode, "extraVerify": &rc.ExtraVerify, "matchMode": &rc.MatchMode} {
		if !f.has(name) {
			continue
		}
		v, ok := f.str(name)
		if !ok || v == "" {
			fe.Add(name, "must be a non-empty string")
		}
		*dst = v
	}
	if !match && (rc.BankCode != "" || rc.ExtraVerify != "" || rc.MatchMode != "") {
		fe.Add("matchAccount", "bankCode, extraVerify and matchMode apply only with matchAccount: true or bankAccountId")
	}
	if err := fe.Err(); err != nil {
		return err
	}
	if rc.BankCode != "" {
		if _, ok := bank.Lookup(rc.BankCode); !ok {
			return api.E(api.InvalidBankCode)
		}
	}
	if _, ok := receiver.ParseMode(rc.MatchMode); rc.MatchMode != "" && !ok {
		return api.Errorf(api.InvalidMatchMode, "matchMode: must be NAME, NUMBER or NAME_NUMBER")
	}
	if match {
		r.Receiver = rc
	}
	return nil
}

// readFields reads the request's fields and its uploaded image, if any.
func readFields(ctx *fasthttp.RequestCtx, v api.Version) (fields, []byte, error) {
	if ctx.IsGet() {
		f := fields{form: map[string]string{}}
		var fe api.FieldErrors
		for k, val := range ctx.QueryArgs().All() {
			if _, twice := f.form[string(k)]; twice {
				fe.Add(string(k), "given more than once")
			}
			f.form[string(k)] = string(val)
			textValue(&fe, string(k), f.form[string(k)])
		}
		return f, nil, fe.Err()
	}
	// Bodies come as sent: a compressed multipart form would be inflated
	// in memory without bound (the body limit counts compressed bytes).
	if ce := ctx.Request.Header.Peek(fasthttp.HeaderContentEncoding); len(ce) > 0 && !bytes.EqualFold(ce, []byte("identity")) {
		return fields{}, nil, api.Errorf(api.Validation, "body: Content-Encoding is not accepted; send the body uncompressed")
	}
	if bytes.HasPrefix(ctx.Request.Header.ContentType(), []byte("multipart/form-data")) {
		return readMultipart(ctx, v)
	}
	f, err := jsonFields(ctx.PostBody())
	return f, nil, err
}

// errNotObject refuses a body that is not one JSON object.
var errNotObject = api.Errorf(api.Validation, "body: must be a JSON object")

// errNotUTF8 refuses a JSON body that is not UTF-8 (RFC 8259 8.1), or
// whose strings escape a lone UTF-16 surrogate (8.2), which no UTF-8 text
// holds.
var errNotUTF8 = api.Errorf(api.Validation, "body: must be UTF-8 text")

// jsonFields reads a JSON object body. A field given twice is refused,
// naming it: JSON parsers disagree on which value counts, so such a body
// means different things to different readers. The values are body's
// bytes, not copies: fields lives no longer than the request.
func jsonFields(body []byte) (fields, error) {
	if !json.Valid(body) { // the walk below relies on it
		return fields{}, errNotObject
	}
	if !utf8.Valid(body) || loneSurrogate(body) { // encoding/json would read either, with U+FFFD for each bad byte or escape
		return fields{}, errNotUTF8
	}
	i := skipSpace(body, 0)
	if body[i] != '{' {
		return fields{}, errNotObject
	}
	f := fields{json: make(map[string]json.RawMessage, 8)}
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
		return fields{}, api.Errorf(api.Validation, "body: has "+strconv.Itoa(n)+" fields; a request has at most "+strconv.Itoa(maxBodyFields))
	}
	if err := fe.Err(); err != nil {
		return fields{}, err
	}
	return f, nil
}

// maxBodyFields bounds the fields of one JSON object read: every request
// has a few dozen at most, and a body of 700,000 would cost core a map of
// them (about 80 MB) to name them as unknown.
const maxBodyFields = 1000

// The walk of jsonFields over valid JSON: i is at the start of a token.

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

// only records every field not in allowed as unknown: the first ones by
// name, and how many more. It sorts only the names it reports, so a body of
// 700,000 fields costs one pass.
func (f fields) only(fe *api.FieldErrors, allowed ...string) {
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

// null reports whether a JSON field is present and null.
func (f fields) null(name string) bool { return string(f.json[name]) == "null" }

func readMultipart(ctx *fasthttp.RequestCtx, v api.Version) (fields, []byte, error) {
	form, err := ctx.MultipartForm()
	if err != nil {
		return fields{}, nil, api.Errorf(api.Validation, "body: not a valid multipart form")
	}
	part := "image"
	if v == api.V1 {
		part = "file"
	}
	f := fields{form: map[string]string{}}
	var fe api.FieldErrors
	for k, vals := range form.Value {
		if len(vals) > 1 {
			fe.Add(k, "given more than once") // as in JSON: which one counts would be a guess
		}
		if len(vals) > 0 {
			textValue(&fe, k, vals[0])
			f.form[k] = vals[0]
		}
	}
	var image []byte
	for name, files := range form.File {
		if name != part || len(files) != 1 {
			fe.Add(name, "unexpected file; send one image in part "+part)
			continue
		}
		image, err = readPart(files[0])
		if err != nil {
			return f, nil, err
		}
	}
	return f, image, fe.Err()
}

// textValue refuses a form or query value that is not UTF-8 text, as a
// JSON body that is not is refused.
func textValue(fe *api.FieldErrors, name, v string) {
	if !utf8.ValidString(v) {
		fe.Add(name, "must be UTF-8 text")
	}
}

func readPart(h *multipart.FileHeader) ([]byte, error) {
	if h.Size > qrscan.MaxBytes {
		return nil, api.E(api.ImageSizeTooLarge)
	}
	file, err := h.Open()
	if err != nil {
		return nil, api.Internal(err)
	}
	defer file.Close()
	img := make([]byte, h.Size)
	if _, err := io.ReadFull(file, img); err != nil {
		return nil, api.Internal(err)
	}
	return img, nil
}
