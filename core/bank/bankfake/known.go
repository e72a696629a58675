package bankfake

import "github.com/slipverify/slipverify/core/bank"

// Known is a golden example a fake knows: its file in testdata, the
// sending bank to look it up with, and the slip a connector answers for it.
type Known struct {
	File     string
	BankCode string
	Slip     bank.Slip
}

// KBankSlips are the examples the KBank fake knows, and the RDCW fake,
// which passes KBank's data object through.
var KBankSlips = []Known{
	{"kbank_interbank.json", "014", bank.Slip{
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
	}},
	// PromptPay to a phone number: no receiving bank, a masked proxy, null refs.
	{"kbank_promptpay.json", "004", bank.Slip{
		TransRef: "016143102633ATF01234", Date: "2024-02-29T23:59:59+07:00", CountryCode: "TH",
		Amount: bank.Amount{Amount: 100, Local: bank.LocalAmount{Amount: 100, Currency: "THB"}},
		Sender: bank.Party{
			Bank:    bank.BankRef{ID: "004", Name: "Kasikornbank", Short: "KBANK"},
			Account: bank.Account{Name: bank.AccountName{TH: "น.ส. มาลี ร", EN: "MISS MALEE R"}, Bank: bank.AccountBank{Type: "BANKAC", Account: "xxx-x-x9012-x"}},
		},
		Receiver: bank.Receiver{
			Account: bank.Account{Name: bank.AccountName{TH: "นาย วิชัย ส"}, Proxy: &bank.Proxy{Type: "MSISDN", Account: "xxx-xxx-5678"}},
		},
	}},
	{"kbank_thai.json", "006", bank.Slip{
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
	}},
}

// SCBSlips are the examples the SCB fake knows: every field a string
// ("5345.45", "" for the fee).
var SCBSlips = []Known{
	{"scb_interbank.json", "014", bank.Slip{
		TransRef: "202310051403SCBQR123", Date: "2023-10-05T09:15:00+07:00", CountryCode: "TH",
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
	}},
	{"scb_promptpay.json", "025", bank.Slip{
		TransRef: "2024022923595900SCB1", Date: "2024-02-29T23:59:59+07:00", CountryCode: "TH",
		Amount: bank.Amount{Amount: 0.5, Local: bank.LocalAmount{Amount: 0.5, Currency: "THB"}},
		Sender: bank.Party{
			Bank:    bank.BankRef{ID: "025", Name: "Bank of Ayudhya", Short: "BAY"},
			Account: bank.Account{Name: bank.AccountName{TH: "นางสาว กนกพร ม"}, Bank: bank.AccountBank{Type: "BANKAC", Account: "xxx-x-x1111-x"}},
		},
		Receiver: bank.Receiver{
			Account: bank.Account{Name: bank.AccountName{TH: "นาย ธนา ข"}, Proxy: &bank.Proxy{Type: "NATID", Account: "x-xxxx-xxxx1-23-4"}},
		},
	}},
}

func ptr(s string) *string { return &s }
