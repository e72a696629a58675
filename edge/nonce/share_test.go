package nonce

import (
	"testing"
	"time"
)

// journal records what a Store tells it.
type journal struct{ got []recorded }

type recorded struct {
	service, client string
	nonce           [16]byte
	ts              int64
}

func (j *journal) Record(service, client string, nonce [16]byte, ts int64) {
	j.got = append(j.got, recorded{service, client, nonce, ts})
}

// TestOpenLiftsBeforeStart: once the nonces of the past window were added
// (another edge's, or this edge's before a restart), Open lifts the
// before-start rule: the spec's whole window is accepted, and a nonce added
// is refused as a duplicate whatever its timestamp, a future one included.
func TestOpenLiftsBeforeStart(t *testing.T) {
	c := newClock()
	s := New(Config{Now: c.Now})
	early := t0.Add(-4 * time.Minute)
	if err := s.useAlone("branch-a", n(1), early); err != ErrBeforeStart {
		t.Fatalf("before Open, stamped 4 minutes before the start: %v", err)
	}
	// Replayed from the topic: one stamped before the start, one ahead.
	if err := s.Add("branch-a", "branch-a", n(2), t0.Add(-3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.Add("branch-a", "branch-a", n(3), t0.Add(4*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.Add("branch-a", "branch-a", n(3), t0.Add(4*time.Minute)); err != ErrDuplicate {
		t.Fatalf("added twice: %v", err)
	}
	if err := s.Add("branch-a", "branch-a", n(4), t0.Add(-6*time.Minute)); err != ErrOutsideWindow {
		t.Fatalf("added past its window: %v", err)
	}
	if s.Opened() {
		t.Fatal("opened before Open")
	}
	s.Open()
	if !s.Opened() {
		t.Fatal("not opened after Open")
	}
	for _, tc := range []struct {
		nonce uint64
		ts    time.Time
		want  error
	}{
		{1, early, nil}, // the whole window, from the first second
		{1, early, ErrDuplicate},
		{2, t0, ErrDuplicate},                      // added, replayed with another timestamp
		{3, t0.Add(4 * time.Minute), ErrDuplicate}, // added, stamped in the future
		{5, t0.Add(-5*time.Minute - time.Second), ErrOutsideWindow},
	} {
		if err := s.useAlone("branch-a", n(tc.nonce), tc.ts); err != tc.want {
			t.Errorf("nonce %d at %v: %v, want %v", tc.nonce, tc.ts.Sub(t0), err, tc.want)
		}
	}
}

// TestAddCountsAgainstBudgets: nonces from other edges take room in the
// same per-client bound as the store's own.
func TestAddCountsAgainstBudgets(t *testing.T) {
	c := newClock()
	s := newStore(Config{Now: c.Now, MaxEntries: 10, MaxPerClient: 3, MaxPerService: 5})
	for i := range uint64(3) {
		if err := s.Add("svc", "a", n(i), t0); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Add("svc", "a", n(9), t0); err != ErrClientFull {
		t.Fatalf("added over the client's bound: %v", err)
	}
	if err := s.Use("svc", "a", n(10), t0); err != ErrClientFull {
		t.Fatalf("used over the client's bound: %v", err)
	}
}

// TestJournalGetsAccepted: the journal hears of every nonce Use accepts,
// once, with the request's second, and of no nonce refused or added.
func TestJournalGetsAccepted(t *testing.T) {
	c := newClock()
	j := &journal{}
	s := newStore(Config{Now: c.Now, Journal: j})
	ts := t0.Add(1500 * time.Millisecond)
	s.Use("svc", "a", n(1), ts)
	s.Use("svc", "a", n(1), ts)                // duplicate
	s.Use("svc", "a", n(2), t0.Add(time.Hour)) // outside
	s.Add("svc", "a", n(3), t0)                // from elsewhere
	if len(j.got) != 1 || j.got[0] != (recorded{"svc", "a", n(1), t0.Unix() + 1}) {
		t.Fatalf("journal got %+v", j.got)
	}
}

// countJournal counts what it is told, allocating nothing.
type countJournal struct{ n int }

func (j *countJournal) Record(string, string, [16]byte, int64) { j.n++ }

// TestUseWithJournalAllocs: telling the journal adds no allocation to Use.
func TestUseWithJournalAllocs(t *testing.T) {
	c := newClock()
	j := &countJournal{}
	s := newStore(Config{Now: c.Now, Journal: j})
	service, client := "svc", "branch"
	next := uint64(0)
	for range 100_000 { // tables grown
		next++
		s.Use(service, client, n(next), c.Now())
	}
	if allocs := testing.AllocsPerRun(1000, func() {
		next++
		if err := s.Use(service, client, n(next), c.Now()); err != nil {
			t.Fatal(err)
		}
	}); allocs > 0.01 {
		t.Errorf("Use with a journal allocates %v times", allocs)
	}
	if j.n != int(next) {
		t.Errorf("journal told %d of %d", j.n, next)
	}
}
