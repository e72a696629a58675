// Package store is core's state: services, branches, API keys (as SHA-256
// digests), B2B clients (secrets sealed), bank accounts, verified slips,
// quota counters, async jobs, the audit log and the outbox of Kafka
// messages. Store is what core asks of it; Bolt keeps it in one bbolt file
// (one core node), and package pgstore in PostgreSQL (any number of cores).
// The records, the snapshot a verification is decided on and the effect it
// writes are this package's types, the same for both: the rules that decide
// live above the store (core/verify, core/jobs, core/admin), which only
// reads a snapshot and writes the effect decided.
//
// Package storetest is the suite every implementation passes.
package store

import (
	"errors"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/quota"
)

// Store is core's state. Its writes are atomic and durable when they
// return nil; a change function given to a write (Apply's decide,
// UpdateJob's change, ...) may run more than once and must set its
// results from what it is given alone. It is safe for concurrent use.
type Store interface {
	// Now is the store's clock: the time its records are written at.
	Now() time.Time
	// Ping reports whether the store can be read.
	Ping() error
	// Close finishes the writes in hand, writes the emitted messages and
	// releases the store.
	Close() error

	// Snapshot reads what a verification of slipKey by a branch needs
	// ("" for no slip). It fails with ErrNotFound for an unknown service
	// or branch, or a branch of another service.
	Snapshot(serviceID, branchID, slipKey string) (Snapshot, error)
	// Apply decides a verification again on a fresh snapshot, in the
	// write transaction, and writes the effect decide returns: the
	// charge, the slip's record and the usage event. When decide fails,
	// Apply writes nothing and returns its error. It returns the snapshot
	// decide saw.
	Apply(serviceID, branchID, slipKey string, decide func(Snapshot) (Effect, error)) (Snapshot, error)
	// Announce tells the store that the caller will soon write with
	// Apply; Retract, that it has written or will not. While announced
	// writes are on their way, a transaction waits for them up to
	// Options.Gather, so they share its commit.
	Announce()
	Retract()
	// ClaimNonce claims n for service in a write of its own, for a
	// request that makes no other. The zero Nonce writes nothing.
	ClaimNonce(serviceID string, n Nonce) error
	// ExpireNonces forgets up to max of the nonces no edge would take a
	// request with any more at now, and returns how many it forgot.
	ExpireNonces(now time.Time, max int) (int, error)
	// FindSlip returns the service's record of the slip whose transaction
	// reference is ref, and its key; ErrNotFound when the service has
	// none. A reference found at several sending banks is the one first
	// verified.
	FindSlip(serviceID, ref string) (key string, rec *SlipRecord, err error)
	// ExpireSlips removes up to max slip records first verified before
	// cutoff, and returns how many it removed.
	ExpireSlips(cutoff time.Time, max int) (int, error)
	// History lists the entries of q, newest first, at most q.Limit of
	// them, and the cursor to list the next ones from (nil when none
	// follow).
	History(q HistoryQuery) ([]Verification, *Cursor, error)

	// Quota returns the quota records of a branch and its service.
	Quota(serviceID, branchID string) (BranchQuota, error)
	// ChangeQuota applies change to a branch's quota atomically with every
	// verification.
	ChangeQuota(serviceID, branchID, action string, c Change, change func(q BranchQuota) (limit *int64, reset bool, err error)) (BranchQuota, error)
	// Counters returns every service's and branch's quota counters as of
	// at, read at one time so they agree with each other, services and
	// branches sorted by id.
	Counters() (at time.Time, out []ServiceCounters, err error)

	// InsertMissing inserts every record whose id (or key digest) is not
	// stored yet, all or none, and returns how many it inserted.
	InsertMissing(r Records) (int, error)
	Services() ([]Service, error)
	Service(id string) (Service, quota.Counter, int64, error)
	CreateService(sv Service, main Branch, client B2BClient, c Change) error
	UpdateService(id, action string, c Change, change func(sv *Service, used quota.Counter, now time.Time) error) (Service, error)
	Branches(serviceID string) ([]Branch, error)
	Branch(serviceID, branchID string) (Branch, error)
	CreateBranch(b Branch, c Change) error
	UpdateBranch(serviceID, branchID string, c Change, change func(*Branch, Usage) error) (Branch, error)
	DeleteBranch(serviceID, branchID string, c Change) error
	BranchByKey(keyDigest string) (sv Service, br Branch, first *B2BClient, keyEnds *time.Time, err error)
	RotateBranchKey(serviceID, branchID, newDigest string, overlap time.Duration, force bool, c Change) (Branch, error)
	RevokePreviousKey(serviceID, branchID string, c Change) (Branch, error)
	BranchConditions(serviceID, branchID string) (Conditions, error)
	SetBranchConditions(serviceID, branchID string, cond Conditions, c Change) error
	Client(keyDigest string) (sv Service, c B2BClient, err error)
	Clients(serviceID string) ([]B2BClient, error)
	CreateClient(c B2BClient, ch Change) (B2BClient, error)
	UpdateClient(serviceID, id string, ch Change, change func(*B2BClient)) (B2BClient, error)
	DeleteClient(serviceID, id string, ch Change) error
	RotateClientSecret(serviceID, id string, overlap time.Duration, force bool, ch Change, seal func(keyDigest string) []byte) (B2BClient, error)
	Accounts(serviceID, branchID string) ([]BankAccount, error)
	CreateAccount(a *BankAccount, c Change) error
	LinkAccount(serviceID, branchID, accountID string, link bool, c Change) (BankAccount, error)

	// Audit returns audit records newest first, at most f.Limit of them,
	// and the cursor of the next page ("" at the end).
	Audit(f AuditFilter) ([]api.AuditRecord, string, error)
	CreateAdminToken(t AdminToken, c Change) error
	DeleteAdminToken(id string, c Change) error
	AdminTokens() ([]AdminToken, error)
	AdminTokenByDigest(digest string) (AdminToken, error)

	// CreateJobs stores jobs, all or none, with msgs in the outbox; a
	// branch holds at most maxUnfinished unfinished jobs (0: no bound).
	CreateJobs(jobs []Job, msgs []Message, maxUnfinished int, nonce Nonce) error
	Job(id string) (Job, error)
	UpdateJob(id string, change func(j *Job) ([]Message, error)) (Job, error)
	DueJobs(now time.Time, max int) (ids []string, next time.Time, err error)
	ExpireJobs(cutoff time.Time, max int) (int, error)
	UnfinishedJobs(serviceID, branchID string) (int, error)

	// Emit queues a message that reports no state change of its own; it
	// joins the next transaction.
	Emit(m Message) error
	// Outbox returns up to max messages from the start of the outbox,
	// oldest first; OutboxAfter, those that follow seq.
	Outbox(max int) ([]Message, error)
	OutboxAfter(seq uint64, max int) ([]Message, error)
	// Ack removes every message up to and including seq: they reached the
	// broker.
	Ack(seq uint64) error
	// OutboxStats reports how many messages wait in the outbox and how
	// many were dropped because it was full.
	OutboxStats() (waiting, dropped int64)
	// OutboxReady is signalled (without blocking) after a transaction
	// that added messages to the outbox commits.
	OutboxReady() <-chan struct{}

	// Commits reports how many transactions the store ran and how many
	// writes they held; WriteFailures, how many it could not commit; Size,
	// the bytes it holds.
	Commits() (commits, writes int64)
	WriteFailures() int64
	Size() int64
}

var _ Store = (*Bolt)(nil)

// Errors of the store.
var (
	ErrNotFound = errors.New("store: not found")
	ErrClosed   = errors.New("store: closed")
)

// NoService refuses a change to a service that is unknown or deleted; it
// is ErrNotFound (errors.Is).
type NoService struct{ ID string }

func (e NoService) Error() string        { return "store: service " + e.ID + " is unknown or deleted" }
func (e NoService) Is(target error) bool { return target == ErrNotFound }

// DefaultOutboxLimit bounds the messages waiting in the outbox when Options
// does not.
const DefaultOutboxLimit = 1_000_000

// Options are what OpenWith is told beyond the path and clock.
type Options struct {
	// OutboxLimit bounds the messages waiting in the outbox (0:
	// DefaultOutboxLimit).
	OutboxLimit int64
	// Gather is how long a transaction may wait for writes already on
	// their way (see Announce): they then share its commit (a disk sync),
	// which costs core more than anything else a verification does. A
	// write waits at most Gather, and never for a write nobody announced.
	// 0: every transaction commits at once.
	Gather time.Duration
	// SlipAges keeps bbolt's index of the slip records by age, which
	// ExpireSlips reads (PostgreSQL keeps one always). A store that never expires slip records goes without: each
	// verification writes one key less (a page more of every commit).
	// Opened without it, the index is dropped; opened with it again, it
	// is built anew from the records.
	SlipAges bool
}

// WriteError is a write the store could not make durable (a full or
// failing disk): nothing of it was kept, and the same write may succeed
// later, so clients are told to try again.
type WriteError struct{ Err error }

func (e WriteError) Error() string   { return "store: write failed: " + e.Err.Error() }
func (e WriteError) Unwrap() error   { return e.Err }
func (e WriteError) Temporary() bool { return true }
