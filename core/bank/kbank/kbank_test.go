package kbank_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/bank/bankfake"
	"github.com/slipverify/slipverify/core/bank/banktest"
	"github.com/slipverify/slipverify/core/bank/kbank"
	"github.com/slipverify/slipverify/core/bank/upstream"
	"github.com/slipverify/slipverify/core/lib/testnet"
)

// rig is a connector, the fake it asks and its clock, for the tests of
// what only this package's connector is asked (its limits and metrics).
type rig struct {
	fake *bankfake.KBank
	conn *kbank.Connector
	now  *testnet.Clock
}

func newRig(t *testing.T, edit func(*kbank.Config)) rig {
	t.Helper()
	pki := bankfake.NewPKI(t)
	fake := bankfake.NewKBank(t, pki, true)
	now := testnet.NewClock(time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC))
	cfg := config(banktest.Settings{
		URL: fake.URL(), ID: bankfake.KBankClientID, Secret: bankfake.KBankClientSecret,
		TLS: upstream.TLS{CertFile: pki.CertFile, KeyFile: pki.KeyFile, CAFile: pki.CAFile},
		Now: now.Now, Timeout: 5 * time.Second,
	})
	if edit != nil {
		edit(&cfg)
	}
	c, err := kbank.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rig{fake, c, now}
}

// config configures a connector to the KBank fake, which wants the
// sandbox's headers.
func config(s banktest.Settings) kbank.Config {
	return kbank.Config{URL: s.URL, ClientID: s.ID, ClientSecret: s.Secret, TestMode: true, Transport: upstream.Transport{TLS: s.TLS, Timeout: s.Timeout, Now: s.Now}}
}

// suite is KBank's part in the conformance suite.
var suite = banktest.Suite{
	Prefix: "SLIP_KBANK", Credentials: [2]string{"CLIENT_ID", "CLIENT_SECRET"},
	ID: bankfake.KBankClientID, Secret: bankfake.KBankClientSecret,
	Fake:   func(t bankfake.T, pki *bankfake.PKI) banktest.Fake { return bankfake.NewKBank(t, pki, true) },
	New:    func(s banktest.Settings) (bank.Connector, error) { return kbank.New(config(s)) },
	Tokens: true, ClientCert: true, Trace: "rqUID",
	Codes: map[bankfake.Fault][]string{
		bankfake.TooMany:       {"HTTP 429"},
		bankfake.NotFound:      {"8404", "kbankTxnId"},
		bankfake.SwitchFailure: {"8503", "kbankTxnId"},
	},
	Slips: bankfake.KBankSlips,
}

func TestConformance(t *testing.T) { suite.Run(t) }

func BenchmarkBank(b *testing.B) { suite.Benchmark(b) }

// TestCircuitAndMetrics: after FailuresToOpen upstream errors in a row the
// connector answers at once without asking the bank, and the metrics count
// lookups by outcome, refusals and token refreshes.
func TestCircuitAndMetrics(t *testing.T) {
	set := metrics.NewSet()
	r := newRig(t, func(c *kbank.Config) {
		c.Limits = upstream.Limits{FailuresToOpen: 2, OpenFor: time.Minute}
		c.Metrics = set
	})
	ctx := context.Background()
	if _, err := r.conn.Bank(ctx, "014", "015278145821CTF09876"); err != nil {
		t.Fatal(err)
	}
	r.fake.Inject(bankfake.SwitchFailure, bankfake.SwitchFailure)
	r.conn.Bank(ctx, "014", "015278145821CTF09876")
	r.conn.Bank(ctx, "014", "015278145821CTF09876")
	_, err := r.conn.Bank(ctx, "014", "015278145821CTF09876")
	if !errors.Is(err, bank.ErrUpstream) || !errors.Is(err, upstream.ErrRefused) {
		t.Fatalf("open circuit: %v", err)
	}
	if r.fake.Requests() != 3 {
		t.Errorf("%d requests, want 3: the open circuit asked the bank", r.fake.Requests())
	}
	r.now.Advance(time.Minute)
	if _, err := r.conn.Bank(ctx, "014", "015278145821CTF09876"); err != nil {
		t.Fatalf("after OpenFor: %v", err)
	}
	var b bytes.Buffer
	set.WritePrometheus(&b)
	for _, want := range []string{
		`slip_core_bank_lookups_total{upstream="kbank",outcome="found"} 2`,
		`slip_core_bank_lookups_total{upstream="kbank",outcome="error"} 2`,
		`slip_core_bank_refused_total{upstream="kbank",reason="circuit"} 1`,
		`slip_core_bank_token_refreshes_total{upstream="kbank"} 1`,
		`slip_core_bank_lookup_duration_seconds_count{upstream="kbank"} 4`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, b.String())
		}
	}
}
