package api

import "time"

// Kafka topics (ARCHITECTURE.md); the key of each topic's records is named
// beside it.
const (
	TopicUsage           = "slip.usage"            // key: service id
	TopicJobs            = "slip.jobs"             // key: job id
	TopicResults         = "slip.results"          // key: job id
	TopicWebhookOutcomes = "slip.webhook.outcomes" // key: job id
	TopicConfig          = "slip.config"           // key: service id
)

// Topics lists every platform topic.
var Topics = []string{TopicUsage, TopicJobs, TopicResults, TopicWebhookOutcomes, TopicConfig}

// UsageEvent records one verification attempt (slip.usage). Billable is true
// when the attempt consumed one unit of quota; finance counts billable events
// once per EventID however often one is delivered.
type UsageEvent struct {
	EventID    string    `json:"eventId"`
	OccurredAt time.Time `json:"occurredAt"`
	ServiceID  string    `json:"serviceId"`
	BranchID   string    `json:"branchId"`
	Kind       string    `json:"kind"`    // "bank" or "wallet"
	API        string    `json:"api"`     // "v1" or "v2"
	Mode       string    `json:"mode"`    // "sync" or "async"
	Outcome    string    `json:"outcome"` // "success" or the v2 error code
	Billable   bool      `json:"billable"`
	JobID      string    `json:"jobId,omitempty"` // async attempts
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
// Body is the exact webhook body; Signature is the X-Service-Signature
// value, empty when the branch has no webhook secret. A redelivery repeats
// Body and Signature byte for byte.
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

// WebhookPayload is the body of a result callback (spec 6.2).
type WebhookPayload struct {
	JobID     string     `json:"jobId"`
	BatchID   *string    `json:"batchId"`
	Status    string     `json:"status"` // success, not_found or failed
	Data      any        `json:"data"`
	Error     *ErrorBody `json:"error,omitempty"`
	Timestamp string     `json:"timestamp"`
}

// ErrorBody is the {code, message} of an error object.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// SignatureHeader carries the HMAC-SHA256 of a callback body (spec 6.3).
const SignatureHeader = "X-Service-Signature"

// ConfigEvent tells the edges that records of a service changed
// (slip.config): its branches, keys or their state. Every edge drops its
// cached auth records when it reads one.
type ConfigEvent struct {
	EventID   string    `json:"eventId"`
	ServiceID string    `json:"serviceId"`
	At        time.Time `json:"at"`
}
