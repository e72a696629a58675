package verify_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/bank/sandbox"
	"github.com/slipverify/slipverify/core/slip"
	"github.com/slipverify/slipverify/core/store"
	"github.com/slipverify/slipverify/core/verify"
)

// TestUsageEventAmount: the usage event of a charged verification carries
// the slip's amount in satang and its sending bank, a wallet slip's none;
// a free repeat at the same branch and a refusal carry neither, so the
// billable events' amounts add up to the THB of the charged verifications.
func TestUsageEventAmount(t *testing.T) {
	path := filepath.Join(t.TempDir(), "core.db")
	st, err := store.Open(path, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.InsertMissing(store.Records{
		Services: []store.Service{{ID: "svc", State: store.StateActive, QuotaLimit: 100, CycleAnchorDay: 1}},
		Branches: []store.Branch{{ID: "br", ServiceID: "svc", Main: true, Active: true, KeyDigest: store.Digest("k")},
			{ID: "br2", ServiceID: "svc", Active: true, KeyDigest: store.Digest("k2")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(sandbox.Config{}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	v := &verify.Verifier{Store: st, Upstream: sb}
	ctx := context.Background()
	bankSlip := slip.Bank{BankCode: "014", TransRef: "USAGEAMOUNT0001"}.Encode()
	walletSlip := slip.Wallet{EventType: "P2P", TransactionID: "50001234567890", Date: "20112026"}.Encode()
	at := func(branch string, version api.Version, payload string) verify.Request {
		r := request(payload)
		r.BranchID, r.Version = branch, version
		return r
	}
	type want struct {
		outcome  string
		billable bool
		amount   float64 // THB; 0: none
		bank     string
	}
	var wants []want
	var charged float64
	bankOK := func(r verify.Request, billable bool) {
		t.Helper()
		res, err := v.Bank(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		w := want{outcome: api.OutcomeOK, billable: billable}
		if billable {
			w.amount, w.bank = res.AmountInSlip, "014"
			charged += res.AmountInSlip
		}
		wants = append(wants, w)
	}
	bankOK(at("br", api.V2, bankSlip), true)  // new: looked up, charged
	bankOK(at("br", api.V2, bankSlip), false) // the branch's own slip again: free
	bankOK(at("br2", api.V2, bankSlip), true) // another branch: charged, from the record
	bankOK(at("br", api.V1, bankSlip), true)  // v1 without checkDuplicate: charged, from the record
	dup := at("br", api.V1, bankSlip)
	dup.CheckDuplicate = true
	var e *api.Error
	if _, err := v.Bank(ctx, dup); !errors.As(err, &e) || e.Code != api.DuplicateSlip {
		t.Fatalf("v1 duplicate with checkDuplicate: %v", err)
	}
	wants = append(wants, want{outcome: api.DuplicateSlip.String()})
	res, err := v.Wallet(ctx, at("br", api.V2, walletSlip))
	if err != nil {
		t.Fatal(err)
	}
	wants = append(wants, want{outcome: api.OutcomeOK, billable: true, amount: res.AmountInSlip})
	charged += res.AmountInSlip

	if err := st.Close(); err != nil { // writes the events of attempts that charged nothing
		t.Fatal(err)
	}
	st, err = store.Open(path, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	msgs, err := st.Outbox(100)
	if err != nil {
		t.Fatal(err)
	}
	var events []api.UsageEvent
	for _, m := range msgs {
		if m.Topic != api.TopicUsage {
			continue
		}
		var ev api.UsageEvent
		if err := json.Unmarshal(m.Value, &ev); err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	if len(events) != len(wants) {
		t.Fatalf("%d usage events, want %d: %+v", len(events), len(wants), events)
	}
	// The free and refused attempts' events are written after the charged
	// ones (they wait for a later transaction): match them by content.
	left := map[want]int{}
	for _, w := range wants {
		w.amount = math.Round(w.amount * 100)
		left[w]++
	}
	var sum int64
	for _, ev := range events {
		got := want{ev.Outcome, ev.Billable, float64(ev.Amount), ev.SendingBank}
		if left[got] == 0 {
			t.Errorf("unexpected usage event %+v", ev)
		}
		left[got]--
		sum += ev.Amount
	}
	if want := int64(math.Round(charged * 100)); sum != want || sum == 0 {
		t.Errorf("usage events carry %d satang, the charged verifications %d", sum, want)
	}
}
