package bankfake

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// KBank fakes KBank's Slip Verification API (package kbank's wire format).
// It knows the KBank examples of testdata.
type KBank struct {
	*fake
	id, secret string
	testMode   bool
}

// KBank credentials the fake accepts.
const (
	KBankClientID     = "consumer-id"
	KBankClientSecret = "consumer-secret"
)

// NewKBank starts the fake on a TLS listener with pki; testMode requires
// the sandbox headers.
func NewKBank(t T, pki *PKI, testMode bool) *KBank {
	k := &KBank{id: KBankClientID, secret: KBankClientSecret, testMode: testMode}
	mux := http.NewServeMux()
	mux.HandleFunc("/v2/oauth/token", k.token)
	mux.HandleFunc("/v1/verslip/kbank/verify", k.verify)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("bankfake kbank: unexpected %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	k.fake = newFake(t, pki, mux)
	k.addKnown(KBankSlips)
	return k
}

func (k *KBank) token(w http.ResponseWriter, r *http.Request) {
	t := k.t
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(k.id+":"+k.secret))
	body, _ := io.ReadAll(r.Body)
	switch {
	case r.Method != http.MethodPost:
		t.Errorf("bankfake kbank: token: method %s", r.Method)
	case r.Header.Get("Content-Type") != "application/x-www-form-urlencoded":
		t.Errorf("bankfake kbank: token: Content-Type %q", r.Header.Get("Content-Type"))
	case string(body) != "grant_type=client_credentials":
		t.Errorf("bankfake kbank: token: body %q", body)
	case k.testMode && (r.Header.Get("x-test-mode") != "true" || r.Header.Get("env-id") != "OAUTH2"):
		t.Errorf("bankfake kbank: token: test mode headers missing")
	case r.Header.Get("Authorization") != basic:
		writeJSON(w, http.StatusUnauthorized, map[string]string{"errorCode": "invalid_client"})
		return
	default:
		writeJSON(w, http.StatusOK, map[string]any{
			"access_token": k.issue(), "token_type": "Bearer",
			"expires_in": k.expiresIn("1799"), "status": "approved",
			"developer.email": "dev@example.com",
		})
		return
	}
	http.Error(w, "bad request", http.StatusBadRequest)
}

var rqDtForm = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+07:00$`)

func (k *KBank) verify(w http.ResponseWriter, r *http.Request) {
	t := k.t
	var req struct {
		RqUID string `json:"rqUID"`
		RqDt  string `json:"rqDt"`
		Data  struct {
			SendingBank string `json:"sendingBank"`
			TransRef    string `json:"transRef"`
		} `json:"data"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	token, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case r.Method != http.MethodPost:
		t.Errorf("bankfake kbank: verify: method %s", r.Method)
	case r.Header.Get("Content-Type") != "application/json":
		t.Errorf("bankfake kbank: verify: Content-Type %q", r.Header.Get("Content-Type"))
	case err != nil:
		t.Errorf("bankfake kbank: verify: body: %v", err)
	case req.RqUID == "" || !rqDtForm.MatchString(req.RqDt):
		t.Errorf("bankfake kbank: verify: rqUID %q rqDt %q", req.RqUID, req.RqDt)
	case len(req.Data.SendingBank) != 3 || req.Data.TransRef == "":
		t.Errorf("bankfake kbank: verify: data %+v", req.Data)
	case k.testMode && r.Header.Get("x-test-mode") != "true":
		t.Errorf("bankfake kbank: verify: x-test-mode missing")
	case !bearer:
		t.Errorf("bankfake kbank: verify: Authorization %q", r.Header.Get("Authorization"))
	default:
		k.answer(w, r, token, req.RqUID, req.Data.TransRef)
		return
	}
	http.Error(w, "bad request", http.StatusBadRequest)
}

func (k *KBank) answer(w http.ResponseWriter, r *http.Request, token, rqUID, ref string) {
	fault, valid, data := k.take(token, ref)
	reply := func(code, msg string, data json.RawMessage) map[string]any {
		m := map[string]any{"rqUID": rqUID, "kbankTxnId": "KTX" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", ""),
			"statusCode": code, "statusMessage": msg}
		if data != nil {
			m["data"] = data
		}
		return m
	}
	switch {
	case !valid:
		writeJSON(w, http.StatusUnauthorized, map[string]string{"errorCode": "invalid_token", "errorMessage": "Access Token is invalid or expired"})
	case fault == TooMany:
		writeJSON(w, http.StatusTooManyRequests, map[string]string{"errorCode": "rate_limited"})
	case fault == SwitchFailure:
		writeJSON(w, http.StatusOK, reply("8503", "Switch to bank failure", nil))
	case fault == SlowBody:
		b, _ := json.Marshal(reply("0000", "SUCCESS", data))
		slow(w, r, b)
	case fault == Reset:
		reset(w)
	case fault == Malformed:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"rqUID":"`+rqUID+`","statusCode":"0000","data":{"transRef":`)
	case fault == NotFound || data == nil:
		writeJSON(w, http.StatusOK, reply("8404", "Transaction not found", nil))
	default:
		writeJSON(w, http.StatusOK, reply("0000", "SUCCESS", data))
	}
}
