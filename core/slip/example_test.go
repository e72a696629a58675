package slip_test

import (
	"errors"
	"fmt"

	"github.com/slipverify/slipverify/core/slip"
)

func ExampleParseBank() {
	b, err := slip.ParseBank("004100060000010103014022000111222233344ABCD125102TH910417DF")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(b.BankCode, b.TransRef)
	// Output: 014 00111222233344ABCD12
}

func ExampleParseWallet() {
	_, err := slip.ParseWallet("004100060000010103014022000111222233344ABCD125102TH910417DF")
	fmt.Println(errors.Is(err, slip.ErrNotSlip))
	w, _ := slip.ParseWallet("00470002010102010203P2P0312TM12345678900408300920269104be2a")
	fmt.Println(w.EventType, w.TransactionID, w.Date)
	// Output:
	// true
	// P2P TM1234567890 30092026
}

func ExampleBank_Encode() {
	fmt.Println(slip.Bank{BankCode: "002", TransRef: "0002123123121200011"}.Encode())
	// Output: 004000060000010103002021900021231231212000115102TH91049C30
}
