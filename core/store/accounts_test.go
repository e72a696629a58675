package store_test

import (
	"errors"
	"fmt"
	"testing"

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

// openTwoServices opens a fresh store with twoServices and a second branch
// of svc-a, a-2, and returns them.
func openTwoServices(t *testing.T, c *clock) (*store.Store, string, store.Records) {
	t.Helper()
	st, path := open(t, c, 0)
	r := twoServices()
	r.Branches = append(r.Branches, store.Branch{ID: "a-2", ServiceID: "svc-a", KeyDigest: store.Digest("ka2")})
	if _, err := st.InsertMissing(r); err != nil {
		t.Fatal(err)
	}
	return st, path, r
}

// listings returns each service's accounts and branches, by id.
func listings(t *testing.T, st *store.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, svc := range []string{"svc-a", "svc-b"} {
		accounts, err := st.Accounts(svc, "")
		if err != nil {
			t.Fatal(err)
		}
		branches, err := st.Branches(svc)
		if err != nil {
			t.Fatal(err)
		}
		var a, b []string
		for _, x := range accounts {
			a = append(a, x.ID)
		}
		for _, x := range branches {
			b = append(b, x.ID)
		}
		out[svc] = fmt.Sprintf("accounts %v branches %v", a, b)
	}
	return out
}

// TestIndexesByService: each service lists its own accounts and branches,
// seeded or created, and no deleted branch; also in a store written before
// accounts and branches were indexed by service (the indexes are built
// when such a store opens).
func TestIndexesByService(t *testing.T) {
	c := newClock()
	st, path, _ := openTwoServices(t, c)
	if err := st.CreateAccount(&store.BankAccount{ID: "acc-b1", ServiceID: "svc-b", BankCode: "014", BankNumber: "2000", Active: true}, store.Change{}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateBranch(store.Branch{ID: "b-0", ServiceID: "svc-b", KeyDigest: store.Digest("kb0")}, store.Change{}); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteBranch("svc-a", "a-2", store.Change{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"svc-a": "accounts [acc-a0 acc-a1 acc-a2] branches [a-1]",
		"svc-b": "accounts [acc-b0 acc-b1] branches [b-0 b-1]",
	}
	if got := listings(t, st); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("listings %v, want %v", got, want)
	}
	// The same file without its indexes, as an older build left it.
	st = reopenWithout(t, st, path, c, "accounts-by-service", "branches-by-service")
	if got := listings(t, st); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("reopened without the indexes: %v, want %v", got, want)
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
		return st.CreateAccount(&store.BankAccount{ID: id, ServiceID: svc, BankCode: "014", BankNumber: id, Active: true, Branches: branches}, store.Change{})
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
	twice := store.BankAccount{ID: "acc-twice", ServiceID: "svc-a", BankCode: "014", BankNumber: "acc-twice", Active: true, Branches: []string{"a-1", "a-1"}}
	if err := st.CreateAccount(&twice, store.Change{}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(twice.Branches) != "[a-1]" {
		t.Errorf("the account as created lists %v, want [a-1] as stored", twice.Branches)
	}
	accounts, _ := st.Accounts("svc-a", "a-1")
	if len(accounts) != 1 || fmt.Sprint(accounts[0].Branches) != "[a-1]" {
		t.Fatalf("a branch listed twice: %+v", accounts)
	}
}

// TestDeletedBranchStaysDeleted: the seed, loaded at every start, does not
// bring back a branch deleted at run time, nor its key: deleting a branch is
// how an operator revokes a leaked key.
func TestDeletedBranchStaysDeleted(t *testing.T) {
	c := newClock()
	st, path, r := openTwoServices(t, c)
	if err := st.DeleteBranch("svc-a", "a-2", store.Change{}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err := store.Open(path, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if n, err := st.InsertMissing(r); err != nil || n != 0 {
		t.Fatalf("the seed again after a restart: inserted %d (%v), want 0", n, err)
	}
	if _, br, _, _, err := st.BranchByKey(store.Digest("ka2")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the deleted branch's key finds branch %q (%v)", br.ID, err)
	}
	if got := listings(t, st)["svc-a"]; got != "accounts [acc-a0 acc-a1 acc-a2] branches [a-1]" {
		t.Errorf("svc-a: %s", got)
	}
}
