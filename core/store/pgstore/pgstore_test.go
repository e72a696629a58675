package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/slipverify/slipverify/core/lib/pgtest"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/store"
	"github.com/slipverify/slipverify/core/store/pgstore"
	"github.com/slipverify/slipverify/core/store/storetest"
)

// database is a place of the store suite: a database of its own.
type database string

func (d database) Open(now func() time.Time, o store.Options) (store.Store, error) {
	return pgstore.Open(context.Background(), string(d), now, o)
}

// TestSuite runs the store suite against PostgreSQL, with several stores
// on one database where it checks exactness, as several cores.
func TestSuite(t *testing.T) {
	pg := pgtest.Start(t)
	storetest.Run(t, storetest.Backend{
		New:    func(t *testing.T) storetest.Place { return database(pg.Database(t)) },
		Shared: true,
	})
}

// TestConcurrentStarts: cores starting at once on an empty database bring
// its schema up once, under the migrations' lock, and all start.
func TestConcurrentStarts(t *testing.T) {
	url := pgtest.Start(t).Database(t)
	const cores = 4
	errs := make(chan error, cores)
	for range cores {
		go func() {
			st, err := pgstore.Open(context.Background(), url, time.Now, store.Options{})
			if err == nil {
				err = st.Close()
			}
			errs <- err
		}()
	}
	for range cores {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var applied, versions int
	if err := conn.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT version_id) FROM goose_db_version WHERE version_id > 0").Scan(&applied, &versions); err != nil {
		t.Fatal(err)
	}
	if applied != versions || versions == 0 {
		t.Errorf("migrations applied %d times for %d versions", applied, versions)
	}
}

// TestOneSweeper: while another core sweeps (holds the sweep's lock), a
// core's sweep removes nothing and leaves the work to it; then it sweeps.
func TestOneSweeper(t *testing.T) {
	url := pgtest.Start(t).Database(t)
	st, err := pgstore.Open(context.Background(), url, time.Now, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.CreateJobs([]store.Job{{ID: "j", ServiceID: "svc", BranchID: "br", Created: 1}}, nil, 0, store.Nonce{}); err != nil {
		t.Fatal(err)
	}
	other, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	lock := func(take bool) {
		t.Helper()
		fn := "pg_advisory_unlock"
		if take {
			fn = "pg_advisory_lock"
		}
		if _, err := other.Exec(context.Background(), "SELECT "+fn+"($1)", pgstore.SweepJobs); err != nil {
			t.Fatal(err)
		}
	}
	lock(true)
	if n, err := st.ExpireJobs(time.Now(), 10); err != nil || n != 0 {
		t.Fatalf("a sweep while another core sweeps: %d removed, %v; want none", n, err)
	}
	lock(false)
	if n, err := st.ExpireJobs(time.Now(), 10); err != nil || n != 1 {
		t.Fatalf("the sweep once the other is done: %d removed, %v; want 1", n, err)
	}
}

// TestOneRelay: of two cores on one database, one relays the outbox: it
// hears of the messages the other's commits add and reads them, while the
// other reads none; when it stops, the other takes over and reads what is
// left.
func TestOneRelay(t *testing.T) {
	url := pgtest.Start(t).Database(t)
	open := func() store.Store {
		st, err := pgstore.Open(context.Background(), url, time.Now, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	first, second := open(), open()
	pending := func(st store.Store) int {
		msgs, err := st.OutboxAfter(0, 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(msgs)
	}
	for range len(first.OutboxReady()) {
		<-first.OutboxReady()
	}
	if err := second.Emit(store.Message{Topic: "t", Value: []byte("from the second")}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.OutboxReady():
	case <-time.After(10 * time.Second):
		t.Fatal("the relaying core never heard of the other's message")
	}
	if a, b := pending(first), pending(second); a != 1 || b != 0 {
		t.Fatalf("messages to publish: %d by the first core, %d by the second; want 1 and 0", a, b)
	}
	first.Close()
	testnet.Eventually(t, 10*time.Second, func() bool { return pending(second) == 1 },
		func() string { return "the second core never took over the relay" })
}

// TestCommitLostThenReadBack: a verification whose COMMIT loses its
// connection after PostgreSQL committed it (here, while the COMMIT waits
// for a synchronous standby, as a failover cuts it) is answered as done,
// not as failed: the store reads its transaction's mark back. It is
// recorded and charged once.
func TestCommitLostThenReadBack(t *testing.T) {
	st, admin := shop(t, pgtest.Start(t).Database(t))
	defer st.Close()
	standby(t, admin, "nobody")
	ref, pid, done, committed := commitWaiting(t, st, admin, "LOST")
	if _, err := admin.Exec(context.Background(), "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	standby(t, admin, "") // the read-back and later writes commit
	if err := <-done; err != nil {
		t.Fatalf("a verification committed before its connection was lost: %v, want it answered as done", err)
	}
	q, err := st.Quota("svc", "br")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.FindSlip("svc", ref); err != nil || q.Usage.Service.Used != int64(committed)+1 {
		t.Errorf("after the lost COMMIT: record %v, used %d; want the record and %d used", err, q.Usage.Service.Used, committed+1)
	}
}

// TestCloseWithCommitUnknown: a store that closes while a COMMIT's outcome
// is unknown and the database takes no connection to read it back closes
// at once, the write reported failed, instead of resolving it for minutes
// (a core stopping with its database).
func TestCloseWithCommitUnknown(t *testing.T) {
	url := pgtest.Start(t).Database(t)
	ctx := context.Background()
	st, admin := shop(t, url)
	var db string
	admin.QueryRow(ctx, "SELECT current_database()").Scan(&db)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = "postgres"                         // a database's connections are refused from another
	cfg.RuntimeParams["synchronous_commit"] = "local" // its commits wait for no standby
	other, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	standby(t, admin, "nobody")
	defer func() {
		standby(t, admin, "")
		other.Exec(ctx, `ALTER DATABASE "`+db+`" ALLOW_CONNECTIONS true`)
	}()
	_, pid, done, _ := commitWaiting(t, st, admin, "CLOSE")
	if _, err := other.Exec(ctx, `ALTER DATABASE "`+db+`" ALLOW_CONNECTIONS false`); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- st.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("close: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the store did not close within 20 s of a COMMIT of unknown outcome")
	}
	if err := <-done; err == nil {
		t.Errorf("the write whose COMMIT's outcome is unknown was answered as done; want it reported failed")
	}
	t.Logf("closed in %v", time.Since(start).Round(time.Millisecond))
}

// shop opens a store on the database at url holding service svc (a quota
// of 10) with its branch br, and a connection of the test's own to the
// database (closed when the test ends).
func shop(t *testing.T, url string) (*pgstore.Store, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	st, err := pgstore.Open(ctx, url, time.Now, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.InsertMissing(store.Records{
		Services: []store.Service{{ID: "svc", State: store.StateActive, QuotaLimit: 10, CycleAnchorDay: 1}},
		Branches: []store.Branch{{ID: "br", ServiceID: "svc", Active: true, KeyDigest: store.Digest("k")}},
	}); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(ctx) })
	return st, admin
}

// standby sets the server's synchronous_standby_names to names.
func standby(t *testing.T, admin *pgx.Conn, names string) {
	t.Helper()
	for _, q := range []string{"ALTER SYSTEM SET synchronous_standby_names = '" + names + "'", "SELECT pg_reload_conf()"} {
		if _, err := admin.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
}

// commitWaiting verifies slips of references prefix0, prefix1… in st, one
// after another, each as core does (its snapshot first, so its batch runs
// blind), until one's COMMIT waits for a standby that never comes: a
// COMMIT that goes through before the backends have read the setting did
// not wait. It returns the reference of the one waiting, its backend's
// pid, where its answer will come, and how many went through before it.
func commitWaiting(t *testing.T, st *pgstore.Store, admin *pgx.Conn, prefix string) (ref string, pid int, done <-chan error, through int) {
	t.Helper()
	for {
		ref = fmt.Sprintf("%s%d", prefix, through)
		answer := make(chan error, 1)
		go func() {
			key := store.SlipKey("bank", "004", ref)
			if _, err := st.Snapshot("svc", "br", key); err != nil {
				answer <- err
				return
			}
			_, err := st.Apply("svc", "br", key, func(s store.Snapshot) (store.Effect, error) {
				return store.Effect{Charge: true, Result: []byte(`{}`)}, nil
			})
			answer <- err
		}()
		waiting := false
		testnet.Eventually(t, 30*time.Second, func() bool {
			select {
			case err := <-answer:
				if err != nil {
					t.Fatal(err)
				}
				through++
				return true
			default:
			}
			waiting = admin.QueryRow(context.Background(), "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'").Scan(&pid) == nil
			return waiting
		}, func() string { return "no COMMIT waits for the standby" })
		if waiting {
			return ref, pid, answer, through
		}
	}
}
