package bankfake

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// SCB fakes SCB's Slip Verification API (package scb's wire format) below
// the prefix /partners/sandbox. It knows the SCB examples of testdata.
type SCB struct {
	*fake
}

// SCB credentials the fake accepts, and the base path of its URL.
const (
	SCBAPIKey    = "l7-api-key"
	SCBAPISecret = "l7-api-secret"
	SCBPrefix    = "/partners/sandbox"
)

// NewSCB starts the fake on a TLS listener with pki.
func NewSCB(t T, pki *PKI) *SCB {
	s := &SCB{}
	mux := http.NewServeMux()
	mux.HandleFunc(SCBPrefix+"/v1/oauth/token", s.token)
	mux.HandleFunc(SCBPrefix+"/v1/payment/billpayment/transactions/", s.lookup)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("bankfake scb: unexpected %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	s.fake = newFake(t, pki, mux)
	s.addKnown(SCBSlips)
	return s
}

// URL is the base an operator configures: host and prefix.
func (s *SCB) URL() string { return s.srv.URL + SCBPrefix }

func status(code int, desc string) map[string]any {
	return map[string]any{"code": code, "description": desc}
}

func (s *SCB) token(w http.ResponseWriter, r *http.Request) {
	t := s.t
	var req struct {
		ApplicationKey    string `json:"applicationKey"`
		ApplicationSecret string `json:"applicationSecret"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	switch {
	case r.Method != http.MethodPost:
		t.Errorf("bankfake scb: token: method %s", r.Method)
	case r.Header.Get("Content-Type") != "application/json":
		t.Errorf("bankfake scb: token: Content-Type %q", r.Header.Get("Content-Type"))
	case r.Header.Get("resourceOwnerId") != SCBAPIKey || r.Header.Get("requestUId") == "":
		t.Errorf("bankfake scb: token: resourceOwnerId %q requestUId %q", r.Header.Get("resourceOwnerId"), r.Header.Get("requestUId"))
	case err != nil:
		t.Errorf("bankfake scb: token: body: %v", err)
	case req.ApplicationKey != SCBAPIKey || req.ApplicationSecret != SCBAPISecret:
		writeJSON(w, http.StatusUnauthorized, map[string]any{"status": status(9500, "Invalid credentials"), "data": nil})
		return
	default:
		writeJSON(w, http.StatusOK, map[string]any{
			"status": status(1000, "Success"),
			"data": map[string]any{"accessToken": s.issue(), "tokenType": "Bearer",
				"expiresIn": s.expiresIn(1800), "expiresAt": 1700000000, "refreshToken": "r", "refreshExpiresIn": 3600},
		})
		return
	}
	http.Error(w, "bad request", http.StatusBadRequest)
}

func (s *SCB) lookup(w http.ResponseWriter, r *http.Request) {
	t := s.t
	ref := strings.TrimPrefix(r.URL.Path, SCBPrefix+"/v1/payment/billpayment/transactions/")
	token, bearer := strings.CutPrefix(r.Header.Get("authorization"), "Bearer ")
	body, _ := io.ReadAll(r.Body)
	switch {
	case r.Method != http.MethodGet:
		t.Errorf("bankfake scb: lookup: method %s", r.Method)
	case len(body) > 0 || r.Header.Get("Transfer-Encoding") != "" || len(r.TransferEncoding) > 0:
		t.Errorf("bankfake scb: lookup: a GET with a body (%d bytes, %v)", len(body), r.TransferEncoding)
	case len(r.URL.Query().Get("sendingBank")) != 3 || ref == "" || strings.Contains(ref, "/"):
		t.Errorf("bankfake scb: lookup: %s", r.URL)
	case r.Header.Get("resourceOwnerId") != SCBAPIKey || r.Header.Get("requestUId") == "":
		t.Errorf("bankfake scb: lookup: resourceOwnerId %q requestUId %q", r.Header.Get("resourceOwnerId"), r.Header.Get("requestUId"))
	case !bearer:
		t.Errorf("bankfake scb: lookup: authorization %q", r.Header.Get("authorization"))
	default:
		s.answer(w, r, token, ref)
		return
	}
	http.Error(w, "bad request", http.StatusBadRequest)
}

func (s *SCB) answer(w http.ResponseWriter, r *http.Request, token, ref string) {
	fault, valid, data := s.take(token, ref)
	switch {
	case fault == ExpiredToken:
		writeJSON(w, http.StatusUnauthorized, map[string]any{"status": status(9300, "Token is expired"), "data": nil})
	case !valid:
		writeJSON(w, http.StatusUnauthorized, map[string]any{"status": status(9700, "Invalid token"), "data": nil})
	case fault == TooMany:
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"status": status(9900, "Too many requests")})
	case fault == SwitchFailure:
		writeJSON(w, http.StatusBadRequest, map[string]any{"status": status(8503, "Switch to bank failure"), "data": nil})
	case fault == SlowBody:
		b, _ := json.Marshal(map[string]any{"status": status(1000, "Success"), "data": data})
		slow(w, r, b)
	case fault == Reset:
		reset(w)
	case fault == Malformed:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":{"code":1000},"data":{"amount":"12`)
	case fault == NotFound || data == nil:
		writeJSON(w, http.StatusBadRequest, map[string]any{"status": status(1104, "Transaction not found"), "data": nil})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"status": status(1000, "Success"), "data": data})
	}
}
