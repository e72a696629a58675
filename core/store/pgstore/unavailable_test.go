package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/pgtest"
	"github.com/slipverify/slipverify/core/store"
	"github.com/slipverify/slipverify/core/store/pgstore"
)

// TestSnapshotUnavailable: a verification's first read, and every other
// read a client waits on, on a database that
// is out of reach (its connections ended, new ones refused, as while a
// primary restarts or fails over), is an error clients are told to try
// again after (API_SERVER_ERROR), not a failure of the platform
// (INTERNAL_SERVER_ERROR).
func TestSnapshotUnavailable(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.Database(t)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	st, err := pgstore.Open(context.Background(), url, time.Now, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	refuse := func(refused bool) {
		t.Helper()
		allow := "true"
		if refused {
			allow = "false"
		}
		if _, err := admin.Exec(ctx, "ALTER DATABASE "+cfg.Database+" ALLOW_CONNECTIONS "+allow); err != nil {
			t.Fatal(err)
		}
		if refused {
			if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", cfg.Database); err != nil {
				t.Fatal(err)
			}
		}
	}
	refuse(true)
	t.Cleanup(func() { refuse(false); st.Close(); admin.Close(ctx) })
	// Every read a client waits on: a verification's, a key's branch, a
	// job's status, the history, the quota, a b2b client, the counters.
	reads := map[string]func() error{
		"snapshot": func() error { _, err := st.Snapshot("svc", "br", ""); return err },
		"branch by key": func() error {
			_, _, _, _, err := st.BranchByKey("digest")
			return err
		},
		"job":      func() error { _, err := st.Job("job"); return err },
		"history":  func() error { _, _, err := st.History(store.HistoryQuery{ServiceID: "svc", Limit: 10}); return err },
		"quota":    func() error { _, err := st.Quota("svc", "br"); return err },
		"client":   func() error { _, _, err := st.Client("digest"); return err },
		"counters": func() error { _, _, err := st.Counters(); return err },
	}
	for name, read := range reads {
		for i := range 2 { // a pooled connection ended, then new ones refused
			err := read()
			if err == nil {
				t.Fatalf("%s %d: no error from a database that refuses connections", name, i)
			}
			if got := api.Internal(err).Code; got != api.APIServerError {
				t.Errorf("%s %d: %v answered %v, want API_SERVER_ERROR", name, i, err, api.Lookup(got).V2Code)
			}
		}
	}
}
