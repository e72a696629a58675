package dev_test

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/bank/sandbox"
	"github.com/slipverify/slipverify/core/promptpay"
	"github.com/slipverify/slipverify/core/slip"
)

// listedPayload is the seed's listed KBANK slip (deploy/dev/seed.json),
// 100.50 THB; deploy/dev/slip.png holds it as a QR code.
const listedPayload = "0041000600000101030040220LS2FLLDUC7V3LSUPD7VW5102TH91046AA6"

// matchRef is a transRef whose synthetic slip (sent from SCB, 014) pays the
// seed's linked account acc-demo-1: KBANK, xxx-x-x9933-x, "บริษัท ทดสอบสลิป
// จำกัด". It was found by asking core/bank/sandbox for MATCH000000000,
// MATCH000000001, ... until one did; world.bank checks it still does.
const matchRef = "MATCH001462999"

// TestCommercialClient points a client of the commercial API, written from
// its public docs (compat_client_test.go), at `make run`'s stack with only
// the host of its base URLs changed, and runs every v1 and v2 operation:
// the answers must decode as the docs type them and carry the right values
// (the seed's listed slips as listed, fresh slips as the sandbox bank makes
// them, quota as it was used). Each wrong field is one error naming the
// operation and the field's path; COMPAT_LOG=1 logs every answer as well.
//
// It runs on each store: core on bbolt, and two cores sharing PostgreSQL
// (SLIP_STORE=postgres make run), between which the edge balances.
func TestCommercialClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole stack")
	}
	w := newWorld(t)
	t.Run("bbolt", func(t *testing.T) { commercialClient(t, w, startStack(t, t.TempDir(), freePorts(t))) })
	t.Run("postgres", func(t *testing.T) {
		l := postgresLayout(t)
		commercialClient(t, w, startStack(t, l.dataDir, l.ports, l.settings...))
	})
}

func commercialClient(t *testing.T, w *world, s *stack) {
	host := "http://" + s.addr
	v1 := &Client{BaseURL: host, Key: demoKey}
	apiV1 := &Client{BaseURL: host + "/api/v1", Key: demoKey}
	v2 := &Client{BaseURL: host + "/v2", Key: demoKey}

	t.Run("v1", func(t *testing.T) { v1Suite(t, w, v1, "A") })
	t.Run("api_v1", func(t *testing.T) { v1Suite(t, w, apiV1, "B") })
	t.Run("v2", func(t *testing.T) { v2Suite(t, w, v2, v1) })
}

// ---- what the answers must hold ----

// world is what the stack was started with: the seed and the sandbox bank
// it configures, which says what every slip verifies to.
type world struct {
	bank    *sandbox.Bank
	service string            // the demo service's name
	branch  string            // the main branch's name
	limit   float64           // the demo service's quota limit
	account seedAccount       // acc-demo-1
	wallets []bank.WalletSlip // the seed's listed wallet slips
	proxied []sandbox.Slip    // the seed's listed bank slips with a proxy
	slipPNG []byte            // deploy/dev/slip.png
}

type seedAccount struct {
	ID         string `json:"id"`
	BankCode   string `json:"bankCode"`
	BankNumber string `json:"bankNumber"`
	Name       struct {
		TH string `json:"th"`
		EN string `json:"en"`
	} `json:"name"`
}

func newWorld(t *testing.T) *world {
	t.Helper()
	raw, err := os.ReadFile("seed.json")
	if err != nil {
		t.Fatal(err)
	}
	var seed struct {
		Services []struct {
			ID    string `json:"id"`
			Name  string `json:"name"`
			Quota struct {
				Limit float64 `json:"limit"`
			} `json:"quota"`
			Branches []struct {
				Name string `json:"name"`
				Key  string `json:"key"`
			} `json:"branches"`
			BankAccounts []seedAccount `json:"bankAccounts"`
		} `json:"services"`
		Sandbox sandbox.Config `json:"sandbox"`
	}
	if err := json.Unmarshal(raw, &seed); err != nil {
		t.Fatalf("seed.json: %v", err)
	}
	w := &world{wallets: seed.Sandbox.Wallet}
	for _, ls := range seed.Sandbox.Slips {
		if ls.BankCode != seed.Sandbox.PendingBank && (ls.Sender.Account.Proxy != nil || ls.Receiver.Account.Proxy != nil) {
			w.proxied = append(w.proxied, ls)
		}
	}
	for _, sv := range seed.Services {
		for _, br := range sv.Branches {
			if br.Key == demoKey {
				w.service, w.branch, w.limit = sv.Name, br.Name, sv.Quota.Limit
				for _, a := range sv.BankAccounts {
					if a.ID == "acc-demo-1" {
						w.account = a
					}
				}
			}
		}
	}
	if w.service == "" || w.account.ID == "" || len(w.wallets) < 2 {
		t.Fatal("seed.json: no service with demoKey, no acc-demo-1 or fewer than 2 wallet slips")
	}
	if w.bank, err = sandbox.New(seed.Sandbox, time.Now); err != nil {
		t.Fatal(err)
	}
	if w.slipPNG, err = os.ReadFile("slip.png"); err != nil {
		t.Fatal(err)
	}
	// The headline values, from the seed as written, so the sandbox is not
	// the only witness of what the listed slip is.
	listed := w.slip(t, "004", "LS2FLLDUC7V3LSUPD7VW")
	if listed.Amount.Amount != 100.5 || listed.Receiver.Bank.ID != "014" || listed.Date != "2026-11-20T11:35:51+07:00" {
		t.Fatalf("seed.json's listed KBANK slip changed: %+v", listed)
	}
	m := w.slip(t, "014", matchRef)
	if m.Receiver.Bank.ID != w.account.BankCode || m.Receiver.Account.Name.TH != w.account.Name.TH {
		t.Fatalf("the synthetic slip of %s no longer pays %s: %+v", matchRef, w.account.ID, m.Receiver)
	}
	return w
}

func (w *world) slip(t *testing.T, code, ref string) bank.Slip {
	t.Helper()
	s, err := w.bank.Bank(context.Background(), code, ref)
	if err != nil {
		t.Fatalf("sandbox %s %s: %v", code, ref, err)
	}
	return s
}

func (w *world) wallet(t *testing.T, id string) bank.WalletSlip {
	t.Helper()
	s, err := w.bank.Wallet(context.Background(), id)
	if err != nil {
		t.Fatalf("sandbox wallet %s: %v", id, err)
	}
	return s
}

// bankPayload is the slip QR payload of (code, ref).
func bankPayload(code, ref string) string {
	return slip.Bank{BankCode: code, TransRef: ref}.Encode()
}

// walletPayload is the wallet slip QR payload of w, dated as w is.
func walletPayload(t *testing.T, w bank.WalletSlip) string {
	d, err := time.Parse(time.RFC3339, w.Date)
	if err != nil {
		t.Fatalf("wallet slip date %q: %v", w.Date, err)
	}
	return slip.Wallet{EventType: "P2P", TransactionID: w.TransactionID, Date: d.Format("02012006")}.Encode()
}

// qrPNG is payload drawn as a QR code.
func qrPNG(t *testing.T, payload string) []byte {
	b, err := promptpay.PNG(payload, 0)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ---- checking ----

// check reports, for one operation, each problem of an answer and each
// wrong value, one t.Errorf per field, naming the operation and the path.
type check struct {
	t   *testing.T
	op  string
	bad map[string]bool // paths the decoder already reported
}

// answer starts the check of one answer: it reports a failed request or an
// unexpected HTTP status once (and then the fields are not compared), and
// the decoder's problems one by one. It returns whether to go on.
func answer(t *testing.T, op string, err error, httpStatus, want int, body []byte, problems []string) (check, bool) {
	t.Helper()
	c := check{t: t, op: op, bad: map[string]bool{}}
	if os.Getenv("COMPAT_LOG") != "" { // every answer, to read what was compared
		t.Logf("%s: HTTP %d %s", op, httpStatus, body)
	}
	if err != nil {
		t.Errorf("%s: request failed: %v", op, err)
		return c, false
	}
	if httpStatus != want {
		t.Errorf("%s: HTTP %d, want %d: %.600s", op, httpStatus, want, body)
		return c, false
	}
	for _, p := range problems {
		t.Errorf("%s: %s", op, p)
		path, _, _ := strings.Cut(p, ":")
		c.bad[path] = true
	}
	return c, true
}

// skip reports whether path or one of its parents was already reported.
func (c check) skip(path string) bool {
	for p := path; p != ""; {
		if c.bad[p] {
			return true
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return false
}

func (c check) eq(path string, got, want any) {
	c.t.Helper()
	if c.skip(path) {
		return
	}
	if !reflect.DeepEqual(got, want) {
		c.t.Errorf("%s: %s = %#v, want %#v", c.op, path, got, want)
	}
}

// date checks that got parses as RFC 3339 and is the instant want is.
func (c check) date(path, got, want string) {
	c.t.Helper()
	if c.skip(path) {
		return
	}
	g, err := time.Parse(time.RFC3339, got)
	if err != nil {
		c.t.Errorf("%s: %s = %q does not parse as RFC 3339: %v", c.op, path, got, err)
		return
	}
	if w, _ := time.Parse(time.RFC3339, want); !g.Equal(w) {
		c.t.Errorf("%s: %s = %q, want the instant %q", c.op, path, got, want)
	}
}

// optionalDate checks a nullable date: null, or RFC 3339.
func (c check) optionalDate(path string, got *string) {
	c.t.Helper()
	if got == nil || c.skip(path) {
		return
	}
	if _, err := time.Parse(time.RFC3339, *got); err != nil {
		c.t.Errorf("%s: %s = %q does not parse as RFC 3339: %v", c.op, path, *got, err)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// slipData compares a SlipData (v1 data, v2 rawSlip) at path with the slip
// the sandbox bank answers, verified from payload.
func (c check) slipData(path string, got SlipData, want bank.Slip, payload string) {
	c.t.Helper()
	c.eq(path+".payload", got.Payload, payload)
	c.eq(path+".transRef", got.TransRef, want.TransRef)
	c.date(path+".date", got.Date, want.Date)
	c.eq(path+".countryCode", got.CountryCode, want.CountryCode)
	c.eq(path+".amount.amount", got.Amount.Amount, want.Amount.Amount)
	c.eq(path+".amount.local.amount", got.Amount.Local.Amount, want.Amount.Local.Amount)
	c.eq(path+".amount.local.currency", got.Amount.Local.Currency, want.Amount.Local.Currency)
	c.eq(path+".fee", got.Fee, want.Fee)
	c.eq(path+".ref1", got.Ref1, want.Ref1)
	c.eq(path+".ref2", got.Ref2, want.Ref2)
	c.eq(path+".ref3", got.Ref3, want.Ref3)
	c.party(path+".sender", got.Sender.Bank, got.Sender.Account, want.Sender.Bank, want.Sender.Account)
	c.party(path+".receiver", got.Receiver.Bank, got.Receiver.Account, want.Receiver.Bank, want.Receiver.Account)
	c.eq(path+".receiver.merchantId", deref(got.Receiver.MerchantID), deref(want.Receiver.MerchantID))
}

func (c check) party(path string, gb PartyBank, ga PartyAccount, wb bank.BankRef, wa bank.Account) {
	c.t.Helper()
	c.eq(path+".bank.id", gb.ID, wb.ID)
	c.eq(path+".bank.short", gb.Short, wb.Short)
	if gb.Name != "" || wb.Name != "" { // spec 2.1: some answers carry only id and short
		c.eq(path+".bank.name", gb.Name, wb.Name)
	}
	c.eq(path+".account.name.th", ga.Name.TH, wa.Name.TH)
	c.eq(path+".account.name.en", ga.Name.EN, wa.Name.EN)
	if ga.Bank != nil {
		c.eq(path+".account.bank.type", ga.Bank.Type, wa.Bank.Type)
		c.eq(path+".account.bank.account", ga.Bank.Account, wa.Bank.Account)
	}
	if wa.Proxy == nil {
		c.eq(path+".account.proxy", ga.Proxy, (*Proxy)(nil))
	} else if ga.Proxy == nil {
		c.t.Errorf("%s: %s.account.proxy missing, want %+v", c.op, path, *wa.Proxy)
	} else {
		c.eq(path+".account.proxy.type", ga.Proxy.Type, wa.Proxy.Type)
		c.eq(path+".account.proxy.account", ga.Proxy.Account, wa.Proxy.Account)
	}
}

// walletData compares a TrueMoneySlipData at path with the wallet slip.
func (c check) walletData(path string, got TrueMoneySlipData, want bank.WalletSlip) {
	c.t.Helper()
	c.eq(path+".transactionId", got.TransactionID, want.TransactionID)
	c.date(path+".date", got.Date, want.Date)
	c.eq(path+".amount", got.Amount, want.Amount)
	c.eq(path+".sender.name", got.Sender.Name, want.Sender.Name)
	c.eq(path+".receiver.name", got.Receiver.Name, want.Receiver.Name)
	c.eq(path+".receiver.phone", got.Receiver.Phone, want.Receiver.Phone)
}

// v1Slip checks a v1 bank answer: 200 with the slip, or, with dup, 400
// duplicate_slip with the slip as data.
func v1Slip(t *testing.T, op string, a V1Answer[SlipData], err error, dup bool, want bank.Slip, payload string) {
	t.Helper()
	status, msg := 200, ""
	if dup {
		status, msg = 400, "duplicate_slip"
	}
	c, ok := answer(t, op, err, a.HTTPStatus, status, a.Body, a.Problems)
	if !ok {
		return
	}
	if dup {
		c.eq("message", a.Message, msg)
	}
	if a.Data != nil {
		c.slipData("data", *a.Data, want, payload)
	}
}

// v1Wallet checks a v1 wallet answer likewise.
func v1Wallet(t *testing.T, op string, a V1Answer[TrueMoneySlipData], err error, dup bool, want bank.WalletSlip) {
	t.Helper()
	status := 200
	if dup {
		status = 400
	}
	c, ok := answer(t, op, err, a.HTTPStatus, status, a.Body, a.Problems)
	if !ok {
		return
	}
	if dup {
		c.eq("message", a.Message, "duplicate_slip")
	}
	if a.Data != nil {
		c.walletData("data", *a.Data, want)
	}
}

// me reads and checks v1 GET /me; ok is false when it could not be read.
func (w *world) me(t *testing.T, cl *Client, op string) (MeData, bool) {
	t.Helper()
	a, err := cl.Me(t.Context())
	c, ok := answer(t, op, err, a.HTTPStatus, 200, a.Body, a.Problems)
	if !ok || a.Data == nil {
		return MeData{}, false
	}
	d := *a.Data
	c.eq("data.application", d.Application, w.service)
	c.eq("data.maxQuota", deref(d.MaxQuota), w.limit)
	if d.MaxQuota != nil {
		c.eq("data.remainingQuota", deref(d.RemainingQuota), *d.MaxQuota-d.UsedQuota)
	}
	c.eq("data.expiredAt", deref(d.ExpiredAt), nil) // the seed's service has no end date
	c.eq("data.currentCredit", d.CurrentCredit, 0.0)
	return d, len(a.Problems) == 0
}

// ---- v1 ----

// v1Suite runs every v1 operation through cl; tag keeps its fresh slips
// apart from another run's.
func v1Suite(t *testing.T, w *world, cl *Client, tag string) {
	ctx := t.Context()
	yes, no := true, false
	listed := w.slip(t, "004", "LS2FLLDUC7V3LSUPD7VW")

	w.me(t, cl, "GET /me")

	// The listed slip: fresh on the first run, verified before on the
	// second; without checkDuplicate both answer it.
	a, err := cl.VerifyByPayload(ctx, listedPayload, nil)
	v1Slip(t, "GET /verify?payload", a, err, false, listed, listedPayload)
	if a.Data != nil {
		// What the official node reads to route a slip.
		if a.Data.Receiver.Bank.ID != "014" || a.Data.Amount.Amount != 100.5 {
			t.Errorf("GET /verify?payload: data.receiver.bank.id = %q, data.amount.amount = %v; want \"014\", 100.5",
				a.Data.Receiver.Bank.ID, a.Data.Amount.Amount)
		}
	}
	a, err = cl.VerifyByPayload(ctx, listedPayload, &no)
	v1Slip(t, "GET /verify?payload&checkDuplicate=false", a, err, false, listed, listedPayload)
	a, err = cl.VerifyByPayload(ctx, listedPayload, &yes)
	v1Slip(t, "GET /verify?payload&checkDuplicate=true (repeat)", a, err, true, listed, listedPayload)

	a, err = cl.Verify(ctx, map[string]any{"payload": listedPayload})
	v1Slip(t, "POST /verify {payload}", a, err, false, listed, listedPayload)
	a, err = cl.Verify(ctx, map[string]any{"payload": listedPayload, "checkDuplicate": true})
	v1Slip(t, "POST /verify {payload, checkDuplicate: true} (repeat)", a, err, true, listed, listedPayload)

	a, err = cl.Verify(ctx, map[string]any{"image": base64Image(w.slipPNG, "")})
	v1Slip(t, "POST /verify {image: base64}", a, err, false, listed, listedPayload)
	a, err = cl.Verify(ctx, map[string]any{"image": base64Image(w.slipPNG, "image/png"), "checkDuplicate": false})
	v1Slip(t, "POST /verify {image: data:image/png;base64,…}", a, err, false, listed, listedPayload)
	a, err = cl.Verify(ctx, map[string]any{"image": base64Image(w.slipPNG, "image/png"), "checkDuplicate": true})
	v1Slip(t, "POST /verify {image: data URI, checkDuplicate: true} (repeat)", a, err, true, listed, listedPayload)
	// POST /verify {url}: image URLs to loopback are refused unless
	// SLIP_EGRESS_ALLOW_CIDRS allows them, so make run's stack cannot fetch
	// one the test serves; not run.

	a, err = cl.VerifyByFile(ctx, "slip.png", w.slipPNG, nil)
	v1Slip(t, "POST /verify multipart file", a, err, false, listed, listedPayload)
	a, err = cl.VerifyByFile(ctx, "slip.png", w.slipPNG, &yes)
	v1Slip(t, "POST /verify multipart file, checkDuplicate=true (repeat)", a, err, true, listed, listedPayload)

	// The seed's listed slips whose parties carry a PromptPay proxy: v1
	// answers it as account.proxy {type, account}.
	for _, ls := range w.proxied {
		p := bankPayload(ls.BankCode, ls.TransRef)
		a, err = cl.VerifyByPayload(ctx, p, nil)
		v1Slip(t, "GET /verify?payload (listed slip with a proxy, "+ls.TransRef+")", a, err, false, w.slip(t, ls.BankCode, ls.TransRef), p)
	}

	// A fresh slip with checkDuplicate: answered, and it uses one of the
	// quota; again: duplicate_slip with the slip as first verified.
	ref := "COMPAT" + tag + "V1FRESH01"
	fresh, payload := w.slip(t, "014", ref), bankPayload("014", ref)
	me0, ok0 := w.me(t, cl, "GET /me (before a fresh verification)")
	a, err = cl.Verify(ctx, map[string]any{"payload": payload, "checkDuplicate": true})
	v1Slip(t, "POST /verify {payload, checkDuplicate: true} (fresh)", a, err, false, fresh, payload)
	if me1, ok := w.me(t, cl, "GET /me (after a fresh verification)"); ok && ok0 {
		if me1.UsedQuota != me0.UsedQuota+1 {
			t.Errorf("GET /me: data.usedQuota = %v after one fresh verification, want %v (was %v)", me1.UsedQuota, me0.UsedQuota+1, me0.UsedQuota)
		}
		if me0.RemainingQuota != nil && me1.RemainingQuota != nil && *me1.RemainingQuota != *me0.RemainingQuota-1 {
			t.Errorf("GET /me: data.remainingQuota = %v after one fresh verification, want %v", *me1.RemainingQuota, *me0.RemainingQuota-1)
		}
	}
	a, err = cl.Verify(ctx, map[string]any{"payload": payload, "checkDuplicate": true})
	v1Slip(t, "POST /verify {payload, checkDuplicate: true} (fresh slip, again)", a, err, true, fresh, payload)
	a, err = cl.VerifyByPayload(ctx, payload, &yes)
	v1Slip(t, "GET /verify?payload&checkDuplicate=true (fresh slip, again)", a, err, true, fresh, payload)

	ref = "COMPAT" + tag + "V1FRESH02"
	fresh, payload = w.slip(t, "002", ref), bankPayload("002", ref)
	a, err = cl.VerifyByPayload(ctx, payload, nil)
	v1Slip(t, "GET /verify?payload (fresh BBL slip)", a, err, false, fresh, payload)

	ref = "COMPAT" + tag + "V1FRESH03"
	fresh, payload = w.slip(t, "025", ref), bankPayload("025", ref)
	a, err = cl.VerifyByFile(ctx, "fresh.png", qrPNG(t, payload), &yes)
	v1Slip(t, "POST /verify multipart file, checkDuplicate=true (fresh BAY slip)", a, err, false, fresh, payload)

	// Wallet: the seed's first listed wallet slip; fresh on the first run.
	wl := w.wallets[0]
	wp := walletPayload(t, wl)
	b, err := cl.VerifyTrueWallet(ctx, "/verify/truewallet", map[string]any{"payload": wp})
	v1Wallet(t, "POST /verify/truewallet {payload}", b, err, false, wl)
	b, err = cl.VerifyTrueWallet(ctx, "/verify/wallet", map[string]any{"payload": wp})
	v1Wallet(t, "POST /verify/wallet {payload}", b, err, false, wl)
	b, err = cl.VerifyTrueWallet(ctx, "/verify/truewallet", map[string]any{"payload": wp, "checkDuplicate": true})
	v1Wallet(t, "POST /verify/truewallet {payload, checkDuplicate: true} (repeat)", b, err, true, wl)

	// The wallet operation as the docs show it: an image in part "file".
	id := "8800" + map[string]string{"A": "1", "B": "2"}[tag] + "0000000001"
	ws := w.wallet(t, id)
	img := qrPNG(t, walletPayload(t, ws))
	b, err = cl.VerifyTrueWalletFile(ctx, "wallet.png", img, &yes)
	v1Wallet(t, "POST /verify/truewallet multipart file, checkDuplicate=true (fresh)", b, err, false, ws)
	b, err = cl.VerifyTrueWalletFile(ctx, "wallet.png", img, &yes)
	v1Wallet(t, "POST /verify/truewallet multipart file, checkDuplicate=true (fresh slip, again)", b, err, true, ws)
	b, err = cl.VerifyTrueWallet(ctx, "/verify/truewallet", map[string]any{"image": base64Image(img, "image/png")})
	v1Wallet(t, "POST /verify/truewallet {image: data URI}", b, err, false, ws)

	// An unknown key: 401 {status: 401, message: "unauthorized"}.
	bad := *cl
	bad.Key = "00000000-0000-4000-8000-000000000000"
	m, err := bad.Me(ctx)
	if c, ok := answer(t, "GET /me (unknown key)", err, m.HTTPStatus, 401, m.Body, m.Problems); ok {
		c.eq("message", m.Message, "unauthorized")
	}
}

// ---- v2 ----

// info reads and checks v2 GET /info.
func (w *world) info(t *testing.T, cl *Client, op string) (InfoData, bool) {
	t.Helper()
	a, err := cl.Info(t.Context())
	c, ok := answer(t, op, err, a.HTTPStatus, 200, a.Body, a.Problems)
	if !ok || a.Data == nil {
		return InfoData{}, false
	}
	d := *a.Data
	c.eq("data.application.name", d.Application.Name, w.service)
	c.eq("data.application.autoRenew.expired", d.Application.AutoRenew.Expired, false)
	c.optionalDate("data.application.autoRenew.createdAt", d.Application.AutoRenew.CreatedAt)
	c.eq("data.application.autoRenew.expiresAt", deref(d.Application.AutoRenew.ExpiresAt), nil) // no end date
	q := d.Application.Quota
	c.eq("data.application.quota.max", deref(q.Max), w.limit)
	if q.Max != nil {
		c.eq("data.application.quota.remaining", deref(q.Remaining), *q.Max-q.Used)
	}
	if q.TotalUsed < q.Used {
		t.Errorf("%s: data.application.quota.totalUsed = %v, below used %v", op, q.TotalUsed, q.Used)
	}
	c.eq("data.branch.name", d.Branch.Name, w.branch)
	c.eq("data.branch.isActive", d.Branch.IsActive, true)
	// Only the main branch verifies in this test.
	c.eq("data.branch.quota.used", d.Branch.Quota.Used, q.Used)
	c.eq("data.branch.quota.totalUsed", d.Branch.Quota.TotalUsed, q.TotalUsed)
	c.eq("data.account.credit", d.Account.Credit, 0.0)
	return d, len(a.Problems) == 0
}

// v2Bank checks a v2 bank answer.
func v2Bank(t *testing.T, op string, a V2Answer[VerifyBankData], err error, dup bool, want bank.Slip, payload string) (check, *VerifyBankData) {
	t.Helper()
	c, ok := answer(t, op, err, a.HTTPStatus, 200, a.Body, a.Problems)
	if !ok || a.Data == nil {
		return c, nil
	}
	d := a.Data
	c.eq("data.isDuplicate", d.IsDuplicate, dup)
	c.eq("data.amountInSlip", d.AmountInSlip, want.Amount.Amount)
	c.slipData("data.rawSlip", d.RawSlip, want, payload)
	return c, d
}

func v2Wallet(t *testing.T, op string, a V2Answer[VerifyTrueWalletData], err error, dup bool, want bank.WalletSlip) (check, *VerifyTrueWalletData) {
	t.Helper()
	c, ok := answer(t, op, err, a.HTTPStatus, 200, a.Body, a.Problems)
	if !ok || a.Data == nil {
		return c, nil
	}
	d := a.Data
	c.eq("data.isDuplicate", d.IsDuplicate, dup)
	c.eq("data.matchedAccount", d.MatchedAccount, (*MatchedAccount)(nil))
	c.eq("data.amountInSlip", d.AmountInSlip, want.Amount)
	c.walletData("data.rawSlip", d.RawSlip, want)
	return c, d
}

func v2Suite(t *testing.T, w *world, cl, v1 *Client) {
	ctx := t.Context()
	listed := w.slip(t, "004", "LS2FLLDUC7V3LSUPD7VW")
	info0, _ := w.info(t, cl, "GET /v2/info")

	// The listed slip, verified before by v1 through the same branch.
	a, err := cl.VerifyBank(ctx, map[string]any{"payload": listedPayload, "remark": "order 42", "matchAmount": 100.5})
	if c, d := v2Bank(t, "POST /v2/verify/bank {payload, remark, matchAmount}", a, err, true, listed, listedPayload); d != nil {
		c.eq("data.remark", deref(d.Remark), "order 42")
		c.eq("data.amountInOrder", deref(d.AmountInOrder), 100.5)
		c.eq("data.isAmountMatched", deref(d.IsAmountMatched), true)
		c.eq("data.matchedAccount", d.MatchedAccount, (*MatchedAccount)(nil))
	}
	a, err = cl.VerifyBank(ctx, map[string]any{"base64": base64Image(w.slipPNG, "")})
	v2Bank(t, "POST /v2/verify/bank {base64}", a, err, true, listed, listedPayload)
	a, err = cl.VerifyBank(ctx, map[string]any{"base64": base64Image(w.slipPNG, "image/png"), "matchAmount": 1})
	if c, d := v2Bank(t, "POST /v2/verify/bank {base64: data:image/png;base64,…, matchAmount: 1}", a, err, true, listed, listedPayload); d != nil {
		c.eq("data.amountInOrder", deref(d.AmountInOrder), 1.0)
		c.eq("data.isAmountMatched", deref(d.IsAmountMatched), false)
	}
	a, err = cl.VerifyBankImage(ctx, "slip.png", w.slipPNG, map[string]string{"remark": "by image", "checkDuplicate": "false"})
	if c, d := v2Bank(t, "POST /v2/verify/bank multipart image", a, err, true, listed, listedPayload); d != nil {
		c.eq("data.remark", deref(d.Remark), "by image")
	}

	for _, ls := range w.proxied {
		p := bankPayload(ls.BankCode, ls.TransRef)
		a, err = cl.VerifyBank(ctx, map[string]any{"payload": p})
		v2Bank(t, "POST /v2/verify/bank {payload} (listed slip with a proxy, "+ls.TransRef+")", a, err, true, w.slip(t, ls.BankCode, ls.TransRef), p)
	}

	// A fresh slip uses one of the quota of the application and the branch;
	// the same branch verifying it again does not (spec 4.1 rule 3).
	ref := "COMPATV2FRESH01"
	fresh, payload := w.slip(t, "006", ref), bankPayload("006", ref)
	a, err = cl.VerifyBank(ctx, map[string]any{"payload": payload})
	if c, d := v2Bank(t, "POST /v2/verify/bank {payload} (fresh)", a, err, false, fresh, payload); d != nil {
		c.eq("data.matchedAccount", d.MatchedAccount, (*MatchedAccount)(nil))
		c.eq("data.amountInOrder", deref(d.AmountInOrder), nil)
	}
	info1, ok1 := w.info(t, cl, "GET /v2/info (after a fresh verification)")
	if ok1 && info0.Application.Name != "" {
		for _, f := range []struct {
			path      string
			got, want float64
		}{
			{"data.application.quota.used", info1.Application.Quota.Used, info0.Application.Quota.Used + 1},
			{"data.application.quota.totalUsed", info1.Application.Quota.TotalUsed, info0.Application.Quota.TotalUsed + 1},
			{"data.branch.quota.used", info1.Branch.Quota.Used, info0.Branch.Quota.Used + 1},
			{"data.branch.quota.totalUsed", info1.Branch.Quota.TotalUsed, info0.Branch.Quota.TotalUsed + 1},
		} {
			if f.got != f.want {
				t.Errorf("GET /v2/info: %s = %v after one fresh verification, want %v", f.path, f.got, f.want)
			}
		}
	}
	a, err = cl.VerifyBank(ctx, map[string]any{"payload": payload, "checkDuplicate": false})
	v2Bank(t, "POST /v2/verify/bank {payload} (fresh slip, again)", a, err, true, fresh, payload)
	if info2, ok := w.info(t, cl, "GET /v2/info (after a self-duplicate)"); ok && ok1 {
		if info2.Application.Quota.Used != info1.Application.Quota.Used {
			t.Errorf("GET /v2/info: data.application.quota.used = %v after a self-duplicate, want %v (unchanged)",
				info2.Application.Quota.Used, info1.Application.Quota.Used)
		}
	}

	// matchAccount: the receiver is the seed's linked account acc-demo-1.
	matched, payload := w.slip(t, "014", matchRef), bankPayload("014", matchRef)
	a, err = cl.VerifyBank(ctx, map[string]any{"payload": payload, "matchAccount": true, "matchAmount": matched.Amount.Amount})
	if c, d := v2Bank(t, "POST /v2/verify/bank {payload, matchAccount: true, matchAmount}", a, err, false, matched, payload); d != nil {
		c.eq("data.amountInOrder", deref(d.AmountInOrder), matched.Amount.Amount)
		c.eq("data.isAmountMatched", deref(d.IsAmountMatched), true)
		if d.MatchedAccount == nil {
			if !c.skip("data.matchedAccount") {
				t.Errorf("POST /v2/verify/bank {payload, matchAccount: true}: data.matchedAccount = null, want %s", w.account.ID)
			}
		} else {
			m, info := d.MatchedAccount, mustBank(t, w.account.BankCode)
			c.eq("data.matchedAccount.id", m.ID, w.account.ID)
			c.eq("data.matchedAccount.bank.code", m.Bank.Code, info.Code)
			c.eq("data.matchedAccount.bank.shortCode", m.Bank.ShortCode, info.Short)
			c.eq("data.matchedAccount.bank.nameTh", m.Bank.NameTh, info.NameTH)
			c.eq("data.matchedAccount.bank.nameEn", m.Bank.NameEn, info.NameEN)
			c.eq("data.matchedAccount.nameTh", m.NameTh, w.account.Name.TH)
			c.eq("data.matchedAccount.nameEn", m.NameEn, w.account.Name.EN)
			c.eq("data.matchedAccount.type", m.Type, "JURISTIC")
			c.eq("data.matchedAccount.bankNumber (digits)", digits(m.BankNumber), digits(w.account.BankNumber))
		}
	}
	ref = "COMPATV2FRESH02"
	fresh, payload = w.slip(t, "011", ref), bankPayload("011", ref)
	a, err = cl.VerifyBankImage(ctx, "fresh.png", qrPNG(t, payload), map[string]string{"checkDuplicate": "true", "matchAmount": "1"})
	if c, d := v2Bank(t, "POST /v2/verify/bank multipart image, checkDuplicate, matchAmount (fresh TTB slip)", a, err, false, fresh, payload); d != nil {
		c.eq("data.amountInOrder", deref(d.AmountInOrder), 1.0)
		c.eq("data.isAmountMatched", deref(d.IsAmountMatched), fresh.Amount.Amount == 1)
	}

	// Wallet: the seed's second listed wallet slip, fresh here.
	wl := w.wallets[1]
	wp := walletPayload(t, wl)
	b, err := cl.VerifyWallet(ctx, "/verify/truewallet", map[string]any{"payload": wp, "remark": "tw", "matchAmount": wl.Amount})
	if c, d := v2Wallet(t, "POST /v2/verify/truewallet {payload, remark, matchAmount}", b, err, false, wl); d != nil {
		c.eq("data.remark", deref(d.Remark), "tw")
		c.eq("data.amountInOrder", deref(d.AmountInOrder), wl.Amount)
		c.eq("data.isAmountMatched", deref(d.IsAmountMatched), true)
	}
	b, err = cl.VerifyWallet(ctx, "/verify/wallet", map[string]any{"payload": wp})
	v2Wallet(t, "POST /v2/verify/wallet {payload}", b, err, true, wl)
	ws := w.wallet(t, "88003000000001")
	img := qrPNG(t, walletPayload(t, ws))
	b, err = cl.VerifyWalletImage(ctx, "wallet.png", img, map[string]string{"checkDuplicate": "true"})
	v2Wallet(t, "POST /v2/verify/truewallet multipart image (fresh)", b, err, false, ws)
	b, err = cl.VerifyWallet(ctx, "/verify/truewallet", map[string]any{"base64": base64Image(img, "image/png")})
	v2Wallet(t, "POST /v2/verify/truewallet {base64: data URI}", b, err, true, ws)

	// v1's /me and v2's /info tell the same quota.
	info, ok := w.info(t, cl, "GET /v2/info (end)")
	me, ok2 := w.me(t, v1, "GET /me (end)")
	if ok && ok2 && me.UsedQuota != info.Application.Quota.Used {
		t.Errorf("GET /me data.usedQuota = %v, GET /v2/info data.application.quota.used = %v: want the same", me.UsedQuota, info.Application.Quota.Used)
	}

	// An unknown key: 401 {success: false, error: {code, message}}.
	bad := *cl
	bad.Key = "00000000-0000-4000-8000-000000000000"
	e, err := bad.Info(ctx)
	if c, ok := answer(t, "GET /v2/info (unknown key)", err, e.HTTPStatus, 401, e.Body, e.Problems); ok && e.Error != nil {
		c.eq("error.code", e.Error.Code, "INVALID_API_KEY")
	}
}

func mustBank(t *testing.T, code string) bank.Info {
	info, ok := bank.Lookup(code)
	if !ok {
		t.Fatalf("no bank %s in the catalog", code)
	}
	return info
}

func digits(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
}
