package config

import (
	"strings"
	"testing"

	"github.com/slipverify/slipverify/core/envflag"
)

// TestExampleEnvFile keeps deploy/env/dispatcher.env in step with the code:
// the same variables, with the same defaults.
func TestExampleEnvFile(t *testing.T) {
	drift, err := envflag.FileDrift("../../deploy/env/dispatcher.env", Vars())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range drift {
		t.Error(d)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	env := map[string]string{"SLIP_WEBHOOK_TIMEOUT": "0s", "SLIP_DISPATCHER_PER_HOST": "0", "SLIP_EGRESS_ALLOW_CIDRS": "10.0.0.0/33"}
	c, err := Load(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	for _, name := range []string{"SLIP_WEBHOOK_TIMEOUT", "SLIP_DISPATCHER_PER_HOST", "SLIP_EGRESS_ALLOW_CIDRS"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("%s not reported in %v", name, err)
		}
	}
}
