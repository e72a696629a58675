package scb_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/bank/bankfake"
	"github.com/slipverify/slipverify/core/bank/scb"
	"github.com/slipverify/slipverify/core/bank/upstream"
	"github.com/slipverify/slipverify/core/testnet"
)

type clock = testnet.Clock

func newClock() *clock { return testnet.NewClock(time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)) }

type rig struct {
	fake *bankfake.SCB
	conn *scb.Connector
	now  *clock
}

func newRig(t *testing.T, edit func(*scb.Config)) rig {
	t.Helper()
	pki := bankfake.NewPKI(t)
	fake := bankfake.NewSCB(t, pki)
	now := newClock()
	cfg := scb.Config{
		URL: fake.URL(), APIKey: bankfake.SCBAPIKey, APISecret: bankfake.SCBAPISecret,
		TLS: upstream.TLS{CertFile: pki.CertFile, KeyFile: pki.KeyFile, CAFile: pki.CAFile},
		Now: now.Now, Timeout: 5 * time.Second,
	}
	if edit != nil {
		edit(&cfg)
	}
	c, err := scb.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rig{fake, c, now}
}

const ref = "202310051403SCBQR123"

func TestExamples(t *testing.T) {
	r := newRig(t, nil)
	f := func(bankCode, ref string, want bank.Slip) {
		t.Helper()
		got, err := r.conn.Bank(context.Background(), bankCode, ref)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s: slip\n got %s\nwant %s", ref, got.AppendJSON(nil), want.AppendJSON(nil))
		}
	}
	// Every field a string: "5345.45", "" for the fee.
	f("014", ref, bank.Slip{
		TransRef: ref, Date: "2023-10-05T09:15:00+07:00", CountryCode: "TH",
		Amount: bank.Amount{Amount: 5345.45, Local: bank.LocalAmount{Amount: 5345.45, Currency: "THB"}},
		Ref1:   "REFERENCE1", Ref2: "REFERENCE2", Ref3: "SCB1234",
		Sender: bank.Party{
			Bank:    bank.BankRef{ID: "014", Name: "Siam Commercial Bank", Short: "SCB"},
			Account: bank.Account{Name: bank.AccountName{TH: "นาย สมชาย ใจดี", EN: "SOMCHAI JAIDEE"}, Bank: bank.AccountBank{Type: "BANKAC", Account: "xxx-xxx345-6"}},
		},
		Receiver: bank.Receiver{
			Bank: bank.BankRef{ID: "014", Name: "Siam Commercial Bank", Short: "SCB"},
			Account: bank.Account{Name: bank.AccountName{TH: "บริษัท ตัวอย่าง จำกัด", EN: "EXAMPLE CO LTD"},
				Bank: bank.AccountBank{Type: "BANKAC", Account: "xxx-xxx987-0"}, Proxy: &bank.Proxy{Type: "BILLERID", Account: "123456789012345"}},
		},
	})
	f("025", "2024022923595900SCB1", bank.Slip{
		TransRef: "2024022923595900SCB1", Date: "2024-02-29T23:59:59+07:00", CountryCode: "TH",
		Amount: bank.Amount{Amount: 0.5, Local: bank.LocalAmount{Amount: 0.5, Currency: "THB"}},
		Sender: bank.Party{
			Bank:    bank.BankRef{ID: "025", Name: "Bank of Ayudhya", Short: "BAY"},
			Account: bank.Account{Name: bank.AccountName{TH: "นางสาว กนกพร ม"}, Bank: bank.AccountBank{Type: "BANKAC", Account: "xxx-x-x1111-x"}},
		},
		Receiver: bank.Receiver{
			Account: bank.Account{Name: bank.AccountName{TH: "นาย ธนา ข"}, Proxy: &bank.Proxy{Type: "NATID", Account: "x-xxxx-xxxx1-23-4"}},
		},
	})
	if r.fake.Lookups() != 2 || r.fake.Tokens() != 1 {
		t.Errorf("lookups %d tokens %d, want 2 and 1", r.fake.Lookups(), r.fake.Tokens())
	}
}

func TestConcurrentCallersShareOneToken(t *testing.T) {
	r := newRig(t, nil)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.conn.Bank(context.Background(), "014", ref); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if r.fake.Tokens() != 1 || r.fake.Lookups() != 32 {
		t.Errorf("tokens %d lookups %d, want 1 and 32", r.fake.Tokens(), r.fake.Lookups())
	}
}

func TestTokenRefreshedBeforeExpiry(t *testing.T) {
	r := newRig(t, nil)
	r.fake.SetExpiresIn("600")
	lookup := func() {
		t.Helper()
		if _, err := r.conn.Bank(context.Background(), "014", ref); err != nil {
			t.Fatal(err)
		}
	}
	lookup()
	r.now.Advance(539 * time.Second)
	lookup()
	if r.fake.Tokens() != 1 {
		t.Fatalf("%d tokens before the last minute, want 1", r.fake.Tokens())
	}
	r.now.Advance(2 * time.Second) // the last minute: refreshed behind the old token
	lookup()
	r.now.Advance(50 * time.Second) // the last 10 s: the old token is no longer used
	lookup()
	if r.fake.Tokens() != 2 || r.fake.Requests() != 4 {
		t.Fatalf("%d tokens, %d lookups, want 2 and 4", r.fake.Tokens(), r.fake.Requests())
	}
}

// TestExpiredTokenRepeatsOnce: status 9300 drops the token and repeats the
// lookup once.
func TestExpiredTokenRepeatsOnce(t *testing.T) {
	r := newRig(t, nil)
	r.fake.Inject(bankfake.ExpiredToken)
	if _, err := r.conn.Bank(context.Background(), "014", ref); err != nil {
		t.Fatal(err)
	}
	if r.fake.Requests() != 2 || r.fake.Lookups() != 1 || r.fake.Tokens() != 2 {
		t.Errorf("requests %d lookups %d tokens %d, want 2, 1 and 2", r.fake.Requests(), r.fake.Lookups(), r.fake.Tokens())
	}
	r.fake.Inject(bankfake.ExpiredToken, bankfake.ExpiredToken)
	if _, err := r.conn.Bank(context.Background(), "014", ref); !errors.Is(err, bank.ErrUpstream) {
		t.Fatalf("err %v, want ErrUpstream", err)
	}
	if r.fake.Requests() != 4 {
		t.Errorf("requests %d, want 4", r.fake.Requests())
	}
}

func TestFaults(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   bankfake.Fault
		want    error
		billed  int
		inError []string
	}{
		{"429", bankfake.TooMany, bank.ErrUpstream, 0, []string{"9900", "requestUId"}},
		{"1104", bankfake.NotFound, bank.ErrNotFound, 1, []string{"1104", "requestUId"}},
		{"8503", bankfake.SwitchFailure, bank.ErrUpstream, 1, []string{"8503", "requestUId"}},
		{"slow body", bankfake.SlowBody, bank.ErrUpstream, 1, []string{"may have reached the bank"}},
		{"reset", bankfake.Reset, bank.ErrUpstream, 1, []string{"may have reached the bank"}},
		{"malformed", bankfake.Malformed, bank.ErrUpstream, 1, []string{"malformed reply"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, func(c *scb.Config) { c.Timeout = 500 * time.Millisecond })
			// The kept-alive connection of a first lookup is where net/http
			// would resend a replayable GET after a reset.
			if _, err := r.conn.Bank(context.Background(), "014", ref); err != nil {
				t.Fatal(err)
			}
			r.fake.Inject(tc.fault)
			_, err := r.conn.Bank(context.Background(), "014", ref)
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
			if strings.Contains(err.Error(), bankfake.SCBAPISecret) {
				t.Errorf("error %q shows the secret", err)
			}
		})
	}
}

func TestClientCertificateRequired(t *testing.T) {
	r := newRig(t, func(c *scb.Config) { c.TLS.CertFile, c.TLS.KeyFile = "", "" })
	if _, err := r.conn.Bank(context.Background(), "014", ref); !errors.Is(err, bank.ErrUpstream) {
		t.Fatalf("err %v, want ErrUpstream", err)
	}
	if r.fake.Tokens() != 0 || r.fake.Requests() != 0 {
		t.Errorf("tokens %d requests %d without a client certificate", r.fake.Tokens(), r.fake.Requests())
	}
}

func TestNewReportsEveryProblem(t *testing.T) {
	_, err := scb.New(scb.Config{URL: "https://x/p?q=1", TLS: upstream.TLS{KeyFile: "k", CAFile: "/nonexistent"}})
	for _, want := range []string{"SLIP_SCB_URL", "SLIP_SCB_API_KEY", "SLIP_SCB_API_SECRET", "SLIP_SCB_CERT_FILE and SLIP_SCB_KEY_FILE", "SLIP_SCB_CA_FILE"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %s", err, want)
		}
	}
}

func BenchmarkBank(b *testing.B) {
	pki := bankfake.NewPKI(b)
	fake := bankfake.NewSCB(b, pki)
	c, err := scb.New(scb.Config{
		URL: fake.URL(), APIKey: bankfake.SCBAPIKey, APISecret: bankfake.SCBAPISecret,
		TLS: upstream.TLS{CertFile: pki.CertFile, KeyFile: pki.KeyFile, CAFile: pki.CAFile},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Bank(ctx, "014", ref); err != nil {
			b.Fatal(err)
		}
	}
}
