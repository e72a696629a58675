package pgstore

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/quota"
	"github.com/slipverify/slipverify/core/store"
)

// The snapshot of a verification, in one statement: $1 service, $2
// branch, $3 slip key, $4 whether the branch's conditions. snapshotQuery
// reads the quota counters too, and the versions of the rows (seen); in
// the write, the batch has read the counters when it locked them
// (tx.counter), and appliedQuery does not.
const (
	snapshotSelect = `SELECT s.doc, b.doc, c.doc, sl.first_at, sl.job, sl.branches, sl.result`
	snapshotFrom   = ` FROM services s
JOIN branches b ON b.id = $2
LEFT JOIN conditions c ON $4 AND c.branch_id = b.id
LEFT JOIN slips sl ON sl.service_id = s.id AND sl.slip_key = $3`
	snapshotQuery = snapshotSelect + `, cs.period, cs.used, cs.total, cb.period, cb.used, cb.total, s.xmin, b.xmin, sl.xmin` + snapshotFrom + `
LEFT JOIN counters cs ON cs.scope = 's/' || s.id
LEFT JOIN counters cb ON cb.scope = 'b/' || b.id
WHERE s.id = $1`
	appliedQuery = snapshotSelect + snapshotFrom + ` WHERE s.id = $1`
)

// Snapshot reads what a verification of slipKey by a branch needs, with
// the snapshots asked for meanwhile (snapshots), and keeps what it read
// for the verification's Apply (seen).
func (s *Store) Snapshot(serviceID, branchID, slipKey string) (store.Snapshot, error) {
	return s.snapshots.get(serviceID, branchID, slipKey)
}

// snapshotOf is the Snapshot in row, of snapshotQuery.
func (s *Store) snapshotOf(row pgx.Row, serviceID, branchID, slipKey string) (store.Snapshot, error) {
	var sc, bc [3]*int64
	var rev [3]*uint32
	snap, read, err := s.scanSnapshot(row, &sc[0], &sc[1], &sc[2], &bc[0], &bc[1], &bc[2], &rev[0], &rev[1], &rev[2])
	if err != nil {
		return snap, err
	}
	snap.Usage = store.UsageAt(&snap.Service, snap.At, counter(sc), counter(bc))
	if slipKey != "" {
		for i, r := range rev {
			if r != nil {
				read.rev[i] = *r
			}
		}
		s.seen.put(serviceID, branchID, slipKey, read)
	}
	return snap, nil
}

// snapshot reads a snapshot but its usage with query.
func (s *Store) snapshot(q querier, query, serviceID, branchID, slipKey string, conditions bool) (store.Snapshot, *seen, error) {
	return s.scanSnapshot(q.QueryRow(bg, query, serviceID, branchID, slipKey, conditions))
}

// scanSnapshot reads a snapshot but its usage from row, scanning the
// columns after the slip's into more; it returns what it read of the
// service, branch and slip too.
func (s *Store) scanSnapshot(row pgx.Row, more ...any) (store.Snapshot, *seen, error) {
	snap := store.Snapshot{At: s.now()}
	var svDoc, brDoc, condDoc, result []byte
	var firstAt *int64
	var job *string
	var branches []string
	err := row.Scan(append([]any{&svDoc, &brDoc, &condDoc, &firstAt, &job, &branches, &result}, more...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return snap, nil, store.ErrNotFound
	} else if err != nil {
		return snap, nil, err
	}
	read := new(seen)
	if err := errors.Join(s.services.into(svDoc, &read.sv), s.branches.into(brDoc, &read.br)); err != nil {
		return snap, nil, err
	}
	if firstAt != nil {
		read.slip = &store.SlipRecord{FirstAt: *firstAt, Job: *job, Branches: branches, Result: result}
	}
	if err := read.into(&snap); err != nil {
		return snap, nil, err
	}
	if condDoc != nil {
		err = s.conditions.into(condDoc, &snap.Conditions)
	}
	return snap, read, err
}

// counter is a counters row read through an outer join: zero for none.
func counter(c [3]*int64) quota.Counter {
	if c[0] == nil {
		return quota.Counter{}
	}
	return quota.Counter{Period: *c[0], Used: *c[1], Total: *c[2]}
}

// Apply decides a verification again in the write transaction, on the
// snapshot as it stands once the batch holds the locks of the service's
// and the branch's counters, and writes the effect decide returns.
//
// The service, branch and slip the verification's Snapshot read (seen)
// are decided on again without reading them anew, the versions of their
// rows checked ahead of the writes: when one changed meanwhile, the
// writes are rolled back and the verification decided on the rows read
// again. In a blind batch (tx.blind) nothing is read: the writes are
// queued, and a verification that must read sends the batch to run again
// in turn (errInTurn).
func (s *Store) Apply(serviceID, branchID, slipKey string, decide func(store.Snapshot) (store.Effect, error)) (store.Snapshot, error) {
	var snap store.Snapshot
	read := s.seen.take(serviceID, branchID, slipKey)
	err := s.c.Write(func(t *tx) error {
		if read != nil && t.known() {
			var stale bool
			var err error
			if snap, stale, err = s.applySeen(t, read, slipKey, decide); !stale {
				return err
			}
			t.failOp()
		}
		if t.blind {
			return errInTurn
		}
		read = nil // a batch run again in turn reads
		var err error
		t.fresh()
		if snap, _, err = s.snapshot(t, appliedQuery, serviceID, branchID, slipKey, false); err != nil {
			return err
		}
		if snap.Usage, err = t.usage(&snap); err != nil {
			return err
		}
		e, err := decide(snap)
		if err != nil {
			return err
		}
		return s.apply(t, &snap, slipKey, e, nil)
	}, true, "b/"+branchID, "s/"+serviceID)
	return snap, err
}

// apply writes the effect e of a verification decided on snap. With
// check, the writes are preceded by the check of the versions of the rows
// snap was read from (guard), and apply returns errStale when they
// changed. In a blind batch the writes are queued as one statement
// (blindWrite).
func (s *Store) apply(t *tx, snap *store.Snapshot, slipKey string, e store.Effect, check *seen) error {
	rec, write, fresh, err := snap.Record(&e, nil)
	if err != nil {
		return err
	}
	var h *store.Verification
	if e.Listed {
		h = snap.Entry(&e, slipKey)
	}
	if t.blind {
		sql, args := blindWrite(snap, slipKey, e.Nonce, check, &rec, write, fresh, h)
		t.queue(sql, args...)
	} else if err := s.writes(t, snap, slipKey, e.Nonce, check, &rec, write, fresh, h); err != nil {
		return err
	}
	if e.Charge {
		svc, brc := snap.Charged()
		t.charge("s/"+snap.Service.ID, svc)
		t.charge("b/"+snap.Branch.ID, brc)
	}
	if e.Usage != nil && (e.Charge || s.c.Outbox.Room(int64(len(t.msgs)))) {
		t.msgs = append(t.msgs, e.Usage(e.Charge, snap.At))
	}
	return nil
}

// writes makes a verification's writes in one round trip, after the guard
// with check; a refusal found in their results (a nonce claimed before)
// rolls them back with the op's savepoint.
func (s *Store) writes(t *tx, snap *store.Snapshot, slipKey string, n store.Nonce, check *seen, rec *store.SlipRecord, write, fresh bool, h *store.Verification) error {
	var b pgx.Batch
	var nonce, slip, entry *pgx.QueuedQuery
	if check != nil {
		b.Queue(guard, snap.Service.ID, snap.Branch.ID, slipKey, check.rev[0], check.rev[1], check.slipRev())
	}
	if n.Value != "" {
		nonce = b.Queue(claimNonce, snap.Service.ID, n.Value, forgetMinute(n))
	}
	switch {
	case write && fresh:
		b.Queue("INSERT INTO slips (service_id, slip_key, first_at, job, branches, result) VALUES ($1, $2, $3, $4, $5, $6)",
			snap.Service.ID, slipKey, rec.FirstAt, rec.Job, rec.Branches, []byte(rec.Result))
	case write:
		slip = b.Queue("UPDATE slips SET branches = $3 WHERE service_id = $1 AND slip_key = $2", snap.Service.ID, slipKey, rec.Branches)
	}
	if h != nil {
		entry = b.Queue(putEntry, entryArgs(h, h.At.UnixMilli())...)
	}
	if b.Len() == 0 {
		return nil
	}
	affected := map[*pgx.QueuedQuery]int64{}
	for _, q := range b.QueuedQueries {
		q.Exec(func(tag pgconn.CommandTag) error { affected[q] = tag.RowsAffected(); return nil })
	}
	if err := t.SendBatch(bg, &b).Close(); err != nil {
		if guarded(err) {
			return errStale
		}
		return err
	}
	switch {
	case nonce != nil && affected[nonce] == 0:
		return api.E(api.DuplicateNonce)
	case slip != nil && affected[slip] == 0:
		return errConflict // removed by an expiry meanwhile
	case entry != nil && affected[entry] == 0:
		return list(t, h) // its millisecond taken
	}
	return nil
}

// blindWrite is a verification's writes in a blind batch, as one
// statement: the guard, then each write from its row, so none is made
// when the guard fails; and the statement fails (division_by_zero,
// unique_violation) where write finds a refusal in its results (a nonce
// claimed before, a record gone, a millisecond of the history taken),
// which fails the batch.
func blindWrite(snap *store.Snapshot, slipKey string, n store.Nonce, check *seen, rec *store.SlipRecord, write, fresh bool, h *store.Verification) (string, []any) {
	args := []any{snap.Service.ID, snap.Branch.ID, slipKey, check.rev[0], check.rev[1], check.slipRev()}
	arg := func(v any, typ string) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args)) + "::" + typ
	}
	var q strings.Builder
	q.WriteString("WITH g AS (" + guard + ")")
	if n.Value != "" {
		q.WriteString(", n AS (INSERT INTO nonces (service_id, value, forget_minute) SELECT $1, " + arg(n.Value, "text") + ", " +
			arg(forgetMinute(n), "bigint") + " FROM g)")
	}
	result := "ok"
	switch {
	case write && fresh:
		q.WriteString(", w AS (INSERT INTO slips (service_id, slip_key, first_at, job, branches, result) SELECT $1, $3, " +
			arg(rec.FirstAt, "bigint") + ", " + arg(rec.Job, "text") + ", " + arg(rec.Branches, "text[]") + ", " + arg([]byte(rec.Result), "bytea") + " FROM g)")
	case write:
		q.WriteString(", w AS (UPDATE slips SET branches = " + arg(rec.Branches, "text[]") + " FROM g WHERE service_id = $1 AND slip_key = $3 RETURNING 1)")
		result = "ok / (SELECT count(*) FROM w)"
	}
	if h != nil {
		q.WriteString(`, h AS (INSERT INTO history (service_id, branch_id, at_ms, slip_key, amount, receiving_bank, duplicate,
			amount_matched, date_matched, remark, job_id) SELECT $1, $2, ` + arg(h.At.UnixMilli(), "bigint") + ", $3, " +
			arg(h.Amount, "float8") + ", " + arg(h.ReceivingBank, "text") + ", " + arg(h.Duplicate, "boolean") + ", " +
			arg(h.AmountMatched, "boolean") + ", " + arg(h.DateMatched, "boolean") + ", " + arg(h.Remark, "text") + ", " +
			arg(h.JobID, "text") + " FROM g)")
	}
	q.WriteString(" SELECT " + result + " FROM g")
	return q.String(), args
}

const (
	claimNonce = "INSERT INTO nonces (service_id, value, forget_minute) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING"
	putEntry   = `INSERT INTO history (service_id, branch_id, at_ms, slip_key, amount, receiving_bank, duplicate,
		amount_matched, date_matched, remark, job_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING`
)

// forgetMinute is the Unix minute from which no edge takes a request with
// nonce n any more.
func forgetMinute(n store.Nonce) int64 { return n.At.Add(api.NonceWindow).Unix()/60 + 1 }

func entryArgs(v *store.Verification, at int64) []any {
	return []any{v.ServiceID, v.BranchID, at, v.SlipKey, v.Amount, v.ReceivingBank, v.Duplicate, v.AmountMatched, v.DateMatched, v.Remark, v.JobID}
}

// list adds a history entry at the first free millisecond from its own:
// two entries of one branch for one slip in one millisecond take the next
// ones.
func list(t *tx, v *store.Verification) error {
	for at := v.At.UnixMilli(); ; at++ {
		tag, err := t.Exec(bg, putEntry, entryArgs(v, at)...)
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
	}
}

// claim records a signed request's nonce for service, or refuses one
// claimed before (a copy of the request, whichever core it reached).
func claim(q querier, serviceID string, n store.Nonce) error {
	if n.Value == "" {
		return nil
	}
	tag, err := q.Exec(bg, claimNonce, serviceID, n.Value, forgetMinute(n))
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return api.E(api.DuplicateNonce)
	}
	return nil
}

// ClaimNonce claims n for service in a write of its own.
func (s *Store) ClaimNonce(serviceID string, n store.Nonce) error {
	if n.Value == "" {
		return nil
	}
	return s.write(func(t *tx) error { return claim(t, serviceID, n) })
}

// ExpireNonces forgets up to max of the nonces no edge would take a
// request with any more at now, and the marks of transactions long
// resolved. Another core sweeping meanwhile leaves it none (sweep).
func (s *Store) ExpireNonces(now time.Time, max int) (int, error) {
	if _, err := s.sweep(sweepCommits, "DELETE FROM commits WHERE at < now() - $1::interval", (2 * resolveFor).String()); err != nil {
		return 0, err
	}
	return s.sweep(sweepNonces, "DELETE FROM nonces WHERE ctid IN (SELECT ctid FROM nonces WHERE forget_minute < $1 LIMIT $2)", now.Unix()/60+1, max)
}

// Advisory locks of the sweeps, one kind each.
const (
	sweepJobs int64 = 0x5e1f0001 + iota
	sweepNonces
	sweepCommits
	sweepSlips
)

// sweep runs the deletion query under the advisory lock of its kind, taken
// without waiting: every core sweeps once a minute, and one that finds
// another sweeping leaves the work to it, rather than both read and delete
// the same rows. It returns how many rows it deleted.
func (s *Store) sweep(lock int64, query string, args ...any) (int, error) {
	n := 0
	err := pgx.BeginFunc(bg, s.pool, func(t pgx.Tx) error {
		if held, err := tryLock(t, lock); err != nil || !held {
			return err
		}
		tag, err := t.Exec(bg, query, args...)
		n = int(tag.RowsAffected())
		return err
	})
	return n, err
}

// tryLock takes the transaction's advisory lock of key if it is free.
func tryLock(q querier, key int64) (bool, error) {
	var held bool
	err := q.QueryRow(bg, "SELECT pg_try_advisory_xact_lock($1)", key).Scan(&held)
	return held, err
}

// FindSlip returns the service's record of the slip whose transaction
// reference is ref, the one first verified when several banks have it.
func (s *Store) FindSlip(serviceID, ref string) (string, *store.SlipRecord, error) {
	var key string
	rec := new(store.SlipRecord)
	err := s.reads.QueryRow(bg, `SELECT slip_key, first_at, job, branches, result FROM slips WHERE service_id = $1 AND ref = $2
		ORDER BY first_at, slip_key LIKE 'wallet/%' DESC, slip_key LIMIT 1`, serviceID, ref).Scan(&key, &rec.FirstAt, &rec.Job, &rec.Branches, &rec.Result)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil, store.ErrNotFound
	}
	return key, rec, err
}

// ExpireSlips removes up to max slip records first verified before
// cutoff, oldest first, with their history. Another core sweeping
// meanwhile leaves it none (sweep).
func (s *Store) ExpireSlips(cutoff time.Time, max int) (int, error) {
	n := 0
	err := s.write(func(t *tx) error {
		n = 0
		if held, err := tryLock(t, sweepSlips); err != nil || !held {
			return err
		}
		return t.QueryRow(bg, `WITH gone AS (DELETE FROM slips WHERE (service_id, slip_key) IN
			(SELECT service_id, slip_key FROM slips WHERE first_at * 1000 < $1 ORDER BY first_at LIMIT $2) RETURNING service_id, slip_key),
			h AS (DELETE FROM history h USING gone WHERE h.service_id = gone.service_id AND h.slip_key = gone.slip_key)
			SELECT count(*) FROM gone`, cutoff.UnixMilli(), max).Scan(&n)
	})
	return n, err
}

// History lists the entries of q, newest first.
func (s *Store) History(q store.HistoryQuery) ([]store.Verification, *store.Cursor, error) {
	var from, to, afterAt *int64
	if !q.From.IsZero() {
		ms := q.From.UnixMilli()
		from = &ms
	}
	if !q.To.IsZero() {
		ms := q.To.UnixMilli()
		to = &ms
	}
	if a := q.After; a.AtMs != 0 || a.BranchID != "" || a.SlipKey != "" {
		afterAt = &a.AtMs
	}
	rows, err := s.reads.Query(bg, `SELECT branch_id, at_ms, slip_key, amount, receiving_bank, duplicate, amount_matched, date_matched, remark, job_id
		FROM history WHERE service_id = $1 AND ($2 = '' OR branch_id = $2)
		AND ($3::bigint IS NULL OR at_ms >= $3) AND ($4::bigint IS NULL OR at_ms < $4)
		AND ($5::boolean IS NULL OR duplicate = $5) AND ($6::float8 IS NULL OR amount >= $6) AND ($7::float8 IS NULL OR amount <= $7)
		AND ($8::text IS NULL OR remark = $8)
		AND ($9::bigint IS NULL OR (at_ms, branch_id, slip_key) < ($9, $10::text COLLATE "C", $11::text COLLATE "C"))
		ORDER BY at_ms DESC, branch_id DESC, slip_key DESC LIMIT $12`,
		q.ServiceID, q.BranchID, from, to, q.Duplicate, q.AmountMin, q.AmountMax, q.Remark, afterAt, q.After.BranchID, q.After.SlipKey, q.Limit+1)
	if err != nil {
		return nil, nil, err
	}
	var out []store.Verification
	var v store.Verification
	var at int64
	_, err = pgx.ForEachRow(rows, []any{&v.BranchID, &at, &v.SlipKey, &v.Amount, &v.ReceivingBank, &v.Duplicate, &v.AmountMatched,
		&v.DateMatched, &v.Remark, &v.JobID}, func() error {
		v.ServiceID, v.At = q.ServiceID, time.UnixMilli(at)
		out = append(out, v)
		v.DateMatched = nil
		return nil
	})
	if err != nil || len(out) <= q.Limit {
		return out, nil, err
	}
	out = out[:q.Limit]
	l := out[len(out)-1]
	return out, &store.Cursor{AtMs: l.At.UnixMilli(), BranchID: l.BranchID, SlipKey: l.SlipKey}, nil
}

// Quota returns the quota records of a branch and its service.
func (s *Store) Quota(serviceID, branchID string) (store.BranchQuota, error) {
	var q store.BranchQuota
	return q, s.quotaOf(s.reads, serviceID, branchID, &q, "")
}

// quotaOf reads a branch's quota record; lock, when set, locks the
// branch's row (FOR UPDATE).
func (s *Store) quotaOf(q querier, serviceID, branchID string, out *store.BranchQuota, lock string) error {
	var svDoc, brDoc []byte
	var sc, bc [3]*int64
	err := q.QueryRow(bg, `SELECT s.doc, b.doc, cs.period, cs.used, cs.total, cb.period, cb.used, cb.total
		FROM branches b JOIN services s ON s.id = b.service_id
		LEFT JOIN counters cs ON cs.scope = 's/' || s.id LEFT JOIN counters cb ON cb.scope = 'b/' || b.id
		WHERE b.id = $1 AND b.service_id = $2 `+lock, branchID, serviceID).Scan(&svDoc, &brDoc, &sc[0], &sc[1], &sc[2], &bc[0], &bc[1], &bc[2])
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	} else if err != nil {
		return err
	}
	if err := errors.Join(jsonInto(svDoc, &out.Service), jsonInto(brDoc, &out.Branch)); err != nil {
		return err
	}
	now := s.now()
	out.Service = out.Service.At(now)
	out.Usage = store.UsageAt(&out.Service, now, counter(sc), counter(bc))
	return nil
}

// ChangeQuota applies change to a branch's quota atomically with every
// verification: it holds the branch's counter's lock.
func (s *Store) ChangeQuota(serviceID, branchID, action string, c store.Change, change func(q store.BranchQuota) (limit *int64, reset bool, err error)) (store.BranchQuota, error) {
	var q store.BranchQuota
	err := s.change(serviceID, func(t *tx) error {
		q = store.BranchQuota{}
		if _, err := t.Exec(bg, "SELECT 1 FROM counters WHERE scope = $1 FOR UPDATE", "b/"+branchID); err != nil {
			return err
		}
		if err := s.quotaOf(t, serviceID, branchID, &q, "FOR UPDATE OF b"); err != nil {
			return err
		}
		before := q.Branch
		limit, reset, err := change(q)
		if err != nil {
			return err
		}
		q.Branch.LimitQuota = limit
		if reset {
			q.Usage.Branch.Used = 0
			b := q.Usage.Branch
			if _, err := t.Exec(bg, "UPDATE counters SET period = $2, used = $3, total = $4 WHERE scope = $1", "b/"+branchID, b.Period, b.Used, b.Total); err != nil {
				return err
			}
		}
		if _, err := t.Exec(bg, "UPDATE branches SET doc = $2 WHERE id = $1", branchID, mustJSON(q.Branch)); err != nil {
			return err
		}
		return s.audit(t, c, action, serviceID, api.AuditTarget{Type: "branch", ID: branchID}, before, q.Branch)
	})
	return q, err
}

// Counters returns every service's and branch's quota counters as of at,
// read in one snapshot taken before at.
func (s *Store) Counters() (at time.Time, out []store.ServiceCounters, err error) {
	ptx, err := s.reads.BeginTx(bg, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return at, nil, err
	}
	defer ptx.Rollback(bg)
	rows, err := ptx.Query(bg, `SELECT s.doc, c.period, c.used, c.total FROM services s LEFT JOIN counters c ON c.scope = 's/' || s.id ORDER BY s.id`)
	if err != nil {
		return at, nil, err
	}
	at = s.now() // after the snapshot: no unit consumed after it is in what it reads
	index := map[string]int{}
	var raw []byte
	var c [3]*int64
	_, err = pgx.ForEachRow(rows, []any{&raw, &c[0], &c[1], &c[2]}, func() error {
		var sv store.Service
		if err := jsonInto(raw, &sv); err != nil {
			return err
		}
		sv = sv.At(at)
		u := store.UsageAt(&sv, at, counter(c), quota.Counter{})
		index[sv.ID] = len(out)
		out = append(out, store.ServiceCounters{Service: sv, PeriodStart: u.PeriodStart, Counter: u.Service})
		return nil
	})
	if err != nil {
		return at, nil, err
	}
	rows, err = ptx.Query(bg, `SELECT b.id, b.service_id, c.period, c.used, c.total FROM branches b LEFT JOIN counters c ON c.scope = 'b/' || b.id ORDER BY b.id`)
	if err != nil {
		return at, nil, err
	}
	var id, svc string
	_, err = pgx.ForEachRow(rows, []any{&id, &svc, &c[0], &c[1], &c[2]}, func() error {
		if i, ok := index[svc]; ok {
			sc := &out[i]
			sc.Branches = append(sc.Branches, store.BranchCounter{BranchID: id, Counter: counter(c).In(sc.PeriodStart)})
		}
		return nil
	})
	return at, out, err
}

func jsonInto(raw []byte, v any) error {
	if raw == nil {
		return store.ErrNotFound
	}
	return json.Unmarshal(raw, v)
}
