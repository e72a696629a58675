package store_test

import (
	"errors"
	"fmt"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/slipverify/slipverify/core/store"
)

func twoServices() store.Records {
	r := store.Records{
		Services: []store.Service{{ID: "svc-a", CycleAnchorDay: 1}, {ID: "svc-b", CycleAnchorDay: 1}},
		Branches: []store.Branch{
			{ID: "a-1", ServiceID: "svc-a", KeyDigest: store.Digest("ka")},
			{ID: "b-1", ServiceID: "svc-b", KeyDigest: store.Digest("kb")},
		},
	}
	for i := range 3 {
		r.Accounts = append(r.Accounts, store.BankAccount{ID: fmt.Sprintf("acc-a%d", i), ServiceID: "svc-a", BankCode: "004",
			BankNumber: fmt.Sprint(1000 + i), Active: true})
	}
	r.Accounts = append(r.Accounts, store.BankAccount{ID: "acc-b0", ServiceID: "svc-b", BankCode: "004", BankNumber: "1000", Active: true})
	return r
}

func ids(t *testing.T, st *store.Store, service string) string {
	t.Helper()
	accounts, err := st.Accounts(service, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range accounts {
		out = append(out, a.ID)
	}
	return fmt.Sprint(out)
}

// TestAccountsByService: each service sees its own accounts, seeded or
// created, also in a store written before accounts were indexed by
// service (the index is built when such a store opens).
func TestAccountsByService(t *testing.T) {
	c := newClock()
	st, path := open(t, c, 0)
	if _, err := st.InsertMissing(twoServices()); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateAccount(store.BankAccount{ID: "acc-b1", ServiceID: "svc-b", BankCode: "014", BankNumber: "2000", Active: true}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"svc-a": "[acc-a0 acc-a1 acc-a2]", "svc-b": "[acc-b0 acc-b1]"}
	for svc, w := range want {
		if got := ids(t, st, svc); got != w {
			t.Errorf("%s: %s, want %s", svc, got, w)
		}
	}
	// The same file without its index, as an older build left it.
	st.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("accounts-by-service")) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	st, err = store.Open(path, c.now)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for svc, w := range want {
		if got := ids(t, st, svc); got != w {
			t.Errorf("reopened without the index: %s: %s, want %s", svc, got, w)
		}
	}
}

// TestAccountBounds: a service holds at most MaxAccountsPerService
// accounts, an account lists at most MaxAccountBranches branches at
// creation, and a branch listed twice is linked once.
func TestAccountBounds(t *testing.T) {
	st, _ := open(t, newClock(), 0)
	r := twoServices()
	for i := 1; i < store.MaxAccountsPerService; i++ { // svc-b has acc-b0 already
		r.Accounts = append(r.Accounts, store.BankAccount{ID: fmt.Sprintf("acc-x%04d", i), ServiceID: "svc-b", BankCode: "006",
			BankNumber: fmt.Sprint(i), Active: true})
	}
	if _, err := st.InsertMissing(r); err != nil {
		t.Fatal(err)
	}
	one := func(svc, id string, branches ...string) error {
		return st.CreateAccount(store.BankAccount{ID: id, ServiceID: svc, BankCode: "014", BankNumber: id, Active: true, Branches: branches})
	}
	if err := one("svc-b", "acc-over"); !errors.Is(err, store.ErrRule) {
		t.Fatalf("account %d of a service: %v, want a refusal", store.MaxAccountsPerService+1, err)
	}
	many := make([]string, store.MaxAccountBranches+1)
	for i := range many {
		many[i] = "a-1"
	}
	if err := one("svc-a", "acc-many", many...); !errors.Is(err, store.ErrRule) {
		t.Fatalf("%d branches: %v, want a refusal", len(many), err)
	}
	if err := one("svc-a", "acc-twice", "a-1", "a-1"); err != nil {
		t.Fatal(err)
	}
	accounts, _ := st.Accounts("svc-a", "a-1")
	if len(accounts) != 1 || fmt.Sprint(accounts[0].Branches) != "[a-1]" {
		t.Fatalf("a branch listed twice: %+v", accounts)
	}
}
