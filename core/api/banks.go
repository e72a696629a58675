package api

// The bank catalog is a contract: GET /banks serves it, a request's and a
// seed file's bankCode must be one of its codes, and the bench refuses the
// seed files core refuses, so it lives here rather than in core/bank, which
// gives it the names its connectors use.

import (
	"encoding/json"
	"slices"
)

// ExtraVerifyAccountLast4 and ExtraVerifyReceiverName are the values a
// BankInfo.ExtraVerify list may hold: the receiver checks a client must choose
// one of when it verifies a slip against a bank account of that bank (spec
// 4.1 rule 4, the v2 bankCode and extraVerify fields).
//
// Only the state banks whose slips mask the receiver so heavily that account
// number and name cannot both be compared list them: GSB (030), GHB (033) and
// BAAC (034). For these the client names the single receiver field that is
// checked:
//
//   - ExtraVerifyAccountLast4: the last four digits of the receiver's
//     account number must match the linked account's;
//   - ExtraVerifyReceiverName: the receiver's name must match the linked
//     account's name.
//
// Every other bank lists no options, so extraVerify is neither required nor
// accepted for it. PROMPTPAY lists none either: its receivers are checked by
// matchMode (NAME, NUMBER or NAME_NUMBER) instead.
const (
	// ExtraVerifyAccountLast4 asks that the receiver's account number be
	// checked by its last four digits.
	ExtraVerifyAccountLast4 = "ACCOUNT_LAST4"
	// ExtraVerifyReceiverName asks that the receiver's name be checked.
	ExtraVerifyReceiverName = "RECEIVER_NAME"
)

// PromptPay is the code of the pseudo-bank that stands for PromptPay
// receivers (phone, national id, tax id or e-wallet id) in the catalog.
const PromptPay = "PROMPTPAY"

// BankInfo is one entry of the bank catalog that GET /banks serves: a bank a
// Thai slip may name, keyed by its Bank of Thailand code, or the pseudo-bank
// PROMPTPAY. Names are the institution's official Thai and English names
// without the legal-form suffix ("จำกัด (มหาชน)", "Public Company Limited").
// ExtraVerify holds the receiver checks of ExtraVerifyAccountLast4 and
// ExtraVerifyReceiverName that the bank requires one of; it is always
// encoded as an array, never null.
type BankInfo struct {
	Code        string   `json:"code"`
	Short       string   `json:"short"`
	NameTH      string   `json:"nameTh"`
	NameEN      string   `json:"nameEn"`
	ExtraVerify []string `json:"extraVerify"`
}

// MarshalJSON encodes i with extraVerify as [] when i.ExtraVerify is nil, so
// a client can always iterate it.
func (i BankInfo) MarshalJSON() ([]byte, error) {
	type plain BankInfo // plain drops the method, avoiding recursion.
	if i.ExtraVerify == nil {
		i.ExtraVerify = []string{}
	}
	return json.Marshal(plain(i))
}

// stateBankChecks is the ExtraVerify list of GSB, GHB and BAAC.
var stateBankChecks = []string{ExtraVerifyAccountLast4, ExtraVerifyReceiverName}

// banks is the bank list in code order (digits sort before letters, so
// PROMPTPAY comes last). A test keeps it sorted and its codes unique.
var banks = []BankInfo{
	{"002", "BBL", "ธนาคารกรุงเทพ", "Bangkok Bank", []string{}},
	{"004", "KBANK", "ธนาคารกสิกรไทย", "Kasikornbank", []string{}},
	{"006", "KTB", "ธนาคารกรุงไทย", "Krung Thai Bank", []string{}},
	{"011", "TTB", "ธนาคารทหารไทยธนชาต", "TMBThanachart Bank", []string{}},
	{"014", "SCB", "ธนาคารไทยพาณิชย์", "Siam Commercial Bank", []string{}},
	{"017", "CITI", "ธนาคารซิตี้แบงก์ เอ็น.เอ.", "Citibank, N.A.", []string{}},
	{"020", "SCBT", "ธนาคารสแตนดาร์ดชาร์เตอร์ด (ไทย)", "Standard Chartered Bank (Thai)", []string{}},
	{"022", "CIMBT", "ธนาคารซีไอเอ็มบี ไทย", "CIMB Thai Bank", []string{}},
	{"024", "UOBT", "ธนาคารยูโอบี", "United Overseas Bank (Thai)", []string{}},
	{"025", "BAY", "ธนาคารกรุงศรีอยุธยา", "Bank of Ayudhya", []string{}},
	{"030", "GSB", "ธนาคารออมสิน", "Government Savings Bank", stateBankChecks},
	{"031", "HSBC", "ธนาคารฮ่องกงและเซี่ยงไฮ้แบงกิ้งคอร์ปอเรชั่น", "The Hongkong and Shanghai Banking Corporation", []string{}},
	{"033", "GHB", "ธนาคารอาคารสงเคราะห์", "Government Housing Bank", stateBankChecks},
	{"034", "BAAC", "ธนาคารเพื่อการเกษตรและสหกรณ์การเกษตร", "Bank for Agriculture and Agricultural Cooperatives", stateBankChecks},
	{"035", "EXIM", "ธนาคารเพื่อการส่งออกและนำเข้าแห่งประเทศไทย", "Export-Import Bank of Thailand", []string{}},
	{"039", "MHCB", "ธนาคารมิซูโฮ", "Mizuho Bank", []string{}},
	{"052", "BOC", "ธนาคารแห่งประเทศจีน (ไทย)", "Bank of China (Thai)", []string{}},
	{"066", "ISBT", "ธนาคารอิสลามแห่งประเทศไทย", "Islamic Bank of Thailand", []string{}},
	{"067", "TISCO", "ธนาคารทิสโก้", "TISCO Bank", []string{}},
	{"069", "KKP", "ธนาคารเกียรตินาคินภัทร", "Kiatnakin Phatra Bank", []string{}},
	{"070", "ICBCT", "ธนาคารไอซีบีซี (ไทย)", "Industrial and Commercial Bank of China (Thai)", []string{}},
	{"071", "TCD", "ธนาคารไทยเครดิต", "Thai Credit Bank", []string{}},
	{"073", "LHFG", "ธนาคารแลนด์ แอนด์ เฮ้าส์", "Land and Houses Bank", []string{}},
	// 080 is Sumitomo Mitsui Trust Bank (Thai); SMBC, Sumitomo Mitsui
	// Banking Corporation, is another bank (code 018).
	{"080", "SMTB", "ธนาคารซูมิโตโม มิตซุย ทรัสต์ (ไทย)", "Sumitomo Mitsui Trust Bank (Thai)", []string{}},
	{"098", "SME", "ธนาคารพัฒนาวิสาหกิจขนาดกลางและขนาดย่อมแห่งประเทศไทย", "Small and Medium Enterprise Development Bank of Thailand", []string{}},
	{PromptPay, "PROMPTPAY", "พร้อมเพย์", "PromptPay", []string{}},
}

// bankByCode indexes banks by code for LookupBank.
var bankByCode = func() map[string]int {
	m := make(map[string]int, len(banks))
	for i, b := range banks {
		m[b.Code] = i
	}
	return m
}()

// Banks returns the bank catalog ordered by code. The caller owns the
// result and may modify it.
func Banks() []BankInfo {
	out := make([]BankInfo, len(banks))
	for i, b := range banks {
		out[i] = cloneBank(b)
	}
	return out
}

// LookupBank returns the catalog entry of code, and whether there is one. The
// caller owns the result.
func LookupBank(code string) (BankInfo, bool) {
	i, ok := bankByCode[code]
	if !ok {
		return BankInfo{}, false
	}
	return cloneBank(banks[i]), true
}

// cloneBank copies b so callers cannot change the catalog through ExtraVerify.
// An empty list is shared: it has nothing to change and costs no allocation.
func cloneBank(b BankInfo) BankInfo {
	if len(b.ExtraVerify) > 0 {
		b.ExtraVerify = slices.Clone(b.ExtraVerify)
	}
	return b
}
