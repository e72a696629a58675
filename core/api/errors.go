// Package api holds the contracts every tier shares: the error catalog and
// the v1 and v2 response envelopes, API versions and the internal headers the
// edge sends to core. It imports nothing of any tier.
package api

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Code identifies a client-visible error condition: one row of the catalog.
// Its string form is the v2 code where the condition has one of its own.
type Code uint8

// The catalog's conditions. Several conditions share a public code in one
// version and differ in the other: a malformed QR payload is SLIP_NOT_FOUND
// to a v2 client and invalid_payload to a v1 client.
const (
	MissingAPIKey Code = iota + 1
	InvalidAPIKey
	InvalidSignature
	InvalidTimestamp
	DuplicateNonce
	PermissionDenied
	BranchInactive
	ServiceBanned
	ServiceExpired
	UserBanned
	IPNotAllowed
	QuotaExceeded
	Validation
	InvalidCheckDuplicate
	URLProtocolNotAllowed
	URLInvalidIPRange
	ImageURLUnreachable
	ImageSizeTooLarge
	InvalidImageFormat
	InvalidBankCode
	InvalidExtraVerify
	InvalidMatchMode
	InvalidCallbackURL
	SlipNotFound
	InvalidPayload
	QRCodeNotFound
	SlipPending
	DuplicateSlip
	BankAccountNotFound
	JobNotFound
	NotFound
	BankAccountDuplicate
	Conflict
	RateLimitExceeded
	APIServerError
	InternalServerError
	numCodes
)

// Row is one line of the error catalog: how a condition reaches a v2 and a
// v1 client. V2Code is empty for conditions only v1 can produce.
type Row struct {
	Code     Code
	V2Status int
	V2Code   string
	V1Status int
	V1Code   string
	Message  string // default v2 message
}

// table is the one table of client-visible errors.
var table = []Row{
	{MissingAPIKey, 401, "MISSING_API_KEY", 401, "unauthorized", "API key is missing"},
	{InvalidAPIKey, 401, "INVALID_API_KEY", 401, "unauthorized", "API key is invalid"},
	{InvalidSignature, 401, "INVALID_SIGNATURE", 401, "unauthorized", "Request signature is invalid"},
	{InvalidTimestamp, 401, "INVALID_TIMESTAMP", 401, "unauthorized", "Request timestamp is outside the allowed window"},
	{DuplicateNonce, 401, "DUPLICATE_NONCE", 401, "unauthorized", "Request nonce was already used"},
	{PermissionDenied, 403, "PERMISSION_DENIED", 403, "access_denied", "API key lacks the permission for this request"},
	{BranchInactive, 403, "BRANCH_INACTIVE", 403, "application_deactivated", "Branch is inactive"},
	{ServiceBanned, 403, "SERVICE_BANNED", 403, "application_deactivated", "Service is banned"},
	{ServiceExpired, 403, "SERVICE_EXPIRED", 403, "application_expired", "Service subscription has expired"},
	{UserBanned, 403, "USER_BANNED", 403, "application_deactivated", "User account is banned"},
	{IPNotAllowed, 403, "IP_NOT_ALLOWED", 403, "access_denied", "Client IP address is not allowed"},
	{QuotaExceeded, 403, "QUOTA_EXCEEDED", 403, "quota_exceeded", "Monthly quota is used up"},
	{Validation, 400, "VALIDATION_ERROR", 400, "invalid_request", "Request is invalid"},
	{InvalidCheckDuplicate, 400, "VALIDATION_ERROR", 400, "invalid_check_duplicate", "checkDuplicate: must be a boolean"},
	{URLProtocolNotAllowed, 400, "URL_PROTOCOL_NOT_ALLOWED", 400, "invalid_url", "Image URL must use http or https"},
	{URLInvalidIPRange, 400, "URL_INVALID_IP_RANGE", 400, "invalid_url", "Image URL points to a private or internal address"},
	{ImageURLUnreachable, 400, "IMAGE_URL_UNREACHABLE", 400, "invalid_url", "Image URL cannot be fetched"},
	{ImageSizeTooLarge, 400, "IMAGE_SIZE_TOO_LARGE", 400, "image_size_too_large", "Image is larger than 4 MB"},
	{InvalidImageFormat, 400, "INVALID_IMAGE_FORMAT", 400, "invalid_image", "File is not a JPEG, PNG, GIF or WebP image"},
	{InvalidBankCode, 400, "INVALID_BANK_CODE", 400, "invalid_request", "bankCode is not in the bank list"},
	{InvalidExtraVerify, 400, "INVALID_EXTRA_VERIFY", 400, "invalid_request", "extraVerify is not an option of this bank"},
	{InvalidMatchMode, 400, "INVALID_MATCH_MODE", 400, "invalid_request", "matchMode is allowed only for PROMPTPAY"},
	{InvalidCallbackURL, 400, "INVALID_CALLBACK_URL", 400, "invalid_request", "callbackUrl must be https and point to a public address"},
	{SlipNotFound, 404, "SLIP_NOT_FOUND", 404, "slip_not_found", "Slip not found"},
	{InvalidPayload, 404, "SLIP_NOT_FOUND", 400, "invalid_payload", "Slip payload is not a valid slip QR code"},
	{QRCodeNotFound, 404, "SLIP_NOT_FOUND", 404, "qrcode_not_found", "No slip QR code found in the image"},
	{SlipPending, 404, "SLIP_PENDING", 404, "slip_pending", "Slip is too recent to verify; try again in a few minutes"},
	{DuplicateSlip, 0, "", 400, "duplicate_slip", "Slip was already verified"},
	{BankAccountNotFound, 404, "BANK_ACCOUNT_NOT_FOUND", 404, "not_found", "Bank account not found or not linked to the branch"},
	{JobNotFound, 404, "JOB_NOT_FOUND", 404, "not_found", "Job not found"},
	{NotFound, 404, "NOT_FOUND", 404, "not_found", "Endpoint not found"},
	{BankAccountDuplicate, 409, "BANK_ACCOUNT_DUPLICATE", 400, "invalid_request", "An active bank account with this bankCode and bankNumber exists"},
	{Conflict, 409, "CONFLICT", 409, "invalid_request", "The request conflicts with the record as it stands"},
	{RateLimitExceeded, 429, "RATE_LIMIT_EXCEEDED", 429, "rate_limit_exceeded", "Rate limit exceeded"},
	{APIServerError, 500, "API_SERVER_ERROR", 500, "api_server_error", "Temporary processing error; try again"},
	{InternalServerError, 500, "INTERNAL_SERVER_ERROR", 500, "server_error", "Unexpected error"},
}

// byCode indexes table by Code; a Code without a row has a zero Row, which a
// test catches.
var byCode = func() (idx [numCodes]Row) {
	for _, r := range table {
		idx[r.Code] = r
	}
	return idx
}()

// Internal is the answer to a failure inside the platform: an *Error in
// err's chain as it is; API_SERVER_ERROR ("try again") when err says it is
// temporary (a Temporary method reporting true, as a store that cannot
// write does); INTERNAL_SERVER_ERROR otherwise.
func Internal(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var t interface{ Temporary() bool }
	if errors.As(err, &t) && t.Temporary() {
		return &Error{Code: APIServerError, Cause: err}
	}
	return &Error{Code: InternalServerError, Cause: err}
}

// Lookup returns the catalog row of c; an unknown c gets the row of
// InternalServerError.
func Lookup(c Code) Row {
	if c == 0 || c >= numCodes || byCode[c].Code != c {
		return byCode[InternalServerError]
	}
	return byCode[c]
}

// Rows returns every row of the catalog, in table order.
func Rows() []Row { return append([]Row(nil), table...) }

// String returns the v2 code of c, or its v1 code when it has no v2 code.
func (c Code) String() string {
	r := Lookup(c)
	if r.V2Code != "" {
		return r.V2Code
	}
	return r.V1Code
}

// Error is a client-visible error: a catalog condition with an optional
// message replacing the row's default v2 message. Data is sent along in the
// v1 body of duplicate_slip. Cause is for the server's log only and never
// reaches a client.
type Error struct {
	Code    Code
	Message string
	Data    any
	Cause   error
	// RetryAfter, when above 0, is how many seconds the client should wait
	// before it asks again (SLIP_PENDING): the body's retryAfter.
	RetryAfter int
}

// Error implements error.
func (e *Error) Error() string {
	s := e.Code.String()
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// E returns an error of the catalog condition c with its default message.
func E(c Code) *Error { return &Error{Code: c} }

// Errorf returns an error of c with a message of its own.
func Errorf(c Code, msg string) *Error { return &Error{Code: c, Message: msg} }

// FieldErrors collects the failing fields of a request so a
// VALIDATION_ERROR names them: every one when they are few, as a client
// needs, and otherwise the first ones and how many more. The message is
// bounded (MaxNamedFields fields, a field's name at maxFieldName bytes, the
// named part at maxFieldsMessage bytes), and so is the work of building it:
// a body naming 700,000 unknown fields costs a count, not a 16 MB answer.
type FieldErrors struct {
	named []string
	size  int // bytes of named, with separators
	more  int // failures not named
}

// Bounds of a VALIDATION_ERROR's message.
const (
	MaxNamedFields   = 10
	maxFieldName     = 64
	maxFieldEntry    = 160
	maxFieldsMessage = 600
)

// Add records that field failed for reason.
func (f *FieldErrors) Add(field, reason string) {
	if f.full() {
		f.more++
		return
	}
	f.add(clip(field, maxFieldName) + ": " + reason)
}

// More records n failures more that are not named.
func (f *FieldErrors) More(n int) { f.more += max(0, n) }

// Len is the number of failures recorded, named or not.
func (f *FieldErrors) Len() int { return len(f.named) + f.more }

// AddAll records every failure of g, each field named under prefix (as
// "plan." for the fields of a request's plan object).
func (f *FieldErrors) AddAll(prefix string, g FieldErrors) {
	for _, e := range g.named {
		if f.full() {
			f.more++
			continue
		}
		f.add(prefix + e)
	}
	f.more += g.more
}

// AddMessage records the failures a VALIDATION_ERROR's message names (one
// of another request, as a batch's items): its fields and how many more.
func (f *FieldErrors) AddMessage(msg string) {
	for _, e := range strings.Split(msg, "; ") {
		if n, ok := moreFields(e); ok {
			f.more += n
		} else if f.full() {
			f.more++
		} else {
			f.add(e)
		}
	}
}

func (f *FieldErrors) full() bool {
	return len(f.named) >= MaxNamedFields || f.size >= maxFieldsMessage
}

func (f *FieldErrors) add(entry string) {
	entry = clip(entry, maxFieldEntry)
	if f.size+len(entry) > maxFieldsMessage && len(f.named) > 0 {
		f.more++
		return
	}
	f.named = append(f.named, entry)
	f.size += len(entry) + 2
}

// Err returns nil when no field failed, or the VALIDATION_ERROR whose message
// names the failing fields, joined with "; ", then "and N more fields" when
// there were more than it names.
func (f FieldErrors) Err() error {
	if f.Len() == 0 {
		return nil
	}
	msg := strings.Join(f.named, "; ")
	if f.more > 0 {
		if msg != "" {
			msg += "; "
		}
		msg += "and " + strconv.Itoa(f.more) + " more field"
		if f.more > 1 {
			msg += "s"
		}
	}
	return Errorf(Validation, msg)
}

// moreFields reads the tail of a bounded VALIDATION_ERROR message: "and N
// more fields".
func moreFields(e string) (int, bool) {
	rest, ok := strings.CutPrefix(e, "and ")
	if !ok {
		return 0, false
	}
	num, word, ok := strings.Cut(rest, " ")
	if !ok || word != "more field" && word != "more fields" {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	return n, err == nil && n > 0
}

// clip cuts s to at most n bytes, at a character's start, marking the cut
// with "…".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - len("…")
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// Within returns err with its message placed in a part of the request: for
// a VALIDATION_ERROR every field it names is prefixed with "part.", for
// other codes the message is prefixed with "part: ". Errors that are not
// *Error are returned as they are.
func Within(err error, part string) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	_, body := V2Body(e)
	msg := part + ": " + body.Message
	if e.Code == Validation && e.Message != "" {
		fields := strings.Split(e.Message, "; ")
		for i, f := range fields {
			if _, tail := moreFields(f); !tail {
				fields[i] = part + "." + f
			}
		}
		msg = strings.Join(fields, "; ")
	}
	return &Error{Code: e.Code, Message: msg, Data: e.Data, Cause: e.Cause, RetryAfter: e.RetryAfter}
}
