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

// TestCoreAddrs: SLIP_CORE_ADDR takes one core or several, as addresses or
// names, and refuses an entry that is no host:port, an empty list and more
// cores than an edge balances over.
func TestCoreAddrs(t *testing.T) {
	f := func(addr string, want []string) {
		t.Helper()
		env := map[string]string{"SLIP_EDGE_TOKEN": strings.Repeat("t", 32), "SLIP_CORE_ADDR": addr}
		c, err := Load(nil, func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		err = c.Validate()
		if want == nil {
			if err == nil || !strings.Contains(err.Error(), "SLIP_CORE_ADDR") {
				t.Errorf("%q: %v, want SLIP_CORE_ADDR refused", addr, err)
			}
			return
		}
		if err != nil {
			t.Errorf("%q refused: %v", addr, err)
		}
		if got := c.CoreAddrs(); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%q: cores %q, want %q", addr, got, want)
		}
	}
	f("127.0.0.1:8081", []string{"127.0.0.1:8081"})
	f(" 10.0.0.1:8081, core-pods.slip.svc:8081 ,[::1]:8081", []string{"10.0.0.1:8081", "core-pods.slip.svc:8081", "[::1]:8081"})
	f("10.0.0.1:8081,10.0.0.2", nil)
	f(" , ", nil)
	f(strings.Repeat("10.0.0.1:8081,", MaxCores+1), nil)
}
