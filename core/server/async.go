package server

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/jobs"
	"github.com/slipverify/slipverify/core/server/fields"
	"github.com/slipverify/slipverify/core/verify"
)

// asyncFields are the fields of an async single submit: a v2 bank
// verification and its callback URL.
var asyncFields = append(v2BankFields[:len(v2BankFields):len(v2BankFields)], "callbackUrl")

// submitAsync accepts one bank slip for async verification: the v2 bank
// body (JSON or multipart) plus an optional callbackUrl.
func (s *Server) submitAsync(ctx *fasthttp.RequestCtx, c caller) (any, error) {
	f, image, err := readFields(ctx, c.version)
	if err != nil {
		return nil, err
	}
	cb, err := callbackField(f)
	if err != nil {
		return nil, err
	}
	r, err := verifyRequest(f, image, c, asyncFields)
	if err != nil {
		return nil, err
	}
	if err := checkPayload(r); err != nil {
		return nil, err
	}
	out, err := s.jobs.Submit(ctx, c.serviceID, c.branchID, []verify.Request{r}, cb, false)
	return accepted(out), err
}

// submitBatch accepts {items: [v2 bank body...], callbackUrl?}: every item
// is checked before any job is created, and each becomes its own job.
func (s *Server) submitBatch(ctx *fasthttp.RequestCtx, c caller) (any, error) {
	var fe api.FieldErrors
	f, err := fields.Body(ctx, &fe, "items", "callbackUrl")
	if err != nil {
		return nil, err
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	cb, err := callbackField(f)
	if err != nil {
		return nil, err
	}
	items, ok := fields.Elements(f.Raw("items"), jobs.MaxBatch)
	if !ok {
		return nil, api.Errorf(api.Validation, "items: must be an array of verification requests")
	}
	if len(items) == 0 || len(items) > jobs.MaxBatch {
		return nil, api.Errorf(api.Validation, fmt.Sprintf("items: must hold 1 to %d requests", jobs.MaxBatch))
	}
	reqs := make([]verify.Request, len(items))
	var errs []error
	for i, raw := range items {
		item := fmt.Sprintf("items[%d]", i)
		f, err := fields.JSON(raw)
		if err == nil {
			reqs[i], err = verifyRequest(f, nil, c, v2BankFields)
		}
		if err == nil {
			err = checkPayload(reqs[i])
		}
		if err != nil {
			errs = append(errs, api.Within(err, item))
		}
	}
	if err := joinItemErrors(errs); err != nil {
		return nil, err
	}
	out, err := s.jobs.Submit(ctx, c.serviceID, c.branchID, reqs, cb, true)
	return accepted(out), err
}

// joinItemErrors answers every item's VALIDATION_ERROR together, or, when
// no item has one, the first item's error of another code.
func joinItemErrors(errs []error) error {
	var fe api.FieldErrors
	var other error
	for _, err := range errs {
		var e *api.Error
		if errors.As(err, &e) && e.Code == api.Validation {
			fe.AddMessage(e.Message)
		} else if other == nil {
			other = err
		}
	}
	if fe.Len() > 0 {
		return fe.Err()
	}
	return other
}

// callbackField reads the optional callbackUrl.
func callbackField(f fields.Set) (string, error) {
	if !f.Has("callbackUrl") {
		return "", nil
	}
	s, ok := f.Str("callbackUrl")
	if !ok || s == "" {
		return "", api.Errorf(api.Validation, "callbackUrl: must be a non-empty string")
	}
	if utf8.RuneCountInString(s) > maxURL {
		return "", api.Errorf(api.Validation, "callbackUrl: "+urlTooLong)
	}
	if msg := hookURLProblem(s); msg != "" {
		return "", api.Errorf(api.Validation, "callbackUrl: "+msg)
	}
	return s, nil
}

// checkPayload refuses a payload that is no bank slip at submit, as the
// sync verification would: SLIP_NOT_FOUND.
func checkPayload(r verify.Request) error {
	if r.Source.Payload == "" || verify.IsBankSlip(r.Source.Payload) {
		return nil
	}
	return api.Within(api.E(api.InvalidPayload), "payload")
}

// pollJob answers GET /v2/verify/bank/jobs/:jobId.
func (s *Server) pollJob(ctx *fasthttp.RequestCtx, c caller) (any, error) {
	return s.jobs.Poll(c.serviceID, c.branchID, ctx.UserValue("job").(string))
}
