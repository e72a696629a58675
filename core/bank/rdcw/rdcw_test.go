package rdcw_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/bank/bankfake"
	"github.com/slipverify/slipverify/core/bank/rdcw"
)

const ref = "015278145821CTF09876"

func newRig(t *testing.T) (*bankfake.RDCW, *rdcw.Connector) {
	t.Helper()
	pki := bankfake.NewPKI(t)
	fake := bankfake.NewRDCW(t, pki)
	c, err := rdcw.New(rdcw.Config{URL: fake.URL(), ClientID: bankfake.RDCWClientID, ClientSecret: bankfake.RDCWClientSecret,
		CAFile: pki.CAFile, Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return fake, c
}

// TestPassThrough: RDCW's envelope around KBank's data object maps as
// KBank's does.
func TestPassThrough(t *testing.T) {
	fake, c := newRig(t)
	s, err := c.Bank(context.Background(), "014", ref)
	if err != nil {
		t.Fatal(err)
	}
	if s.TransRef != ref || s.Date != "2023-10-05T14:03:27+07:00" || s.Amount.Amount != 5345.45 || s.Sender.Bank.Short != "SCB" ||
		s.Sender.Account.Name.TH != "นาย สมชาย ใ" {
		t.Errorf("slip %s", s.AppendJSON(nil))
	}
	s, err = c.Bank(context.Background(), "004", "016143102633ATF01234")
	if err != nil || s.Receiver.Bank.ID != "" || s.Receiver.Account.Proxy == nil || s.Receiver.Account.Proxy.Type != "MSISDN" {
		t.Errorf("promptpay slip %s: %v", s.AppendJSON(nil), err)
	}
	if fake.Lookups() != 2 {
		t.Errorf("%d lookups, want 2", fake.Lookups())
	}
}

func TestFaults(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   bankfake.Fault
		want    error
		inError string
	}{
		{"429", bankfake.TooMany, bank.ErrUpstream, "code 429"},
		{"not found", bankfake.NotFound, bank.ErrNotFound, "valid false"},
		{"20001", bankfake.SwitchFailure, bank.ErrUpstream, "code 20001"},
		{"slow body", bankfake.SlowBody, bank.ErrUpstream, "may have reached the bank"},
		{"reset", bankfake.Reset, bank.ErrUpstream, "may have reached the bank"},
		{"malformed", bankfake.Malformed, bank.ErrUpstream, "malformed reply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake, c := newRig(t)
			if _, err := c.Bank(context.Background(), "014", ref); err != nil {
				t.Fatal(err)
			}
			fake.Inject(tc.fault)
			_, err := c.Bank(context.Background(), "014", ref)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.inError) {
				t.Fatalf("err %v, want %v with %q", err, tc.want, tc.inError)
			}
			if fake.Requests() != 2 {
				t.Errorf("%d requests, want 2: the faulted one was sent again", fake.Requests())
			}
		})
	}
}

func TestNewReportsEveryProblem(t *testing.T) {
	_, err := rdcw.New(rdcw.Config{URL: "suba.rdcw.co.th"})
	for _, want := range []string{"SLIP_RDCW_URL", "SLIP_RDCW_CLIENT_ID", "SLIP_RDCW_CLIENT_SECRET"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %s", err, want)
		}
	}
}
