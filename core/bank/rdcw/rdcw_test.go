package rdcw_test

import (
	"testing"

	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/bank/bankfake"
	"github.com/slipverify/slipverify/core/bank/banktest"
	"github.com/slipverify/slipverify/core/bank/rdcw"
)

// suite is RDCW's part in the conformance suite: no token, no client
// certificate, no trace id; KBank's data object in RDCW's envelope maps as
// KBank's does.
var suite = banktest.Suite{
	Prefix: "SLIP_RDCW", Credentials: [2]string{"CLIENT_ID", "CLIENT_SECRET"},
	ID: bankfake.RDCWClientID, Secret: bankfake.RDCWClientSecret,
	Fake: func(t bankfake.T, pki *bankfake.PKI) banktest.Fake { return bankfake.NewRDCW(t, pki) },
	New: func(s banktest.Settings) (bank.Connector, error) {
		return rdcw.New(rdcw.Config{URL: s.URL, ClientID: s.ID, ClientSecret: s.Secret, CAFile: s.TLS.CAFile, Timeout: s.Timeout, Now: s.Now})
	},
	Codes: map[bankfake.Fault][]string{
		bankfake.TooMany:       {"code 429"},
		bankfake.NotFound:      {"valid false"},
		bankfake.SwitchFailure: {"code 20001"},
	},
	Slips: bankfake.KBankSlips,
}

func TestConformance(t *testing.T) { suite.Run(t) }
