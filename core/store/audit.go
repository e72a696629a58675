package store

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/api"
)

// Errors of the operators' changes.
var (
	// ErrExists refuses to create a record whose id (or key) is taken.
	ErrExists = errors.New("store: exists")
	// ErrOverlapOpen refuses a rotation while the last one's overlap runs.
	ErrOverlapOpen = errors.New("store: the previous key's overlap is still open")
)

// Refusals of management changes. Messages name the field and the reason;
// ErrRule wraps them so callers answer VALIDATION_ERROR.
var (
	ErrRule = errors.New("store: change refused")
)

// Refuse returns an ErrRule refusal with a message naming the field and
// the reason.
func Refuse(format string, a ...any) error { return refuse(format, a...) }

func refuse(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrRule}, a...)...)
}

// bucketAudit holds the audit records in the order they were written
// (timeKey of At in ms, then a sequence number).
var bucketAudit = []byte("audit")

// Change is who makes a change and why: it becomes the change's audit
// record, written in the change's transaction.
type Change struct {
	Actor     api.AuditActor
	RequestID string
	Reason    string
	Nonce     Nonce // a signed request's, claimed with the change
}

// change runs a tenant's change to the records of service serviceID in a
// write transaction, refused with NoService when the service is unknown
// or deleted: every /b2b write, whoever makes it, goes through it, and the
// check is in the transaction of the write, so a deletion committed first
// stops it.
func (s *Bolt) change(serviceID string, fn func(tx *bolt.Tx) error) error {
	return s.write(func(tx *bolt.Tx) error {
		if _, err := liveService(tx, serviceID); errors.Is(err, ErrNotFound) {
			return NoService{serviceID}
		} else if err != nil {
			return err
		}
		return fn(tx)
	})
}

// audit writes the audit record of a change in tx and queues its messages
// (AuditOf).
func (s *Bolt) audit(tx *bolt.Tx, c Change, action, serviceID string, target api.AuditTarget, before, after any) error {
	if err := c.Nonce.claim(tx, serviceID); err != nil {
		return err
	}
	rec, raw, msgs, err := AuditOf(s.now(), c, action, serviceID, target, before, after)
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
	return s.enqueue(tx, msgs...)
}

// AuditOf returns the audit record of a change made at now, encoded, and
// the messages that publish it: the record for slip.audit and, for a
// change to a service's records, the slip.config event that makes every
// edge drop them. before and after are the records as they were and are
// (nil for none), keys and secrets left out.
func AuditOf(now time.Time, c Change, action, serviceID string, target api.AuditTarget, before, after any) (api.AuditRecord, []byte, []Message, error) {
	rec := api.AuditRecord{ID: uuid.NewString(), At: now.UTC(), Actor: c.Actor, RequestID: c.RequestID,
		Action: action, ServiceID: serviceID, Target: target, Reason: c.Reason}
	var err error
	if rec.Before, err = redacted(before); err != nil {
		return rec, nil, nil, err
	}
	if rec.After, err = redacted(after); err != nil {
		return rec, nil, nil, err
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return rec, nil, nil, err
	}
	msgs := []Message{{Topic: api.TopicAudit, Key: serviceID, Value: raw}}
	if serviceID != "" {
		ev, err := json.Marshal(api.ConfigEvent{EventID: uuid.NewString(), ServiceID: serviceID, At: rec.At})
		if err != nil {
			return rec, nil, nil, err
		}
		msgs = append(msgs, Message{Topic: api.TopicConfig, Key: serviceID, Value: ev})
	}
	return rec, raw, msgs, nil
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
func (s *Bolt) Audit(f AuditFilter) ([]api.AuditRecord, string, error) {
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
