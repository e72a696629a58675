package pgstore

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/store"
)

// CreateJobs stores jobs, all or none, with msgs in the outbox. A branch
// holds at most maxUnfinished unfinished jobs (0: no bound): the branches'
// counts are read under a lock of each branch, taken in order.
func (s *Store) CreateJobs(jobs []store.Job, msgs []store.Message, maxUnfinished int, nonce store.Nonce) error {
	return s.write(func(t *tx) error {
		if len(jobs) == 0 {
			t.msgs = append(t.msgs, msgs...)
			return nil
		}
		if err := claim(t, jobs[0].ServiceID, nonce); err != nil {
			return err
		}
		ids := make([]string, len(jobs))
		adding := map[[2]string]int{}
		for i, j := range jobs {
			ids[i] = j.ID
			if !j.Finished() {
				adding[[2]string{j.ServiceID, j.BranchID}]++
			}
		}
		if taken, err := exists(t, "SELECT 1 FROM jobs WHERE id = ANY($1)", ids); err != nil || taken {
			if err == nil {
				err = store.ErrJobExists
			}
			return err
		}
		if maxUnfinished > 0 {
			branches := make([][2]string, 0, len(adding))
			for k := range adding {
				branches = append(branches, k)
			}
			slices.SortFunc(branches, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
			for _, k := range branches {
				var n int
				if err := t.QueryRow(bg, `SELECT pg_advisory_xact_lock(hashtextextended($1 || chr(1) || $2, 0)) IS NULL,
					(SELECT count(*) FROM jobs WHERE service_id = $1 AND branch_id = $2 AND unfinished)`, k[0], k[1]).Scan(new(bool), &n); err != nil {
					return err
				}
				if n+adding[k] > maxUnfinished {
					return store.ErrTooManyJobs
				}
			}
		}
		for _, j := range jobs {
			if _, err := t.Exec(bg, "INSERT INTO jobs (id, service_id, branch_id, created, due_at, unfinished, doc) VALUES ($1, $2, $3, $4, $5, $6, $7)",
				j.ID, j.ServiceID, j.BranchID, j.Created, due(j), !j.Finished(), mustJSON(j)); err != nil {
				return err
			}
		}
		t.msgs = append(t.msgs, msgs...)
		return nil
	})
}

// due is a job's due time as stored: nil for none.
func due(j store.Job) *int64 {
	if j.DueAt == 0 {
		return nil
	}
	return &j.DueAt
}

// Job returns a job by id, or ErrNotFound.
func (s *Store) Job(id string) (store.Job, error) {
	var j store.Job
	return j, getDoc(s.reads, &j, "SELECT doc FROM jobs WHERE id = $1", id)
}

// UpdateJob changes a job atomically, with the messages change returns.
func (s *Store) UpdateJob(id string, change func(j *store.Job) ([]store.Message, error)) (store.Job, error) {
	var j store.Job
	err := s.write(func(t *tx) error {
		j = store.Job{}
		if err := getDoc(t, &j, "SELECT doc FROM jobs WHERE id = $1 FOR UPDATE", id); err != nil {
			return err
		}
		msgs, err := change(&j)
		if err != nil {
			return err
		}
		if _, err := t.Exec(bg, "UPDATE jobs SET due_at = $2, unfinished = $3, doc = $4 WHERE id = $1", id, due(j), !j.Finished(), mustJSON(j)); err != nil {
			return err
		}
		t.msgs = append(t.msgs, msgs...)
		return nil
	})
	return j, err
}

// DueJobs returns the ids of up to max jobs due at or before now, earliest
// first, and when the next later job is due (zero when none is).
func (s *Store) DueJobs(now time.Time, max int) (ids []string, next time.Time, err error) {
	rows, err := s.reads.Query(bg, "SELECT id, due_at FROM jobs WHERE due_at IS NOT NULL ORDER BY due_at, id LIMIT $1", max+1)
	if err != nil {
		return nil, next, err
	}
	var id string
	var at int64
	_, err = pgx.ForEachRow(rows, []any{&id, &at}, func() error {
		if !next.IsZero() {
			return nil
		}
		if at > now.UnixMilli() || len(ids) == max {
			next = time.UnixMilli(at)
			return nil
		}
		ids = append(ids, id)
		return nil
	})
	return ids, next, err
}

// ExpireJobs removes up to max jobs created before cutoff, oldest first.
// Another core sweeping meanwhile leaves it none (sweep).
func (s *Store) ExpireJobs(cutoff time.Time, max int) (int, error) {
	return s.sweep(sweepJobs, "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE created < $1 ORDER BY created, id LIMIT $2)", cutoff.UnixMilli(), max)
}

// UnfinishedJobs returns how many jobs of a branch have no outcome yet.
func (s *Store) UnfinishedJobs(serviceID, branchID string) (int, error) {
	var n int
	err := s.reads.QueryRow(bg, "SELECT count(*) FROM jobs WHERE service_id = $1 AND branch_id = $2 AND unfinished", serviceID, branchID).Scan(&n)
	return n, err
}

// Emit queues a message that reports no state change of its own
// (store.Committer.Emit).
func (s *Store) Emit(m store.Message) error { return s.c.Emit(m) }

// Outbox returns up to max messages from the start of the outbox, whoever
// relays them.
func (s *Store) Outbox(max int) ([]store.Message, error) { return s.outbox(0, max) }

// OutboxAfter returns up to max messages that follow seq in the outbox,
// oldest first, for this core to publish: none unless it holds the relay
// lock, so one core publishes at a time.
func (s *Store) OutboxAfter(seq uint64, max int) ([]store.Message, error) {
	if !s.relay.held.Load() {
		return nil, nil
	}
	return s.outbox(seq, max)
}

func (s *Store) outbox(seq uint64, max int) ([]store.Message, error) {
	rows, err := s.reads.Query(bg, "SELECT seq, topic, key, value FROM outbox WHERE seq > $1 ORDER BY seq LIMIT $2", int64(seq), max)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Message, error) {
		var m store.Message
		var n int64
		var key []byte
		err := r.Scan(&n, &m.Topic, &key, &m.Value)
		m.Seq, m.Key = uint64(n), string(key)
		return m, err
	})
}

// Ack removes every message up to and including seq, and counts anew
// the messages waiting: other cores add and ack too.
func (s *Store) Ack(seq uint64) error {
	if _, err := s.pool.Exec(bg, "DELETE FROM outbox WHERE seq <= $1", int64(seq)); err != nil {
		return err
	}
	return s.recount(bg)
}

// recount counts the messages in the outbox anew (waiting). One count at
// a time, so that a count begun before an ack cannot overwrite the ack's,
// and none while this process commits and counts messages it adds.
func (s *Store) recount(ctx context.Context) error {
	s.counting.Lock()
	defer s.counting.Unlock()
	n, err := s.waiting(ctx)
	if err == nil {
		s.c.Outbox.Set(n)
	}
	return err
}

// waiting counts the messages in the outbox, from its first and last
// numbers: they are numbered without gaps, and acks remove the oldest.
func (s *Store) waiting(ctx context.Context) (int64, error) {
	var n int64
	err := s.reads.QueryRow(ctx, "SELECT coalesce(max(seq) - min(seq) + 1, 0) FROM outbox").Scan(&n)
	return n, err
}

// OutboxStats reports how many messages wait in the outbox, as this
// process counts them, and how many were dropped because it was full.
func (s *Store) OutboxStats() (waiting, dropped int64) { return s.c.Outbox.OutboxStats() }

// OutboxReady is signalled after a transaction that added messages to the
// outbox commits.
func (s *Store) OutboxReady() <-chan struct{} { return s.c.Outbox.OutboxReady() }

// audit writes the audit record of a change in t and queues its messages
// (store.AuditOf), claiming the change's nonce.
func (s *Store) audit(t *tx, c store.Change, action, serviceID string, target api.AuditTarget, before, after any) error {
	if err := claim(t, serviceID, c.Nonce); err != nil {
		return err
	}
	rec, raw, msgs, err := store.AuditOf(s.now(), c, action, serviceID, target, before, after)
	if err != nil {
		return err
	}
	if _, err := t.Exec(bg, "INSERT INTO audit (at_ms, service_id, action, doc) VALUES ($1, $2, $3, $4)", rec.At.UnixMilli(), serviceID, action, raw); err != nil {
		return err
	}
	t.msgs = append(t.msgs, msgs...)
	return nil
}

// Audit returns audit records newest first, at most f.Limit of them, and
// the cursor of the next page ("" at the end): the record's time and
// number, in hex.
func (s *Store) Audit(f store.AuditFilter) ([]api.AuditRecord, string, error) {
	var at, seq *int64
	if f.Cursor != "" {
		raw, err := hex.DecodeString(f.Cursor)
		if err != nil || len(raw) != 16 {
			return nil, "", store.ErrBadCursor
		}
		a, n := int64(binary.BigEndian.Uint64(raw)), int64(binary.BigEndian.Uint64(raw[8:]))
		at, seq = &a, &n
	}
	var since, until *int64
	if !f.Since.IsZero() {
		ms := f.Since.UnixMilli()
		since = &ms
	}
	if !f.Until.IsZero() {
		ms := f.Until.UnixMilli()
		until = &ms
	}
	rows, err := s.reads.Query(bg, `SELECT at_ms, seq, doc FROM audit WHERE ($1::bigint IS NULL OR (at_ms, seq) < ($1, $2))
		AND ($3::bigint IS NULL OR at_ms >= $3) AND ($4::bigint IS NULL OR at_ms < $4)
		AND ($5 = '' OR service_id = $5) AND ($6 = '' OR action = $6)
		ORDER BY at_ms DESC, seq DESC LIMIT $7`, at, seq, since, until, f.ServiceID, f.Action, f.Limit+1)
	if err != nil {
		return nil, "", err
	}
	var out []api.AuditRecord
	var last [16]byte
	var a, n int64
	var raw []byte
	next := ""
	_, err = pgx.ForEachRow(rows, []any{&a, &n, &raw}, func() error {
		if len(out) == f.Limit {
			next = hex.EncodeToString(last[:])
			return nil
		}
		var r api.AuditRecord
		if err := jsonInto(raw, &r); err != nil {
			return err
		}
		out = append(out, r)
		binary.BigEndian.PutUint64(last[:], uint64(a))
		binary.BigEndian.PutUint64(last[8:], uint64(n))
		return nil
	})
	return out, next, err
}

// CreateAdminToken stores a new token.
func (s *Store) CreateAdminToken(tok store.AdminToken, c store.Change) error {
	return s.write(func(t *tx) error {
		if taken, err := exists(t, "SELECT 1 FROM admin_tokens WHERE id = $1 OR digest = $2", tok.ID, tok.Digest); err != nil || taken {
			if err == nil {
				err = store.ErrExists
			}
			return err
		}
		if _, err := t.Exec(bg, "INSERT INTO admin_tokens (id, digest, doc) VALUES ($1, $2, $3)", tok.ID, tok.Digest, mustJSON(tok)); err != nil {
			return err
		}
		return s.audit(t, c, "token.create", "", api.AuditTarget{Type: "token", ID: tok.ID}, nil, tok)
	})
}

// DeleteAdminToken revokes a token: it is refused from now on.
func (s *Store) DeleteAdminToken(id string, c store.Change) error {
	return s.write(func(t *tx) error {
		var tok store.AdminToken
		if err := getDoc(t, &tok, "DELETE FROM admin_tokens WHERE id = $1 RETURNING doc", id); err != nil {
			return err
		}
		return s.audit(t, c, "token.delete", "", api.AuditTarget{Type: "token", ID: id}, tok, nil)
	})
}

// AdminTokens returns the named tokens, by id.
func (s *Store) AdminTokens() ([]store.AdminToken, error) {
	return docs[store.AdminToken](s.reads, "SELECT doc FROM admin_tokens ORDER BY id")
}

// AdminTokenByDigest returns the token of a digest, ErrNotFound for an
// unknown, revoked or expired one.
func (s *Store) AdminTokenByDigest(digest string) (store.AdminToken, error) {
	var tok store.AdminToken
	if err := getDoc(s.reads, &tok, "SELECT doc FROM admin_tokens WHERE digest = $1", digest); err != nil {
		return tok, err
	}
	if tok.ExpiresAt != nil && !s.now().Before(*tok.ExpiresAt) {
		return tok, store.ErrNotFound
	}
	return tok, nil
}
