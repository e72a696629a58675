package config

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	c, err := Load("usage", nil, func(string) string { return "" })
	if err != nil || c.Validate() != nil {
		t.Fatalf("defaults: %v %v", err, c.Validate())
	}
	env := map[string]string{"SLIP_KAFKA_ADDR": "a:1,nope", "SLIP_CLICKHOUSE_DATABASE": "slip; DROP", "SLIP_USAGE_BATCH": "0",
		"SLIP_USAGE_FLUSH": "0s", "SLIP_EDGE_TOKEN": "short", "SLIP_USAGE_RECONCILE_INTERVAL": "-1m", "SLIP_USAGE_RECONCILE_SERVICES": "0",
		"SLIP_USAGE_GROUP": "usage", "SLIP_USAGE_AUDIT_GROUP": "usage"}
	c, err = Load("usage", nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	for _, v := range []string{"SLIP_KAFKA_ADDR", "SLIP_CLICKHOUSE_DATABASE", "SLIP_USAGE_BATCH", "SLIP_USAGE_FLUSH", "SLIP_EDGE_TOKEN", "SLIP_USAGE_AUDIT_GROUP",
		"SLIP_USAGE_RECONCILE_INTERVAL", "SLIP_USAGE_RECONCILE_SERVICES"} {
		if err == nil || !strings.Contains(err.Error(), v) {
			t.Errorf("error does not name %s: %v", v, err)
		}
	}
	if _, err := Load("usage", []string{"-batch", "x"}, func(string) string { return "" }); err == nil {
		t.Error("a non-number batch size was accepted")
	}
}
