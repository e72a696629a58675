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
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/testnet"
	"github.com/slipverify/slipverify/deploy/clickhouse"
	"github.com/slipverify/slipverify/usage/chstore"
	"github.com/slipverify/slipverify/usage/reconcile"
)

const (
	webhookSecret = "whsec_faults_0123456789"
	service       = "svc"
	coreTimeout   = 2 * time.Second // the edge's wait for core: a frozen core answers API_SERVER_ERROR after it
)

// stack is the platform as real processes: the dev broker, a ClickHouse
// server, core, the usage tier, the dispatcher and the edge, with an HTTPS
// webhook receiver in the test.
type stack struct {
	broker, core, usage, dispatcher, edge *testnet.Program
	ch                                    *clickhouse.Server
	ledger                                *chstore.Store
	rcv                                   *receiver
	coreDir                               string // core's data: its bbolt file
	smallDisk                             string // why coreDir is not a disk of its own, or ""
	client                                *http.Client
}

// TestMain removes the programs the test builds.
func TestMain(m *testing.M) { testnet.Main(m) }

func startStack(t *testing.T, branches []string) *stack {
	t.Helper()
	s := &stack{rcv: newReceiver(t), coreDir: filepath.Join(t.TempDir(), "core")}
	s.client = &http.Client{Timeout: clientTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	t.Cleanup(s.client.CloseIdleConnections)
	if err := os.Mkdir(s.coreDir, 0o700); err != nil {
		t.Fatal(err)
	}
	s.mountSmallDisk(t)
	kafka := testnet.FreeAddr(t)
	common := []string{"SLIP_KAFKA_ADDR=" + kafka, "SLIP_EGRESS_ALLOW_CIDRS=127.0.0.0/8", "SLIP_EGRESS_CA_FILE=" + s.rcv.caFile}

	s.broker = testnet.StartBroker(t, append(common, "SLIP_BROKER_PARTITIONS=3", "SLIP_BROKER_MEMORY=false")...)
	s.ch = clickhouse.StartTest(t)
	var err error
	if s.ledger, err = chstore.Open(chstore.Options{Addrs: []string{s.ch.Addr()}, Database: "slip", Username: "default"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.ledger.Close() })

	s.core = testnet.StartCore(t, testnet.Seed(t, seedJSON(branches)), append(common, "SLIP_DATA_DIR="+s.coreDir,
		"SLIP_VERIFY_RETRY_SCHEDULE=100ms,100ms,100ms,100ms", "SLIP_WEBHOOK_RETRY_SCHEDULE=200ms,500ms,1s")...)
	s.usage = testnet.StartUsage(t, kafka, s.ch.Addr(), append(common, "SLIP_CORE_ADDR="+s.core.Addr,
		"SLIP_EDGE_TOKEN="+testnet.EdgeToken, "SLIP_USAGE_FLUSH=100ms", "SLIP_USAGE_RETRY_MAX=1s")...)
	s.dispatcher = testnet.StartDispatcher(t, kafka, append(common, "SLIP_WEBHOOK_TIMEOUT=2s")...)
	s.edge = testnet.StartEdge(t, s.core.Addr, append(common, "SLIP_EDGE_AUTH_TTL=1h",
		"SLIP_EDGE_CORE_TIMEOUT="+coreTimeout.String())...)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	return s
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

// seedJSON is one service with a branch per fault, each with its own key,
// so each fault's billing is counted apart; quota and rates never refuse.
func seedJSON(keys []string) string {
	var bs []string
	for i, key := range keys {
		bs = append(bs, fmt.Sprintf(`{"id":"br-%d","name":"branch %d","main":%v,"key":%q,"active":true,
			"ipAllow":["*"],"limitQuota":null,"webhookUrl":null,"webhookSecret":%q}`, i, i, i == 0, key, webhookSecret))
	}
	return `{"services":[{"id":"` + service + `","name":"Shop","state":"active","userBanned":false,
	"quota":{"limit":10000000,"cycleAnchorDay":1},"rate":{"bank":100000,"wallet":100000},
	"branches":[` + strings.Join(bs, ",") + `],"b2bClients":[],"bankAccounts":[]}],
	"sandbox":{"notFound":[],"upstreamError":[]}}`
}

// answer is a client's view of one request.
type answer struct {
	status int
	body   struct {
		Success bool `json:"success"`
		Data    struct {
			JobID       string `json:"jobId"`
			Status      string `json:"status"`
			IsDuplicate *bool  `json:"isDuplicate"`
			Result      *struct {
				Status string `json:"status"`
			} `json:"result"`
		} `json:"data"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	raw []byte
}

// do sends one request through the edge with a branch's key.
func (s *stack) do(method, path, key string, body any) (answer, error) {
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	req, err := http.NewRequest(method, s.edge.URL()+path, bytes.NewReader(raw))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
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

// ledgerBillable is the usage ledger's billable verifications of a branch,
// each event counted once, as finance reads them.
func (s *stack) ledgerBillable(branch string) (int64, error) {
	days, err := s.ledger.BillableByDay(context.Background())
	if err != nil {
		return 0, err
	}
	var n int64
	for _, d := range days {
		if d.ServiceID == service && d.BranchID == branch {
			n += int64(d.Billable)
		}
	}
	return n, nil
}

// coreUsed is core's totalUsedQuota of a branch.
func (s *stack) coreUsed(branch string) (int64, error) {
	c := reconcile.Core{Addr: s.core.Addr, Token: testnet.EdgeToken, Client: s.client}
	counters, err := c.Counters(context.Background())
	if err != nil {
		return 0, err
	}
	for _, svc := range counters.Services {
		for _, b := range svc.Branches {
			if b.BranchID == branch {
				return b.Total, nil
			}
		}
	}
	return 0, nil
}

// receiver is the HTTPS webhook receiver: it counts deliveries per jobId
// and checks each signature as spec 6.3 tells receivers to.
type receiver struct {
	srv    *httptest.Server
	caFile string
	mu     sync.Mutex
	got    map[string]int
	badSig int
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{got: map[string]int{}}
	r.srv, r.caFile = testnet.TLSServer(t, http.HandlerFunc(r.serve))
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var p struct {
		JobID string `json:"jobId"`
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
	r.got[p.JobID]++
}

// delivered reports whether a job's callback arrived at least once.
func (r *receiver) delivered(job string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[job] > 0
}

func (r *receiver) badSignatures() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.badSig
}
