package api

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/slipverify/slipverify/core/lib/jsonw"
)

// Kafka topics (ARCHITECTURE.md); the key of each topic's records is named
// beside it.
const (
	TopicUsage           = "slip.usage"            // key: service id
	TopicJobs            = "slip.jobs"             // key: job id
	TopicResults         = "slip.results"          // key: job id
	TopicWebhookOutcomes = "slip.webhook.outcomes" // key: job id
	TopicConfig          = "slip.config"           // key: service id
	TopicNonces          = "slip.nonces"           // key: the edge process; a binary batch of nonces (edge/nonce/kafkanonce)
)

// Topics lists every platform topic.
var Topics = []string{TopicUsage, TopicJobs, TopicResults, TopicWebhookOutcomes, TopicConfig, TopicAudit, TopicNonces}

// UsageEvent records one verification attempt (slip.usage). Billable is true
// when the attempt consumed one unit of quota; finance counts billable events
// once per EventID however often one is delivered.
//
// Amount and SendingBank are set on a billable event only: the slip the
// attempt was charged for, its amount in satang (THB × 100, exact) and the
// code of its sending bank (the 3 digits of its QR payload, "004"; empty for
// a wallet slip, which names no bank). An attempt charged nothing (a refusal,
// an error, a free repeat of a slip the branch verified before) carries
// neither, so the amounts of a service's events add up to the THB of the
// slips it paid to verify; events written before these fields read as 0
// and "".
type UsageEvent struct {
	EventID     string    `json:"eventId"`
	OccurredAt  time.Time `json:"occurredAt"`
	ServiceID   string    `json:"serviceId"`
	BranchID    string    `json:"branchId"`
	Kind        string    `json:"kind"`    // "bank" or "wallet"
	API         string    `json:"api"`     // "v1" or "v2"
	Mode        string    `json:"mode"`    // "sync" or "async"
	Outcome     string    `json:"outcome"` // "success" or the v2 error code
	Billable    bool      `json:"billable"`
	Amount      int64     `json:"amount,omitempty"`      // satang
	SendingBank string    `json:"sendingBank,omitempty"` // bank code
	JobID       string    `json:"jobId,omitempty"`       // async attempts
}

// AppendJSON appends e as encoding/json writes it, without reflection: a
// usage event is written for every verification, in the store's write
// transaction.
func (e *UsageEvent) AppendJSON(b []byte) []byte {
	b = jsonw.Field(b, "eventId", true)
	b = jsonw.String(b, e.EventID)
	b = jsonw.Field(b, "occurredAt", false)
	b = append(b, '"')
	b = e.OccurredAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	for _, f := range [...]struct{ name, v string }{{"serviceId", e.ServiceID}, {"branchId", e.BranchID}, {"kind", e.Kind},
		{"api", e.API}, {"mode", e.Mode}, {"outcome", e.Outcome}} {
		b = jsonw.Field(b, f.name, false)
		b = jsonw.String(b, f.v)
	}
	b = jsonw.Field(b, "billable", false)
	b = jsonw.Bool(b, e.Billable)
	if e.Amount != 0 {
		b = jsonw.Field(b, "amount", false)
		b = strconv.AppendInt(b, e.Amount, 10)
	}
	if e.SendingBank != "" {
		b = jsonw.Field(b, "sendingBank", false)
		b = jsonw.String(b, e.SendingBank)
	}
	if e.JobID != "" {
		b = jsonw.Field(b, "jobId", false)
		b = jsonw.String(b, e.JobID)
	}
	return append(b, '}')
}

// Usage event values.
const (
	KindBank   = "bank"
	KindWallet = "wallet"
	ModeSync   = "sync"
	ModeAsync  = "async"
	OutcomeOK  = "success"
)

// JobMessage asks a worker to run one attempt of an async job (slip.jobs).
// A message for an attempt the job is no longer waiting for is stale and
// skipped, so a redelivered message never runs an attempt twice.
type JobMessage struct {
	EventID string `json:"eventId"`
	JobID   string `json:"jobId"`
	Attempt int    `json:"attempt"` // from 1
}

// Callback asks the dispatcher to deliver a job's result (slip.results).
// Body is the exact webhook body (WebhookPayload.Body); Signature is the
// value of the signature header (SignatureHeader, or the name the
// dispatcher is configured with), empty when the branch has no webhook
// secret. A redelivery repeats Body and Signature byte for byte.
type Callback struct {
	EventID   string `json:"eventId"`
	JobID     string `json:"jobId"`
	ServiceID string `json:"serviceId,omitempty"` // whose job: the dispatcher bounds each service's deliveries
	Delivery  int    `json:"delivery"`            // from 1
	URL       string `json:"url"`
	Body      string `json:"body"`
	Signature string `json:"signature,omitempty"`
}

// WebhookOutcome reports one delivery of a Callback
// (slip.webhook.outcomes). OK is true for a 2xx answer.
type WebhookOutcome struct {
	EventID  string    `json:"eventId"`
	JobID    string    `json:"jobId"`
	Delivery int       `json:"delivery"`
	At       time.Time `json:"at"`
	OK       bool      `json:"ok"`
	Status   int       `json:"status,omitempty"` // the HTTP status, if one came
	Error    string    `json:"error,omitempty"`  // the network error or timeout, if any
	// Deferred: the receiver's host had no free delivery slot within the
	// dispatcher's wait, so nothing was sent; not an attempt.
	Deferred bool `json:"deferred,omitempty"`
}

// WebhookPayload is the body of a result callback (spec 6.2); Body
// encodes it.
type WebhookPayload struct {
	JobID     string     `json:"jobId"`
	BatchID   *string    `json:"batchId"`
	Status    string     `json:"status"` // success, not_found or failed
	Data      any        `json:"data"`
	Error     *ErrorBody `json:"error,omitempty"`
	Timestamp string     `json:"timestamp"`
}

// Body returns the bytes of the callback that carries p: compact JSON,
// written as JavaScript's JSON.stringify writes it, so that a receiver
// that signs JSON.stringify(JSON.parse(body)) instead of the raw body
// (spec 6.3 says not to, but receivers in the wild do) gets back the bytes
// core signed, and its check passes.
//
// Go's encoder differs from JSON.stringify only in what it escapes: "<",
// ">" and "&" (HTML escaping, turned off here), U+2028 and U+2029, and the
// U+FFFD it writes for a byte of invalid UTF-8; JSON.stringify writes all
// of them as themselves. The rest already agrees for what a payload holds:
// "\b", "\f", "\n", "\r", "\t" and "\u00xx" (lower-case hex) for the other
// control characters, numbers in ECMAScript's shortest form, struct fields
// in their declared order. Left as Go writes them, since no payload field
// carries one: -0 (JSON.stringify writes 0), integers beyond 2^53, and map
// keys that look like array indexes (which JavaScript puts first).
func (p WebhookPayload) Body() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	return unescapeSeparators(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// unescapeSeparators rewrites, in place, the escapes \u2028, \u2029 and
// \ufffd of Go's JSON output b as the characters themselves (3 bytes of
// UTF-8 for the 6 of the escape). Go's JSON has a backslash only inside a
// string, where each one starts an escape, so reading escape after escape
// is exact: "\\u2028" (a backslash, then the text u2028) is the escape
// "\\" and text that is left alone.
func unescapeSeparators(b []byte) []byte {
	w := 0
	for r := 0; r < len(b); {
		if b[r] != '\\' {
			b[w] = b[r]
			w, r = w+1, r+1
			continue
		}
		if b[r+1] != 'u' { // "\\", "\"", "\n", ...
			w += copy(b[w:], b[r:r+2])
			r += 2
			continue
		}
		var c rune
		switch string(b[r+2 : r+6]) {
		case "2028":
			c = '\u2028'
		case "2029":
			c = '\u2029'
		case "fffd":
			c = utf8.RuneError
		}
		if c == 0 { // "\u00xx": a control character
			w += copy(b[w:], b[r:r+6])
		} else {
			w += utf8.EncodeRune(b[w:], c) // w <= r: over bytes already read
		}
		r += 6
	}
	return b[:w]
}

// ErrorBody is the {code, message} of an error object.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// SignatureHeader carries the HMAC-SHA256 of a callback body (spec 6.3):
// the default name; a deployment may name it otherwise
// (SLIP_WEBHOOK_SIGNATURE_HEADER, read by the dispatcher).
const SignatureHeader = "X-Service-Signature"

// ConfigEvent tells the edges that records of a service changed
// (slip.config): its branches, keys or their state. Every edge drops its
// cached auth records when it reads one.
type ConfigEvent struct {
	EventID   string    `json:"eventId"`
	ServiceID string    `json:"serviceId"`
	At        time.Time `json:"at"`
}
