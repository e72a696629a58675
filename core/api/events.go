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
