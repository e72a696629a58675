package store

import (
	"encoding/json"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/seedfile"
	"github.com/slipverify/slipverify/core/quota"
)

// Service is a client account (application). Its plan is its name,
// QuotaLimit, CycleAnchorDay and Rate; Pending, when set, replaces them
// from a later period (At applies it).
type Service struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	State          string `json:"state"` // active, expired, banned or deleted
	UserBanned     bool   `json:"userBanned"`
	QuotaLimit     int64  `json:"quotaLimit"`
	CycleAnchorDay int    `json:"cycleAnchorDay"`
	Rate           Rate   `json:"rate"`
	PlanName       string `json:"planName,omitempty"`
	// ExpiresAt, when set, is the end of the service's term: from then on
	// it is expired (At), with no sweep to wait for.
	ExpiresAt    *time.Time   `json:"expiresAt,omitempty"`
	ContactEmail *string      `json:"contactEmail,omitempty"`
	StateReason  string       `json:"stateReason,omitempty"`
	CreatedAt    *time.Time   `json:"createdAt,omitempty"`
	Pending      *PendingPlan `json:"pendingPlan,omitempty"`
	// AnchorSince is when CycleAnchorDay took effect (Unix seconds; 0: it
	// always was): a plan that moved the anchor starts a period there.
	AnchorSince int64 `json:"anchorSince,omitempty"`
}

// PeriodStart returns the start of the billing period holding t: at the
// anchor day's midnight in Bangkok (quota.PeriodStart), but never before
// the anchor took effect, so the first period under a new anchor runs from
// the old one's end to the new anchor day.
func (sv *Service) PeriodStart(t time.Time) time.Time {
	start := quota.PeriodStart(t, sv.CycleAnchorDay)
	if since := time.Unix(sv.AnchorSince, 0).In(quota.Bangkok); sv.AnchorSince != 0 && start.Before(since) {
		return since
	}
	return start
}

// PeriodEnd returns the start of the period after the one beginning at
// start.
func (sv *Service) PeriodEnd(start time.Time) time.Time {
	return quota.PeriodEnd(quota.PeriodStart(start, sv.CycleAnchorDay), sv.CycleAnchorDay)
}

// Plan is what a service's plan sets.
type Plan struct {
	Name           string `json:"name"`
	QuotaLimit     int64  `json:"quotaLimit"`
	Rate           Rate   `json:"rate"`
	CycleAnchorDay int    `json:"cycleAnchorDay"`
}

// PendingPlan is a plan that applies from the period starting at From
// (Unix seconds).
type PendingPlan struct {
	Plan
	From int64 `json:"from"`
}

// Plan returns the service's plan now in force, as stored.
func (sv *Service) Plan() Plan {
	return Plan{Name: sv.PlanName, QuotaLimit: sv.QuotaLimit, Rate: sv.Rate, CycleAnchorDay: sv.CycleAnchorDay}
}

// setPlan puts p in force.
func (sv *Service) setPlan(p Plan) {
	sv.PlanName, sv.QuotaLimit, sv.Rate, sv.CycleAnchorDay = p.Name, p.QuotaLimit, p.Rate, p.CycleAnchorDay
}

// At returns the service as it stands at t: a pending plan whose period
// has begun in force, and an active service past its end date expired.
// Every reader that decides by a service's plan or state reads it through
// At, so a change made ahead of time takes effect at its instant.
func (sv Service) At(t time.Time) Service {
	if p := sv.Pending; p != nil && t.Unix() >= p.From {
		if p.CycleAnchorDay != sv.CycleAnchorDay {
			sv.AnchorSince = p.From
		}
		sv.setPlan(p.Plan)
		sv.Pending = nil
	}
	sv.State = api.StateAt(sv.State, sv.ExpiresAt, t)
	return sv
}

// Service states (core/api's, the edge reads them too), and deleted: a
// deleted service's keys are unknown keys, and its id is never reused.
const (
	StateActive  = api.StateActive
	StateExpired = api.StateExpired
	StateBanned  = api.StateBanned
	StateDeleted = "deleted"
)

// Rate is a service plan's verification rate per budget, in requests per
// second per branch: the seed file's, kept as it is written there.
type Rate = seedfile.Rate

// Services returns every service, deleted ones too, by id.
func (s *Bolt) Services() ([]Service, error) {
	var out []Service
	err := s.db.View(func(tx *bolt.Tx) error {
		now := s.now()
		return tx.Bucket(bucketServices).ForEach(func(_, v []byte) error {
			var sv Service
			if err := json.Unmarshal(v, &sv); err != nil {
				return err
			}
			out = append(out, sv.At(now))
			return nil
		})
	})
	return out, err
}

// Service returns a service as it stands now, with its counters of the
// current period.
func (s *Bolt) Service(id string) (Service, quota.Counter, int64, error) {
	var sv Service
	var c quota.Counter
	var period int64
	err := s.db.View(func(tx *bolt.Tx) error {
		if err := getJSON(tx.Bucket(bucketServices), id, &sv); err != nil {
			return err
		}
		now := s.now()
		sv = sv.At(now)
		u := periodUsage(tx, &sv, "", now)
		c, period = u.Service, u.PeriodStart
		return nil
	})
	return sv, c, period, err
}

// CreateService stores a new service with its main branch and its first
// B2B client. An id or key in use, by a deleted service too, is ErrExists.
func (s *Bolt) CreateService(sv Service, main Branch, client B2BClient, c Change) error {
	return s.write(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketServices).Get([]byte(sv.ID)) != nil {
			return ErrExists
		}
		if tx.Bucket(bucketBranches).Get([]byte(main.ID)) != nil || tx.Bucket(bucketBranchesDeleted).Get([]byte(main.ID)) != nil ||
			tx.Bucket(bucketKeys).Get([]byte(main.KeyDigest)) != nil || tx.Bucket(bucketB2B).Get([]byte(client.KeyDigest)) != nil {
			return ErrExists
		}
		seq, err := tx.Bucket(bucketB2B).NextSequence()
		if err != nil {
			return err
		}
		client.Seq = seq
		err = errors.Join(
			putJSON(tx.Bucket(bucketServices), sv.ID, sv),
			putJSON(tx.Bucket(bucketBranches), main.ID, main),
			tx.Bucket(bucketKeys).Put([]byte(main.KeyDigest), []byte(main.ID)),
			branchesByService.add(tx, sv.ID, main.ID),
			putJSON(tx.Bucket(bucketB2B), client.KeyDigest, client),
			tx.Bucket(bucketB2BByService).Put(serviceSeqKey(sv.ID, seq), []byte(client.KeyDigest)),
		)
		if err != nil {
			return err
		}
		return s.audit(tx, c, "service.create", sv.ID, api.AuditTarget{Type: "service", ID: sv.ID}, nil, sv)
	})
}

// UpdateService applies change to a stored service (not to its view At
// now: a pending plan stays pending until change says otherwise) and
// writes it with its audit record under action. change gets the service's
// counter of the current period and returns an ErrRule refusal or nil. A
// deleted service changes no more (ErrNotFound).
func (s *Bolt) UpdateService(id, action string, c Change, change func(sv *Service, used quota.Counter, now time.Time) error) (Service, error) {
	var sv Service
	err := s.write(func(tx *bolt.Tx) error {
		var err error
		if sv, err = liveService(tx, id); err != nil {
			return err
		}
		now := s.now()
		state := sv.State // At's expired is a view of the end date, not a state to write
		sv = sv.At(now)
		sv.State = state
		before := sv
		if err := change(&sv, periodUsage(tx, &sv, "", now).Service, now); err != nil {
			return err
		}
		if err := putJSON(tx.Bucket(bucketServices), id, sv); err != nil {
			return err
		}
		return s.audit(tx, c, action, id, api.AuditTarget{Type: "service", ID: id}, before, sv)
	})
	return sv, err
}

// liveService reads a service as stored, ErrNotFound when it is unknown or
// deleted: a deleted service changes no more.
func liveService(tx *bolt.Tx, id string) (Service, error) {
	var sv Service
	if err := getJSON(tx.Bucket(bucketServices), id, &sv); err != nil {
		return sv, err
	}
	if sv.State == StateDeleted {
		return sv, ErrNotFound
	}
	return sv, nil
}
