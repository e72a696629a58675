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

// TestSnapshotUnavailable: a verification's first read, on a database that
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
	for i := range 3 { // a pooled connection ended, then new ones refused
		_, err := st.Snapshot("svc", "br", "")
		if err == nil {
			t.Fatalf("read %d: no error from a database that refuses connections", i)
		}
		if got := api.Internal(err).Code; got != api.APIServerError {
			t.Errorf("read %d: %v answered %v, want API_SERVER_ERROR", i, err, api.Lookup(got).V2Code)
		}
	}
}
