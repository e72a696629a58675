package store

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/quota"
)

// Errors of the operators' changes.
var (
	// ErrExists refuses to create a record whose id (or key) is taken.
	ErrExists = errors.New("store: exists")
	// ErrOverlapOpen refuses a rotation while the last one's overlap runs.
	ErrOverlapOpen = errors.New("store: the previous key's overlap is still open")
)

var (
	// bucketAudit holds the audit records in the order they were written
	// (timeKey of At in ms, then a sequence number).
	bucketAudit = []byte("audit")
	// bucketAdminTokens holds the operators' named tokens by id, and
	// bucketAdminTokenDigests their ids by the digest of the token.
	bucketAdminTokens       = []byte("admin-tokens")
	bucketAdminTokenDigests = []byte("admin-token-digests")
)

// Change is who makes a change and why: it becomes the change's audit
// record, written in the change's transaction.
type Change struct {
	Actor     api.AuditActor
	RequestID string
	Reason    string
	Nonce     Nonce // a signed request's, claimed with the change
}

// audit writes the audit record of a change in tx and queues it for
// slip.audit; a change to a service's records also queues the slip.config
// event that makes every edge drop them. before and after are the records
// as they were and are (nil for none), keys and secrets left out.
func (s *Store) audit(tx *bolt.Tx, c Change, action, serviceID string, target api.AuditTarget, before, after any) error {
	if err := c.Nonce.claim(tx, serviceID); err != nil {
		return err
	}
	rec := api.AuditRecord{ID: uuid.NewString(), At: s.now().UTC(), Actor: c.Actor, RequestID: c.RequestID,
		Action: action, ServiceID: serviceID, Target: target, Reason: c.Reason}
	var err error
	if rec.Before, err = redacted(before); err != nil {
		return err
	}
	if rec.After, err = redacted(after); err != nil {
		return err
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	b := tx.Bucket(bucketAudit)
	seq, err := b.NextSequence() // orders the records of one millisecond
	if err != nil {
		return err
	}
	if err := b.Put(binary.BigEndian.AppendUint64(timeKey(rec.At.UnixMilli(), ""), seq), raw); err != nil {
		return err
	}
	msgs := []Message{{Topic: api.TopicAudit, Key: serviceID, Value: raw}}
	if serviceID != "" {
		ev, err := json.Marshal(api.ConfigEvent{EventID: uuid.NewString(), ServiceID: serviceID, At: rec.At})
		if err != nil {
			return err
		}
		msgs = append(msgs, Message{Topic: api.TopicConfig, Key: serviceID, Value: ev})
	}
	return s.enqueue(tx, msgs...)
}

// redacted encodes a record for the audit log without its keys and
// secrets (digests and sealed secrets included: a digest of a key is still
// a handle on it).
func redacted(v any) (json.RawMessage, error) {
	switch r := v.(type) {
	case nil:
		return json.RawMessage("null"), nil
	case Branch:
		r.KeyDigest, r.WebhookSecret = "", nil
		if r.Previous != nil {
			p := *r.Previous
			p.Digest, r.Previous = "", &p
		}
		v = r
	case B2BClient:
		r.KeyDigest, r.Secret = "", nil
		if r.Previous != nil {
			p := *r.Previous
			p.Secret, r.Previous = nil, &p
		}
		v = r
	case AdminToken:
		r.Digest = ""
		v = r
	}
	return json.Marshal(v)
}

// Now is the store's clock: the time its records are written at.
func (s *Store) Now() time.Time { return s.now() }

// Services returns every service, deleted ones too, by id.
func (s *Store) Services() ([]Service, error) {
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
func (s *Store) Service(id string) (Service, quota.Counter, int64, error) {
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
func (s *Store) CreateService(sv Service, main Branch, client B2BClient, c Change) error {
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
func (s *Store) UpdateService(id, action string, c Change, change func(sv *Service, used quota.Counter, now time.Time) error) (Service, error) {
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

// RotateBranchKey gives a branch the key of digest newDigest. The key it
// had keeps working for overlap (0: not at all), then is refused. While a
// previous key's overlap is open, a rotation is ErrOverlapOpen unless
// force, which ends that overlap at once.
func (s *Store) RotateBranchKey(serviceID, branchID, newDigest string, overlap time.Duration, force bool, c Change) (Branch, error) {
	var b Branch
	err := s.write(func(tx *bolt.Tx) error {
		b = Branch{}
		if err := s.liveBranch(tx, serviceID, branchID, &b); err != nil {
			return err
		}
		now := s.now()
		if b.Previous != nil && now.Before(b.Previous.ExpiresAt) && !force {
			return ErrOverlapOpen
		}
		if tx.Bucket(bucketKeys).Get([]byte(newDigest)) != nil {
			return ErrExists
		}
		before := b
		keys := tx.Bucket(bucketKeys)
		if b.Previous != nil {
			if err := keys.Delete([]byte(b.Previous.Digest)); err != nil {
				return err
			}
			b.Previous = nil
		}
		if overlap > 0 {
			b.Previous = &PreviousKey{Digest: b.KeyDigest, CreatedAt: b.KeyCreatedAt, ExpiresAt: now.Add(overlap)}
		} else if err := keys.Delete([]byte(b.KeyDigest)); err != nil {
			return err
		}
		t := now.UTC()
		b.KeyDigest, b.KeyCreatedAt = newDigest, &t
		if err := errors.Join(keys.Put([]byte(newDigest), []byte(b.ID)), putJSON(tx.Bucket(bucketBranches), b.ID, b)); err != nil {
			return err
		}
		return s.audit(tx, c, "branch.key.rotate", serviceID, api.AuditTarget{Type: "branch", ID: branchID}, before, b)
	})
	return b, err
}

// RevokePreviousKey ends a branch's previous key now.
func (s *Store) RevokePreviousKey(serviceID, branchID string, c Change) (Branch, error) {
	var b Branch
	err := s.write(func(tx *bolt.Tx) error {
		b = Branch{}
		if err := s.liveBranch(tx, serviceID, branchID, &b); err != nil {
			return err
		}
		if b.Previous == nil {
			return refuse("branch %s has no previous key", branchID)
		}
		before := b
		if err := tx.Bucket(bucketKeys).Delete([]byte(b.Previous.Digest)); err != nil {
			return err
		}
		b.Previous = nil
		if err := putJSON(tx.Bucket(bucketBranches), b.ID, b); err != nil {
			return err
		}
		return s.audit(tx, c, "branch.key.revoke", serviceID, api.AuditTarget{Type: "branch", ID: branchID}, before, b)
	})
	return b, err
}

// change runs a tenant's change to the records of service serviceID in a
// write transaction, refused with NoService when the service is unknown
// or deleted: every /b2b write, whoever makes it, goes through it, and the
// check is in the transaction of the write, so a deletion committed first
// stops it.
func (s *Store) change(serviceID string, fn func(tx *bolt.Tx) error) error {
	return s.write(func(tx *bolt.Tx) error {
		if _, err := liveService(tx, serviceID); errors.Is(err, ErrNotFound) {
			return NoService{serviceID}
		} else if err != nil {
			return err
		}
		return fn(tx)
	})
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

// liveBranch reads a branch of a service that is not deleted.
func (s *Store) liveBranch(tx *bolt.Tx, serviceID, branchID string, b *Branch) error {
	if _, err := liveService(tx, serviceID); err != nil {
		return err
	}
	return branchOf(tx, serviceID, branchID, b)
}

// AdminToken is an operator's named token of the admin API, stored by the
// digest of the token.
type AdminToken struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Scope     string     `json:"scope"` // read or write
	Digest    string     `json:"digest"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// Admin token scopes.
const (
	ScopeRead  = "read"
	ScopeWrite = "write"
)

// CreateAdminToken stores a new token.
func (s *Store) CreateAdminToken(t AdminToken, c Change) error {
	return s.write(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketAdminTokens).Get([]byte(t.ID)) != nil || tx.Bucket(bucketAdminTokenDigests).Get([]byte(t.Digest)) != nil {
			return ErrExists
		}
		if err := errors.Join(putJSON(tx.Bucket(bucketAdminTokens), t.ID, t),
			tx.Bucket(bucketAdminTokenDigests).Put([]byte(t.Digest), []byte(t.ID))); err != nil {
			return err
		}
		return s.audit(tx, c, "token.create", "", api.AuditTarget{Type: "token", ID: t.ID}, nil, t)
	})
}

// DeleteAdminToken revokes a token: it is refused from now on.
func (s *Store) DeleteAdminToken(id string, c Change) error {
	return s.write(func(tx *bolt.Tx) error {
		var t AdminToken
		if err := getJSON(tx.Bucket(bucketAdminTokens), id, &t); err != nil {
			return err
		}
		if err := errors.Join(tx.Bucket(bucketAdminTokens).Delete([]byte(id)),
			tx.Bucket(bucketAdminTokenDigests).Delete([]byte(t.Digest))); err != nil {
			return err
		}
		return s.audit(tx, c, "token.delete", "", api.AuditTarget{Type: "token", ID: id}, t, nil)
	})
}

// AdminTokens returns the named tokens, by id.
func (s *Store) AdminTokens() ([]AdminToken, error) {
	var out []AdminToken
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAdminTokens).ForEach(func(_, v []byte) error {
			var t AdminToken
			err := json.Unmarshal(v, &t)
			out = append(out, t)
			return err
		})
	})
	return out, err
}

// AdminTokenByDigest returns the token of a digest, ErrNotFound for an
// unknown, revoked or expired one.
func (s *Store) AdminTokenByDigest(digest string) (AdminToken, error) {
	var t AdminToken
	err := s.db.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketAdminTokenDigests).Get([]byte(digest))
		if id == nil {
			return ErrNotFound
		}
		if err := getJSON(tx.Bucket(bucketAdminTokens), string(id), &t); err != nil {
			return err
		}
		if t.ExpiresAt != nil && !s.now().Before(*t.ExpiresAt) {
			return ErrNotFound
		}
		return nil
	})
	return t, err
}

// AuditFilter selects audit records; zero fields select all.
type AuditFilter struct {
	ServiceID, Action string
	Since, Until      time.Time // [Since, Until)
	Cursor            string    // where the last page ended
	Limit             int
}

// ErrBadCursor refuses a cursor Audit did not give.
var ErrBadCursor = errors.New("store: not a cursor of the audit log")

// Audit returns audit records newest first, at most f.Limit of them, and
// the cursor of the next page ("" at the end).
func (s *Store) Audit(f AuditFilter) ([]api.AuditRecord, string, error) {
	var out []api.AuditRecord
	var last []byte // the key of the last record in out
	next := ""
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketAudit).Cursor()
		var k, v []byte
		if f.Cursor != "" {
			from, err := hex.DecodeString(f.Cursor)
			if err != nil || len(from) < 8 {
				return ErrBadCursor
			}
			if k, v = c.Seek(from); k == nil {
				k, v = c.Last()
			}
			if bytes.Compare(k, from) >= 0 {
				k, v = c.Prev()
			}
		} else {
			k, v = c.Last()
		}
		for ; k != nil; k, v = c.Prev() {
			at, _ := splitTimeKey(k)
			if !f.Until.IsZero() && at >= f.Until.UnixMilli() {
				continue
			}
			if !f.Since.IsZero() && at < f.Since.UnixMilli() {
				break
			}
			if len(out) == f.Limit {
				next = hex.EncodeToString(last)
				break
			}
			var r api.AuditRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			if (f.ServiceID == "" || r.ServiceID == f.ServiceID) && (f.Action == "" || r.Action == f.Action) {
				out, last = append(out, r), bytes.Clone(k)
			}
		}
		return nil
	})
	return out, next, err
}

// Clients returns a service's B2B clients in creation order.
func (s *Store) Clients(serviceID string) ([]B2BClient, error) {
	var out []B2BClient
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = clientsOf(tx, serviceID)
		return err
	})
	return out, err
}

func clientsOf(tx *bolt.Tx, serviceID string) ([]B2BClient, error) {
	var out []B2BClient
	prefix := append([]byte(serviceID), 0)
	c := tx.Bucket(bucketB2BByService).Cursor()
	for k, d := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, d = c.Next() {
		var cl B2BClient
		if err := getJSON(tx.Bucket(bucketB2B), string(d), &cl); err != nil {
			return nil, err
		}
		out = append(out, cl)
	}
	return out, nil
}

// clientByID reads the client of a live service whose ID is id.
func (s *Store) clientByID(tx *bolt.Tx, serviceID, id string) (B2BClient, error) {
	if _, err := liveService(tx, serviceID); err != nil {
		return B2BClient{}, err
	}
	list, err := clientsOf(tx, serviceID)
	if err != nil {
		return B2BClient{}, err
	}
	for _, c := range list {
		if c.ID() == id {
			return c, nil
		}
	}
	return B2BClient{}, ErrNotFound
}

// CreateClient adds a B2B client to a live service.
func (s *Store) CreateClient(c B2BClient, ch Change) (B2BClient, error) {
	err := s.write(func(tx *bolt.Tx) error {
		if _, err := liveService(tx, c.ServiceID); err != nil {
			return err
		}
		if tx.Bucket(bucketB2B).Get([]byte(c.KeyDigest)) != nil {
			return ErrExists
		}
		seq, err := tx.Bucket(bucketB2B).NextSequence()
		if err != nil {
			return err
		}
		c.Seq = seq
		if err := errors.Join(putJSON(tx.Bucket(bucketB2B), c.KeyDigest, c),
			tx.Bucket(bucketB2BByService).Put(serviceSeqKey(c.ServiceID, seq), []byte(c.KeyDigest))); err != nil {
			return err
		}
		return s.audit(tx, ch, "client.create", c.ServiceID, api.AuditTarget{Type: "client", ID: c.ID()}, nil, c)
	})
	return c, err
}

// UpdateClient applies change to a client (its name and permissions).
func (s *Store) UpdateClient(serviceID, id string, ch Change, change func(*B2BClient)) (B2BClient, error) {
	var c B2BClient
	err := s.write(func(tx *bolt.Tx) error {
		var err error
		if c, err = s.clientByID(tx, serviceID, id); err != nil {
			return err
		}
		before := c
		change(&c)
		if err := putJSON(tx.Bucket(bucketB2B), c.KeyDigest, c); err != nil {
			return err
		}
		return s.audit(tx, ch, "client.update", serviceID, api.AuditTarget{Type: "client", ID: id}, before, c)
	})
	return c, err
}

// DeleteClient removes a client: its key is refused from now on.
func (s *Store) DeleteClient(serviceID, id string, ch Change) error {
	return s.write(func(tx *bolt.Tx) error {
		c, err := s.clientByID(tx, serviceID, id)
		if err != nil {
			return err
		}
		if err := errors.Join(tx.Bucket(bucketB2B).Delete([]byte(c.KeyDigest)),
			tx.Bucket(bucketB2BByService).Delete(serviceSeqKey(serviceID, c.Seq))); err != nil {
			return err
		}
		return s.audit(tx, ch, "client.delete", serviceID, api.AuditTarget{Type: "client", ID: id}, c, nil)
	})
}

// RotateClientSecret gives a client a new secret, sealed by seal for the
// client's key digest; the one it had keeps verifying signatures for
// overlap (0: not at all).
func (s *Store) RotateClientSecret(serviceID, id string, overlap time.Duration, force bool, ch Change,
	seal func(keyDigest string) []byte) (B2BClient, error) {
	var c B2BClient
	err := s.write(func(tx *bolt.Tx) error {
		var err error
		if c, err = s.clientByID(tx, serviceID, id); err != nil {
			return err
		}
		now := s.now()
		if c.Previous != nil && now.Before(c.Previous.ExpiresAt) && !force {
			return ErrOverlapOpen
		}
		before := c
		c.Previous = nil
		if overlap > 0 {
			c.Previous = &PreviousSecret{Secret: c.Secret, ExpiresAt: now.Add(overlap)}
		}
		c.Secret = seal(c.KeyDigest)
		if err := putJSON(tx.Bucket(bucketB2B), c.KeyDigest, c); err != nil {
			return err
		}
		return s.audit(tx, ch, "client.secret.rotate", serviceID, api.AuditTarget{Type: "client", ID: id}, before, c)
	})
	return c, err
}
