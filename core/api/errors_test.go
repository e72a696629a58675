package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The codes of spec section 7 and the decisions of ARCHITECTURE.md: every
// one must be reachable through some catalog row.
var (
	specV2 = []string{"MISSING_API_KEY", "INVALID_API_KEY", "BRANCH_INACTIVE", "SERVICE_BANNED",
		"SERVICE_EXPIRED", "IP_NOT_ALLOWED", "QUOTA_EXCEEDED", "USER_BANNED", "VALIDATION_ERROR",
		"URL_PROTOCOL_NOT_ALLOWED", "URL_INVALID_IP_RANGE", "IMAGE_URL_UNREACHABLE",
		"IMAGE_SIZE_TOO_LARGE", "INVALID_IMAGE_FORMAT", "INVALID_BANK_CODE", "INVALID_EXTRA_VERIFY",
		"INVALID_MATCH_MODE", "INVALID_CALLBACK_URL", "SLIP_NOT_FOUND", "SLIP_PENDING",
		"BANK_ACCOUNT_NOT_FOUND", "JOB_NOT_FOUND", "NOT_FOUND", "BANK_ACCOUNT_DUPLICATE",
		"RATE_LIMIT_EXCEEDED", "API_SERVER_ERROR", "INTERNAL_SERVER_ERROR",
		"INVALID_SIGNATURE", "INVALID_TIMESTAMP", "DUPLICATE_NONCE", "PERMISSION_DENIED"}
	specV1 = []string{"unauthorized", "access_denied", "application_expired", "application_deactivated",
		"quota_exceeded", "invalid_payload", "invalid_check_duplicate", "invalid_url", "invalid_image",
		"image_size_too_large", "invalid_request", "duplicate_slip", "slip_not_found", "slip_pending",
		"qrcode_not_found", "not_found", "rate_limit_exceeded", "server_error", "api_server_error"}
)

func TestCatalogComplete(t *testing.T) {
	seen := map[Code]bool{}
	v2, v1 := map[string]bool{}, map[string]bool{}
	for _, r := range Rows() {
		if seen[r.Code] {
			t.Errorf("code %d has two rows", r.Code)
		}
		seen[r.Code] = true
		if r.V1Status < 400 || r.V1Code == "" || r.Message == "" {
			t.Errorf("row %v: incomplete v1 side or message: %+v", r.Code, r)
		}
		if (r.V2Code == "") != (r.V2Status == 0) {
			t.Errorf("row %v: v2 code and status must be set together: %+v", r.Code, r)
		}
		v2[r.V2Code], v1[r.V1Code] = true, true
	}
	for c := Code(1); c < numCodes; c++ {
		if !seen[c] {
			t.Errorf("code %d has no row", c)
		}
	}
	for _, c := range specV2 {
		if !v2[c] {
			t.Errorf("v2 code %s missing from the catalog", c)
		}
	}
	for _, c := range specV1 {
		if !v1[c] {
			t.Errorf("v1 code %s missing from the catalog", c)
		}
	}
}

func TestRenderError(t *testing.T) {
	f := func(v Version, e *Error, wantStatus int, want string) {
		t.Helper()
		status, body := RenderError(v, e)
		if status != wantStatus || string(body) != want {
			t.Errorf("RenderError(%v, %v) = %d %s, want %d %s", v, e, status, body, wantStatus, want)
		}
	}
	f(V2, E(QuotaExceeded), 403, `{"success":false,"error":{"code":"QUOTA_EXCEEDED","message":"Monthly quota is used up"}}`)
	f(V1, E(QuotaExceeded), 403, `{"status":403,"message":"quota_exceeded"}`)
	f(V2, E(InvalidPayload), 404, `{"success":false,"error":{"code":"SLIP_NOT_FOUND","message":"Slip payload is not a valid slip QR code"}}`)
	f(V1, E(InvalidPayload), 400, `{"status":400,"message":"invalid_payload"}`)
	f(V1, &Error{Code: DuplicateSlip, Data: map[string]int{"amount": 5}}, 400, `{"status":400,"message":"duplicate_slip","data":{"amount":5}}`)
	f(V2, E(DuplicateSlip), 500, `{"success":false,"error":{"code":"INTERNAL_SERVER_ERROR","message":"Unexpected error"}}`)
	f(V2, Errorf(NotFound, "no <route>"), 404, `{"success":false,"error":{"code":"NOT_FOUND","message":"no \u003croute\u003e"}}`)
	f(V2, &Error{Code: 200}, 500, `{"success":false,"error":{"code":"INTERNAL_SERVER_ERROR","message":"Unexpected error"}}`)
}

func TestFieldErrors(t *testing.T) {
	var f FieldErrors
	if f.Err() != nil {
		t.Fatal("no failing field must give no error")
	}
	f.Add("payload", "is required")
	f.Add("checkDuplicate", "must be a boolean")
	_, body := RenderError(V2, f.Err().(*Error))
	var got struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Error.Code != "VALIDATION_ERROR" || got.Error.Message != "payload: is required; checkDuplicate: must be a boolean" {
		t.Errorf("got %+v", got.Error)
	}
}

func TestRenderOK(t *testing.T) {
	b1, _ := RenderOK(V1, map[string]int{"a": 1})
	b2, _ := RenderOK(V2, map[string]int{"a": 1})
	if string(b1) != `{"status":200,"message":"success","data":{"a":1}}` || string(b2) != `{"success":true,"message":"success","data":{"a":1}}` {
		t.Errorf("got %s and %s", b1, b2)
	}
}

type temporary struct{ temp bool }

func (t temporary) Error() string   { return "disk full" }
func (t temporary) Temporary() bool { return t.temp }

func TestInternal(t *testing.T) {
	quota := E(QuotaExceeded)
	for _, c := range []struct {
		name string
		err  error
		want Code
	}{
		{"a temporary failure: try again", fmt.Errorf("commit: %w", temporary{true}), APIServerError},
		{"a failure that says it is not temporary", temporary{false}, InternalServerError},
		{"any other failure", errors.New("boom"), InternalServerError},
		{"an answer already decided", fmt.Errorf("wrapped: %w", quota), QuotaExceeded},
	} {
		got := Internal(c.err)
		if got.Code != c.want || !errors.Is(got, c.err) && got != quota {
			t.Errorf("%s: Internal(%v) = %v (cause %v), want %v", c.name, c.err, got.Code, got.Cause, c.want)
		}
	}
}

// TestUsageEventJSON: AppendJSON writes what encoding/json writes.
func TestUsageEventJSON(t *testing.T) {
	for _, e := range []UsageEvent{
		{EventID: "e1", OccurredAt: time.Date(2026, 11, 1, 0, 0, 0, 123456789, time.UTC), ServiceID: "svc<1>", BranchID: "br",
			Kind: KindBank, API: "v2", Mode: ModeAsync, Outcome: "QUOTA_EXCEEDED", Billable: true, JobID: "j1"},
		{OccurredAt: time.Date(2026, 11, 1, 7, 0, 0, 0, time.FixedZone("ICT", 7*3600))},
	} {
		want, _ := json.Marshal(e)
		if got := e.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("AppendJSON %s\nencoding/json %s", got, want)
		}
	}
}

// TestRenderOKAppender: data that appends itself renders as
// encoding/json renders it.
func TestRenderOKAppender(t *testing.T) {
	e := UsageEvent{EventID: "e1", Kind: KindBank}
	for _, v := range []Version{V1, V2} {
		got, _ := RenderOK(v, &e)
		want, _ := RenderOK(v, struct{ UsageEvent }{e}) // the same fields, through reflection
		if string(got) != string(want) {
			t.Errorf("%v: %s, want %s", v, got, want)
		}
	}
}

// TestFieldErrorsBounded: the message names at most MaxNamedFields fields,
// each name cut short, then how many more; a batch's items' messages join
// under the same bounds, and Within keeps the count as it is.
func TestFieldErrorsBounded(t *testing.T) {
	message := func(f FieldErrors) string { return f.Err().(*Error).Message }
	var f FieldErrors
	for i := range 700000 {
		f.Add(fmt.Sprintf("k%d", i), "unknown field")
	}
	if got := message(f); !strings.HasPrefix(got, "k0: unknown field; k1: unknown field") || !strings.HasSuffix(got, "k9: unknown field; and 699990 more fields") {
		t.Errorf("700,000 fields: %q", got)
	}
	var long FieldErrors
	long.Add(strings.Repeat("ก", 1000), "unknown field")
	if got := message(long); len(got) > 100 || !strings.HasSuffix(got, "…: unknown field") || !utf8.ValidString(got) {
		t.Errorf("a long name: %q", got)
	}
	var batch FieldErrors
	for i := range 100 {
		item := Within(f.Err(), fmt.Sprintf("items[%d]", i)).(*Error).Message
		if i == 0 && !strings.HasSuffix(item, "; and 699990 more fields") {
			t.Errorf("an item's message: %q", item)
		}
		batch.AddMessage(item)
	}
	if got := message(batch); len(got) > 700 || !strings.HasPrefix(got, "items[0].k0: unknown field") || !strings.HasSuffix(got, "; and 69999990 more fields") {
		t.Errorf("a batch: %d bytes: %q", len(got), got)
	}
	var one FieldErrors
	one.More(1)
	if got := message(one); got != "and 1 more field" {
		t.Errorf("one unnamed: %q", got)
	}
}
