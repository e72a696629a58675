package config

import (
	"strings"
	"testing"
)

func TestValidateReportsEveryProblem(t *testing.T) {
	env := map[string]string{"SLIP_EDGE_ADDR": "x", "SLIP_TRUSTED_PROXIES": "10.0.0.0/8, nonsense", "SLIP_EDGE_MIN_FACTOR": "2",
		"SLIP_EDGE_NONCE_PER_CLIENT": "5000000"}
	c, err := Load(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	for _, v := range []string{"SLIP_EDGE_ADDR", "SLIP_EDGE_TOKEN", "SLIP_TRUSTED_PROXIES", "SLIP_EDGE_MIN_FACTOR", "SLIP_EDGE_NONCE_PER_CLIENT"} {
		if err == nil || !strings.Contains(err.Error(), v) {
			t.Errorf("error does not name %s: %v", v, err)
		}
	}
	env = map[string]string{"SLIP_EDGE_TOKEN": strings.Repeat("t", 32), "SLIP_TRUSTED_PROXIES": "10.0.0.0/8, 192.168.1.1"}
	c, _ = Load(nil, func(k string) string { return env[k] })
	if err := c.Validate(); err != nil {
		t.Errorf("valid configuration refused: %v", err)
	}
}

// TestRefusesDangerousValues: values that parse but would defeat a check
// are refused: trusting every peer as a proxy (any client could name its
// own address and pass IP allow lists), a NaN rate factor, and brokers
// that are no host:port (the edge would stop following record changes).
func TestRefusesDangerousValues(t *testing.T) {
	for _, kv := range [][2]string{
		{"SLIP_TRUSTED_PROXIES", "*"},
		{"SLIP_TRUSTED_PROXIES", "10.0.0.0/8, 0.0.0.0/0"},
		{"SLIP_TRUSTED_PROXIES", "::/0"},
		{"SLIP_TRUSTED_PROXIES", "::ffff:0:0/96"},
		{"SLIP_TRUSTED_PROXIES", "0.0.0.0/1, 128.0.0.0/1"},
		{"SLIP_TRUSTED_PROXIES", "::/1, 8000::/1"},
		{"SLIP_EDGE_MIN_FACTOR", "NaN"},
		{"SLIP_KAFKA_ADDR", ","},
		{"SLIP_KAFKA_ADDR", "kafka"},
	} {
		env := map[string]string{"SLIP_EDGE_TOKEN": strings.Repeat("t", 32), kv[0]: kv[1]}
		c, err := Load(nil, func(k string) string { return env[k] })
		if err != nil {
			continue // refused when read
		}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), kv[0]) {
			t.Errorf("%s=%s: %v", kv[0], kv[1], err)
		}
	}
}
