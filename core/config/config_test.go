package config

import (
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/slipverify/slipverify/core/lib/testnet"
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

// valid is an environment core accepts.
func valid() map[string]string {
	return map[string]string{"SLIP_EDGE_TOKEN": strings.Repeat("t", 32), "SLIP_MASTER_KEY": strings.Repeat("ab", 32)}
}

// TestSeedNone: SLIP_SEED=none loads no seed; unset or empty, the dev seed.
func TestSeedNone(t *testing.T) {
	for v, want := range map[string]string{"none": "", "": "deploy/dev/seed.json", "bench/seed.json": "bench/seed.json"} {
		c, err := Load(nil, func(k string) string { return map[string]string{"SLIP_SEED": v}[k] })
		if err != nil || c.Seed != want {
			t.Errorf("SLIP_SEED=%s gives seed %q (%v), want %q", v, c.Seed, err, want)
		}
	}
}

// TestValidateRetention: a retention shorter than a job's course (the
// retry schedules, its attempts and the margin) is refused, naming what it
// must cover; the defaults and a retention just long enough pass.
func TestValidateRetention(t *testing.T) {
	f := func(env map[string]string, wantErr bool) {
		t.Helper()
		err := validate(t, env)
		if got := err != nil && strings.Contains(err.Error(), "SLIP_JOB_RETENTION"); got != wantErr {
			t.Errorf("%v: Validate() = %v, want a SLIP_JOB_RETENTION error: %v", env, err, wantErr)
		}
		if wantErr && err != nil && !strings.Contains(err.Error(), "JOB_NOT_FOUND") {
			t.Errorf("the message does not say what happens: %v", err)
		}
	}
	env := valid()
	f(env, false) // 168h
	env["SLIP_JOB_RETENTION"] = "10m"
	f(env, true) // the default schedules alone take 10m10s
	// 7m30s + 2m40s of waits, 5 attempts of 8s + 10s, and the hour.
	env["SLIP_JOB_RETENTION"] = "1h11m40s"
	f(env, false)
	env["SLIP_JOB_RETENTION"] = "1h11m39s"
	f(env, true)
	// Longer retry schedules need a longer retention.
	env["SLIP_JOB_RETENTION"] = "2h"
	f(env, false)
	env["SLIP_VERIFY_RETRY_SCHEDULE"] = "30m,30m"
	f(env, true)
	env["SLIP_VERIFY_RETRY_SCHEDULE"], env["SLIP_WEBHOOK_RETRY_SCHEDULE"] = "30s", "30m,30m"
	f(env, true)
}

// validate loads a configuration from env alone and validates it.
func validate(t *testing.T, env map[string]string) error {
	t.Helper()
	c, err := Load(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	return c.Validate()
}

// TestValidateSlipRetention: slip records are kept for good (0) or at least
// as long as jobs, whose repeated attempts find their own record.
func TestValidateSlipRetention(t *testing.T) {
	checkSetting(t, "SLIP_SLIP_RETENTION", map[string]bool{"0s": false, "168h": false, "8760h": false, "167h": true, "-1h": true})
}

// checkSetting sets name to each value of cases in an otherwise valid
// environment: Validate must refuse it, naming it, exactly when its case
// is true.
func checkSetting(t *testing.T, name string, cases map[string]bool) {
	t.Helper()
	for v, wantErr := range cases {
		env := valid()
		env[name] = v
		err := validate(t, env)
		if got := err != nil && strings.Contains(err.Error(), name); got != wantErr {
			t.Errorf("%s=%s: Validate() = %v, want an error: %v", name, v, err, wantErr)
		}
	}
}

// TestValidateCommitGather: a write waits for others from not at all (0)
// to at most 100ms.
func TestValidateCommitGather(t *testing.T) {
	checkSetting(t, "SLIP_COMMIT_GATHER", map[string]bool{"0s": false, "500us": false, "100ms": false, "101ms": true, "-1us": true})
}

// TestValidateKafkaAddr: every broker in SLIP_KAFKA_ADDR is a host:port,
// and there is at least one.
func TestValidateKafkaAddr(t *testing.T) {
	f := func(addr string, ok bool) {
		t.Helper()
		env := valid()
		env["SLIP_KAFKA_ADDR"] = addr
		c, _ := Load(nil, func(k string) string { return env[k] })
		err := c.Validate()
		if (err == nil) != ok || (err != nil && !strings.Contains(err.Error(), "SLIP_KAFKA_ADDR")) {
			t.Errorf("SLIP_KAFKA_ADDR=%q: %v, want accepted: %v", addr, err, ok)
		}
	}
	f("127.0.0.1:9092", true)
	f("kafka-0:9092, kafka-1:9092,[::1]:9093", true)
	f(",", false)
	f(" ", false)
	f("kafka-0", false)
	f("kafka-0:9092,kafka-1", false)
	f("kafka-0:9092,", false)
	f("kafka-0:", false)
	f("kafka-0:9092:1", false)
}

// TestValidateBankURLQuery: the bank gateway's base URL takes no query,
// which the connector would refuse at start.
func TestValidateBankURLQuery(t *testing.T) {
	env := valid()
	env["SLIP_BANK"], env["SLIP_BANK_URL"] = "http", "https://gateway.example/v1?key=x"
	c, _ := Load(nil, func(k string) string { return env[k] })
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "SLIP_BANK_URL") {
		t.Errorf("bank URL with a query: %v", err)
	}
	env["SLIP_BANK_URL"] = ""
	c, _ = Load(nil, func(k string) string { return env[k] })
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "SLIP_BANK_URL") {
		t.Errorf("no bank URL: %v", err)
	}
}

// TestValidateFiles: Validate loads SLIP_EGRESS_CA_FILE as the egress
// client will at start, and ValidateAll also reads SLIP_SEED as startup
// does; each problem is reported with the others.
func TestValidateFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	_, ca := testnet.TLSServer(t, http.NotFoundHandler())
	// names returns which of the settings err names.
	names := func(err error) []string {
		var out []string
		for _, v := range []string{"SLIP_SEED", "SLIP_EGRESS_CA_FILE", "SLIP_BANK_TIMEOUT"} {
			if err != nil && strings.Contains(err.Error(), v) {
				out = append(out, v)
			}
		}
		return out
	}
	f := func(seedFile, caFile string, validate, all []string) {
		t.Helper()
		env := valid()
		env["SLIP_EGRESS_CA_FILE"], env["SLIP_BANK_TIMEOUT"] = caFile, "0s"
		c, err := Load([]string{"-seed=" + seedFile}, func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); !slices.Equal(names(err), validate) {
			t.Errorf("seed %s, CA %s: Validate() = %v, want it to name %v", seedFile, caFile, err, validate)
		}
		if err := c.ValidateAll(); !slices.Equal(names(err), all) {
			t.Errorf("seed %s, CA %s: ValidateAll() = %v, want it to name %v", seedFile, caFile, err, all)
		}
	}
	goodSeed := filepath.Join("..", "..", "deploy", "dev", "seed.json")
	timeout := []string{"SLIP_BANK_TIMEOUT"}
	f(goodSeed, ca, timeout, timeout)
	f(goodSeed, "", timeout, timeout)
	f("", ca, timeout, timeout)
	f(filepath.Join(dir, "missing.json"), ca, timeout, []string{"SLIP_SEED", "SLIP_BANK_TIMEOUT"})
	f(write("bad.json", `{"services": 1}`), write("bad.pem", "not a certificate"),
		[]string{"SLIP_EGRESS_CA_FILE", "SLIP_BANK_TIMEOUT"}, []string{"SLIP_SEED", "SLIP_EGRESS_CA_FILE", "SLIP_BANK_TIMEOUT"})
	f(goodSeed, filepath.Join(dir, "missing.pem"),
		[]string{"SLIP_EGRESS_CA_FILE", "SLIP_BANK_TIMEOUT"}, []string{"SLIP_EGRESS_CA_FILE", "SLIP_BANK_TIMEOUT"})
}

// TestValidateBankUpstreams: the settings of each upstream SLIP_BANK uses
// are checked, all at once, without showing a secret; unused ones are not.
func TestValidateBankUpstreams(t *testing.T) {
	base := map[string]string{"SLIP_EDGE_TOKEN": strings.Repeat("t", 32), "SLIP_MASTER_KEY": strings.Repeat("ab", 32)}
	load := func(extra map[string]string) Config {
		t.Helper()
		env := maps.Clone(base)
		maps.Copy(env, extra)
		c, err := Load(nil, func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := load(map[string]string{"SLIP_BANK": "014=scb,*=kbank", "SLIP_KBANK_URL": "ftp://kbank", "SLIP_KBANK_CLIENT_SECRET": "hunter2hunter2",
		"SLIP_KBANK_CERT_FILE": "/nonexistent/cert.pem", "SLIP_SCB_URL": "https://api.partners.scb/partners/v1?x=1", "SLIP_BANK_MAX_RATE": "-1"})
	err := c.Validate()
	for _, want := range []string{"SLIP_KBANK_URL", "SLIP_KBANK_CLIENT_ID", "SLIP_KBANK_CERT_FILE and SLIP_KBANK_KEY_FILE",
		"SLIP_SCB_URL", "SLIP_SCB_API_KEY", "SLIP_SCB_API_SECRET", "SLIP_BANK_MAX_RATE"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %s", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error shows the secret: %v", err)
	}

	c = load(map[string]string{"SLIP_BANK": "kbank", "SLIP_KBANK_URL": "https://openapi.kasikornbank.com",
		"SLIP_KBANK_CLIENT_ID": "id", "SLIP_KBANK_CLIENT_SECRET": "secret", "SLIP_SCB_URL": "ftp://unused"})
	if err := c.Validate(); err != nil {
		t.Errorf("kbank alone: %v", err)
	}
	c = load(map[string]string{"SLIP_BANK": "014=scb,014=kbank,*=citi"})
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "listed twice") || !strings.Contains(err.Error(), "citi") {
		t.Errorf("route list: %v", err)
	}
}

// TestValidatePublishLinger: a write to the broker waits for company from
// not at all (0) to a second, and never a negative time.
func TestValidatePublishLinger(t *testing.T) {
	checkSetting(t, "SLIP_PUBLISH_LINGER", map[string]bool{"0s": false, "10ms": false, "1s": false, "1001ms": true, "-1ms": true})
}
