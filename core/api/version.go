package api

import "encoding/json"

// Version is the API version a client speaks; it decides the shape of every
// response body.
type Version uint8

// The two API versions.
const (
	V1 Version = 1
	V2 Version = 2
)

// V1Prefix is the path prefix under which every v1 route also answers, as
// the commercial API the spec describes serves them.
const V1Prefix = "/api/v1"

// String returns "v1" or "v2".
func (v Version) String() string {
	if v == V1 {
		return "v1"
	}
	return "v2"
}

type v2Error struct {
	Success bool        `json:"success"`
	Error   v2ErrorBody `json:"error"`
}

// v2ErrorBody is the error object of a v2 answer: a job's (ErrorBody) and,
// when the client should wait before it asks again, retryAfter.
type v2ErrorBody struct {
	ErrorBody
	RetryAfter int `json:"retryAfter,omitempty"`
}

type v1Body struct {
	Status     int    `json:"status"`
	Message    string `json:"message,omitempty"`
	Data       any    `json:"data,omitempty"`
	RetryAfter int    `json:"retryAfter,omitempty"`
}

type v2OK struct {
	Success bool   `json:"success"`
	Message string `json:"message"`
	Data    any    `json:"data"`
}

// Appender is data that appends its own JSON encoding, as encoding/json
// would write it: RenderOK writes it without reflection.
type Appender interface {
	AppendJSON(b []byte) []byte
}

// okMessage is the message of every success.
const okMessage = "success"

// RenderError returns the HTTP status and body of e for a client of version
// v: {status, message[, data]} with the v1 code as message, or
// {success:false, error:{code, message}}. A v1-only condition reaching a v2
// client is rendered as INTERNAL_SERVER_ERROR: it is a bug, not a contract.
func RenderError(v Version, e *Error) (int, []byte) {
	r := Lookup(e.Code)
	if v == V1 {
		return r.V1Status, mustMarshal(v1Body{Status: r.V1Status, Message: r.V1Code, Data: e.Data, RetryAfter: e.RetryAfter})
	}
	status, body := V2Body(e)
	return status, mustMarshal(v2Error{Error: v2ErrorBody{body, e.RetryAfter}})
}

// V2Body returns the HTTP status and the v2 error object of e, as an error
// answer or a failed job carries it.
func V2Body(e *Error) (int, ErrorBody) {
	r := Lookup(e.Code)
	if r.V2Code == "" {
		r = Lookup(InternalServerError)
	} else if e.Message != "" {
		r.Message = e.Message
	}
	return r.V2Status, ErrorBody{Code: r.V2Code, Message: r.Message}
}

// RenderOK returns the body of a successful response carrying data:
// {status: 200, message: "success", data} for v1 (spec: every v1 body has
// a message, an error's its code), {success: true, message: "success",
// data} for v2.
func RenderOK(v Version, data any) ([]byte, error) {
	if a, ok := data.(Appender); ok {
		b := make([]byte, 0, 1024)
		if v == V1 {
			b = append(b, `{"status":200,"message":"`+okMessage+`","data":`...)
		} else {
			b = append(b, `{"success":true,"message":"`+okMessage+`","data":`...)
		}
		return append(a.AppendJSON(b), '}'), nil
	}
	if v == V1 {
		return json.Marshal(v1Body{Status: 200, Message: okMessage, Data: data})
	}
	return json.Marshal(v2OK{Success: true, Message: okMessage, Data: data})
}

// mustMarshal encodes values made only of strings and numbers, which cannot
// fail to encode.
func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
