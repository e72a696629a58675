package config

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipverify/slipverify/core/lib/testnet"
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

// check loads the configuration from args and env and validates it: want
// is "" for a valid one, else text the error must contain (the variable).
func check(t *testing.T, args []string, env map[string]string, want string) {
	t.Helper()
	c, err := Load(args, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("%v %v: %v", args, env, err)
	}
	err = c.Validate()
	switch {
	case want == "" && err != nil:
		t.Errorf("%v %v refused: %v", args, env, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%v %v: error %v, want one naming %s", args, env, err, want)
	}
}

// TestValidateGrace: a delivery takes at most the slot wait and the
// timeout, and must end within the grace a stop gives it (15 s); past it,
// the stop cuts it.
func TestValidateGrace(t *testing.T) {
	f := func(env map[string]string, want string) { t.Helper(); check(t, nil, env, want) }
	f(nil, "")
	f(map[string]string{"SLIP_DISPATCHER_SLOT_WAIT": "4s", "SLIP_WEBHOOK_TIMEOUT": "10s"}, "")
	f(map[string]string{"SLIP_DISPATCHER_SLOT_WAIT": "5s", "SLIP_WEBHOOK_TIMEOUT": "10s"}, "SLIP_DISPATCHER_SLOT_WAIT + SLIP_WEBHOOK_TIMEOUT")
	f(map[string]string{"SLIP_WEBHOOK_TIMEOUT": "5m"}, "SLIP_WEBHOOK_TIMEOUT")
	f(map[string]string{"SLIP_DISPATCHER_SLOT_WAIT": "20s"}, "SLIP_DISPATCHER_SLOT_WAIT")
	f(map[string]string{"SLIP_WEBHOOK_TIMEOUT": "2562047h", "SLIP_DISPATCHER_SLOT_WAIT": "2562047h"}, "SLIP_WEBHOOK_TIMEOUT") // a sum would overflow
}

// TestValidate: a setting that would crash the dispatcher, leave it
// without a broker, fail it only at its first https callback, or allocate
// without bound is refused, naming its variable.
func TestValidate(t *testing.T) {
	_, ca := testnet.TLSServer(t, http.NotFoundHandler())
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := func(env map[string]string, want string) { t.Helper(); check(t, nil, env, want) }
	f(map[string]string{"SLIP_KAFKA_ADDR": "k1:9092, k2:9092"}, "")
	f(map[string]string{"SLIP_KAFKA_ADDR": ","}, "SLIP_KAFKA_ADDR")
	f(map[string]string{"SLIP_KAFKA_ADDR": "notanaddr"}, "SLIP_KAFKA_ADDR")
	f(map[string]string{"SLIP_KAFKA_ADDR": "k1:9092,k2"}, "SLIP_KAFKA_ADDR")
	f(map[string]string{"SLIP_KAFKA_ADDR": "k1:"}, "SLIP_KAFKA_ADDR")
	check(t, []string{"-kafka-addr="}, nil, "SLIP_KAFKA_ADDR")
	f(map[string]string{"SLIP_EGRESS_CA_FILE": ca}, "")
	f(map[string]string{"SLIP_EGRESS_CA_FILE": filepath.Join(t.TempDir(), "missing.pem")}, "SLIP_EGRESS_CA_FILE")
	f(map[string]string{"SLIP_EGRESS_CA_FILE": notPEM}, "SLIP_EGRESS_CA_FILE")
	f(map[string]string{"SLIP_DISPATCHER_WORKERS": "10000"}, "")
	f(map[string]string{"SLIP_DISPATCHER_WORKERS": "10001"}, "SLIP_DISPATCHER_WORKERS")
	f(map[string]string{"SLIP_DISPATCHER_WORKERS": "2000000000"}, "SLIP_DISPATCHER_WORKERS")
}

// TestSignatureHeader: the signature's header is X-Service-Signature
// unless the deployment names another, from the variable or the flag; a
// name that is not an HTTP header name, or that the dispatcher or HTTP
// itself sets, is refused at start, naming the variable.
func TestSignatureHeader(t *testing.T) {
	f := func(args []string, env map[string]string, want string) {
		t.Helper()
		c, err := Load(args, func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("%v %v refused: %v", args, env, err)
		}
		if c.SignatureHeader != want {
			t.Errorf("%v %v: header %q, want %q", args, env, c.SignatureHeader, want)
		}
	}
	f(nil, nil, "X-Service-Signature")
	f(nil, map[string]string{"SLIP_WEBHOOK_SIGNATURE_HEADER": ""}, "X-Service-Signature") // set empty: unset
	f(nil, map[string]string{"SLIP_WEBHOOK_SIGNATURE_HEADER": "X-Webhook-Signature"}, "X-Webhook-Signature")
	f(nil, map[string]string{"SLIP_WEBHOOK_SIGNATURE_HEADER": "x-hub-signature-256"}, "x-hub-signature-256")
	f([]string{"-webhook-signature-header=X-Slip-Signature"}, map[string]string{"SLIP_WEBHOOK_SIGNATURE_HEADER": "X-Webhook-Signature"}, "X-Slip-Signature")

	bad := func(name string) {
		t.Helper()
		check(t, nil, map[string]string{"SLIP_WEBHOOK_SIGNATURE_HEADER": name}, "SLIP_WEBHOOK_SIGNATURE_HEADER")
	}
	bad("X Service Signature")
	bad("X-Service-Signature:")
	bad(" X-Service-Signature")
	bad("X-Signature\r\nX-Injected: 1")
	bad("X-Sígnature")
	bad("X-(Signature)")
	bad("content-type")
	bad("User-Agent")
	bad("Content-Length")
	bad("Host")
	bad("TE")
	check(t, []string{"-webhook-signature-header="}, nil, "SLIP_WEBHOOK_SIGNATURE_HEADER")
}
