package api

import (
	"encoding/json"
	"time"
)

// TopicAudit carries every audit record (key: service id, "" for a change
// of no service): the usage tier keeps them in ClickHouse for long
// retention, beside the usage ledger.
const TopicAudit = "slip.audit"

// AuditRecord is one change to the platform's records, written in the same
// transaction as the change: who made it (an operator's admin token, a
// tenant's B2B client, the seed, the platform itself), what it changed and
// how. Before and After are the changed record as the admin API shows it,
// with every key and secret left out; null for a creation or a deletion.
type AuditRecord struct {
	ID        string          `json:"id"` // UUID; the record's eventId on Kafka too
	At        time.Time       `json:"at"`
	Actor     AuditActor      `json:"actor"`
	RequestID string          `json:"requestId,omitempty"`
	Action    string          `json:"action"` // e.g. service.create, branch.key.rotate
	ServiceID string          `json:"serviceId,omitempty"`
	Target    AuditTarget     `json:"target"`
	Before    json.RawMessage `json:"before"`
	After     json.RawMessage `json:"after"`
	Reason    string          `json:"reason,omitempty"`
}

// AuditActor is who made a change.
type AuditActor struct {
	Type string `json:"type"` // admin (a token), b2b (a client), seed, system
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// AuditTarget is the record a change is to.
type AuditTarget struct {
	Type string `json:"type"` // service, branch, client, token
	ID   string `json:"id"`
}

// Audit actor types.
const (
	ActorAdmin  = "admin"
	ActorB2B    = "b2b"
	ActorSeed   = "seed"
	ActorSystem = "system"
)
