package config

import (
	"strings"
	"testing"
)

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
