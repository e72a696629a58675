package httpbank

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/slipverify/slipverify/core/bank"
)

// maxRequestSize bounds a request body Handler reads; a lookup is a few
// dozen bytes.
const maxRequestSize = 64 << 10

// Pre-rendered replies that carry no slip.
var (
	replyNotFound = []byte(`{"status":"not_found"}` + "\n")
	replyPending  = []byte(`{"status":"pending"}` + "\n")
	replyUpstream = []byte(`{"status":"error","message":"upstream error"}` + "\n")
)

// Handler serves the gateway protocol of the package documentation in front
// of c, at /slips/bank and /slips/wallet (mount it under a prefix with
// http.StripPrefix). It answers a malformed request with HTTP 400 (413 when
// larger than 64 KiB), and an
// error of c other than bank.ErrNotFound and bank.ErrPending with HTTP 502,
// both with {"status": "error", "message": ...}; the detail of c's error is
// not sent.
func Handler(c bank.Connector) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /"+bankPath, func(w http.ResponseWriter, r *http.Request) {
		var req bankRequest
		if !readRequest(w, r, &req) {
			return
		}
		if req.BankCode == "" || req.TransRef == "" {
			writeError(w, http.StatusBadRequest, "bankCode and transRef are required")
			return
		}
		s, err := c.Bank(r.Context(), req.BankCode, req.TransRef)
		writeAnswer(w, &s, err)
	})
	mux.HandleFunc("POST /"+walletPath, func(w http.ResponseWriter, r *http.Request) {
		var req walletRequest
		if !readRequest(w, r, &req) {
			return
		}
		if req.TransactionID == "" {
			writeError(w, http.StatusBadRequest, "transactionId is required")
			return
		}
		s, err := c.Wallet(r.Context(), req.TransactionID)
		writeAnswer(w, &s, err)
	})
	return mux
}

// readRequest decodes the JSON body of r into v, or answers 400 (413 when
// the body exceeds maxRequestSize) and reports false.
func readRequest(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestSize))
	if err != nil {
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			writeError(w, http.StatusRequestEntityTooLarge, "request body exceeds "+strconv.Itoa(maxRequestSize)+" bytes")
			return false
		}
		writeError(w, http.StatusBadRequest, "read request body: "+err.Error())
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		writeError(w, http.StatusBadRequest, "malformed request body: "+err.Error())
		return false
	}
	return true
}

// writeAnswer answers with the slip s or the error err of a connector.
func writeAnswer[T any](w http.ResponseWriter, s *T, err error) {
	switch {
	case err == nil:
		body, err := json.Marshal(reply[T]{Status: statusFound, Slip: s})
		if err != nil {
			writeJSON(w, http.StatusBadGateway, replyUpstream)
			return
		}
		writeJSON(w, http.StatusOK, body)
	case errors.Is(err, bank.ErrNotFound):
		writeJSON(w, http.StatusOK, replyNotFound)
	case errors.Is(err, bank.ErrPending):
		writeJSON(w, http.StatusOK, replyPending)
	default:
		writeJSON(w, http.StatusBadGateway, replyUpstream)
	}
}

// writeError answers with the HTTP status code and an error reply carrying
// message.
func writeError(w http.ResponseWriter, code int, message string) {
	body, _ := json.Marshal(reply[struct{}]{Status: statusError, Message: message})
	writeJSON(w, code, body)
}

// writeJSON writes body as a JSON reply with the HTTP status code.
func writeJSON(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}
