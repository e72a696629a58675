package store_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/store"
	"github.com/slipverify/slipverify/core/store/storetest"
)

// boltFile is a place of the store suite: a bbolt file.
type boltFile string

func (f boltFile) Open(now func() time.Time, o store.Options) (store.Store, error) {
	return store.OpenWith(string(f), now, o)
}

// TestSuite runs the store suite against bbolt.
func TestSuite(t *testing.T) {
	storetest.Run(t, storetest.Backend{New: func(t *testing.T) storetest.Place {
		return boltFile(filepath.Join(t.TempDir(), "core.db"))
	}})
}

// clock is a settable test clock.
type clock = testnet.Clock

func newClock() *clock { return testnet.NewClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)) }

// open opens a fresh store in the test's directory, closed when the test
// ends unless the test closes it first.
func open(t *testing.T, c *clock, limit int64) (*store.Bolt, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "core.db")
	st, err := store.OpenWith(path, c.Now, store.Options{OutboxLimit: limit, SlipAges: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, path
}

// reopenWithout closes st, deletes buckets from its file, as a build from
// before them left it, and opens the file again.
func reopenWithout(t *testing.T, st *store.Bolt, path string, c *clock, buckets ...string) *store.Bolt {
	t.Helper()
	st.Close()
	editFile(t, path, func(tx *bolt.Tx) error { return dropBuckets(tx, buckets...) })
	st, err := store.Open(path, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// editFile changes a closed store's file directly, as another build would.
func editFile(t *testing.T, path string, edit func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(db.Update(edit), db.Close()); err != nil {
		t.Fatal(err)
	}
}

func dropBuckets(tx *bolt.Tx, buckets ...string) error {
	var errs []error
	for _, b := range buckets {
		errs = append(errs, tx.DeleteBucket([]byte(b)))
	}
	return errors.Join(errs...)
}

// TestSlipAgesOff: a store opened without the index by age (no retention)
// refuses to expire; opened with it again, it builds the index from the
// records, those verified meanwhile too, and expires them.
func TestSlipAgesOff(t *testing.T) {
	c := newClock()
	st, path := open(t, c, 100)
	insertShop(t, st, 100)
	applyV2(t, st, "BEFORE", nil) // indexed
	reopen := func(ages bool) *store.Bolt {
		t.Helper()
		st.Close()
		st, err := store.OpenWith(path, c.Now, store.Options{SlipAges: ages})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	st = reopen(false)
	applyV2(t, st, "WITHOUT", nil) // not indexed
	if n, err := st.ExpireSlips(c.Now().Add(time.Hour), 100); err == nil || n != 0 {
		t.Fatalf("ExpireSlips without the index = %d, %v; want an error", n, err)
	}
	c.Advance(2 * time.Hour)
	st = reopen(true)
	applyV2(t, st, "AFTER", nil)
	if n, err := st.ExpireSlips(c.Now().Add(-time.Hour), 100); err != nil || n != 2 {
		t.Fatalf("ExpireSlips after the index was rebuilt = %d, %v; want BEFORE and WITHOUT", n, err)
	}
	for ref, dup := range map[string]bool{"BEFORE": false, "WITHOUT": false, "AFTER": true} {
		if got := applyV2(t, st, ref, nil); (got.Seen != nil) != dup {
			t.Errorf("%s verified again: %+v, want a duplicate: %v", ref, got, dup)
		}
	}
}

// applied is what applyV2 did: the slip's record before it, and whether it
// charged.
type applied struct {
	Seen    *store.SlipRecord
	Charged bool
}

// applyV2 applies a v2 verification of slip ref by branch br of svc as the
// verification rule decides it (core/verify.Decide): the branch's own
// duplicate free, anything else charged.
// insertShop inserts service "svc" with quota limit quota and its branch
// "br", which applyV2 verifies for.
func insertShop(t *testing.T, st *store.Bolt, quota int64) {
	t.Helper()
	if _, err := st.InsertMissing(store.Records{
		Services: []store.Service{{ID: "svc", State: store.StateActive, QuotaLimit: quota, CycleAnchorDay: 1}},
		Branches: []store.Branch{{ID: "br", ServiceID: "svc", Active: true, KeyDigest: store.Digest("k")}},
	}); err != nil {
		t.Fatal(err)
	}
}

func applyV2(t *testing.T, st *store.Bolt, ref string, usage func(bool, time.Time) store.Message) applied {
	t.Helper()
	var out applied
	snap, err := st.Apply("svc", "br", store.SlipKey("bank", "004", ref), func(s store.Snapshot) (store.Effect, error) {
		out.Charged = s.Slip == nil || !s.Slip.VerifiedBy("br")
		return store.Effect{Charge: out.Charged, Result: []byte(`{}`), Usage: usage}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out.Seen = snap.Slip
	return out
}

// TestUpgrades: a file written by a build before an index or a count
// opens with it built: the branches and accounts by service, each
// branch's unfinished jobs, the slip records by age.
func TestUpgrades(t *testing.T) {
	c := newClock()
	st, path := open(t, c, 0)
	insertShop(t, st, 100)
	if err := st.CreateBranch(store.Branch{ID: "br2", ServiceID: "svc", KeyDigest: store.Digest("k2")}, store.Change{}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateAccount(&store.BankAccount{ID: "acc", ServiceID: "svc", BankCode: "004", BankNumber: "1", Active: true}, store.Change{}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateJobs([]store.Job{{ID: "j1", ServiceID: "svc", BranchID: "br", Created: c.Now().UnixMilli()}}, nil, 1, store.Nonce{}); err != nil {
		t.Fatal(err)
	}
	applyV2(t, st, "OLD", nil)
	st.Close()
	editFile(t, path, func(tx *bolt.Tx) error {
		return errors.Join(dropBuckets(tx, "accounts-by-service", "branches-by-service", "jobs-unfinished", "slips-by-age"),
			tx.Bucket([]byte("meta")).Delete([]byte("slips-indexed")))
	})
	st, err := store.Open(path, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if b, err := st.Branches("svc"); err != nil || len(b) != 2 {
		t.Errorf("branches by service: %+v, %v", b, err)
	}
	if a, err := st.Accounts("svc", ""); err != nil || len(a) != 1 {
		t.Errorf("accounts by service: %+v, %v", a, err)
	}
	if err := st.CreateJobs([]store.Job{{ID: "j2", ServiceID: "svc", BranchID: "br"}}, nil, 1, store.Nonce{}); !errors.Is(err, store.ErrTooManyJobs) {
		t.Errorf("the branch's unfinished job not counted: %v", err)
	}
	c.Advance(2 * time.Hour)
	if n, err := st.ExpireSlips(c.Now().Add(-time.Hour), 100); err != nil || n != 1 {
		t.Errorf("ExpireSlips after the index was built = %d, %v; want 1", n, err)
	}
}

// TestSchemaVersions: a file of an older layout opens and is upgraded (the
// counts of unfinished jobs built); a file of a newer one is refused, as a
// build of 1 refuses this build's files, so no build keeps a file it does
// not know how to keep up to date.
func TestSchemaVersions(t *testing.T) {
	c := newClock()
	st, path := open(t, c, 0)
	if err := st.CreateJobs([]store.Job{{ID: "j1", ServiceID: "svc", BranchID: "br", Status: "queued"}}, nil, 1, store.Nonce{}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	setSchema := func(v string, drop ...string) {
		t.Helper()
		editFile(t, path, func(tx *bolt.Tx) error {
			return errors.Join(dropBuckets(tx, drop...), tx.Bucket([]byte("meta")).Put([]byte("schema"), []byte(v)))
		})
	}
	setSchema("1", "jobs-unfinished")
	st, err := store.Open(path, c.Now)
	if err != nil {
		t.Fatalf("a file of layout 1: %v", err)
	}
	if err := st.CreateJobs([]store.Job{{ID: "j2", ServiceID: "svc", BranchID: "br", Status: "queued"}}, nil, 1, store.Nonce{}); !errors.Is(err, store.ErrTooManyJobs) {
		t.Errorf("upgraded from 1, the branch's unfinished job not counted: %v", err)
	}
	st.Close()
	setSchema("6")
	if st, err := store.Open(path, c.Now); err == nil {
		st.Close()
		t.Fatal("a file of layout 6 opened")
	} else if !strings.Contains(err.Error(), "schema version 6") {
		t.Errorf("refusing layout 6: %v", err)
	}
}
