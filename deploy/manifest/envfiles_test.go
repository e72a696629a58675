package manifest

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipverify/slipverify/core/lib/envflag"
	"github.com/slipverify/slipverify/deploy/broker"
	"github.com/slipverify/slipverify/deploy/clickhouse"
)

// TestEnvFiles keeps each program's example env file, deploy/env/NAME.env,
// in step with the code: the same variables, with the same defaults, and
// no file without its program.
func TestEnvFiles(t *testing.T) {
	vars := map[string][]envflag.Var{"broker": broker.Vars(), "clickhouse": clickhouse.Vars()}
	for name, p := range programs {
		vars[name] = p.vars
	}
	files, err := filepath.Glob(filepath.Join(root, "deploy", "env", "*.env"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(vars) {
		t.Errorf("deploy/env holds %d files, want one per program (%d): %v", len(files), len(vars), files)
	}
	for name, v := range vars {
		drift, err := envflag.FileDrift(filepath.Join(root, "deploy", "env", name+".env"), v)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for _, d := range drift {
			t.Errorf("%s.env: %s", name, strings.TrimSpace(d))
		}
	}
}
