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
	edgeToken     = "faults-edge-token-0123456789abcdef0123"
	masterKey     = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	webhookSecret = "whsec_faults_0123456789"
	service       = "svc"
	coreTimeout   = 2 * time.Second // the edge's wait for core: a frozen core answers API_SERVER_ERROR after it
)

// stack is the platform as real processes: the dev broker, a ClickHouse
// server, core, the usage tier, the dispatcher and the edge, with an HTTPS
// webhook receiver in the test.
type stack struct {
	broker, core, usage, dispatcher, edge *testnet.Proc
	ch                                    *clickhouse.Server
	ledger                                *chstore.Store
	rcv                                   *receiver
	kafka                                 string
	url, coreURL, usageURL, dispURL       string
	coreDir                               string // core's data: its bbolt file
	smallDisk                             string // why coreDir is not a disk of its own, or ""
	client                                *http.Client
}

func startStack(t *testing.T, branches []string) *stack {
	t.Helper()
	s := &stack{rcv: newReceiver(t)}
	s.kafka = testnet.FreeAddr(t)
	coreAddr, edgeAddr := testnet.FreeAddr(t), testnet.FreeAddr(t)
	usageAddr, dispAddr := testnet.FreeAddr(t), testnet.FreeAddr(t)
	s.url, s.coreURL = "http://"+edgeAddr, "http://"+coreAddr
	s.usageURL, s.dispURL = "http://"+usageAddr, "http://"+dispAddr
	s.client = &http.Client{Timeout: clientTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	t.Cleanup(s.client.CloseIdleConnections)

	dataDir := func(name string) string {
		d := filepath.Join(t.TempDir(), name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		return d
	}
	coreDir := dataDir("core")
	s.coreDir = coreDir
	s.mountSmallDisk(t)
	seed := filepath.Join(coreDir, "seed.json")
	if err := os.WriteFile(seed, seedJSON(branches), 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"SLIP_KAFKA_ADDR=" + s.kafka, "SLIP_EDGE_TOKEN=" + edgeToken,
		"SLIP_EGRESS_ALLOW_CIDRS=127.0.0.0/8", "SLIP_EGRESS_CA_FILE=" + s.rcv.caFile}

	s.broker = testnet.Start(t, testnet.Build(t, "deploy/cmd/broker"), append(common,
		"SLIP_DATA_DIR="+dataDir("broker"), "SLIP_BROKER_PARTITIONS=3", "SLIP_BROKER_MEMORY=false")...)
	testnet.WaitTCP(t, s.kafka, 30*time.Second)
	s.ch = clickhouse.StartTest(t)
	var err error
	if s.ledger, err = chstore.Open(chstore.Options{Addrs: []string{s.ch.Addr()}, Database: "slip", Username: "default"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.ledger.Close() })

	s.core = testnet.Start(t, testnet.Build(t, "core/cmd/core"), append(common, "SLIP_DATA_DIR="+coreDir,
		"SLIP_CORE_ADDR="+coreAddr, "SLIP_SEED="+seed, "SLIP_MASTER_KEY="+masterKey, "SLIP_BANK=sandbox",
		"SLIP_VERIFY_RETRY_SCHEDULE=100ms,100ms,100ms,100ms", "SLIP_WEBHOOK_RETRY_SCHEDULE=200ms,500ms,1s")...)
	testnet.WaitHTTP(t, s.coreURL+"/health", 30*time.Second, s.core)
	s.usage = testnet.Start(t, testnet.Build(t, "usage/cmd/usage"), append(common, "SLIP_USAGE_ADDR="+usageAddr,
		"SLIP_CLICKHOUSE_ADDR="+s.ch.Addr(), "SLIP_CORE_ADDR="+coreAddr, "SLIP_USAGE_FLUSH=100ms",
		"SLIP_USAGE_RETRY_MAX=1s")...)
	testnet.WaitHTTP(t, s.usageURL+"/health", 60*time.Second, s.usage)
	s.dispatcher = testnet.Start(t, testnet.Build(t, "dispatcher/cmd/dispatcher"), append(common,
		"SLIP_DISPATCHER_ADDR="+dispAddr, "SLIP_WEBHOOK_TIMEOUT=2s")...)
	testnet.WaitHTTP(t, s.dispURL+"/health", 30*time.Second, s.dispatcher)
	s.edge = testnet.Start(t, testnet.Build(t, "edge/cmd/edge"), append(common, "SLIP_EDGE_ADDR="+edgeAddr,
		"SLIP_CORE_ADDR="+coreAddr, "SLIP_EDGE_METRICS_ADDR=off", "SLIP_EDGE_DRAIN=0s", "SLIP_EDGE_AUTH_TTL=1h",
		"SLIP_EDGE_CORE_TIMEOUT="+coreTimeout.String())...)
	testnet.WaitHTTP(t, s.url+"/health", 30*time.Second, s.edge)
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
func seedJSON(keys []string) []byte {
	var bs []string
	for i, key := range keys {
		bs = append(bs, fmt.Sprintf(`{"id":"br-%d","name":"branch %d","main":%v,"key":%q,"active":true,
			"ipAllow":["*"],"limitQuota":null,"webhookUrl":null,"webhookSecret":%q}`, i, i, i == 0, key, webhookSecret))
	}
	return []byte(`{"services":[{"id":"` + service + `","name":"Shop","state":"active","userBanned":false,
	"quota":{"limit":10000000,"cycleAnchorDay":1},"rate":{"bank":100000,"wallet":100000},
	"branches":[` + strings.Join(bs, ",") + `],"b2bClients":[],"bankAccounts":[]}],
	"sandbox":{"notFound":[],"upstreamError":[]}}`)
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
	req, err := http.NewRequest(method, s.url+path, bytes.NewReader(raw))
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
	c := reconcile.Core{Addr: strings.TrimPrefix(s.coreURL, "http://"), Token: edgeToken, Client: s.client}
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
