package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/pgtest"
	"github.com/slipverify/slipverify/core/quota"
	"github.com/slipverify/slipverify/core/store"
)

// TestBatchCounters: a batch's verifications charge the counters in
// memory, one after another; a write that is not a verification sees
// their charges and what it changes is what the verifications after it
// charge on; an op that fails leaves no charge and no row behind, whether
// or not its statements went out; and the commit writes what is left.
func TestBatchCounters(t *testing.T) {
	s, err := Open(context.Background(), pgtest.Start(t).Database(t), time.Now, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.pool.Exec(bg, "INSERT INTO counters (scope, period, used, total) VALUES ('b/x', 7, 3, 3), ('s/y', 7, 5, 5)"); err != nil {
		t.Fatal(err)
	}
	scopes := []string{"b/x", "s/y"}
	refused := errors.New("refused")
	// verify charges b/x and s/y once, after a statement of its own, and
	// reports what it read of b/x.
	verify := func(read *int64, fail bool, statement bool) *store.Op[*tx] {
		return &store.Op[*tx]{Locks: scopes, Fn: func(t *tx) error {
			t.fresh()
			if statement {
				if _, err := t.Exec(bg, "INSERT INTO commits (id) VALUES (gen_random_uuid())"); err != nil {
					return err
				}
			}
			b, err := t.counter("b/x")
			if err != nil {
				return err
			}
			sv, err := t.counter("s/y")
			if err != nil {
				return err
			}
			*read = b.Used
			t.charge("b/x", quota.Counter{Period: b.Period, Used: b.Used + 1, Total: b.Total + 1})
			t.charge("s/y", quota.Counter{Period: sv.Period, Used: sv.Used + 1, Total: sv.Total + 1})
			if fail {
				return refused
			}
			return nil
		}}
	}
	var r1, r2, r3, r4 int64
	var seen int64
	reset := &store.Op[*tx]{Fn: func(t *tx) error { // an admin's reset of the branch, not a verification
		if err := t.QueryRow(bg, "SELECT used FROM counters WHERE scope = 'b/x'").Scan(&seen); err != nil {
			return err
		}
		_, err := t.Exec(bg, "UPDATE counters SET used = 100 WHERE scope = 'b/x'")
		return err
	}}
	batch := []*store.Op[*tx]{
		verify(&r1, false, false),
		verify(&r2, true, true),  // refused after its statement went out
		verify(&r3, true, false), // refused before any
		reset,
		verify(&r4, false, true),
	}
	if err := (*batches)(s).RunBatch(batch, nil); err != nil {
		t.Fatal(err)
	}
	for i, o := range batch {
		if want := []error{nil, refused, refused, nil, nil}[i]; o.Err != want {
			t.Errorf("op %d: %v, want %v", i, o.Err, want)
		}
	}
	if r1 != 3 || r2 != 4 || r3 != 4 || seen != 4 || r4 != 100 {
		t.Errorf("the ops read b/x used %d, %d, %d, the reset %d, then %d; want 3, 4, 4, 4, 100", r1, r2, r3, seen, r4)
	}
	got := map[string]int64{}
	rows, _ := s.pool.Query(bg, "SELECT scope, used FROM counters")
	for rows.Next() {
		var scope string
		var used int64
		rows.Scan(&scope, &used)
		got[scope] = used
	}
	if rows.Err() != nil || got["b/x"] != 101 || got["s/y"] != 7 {
		t.Errorf("counters after the commit: %v (%v); want b/x 101, s/y 7", got, rows.Err())
	}
	var marks int
	s.pool.QueryRow(bg, "SELECT count(*) FROM commits").Scan(&marks)
	if marks != 2 { // the last verification's and the batch's own: the refused one's rolled back
		t.Errorf("%d rows in commits, want 2", marks)
	}
}

// TestBlindBatch: verifications whose snapshots came first share one
// transaction and one round trip of writes; when one of them is refused
// (its nonce claimed by another in the batch), the batch runs again in
// turn: the refused one alone writes nothing, the others are written
// once, in the same commit.
func TestBlindBatch(t *testing.T) {
	s, err := Open(context.Background(), pgtest.Start(t).Database(t), time.Now, store.Options{Gather: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.InsertMissing(store.Records{
		Services: []store.Service{{ID: "svc", State: store.StateActive, QuotaLimit: 100, CycleAnchorDay: 1}},
		Branches: []store.Branch{{ID: "br", ServiceID: "svc", Active: true, KeyDigest: store.Digest("k")}},
	}); err != nil {
		t.Fatal(err)
	}
	for _, round := range []struct {
		name   string
		nonces []string
		want   int // verifications written
	}{
		{"distinct nonces", []string{"a", "b", "c"}, 3},
		{"one nonce twice", []string{"d", "d", "e"}, 2},
	} {
		commits, _ := s.Commits()
		errs := make(chan error, len(round.nonces))
		for range round.nonces {
			s.Announce() // the committer waits for all: one batch
		}
		for i, n := range round.nonces {
			go func() {
				defer s.Retract()
				key := store.SlipKey("bank", "004", round.name+string(rune('A'+i)))
				if _, err := s.Snapshot("svc", "br", key); err != nil {
					errs <- err
					return
				}
				_, err := s.Apply("svc", "br", key, func(store.Snapshot) (store.Effect, error) {
					return store.Effect{Charge: true, Result: []byte(`{}`), Nonce: store.Nonce{Value: n, At: time.Now()}}, nil
				})
				errs <- err
			}()
		}
		ok := 0
		for range round.nonces {
			if err := <-errs; err == nil {
				ok++
			} else if e := (*api.Error)(nil); !errors.As(err, &e) || e.Code != api.DuplicateNonce {
				t.Errorf("%s: %v, want success or a duplicate nonce", round.name, err)
			}
		}
		after, _ := s.Commits()
		if ok != round.want || after-commits != 1 {
			t.Errorf("%s: %d written in %d commits, want %d in 1", round.name, ok, after-commits, round.want)
		}
	}
	q, err := s.Quota("svc", "br")
	var slips int
	s.pool.QueryRow(bg, "SELECT count(*) FROM slips").Scan(&slips)
	if err != nil || q.Usage.Branch.Used != 5 || slips != 5 {
		t.Errorf("branch used %d, %d slips (%v); want 5 and 5", q.Usage.Branch.Used, slips, err)
	}
}
