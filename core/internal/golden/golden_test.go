package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// recorder is a testing.TB that records a failure instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatal(args ...any)                 { r.failed = fmt.Sprint(args...) }
func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

type vector struct {
	Name    string `json:"name"`
	Payload string `json:"payload"`
}

func TestVectors(t *testing.T) {
	const two = `{"comment":"generated","promptparse":"1.6.0","vectors":[{"name":"a","payload":"p1"},{"name":"b","payload":"p2","extra":1}]}`
	for _, c := range []struct {
		file string // the file's text; "" for no file
		min  int
		want []vector
		fail string // a fragment of the failure, "" for none
	}{
		{two, 2, []vector{{"a", "p1"}, {"b", "p2"}}, ""},
		{two, 0, []vector{{"a", "p1"}, {"b", "p2"}}, ""},
		{two, 3, nil, "has 2 vectors; regenerate it"},
		{`{"vectors":[]}`, 1, nil, "has 0 vectors; regenerate it"},
		{`[{"name":"a"}]`, 0, nil, "vectors.json: json"},
		{`{"vectors":[{"name":"a"`, 0, nil, "vectors.json: unexpected end"},
		{"", 0, nil, "no such file"},
	} {
		path := filepath.Join(t.TempDir(), "vectors.json")
		if c.file != "" {
			if err := os.WriteFile(path, []byte(c.file), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		r := &recorder{}
		got := Vectors[vector](r, path, c.min)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s, min %d: %v, want %v", c.file, c.min, got, c.want)
		}
		if (c.fail == "" && r.failed != "") || !strings.Contains(r.failed, c.fail) {
			t.Errorf("%s, min %d: failure %q, want one with %q", c.file, c.min, r.failed, c.fail)
		}
	}
}
