package secure_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/slipverify/slipverify/core/bank/bankfake"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/lib/tlsfiles"
	"github.com/slipverify/slipverify/core/slip"
	"github.com/slipverify/slipverify/deploy/clickhouse"
	"github.com/slipverify/slipverify/edge/authn"
	"github.com/slipverify/slipverify/usage/chstore"
)

// TestMain removes the programs the tests build.
func TestMain(m *testing.M) { testnet.Main(m) }

const (
	devKey     = "046745d7-0d0a-43c1-ad0d-0d2bb1f9edc2" // br-main of deploy/dev/seed.json
	b2bKey     = "2a232a59efdb410251b6ccd2a186633fa1be58370cddcb8c2fbab4f61bdcbef8"
	b2bSecret  = "b2bsec_a3fe999bda50674cad9a402cc189a80824c0958f016262ac"
	seed       = "../dev/seed.json"
	kafkaPass  = "kafka-scram-password-0123"
	ledgerPass = "clickhouse-password-0123"
)

// links is the secure world a test starts: the broker (a program) and
// ClickHouse, their CA, and the settings the tiers reach them with.
type links struct {
	pki        *bankfake.PKI
	broker     *testnet.Program
	ch         *clickhouse.Server
	kafka      []string // SLIP_KAFKA_* of every tier
	clickhouse []string // SLIP_CLICKHOUSE_* of the usage tier
}

func startLinks(t *testing.T) *links {
	t.Helper()
	l := &links{pki: bankfake.NewPKI(t)}
	cert, key := testnet.PEMFiles(t, l.pki.Server)
	sasl := []string{"SLIP_KAFKA_SASL_MECHANISM=SCRAM-SHA-512", "SLIP_KAFKA_SASL_USER=slip", "SLIP_KAFKA_SASL_PASSWORD=" + kafkaPass}
	l.broker = testnet.StartBroker(t, append([]string{"SLIP_BROKER_TLS_CERT_FILE=" + cert, "SLIP_BROKER_TLS_KEY_FILE=" + key,
		"SLIP_BROKER_PARTITIONS=2"}, sasl...)...)
	l.kafka = append([]string{"SLIP_KAFKA_ADDR=" + l.broker.Addr, "SLIP_KAFKA_TLS=true", "SLIP_KAFKA_TLS_CA_FILE=" + l.pki.CAFile}, sasl...)
	l.ch = clickhouse.StartTestConfig(t, clickhouse.Config{CertFile: cert, KeyFile: key, User: "slip", Password: ledgerPass})
	l.clickhouse = []string{"SLIP_CLICKHOUSE_ADDR=" + l.ch.Addr(), "SLIP_CLICKHOUSE_TLS=true", "SLIP_CLICKHOUSE_TLS_CA_FILE=" + l.pki.CAFile,
		"SLIP_CLICKHOUSE_USER=slip", "SLIP_CLICKHOUSE_PASSWORD=" + ledgerPass}
	return l
}

// with returns env with the settings of more replacing those of the same
// name.
func with(env []string, more ...string) []string {
	return append(append([]string(nil), env...), more...)
}

// receiver is an HTTPS webhook receiver that records the job of every
// callback.
type receiver struct {
	url, caFile string
	mu          sync.Mutex
	jobs        map[string]int
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{jobs: map[string]int{}}
	srv, ca := testnet.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body struct{ JobID string }
		json.NewDecoder(req.Body).Decode(&body)
		r.mu.Lock()
		r.jobs[body.JobID]++
		r.mu.Unlock()
	}))
	r.url, r.caFile = srv.URL+"/hook", ca
	return r
}

func (r *receiver) got(job string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.jobs[job]
}

// signed sends GET /b2b/branches, signed by the dev seed's B2B client with
// nonce, to the edge at base, and returns the status and body.
func signed(t *testing.T, base, nonce string) (int, string) {
	t.Helper()
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, _ := http.NewRequest("GET", base+"/b2b/branches", nil)
	sts := authn.AppendStringToSign(nil, []byte("GET"), authn.SignedPath([]byte("/b2b/branches")), []byte(ts), []byte(nonce), nil)
	req.Header.Set("X-API-Key", b2bKey)
	req.Header.Set("X-Timestamp", ts)
	req.Header.Set("X-Nonce", nonce)
	req.Header.Set("X-Signature", authn.NewSigner(b2bSecret).Sign(sts))
	status, body := send(t, req)
	return status, string(body)
}

// send sends req and returns the status and body of the answer.
func send(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, body
}

// TestEveryTierOverTLSAndSCRAM runs the platform with TLS and SCRAM-SHA-512
// on every Kafka link and TLS with a password on ClickHouse's: an async
// verification submitted at the edge goes through core's outbox and job
// consumer (slip.jobs, slip.results), the dispatcher's delivery of its
// callback, and the usage tier's ledger; a nonce one edge accepted and
// published on slip.nonces is refused by a second edge, which replayed the
// topic at start. No program writes a password to its log.
func TestEveryTierOverTLSAndSCRAM(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the broker, ClickHouse and every tier")
	}
	l := startLinks(t)
	rcv := newReceiver(t)
	egress := []string{"SLIP_EGRESS_ALLOW_CIDRS=127.0.0.0/8", "SLIP_EGRESS_CA_FILE=" + rcv.caFile}
	core := testnet.StartCore(t, seed, with(l.kafka, append(egress, "SLIP_VERIFY_RETRY_SCHEDULE=100ms")...)...)
	dispatcher := testnet.StartDispatcher(t, l.broker.Addr, with(l.kafka, egress...)...)
	usage := testnet.StartUsage(t, l.broker.Addr, l.ch.Addr(), with(l.kafka, append(l.clickhouse, "SLIP_USAGE_FLUSH=100ms")...)...)
	edge := testnet.StartEdge(t, core.Addr, l.kafka...)

	body, _ := json.Marshal(map[string]string{"payload": slip.Bank{BankCode: "004", TransRef: "SECURELINK0000000001"}.Encode(), "callbackUrl": rcv.url})
	req, _ := http.NewRequest("POST", edge.URL()+"/v2/verify/bank/async", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+devKey)
	req.Header.Set("Content-Type", "application/json")
	status, raw := send(t, req)
	var sub struct{ Data struct{ JobID string } }
	if json.Unmarshal(raw, &sub); status != http.StatusAccepted || sub.Data.JobID == "" {
		t.Fatalf("submit: %d %s", status, raw)
	}
	testnet.Eventually(t, time.Minute, func() bool { return rcv.got(sub.Data.JobID) > 0 },
		func() string {
			return "no callback for job " + sub.Data.JobID + "\n" + core.Output() + dispatcher.Output()
		})

	tc, err := chstore.TLS{On: true, Files: tlsfiles.Files{CAFile: l.pki.CAFile}}.Config()
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := chstore.Open(chstore.Options{Addrs: []string{l.ch.Addr()}, Database: "slip", Username: "slip", Password: ledgerPass, TLS: tc})
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	var rows uint64
	testnet.Eventually(t, time.Minute, func() bool {
		rows = 0
		ledger.Conn().QueryRow(context.Background(), "SELECT count() FROM slip.usage_events WHERE job_id = ?", sub.Data.JobID).Scan(&rows)
		return rows > 0
	}, func() string { return "the job's usage event is not in the ledger\n" + usage.Output() })

	nonce := uuid.NewString()
	if status, body := signed(t, edge.URL(), nonce); status != http.StatusOK {
		t.Fatalf("signed request at the first edge: %d %s", status, body)
	}
	// The second edge serves once it has replayed slip.nonces, the first
	// edge's nonce included.
	edge2 := testnet.StartEdge(t, core.Addr, l.kafka...)
	if status, body := signed(t, edge2.URL(), nonce); status != http.StatusUnauthorized || !strings.Contains(body, "DUPLICATE_NONCE") {
		t.Errorf("the first edge's nonce at the second edge: %d %s, want 401 DUPLICATE_NONCE", status, body)
	}

	for name, p := range map[string]*testnet.Program{"broker": l.broker, "core": core, "dispatcher": dispatcher, "usage": usage, "edge": edge, "edge2": edge2} {
		out := p.Output()
		if strings.Contains(out, kafkaPass) || strings.Contains(out, ledgerPass) {
			t.Errorf("%s logs a password:\n%s", name, out)
		}
		if name != "broker" && !strings.Contains(out, "TLS, SCRAM-SHA-512 as slip") {
			t.Errorf("%s does not log its Kafka link:\n%s", name, out)
		}
	}
}

// TestRefusedLinksStopTiers: a tier whose link the broker or ClickHouse
// refuses stops at start, saying which setting to check, and never shows
// the password.
func TestRefusedLinksStopTiers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the broker, ClickHouse and every tier")
	}
	l := startLinks(t)
	other := bankfake.NewPKI(t)
	for _, c := range []struct {
		program string
		env     []string
		want    string
	}{
		{"core/cmd/core", with(l.kafka, "SLIP_DATA_DIR="+t.TempDir(), "SLIP_SEED="+seed, "SLIP_EDGE_TOKEN="+testnet.EdgeToken,
			"SLIP_MASTER_KEY="+testnet.MasterKey, "SLIP_KAFKA_SASL_PASSWORD=wrong-password"), "check SLIP_KAFKA_SASL_USER, SLIP_KAFKA_SASL_PASSWORD"},
		{"edge/cmd/edge", with(l.kafka, "SLIP_EDGE_TOKEN="+testnet.EdgeToken, "SLIP_EDGE_METRICS_ADDR=off",
			"SLIP_KAFKA_TLS_CA_FILE="+other.CAFile), "not trusted: check SLIP_KAFKA_TLS_CA_FILE"},
		{"dispatcher/cmd/dispatcher", with(l.kafka, "SLIP_KAFKA_TLS=false", "SLIP_KAFKA_TLS_CA_FILE="), "does the broker want TLS (SLIP_KAFKA_TLS)"},
		{"usage/cmd/usage", with(append(l.kafka, l.clickhouse...), "SLIP_EDGE_TOKEN=", "SLIP_CLICKHOUSE_PASSWORD=wrong-password"),
			"check SLIP_CLICKHOUSE_USER and SLIP_CLICKHOUSE_PASSWORD"},
		{"usage/cmd/usage", with(append(l.kafka, l.clickhouse...), "SLIP_EDGE_TOKEN=", "SLIP_CLICKHOUSE_TLS_CA_FILE="+other.CAFile),
			"check SLIP_CLICKHOUSE_TLS_CA_FILE"},
		{"usage/cmd/usage", with(append(l.kafka, l.clickhouse...), "SLIP_EDGE_TOKEN=", "SLIP_KAFKA_SASL_MECHANISM=SCRAM-SHA-256"),
			"the broker refused the credentials"},
	} {
		env := with(c.env, "SLIP_CORE_ADDR="+testnet.FreeAddr(t), "SLIP_EDGE_ADDR="+testnet.FreeAddr(t),
			"SLIP_DISPATCHER_ADDR="+testnet.FreeAddr(t), "SLIP_USAGE_ADDR="+testnet.FreeAddr(t))
		p := testnet.Start(t, testnet.Build(t, c.program), env...)
		testnet.Eventually(t, time.Minute, p.Exited, func() string { return c.program + " still runs:\n" + p.Output() })
		out := p.Output()
		if !strings.Contains(out, c.want) {
			t.Errorf("%s: exited saying\n%s\nwant %q", c.program, out, c.want)
		}
		if strings.Contains(out, kafkaPass) || strings.Contains(out, ledgerPass) || strings.Contains(out, "wrong-password") {
			t.Errorf("%s shows a password:\n%s", c.program, out)
		}
	}
}
