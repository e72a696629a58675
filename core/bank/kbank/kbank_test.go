package kbank_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/bank/bankfake"
	"github.com/slipverify/slipverify/core/bank/kbank"
	"github.com/slipverify/slipverify/core/bank/upstream"
	"github.com/slipverify/slipverify/core/testnet"
)

// clock is a settable clock for token expiry.
type clock = testnet.Clock

func newClock() *clock { return testnet.NewClock(time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)) }

type rig struct {
	fake *bankfake.KBank
	conn *kbank.Connector
	now  *clock
}

func newRig(t *testing.T, edit func(*kbank.Config)) rig {
	t.Helper()
	pki := bankfake.NewPKI(t)
	fake := bankfake.NewKBank(t, pki, true)
	now := newClock()
	cfg := kbank.Config{
		URL: fake.URL(), ClientID: bankfake.KBankClientID, ClientSecret: bankfake.KBankClientSecret,
		TLS:      upstream.TLS{CertFile: pki.CertFile, KeyFile: pki.KeyFile, CAFile: pki.CAFile},
		TestMode: true, Now: now.Now, Timeout: 5 * time.Second,
	}
	if edit != nil {
		edit(&cfg)
	}
	c, err := kbank.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rig{fake, c, now}
}

func ptr(s string) *string { return &s }

func TestExamples(t *testing.T) {
	r := newRig(t, nil)
	ctx := context.Background()
	f := func(bankCode, ref string, want bank.Slip) {
		t.Helper()
		got, err := r.conn.Bank(ctx, bankCode, ref)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s: slip\n got %s\nwant %s", ref, got.AppendJSON(nil), want.AppendJSON(nil))
		}
	}
	f("014", "015278145821CTF09876", bank.Slip{
		TransRef: "015278145821CTF09876", Date: "2023-10-05T14:03:27+07:00", CountryCode: "TH",
		Amount: bank.Amount{Amount: 5345.45, Local: bank.LocalAmount{Amount: 5345.45, Currency: "THB"}},
		Sender: bank.Party{
			Bank:    bank.BankRef{ID: "014", Name: "Siam Commercial Bank", Short: "SCB"},
			Account: bank.Account{Name: bank.AccountName{TH: "นาย สมชาย ใ", EN: "MR. SOMCHAI J"}, Bank: bank.AccountBank{Type: "BANKAC", Account: "xxx-x-x1234-x"}},
		},
		Receiver: bank.Receiver{
			Bank:    bank.BankRef{ID: "004", Name: "Kasikornbank", Short: "KBANK"},
			Account: bank.Account{Name: bank.AccountName{TH: "บจก. ร้านดี", EN: "RANDEE CO.,LTD."}, Bank: bank.AccountBank{Type: "BANKAC", Account: "xxx-x-x5678-x"}},
		},
	})
	// PromptPay to a phone number: no receiving bank, a masked proxy, null refs.
	f("004", "016143102633ATF01234", bank.Slip{
		TransRef: "016143102633ATF01234", Date: "2024-02-29T23:59:59+07:00", CountryCode: "TH",
		Amount: bank.Amount{Amount: 100, Local: bank.LocalAmount{Amount: 100, Currency: "THB"}},
		Sender: bank.Party{
			Bank:    bank.BankRef{ID: "004", Name: "Kasikornbank", Short: "KBANK"},
			Account: bank.Account{Name: bank.AccountName{TH: "น.ส. มาลี ร", EN: "MISS MALEE R"}, Bank: bank.AccountBank{Type: "BANKAC", Account: "xxx-x-x9012-x"}},
		},
		Receiver: bank.Receiver{
			Account: bank.Account{Name: bank.AccountName{TH: "นาย วิชัย ส"}, Proxy: &bank.Proxy{Type: "MSISDN", Account: "xxx-xxx-5678"}},
		},
	})
	f("006", "202401011234KBQR0001", bank.Slip{
		TransRef: "202401011234KBQR0001", Date: "2024-01-01T00:00:01+07:00", CountryCode: "TH",
		Amount: bank.Amount{Amount: 0.1, Local: bank.LocalAmount{Amount: 0.1, Currency: "THB"}},
		Ref1:   "INV20240101", Ref2: "0001",
		Sender: bank.Party{
			Bank:    bank.BankRef{ID: "006", Name: "Krung Thai Bank", Short: "KTB"},
			Account: bank.Account{Name: bank.AccountName{TH: "นาง ประภาพร ศรีสุข"}, Bank: bank.AccountBank{Type: "BANKAC", Account: "xxx-x-x3456-x"}},
		},
		Receiver: bank.Receiver{
			Bank: bank.BankRef{ID: "004", Name: "Kasikornbank", Short: "KBANK"},
			Account: bank.Account{Name: bank.AccountName{TH: "ร้านกาแฟ ดอยช้าง", EN: "DOI CHAANG COFFEE"},
				Bank: bank.AccountBank{Type: "BANKAC", Account: "xxx-x-x7890-x"}, Proxy: &bank.Proxy{Type: "BILLERID", Account: "010555xxxxxx401"}},
			MerchantID: ptr("KB000001234567"),
		},
	})
	if got := r.fake.Lookups(); got != 3 {
		t.Errorf("bank ran %d lookups for 3 verifications, want 3", got)
	}
	if got := r.fake.Tokens(); got != 1 {
		t.Errorf("%d tokens fetched, want 1", got)
	}
}

func TestNotFoundIsNotRepeated(t *testing.T) {
	r := newRig(t, nil)
	_, err := r.conn.Bank(context.Background(), "004", "NOSUCHREF0001")
	if !errors.Is(err, bank.ErrNotFound) {
		t.Fatalf("err %v, want ErrNotFound", err)
	}
	if r.fake.Requests() != 1 {
		t.Errorf("%d lookups sent, want 1", r.fake.Requests())
	}
}

// TestConcurrentCallersShareOneToken: callers that find no token wait for
// one fetch.
func TestConcurrentCallersShareOneToken(t *testing.T) {
	r := newRig(t, nil)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.conn.Bank(context.Background(), "014", "015278145821CTF09876"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := r.fake.Tokens(); got != 1 {
		t.Errorf("%d token fetches for 32 concurrent callers, want 1", got)
	}
	if got := r.fake.Lookups(); got != 32 {
		t.Errorf("%d lookups, want 32", got)
	}
}

func TestTokenRefreshedBeforeExpiry(t *testing.T) {
	for _, expires := range []any{"100", 100, 100.0, " 100 "} {
		t.Run(fmt.Sprint(expires), func(t *testing.T) {
			r := newRig(t, nil)
			r.fake.SetExpiresIn(expires)
			lookup := func() {
				t.Helper()
				if _, err := r.conn.Bank(context.Background(), "014", "015278145821CTF09876"); err != nil {
					t.Fatal(err)
				}
			}
			lookup()
			r.now.Advance(79 * time.Second)
			lookup()
			if got := r.fake.Tokens(); got != 1 {
				t.Fatalf("at 79 s of 100: %d tokens, want 1", got)
			}
			r.now.Advance(2 * time.Second) // 81 s: the old token goes on, a new one is fetched behind
			lookup()
			r.now.Advance(15 * time.Second) // 96 s: the old token is no longer used
			lookup()
			if got := r.fake.Tokens(); got != 2 {
				t.Fatalf("%d tokens, want 2 (one refresh before expiry)", got)
			}
			if r.fake.Requests() != 4 || r.fake.Lookups() != 4 {
				t.Errorf("%d lookups sent, %d run, want 4: every lookup had a valid token", r.fake.Requests(), r.fake.Lookups())
			}
		})
	}
}

// TestExpiredTokenRepeatsOnce: the bank refused the token and ran nothing,
// so the lookup is sent once more with a new token; a second refusal ends.
func TestExpiredTokenRepeatsOnce(t *testing.T) {
	r := newRig(t, nil)
	r.fake.Inject(bankfake.ExpiredToken)
	if _, err := r.conn.Bank(context.Background(), "014", "015278145821CTF09876"); err != nil {
		t.Fatal(err)
	}
	if r.fake.Requests() != 2 || r.fake.Lookups() != 1 || r.fake.Tokens() != 2 {
		t.Errorf("requests %d lookups %d tokens %d, want 2, 1 and 2", r.fake.Requests(), r.fake.Lookups(), r.fake.Tokens())
	}

	r.fake.Inject(bankfake.ExpiredToken, bankfake.ExpiredToken)
	_, err := r.conn.Bank(context.Background(), "014", "015278145821CTF09876")
	if !errors.Is(err, bank.ErrUpstream) {
		t.Fatalf("err %v, want ErrUpstream", err)
	}
	if r.fake.Requests() != 4 {
		t.Errorf("requests %d, want 4: one repeat only", r.fake.Requests())
	}
}

// TestFaults: every fault is one request at the bank, never repeated, and
// the right error; the bank's code and trace ids are in the error text.
func TestFaults(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   bankfake.Fault
		want    error
		billed  int
		inError []string
	}{
		{"429", bankfake.TooMany, bank.ErrUpstream, 0, []string{"HTTP 429", "rqUID"}},
		{"8404", bankfake.NotFound, bank.ErrNotFound, 1, []string{"8404", "kbankTxnId"}},
		{"8503", bankfake.SwitchFailure, bank.ErrUpstream, 1, []string{"8503", "kbankTxnId", "rqUID"}},
		{"slow body", bankfake.SlowBody, bank.ErrUpstream, 1, []string{"may have reached the bank"}},
		{"reset", bankfake.Reset, bank.ErrUpstream, 1, []string{"may have reached the bank"}},
		{"malformed", bankfake.Malformed, bank.ErrUpstream, 1, []string{"malformed reply"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, func(c *kbank.Config) { c.Timeout = 500 * time.Millisecond })
			// A first lookup leaves a kept-alive connection, which
			// net/http would be tempted to retry a request on.
			if _, err := r.conn.Bank(context.Background(), "014", "015278145821CTF09876"); err != nil {
				t.Fatal(err)
			}
			r.fake.Inject(tc.fault)
			_, err := r.conn.Bank(context.Background(), "014", "015278145821CTF09876")
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			for _, s := range tc.inError {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			if got := r.fake.Requests(); got != 2 {
				t.Errorf("%d lookup requests, want 2: the faulted one was sent again", got)
			}
			if got := r.fake.Lookups() - 1; got != tc.billed {
				t.Errorf("%d billed lookups for the fault, want %d", got, tc.billed)
			}
			if strings.Contains(err.Error(), bankfake.KBankClientSecret) {
				t.Errorf("error %q shows the secret", err)
			}
		})
	}
}

// TestClientCertificateRequired: without the client certificate the TLS
// handshake fails and nothing reaches the bank.
func TestClientCertificateRequired(t *testing.T) {
	r := newRig(t, func(c *kbank.Config) { c.TLS.CertFile, c.TLS.KeyFile = "", "" })
	_, err := r.conn.Bank(context.Background(), "014", "015278145821CTF09876")
	if !errors.Is(err, bank.ErrUpstream) {
		t.Fatalf("err %v, want ErrUpstream", err)
	}
	if r.fake.Tokens() != 0 || r.fake.Requests() != 0 {
		t.Errorf("tokens %d requests %d without a client certificate", r.fake.Tokens(), r.fake.Requests())
	}
}

func TestBadLookupIsNotSent(t *testing.T) {
	r := newRig(t, nil)
	for _, in := range [][2]string{{"4", "ABC"}, {"004", ""}, {"004", "A/B"}, {"004", strings.Repeat("A", 65)}} {
		if _, err := r.conn.Bank(context.Background(), in[0], in[1]); !errors.Is(err, bank.ErrUpstream) {
			t.Errorf("%q: err %v, want ErrUpstream", in, err)
		}
	}
	if r.fake.Requests() != 0 || r.fake.Tokens() != 0 {
		t.Errorf("invalid lookups reached the bank: %d requests", r.fake.Requests())
	}
}

func TestNewReportsEveryProblem(t *testing.T) {
	_, err := kbank.New(kbank.Config{URL: "ftp://x", TLS: upstream.TLS{CertFile: "a"}})
	for _, want := range []string{"SLIP_KBANK_URL", "SLIP_KBANK_CLIENT_ID", "SLIP_KBANK_CLIENT_SECRET", "SLIP_KBANK_CERT_FILE and SLIP_KBANK_KEY_FILE"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %s", err, want)
		}
	}
}

func BenchmarkBank(b *testing.B) {
	pki := bankfake.NewPKI(b)
	fake := bankfake.NewKBank(b, pki, false)
	c, err := kbank.New(kbank.Config{
		URL: fake.URL(), ClientID: bankfake.KBankClientID, ClientSecret: bankfake.KBankClientSecret,
		TLS: upstream.TLS{CertFile: pki.CertFile, KeyFile: pki.KeyFile, CAFile: pki.CAFile},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Bank(ctx, "014", "015278145821CTF09876"); err != nil {
			b.Fatal(err)
		}
	}
}

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
