package api

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestBanksCatalog(t *testing.T) {
	banks := Banks()
	if len(banks) == 0 {
		t.Fatal("Banks() is empty")
	}
	seen := make(map[string]bool, len(banks))
	shorts := make(map[string]bool, len(banks))
	for _, b := range banks {
		if !isBOTCode(b.Code) && b.Code != PromptPay {
			t.Errorf("code %q: want 3 digits or %s", b.Code, PromptPay)
		}
		if seen[b.Code] {
			t.Errorf("code %q listed twice", b.Code)
		}
		seen[b.Code] = true
		if shorts[b.Short] {
			t.Errorf("short %q listed twice", b.Short)
		}
		shorts[b.Short] = true
		if b.Short == "" || b.NameTH == "" || b.NameEN == "" {
			t.Errorf("code %q: empty name in %+v", b.Code, b)
		}
		if b.ExtraVerify == nil {
			t.Errorf("code %q: ExtraVerify is nil", b.Code)
		}
		for _, v := range b.ExtraVerify {
			if v != ExtraVerifyAccountLast4 && v != ExtraVerifyReceiverName {
				t.Errorf("code %q: undocumented extraVerify value %q", b.Code, v)
			}
		}
	}
	if !slices.IsSortedFunc(banks, func(a, b BankInfo) int { return strings.Compare(a.Code, b.Code) }) {
		t.Error("Banks() is not ordered by code")
	}
}

func isBOTCode(code string) bool {
	if len(code) != 3 {
		return false
	}
	for i := range len(code) {
		if code[i] < '0' || code[i] > '9' {
			return false
		}
	}
	return true
}

func TestLookupBank(t *testing.T) {
	tests := []struct {
		code        string
		wantOK      bool
		wantShort   string
		extraVerify []string
	}{
		{"002", true, "BBL", []string{}},
		{"004", true, "KBANK", []string{}},
		{"014", true, "SCB", []string{}},
		{"030", true, "GSB", []string{ExtraVerifyAccountLast4, ExtraVerifyReceiverName}},
		{"033", true, "GHB", []string{ExtraVerifyAccountLast4, ExtraVerifyReceiverName}},
		{"034", true, "BAAC", []string{ExtraVerifyAccountLast4, ExtraVerifyReceiverName}},
		{"080", true, "SMTB", []string{}},
		{"098", true, "SME", []string{}},
		{PromptPay, true, "PROMPTPAY", []string{}},
		{"001", false, "", nil}, // the Bank of Thailand itself sends no slips
		{"", false, "", nil},
		{"4", false, "", nil},
		{"promptpay", false, "", nil},
	}
	for _, tt := range tests {
		got, ok := LookupBank(tt.code)
		if ok != tt.wantOK {
			t.Errorf("LookupBank(%q) ok = %v, want %v", tt.code, ok, tt.wantOK)
			continue
		}
		if got.Short != tt.wantShort || !slices.Equal(got.ExtraVerify, tt.extraVerify) {
			t.Errorf("LookupBank(%q) = %+v, want short %q, extraVerify %q", tt.code, got, tt.wantShort, tt.extraVerify)
		}
		if ok && got.Code != tt.code {
			t.Errorf("LookupBank(%q).Code = %q", tt.code, got.Code)
		}
	}
	for _, b := range Banks() {
		got, ok := LookupBank(b.Code)
		if !ok || got.Short != b.Short || got.NameEN != b.NameEN {
			t.Errorf("LookupBank(%q) = %+v, %v; Banks() has %+v", b.Code, got, ok, b)
		}
	}
}

func TestBankCatalogCannotBeChangedByCallers(t *testing.T) {
	gsb, _ := LookupBank("030")
	gsb.ExtraVerify[0] = "CHANGED"
	banks := Banks()
	for i := range banks {
		banks[i].NameEN = "CHANGED"
		for j := range banks[i].ExtraVerify {
			banks[i].ExtraVerify[j] = "CHANGED"
		}
	}
	again, _ := LookupBank("030")
	if again.NameEN != "Government Savings Bank" || again.ExtraVerify[0] != ExtraVerifyAccountLast4 {
		t.Errorf("catalog changed through a returned value: %+v", again)
	}
	if Banks()[0].NameEN == "CHANGED" {
		t.Error("catalog changed through Banks()")
	}
}

func TestBankInfoJSON(t *testing.T) {
	tests := []struct {
		name string
		in   BankInfo
		want string
	}{
		{
			name: "bank without options",
			in:   mustLookupBank(t, "004"),
			want: `{"code":"004","short":"KBANK","nameTh":"ธนาคารกสิกรไทย","nameEn":"Kasikornbank","extraVerify":[]}`,
		},
		{
			name: "bank with options",
			in:   mustLookupBank(t, "034"),
			want: `{"code":"034","short":"BAAC","nameTh":"ธนาคารเพื่อการเกษตรและสหกรณ์การเกษตร","nameEn":"Bank for Agriculture and Agricultural Cooperatives","extraVerify":["ACCOUNT_LAST4","RECEIVER_NAME"]}`,
		},
		{
			name: "nil extraVerify is an empty array",
			in:   BankInfo{Code: "999", Short: "X", NameTH: "x", NameEN: "X"},
			want: `{"code":"999","short":"X","nameTh":"x","nameEn":"X","extraVerify":[]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
	all, err := json.Marshal(Banks())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(all), "null") {
		t.Errorf("Banks() encodes a null: %s", all)
	}
}

func mustLookupBank(t *testing.T, code string) BankInfo {
	t.Helper()
	b, ok := LookupBank(code)
	if !ok {
		t.Fatalf("LookupBank(%q) found nothing", code)
	}
	return b
}
