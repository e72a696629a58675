package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/slipverify/slipverify/core/lib/pgtest"
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
