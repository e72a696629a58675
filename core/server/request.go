package server

import (
	"bytes"
	"io"
	"mime/multipart"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/qrscan"
	"github.com/slipverify/slipverify/core/receiver"
	"github.com/slipverify/slipverify/core/server/fields"
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
func verifyRequest(f fields.Set, image []byte, c caller, allowed []string) (verify.Request, error) {
	r := verify.Request{Version: c.version, ServiceID: c.serviceID, BranchID: c.branchID, Nonce: c.nonce}
	var fe api.FieldErrors
	f.Only(&fe, allowed...)
	sources := 0
	if image != nil {
		sources++
		r.Source.Image = image
	}
	if f.Has("payload") {
		sources++
		s, ok := f.Str("payload")
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
	if f.Has("url") {
		sources++
		s, ok := f.Str("url")
		if !ok || s == "" {
			fe.Add("url", "must be a non-empty string")
		} else if utf8.RuneCountInString(s) > maxURL {
			fe.Add("url", urlTooLong)
		}
		r.Source.URL = s
	}
	for _, name := range base64Fields(allowed) {
		if !f.Has(name) {
			continue
		}
		sources++
		if s, ok := f.Str(name); !ok || s == "" {
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
	if f.Has("remark") {
		s, ok := f.Str("remark")
		switch {
		case !ok:
			fe.Add("remark", "must be a string")
		case utf8.RuneCountInString(s) > maxRemark:
			fe.Add("remark", "must be at most 255 characters")
		}
		r.Remark = s
	}
	cdBad := false
	if f.Has("checkDuplicate") {
		b, ok := f.Boolean("checkDuplicate")
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
func parseReceiver(f fields.Set, r *verify.Request) error {
	var fe api.FieldErrors
	rc := &verify.ReceiverCheck{}
	match := false
	if f.Has("matchAccount") {
		var ok bool
		if match, ok = f.Boolean("matchAccount"); !ok {
			fe.Add("matchAccount", "must be a boolean")
		}
	}
	if f.Has("bankAccountId") {
		if id, ok := f.Str("bankAccountId"); !ok || id == "" {
			fe.Add("bankAccountId", "must be a non-empty string")
		} else {
			rc.AccountID, match = id, true
		}
	}
	for name, dst := range map[string]*string{"bankCode": &rc.BankCode, "extraVerify": &rc.ExtraVerify, "matchMode": &rc.MatchMode} {
		if !f.Has(name) {
			continue
		}
		v, ok := f.Str(name)
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
func readFields(ctx *fasthttp.RequestCtx, v api.Version) (fields.Set, []byte, error) {
	if ctx.IsGet() {
		form := map[string]string{}
		var fe api.FieldErrors
		for k, val := range ctx.QueryArgs().All() {
			if _, twice := form[string(k)]; twice {
				fe.Add(string(k), "given more than once")
			}
			form[string(k)] = string(val)
			textValue(&fe, string(k), form[string(k)])
		}
		return fields.Form(form), nil, fe.Err()
	}
	// Bodies come as sent: a compressed multipart form would be inflated
	// in memory without bound (the body limit counts compressed bytes).
	if ce := ctx.Request.Header.Peek(fasthttp.HeaderContentEncoding); len(ce) > 0 && !bytes.EqualFold(ce, []byte("identity")) {
		return fields.Set{}, nil, api.Errorf(api.Validation, "body: Content-Encoding is not accepted; send the body uncompressed")
	}
	if bytes.HasPrefix(ctx.Request.Header.ContentType(), []byte("multipart/form-data")) {
		return readMultipart(ctx, v)
	}
	f, err := fields.JSON(ctx.PostBody())
	return f, nil, err
}

func readMultipart(ctx *fasthttp.RequestCtx, v api.Version) (fields.Set, []byte, error) {
	form, err := ctx.MultipartForm()
	if err != nil {
		return fields.Set{}, nil, api.Errorf(api.Validation, "body: not a valid multipart form")
	}
	part := "image"
	if v == api.V1 {
		part = "file"
	}
	values := map[string]string{}
	var fe api.FieldErrors
	for k, vals := range form.Value {
		if len(vals) > 1 {
			fe.Add(k, "given more than once") // as in JSON: which one counts would be a guess
		}
		if len(vals) > 0 {
			textValue(&fe, k, vals[0])
			values[k] = vals[0]
		}
	}
	f := fields.Form(values)
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
