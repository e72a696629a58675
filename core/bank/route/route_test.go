package route

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/slipverify/slipverify/core/bank"
)

var known = []string{"sandbox", "http", "kbank", "scb"}

func TestParse(t *testing.T) {
	f := func(in string, want Table) {
		t.Helper()
		got, err := Parse(in, known)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %+v, want %+v", in, got, want)
		}
	}
	f("kbank", Table{ByBank: map[string]string{}, Default: "kbank"})
	f("014=scb,*=kbank", Table{ByBank: map[string]string{"014": "scb"}, Default: "kbank"})
	f(" 014 = scb , 004=kbank ", Table{ByBank: map[string]string{"014": "scb", "004": "kbank"}})
}

// TestParseErrors: every problem at once.
func TestParseErrors(t *testing.T) {
	_, err := Parse("14=scb,014=scb,014=kbank,*=kbank,*=scb,xyz,002=citi", known)
	for _, want := range []string{`bank "14"`, "bank 014 listed twice", "* listed twice", `"xyz" is not bank=upstream`, `upstream "citi"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %s", err, want)
		}
	}
	if _, err := Parse("", known); err == nil {
		t.Error("empty list accepted")
	}
}

type named string

func (n named) Bank(context.Context, string, string) (bank.Slip, error) {
	return bank.Slip{TransRef: string(n)}, nil
}
func (n named) Wallet(context.Context, string) (bank.WalletSlip, error) {
	return bank.WalletSlip{TransactionID: string(n)}, nil
}

func TestConnector(t *testing.T) {
	conns := map[string]bank.Connector{"kbank": named("kbank"), "scb": named("scb")}
	tab, _ := Parse("014=scb,*=kbank", known)
	c, err := New(tab, conns)
	if err != nil {
		t.Fatal(err)
	}
	for code, want := range map[string]string{"014": "scb", "004": "kbank", "002": "kbank"} {
		if s, _ := c.Bank(context.Background(), code, "R"); s.TransRef != want {
			t.Errorf("bank %s went to %s, want %s", code, s.TransRef, want)
		}
	}
	if w, _ := c.Wallet(context.Background(), "1"); w.TransactionID != "kbank" {
		t.Errorf("wallet went to %s", w.TransactionID)
	}

	tab, _ = Parse("014=scb", known)
	c, _ = New(tab, conns)
	if _, err := c.Bank(context.Background(), "004", "R"); !errors.Is(err, bank.ErrUpstream) {
		t.Errorf("unrouted bank: %v", err)
	}
	if _, err := c.Wallet(context.Background(), "1"); !errors.Is(err, bank.ErrUpstream) {
		t.Errorf("wallet without *: %v", err)
	}
	if _, err := New(Table{Default: "http"}, conns); err == nil {
		t.Error("missing connector accepted")
	}
}
