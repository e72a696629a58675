package tenant

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/slipverify/slipverify/core/lib/seedfile"
)

var update = flag.Bool("update", false, "rewrite bench/seed.json")

// TestCommittedSeed checks that bench/seed.json is what DefaultOptions
// makes, that core's seed loader accepts it, and that the generator reads
// every branch back with its secrets.
func TestCommittedSeed(t *testing.T) {
	want, err := Generate(DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "seed.json")
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("bench/seed.json differs from Generate(DefaultOptions) (%v); run go test ./bench/tenant -update", err)
	}
	if _, err := seedfile.Read(path); err != nil {
		t.Fatalf("core refuses the bench seed: %v", err)
	}
	s, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions
	if len(s.Branches) != o.Services*o.Branches+o.OverloadBranches || len(s.Of("")) != o.Services*o.Branches || len(s.Of(OverloadService)) != o.OverloadBranches {
		t.Fatalf("read %d branches (%d bench, %d overload)", len(s.Branches), len(s.Of("")), len(s.Of(OverloadService)))
	}
	for _, b := range s.Branches {
		if b.Secret == "" || b.WebhookSecret == "" || b.Key == "" {
			t.Fatalf("branch %s lacks a key or secret: %+v", b.ID, b)
		}
	}
}

// TestGenerateOptions checks that other sizes load in core too, and that
// bad options and files are refused with a reason.
func TestGenerateOptions(t *testing.T) {
	raw, err := Generate(Options{Services: 1, Branches: 1, Rate: 1, Quota: 1, OverloadBranches: 1, OverloadRate: 1, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "seed.json")
	os.WriteFile(path, raw, 0o600)
	if _, err := seedfile.Read(path); err != nil {
		t.Fatalf("core refuses a small bench seed: %v", err)
	}
	if _, err := Generate(Options{}); err == nil {
		t.Error("zero options were accepted")
	}
	if _, err := Read(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("a missing file was read")
	}
	os.WriteFile(path, []byte(`{"services":[]}`), 0o600)
	if _, err := Read(path); err == nil {
		t.Error("a seed without branches was accepted")
	}
	// The dev seed works too: the generator can drive make run's own stack.
	s, err := Read(filepath.Join("..", "..", "deploy", "dev", "seed.json"))
	if err != nil || len(s.Branches) != 2 {
		t.Errorf("dev seed: %v, %d branches (want the demo service's 2)", err, len(s.Branches))
	}
}
