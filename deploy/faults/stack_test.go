//go:build faults

package faults_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/pgtest"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/deploy/clickhouse"
	"github.com/slipverify/slipverify/deploy/faults/tcpproxy"
	"github.com/slipverify/slipverify/edge/authn"
	"github.com/slipverify/slipverify/usage/chstore"
	"github.com/slipverify/slipverify/usage/ledgertest"
	"github.com/slipverify/slipverify/usage/reconcile"
)

const (
	webhookSecret = "whsec_faults_0123456789"
	b2bSecret     = "b2bsec_faults_0123456789abcdef"
	service       = "svc"
	coreTimeout   = 2 * time.Second // the edge's wait for core: a frozen core answers API_SERVER_ERROR after it
	hookTimeout   = time.Second     // the dispatcher's wait for one callback
	quotaStart    = 10              // the quota branch's limit at the start of its row
)

// stack is the platform as real processes: the dev broker, a ClickHouse
// server, core, the usage tier, the dispatcher and the edge, with an HTTPS
// webhook receiver in the test. Proxies the test controls sit between the
// usage tier and ClickHouse and between the dispatcher and the receiver.
// Its topology says the rest: one core on bbolt (a proxy between the edge
// and it, and a second usage tier that carries the same events into a
// ledger on a ClickHouse cluster), or several cores on PostgreSQL run by
// Patroni (a proxy between each core and each PostgreSQL member).
type stack struct {
	broker, usage, dispatcher, edge *testnet.Program
	cores                           []*testnet.Program
	ch                              *clickhouse.Server
	usageCH, hook                   *tcpproxy.Proxy
	ledger                          *chstore.Store
	rcv                             *receiver
	client                          *http.Client
	b2bKey                          string // the service's B2B client (all permissions)
	signer                          *authn.Signer
	hookURL                         string // the receiver, through the hook proxy
	edgeMetrics                     string // the edge's metrics listener, host:port

	// One core on bbolt.
	edgeCore      *tcpproxy.Proxy
	cluster       *clickhouse.Cluster
	usageCluster  *testnet.Program
	clusterLedger *chstore.Store   // through either replica, as finance reads it
	replicas      []*chstore.Store // each replica alone
	coreDir       string           // core's data: its bbolt file
	smallDisk     string           // why coreDir is not a disk of its own, or ""

	// Cores on PostgreSQL.
	pg      *pgtest.Patroni
	pgLinks [][]*tcpproxy.Proxy // by core, then by PostgreSQL member
}

// topology is what a stack runs core on.
type topology struct {
	name     string
	postgres bool // the cores on PostgreSQL run by Patroni; false: one core on bbolt
	cores    int  // how many cores
}

var (
	bbolt = topology{name: "one core on bbolt", cores: 1}
	// onPostgres is two cores on a PostgreSQL primary and its synchronous
	// standby, run by Patroni, each core through a proxy of its own to
	// each member, found by a multi-host URL.
	onPostgres = topology{name: "two cores on PostgreSQL (Patroni)", postgres: true, cores: 2}
)

// Durations of the stack on PostgreSQL: the edge asks each core's /ready
// this often, and a core stopping fails /ready this long first, so that
// the edge stops sending to it before it stops accepting.
const (
	coreProbe = 200 * time.Millisecond
	coreDrain = time.Second
)

// branches are one row's: a is where most traffic goes, b verifies a's
// slips again (cross-branch duplicates), q has a small limit that b2b
// quota changes move during the row.
type branches struct {
	a, b, q branch
}

type branch struct{ id, key string }

func rowBranches(i int) branches {
	mk := func(s string) branch { return branch{fmt.Sprintf("r%d%s", i, s), uuid.NewString()} }
	return branches{mk("a"), mk("b"), mk("q")}
}

// TestMain removes the programs the test builds.
func TestMain(m *testing.M) { testnet.Main(m) }

func startStack(t *testing.T, top topology, rows []branches) *stack {
	t.Helper()
	s := &stack{rcv: newReceiver(t), b2bKey: strings.Repeat("b2", 32), signer: authn.NewSigner(b2bSecret),
		edgeMetrics: testnet.FreeAddr(t)}
	s.client = &http.Client{Timeout: clientTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	t.Cleanup(s.client.CloseIdleConnections)
	kafka := testnet.FreeAddr(t)
	s.hook = proxy(t, strings.TrimPrefix(s.rcv.srv.URL, "https://"))
	s.hookURL = "https://" + s.hook.Addr() + "/hook"
	common := []string{"SLIP_KAFKA_ADDR=" + kafka, "SLIP_EGRESS_ALLOW_CIDRS=127.0.0.0/8", "SLIP_EGRESS_CA_FILE=" + s.rcv.caFile}

	s.broker = testnet.StartBroker(t, append(common, "SLIP_BROKER_PARTITIONS=3", "SLIP_BROKER_MEMORY=false")...)
	s.ch = clickhouse.StartTest(t)
	s.usageCH = proxy(t, s.ch.Addr())
	var err error
	if s.ledger, err = chstore.Open(chstore.Options{Addrs: []string{s.ch.Addr()}, Database: "slip", Username: "default"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.ledger.Close() })

	seed := testnet.Seed(t, s.seedJSON(rows))
	coreEnv := append(common, "SLIP_VERIFY_RETRY_SCHEDULE=100ms,100ms,100ms,100ms", "SLIP_WEBHOOK_RETRY_SCHEDULE=500ms,1s,2s")
	var edgeTo string // the edge's SLIP_CORE_ADDR
	edgeEnv := append(common, "SLIP_EDGE_AUTH_TTL=1h", "SLIP_EDGE_CORE_TIMEOUT="+coreTimeout.String(), "SLIP_EDGE_METRICS_ADDR="+s.edgeMetrics)
	if top.postgres {
		s.pg = pgtest.StartPatroni(t, 2)
		s.pg.Database(t, "slip")
		var addrs []string
		for range top.cores {
			var links []*tcpproxy.Proxy
			var hosts []string
			for _, m := range s.pg.Members {
				px := proxy(t, m.Addr)
				links, hosts = append(links, px), append(hosts, px.Addr())
			}
			s.pgLinks = append(s.pgLinks, links)
			c := testnet.StartCore(t, seed, append(coreEnv, "SLIP_STORE="+pgtest.URL("slip", hosts...), "SLIP_CORE_DRAIN="+coreDrain.String())...)
			s.cores = append(s.cores, c)
			addrs = append(addrs, c.Addr)
		}
		edgeTo, edgeEnv = strings.Join(addrs, ","), append(edgeEnv, "SLIP_EDGE_CORE_PROBE="+coreProbe.String())
	} else {
		s.startCluster(t, kafka, common)
		s.coreDir = filepath.Join(t.TempDir(), "core")
		if err := os.Mkdir(s.coreDir, 0o700); err != nil {
			t.Fatal(err)
		}
		s.mountSmallDisk(t)
		s.cores = []*testnet.Program{testnet.StartCore(t, seed, append(coreEnv, "SLIP_DATA_DIR="+s.coreDir)...)}
		s.edgeCore = proxy(t, s.cores[0].Addr)
		edgeTo = s.edgeCore.Addr()
	}
	s.usage = testnet.StartUsage(t, kafka, s.usageCH.Addr(), append(common, "SLIP_CORE_ADDR="+s.cores[0].Addr,
		"SLIP_EDGE_TOKEN="+testnet.EdgeToken, "SLIP_USAGE_FLUSH=100ms", "SLIP_USAGE_RETRY_MAX=1s")...)
	s.dispatcher = testnet.StartDispatcher(t, kafka, append(common, "SLIP_WEBHOOK_TIMEOUT="+hookTimeout.String())...)
	s.edge = testnet.StartEdge(t, edgeTo, edgeEnv...)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	return s
}

// startCluster starts the ClickHouse cluster (two replicas and a
// ZooKeeper) and the usage tier that carries the events into it, with a
// consumer group of its own.
func (s *stack) startCluster(t *testing.T, kafka string, common []string) {
	s.cluster = clickhouse.StartTestCluster(t)
	for _, r := range s.cluster.Replicas {
		s.replicas = append(s.replicas, ledgertest.Open(t, r.Addr()))
	}
	s.clusterLedger = ledgertest.Open(t, s.cluster.Addrs())
	s.usageCluster = testnet.StartUsage(t, kafka, s.cluster.Addrs(), append(common, "SLIP_CLICKHOUSE_CLUSTER="+ledgertest.ClusterName,
		"SLIP_USAGE_GROUP=usage-cluster", "SLIP_USAGE_AUDIT_GROUP=usage-cluster-audit", "SLIP_USAGE_FLUSH=100ms", "SLIP_USAGE_RETRY_MAX=1s")...)
}

// proxy starts a proxy to target until the test ends.
func proxy(t *testing.T, target string) *tcpproxy.Proxy {
	p, err := tcpproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// diskSize is the size of the disk core's data is on, small enough to
// fill in a moment.
const diskSize = "64m"

// mountSmallDisk puts core's data on a tmpfs of its own, which the disk
// fault fills. Mounting needs root (CI has it); without it the disk fault
// is skipped, except in CI.
func (s *stack) mountSmallDisk(t *testing.T) {
	err := unix.Mount("tmpfs", s.coreDir, "tmpfs", 0, "size="+diskSize+",mode=0700")
	if err != nil {
		s.smallDisk = fmt.Sprintf("mounting a tmpfs for core's data: %v (needs root)", err)
		if os.Getenv("CI") != "" {
			t.Fatal(s.smallDisk)
		}
		return
	}
	// Registered before core starts, so it runs after core has stopped.
	t.Cleanup(func() {
		if err := unix.Unmount(s.coreDir, 0); err != nil {
			t.Errorf("unmounting core's disk: %v", err)
		}
	})
}

// seedJSON is one service with three branches per row, each with its own
// key, so each row's billing is counted apart, and a B2B client that signs
// requests and changes quotas; only the quota branches' limits refuse.
func (s *stack) seedJSON(rows []branches) string {
	var bs []string
	for i, r := range rows {
		for _, b := range []struct {
			branch
			limit string
		}{{r.a, "null"}, {r.b, "null"}, {r.q, strconv.Itoa(quotaStart)}} {
			bs = append(bs, fmt.Sprintf(`{"id":%q,"name":%q,"main":%v,"key":%q,"active":true,
			"ipAllow":["*"],"limitQuota":%s,"webhookUrl":null,"webhookSecret":%q}`, b.id, b.id, i == 0 && b.id == r.a.id, b.key, b.limit, webhookSecret))
		}
	}
	return `{"services":[{"id":"` + service + `","name":"Shop","state":"active","userBanned":false,
	"quota":{"limit":10000000,"cycleAnchorDay":1},"rate":{"bank":100000,"wallet":100000},
	"branches":[` + strings.Join(bs, ",") + `],
	"b2bClients":[{"key":"` + s.b2bKey + `","secret":"` + b2bSecret + `","permissions":["branch:read","branch:write","quota:read","quota:write","bank-account:read","bank-account:write"]}],
	"bankAccounts":[]}],
	"sandbox":{"notFound":[],"upstreamError":[]}}`
}

// call is one request of a client.
type call struct {
	method, path string
	body         []byte
	contentType  string // application/json when empty
	key          string // the Bearer key, or the key a signed request names
	signed       bool   // HMAC-signed with the service's B2B secret
}

// answer is a client's view of one request: v2 and v1 bodies alike.
type answer struct {
	status int
	body   struct {
		Success bool `json:"success"`
		Data    struct {
			JobID       string   `json:"jobId"`
			JobIDs      []string `json:"jobIds"`
			Status      string   `json:"status"`
			IsDuplicate *bool    `json:"isDuplicate"`
			Result      *struct {
				Status string `json:"status"`
			} `json:"result"`
			Error *struct {
				Code string `json:"code"`
			} `json:"error"`
			Branch *struct {
				LimitQuota *int64 `json:"limitQuota"`
				UsedQuota  int64  `json:"usedQuota"`
			} `json:"branch"` // a quota answer's
		} `json:"data"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
		Message string `json:"message"` // v1: the code of a refusal
	}
	raw []byte
}

// ok reports whether the platform accepted the request.
func (a answer) ok() bool { return a.status >= 200 && a.status < 300 }

// what names a refusal as the client saw it: status and code.
func (a answer) what() string {
	switch {
	case a.body.Error.Code != "":
		return fmt.Sprintf("%d %s", a.status, a.body.Error.Code)
	case a.body.Message != "" && a.status >= 400:
		return fmt.Sprintf("%d %s", a.status, a.body.Message)
	}
	return fmt.Sprintf("%d %.40s", a.status, a.raw)
}

// send sends one request through the edge.
func (s *stack) send(c call) (answer, error) {
	req, err := http.NewRequest(c.method, s.edge.URL()+c.path, bytes.NewReader(c.body))
	if err != nil {
		return answer{}, err
	}
	ct := c.contentType
	if ct == "" {
		ct = "application/json"
	}
	req.Header.Set("Content-Type", ct)
	if c.signed {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		nonce := uuid.NewString()
		sts := authn.AppendStringToSign(nil, []byte(c.method), authn.SignedPath([]byte(c.path)), []byte(ts), []byte(nonce), c.body)
		req.Header.Set("X-API-Key", c.key)
		req.Header.Set("X-Timestamp", ts)
		req.Header.Set("X-Nonce", nonce)
		req.Header.Set("X-Signature", s.signer.Sign(sts))
	} else {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	res, err := s.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	a := answer{status: res.StatusCode}
	if a.raw, err = io.ReadAll(res.Body); err != nil {
		return answer{}, err
	}
	json.Unmarshal(a.raw, &a.body)
	return a, nil
}

// do sends a JSON request with a branch's Bearer key.
func (s *stack) do(method, path, key string, body any) (answer, error) {
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	return s.send(call{method: method, path: path, body: raw, key: key})
}

// b2b sends a signed management request as the service's B2B client.
func (s *stack) b2b(method, path string, body any) (answer, error) {
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	return s.send(call{method: method, path: path, body: raw, key: s.b2bKey, signed: true})
}

// ledger is one place that holds billable verifications of each branch.
type ledger struct {
	name string
	read func() (map[string]int64, error)
}

// ledgers are the places that must hold each branch's billable
// verifications once the pipeline has drained: the ledger on one server
// and the one on the cluster as finance reads them, and each replica of
// the cluster alone (its local table: every event reaches every replica),
// where the stack has the cluster.
func (s *stack) ledgers() []ledger {
	ls := []ledger{{"ledger", func() (map[string]int64, error) { return billable(s.ledger) }}}
	if s.cluster == nil {
		return ls
	}
	ls = append(ls, ledger{"cluster ledger", func() (map[string]int64, error) { return billable(s.clusterLedger) }})
	for i, r := range s.replicas {
		ls = append(ls, ledger{fmt.Sprintf("replica r%d", i+1), func() (map[string]int64, error) { return replicaBillable(r) }})
	}
	return ls
}

// billable is a ledger's billable verifications of each branch, each
// event counted once, as finance reads them.
func billable(st *chstore.Store) (map[string]int64, error) {
	days, err := st.BillableByDay(context.Background())
	if err != nil {
		return nil, err
	}
	n := map[string]int64{}
	for _, d := range days {
		if d.ServiceID == service {
			n[d.BranchID] += int64(d.Billable)
		}
	}
	return n, nil
}

// replicaBillable is what one replica's local table holds of each branch's
// billable verifications, each event counted once.
func replicaBillable(st *chstore.Store) (map[string]int64, error) {
	rows, err := st.Conn().Query(context.Background(),
		"SELECT branch_id, uniqExactIf(event_id, billable = 1) FROM slip.usage_events_local WHERE service_id = ? GROUP BY branch_id", service)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	n := map[string]int64{}
	for rows.Next() {
		var b string
		var c uint64
		if err := rows.Scan(&b, &c); err != nil {
			return nil, err
		}
		n[b] = int64(c)
	}
	return n, rows.Err()
}

// coreTotals is core's totalUsedQuota of each branch, as the first core
// that answers counts it (cores on PostgreSQL count the same).
func (s *stack) coreTotals() (map[string]int64, error) {
	var counters api.UsageCounters
	var err error
	for _, core := range s.cores {
		c := reconcile.Core{Addr: core.Addr, Token: testnet.EdgeToken, Client: s.client}
		if counters, err = c.Counters(context.Background()); err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	n := map[string]int64{}
	for _, svc := range counters.Services {
		for _, b := range svc.Branches {
			n[b.BranchID] = b.Total
		}
	}
	return n, nil
}

// receiver is the HTTPS webhook receiver: it counts deliveries per jobId,
// checks each signature as spec 6.3 tells receivers to, and fails the first
// delivery of every job of a batch (answering 503), so those are called
// back again.
type receiver struct {
	srv    *httptest.Server
	caFile string
	mu     sync.Mutex
	got    map[string]*delivery
	badSig int
}

// delivery is what arrived of one job's callbacks.
type delivery struct {
	refused, taken int
	status         string // of the first callback taken: success, not_found or failed CODE
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{got: map[string]*delivery{}}
	r.srv, r.caFile = testnet.TLSServer(t, http.HandlerFunc(r.serve))
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var p struct {
		JobID   string  `json:"jobId"`
		BatchID *string `json:"batchId"`
		Status  string  `json:"status"`
		Error   *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(body, &p)
	mac := hmac.New(sha256.New, []byte(webhookSecret))
	mac.Write(body)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	r.mu.Lock()
	defer r.mu.Unlock()
	if !hmac.Equal([]byte(req.Header.Get(api.SignatureHeader)), []byte(want)) {
		r.badSig++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	d := r.got[p.JobID]
	if d == nil {
		d = &delivery{}
		r.got[p.JobID] = d
	}
	if p.BatchID != nil && d.refused == 0 && d.taken == 0 {
		d.refused++
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if d.taken == 0 {
		d.status = p.Status
		if p.Error != nil {
			d.status += " " + p.Error.Code
		}
	}
	d.taken++
}

// delivered returns what arrived of a job's callbacks.
func (r *receiver) delivered(job string) delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d := r.got[job]; d != nil {
		return *d
	}
	return delivery{}
}

func (r *receiver) badSignatures() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.badSig
}
