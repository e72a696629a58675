package envflag

import (
	"os"
	"testing"
)

// TestLoadEmptyValue: a variable set to "" keeps its default unless its
// Var has KeepEmpty, in which case it is the value "" (SLIP_SEED= loads no
// seed); an unset one gets the default either way.
func TestLoadEmptyValue(t *testing.T) {
	load := func(getenv func(string) string) (keep, plain string) {
		t.Helper()
		vars := []Var{
			{Env: "SLIP_TEST_KEEP", Flag: "keep", Default: "default.json", Dst: &keep, KeepEmpty: true},
			Def("SLIP_TEST_PLAIN", "plain", "127.0.0.1:1", "", &plain),
		}
		if err := Load("test", vars, new(Common), nil, getenv); err != nil {
			t.Fatal(err)
		}
		return keep, plain
	}
	f := func(name string, getenv func(string) string, wantKeep, wantPlain string) {
		t.Helper()
		if keep, plain := load(getenv); keep != wantKeep || plain != wantPlain {
			t.Errorf("%s: keep=%q plain=%q, want %q and %q", name, keep, plain, wantKeep, wantPlain)
		}
	}

	t.Setenv("SLIP_TEST_KEEP", "")
	t.Setenv("SLIP_TEST_PLAIN", "")
	f("both set empty, os.Getenv", os.Getenv, "", "127.0.0.1:1")

	t.Setenv("SLIP_TEST_KEEP", "other.json")
	t.Setenv("SLIP_TEST_PLAIN", "127.0.0.1:2")
	f("both set, os.Getenv", os.Getenv, "other.json", "127.0.0.1:2")

	os.Unsetenv("SLIP_TEST_KEEP") // t.Setenv restores it after the test
	os.Unsetenv("SLIP_TEST_PLAIN")
	f("both unset, os.Getenv", os.Getenv, "default.json", "127.0.0.1:1")

	// A getenv that is not os.Getenv cannot say a variable is set: its ""
	// is unset.
	env := map[string]string{"SLIP_TEST_KEEP": "", "SLIP_TEST_PLAIN": ""}
	f("map getenv", func(k string) string { return env[k] }, "default.json", "127.0.0.1:1")
}
