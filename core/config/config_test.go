package config

import (
	"strings"
	"testing"
)

func TestValidateReportsEveryProblem(t *testing.T) {
	env := map[string]string{"SLIP_BANK": "carrier-pigeon", "SLIP_CORE_ADDR": "nope", "SLIP_BANK_TIMEOUT": "0s"}
	c, err := Load(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	for _, v := range []string{"SLIP_CORE_ADDR", "SLIP_BANK:", "SLIP_BANK_TIMEOUT", "SLIP_EDGE_TOKEN", "SLIP_MASTER_KEY"} {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("error does not name %s: %v", v, err)
		}
	}
	env = map[string]string{"SLIP_BANK": "http", "SLIP_BANK_URL": "ftp://x", "SLIP_EDGE_TOKEN": strings.Repeat("t", 32), "SLIP_MASTER_KEY": strings.Repeat("ab", 32)}
	c, _ = Load(nil, func(k string) string { return env[k] })
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "SLIP_BANK_URL") {
		t.Errorf("ftp bank URL: %v", err)
	}
	env["SLIP_BANK_URL"] = "https://gateway.example"
	c, _ = Load([]string{"-addr", "127.0.0.1:9"}, func(k string) string { return env[k] })
	if err := c.Validate(); err != nil || c.Addr != "127.0.0.1:9" {
		t.Errorf("valid configuration refused (%v) or flag ignored (%s)", err, c.Addr)
	}
}
