package bankfake

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"

	"github.com/slipverify/slipverify/core/slip"
)

// RDCW fakes RDCW Slip Verify (package rdcw's wire format) over TLS
// without a client certificate, as RDCW serves it. It knows the KBank
// examples of testdata (RDCW passes KBank's data object through).
type RDCW struct {
	*fake
}

// RDCW credentials the fake accepts.
const (
	RDCWClientID     = "rdcw-client"
	RDCWClientSecret = "rdcw-secret"
)

// NewRDCW starts the fake with pki's server certificate.
func NewRDCW(t T, pki *PKI) *RDCW {
	f := &RDCW{}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/inquiry", f.inquiry)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("bankfake rdcw: unexpected %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	tc := pki.ServerTLS()
	tc.ClientAuth = 0 // tls.NoClientCert
	f.fake = newFakeTLS(t, tc, mux)
	f.tokens["basic"] = true
	f.addKnown(KBankSlips)
	return f
}

func (f *RDCW) inquiry(w http.ResponseWriter, r *http.Request) {
	t := f.t
	var req struct {
		Payload string `json:"payload"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(RDCWClientID+":"+RDCWClientSecret))
	b, perr := slip.ParseBank(req.Payload)
	switch {
	case r.Method != http.MethodPost:
		t.Errorf("bankfake rdcw: method %s", r.Method)
	case r.Header.Get("Content-Type") != "application/json":
		t.Errorf("bankfake rdcw: Content-Type %q", r.Header.Get("Content-Type"))
	case err != nil:
		t.Errorf("bankfake rdcw: body: %v", err)
	case r.Header.Get("Authorization") != basic:
		writeJSON(w, http.StatusUnauthorized, map[string]any{"code": 401, "message": "Unauthorized"})
		return
	case perr != nil:
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": 10001, "message": "Invalid QR payload"})
		return
	default:
		f.answer(w, r, b.TransRef)
		return
	}
	http.Error(w, "bad request", http.StatusBadRequest)
}

func (f *RDCW) answer(w http.ResponseWriter, r *http.Request, ref string) {
	fault, _, data := f.take("basic", ref)
	ok := func(data json.RawMessage) map[string]any {
		return map[string]any{"discriminator": "d1", "valid": true, "data": data, "isCached": false,
			"quota": map[string]int{"usage": f.Lookups(), "limit": 1000}}
	}
	switch {
	case fault == TooMany:
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"code": 429, "message": "Too many requests"})
	case fault == SwitchFailure:
		writeJSON(w, http.StatusBadGateway, map[string]any{"code": 20001, "message": "Bank API connection error"})
	case fault == SlowBody:
		b, _ := json.Marshal(ok(data))
		slow(w, r, b)
	case fault == Reset:
		reset(w)
	case fault == Malformed:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"valid":true,"data":{"transRef":`)
	case fault == NotFound || data == nil:
		writeJSON(w, http.StatusOK, map[string]any{"valid": false, "message": "Transaction not found"})
	default:
		writeJSON(w, http.StatusOK, ok(data))
	}
}
