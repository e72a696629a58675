package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/bank/banktest"
	"github.com/slipverify/slipverify/core/lib/testnet"
)

var update = flag.Bool("update", false, "rewrite testdata/synthetic.json")

// exampleConfig is the sandbox section of testdata/seed.example.json, a copy
// of the example seed that the loader must accept.
func exampleConfig(t testing.TB) Config {
	t.Helper()
	raw, err := os.ReadFile("testdata/seed.example.json")
	if err != nil {
		t.Fatal(err)
	}
	var seed struct {
		Sandbox json.RawMessage `json:"sandbox"`
	}
	if err := json.Unmarshal(raw, &seed); err != nil {
		t.Fatal(err)
	}
	var cfg Config
	dec := json.NewDecoder(bytes.NewReader(seed.Sandbox))
	dec.DisallowUnknownFields() // Config must cover the whole section
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("decode sandbox section: %v", err)
	}
	return cfg
}

func newBank(t testing.TB, cfg Config, now func() time.Time) *Bank {
	t.Helper()
	b, err := New(cfg, now)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

func TestExampleSeed(t *testing.T) {
	cfg := exampleConfig(t)
	if cfg.PendingBank != "006" || len(cfg.Slips) != 2 || len(cfg.NotFound) != 2 ||
		len(cfg.UpstreamError) != 1 || len(cfg.Wallet) != 2 {
		t.Fatalf("decoded %+v", cfg)
	}
	b := newBank(t, cfg, testnet.NewClock(time.Date(2026, 11, 20, 11, 36, 0, 0, time.UTC)).Now)
	got, err := b.Bank(context.Background(), "004", "LS2FLLDUC7V3LSUPD7VW")
	if err != nil {
		t.Fatal(err)
	}
	want := bank.Slip{
		TransRef:    "LS2FLLDUC7V3LSUPD7VW",
		Date:        "2026-11-20T11:35:51+07:00",
		CountryCode: "TH",
		Amount:      bank.Amount{Amount: 100.5, Local: bank.LocalAmount{Amount: 100.5, Currency: "THB"}},
		Sender: bank.Party{
			Bank: bank.BankRef{ID: "004", Name: "Kasikorn Bank", Short: "KBANK"},
			Account: bank.Account{
				Name: bank.AccountName{TH: "นาย ทดสอบ ระบบ", EN: "MR. TEST SYSTEM"},
				Bank: bank.AccountBank{Type: "BANKAC", Account: "xxx-x-x1234-x"},
			},
		},
		Receiver: bank.Receiver{
			Bank: bank.BankRef{ID: "014", Name: "Siam Commercial Bank", Short: "SCB"},
			Account: bank.Account{
				Name: bank.AccountName{TH: "บริษัท ทดสอบสลิป จำกัด", EN: "SLIP TEST CO LTD"},
				Bank: bank.AccountBank{Type: "BANKAC", Account: "xxx-x-x5678-x"},
			},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("listed slip\ngot  %+v\nwant %+v", got, want)
	}
	w, err := b.Wallet(context.Background(), "57283950822875")
	if err != nil {
		t.Fatal(err)
	}
	if w != cfg.Wallet[0] {
		t.Errorf("listed wallet slip = %+v, want %+v", w, cfg.Wallet[0])
	}
}

func TestBankAnswers(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.FixedZone("ICT", 7*3600))
	at := func(d time.Duration) string { return t0.Add(d).Format(time.RFC3339) }
	merchant := "KB000001234567"
	cfg := Config{
		PendingBank: "006",
		Slips: []Slip{
			{BankCode: "004", TransRef: "LISTED1", Amount: 100.5, Date: at(0),
				Receiver: bank.Receiver{MerchantID: &merchant}},
			{BankCode: "014", TransRef: "LISTEDREFS", Amount: 20, Date: at(-time.Hour),
				Fee: 5, Ref1: "INV-1", Ref2: "A", Ref3: "B"},
			{BankCode: "006", TransRef: "PENDINGNOW", Amount: 10, Date: at(0)},
			{BankCode: "006", TransRef: "PENDINGFUTURE", Amount: 10, Date: at(time.Second)},
			{BankCode: "006", TransRef: "PENDINGEDGE", Amount: 10, Date: at(-PendingWindow + time.Second)},
			{BankCode: "006", TransRef: "SETTLEDEDGE", Amount: 10, Date: at(-PendingWindow)},
			{BankCode: "006", TransRef: "SETTLEDOLD", Amount: 10, Date: at(-24 * time.Hour)},
		},
		NotFound:      []string{"NF1"},
		UpstreamError: []string{"UE1"},
	}
	b := newBank(t, cfg, testnet.NewClock(t0).Now)

	tests := []struct {
		name     string
		bankCode string
		transRef string
		wantErr  error
		check    func(t *testing.T, s bank.Slip)
	}{
		{name: "listed", bankCode: "004", transRef: "LISTED1", check: func(t *testing.T, s bank.Slip) {
			if s.Amount != (bank.Amount{Amount: 100.5, Local: bank.LocalAmount{Amount: 100.5, Currency: "THB"}}) ||
				s.CountryCode != "TH" || s.Fee != 0 || s.Ref1 != "" || s.Date != at(0) ||
				s.Receiver.MerchantID == nil || *s.Receiver.MerchantID != merchant {
				t.Errorf("got %+v", s)
			}
		}},
		{name: "listed with fee and refs", bankCode: "014", transRef: "LISTEDREFS", check: func(t *testing.T, s bank.Slip) {
			if s.Fee != 5 || s.Ref1 != "INV-1" || s.Ref2 != "A" || s.Ref3 != "B" {
				t.Errorf("got %+v", s)
			}
		}},
		{name: "listed asked of another bank", bankCode: "002", transRef: "LISTED1", wantErr: bank.ErrNotFound},
		{name: "pending bank, dated now", bankCode: "006", transRef: "PENDINGNOW", wantErr: bank.ErrPending},
		{name: "pending bank, dated after now", bankCode: "006", transRef: "PENDINGFUTURE", wantErr: bank.ErrPending},
		{name: "pending bank, 4m59s old", bankCode: "006", transRef: "PENDINGEDGE", wantErr: bank.ErrPending},
		{name: "pending bank, 5m old", bankCode: "006", transRef: "SETTLEDEDGE"},
		{name: "pending bank, a day old", bankCode: "006", transRef: "SETTLEDOLD"},
		{name: "recent slip of another bank", bankCode: "004", transRef: "LISTED1"},
		{name: "scripted not found", bankCode: "004", transRef: "NF1", wantErr: bank.ErrNotFound},
		{name: "scripted not found, any bank", bankCode: "099", transRef: "NF1", wantErr: bank.ErrNotFound},
		{name: "scripted upstream error", bankCode: "004", transRef: "UE1", wantErr: bank.ErrUpstream},
		{name: "synthetic", bankCode: "025", transRef: "ANYTHING123", check: func(t *testing.T, s bank.Slip) {
			if s.Sender.Bank != (bank.BankRef{ID: "025", Name: "Bank of Ayudhya", Short: "BAY"}) {
				t.Errorf("sender bank = %+v", s.Sender.Bank)
			}
		}},
		{name: "synthetic of the pending bank is not pending", bankCode: "006", transRef: "ANYTHING123"},
		{name: "unknown bank", bankCode: "099", transRef: "ANYTHING123", wantErr: bank.ErrNotFound},
		{name: "PromptPay cannot send", bankCode: bank.PromptPay, transRef: "ANYTHING123", wantErr: bank.ErrNotFound},
		{name: "empty bank", bankCode: "", transRef: "ANYTHING123", wantErr: bank.ErrNotFound},
		{name: "empty transRef", bankCode: "004", transRef: "", wantErr: bank.ErrNotFound},
		{name: "transRef with a space", bankCode: "004", transRef: "AB CD", wantErr: bank.ErrNotFound},
		{name: "transRef not ASCII", bankCode: "004", transRef: "อ123", wantErr: bank.ErrNotFound},
		{name: "transRef of 99", bankCode: "004", transRef: strings.Repeat("A", 99)},
		{name: "transRef of 100", bankCode: "004", transRef: strings.Repeat("A", 100), wantErr: bank.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := b.Bank(context.Background(), tt.bankCode, tt.transRef)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if !reflect.DeepEqual(s, bank.Slip{}) {
					t.Errorf("slip with error: %+v", s)
				}
				return
			}
			if s.TransRef != tt.transRef {
				t.Errorf("transRef = %q, want %q", s.TransRef, tt.transRef)
			}
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}

func TestPendingFollowsTheClock(t *testing.T) {
	c := testnet.NewClock(time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC))
	b := newBank(t, Config{
		PendingBank: "006",
		Slips:       []Slip{{BankCode: "006", TransRef: "P1", Amount: 1, Date: "2026-11-22T10:00:00+07:00"}},
	}, c.Now)
	steps := []struct {
		advance time.Duration
		wantErr error
	}{
		{0, bank.ErrPending},
		{4*time.Minute + 59*time.Second, bank.ErrPending},
		{time.Second, nil},
		{time.Hour, nil},
	}
	for _, s := range steps {
		c.Advance(s.advance)
		_, err := b.Bank(context.Background(), "006", "P1")
		if !errors.Is(err, s.wantErr) || (s.wantErr == nil && err != nil) {
			t.Errorf("at %v: err = %v, want %v", c.Now(), err, s.wantErr)
		}
	}
}

func TestWalletAnswers(t *testing.T) {
	listed := bank.WalletSlip{TransactionID: "111", Amount: 50, Date: "2026-11-20T11:35:51+07:00",
		Sender: bank.WalletParty{Name: "ก", Phone: "081-xxx-1234"}, Receiver: bank.WalletParty{Name: "ข", Phone: "089-xxx-5678"}}
	b := newBank(t, Config{
		Wallet:        []bank.WalletSlip{listed},
		NotFound:      []string{"222"},
		UpstreamError: []string{"333"},
	}, nil)
	tests := []struct {
		id      string
		want    *bank.WalletSlip
		wantErr error
	}{
		{id: "111", want: &listed},
		{id: "222", wantErr: bank.ErrNotFound},
		{id: "333", wantErr: bank.ErrUpstream},
		{id: "57283950822875"}, // synthetic
		{id: "", wantErr: bank.ErrNotFound},
		{id: "12 34", wantErr: bank.ErrNotFound},
	}
	for _, tt := range tests {
		got, err := b.Wallet(context.Background(), tt.id)
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
			t.Errorf("Wallet(%q) err = %v, want %v", tt.id, err, tt.wantErr)
			continue
		}
		if tt.want != nil && got != *tt.want {
			t.Errorf("Wallet(%q) = %+v, want %+v", tt.id, got, *tt.want)
		}
		if err == nil && got.TransactionID != tt.id {
			t.Errorf("Wallet(%q).TransactionID = %q", tt.id, got.TransactionID)
		}
	}
}

func TestCancelledContext(t *testing.T) {
	b := newBank(t, exampleConfig(t), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Bank(ctx, "004", "LS2FLLDUC7V3LSUPD7VW"); !errors.Is(err, bank.ErrUpstream) || !errors.Is(err, context.Canceled) {
		t.Errorf("Bank err = %v, want ErrUpstream and context.Canceled", err)
	}
	if _, err := b.Wallet(ctx, "57283950822875"); !errors.Is(err, bank.ErrUpstream) || !errors.Is(err, context.Canceled) {
		t.Errorf("Wallet err = %v, want ErrUpstream and context.Canceled", err)
	}
}

func TestNewReportsEveryProblem(t *testing.T) {
	good := Slip{BankCode: "004", TransRef: "OK1", Amount: 1, Date: "2026-11-20T11:35:51+07:00"}
	goodWallet := bank.WalletSlip{TransactionID: "W1", Amount: 1, Date: "2026-11-20T11:35:51+07:00"}
	tests := []struct {
		name string
		cfg  Config
		want []string // each must appear in the error
	}{
		{name: "empty config is valid", cfg: Config{}},
		{name: "valid", cfg: Config{PendingBank: "006", Slips: []Slip{good}, Wallet: []bank.WalletSlip{goodWallet},
			NotFound: []string{"NF"}, UpstreamError: []string{"UE"}}},
		{name: "many problems", cfg: Config{
			PendingBank: "999",
			Slips: []Slip{
				{BankCode: "XYZ", TransRef: "A", Amount: 1, Date: good.Date},
				{BankCode: "004", TransRef: "B", Amount: 0, Date: good.Date},
				{BankCode: "004", TransRef: "C", Amount: -3, Date: good.Date},
				{BankCode: "004", TransRef: "D", Amount: 1, Date: "2026-11-20 11:35:51"},
				{BankCode: "004", TransRef: "A", Amount: 1, Date: good.Date},
				{BankCode: "004", TransRef: "", Amount: 1, Date: good.Date},
				{BankCode: "004", TransRef: "E", Amount: 1, Date: good.Date, Fee: -1},
				{BankCode: bank.PromptPay, TransRef: "F", Amount: 1, Date: good.Date},
				{BankCode: "004", TransRef: "G", Amount: math.NaN(), Date: good.Date},
			},
			NotFound:      []string{"B", "NF", "X Y"},
			UpstreamError: []string{"NF", "W1"},
			Wallet: []bank.WalletSlip{
				goodWallet,
				{TransactionID: "W2", Amount: 0, Date: goodWallet.Date},
				{TransactionID: "W3", Amount: 1, Date: "yesterday"},
				{TransactionID: "W1", Amount: 1, Date: goodWallet.Date},
			},
		}, want: []string{
			`pendingBank: no sending bank has code "999"`,
			`slips[0].bankCode: no sending bank has code "XYZ"`,
			`slips[1].amount: 0 is not greater than 0`,
			`slips[2].amount: -3 is not greater than 0`,
			`slips[3].date: "2026-11-20 11:35:51" is not RFC 3339`,
			`slips[4]: "A" is already listed in slips[0]`,
			`slips[5].transRef: "" is not 1 to 99 printable ASCII characters`,
			`slips[6].fee: -1 is not a finite amount of 0 or more`,
			`slips[7].bankCode: no sending bank has code "PROMPTPAY"`,
			`slips[8].amount: NaN is not greater than 0`,
			`notFound[0]: "B" is already listed in slips[1]`,
			`notFound[2]: "X Y" is not 1 to 99 printable ASCII characters`,
			`upstreamError[0]: "NF" is already listed in notFound[1]`,
			`upstreamError[1]: "W1" is already listed in wallet[0]`,
			`wallet[1].amount: 0 is not greater than 0`,
			`wallet[2].date: "yesterday" is not RFC 3339`,
			`wallet[3]: "W1" is already listed in wallet[0]`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := New(tt.cfg, nil)
			if len(tt.want) == 0 {
				if err != nil || b == nil {
					t.Fatalf("New = %v, %v; want a bank", b, err)
				}
				return
			}
			if err == nil || b != nil {
				t.Fatalf("New = %v, %v; want an error", b, err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Errorf("got %d problems, want %d:\n%v", len(lines), len(tt.want), err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), "sandbox: "+w) {
					t.Errorf("missing problem %q in:\n%v", w, err)
				}
			}
		})
	}
}

func TestConfigChangesAfterNewDoNotLeak(t *testing.T) {
	id := "M1"
	cfg := Config{Slips: []Slip{{BankCode: "004", TransRef: "R1", Amount: 1,
		Date: "2020-01-01T00:00:00+07:00", Receiver: bank.Receiver{MerchantID: &id}}}}
	b := newBank(t, cfg, nil)
	id = "CHANGED"
	cfg.Slips[0].Amount = 99
	s, err := b.Bank(context.Background(), "004", "R1")
	if err != nil {
		t.Fatal(err)
	}
	if *s.Receiver.MerchantID != "M1" || s.Amount.Amount != 1 {
		t.Errorf("answer changed with the config: %+v", s)
	}
}

var (
	maskedAccount = regexp.MustCompile(`^xxx-x-x[0-9]{4}-x$`)
	maskedPhone   = regexp.MustCompile(`^0[689][0-9]-xxx-[0-9]{4}$`)
)

// TestSyntheticSlips checks the promises of synthetic slips over many
// references: determinism across banks and clocks, ranges and formats.
func TestSyntheticSlips(t *testing.T) {
	early := newBank(t, Config{PendingBank: "004"}, testnet.NewClock(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)).Now)
	late := newBank(t, Config{PendingBank: "004"}, testnet.NewClock(time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC)).Now)
	start := time.Date(2020, 1, 1, 0, 0, 0, 0, time.FixedZone("", 7*3600))
	end := start.AddDate(1, 0, 0)
	ctx := context.Background()
	receivers := make(map[string]bool)
	for i := range 2000 {
		code := []string{"002", "004", "014", "030", "098"}[i%5]
		ref := fmt.Sprintf("REF%06dX", i)
		s, err := early.Bank(ctx, code, ref)
		if err != nil {
			t.Fatalf("Bank(%s, %s): %v", code, ref, err)
		}
		again, err := late.Bank(ctx, code, ref)
		if err != nil || !reflect.DeepEqual(s, again) {
			t.Fatalf("Bank(%s, %s) differs between banks and clocks:\n%+v\n%+v", code, ref, s, again)
		}
		if a := s.Amount.Amount; a < 1 || a > 50_000 || a != s.Amount.Local.Amount ||
			math.Abs(a*100-math.Round(a*100)) > 1e-6 || s.Amount.Local.Currency != "THB" {
			t.Errorf("%s: amount %+v", ref, s.Amount)
		}
		d, err := time.Parse(time.RFC3339, s.Date)
		if err != nil || d.Before(start) || !d.Before(end) || !strings.HasSuffix(s.Date, "+07:00") {
			t.Errorf("%s: date %q not in 2020 Bangkok time (%v)", ref, s.Date, err)
		}
		info, _ := bank.Lookup(code)
		if s.Sender.Bank != (bank.BankRef{ID: code, Name: info.NameEN, Short: info.Short}) {
			t.Errorf("%s: sender bank %+v, want %s", ref, s.Sender.Bank, code)
		}
		if rb, ok := bank.Lookup(s.Receiver.Bank.ID); !ok || rb.Short != s.Receiver.Bank.Short {
			t.Errorf("%s: receiver bank %+v not in the catalog", ref, s.Receiver.Bank)
		}
		receivers[s.Receiver.Bank.ID] = true
		for _, acc := range []bank.AccountBank{s.Sender.Account.Bank, s.Receiver.Account.Bank} {
			if acc.Type != "BANKAC" || !maskedAccount.MatchString(acc.Account) {
				t.Errorf("%s: account %+v", ref, acc)
			}
		}
		if s.Sender.Account.Name.TH == "" || s.Sender.Account.Name.EN == "" ||
			s.Receiver.Account.Name.TH == "" || s.Receiver.Account.Name.EN == "" {
			t.Errorf("%s: empty name in %+v", ref, s)
		}
		if s.CountryCode != "TH" || s.Fee != 0 || s.Ref1 != "" || s.Receiver.MerchantID != nil {
			t.Errorf("%s: %+v", ref, s)
		}

		w, err := early.Wallet(ctx, ref)
		if err != nil {
			t.Fatalf("Wallet(%s): %v", ref, err)
		}
		if wa, _ := late.Wallet(ctx, ref); wa != w {
			t.Fatalf("Wallet(%s) differs between banks: %+v, %+v", ref, w, wa)
		}
		if d, err := time.Parse(time.RFC3339, w.Date); err != nil || d.Before(start) || !d.Before(end) {
			t.Errorf("%s: wallet date %q", ref, w.Date)
		}
		if w.Amount < 1 || w.Amount > 50_000 || !maskedPhone.MatchString(w.Sender.Phone) ||
			!maskedPhone.MatchString(w.Receiver.Phone) || w.Sender.Name == "" || w.Receiver.Name == "" {
			t.Errorf("%s: wallet %+v", ref, w)
		}
	}
	if len(receivers) != len(receiverRefs) {
		t.Errorf("receiver banks used: %d of %d", len(receivers), len(receiverRefs))
	}
	// The hash covers the bank: one reference at two banks differs.
	a, _ := early.Bank(ctx, "004", "SAMEREF")
	b, _ := early.Bank(ctx, "014", "SAMEREF")
	if a.Amount == b.Amount && a.Date == b.Date {
		t.Errorf("same amount and date for two banks: %+v", a)
	}
}

// goldenCase is one entry of testdata/synthetic.json.
type goldenCase struct {
	BankCode      string           `json:"bankCode,omitempty"`
	TransRef      string           `json:"transRef,omitempty"`
	TransactionID string           `json:"transactionId,omitempty"`
	Slip          *bank.Slip       `json:"slip,omitempty"`
	Wallet        *bank.WalletSlip `json:"wallet,omitempty"`
}

// TestSyntheticGolden pins the synthetic derivation: load tests and dev
// stacks have stored these answers, so a change must be deliberate (run
// with -update and say so in the commit).
func TestSyntheticGolden(t *testing.T) {
	b := newBank(t, Config{}, nil)
	ctx := context.Background()
	var got []goldenCase
	for _, r := range []struct{ code, ref string }{
		{"004", "015329083456ATF02384"},
		{"014", "2023112012345678901"},
		{"002", "LSKJGQ1YNJN53BF4N0WV"},
		{"030", "X"},
		{"098", strings.Repeat("9", 99)},
	} {
		s, err := b.Bank(ctx, r.code, r.ref)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, goldenCase{BankCode: r.code, TransRef: r.ref, Slip: &s})
	}
	for _, id := range []string{"57283950822875", "50011234567890"} {
		w, err := b.Wallet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, goldenCase{TransactionID: id, Wallet: &w})
	}
	gotJSON, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	gotJSON = append(gotJSON, '\n')
	const path = "testdata/synthetic.json"
	if *update {
		if err := os.WriteFile(path, gotJSON, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotJSON, want) {
		t.Errorf("synthetic slips changed; if deliberate, run go test -run Golden -update\ngot:\n%s", gotJSON)
	}
}

func TestLookupAllocations(t *testing.T) {
	b := newBank(t, exampleConfig(t), testnet.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)).Now)
	ctx := context.Background()
	tests := []struct {
		name string
		max  float64
		f    func()
	}{
		{"listed", 0, func() { _, _ = b.Bank(ctx, "004", "LS2FLLDUC7V3LSUPD7VW") }},
		{"scripted not found", 0, func() { _, _ = b.Bank(ctx, "004", "NF6URRAO24VO8087SEE8") }},
		{"scripted upstream", 0, func() { _, _ = b.Bank(ctx, "004", "UEBUQFAQDS0EW99SSJRJ") }},
		{"unknown bank", 0, func() { _, _ = b.Bank(ctx, "999", "SOMEREF") }},
		{"synthetic", 1, func() { _, _ = b.Bank(ctx, "014", "SYNTHETIC0001") }},
		{"wallet listed", 0, func() { _, _ = b.Wallet(ctx, "57283950822875") }},
		{"wallet synthetic", 1, func() { _, _ = b.Wallet(ctx, "50011234567890") }},
	}
	for _, tt := range tests {
		if got := testing.AllocsPerRun(100, tt.f); got > tt.max {
			t.Errorf("%s: %v allocations per lookup, want at most %v", tt.name, got, tt.max)
		}
	}
}

func BenchmarkSandboxBank(b *testing.B) {
	c := newBank(b, exampleConfig(b), testnet.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)).Now)
	banktest.Benchmark(b, c, banktest.Refs{ListedBank: "004", ListedRef: "LS2FLLDUC7V3LSUPD7VW", NotFoundRef: "NF6URRAO24VO8087SEE8"})
}
