package dev_test

// A client of the commercial slip-verification API (EasySlip), written from
// its public developer documentation alone, as a merchant's code is: the
// types below are the answers as those pages type them, and the decoder is
// strict the way a typed client is. Unknown fields are tolerated (the API
// may grow); a documented field that is absent, null where the docs do not
// allow null, or of another JSON type is a problem, named by its path.
//
// Sources (read for this client; nothing is copied from them):
//   - v1, https://developer.easyslip.com/api/v1:
//     https://easyslip-document.cl1.easythunder.com/en/v1 (overview, envelope),
//     .../en/v1/verify/bank/payload (GET /verify, SlipData, duplicate data),
//     .../en/v1/verify/bank/url, .../en/v1/verify/bank/base64,
//     .../en/v1/verify/truemoney/image (POST /verify/truewallet, TrueMoneySlipData),
//     .../en/v1/me (MeData);
//     the older pages https://document.easyslip.com/documents/verify/bank/base64
//     (JSON field "image"), .../documents/me, .../documents/truemoney-wallet/verify/image;
//     the official n8n node github.com/EASYSLIP-CO-LTD/n8n-nodes-easyslip
//     (GET /verify?payload=&checkDuplicate=, JSON {image} and {url}, multipart
//     part "file", POST /verify/truewallet; it reads data.receiver.bank.id and
//     data.receiver.account.name.th).
//   - v2, https://api.easyslip.com/v2:
//     https://easyslip-document.cl1.easythunder.com/en/v2 (envelope with
//     message, matchedAccount, amountInOrder), .../en/v2/verify/bank
//     (VerifyBankData, MatchedAccount, RawSlip), .../en/v2/verify/bank/{payload,
//     image,url}, https://document.easyslip.com/en/v2/verify/truewallet/{image,
//     base64,url} and .../th/v2/verify/truewallet (POST /verify/truewallet),
//     .../en/v2/info (InfoData).
//
// Tags: `req:"docs"` marks a field the docs type as required (no "?");
// `req:"ours"` a field the docs leave optional (or do not show) that this
// platform promises (README, "Request shapes"; the client holds it to that); `null:"ok"` a field that may be null (docs "| null", or the
// platform's "null when ..."). A field without req is optional.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ---- v1 types ----

// SlipData is v1's SlipData (the data of GET/POST /verify and of a
// duplicate_slip refusal) and v2's RawSlip.
type SlipData struct {
	Payload     string     `json:"payload" req:"docs"`
	TransRef    string     `json:"transRef" req:"docs"`
	Date        string     `json:"date" req:"docs"` // ISO 8601
	CountryCode string     `json:"countryCode" req:"docs"`
	Amount      SlipAmount `json:"amount" req:"docs"`
	Fee         float64    `json:"fee" req:"ours"`  // docs: fee?
	Ref1        string     `json:"ref1" req:"ours"` // docs: ref1?
	Ref2        string     `json:"ref2" req:"ours"`
	Ref3        string     `json:"ref3" req:"ours"`
	Sender      Party      `json:"sender" req:"docs"`
	Receiver    Receiver   `json:"receiver" req:"docs"`
}

// SlipAmount is SlipData.amount.
type SlipAmount struct {
	Amount float64     `json:"amount" req:"docs"`
	Local  LocalAmount `json:"local" req:"docs"`
}

// LocalAmount is SlipData.amount.local; the docs leave both optional, spec
// 2.1 (and so the platform) lists both.
type LocalAmount struct {
	Amount   float64 `json:"amount" req:"ours"`
	Currency string  `json:"currency" req:"ours"`
}

// Party is a sender.
type Party struct {
	Bank    PartyBank    `json:"bank" req:"docs"`
	Account PartyAccount `json:"account" req:"docs"`
}

// Receiver is a receiver: a Party and merchantId.
type Receiver struct {
	Bank       PartyBank    `json:"bank" req:"docs"`
	Account    PartyAccount `json:"account" req:"docs"`
	MerchantID *string      `json:"merchantId" req:"ours" null:"ok"` // docs: merchantId?; ours: "receiver {..., merchantId}", spec: string or null
}

// PartyBank is Party.bank. The older docs type id as required (and the
// official node reads receiver.bank.id); spec 2.1: "some responses carry
// only id and short".
type PartyBank struct {
	ID    string `json:"id" req:"docs"`
	Name  string `json:"name"`
	Short string `json:"short" req:"ours"`
}

// PartyAccount is Party.account.
type PartyAccount struct {
	Name  AccountName  `json:"name" req:"docs"`
	Bank  *AccountBank `json:"bank" req:"ours"` // docs: bank?; spec 2.1 lists type and account
	Proxy *Proxy       `json:"proxy"`           // when the bank reports one
}

// AccountName is Party.account.name; spec 2.1: the Thai form is given,
// English may be absent.
type AccountName struct {
	TH string `json:"th" req:"ours"`
	EN string `json:"en"`
}

// AccountBank is Party.account.bank.
type AccountBank struct {
	Type    string `json:"type" req:"docs"` // BANKAC, TOKEN or DUMMY
	Account string `json:"account" req:"docs"`
}

// Proxy is Party.account.proxy.
type Proxy struct {
	Type    string `json:"type" req:"docs"` // NATID, MSISDN, EWALLETID, EMAIL or BILLERID
	Account string `json:"account" req:"docs"`
}

// TrueMoneySlipData is the data of v1 POST /verify/truewallet (and of its
// duplicate_slip refusal).
type TrueMoneySlipData struct {
	TransactionID string  `json:"transactionId" req:"docs"`
	Date          string  `json:"date" req:"docs"` // ISO 8601
	Amount        float64 `json:"amount" req:"docs"`
	Sender        struct {
		Name string `json:"name" req:"docs"`
	} `json:"sender" req:"docs"`
	Receiver struct {
		Name  string `json:"name" req:"docs"`
		Phone string `json:"phone" req:"docs"` // masked
	} `json:"receiver" req:"docs"`
}

// MeData is the data of v1 GET /me.
type MeData struct {
	Application    string   `json:"application" req:"docs"`
	UsedQuota      float64  `json:"usedQuota" req:"docs"`
	MaxQuota       *float64 `json:"maxQuota" req:"docs" null:"ok"` // null = unlimited
	RemainingQuota *float64 `json:"remainingQuota" req:"docs" null:"ok"`
	ExpiredAt      *string  `json:"expiredAt" req:"docs" null:"ok"` // docs: string (ISO 8601); ours: null when the service has no end date
	CurrentCredit  float64  `json:"currentCredit" req:"docs"`
}

// ---- v2 types ----

// VerifyBankData is the data of v2 POST /verify/bank.
type VerifyBankData struct {
	Remark          *string         `json:"remark"`
	IsDuplicate     bool            `json:"isDuplicate" req:"docs"`
	MatchedAccount  *MatchedAccount `json:"matchedAccount" req:"docs" null:"ok"`
	AmountInOrder   *float64        `json:"amountInOrder"` // when matchAmount was sent
	AmountInSlip    float64         `json:"amountInSlip" req:"docs"`
	IsAmountMatched *bool           `json:"isAmountMatched" req:"ours"` // docs: isAmountMatched?; spec 2.1 and the platform's wallet wrapper: always
	RawSlip         SlipData        `json:"rawSlip" req:"docs"`
}

// MatchedAccount is VerifyBankData.matchedAccount.
type MatchedAccount struct {
	ID   string `json:"id" req:"ours"` // not in the docs' type; the platform adds it
	Bank struct {
		NameTh    string `json:"nameTh" req:"docs"`
		NameEn    string `json:"nameEn" req:"docs"`
		Code      string `json:"code" req:"docs"`
		ShortCode string `json:"shortCode" req:"docs"`
	} `json:"bank" req:"docs"`
	NameTh     string `json:"nameTh" req:"docs"`
	NameEn     string `json:"nameEn" req:"docs"`
	Type       string `json:"type" req:"docs"` // PERSONAL or JURISTIC
	BankNumber string `json:"bankNumber" req:"docs"`
}

// VerifyTrueWalletData is the data of v2 POST /verify/truewallet. The docs
// pages found name the type (VerifyTrueWalletData) and the request fields
// (image, base64, url, remark, matchAccount, matchAmount, checkDuplicate)
// but their excerpts do not show its fields; they are typed as the platform
// states them: the bank wrapper around the flat wallet slip.
type VerifyTrueWalletData struct {
	Remark          *string           `json:"remark"`
	IsDuplicate     bool              `json:"isDuplicate" req:"ours"`
	MatchedAccount  *MatchedAccount   `json:"matchedAccount" req:"ours" null:"ok"`
	AmountInOrder   *float64          `json:"amountInOrder"`
	AmountInSlip    float64           `json:"amountInSlip" req:"ours"`
	IsAmountMatched *bool             `json:"isAmountMatched" req:"ours"`
	RawSlip         TrueMoneySlipData `json:"rawSlip" req:"ours"`
}

// InfoData is the data of v2 GET /info.
type InfoData struct {
	Application struct {
		Name      string `json:"name" req:"docs"`
		AutoRenew struct {
			Expired   bool    `json:"expired" req:"docs"`
			Quota     bool    `json:"quota" req:"docs"`
			CreatedAt *string `json:"createdAt" req:"docs" null:"ok"` // docs: string; null where the platform has no value
			ExpiresAt *string `json:"expiresAt" req:"docs" null:"ok"` // docs: string; null: no end date
		} `json:"autoRenew" req:"docs"`
		Quota struct {
			Used      float64  `json:"used" req:"docs"`
			Max       *float64 `json:"max" req:"docs" null:"ok"` // null = unlimited
			Remaining *float64 `json:"remaining" req:"docs" null:"ok"`
			TotalUsed float64  `json:"totalUsed" req:"docs"`
		} `json:"quota" req:"docs"`
	} `json:"application" req:"docs"`
	Branch struct {
		Name     string `json:"name" req:"docs"`
		IsActive bool   `json:"isActive" req:"docs"`
		Quota    struct {
			Used      float64 `json:"used" req:"docs"`
			TotalUsed float64 `json:"totalUsed" req:"docs"`
		} `json:"quota" req:"docs"`
	} `json:"branch" req:"docs"`
	Account struct {
		Email  *string `json:"email" req:"docs" null:"ok"` // docs: string; ours: null until the operator work
		Credit float64 `json:"credit" req:"docs"`
	} `json:"account" req:"docs"`
	Product struct {
		Name *string `json:"name" req:"docs" null:"ok"` // docs: string; ours: null until the operator work
	} `json:"product" req:"docs"`
}

// ---- answers ----

// V1Answer is a decoded v1 answer: {status, data} on success, {status,
// message[, data]} on failure.
type V1Answer[T any] struct {
	HTTPStatus int
	Status     int
	Message    string
	Data       *T
	// Problems are the ways the body departs from the docs, by path.
	Problems []string
	Body     []byte
}

// V2Error is the error of a v2 failure.
type V2Error struct {
	Code    string `json:"code" req:"docs"`
	Message string `json:"message" req:"docs"`
}

// V2Answer is a decoded v2 answer: {success: true, data, message} or
// {success: false, error: {code, message}}.
type V2Answer[T any] struct {
	HTTPStatus int
	Success    bool
	Message    string
	Data       *T
	Error      *V2Error
	Problems   []string
	Body       []byte
}

// ---- the client ----

// Client calls one version of the API. BaseURL is what a merchant
// configures: "https://developer.easyslip.com/api/v1" for v1,
// "https://api.easyslip.com/v2" for v2; only its scheme and host change for
// a self-hosted deployment.
type Client struct {
	BaseURL string
	Key     string
	HTTP    *http.Client
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 30 * time.Second} // the docs recommend at least 10 s
}

// send makes one request and reads the whole answer.
func (c *Client) send(ctx context.Context, method, path string, body io.Reader, contentType string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Key)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := c.httpClient().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

func (c *Client) sendJSON(ctx context.Context, path string, body any) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	return c.send(ctx, "POST", path, bytes.NewReader(b), "application/json")
}

// sendForm posts a multipart form with the image in part filePart and
// fields as form values.
func (c *Client) sendForm(ctx context.Context, path, filePart, fileName string, img []byte, fields map[string]string) (int, []byte, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	fw, err := w.CreateFormFile(filePart, fileName)
	if err != nil {
		return 0, nil, err
	}
	fw.Write(img)
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w.WriteField(k, fields[k])
	}
	if err := w.Close(); err != nil {
		return 0, nil, err
	}
	return c.send(ctx, "POST", path, &buf, w.FormDataContentType())
}

// ---- v1 operations ----

// VerifyByPayload is v1 GET /verify?payload=…[&checkDuplicate=…].
func (c *Client) VerifyByPayload(ctx context.Context, payload string, checkDuplicate *bool) (V1Answer[SlipData], error) {
	q := url.Values{"payload": {payload}}
	if checkDuplicate != nil {
		q.Set("checkDuplicate", strconv.FormatBool(*checkDuplicate))
	}
	code, b, err := c.send(ctx, "GET", "/verify?"+q.Encode(), nil, "")
	return decodeV1[SlipData](code, b), err
}

// Verify is v1 POST /verify with a JSON body: {payload} (the platform's; the docs
// show payload only on GET), {image} (base64, with or without a data URI
// prefix), or {url}; each with an optional checkDuplicate.
func (c *Client) Verify(ctx context.Context, body map[string]any) (V1Answer[SlipData], error) {
	code, b, err := c.sendJSON(ctx, "/verify", body)
	return decodeV1[SlipData](code, b), err
}

// VerifyByFile is v1 POST /verify as multipart/form-data, the image in
// part "file".
func (c *Client) VerifyByFile(ctx context.Context, name string, img []byte, checkDuplicate *bool) (V1Answer[SlipData], error) {
	code, b, err := c.sendForm(ctx, "/verify", "file", name, img, cdField(checkDuplicate))
	return decodeV1[SlipData](code, b), err
}

// VerifyTrueWallet is v1 POST {path} (/verify/truewallet in the docs) with
// a JSON body ({payload} as the platform serves it).
func (c *Client) VerifyTrueWallet(ctx context.Context, path string, body map[string]any) (V1Answer[TrueMoneySlipData], error) {
	code, b, err := c.sendJSON(ctx, path, body)
	return decodeV1[TrueMoneySlipData](code, b), err
}

// VerifyTrueWalletFile is v1 POST /verify/truewallet as the docs show it:
// multipart/form-data, the image in part "file".
func (c *Client) VerifyTrueWalletFile(ctx context.Context, name string, img []byte, checkDuplicate *bool) (V1Answer[TrueMoneySlipData], error) {
	code, b, err := c.sendForm(ctx, "/verify/truewallet", "file", name, img, cdField(checkDuplicate))
	return decodeV1[TrueMoneySlipData](code, b), err
}

// Me is v1 GET /me.
func (c *Client) Me(ctx context.Context) (V1Answer[MeData], error) {
	code, b, err := c.send(ctx, "GET", "/me", nil, "")
	return decodeV1[MeData](code, b), err
}

// ---- v2 operations ----

// VerifyBank is v2 POST /verify/bank with a JSON body: exactly one of
// payload, base64, url; remark, matchAccount, matchAmount, checkDuplicate
// optional.
func (c *Client) VerifyBank(ctx context.Context, body map[string]any) (V2Answer[VerifyBankData], error) {
	code, b, err := c.sendJSON(ctx, "/verify/bank", body)
	return decodeV2[VerifyBankData](code, b), err
}

// VerifyBankImage is v2 POST /verify/bank as multipart/form-data, the image
// in part "image" and the options as form values.
func (c *Client) VerifyBankImage(ctx context.Context, name string, img []byte, fields map[string]string) (V2Answer[VerifyBankData], error) {
	code, b, err := c.sendForm(ctx, "/verify/bank", "image", name, img, fields)
	return decodeV2[VerifyBankData](code, b), err
}

// VerifyWallet is v2 POST {path} (/verify/truewallet in the docs) with a
// JSON body.
func (c *Client) VerifyWallet(ctx context.Context, path string, body map[string]any) (V2Answer[VerifyTrueWalletData], error) {
	code, b, err := c.sendJSON(ctx, path, body)
	return decodeV2[VerifyTrueWalletData](code, b), err
}

// VerifyWalletImage is v2 POST /verify/truewallet as multipart/form-data,
// the image in part "image".
func (c *Client) VerifyWalletImage(ctx context.Context, name string, img []byte, fields map[string]string) (V2Answer[VerifyTrueWalletData], error) {
	code, b, err := c.sendForm(ctx, "/verify/truewallet", "image", name, img, fields)
	return decodeV2[VerifyTrueWalletData](code, b), err
}

// Info is v2 GET /info.
func (c *Client) Info(ctx context.Context) (V2Answer[InfoData], error) {
	code, b, err := c.send(ctx, "GET", "/info", nil, "")
	return decodeV2[InfoData](code, b), err
}

func cdField(checkDuplicate *bool) map[string]string {
	if checkDuplicate == nil {
		return nil
	}
	return map[string]string{"checkDuplicate": strconv.FormatBool(*checkDuplicate)}
}

// base64Image is img as the JSON base64 fields take it, with a data URI
// prefix of mime type when mime is not empty.
func base64Image(img []byte, mime string) string {
	s := base64.StdEncoding.EncodeToString(img)
	if mime != "" {
		return "data:" + mime + ";base64," + s
	}
	return s
}

// ---- strict decoding ----

// decodeV1 decodes a v1 body. status is always required; data on success
// and with duplicate_slip; message on failure.
func decodeV1[T any](httpStatus int, body []byte) V1Answer[T] {
	a := V1Answer[T]{HTTPStatus: httpStatus, Body: body}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(body, &env); err != nil || env == nil {
		a.Problems = append(a.Problems, fmt.Sprintf("body: not a JSON object (%.200q)", body))
		return a
	}
	raw, ok := env["status"]
	switch {
	case !ok:
		a.Problems = append(a.Problems, "status: missing (required by the docs)")
	case json.Unmarshal(raw, &a.Status) != nil:
		a.Problems = append(a.Problems, fmt.Sprintf("status: %s is not a number", raw))
	case a.Status != httpStatus:
		a.Problems = append(a.Problems, fmt.Sprintf("status: %d, but the HTTP status is %d", a.Status, httpStatus))
	}
	if raw, ok := env["message"]; ok {
		if json.Unmarshal(raw, &a.Message) != nil {
			a.Problems = append(a.Problems, fmt.Sprintf("message: %s is not a string", raw))
		}
	} else if httpStatus != 200 {
		a.Problems = append(a.Problems, "message: missing (required by the docs on an error)")
	}
	if httpStatus == 200 || a.Message == "duplicate_slip" {
		raw, ok := env["data"]
		if !ok || string(raw) == "null" {
			a.Problems = append(a.Problems, "data: missing (required by the docs on success and with duplicate_slip)")
			return a
		}
		a.Data = new(T)
		a.Problems = append(a.Problems, decodeStrict(raw, a.Data, "data")...)
	}
	return a
}

// decodeV2 decodes a v2 body: success always; data and message on success;
// error {code, message} on failure.
func decodeV2[T any](httpStatus int, body []byte) V2Answer[T] {
	a := V2Answer[T]{HTTPStatus: httpStatus, Body: body}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(body, &env); err != nil || env == nil {
		a.Problems = append(a.Problems, fmt.Sprintf("body: not a JSON object (%.200q)", body))
		return a
	}
	raw, ok := env["success"]
	switch {
	case !ok:
		a.Problems = append(a.Problems, "success: missing (required by the docs)")
	case json.Unmarshal(raw, &a.Success) != nil:
		a.Problems = append(a.Problems, fmt.Sprintf("success: %s is not a boolean", raw))
	case a.Success != (httpStatus >= 200 && httpStatus < 300):
		a.Problems = append(a.Problems, fmt.Sprintf("success: %v, but the HTTP status is %d", a.Success, httpStatus))
	}
	if !a.Success {
		raw, ok := env["error"]
		if !ok || string(raw) == "null" {
			a.Problems = append(a.Problems, "error: missing (required by the docs on failure)")
			return a
		}
		a.Error = new(V2Error)
		a.Problems = append(a.Problems, decodeStrict(raw, a.Error, "error")...)
		return a
	}
	if raw, ok := env["message"]; !ok {
		a.Problems = append(a.Problems, "message: missing (required by the docs on success)")
	} else if json.Unmarshal(raw, &a.Message) != nil {
		a.Problems = append(a.Problems, fmt.Sprintf("message: %s is not a string", raw))
	}
	raw, ok = env["data"]
	if !ok || string(raw) == "null" {
		a.Problems = append(a.Problems, "data: missing (required by the docs on success)")
		return a
	}
	a.Data = new(T)
	a.Problems = append(a.Problems, decodeStrict(raw, a.Data, "data")...)
	return a
}

// decodeStrict decodes raw into v (a pointer) and returns every way raw
// departs from v's type, by path under prefix: a required field missing, a
// null where null is not allowed, a value of another JSON type. Fields v
// does not know are ignored.
func decodeStrict(raw []byte, v any, prefix string) []string {
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return []string{fmt.Sprintf("%s: not JSON: %v", prefix, err)}
	}
	var problems []string
	walk(reflect.TypeOf(v).Elem(), generic, prefix, &problems)
	if err := json.Unmarshal(raw, v); err != nil && len(problems) == 0 {
		problems = append(problems, fmt.Sprintf("%s: %v", prefix, err))
	}
	return problems
}

// walk checks the decoded JSON value val against type t at path.
func walk(t reflect.Type, val any, path string, problems *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	wrong := func(want string) {
		*problems = append(*problems, fmt.Sprintf("%s: %s, the docs type it %s", path, describe(val), want))
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := val.(map[string]any)
		if !ok {
			wrong("an object")
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			p := path + "." + name
			req := f.Tag.Get("req")
			v, present := m[name]
			switch {
			case !present:
				if req != "" {
					*problems = append(*problems, fmt.Sprintf("%s: missing (required by the %s)", p, source(req)))
				}
			case v == nil:
				if req != "" && f.Tag.Get("null") != "ok" {
					*problems = append(*problems, fmt.Sprintf("%s: null, not nullable (required by the %s)", p, source(req)))
				}
			default:
				walk(f.Type, v, p, problems)
			}
		}
	case reflect.Slice:
		s, ok := val.([]any)
		if !ok {
			wrong("an array")
			return
		}
		for i, e := range s {
			walk(t.Elem(), e, fmt.Sprintf("%s[%d]", path, i), problems)
		}
	case reflect.String:
		if _, ok := val.(string); !ok {
			wrong("a string")
		}
	case reflect.Bool:
		if _, ok := val.(bool); !ok {
			wrong("a boolean")
		}
	case reflect.Float64, reflect.Float32, reflect.Int, reflect.Int64:
		if _, ok := val.(float64); !ok {
			wrong("a number")
		}
	}
}

func source(req string) string {
	if req == "ours" {
		return "platform (docs: optional or not shown)"
	}
	return "docs"
}

func describe(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 80 {
		b = append(b[:77], "..."...)
	}
	return fmt.Sprintf("%T %s", v, b)
}

// TestCompatDecoder checks the strict decoder itself, without a stack: a
// complete answer decodes without problems (an unknown field included), and
// each missing, wrongly null or mistyped documented field is named by path.
func TestCompatDecoder(t *testing.T) {
	const full = `{"status":200,"data":{"payload":"p","transRef":"r","date":"2024-01-02T03:04:05+07:00","countryCode":"TH",
		"amount":{"amount":1,"local":{"amount":1,"currency":"THB"}},"fee":0,"ref1":"","ref2":"","ref3":"",
		"sender":{"bank":{"id":"004","name":"n","short":"KBANK"},"account":{"name":{"th":"ก"},"bank":{"type":"BANKAC","account":"x"}}},
		"receiver":{"bank":{"id":"014","short":"SCB"},"account":{"name":{"th":"ข","en":"B"},"bank":{"type":"BANKAC","account":"y"}},"merchantId":null},
		"somethingNew":1}}`
	a := decodeV1[SlipData](200, []byte(full))
	if len(a.Problems) != 0 || a.Data == nil || a.Data.Receiver.Bank.ID != "014" {
		t.Fatalf("complete answer: %v %+v", a.Problems, a.Data)
	}
	for _, c := range []struct{ from, to, want string }{
		{`"transRef":"r",`, ``, "data.transRef: missing (required by the docs)"},
		{`"fee":0,`, ``, "data.fee: missing (required by the platform (docs: optional or not shown))"},
		{`"receiver":{"bank":{"id":"014",`, `"receiver":{"bank":{`, "data.receiver.bank.id: missing (required by the docs)"},
		{`"amount":{"amount":1,`, `"amount":{"amount":"1",`, `data.amount.amount: string "1", the docs type it a number`},
		{`"countryCode":"TH"`, `"countryCode":null`, "data.countryCode: null, not nullable (required by the docs)"},
		{`,"merchantId":null`, ``, "data.receiver.merchantId: missing (required by the platform (docs: optional or not shown))"},
		{`"status":200,`, ``, "status: missing (required by the docs)"},
	} {
		a := decodeV1[SlipData](200, []byte(strings.Replace(full, c.from, c.to, 1)))
		if len(a.Problems) != 1 || a.Problems[0] != c.want {
			t.Errorf("%s -> %s: problems %q, want [%q]", c.from, c.to, a.Problems, c.want)
		}
	}
	me := decodeV1[MeData](200, []byte(`{"status":200,"data":{"application":"a","usedQuota":1,"maxQuota":null,"remainingQuota":null,"expiredAt":null,"currentCredit":0}}`))
	if len(me.Problems) != 0 || me.Data.MaxQuota != nil {
		t.Errorf("me with nulls: %v", me.Problems)
	}
	dup := decodeV1[SlipData](400, []byte(`{"status":400,"message":"duplicate_slip"}`))
	if len(dup.Problems) != 1 || !strings.HasPrefix(dup.Problems[0], "data: missing") {
		t.Errorf("duplicate_slip without data: %v", dup.Problems)
	}
	v2 := decodeV2[VerifyBankData](200, []byte(`{"success":true,"data":{"isDuplicate":false,"amountInSlip":1,"isAmountMatched":true,"rawSlip":{}}}`))
	want := []string{"message: missing (required by the docs on success)", "data.matchedAccount: missing (required by the docs)"}
	if len(v2.Problems) < 2 || v2.Problems[0] != want[0] || v2.Problems[1] != want[1] {
		t.Errorf("v2 problems %q, want %q first", v2.Problems, want)
	}
}
