package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/pgtest"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/store"
	"github.com/slipverify/slipverify/core/store/pgstore"
)

// copyDeployment writes a deployment into st through the store's own
// methods, one record of every kind at least: services, branches (one
// deleted), a rotated key in its overlap, clients (a secret rotated),
// an account linked to two branches, conditions, verifications that
// charge, a duplicate, an own duplicate, two in one millisecond, async
// jobs open and finished, a nonce, an admin token, and the outbox's
// messages with them.
// deploymentInBolt writes copyDeployment's records into a new core.db,
// and returns its path, the store still open on it, and the store's clock.
func deploymentInBolt(t *testing.T) (string, *store.Bolt, *testnet.Clock) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "core.db")
	c := testnet.NewClock(time.Now().Truncate(time.Second))
	st, err := store.Open(path, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	copyDeployment(t, st, c)
	return path, st, c
}

func copyDeployment(t *testing.T, st store.Store, c *testnet.Clock) {
	t.Helper()
	ch := store.Change{Actor: api.AuditActor{Type: api.ActorAdmin, ID: "ops"}, Reason: "test"}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	limit := int64(50)
	must(st.CreateService(store.Service{ID: "svc", Name: "Shop", State: store.StateActive, QuotaLimit: 100, CycleAnchorDay: 1},
		store.Branch{ID: "br", ServiceID: "svc", Name: "main", Main: true, Active: true, IPAllow: []string{"*"}, KeyDigest: store.Digest("key-1")},
		store.B2BClient{KeyDigest: store.Digest("client-1"), ServiceID: "svc", Secret: []byte("sealed-1"), Permissions: []string{"branch:read"}, Name: "ops"}, ch))
	must(st.CreateService(store.Service{ID: "other", Name: "Other", State: store.StateActive, QuotaLimit: 10, CycleAnchorDay: 15},
		store.Branch{ID: "ob", ServiceID: "other", Main: true, Active: true, KeyDigest: store.Digest("key-o")},
		store.B2BClient{KeyDigest: store.Digest("client-o"), ServiceID: "other", Secret: []byte("sealed-o")}, ch))
	must(st.CreateBranch(store.Branch{ID: "br2", ServiceID: "svc", Name: "second", Active: true, LimitQuota: &limit, KeyDigest: store.Digest("key-2")}, ch))
	must(st.CreateBranch(store.Branch{ID: "gone", ServiceID: "svc", Active: true, KeyDigest: store.Digest("key-gone")}, ch))
	must(st.DeleteBranch("svc", "gone", ch))
	c.Advance(time.Second)
	_, err := st.RotateBranchKey("svc", "br", store.Digest("key-1b"), time.Hour, false, ch)
	must(err)
	cl, err := st.CreateClient(store.B2BClient{KeyDigest: store.Digest("client-2"), ServiceID: "svc", Secret: []byte("sealed-2"), Permissions: []string{"branch:write"}}, ch)
	must(err)
	_, err = st.RotateClientSecret("svc", cl.ID(), time.Hour, false, ch, func(string) []byte { return []byte("sealed-2b") })
	must(err)
	must(st.CreateAccount(&store.BankAccount{ID: "acc", ServiceID: "svc", BankCode: "004", BankNumber: "1234567890",
		Name: store.AccountName{TH: "ร้านค้า", EN: "Shop"}, Branches: []string{"br"}, Active: true}, ch))
	_, err = st.LinkAccount("svc", "br2", "acc", true, ch)
	must(err)
	lo := 100.0
	must(st.SetBranchConditions("svc", "br", store.Conditions{AmountMin: &lo, MaxAge: 24 * time.Hour}, ch))
	must(st.CreateAdminToken(store.AdminToken{ID: "tok", Name: "ci", Scope: store.ScopeRead, Digest: store.Digest("admin-1"), CreatedAt: c.Now().UTC()}, ch))

	verify := func(br, ref string, listed bool, nonce string) {
		t.Helper()
		_, err := st.Apply("svc", br, store.SlipKey("bank", "004", ref), func(s store.Snapshot) (store.Effect, error) {
			own := s.Slip != nil && s.Slip.VerifiedBy(br)
			yes := true
			return store.Effect{Charge: !own || listed, Result: []byte(`{"transRef":"` + ref + `","amount":250}`), Listed: listed,
				History: store.Verification{Amount: 250, ReceivingBank: "014", Duplicate: s.Slip != nil, AmountMatched: true, DateMatched: &yes, Remark: "r-" + ref},
				Nonce:   store.Nonce{Value: nonce, At: nonceAt},
				Usage: func(charged bool, at time.Time) store.Message {
					return store.Message{Topic: api.TopicUsage, Key: "svc", Value: fmt.Appendf(nil, `{"ref":%q,"charged":%v,"at":%d}`, ref, charged, at.UnixMilli())}
				}}, nil
		})
		must(err)
	}
	verify("br", "REF1", true, "n-1")
	c.Advance(time.Second)
	verify("br2", "REF1", true, "") // another branch's duplicate: charged
	c.Advance(time.Second)
	verify("br", "REF1", false, "") // the branch's own: free, not listed
	verify("br", "REF2", true, "")
	verify("br", "REF2", true, "") // charged again in the same millisecond (v1 without checkDuplicate)
	c.Advance(time.Second)
	verify("br2", "REF3", true, "")

	job := func(id string, due int64) store.Job {
		return store.Job{ID: id, BatchID: "batch-1", ServiceID: "svc", BranchID: "br", Created: c.Now().UnixMilli(), DueAt: due, Status: "pending",
			Request: json.RawMessage(`{"payload":"x"}`), CallbackURL: "https://shop.example/cb", Attempt: 1}
	}
	must(st.CreateJobs([]store.Job{job("job-1", c.Now().Add(time.Minute).UnixMilli()), job("job-2", 0)},
		[]store.Message{{Topic: api.TopicJobs, Key: "job-1", Value: []byte(`{"jobId":"job-1"}`)}}, 0, store.Nonce{Value: "n-2", At: nonceAt}))
	_, err = st.UpdateJob("job-2", func(j *store.Job) ([]store.Message, error) {
		j.Status, j.Request, j.Result, j.Attempt = "done", nil, json.RawMessage(`{"transRef":"JOB2"}`), 2
		return []store.Message{{Topic: api.TopicResults, Key: "job-2", Value: []byte(`{"jobId":"job-2"}`)}}, nil
	})
	must(err)
	must(st.ClaimNonce("other", store.Nonce{Value: "n-3", At: nonceAt}))
}

// observe returns what a user of st sees of copyDeployment's records,
// through the Store interface, by what was asked.
func observe(t *testing.T, st store.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	see := func(what string, v ...any) {
		for i, x := range v {
			if err, ok := x.(error); ok {
				v[i] = err.Error()
			}
		}
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[what] = string(raw)
	}
	see("services", must2(st.Services()))
	see("branches", must2(st.Branches("svc")))
	for _, key := range []string{"key-1", "key-1b", "key-2", "key-gone", "key-o"} {
		_, br, first, ends, err := st.BranchByKey(store.Digest(key))
		see("the branch of "+key, br.ID, first, ends, err)
	}
	for _, key := range []string{"client-1", "client-2"} {
		_, c, err := st.Client(store.Digest(key))
		see("client "+key, c, err)
	}
	see("clients", must2(st.Clients("svc")))
	see("accounts of br2", must2(st.Accounts("svc", "br2")))
	see("conditions", must2(st.BranchConditions("svc", "br")))
	for _, br := range []string{"br", "br2"} {
		q, err := st.Quota("svc", br)
		see("quota of "+br, q.Usage, q.Branch.LimitQuota, err)
	}
	_, counters, err := st.Counters()
	see("counters", counters, err)
	for _, br := range []string{"br", "br2"} {
		for _, ref := range []string{"REF1", "REF2", "REF3", "NEW"} {
			snap, err := st.Snapshot("svc", br, store.SlipKey("bank", "004", ref))
			see("slip "+ref+" seen by "+br, snap.Slip, snap.Slip != nil && snap.Slip.VerifiedBy(br), err)
		}
	}
	key, rec, err := st.FindSlip("svc", "REF3")
	see("find REF3", key, rec, err)
	history, next, err := st.History(store.HistoryQuery{ServiceID: "svc", Limit: 100})
	var entries []string
	for _, v := range history {
		// Two entries of one millisecond take two in PostgreSQL: seconds
		// are what a user reads.
		entries = append(entries, fmt.Sprintf("%s %s %d %v %v %v %s", v.BranchID, v.SlipKey, v.At.Unix(), v.Amount, v.Duplicate, *v.DateMatched, v.Remark))
	}
	see("history", entries, next, err)
	for _, id := range []string{"job-1", "job-2"} {
		see("job "+id, must2(st.Job(id)))
	}
	see("unfinished jobs", must2(st.UnfinishedJobs("svc", "br")))
	ids, nextDue, err := st.DueJobs(time.Now().Add(time.Hour), 10)
	see("due jobs", ids, nextDue, err)
	audit, cursor, err := st.Audit(store.AuditFilter{Limit: 100})
	see("audit", audit, cursor, err)
	see("admin tokens", must2(st.AdminTokens()))
	see("admin token by digest", must2(st.AdminTokenByDigest(store.Digest("admin-1"))))
	msgs, err := st.Outbox(1000)
	for i := range msgs {
		msgs[i].Seq = 0 // bbolt's numbers have gaps (its history shares them)
	}
	see("outbox", msgs, err)
	waiting, _ := st.OutboxStats()
	see("messages waiting", waiting)
	return out
}

func must2[T any](v T, err error) []any {
	if err != nil {
		return []any{v, err.Error()}
	}
	return []any{v}
}

// claimedAgain reports, for each nonce copyDeployment claimed, whether a
// second claim of it is refused as DUPLICATE_NONCE (a claim that is not
// refused claims it).
func claimedAgain(st store.Store) []bool {
	var out []bool
	for _, n := range []struct{ svc, value string }{{"svc", "n-1"}, {"svc", "n-2"}, {"other", "n-3"}} {
		var refused *api.Error
		err := st.ClaimNonce(n.svc, store.Nonce{Value: n.value, At: nonceAt})
		out = append(out, errors.As(err, &refused) && refused.Code == api.DuplicateNonce)
	}
	return out
}

// nonceAt is the time of the signed requests of copyDeployment.
var nonceAt = time.Now()

// TestCopyStore: a deployment written to bbolt by core's store, copied
// with copy-store, is what the PostgreSQL store shows a user: the same
// slips are duplicates, the same quota is used, the rotated key still
// works in its overlap, the history lists the same entries, a job's result
// reads the same, the nonces claimed stay claimed. A second copy finds
// everything already there and leaves it as it is.
func TestCopyStore(t *testing.T) {
	url := pgtest.Start(t).Database(t)
	path, st, c := deploymentInBolt(t)
	want := observe(t, st)
	if got := claimedAgain(st); fmt.Sprint(got) != "[true true true]" {
		t.Fatalf("nonces claimed again in bbolt: refused %v", got)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	copied := copyOK(t, path, url)
	for _, k := range store.Kinds {
		if row := copied[k]; row[0] == 0 || row[1] != row[0] || row[2] != 0 || row[3] != row[0] {
			t.Errorf("%s: in bbolt, copied, already there, in PostgreSQL = %v; want all copied", k, row)
		}
	}
	if copied[store.KindHistory][0] != 5 || copied[store.KindOutbox][0] == 0 {
		t.Errorf("history %v, outbox %v: want 5 entries and the messages", copied[store.KindHistory], copied[store.KindOutbox])
	}

	pg, err := pgstore.Open(context.Background(), url, c.Now, store.Options{SlipAges: true})
	if err != nil {
		t.Fatal(err)
	}
	got := observe(t, pg)
	if refused := claimedAgain(pg); fmt.Sprint(refused) != "[true true true]" {
		t.Errorf("nonces claimed again in PostgreSQL: refused %v, want every one", refused)
	}
	pg.Close()
	for what, w := range want {
		if got[what] != w {
			t.Errorf("%s:\n bbolt      %s\n PostgreSQL %s", what, w, got[what])
		}
	}

	again := copyOK(t, path, url)
	for _, k := range store.Kinds {
		if n := copied[k][0]; again[k] != [4]int64{n, 0, n, n} {
			t.Errorf("%s, copied again: in bbolt, copied, already there, in PostgreSQL = %v; want all %d already there", k, again[k], n)
		}
	}
}

// copyOK runs copy-store from path to url and returns its table: for each
// kind, in bbolt, copied, already there and in PostgreSQL.
func copyOK(t *testing.T, path, url string) map[store.Kind][4]int64 {
	t.Helper()
	var out, progress bytes.Buffer
	if err := copyStore(context.Background(), []string{"-from", path, "-to", url}, noEnv, &out, &progress); err != nil {
		t.Fatalf("copy-store: %v\n%s%s", err, progress.String(), out.String())
	}
	t.Logf("copy-store:\n%s%s", progress.String(), out.String())
	if !strings.Contains(out.String(), "checked: every kind has the same count and SHA-256 digest") {
		t.Errorf("no check in the output:\n%s", out.String())
	}
	table := map[store.Kind][4]int64{}
	for _, line := range strings.Split(out.String(), "\n") {
		for _, k := range store.Kinds {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), string(k)+" ")
			var row [4]int64
			if _, err := fmt.Sscan(strings.ReplaceAll(rest, ",", ""), &row[0], &row[1], &row[2], &row[3]); ok && err == nil {
				table[k] = row
			}
		}
	}
	if len(table) != len(store.Kinds) {
		t.Fatalf("the table has %d kinds of %d:\n%s", len(table), len(store.Kinds), out.String())
	}
	return table
}

func noEnv(string) string { return "" }

// TestCopyStoreRefusesOpenFile: while a core has core.db open, copy-store
// refuses it and says why.
func TestCopyStoreRefusesOpenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "core.db")
	st, err := store.Open(path, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out bytes.Buffer
	err = copyStore(context.Background(), []string{"-from", path, "-to", "postgres://slip@127.0.0.1:1/slip"}, noEnv, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "core.db is in use: stop core first") {
		t.Errorf("copy-store of an open core.db: %v, want it refused as in use", err)
	}
}

// TestCopyStoreRefusesAnotherDeployment: a database a core is running on
// is refused; so is one holding another deployment's state, which is left
// as it was: a service under an id core.db has with other contents, or
// more services than core.db has.
func TestCopyStoreRefusesAnotherDeployment(t *testing.T) {
	pgc := pgtest.Start(t)
	path, st, c := deploymentInBolt(t)
	st.Close()
	for _, f := range []struct {
		name    string
		theirs  []store.Service
		refusal string
	}{
		{"other contents", []store.Service{{ID: "svc", Name: "Someone else's", State: store.StateActive, CycleAnchorDay: 1}},
			"service svc differs from the record under its key in the database"},
		{"more records", []store.Service{{ID: "a", CycleAnchorDay: 1}, {ID: "b", CycleAnchorDay: 1}, {ID: "c", CycleAnchorDay: 1}},
			"services: the database holds 3, the source 2"},
	} {
		t.Run(f.name, func(t *testing.T) {
			url := pgc.Database(t)
			pg, err := pgstore.Open(context.Background(), url, c.Now, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pg.InsertMissing(store.Records{Services: f.theirs}); err != nil {
				t.Fatal(err)
			}
			before := observe(t, pg)
			var out bytes.Buffer
			err = copyStore(context.Background(), []string{"-from", path, "-to", url}, noEnv, &out, &out)
			if !errors.Is(err, pgstore.ErrBusy) {
				t.Errorf("copy-store into a database a core is running on: %v, want it refused (%v)", err, pgstore.ErrBusy)
			}
			pg.Close()

			out.Reset()
			err = copyStore(context.Background(), []string{"-from", path, "-to", url}, noEnv, &out, &out)
			if err == nil || !strings.Contains(err.Error(), f.refusal) || !strings.Contains(err.Error(), "another deployment's state") {
				t.Fatalf("copy-store into another deployment's database: %v, want it refused: %s\n%s", err, f.refusal, out.String())
			}
			if pg, err = pgstore.Open(context.Background(), url, c.Now, store.Options{}); err != nil {
				t.Fatal(err)
			}
			defer pg.Close()
			after := observe(t, pg)
			for what, b := range before {
				if after[what] != b {
					t.Errorf("%s changed by the refused copy:\n before %s\n after  %s", what, b, after[what])
				}
			}
		})
	}
}

// failing is a Source that fails at the first record of kind at.
type failing struct {
	store.Source
	at store.Kind
}

var errCrash = errors.New("crashed")

func (f failing) Each(k store.Kind, fn func(rec any) error) error {
	return f.Source.Each(k, func(rec any) error {
		if k == f.at {
			return errCrash
		}
		return fn(rec)
	})
}

// TestCopyStoreAfterACrash: a copy cut short half-way (here, at the
// history, after the records and the slips) leaves what it copied, and
// copy-store run again copies the rest, finds the rest already there, and
// ends with what core.db holds.
func TestCopyStoreAfterACrash(t *testing.T) {
	url := pgtest.Start(t).Database(t)
	path, st, _ := deploymentInBolt(t)
	st.Close()

	now := time.Now()
	exp, err := store.OpenExport(path, now, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sums, err := store.Tally(exp, nil)
	if err != nil {
		t.Fatal(err)
	}
	totals := map[store.Kind]int64{}
	for k, s := range sums {
		totals[k] = s.Count
	}
	imp, err := pgstore.OpenImport(context.Background(), url, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := imp.Copy(context.Background(), failing{exp, store.KindHistory}, totals, nil); !errors.Is(err, errCrash) {
		t.Fatalf("the copy cut short: %v", err)
	}
	imp.Close()
	exp.Close()

	table := copyOK(t, path, url)
	for _, k := range store.Kinds {
		n := totals[k]
		want := [4]int64{n, 0, n, n} // copied before the crash
		if slices.Index(store.Kinds, k) >= slices.Index(store.Kinds, store.KindHistory) {
			want = [4]int64{n, n, 0, n}
		}
		if table[k] != want {
			t.Errorf("%s after the crash: in bbolt, copied, already there, in PostgreSQL = %v, want %v", k, table[k], want)
		}
	}
}
