package store

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestFailingOpWritesNothing: an op that fails leaves no write behind,
// though it shares its transaction with ops that succeed before and after
// it; they are committed, and each op learns its own outcome.
func TestFailingOpWritesNothing(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "core.db"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(key string, fail error) *Op[*bolt.Tx] {
		return &Op[*bolt.Tx]{Fn: func(tx *bolt.Tx) error {
			if err := tx.Bucket(bucketMeta).Put([]byte(key), []byte("v")); err != nil {
				return err
			}
			return fail // after its write, as a failing check late in an op
		}}
	}
	refused := errors.New("refused")
	batch := []*Op[*bolt.Tx]{put("before", nil), put("failing", refused), put("after", nil), put("failing too", refused)}
	// The committer waits for ops; runBatch runs here as it would there.
	if err := (*batches)(s).RunBatch(batch, []Message{{Topic: "t", Key: "k", Value: []byte("m")}}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []error{nil, refused, nil, refused} {
		if !errors.Is(batch[i].Err, want) {
			t.Errorf("op %d: err %v, want %v", i, batch[i].Err, want)
		}
	}
	s.db.View(func(tx *bolt.Tx) error {
		for key, want := range map[string]bool{"before": true, "failing": false, "after": true, "failing too": false} {
			if got := tx.Bucket(bucketMeta).Get([]byte(key)) != nil; got != want {
				t.Errorf("%q written: %v, want %v", key, got, want)
			}
		}
		if n := tx.Bucket(bucketOutbox).Stats().KeyN; n != 1 {
			t.Errorf("outbox holds %d messages, want the batch's 1", n)
		}
		return nil
	})
}

// TestSlipRecordForms: a record reads back as written, and one written as
// JSON by a build of schema 3 still reads.
func TestSlipRecordForms(t *testing.T) {
	rec := SlipRecord{FirstAt: 1_763_600_000, Branches: []string{"br-main", "br-sub"}, Result: []byte(`{"transRef":"X"}`), Job: "6e8c"}
	for _, raw := range [][]byte{
		rec.encode(nil),
		[]byte(`{"firstAt":1763600000,"branches":["br-main","br-sub"],"result":{"transRef":"X"},"job":"6e8c"}`),
	} {
		got, err := decodeSlipRecord(raw)
		if err != nil || got.FirstAt != rec.FirstAt || len(got.Branches) != 2 || got.Branches[1] != "br-sub" ||
			string(got.Result) != string(rec.Result) || got.Job != rec.Job {
			t.Errorf("%q: %+v, %v", raw, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {9}, {slipRecordV1}, rec.encode(nil)[:5], {slipRecordV1, 2, 0, 200}} {
		if _, err := decodeSlipRecord(bad); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

// FuzzDecodeSlipRecord: no input panics or reads out of bounds, and an
// encoded record decodes to itself.
func FuzzDecodeSlipRecord(f *testing.F) {
	f.Add([]byte{slipRecordV1, 2, 0, 1, 2, 'b', 'r', '{', '}'})
	f.Fuzz(func(t *testing.T, raw []byte) {
		rec, err := decodeSlipRecord(raw)
		if err != nil || len(raw) == 0 || raw[0] == '{' {
			return
		}
		again, err := decodeSlipRecord(rec.encode(nil))
		if err != nil || again.FirstAt != rec.FirstAt || again.Job != rec.Job || len(again.Branches) != len(rec.Branches) ||
			string(again.Result) != string(rec.Result) {
			t.Fatalf("%q: %+v then %+v, %v", raw, rec, again, err)
		}
	})
}
