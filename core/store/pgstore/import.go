package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/slipverify/slipverify/core/store"
)

// Import fills a database with another store's records (core copy-store
// copies bbolt's file into it), and reads them back as a store.Source for
// the check that follows. While it is open it holds the relay's lock
// (relayLock), which every running core holds or seeks: it refuses a
// database a core is using, and a second copy into the same database.
//
// A copy is idempotent: a record already in the database (the same key,
// the same contents) is left as it is and counted as already there, so a
// copy run again, or after a crash half-way, ends with the same database.
// A record under the same key with other contents is a conflict, and the
// copy refuses: the database holds another deployment's state.
type Import struct {
	pool *pgxpool.Pool
	lock *pgx.Conn
	now  time.Time
}

var _ store.Source = (*Import)(nil)

// ErrBusy refuses a database that a core, or another copy, is using.
var ErrBusy = errors.New("pgstore: a core or another copy is using the database: stop it first")

// lockWait is how long OpenImport waits for the relay's lock before it
// refuses the database as busy.
const lockWait = 3 * time.Second

// OpenImport connects to the database at url, brings its schema up to this
// build's, and takes the relay's lock; ErrBusy when it stays held for
// lockWait. now decides which nonces are still live, as
// store.OpenExport's.
func OpenImport(ctx context.Context, url string, now time.Time) (*Import, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	im := &Import{pool: pool, now: now}
	if im.lock, err = pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy()); err != nil {
		pool.Close()
		return nil, err
	}
	// A core stopped a moment ago may hold the lock a moment longer: its
	// session ends after its connection closed. So the lock is waited
	// for, for at most lockWait.
	if _, err = im.lock.Exec(ctx, "SET lock_timeout = "+fmt.Sprint(lockWait.Milliseconds())); err == nil {
		_, err = im.lock.Exec(ctx, "SELECT pg_advisory_lock($1)", relayLock)
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "55P03" { // lock_not_available
			err = ErrBusy
		}
	}
	if err == nil {
		err = Migrate(ctx, pool)
	}
	if err != nil {
		im.Close()
		return nil, err
	}
	return im, nil
}

// Close frees the lock and closes the connections.
func (im *Import) Close() {
	im.lock.Close(context.Background())
	im.pool.Close()
}

// Copied is what a copy did with one kind's records: copied, or found
// already there.
type Copied struct{ Copied, Already int64 }

// ConflictError refuses a copy into a database that holds other contents
// under a record's key, or more records of a kind than the source: another
// deployment's state. Copy's error names the kind.
type ConflictError struct {
	Kind   store.Kind
	Detail string
}

func (e ConflictError) Error() string {
	return e.Detail + ": the database holds another deployment's state; copy into an empty database"
}

// importBatch is how many records one statement copies: thousands per
// transaction, each transaction a moment's work.
const importBatch = 5000

// Copy copies every record of src the database lacks, kind by kind
// (store.Kinds), and returns what it did with each; totals are src's
// counts of each kind, and progress, when not nil, is told of the start of
// each kind (n 0) and how many of it are done after each batch. Before it
// writes, it refuses a database holding more records of a kind than src.
// The records an operator manages (services to admin tokens: few) are
// copied in one transaction, so a conflict among them leaves the database
// as it was; the others in transactions of importBatch records, each kind
// in order.
func (im *Import) Copy(ctx context.Context, src store.Source, totals map[store.Kind]int64, progress func(k store.Kind, done int64)) (map[store.Kind]Copied, error) {
	out := make(map[store.Kind]Copied, len(store.Kinds))
	tx, err := im.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if tx != nil {
			tx.Rollback(ctx)
		}
	}()
	if err := im.precheck(ctx, tx, totals); err != nil {
		return nil, err
	}
	for _, k := range store.Kinds {
		t := tables[k]
		if !t.managed && tx != nil {
			// The operators' records are in: they commit together, and
			// the b2b clients' numbers go on after theirs.
			if _, err := tx.Exec(ctx, `SELECT setval('b2b_seq', m) FROM (SELECT max(seq) AS m FROM b2b_clients) x
				WHERE m > (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM b2b_seq)`); err != nil {
				return nil, err
			}
			if err := tx.Commit(ctx); err != nil {
				return nil, err
			}
			tx = nil
		}
		var c Copied
		var batch []any
		if progress != nil {
			progress(k, 0)
		}
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			inserted, already, err := im.batch(ctx, tx, k, batch)
			if err != nil {
				return err
			}
			c.Copied, c.Already, batch = c.Copied+inserted, c.Already+already, batch[:0]
			if progress != nil {
				progress(k, c.Copied+c.Already)
			}
			return nil
		}
		err := src.Each(k, func(rec any) error {
			if batch = append(batch, rec); len(batch) == importBatch {
				return flush()
			}
			return nil
		})
		if err == nil {
			err = flush()
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = c
	}
	return out, nil
}

// precheck refuses, before anything is written, a database that holds
// more records of a kind than the source, or has numbered more outbox
// messages than the source holds.
func (im *Import) precheck(ctx context.Context, tx pgx.Tx, totals map[store.Kind]int64) error {
	for _, k := range store.Kinds {
		var n int64
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+tables[k].name+tables[k].where, im.args(k)...).Scan(&n); err != nil {
			return err
		}
		if n > totals[k] {
			return ConflictError{k, fmt.Sprintf("%s: the database holds %d, the source %d", k, n, totals[k])}
		}
	}
	var last int64
	if err := tx.QueryRow(ctx, "SELECT last FROM outbox_next").Scan(&last); err != nil {
		return err
	}
	if last > totals[store.KindOutbox] {
		return ConflictError{store.KindOutbox, fmt.Sprintf("%s: the database has numbered %d messages, the source holds %d", store.KindOutbox, last, totals[store.KindOutbox])}
	}
	return nil
}

// args are the arguments of the kind's where: the Unix minute from which
// a nonce is live (ExpireNonces), for the nonces.
func (im *Import) args(k store.Kind) []any {
	if tables[k].where == "" {
		return nil
	}
	return []any{im.now.Unix()/60 + 1}
}

// batch copies recs, records of kind k, in tx (nil: a transaction of its
// own), and returns how many it inserted and how many were there already.
// The records go by COPY into a temporary table, and from there into the
// kind's table in one statement, which also compares those whose key was
// taken with what holds it.
func (im *Import) batch(ctx context.Context, tx pgx.Tx, k store.Kind, recs []any) (inserted, already int64, err error) {
	if tx == nil {
		err := pgx.BeginFunc(ctx, im.pool, func(tx pgx.Tx) error {
			inserted, already, err = im.batch(ctx, tx, k, recs)
			return err
		})
		return inserted, already, err
	}
	t := tables[k]
	rows := make([][]any, len(recs))
	for i, r := range recs {
		rows[i] = append([]any{int64(i)}, t.row(r)...)
	}
	if _, err := tx.Exec(ctx, "CREATE TEMP TABLE import_rows AS SELECT 0::bigint AS n, "+strings.Join(t.cols, ", ")+" FROM "+t.name+" WITH NO DATA"); err != nil {
		return 0, 0, err
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"import_rows"}, append([]string{"n"}, t.cols...), pgx.CopyFromRows(rows)); err != nil {
		return 0, 0, err
	}
	var differ []int64
	if err := tx.QueryRow(ctx, t.statement()).Scan(&inserted, &already, &differ); err != nil {
		return 0, 0, err
	}
	if len(differ) > 0 {
		return 0, 0, ConflictError{k, fmt.Sprintf("%s differs from the record under its key in the database (%d of this batch)", t.describe(recs[differ[0]]), len(differ))}
	}
	if inserted+already != int64(len(recs)) {
		return 0, 0, ConflictError{k, fmt.Sprintf("%d records clash with others of the database on a unique column", int64(len(recs))-inserted-already)}
	}
	if k == store.KindOutbox {
		_, err = tx.Exec(ctx, "UPDATE outbox_next SET last = greatest(last, (SELECT max(seq) FROM import_rows))")
	}
	if err == nil {
		_, err = tx.Exec(ctx, "DROP TABLE import_rows")
	}
	return inserted, already, err
}

// table is where the records of a kind go.
type table struct {
	name    string
	cols    []string // the columns copied, in row's order
	key     []string // the columns that name a record
	where   string   // the records of the kind, of all the table's ($1: the live nonces' cutoff)
	managed bool     // records an operator manages: copied in one transaction
	row     func(rec any) []any
	// describe names a record in a refusal.
	describe func(rec any) string
}

// statement inserts the rows of import_rows whose key is free, and returns
// how many it inserted, how many were there with the same contents, and
// the ordinals of those there with other contents. Each row looks its key
// up by the table's index (a join would read the whole table for every
// batch), in the table as it was before the insert: every part of the
// statement sees that one snapshot.
func (t *table) statement() string {
	var on, tc, uc []string
	for _, c := range t.key {
		on = append(on, "t."+c+" = u."+c)
	}
	for _, c := range t.cols {
		tc, uc = append(tc, "t."+c), append(uc, "u."+c)
	}
	return "WITH u AS MATERIALIZED (SELECT u.*, (SELECT (" + strings.Join(tc, ", ") + ") IS NOT DISTINCT FROM (" + strings.Join(uc, ", ") + ")" +
		" FROM " + t.name + " t WHERE " + strings.Join(on, " AND ") + " LIMIT 1) AS same FROM import_rows u)," +
		" ins AS (INSERT INTO " + t.name + " (" + strings.Join(t.cols, ", ") + ") SELECT " + strings.Join(uc, ", ") +
		" FROM u WHERE u.same IS NULL ORDER BY u.n ON CONFLICT DO NOTHING RETURNING 1)" +
		" SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM u WHERE u.same), coalesce((SELECT array_agg(u.n) FROM u WHERE NOT u.same), '{}')"
}

// tables are the kinds' tables. The indexes bbolt keeps beside its records
// are the tables' own (branches and accounts by service, jobs by due time
// and age, unfinished jobs, slips by age and reference, admin tokens by
// digest); the number of the next b2b client and of the next outbox
// message go on after the records copied.
var tables = map[store.Kind]*table{
	store.KindServices: {name: "services", cols: []string{"id", "doc"}, key: []string{"id"}, managed: true,
		row:      func(r any) []any { sv := r.(store.Service); return []any{sv.ID, mustJSON(sv)} },
		describe: func(r any) string { return "service " + r.(store.Service).ID }},
	store.KindBranches: {name: "branches", cols: []string{"id", "service_id", "doc"}, key: []string{"id"}, managed: true,
		row:      func(r any) []any { b := r.(store.Branch); return []any{b.ID, b.ServiceID, mustJSON(b)} },
		describe: func(r any) string { return "branch " + r.(store.Branch).ID }},
	store.KindDeletedBranches: {name: "branches_deleted", cols: []string{"id", "deleted_at"}, key: []string{"id"}, managed: true,
		row:      func(r any) []any { d := r.(store.DeletedBranch); return []any{d.ID, d.At} },
		describe: func(r any) string { return "deleted branch " + r.(store.DeletedBranch).ID }},
	store.KindKeys: {name: "keys", cols: []string{"digest", "branch_id"}, key: []string{"digest"}, managed: true,
		row:      func(r any) []any { k := r.(store.KeyOwner); return []any{k.Digest, k.BranchID} },
		describe: func(r any) string { return "the key of branch " + r.(store.KeyOwner).BranchID }},
	store.KindClients: {name: "b2b_clients", cols: []string{"key_digest", "seq", "service_id", "doc"}, key: []string{"key_digest"}, managed: true,
		row: func(r any) []any {
			c := r.(store.B2BClient)
			return []any{c.KeyDigest, int64(c.Seq), c.ServiceID, mustJSON(c)}
		},
		describe: func(r any) string { c := r.(store.B2BClient); return "client " + c.ID() + " of service " + c.ServiceID }},
	store.KindAccounts: {name: "accounts", cols: []string{"id", "service_id", "doc"}, key: []string{"id"}, managed: true,
		row: func(r any) []any {
			a := r.(store.BankAccount)
			return []any{a.ID, a.ServiceID, mustJSON(a)}
		},
		describe: func(r any) string { return "account " + r.(store.BankAccount).ID }},
	store.KindConditions: {name: "conditions", cols: []string{"branch_id", "doc"}, key: []string{"branch_id"}, managed: true,
		row: func(r any) []any {
			c := r.(store.BranchDefaults)
			return []any{c.BranchID, mustJSON(c.Conditions)}
		},
		describe: func(r any) string { return "the conditions of branch " + r.(store.BranchDefaults).BranchID }},
	store.KindCounters: {name: "counters", cols: []string{"scope", "period", "used", "total"}, key: []string{"scope"}, managed: true,
		row: func(r any) []any {
			c := r.(store.CounterRecord)
			return []any{c.Scope, c.Counter.Period, c.Counter.Used, c.Counter.Total}
		},
		describe: func(r any) string { return "counter " + r.(store.CounterRecord).Scope }},
	store.KindAdminTokens: {name: "admin_tokens", cols: []string{"id", "digest", "doc"}, key: []string{"id"}, managed: true,
		row:      func(r any) []any { t := r.(store.AdminToken); return []any{t.ID, t.Digest, mustJSON(t)} },
		describe: func(r any) string { return "admin token " + r.(store.AdminToken).ID }},
	store.KindSlips: {name: "slips", cols: []string{"service_id", "slip_key", "first_at", "job", "branches", "result"}, key: []string{"service_id", "slip_key"},
		row: func(r any) []any {
			s := r.(store.Slip)
			branches := s.Record.Branches
			if branches == nil {
				branches = []string{} // NOT NULL
			}
			return []any{s.ServiceID, s.Key, s.Record.FirstAt, s.Record.Job, branches, append([]byte{}, s.Record.Result...)}
		},
		describe: func(r any) string { s := r.(store.Slip); return "slip " + s.Key + " of service " + s.ServiceID }},
	store.KindHistory: {name: "history", cols: []string{"service_id", "branch_id", "at_ms", "slip_key", "amount", "receiving_bank", "duplicate",
		"amount_matched", "date_matched", "remark", "job_id"}, key: []string{"service_id", "branch_id", "at_ms", "slip_key"},
		row: func(r any) []any { v := r.(store.Verification); return entryArgs(&v, v.At.UnixMilli()) },
		describe: func(r any) string {
			v := r.(store.Verification)
			return fmt.Sprintf("the entry of slip %s by branch %s at %d ms", v.SlipKey, v.BranchID, v.At.UnixMilli())
		}},
	store.KindNonces: {name: "nonces", cols: []string{"service_id", "value", "forget_minute"}, key: []string{"service_id", "value", "forget_minute"},
		where: " WHERE forget_minute >= $1",
		row: func(r any) []any {
			n := r.(store.ClaimedNonce)
			return []any{n.ServiceID, n.Value, n.ForgetMinute}
		},
		describe: func(r any) string { return "nonce of service " + r.(store.ClaimedNonce).ServiceID }},
	store.KindJobs: {name: "jobs", cols: []string{"id", "service_id", "branch_id", "created", "due_at", "unfinished", "doc"}, key: []string{"id"},
		row: func(r any) []any {
			j := r.(store.Job)
			return []any{j.ID, j.ServiceID, j.BranchID, j.Created, due(j), !j.Finished(), mustJSON(j)}
		},
		describe: func(r any) string { return "job " + r.(store.Job).ID }},
	// An audit record has no key but its time and itself (its id is in
	// its JSON): one already there is the same bytes at the same time.
	store.KindAudit: {name: "audit", cols: []string{"at_ms", "service_id", "action", "doc"}, key: []string{"at_ms", "doc"},
		row: func(r any) []any {
			a := r.(store.AuditEntry)
			return []any{a.AtMs, a.ServiceID, a.Action, a.Doc}
		},
		describe: func(r any) string {
			a := r.(store.AuditEntry)
			return fmt.Sprintf("audit record %s at %d ms", a.Action, a.AtMs)
		}},
	// Messages keep the numbers the source gives them (store.Export numbers
	// them from 1): a message already there is the one of that number.
	store.KindOutbox: {name: "outbox", cols: []string{"seq", "topic", "key", "value"}, key: []string{"seq"},
		row: func(r any) []any {
			m := r.(store.Message)
			return []any{int64(m.Seq), m.Topic, append([]byte{}, m.Key...), append([]byte{}, m.Value...)} // NOT NULL: never nil
		},
		describe: func(r any) string { return fmt.Sprintf("message %d", r.(store.Message).Seq) }},
}

// Each calls fn with every record of kind k the database holds, read from
// its rows: a record kept as JSON is checked to agree with the columns
// made of it, which the store's queries read.
func (im *Import) Each(k store.Kind, fn func(rec any) error) error {
	ctx := context.Background()
	t := tables[k]
	if t == nil {
		return fmt.Errorf("pgstore: no kind %q", k)
	}
	rows, err := im.pool.Query(ctx, "SELECT "+strings.Join(t.cols, ", ")+" FROM "+t.name+t.where, im.args(k)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		rec, err := readRow(k, rows)
		if err == nil {
			err = fn(rec)
		}
		if err != nil {
			return err
		}
	}
	return rows.Err()
}

// readRow reads the record of kind k in the current row of rows, whose
// columns are its table's cols.
func readRow(k store.Kind, rows pgx.Rows) (any, error) {
	var doc []byte
	disagree := func(key string, ok bool) error {
		if !ok {
			return fmt.Errorf("%s %s: its columns disagree with its record", k, key)
		}
		return nil
	}
	switch k {
	case store.KindServices:
		var id string
		var sv store.Service
		if err := scanJSON(rows, &doc, &sv, &id); err != nil {
			return nil, err
		}
		return sv, disagree(id, sv.ID == id)
	case store.KindBranches:
		var id, svc string
		var b store.Branch
		if err := scanJSON(rows, &doc, &b, &id, &svc); err != nil {
			return nil, err
		}
		return b, disagree(id, b.ID == id && b.ServiceID == svc)
	case store.KindDeletedBranches:
		var d store.DeletedBranch
		err := rows.Scan(&d.ID, &d.At)
		d.At = d.At.UTC()
		return d, err
	case store.KindKeys:
		var o store.KeyOwner
		return o, rows.Scan(&o.Digest, &o.BranchID)
	case store.KindClients:
		var digest, svc string
		var seq int64
		var c store.B2BClient
		if err := scanJSON(rows, &doc, &c, &digest, &seq, &svc); err != nil {
			return nil, err
		}
		return c, disagree(c.ServiceID+" "+fmt.Sprint(seq), c.KeyDigest == digest && c.Seq == uint64(seq) && c.ServiceID == svc)
	case store.KindAccounts:
		var id, svc string
		var a store.BankAccount
		if err := scanJSON(rows, &doc, &a, &id, &svc); err != nil {
			return nil, err
		}
		return a, disagree(id, a.ID == id && a.ServiceID == svc)
	case store.KindConditions:
		var c store.BranchDefaults
		return c, scanJSON(rows, &doc, &c.Conditions, &c.BranchID)
	case store.KindCounters:
		var c store.CounterRecord
		return c, rows.Scan(&c.Scope, &c.Counter.Period, &c.Counter.Used, &c.Counter.Total)
	case store.KindAdminTokens:
		var id, digest string
		var t store.AdminToken
		if err := scanJSON(rows, &doc, &t, &id, &digest); err != nil {
			return nil, err
		}
		return t, disagree(id, t.ID == id && t.Digest == digest)
	case store.KindSlips:
		s := store.Slip{Record: new(store.SlipRecord)}
		return s, rows.Scan(&s.ServiceID, &s.Key, &s.Record.FirstAt, &s.Record.Job, &s.Record.Branches, &s.Record.Result)
	case store.KindHistory:
		var v store.Verification
		var at int64
		err := rows.Scan(&v.ServiceID, &v.BranchID, &at, &v.SlipKey, &v.Amount, &v.ReceivingBank, &v.Duplicate, &v.AmountMatched, &v.DateMatched, &v.Remark, &v.JobID)
		v.At = time.UnixMilli(at)
		return v, err
	case store.KindNonces:
		var n store.ClaimedNonce
		return n, rows.Scan(&n.ServiceID, &n.Value, &n.ForgetMinute)
	case store.KindJobs:
		var id, svc, br string
		var created int64
		var dueAt *int64
		var unfinished bool
		var j store.Job
		if err := scanJSON(rows, &doc, &j, &id, &svc, &br, &created, &dueAt, &unfinished); err != nil {
			return nil, err
		}
		due := due(j)
		return j, disagree(id, j.ID == id && j.ServiceID == svc && j.BranchID == br && j.Created == created &&
			(due == nil) == (dueAt == nil) && (due == nil || *due == *dueAt) && unfinished == !j.Finished())
	case store.KindAudit:
		var a store.AuditEntry
		return a, rows.Scan(&a.AtMs, &a.ServiceID, &a.Action, &a.Doc)
	case store.KindOutbox:
		var m store.Message
		var seq int64
		var key []byte
		err := rows.Scan(&seq, &m.Topic, &key, &m.Value)
		m.Seq, m.Key = uint64(seq), string(key)
		return m, err
	}
	return nil, fmt.Errorf("pgstore: no kind %q", k)
}

// scanJSON scans the row's columns into cols and its last, doc, and
// decodes doc into v.
func scanJSON(rows pgx.Rows, doc *[]byte, v any, cols ...any) error {
	if err := rows.Scan(append(cols, doc)...); err != nil {
		return err
	}
	return jsonInto(*doc, v)
}
