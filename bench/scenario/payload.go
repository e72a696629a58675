package scenario

import (
	"crypto/rand"
	"strconv"

	"github.com/slipverify/slipverify/core/slip"
)

// bankCodes are the sending banks of generated slips: catalog banks without
// extraVerify options, so any of them verifies without further fields.
var bankCodes = [...]string{"002", "004", "006", "011", "014", "022", "024", "025", "069"}

// RunID returns a fresh 8-character id of upper-case letters and digits: a
// run's slips carry it in their references, so runs against the same data
// never collide.
func RunID() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var b [8]byte
	rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}

// ref returns a slip reference unique to (run, kind, n): letters and digits
// only, at most 8+1+13 characters.
func ref(run string, kind byte, n uint64) string {
	var buf [32]byte
	b := append(buf[:0], run...)
	b = append(b, kind)
	b = strconv.AppendUint(b, n, 36)
	for i := len(run) + 1; i < len(b); i++ {
		if b[i] >= 'a' {
			b[i] -= 'a' - 'A'
		}
	}
	return string(b)
}

// bankPayload returns the mini-QR payload of the n-th bank slip of a kind in
// a run. The sandbox bank answers any such payload with a synthetic slip.
func bankPayload(run string, kind byte, n uint64) string {
	return slip.Bank{BankCode: bankCodes[n%uint64(len(bankCodes))], TransRef: ref(run, kind, n)}.Encode()
}

// walletPayload returns the payload of the n-th wallet slip of a run.
func walletPayload(run string, n uint64) string {
	return slip.Wallet{EventType: "P2P", TransactionID: ref(run, 'W', n), Date: "20112026"}.Encode()
}

// appendPayloadBody appends {"payload":"..."} (payloads are plain ASCII
// letters and digits, so nothing needs escaping).
func appendPayloadBody(dst []byte, payload string) []byte {
	dst = append(dst, `{"payload":"`...)
	dst = append(dst, payload...)
	return append(dst, `"}`...)
}
