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
	url := pgtest.Start(t).Database(t)
	ctx := context.Background()
	st, err := pgstore.Open(ctx, url, time.Now, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
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
	defer admin.Close(ctx)
	standby := func(names string) {
		t.Helper()
		if _, err := admin.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = '"+names+"'"); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
			t.Fatal(err)
		}
	}
	// Every COMMIT waits for a standby that never comes, once the backends
	// have read the setting: a COMMIT that goes through before they have
	// did not wait, and the next verification tries again.
	standby("nobody")
	var ref string
	committed := 0 // verifications that went through before the setting held
	for waiting := false; !waiting; {
		ref = fmt.Sprintf("LOST%d", committed)
		done := make(chan error, 1)
		go func() {
			key := store.SlipKey("bank", "004", ref)
			if _, err := st.Snapshot("svc", "br", key); err != nil { // as a verification: its batch runs blind
				done <- err
				return
			}
			_, err := st.Apply("svc", "br", key, func(s store.Snapshot) (store.Effect, error) {
				return store.Effect{Charge: true, Result: []byte(`{}`)}, nil
			})
			done <- err
		}()
		var pid int
		testnet.Eventually(t, 30*time.Second, func() bool {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				committed++
				return true
			default:
			}
			waiting = admin.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'").Scan(&pid) == nil
			return waiting
		}, func() string { return "no COMMIT waits for the standby" })
		if !waiting {
			continue
		}
		if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
			t.Fatal(err)
		}
		standby("") // the read-back and later writes commit
		if err := <-done; err != nil {
			t.Fatalf("a verification committed before its connection was lost: %v, want it answered as done", err)
		}
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
	defer admin.Close(ctx)
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
	for _, q := range []string{"ALTER SYSTEM SET synchronous_standby_names = 'nobody'", "SELECT pg_reload_conf()"} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		admin.Exec(ctx, "ALTER SYSTEM RESET synchronous_standby_names")
		admin.Exec(ctx, "SELECT pg_reload_conf()")
		other.Exec(ctx, `ALTER DATABASE "`+db+`" ALLOW_CONNECTIONS true`)
	}()
	done := make(chan error, 1)
	var pid int
	for i := 0; pid == 0; i++ { // until a COMMIT waits for the standby
		key := store.SlipKey("bank", "004", fmt.Sprintf("CLOSE%d", i))
		go func() {
			if _, err := st.Snapshot("svc", "br", key); err != nil {
				done <- err
				return
			}
			_, err := st.Apply("svc", "br", key, func(store.Snapshot) (store.Effect, error) {
				return store.Effect{Charge: true, Result: []byte(`{}`)}, nil
			})
			done <- err
		}()
		testnet.Eventually(t, 30*time.Second, func() bool {
			if admin.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'").Scan(&pid) == nil {
				return true
			}
			select {
			case err := <-done: // went through before the setting held
				if err != nil {
					t.Fatal(err)
				}
				return true
			default:
				return false
			}
		}, func() string { return "no COMMIT waits for the standby" })
	}
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
