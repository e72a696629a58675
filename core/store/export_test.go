package store

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

// TestExportHistory: the export gives every entry a listing shows, whether
// it has moved to its branch's runs or still waits in the outbox (some of
// a branch's in each), once each; two entries of one slip in one
// millisecond take two milliseconds; entries whose slip record expired
// are left out, as the listing leaves them out.
func TestExportHistory(t *testing.T) {
	clock := testnet.NewClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "core.db")
	s, err := OpenWith(path, clock.Now, Options{SlipAges: true})
	if err != nil {
		t.Fatal(err)
	}
	s.historyBatch = 8
	if _, err := s.InsertMissing(Records{
		Services: []Service{{ID: "svc", State: StateActive, QuotaLimit: 1000, CycleAnchorDay: 1}},
		Branches: []Branch{{ID: "br-a", ServiceID: "svc", Active: true, KeyDigest: Digest("a")},
			{ID: "br-b", ServiceID: "svc", Active: true, KeyDigest: Digest("b")}},
	}); err != nil {
		t.Fatal(err)
	}
	list := func(br, ref string) {
		t.Helper()
		if _, err := s.Apply("svc", br, SlipKey("bank", "004", ref), func(Snapshot) (Effect, error) {
			return Effect{Charge: true, Result: []byte(`{}`), Listed: true, History: Verification{Amount: 1}}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	list("br-a", "OLD") // expires below
	clock.Advance(time.Hour)
	for i := range 13 { // moves to the runs at 8 sequence numbers, the rest waits
		list([]string{"br-a", "br-b"}[i%3/2], fmt.Sprintf("REF%02d", i))
		if i != 4 {
			clock.Advance(time.Millisecond)
		}
	}
	list("br-b", "DUP")
	list("br-b", "DUP") // the same slip by the same branch in the same millisecond
	if n, err := s.ExpireSlips(clock.Now().Add(-30*time.Minute), 10); err != nil || n != 1 {
		t.Fatalf("ExpireSlips = %d, %v", n, err)
	}
	listed, _, err := s.History(HistoryQuery{ServiceID: "svc", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, v := range listed {
		want = append(want, fmt.Sprintf("%s %s %d", v.BranchID, v.SlipKey, v.At.UnixMilli()))
	}
	slices.Sort(want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	e, err := OpenExport(path, clock.Now(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var got []string
	for range 2 { // as a copy reads it: once to count, once to copy
		got = got[:0]
		if err := e.Each(KindHistory, func(rec any) error {
			v := rec.(Verification)
			got = append(got, fmt.Sprintf("%s %s %d", v.BranchID, v.SlipKey, v.At.UnixMilli()))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(got)
	// The listing shows the two of one millisecond at it; the export moves
	// the second to the next.
	dup := fmt.Sprintf("br-b bank/004/DUP %d", clock.Now().UnixMilli())
	if i := slices.Index(want, dup); i < 0 || want[i+1] != dup {
		t.Fatalf("the listing, sorted:\n%s\nwant %s twice", strings.Join(want, "\n"), dup)
	} else {
		want[i+1] = fmt.Sprintf("br-b bank/004/DUP %d", clock.Now().UnixMilli()+1)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("exported history:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if e.DeadEntries != 1 {
		t.Errorf("%d entries left out as dead, want the expired slip's", e.DeadEntries)
	}
	if len(want) != 15 {
		t.Errorf("%d entries, want 15", len(want))
	}
}
