package scb_test

import (
	"testing"

	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/bank/bankfake"
	"github.com/slipverify/slipverify/core/bank/banktest"
	"github.com/slipverify/slipverify/core/bank/scb"
	"github.com/slipverify/slipverify/core/bank/upstream"
)

// suite is SCB's part in the conformance suite.
var suite = banktest.Suite{
	Prefix: "SLIP_SCB", Credentials: [2]string{"API_KEY", "API_SECRET"},
	ID: bankfake.SCBAPIKey, Secret: bankfake.SCBAPISecret,
	Fake: func(t bankfake.T, pki *bankfake.PKI) banktest.Fake { return bankfake.NewSCB(t, pki) },
	New: func(s banktest.Settings) (bank.Connector, error) {
		return scb.New(scb.Config{URL: s.URL, APIKey: s.ID, APISecret: s.Secret, Transport: upstream.Transport{TLS: s.TLS, Timeout: s.Timeout, Now: s.Now}})
	},
	Tokens: true, ClientCert: true, Trace: "requestUId",
	Codes: map[bankfake.Fault][]string{
		bankfake.TooMany:       {"9900"},
		bankfake.NotFound:      {"1104"},
		bankfake.SwitchFailure: {"8503"},
	},
	Slips: bankfake.SCBSlips,
}

func TestConformance(t *testing.T) { suite.Run(t) }

func BenchmarkBank(b *testing.B) { suite.Benchmark(b) }
