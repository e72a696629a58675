// Package kbank is a bank.Connector for KBank's Slip Verification API,
// which looks up interbank transfers (any sending bank) at Thailand's
// switch.
//
// # Wire format
//
// A token by OAuth2 client credentials:
//
//	POST {base}/v2/oauth/token
//	Authorization: Basic base64(consumer id ":" consumer secret)
//	Content-Type: application/x-www-form-urlencoded
//	grant_type=client_credentials
//	→ 200 {"access_token": "...", "token_type": "Bearer", "expires_in": "1799", ...}
//
// then one lookup per call:
//
//	POST {base}/v1/verslip/kbank/verify
//	Authorization: Bearer <token>
//	{"rqUID": "<uuid>", "rqDt": "2024-10-08T14:22:54+07:00",
//	 "data": {"sendingBank": "004", "transRef": "015..."}}
//	→ {"rqUID": "...", "kbankTxnId": "...", "statusCode": "0000",
//	   "statusMessage": "SUCCESS", "data": {...the switch's record...}}
//
// In test mode (KBank's sandbox) the token call also sends
// x-test-mode: true and env-id: OAUTH2, and the lookup x-test-mode: true.
// Both endpoints take a client certificate (two-way TLS) in test and in
// production.
//
// # Answers
//
// statusCode 0000 with data is the slip (package slipdata maps it); 8404
// (not found, or older than the switch's 7 days) is bank.ErrNotFound. KBank
// does not tell a transfer still settling from one that does not exist, so
// this connector never answers bank.ErrPending: core's async retry schedule
// covers the settling window. HTTP 401 means the token expired: the lookup
// is sent once more with a new one, as the bank did not run it
// (upstream.Tokens.Send).
// Everything else (6501/8501 bank not supported, 8503 switch-to-bank
// failure, 429, 5xx, malformed replies, timeouts) is bank.ErrUpstream, with
// the bank's status code, rqUID and kbankTxnId in the error text for core's
// log; clients see only API_SERVER_ERROR.
package kbank

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/bank/slipdata"
	"github.com/slipverify/slipverify/core/bank/upstream"
)

// Paths below the base URL.
const (
	TokenPath  = "/v2/oauth/token"
	VerifyPath = "/v1/verslip/kbank/verify"
)

// Status codes of the verify reply.
const (
	StatusOK       = "0000"
	StatusNotFound = "8404"
)

// Config configures a Connector.
type Config struct {
	URL          string // scheme and host, https://openapi.kasikornbank.com say
	ClientID     string // consumer id
	ClientSecret string // consumer secret
	TestMode     bool   // send the sandbox's headers
	upstream.Transport
}

// Connector is a bank.Connector asking KBank. It is safe for concurrent use.
type Connector struct {
	com      upstream.Common
	basic    string
	testMode bool
}

// New returns a connector for cfg, reporting every problem of cfg at once.
func New(cfg Config) (*Connector, error) {
	c := &Connector{testMode: cfg.TestMode, basic: "Basic " + base64.StdEncoding.EncodeToString([]byte(cfg.ClientID+":"+cfg.ClientSecret))}
	return upstream.Connect(c, &c.com, upstream.Settings{Name: "kbank", Prefix: "SLIP_KBANK", URL: cfg.URL, TokenPath: TokenPath, Fetch: c.fetchToken,
		Credentials: [][2]string{{"CLIENT_ID", cfg.ClientID}, {"CLIENT_SECRET", cfg.ClientSecret}}, Transport: cfg.Transport})
}

// tokenReply is the token endpoint's answer, read liberally.
type tokenReply struct {
	AccessToken string           `json:"access_token"`
	TokenType   string           `json:"token_type"`
	ExpiresIn   upstream.Seconds `json:"expires_in"`
}

func (c *Connector) fetchToken(ctx context.Context) (upstream.Token, error) {
	rep, err := upstream.Send(c.com.Client, func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.com.TokenURL, strings.NewReader("grant_type=client_credentials"))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", c.basic)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		if c.testMode {
			req.Header.Set("x-test-mode", "true")
			req.Header.Set("env-id", "OAUTH2")
		}
		return req, nil
	})
	if err != nil {
		return upstream.Token{}, err
	}
	if rep.Status != http.StatusOK {
		return upstream.Token{}, fmt.Errorf("kbank: POST %s: HTTP %d", TokenPath, rep.Status)
	}
	var tr tokenReply
	if err := json.Unmarshal(rep.Body, &tr); err != nil {
		return upstream.Token{}, fmt.Errorf("kbank: token reply: %w", err)
	}
	if !upstream.IsBearer(tr.TokenType) {
		return upstream.Token{}, fmt.Errorf("kbank: token type %.20q is not a bearer token", tr.TokenType)
	}
	return upstream.Token{Value: tr.AccessToken, Life: tr.ExpiresIn.Life()}, nil
}

// verifyRequest is the lookup's body.
type verifyRequest struct {
	RqUID string     `json:"rqUID"`
	RqDt  string     `json:"rqDt"`
	Data  verifyData `json:"data"`
}

type verifyData struct {
	SendingBank string `json:"sendingBank"`
	TransRef    string `json:"transRef"`
}

// verifyReply is the lookup's answer.
type verifyReply struct {
	RqUID         string         `json:"rqUID"`
	KbankTxnID    string         `json:"kbankTxnId"`
	StatusCode    string         `json:"statusCode"`
	StatusMessage string         `json:"statusMessage"`
	Data          *slipdata.Data `json:"data"`
}

// bangkok is UTC+07:00, the offset KBank wants in rqDt.
var bangkok = time.FixedZone("+07", 7*60*60)

// Bank looks up (bankCode, transRef): one billed lookup, sent again only
// after an expired-token answer.
func (c *Connector) Bank(ctx context.Context, bankCode, transRef string) (bank.Slip, error) {
	return c.com.Lookup(ctx, bankCode, transRef, c.lookup)
}

func (c *Connector) lookup(ctx context.Context, bankCode, transRef string) (bank.Slip, error) {
	var rqUID string // the last request's
	rep, err := c.com.Tokens.Send(ctx, func(token string) (upstream.Reply, bool, error) {
		rqUID = upstream.RequestID()
		// A struct of strings: it always encodes.
		body, _ := json.Marshal(verifyRequest{
			RqUID: rqUID,
			RqDt:  c.com.Now().In(bangkok).Format(time.RFC3339),
			Data:  verifyData{SendingBank: bankCode, TransRef: transRef},
		})
		rep, err := upstream.Send(c.com.Client, func() (*http.Request, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.com.Base+VerifyPath, bytes.NewReader(body))
			if err != nil {
				return nil, err
			}
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json")
			if c.testMode {
				req.Header.Set("x-test-mode", "true")
			}
			return req, nil
		})
		return rep, rep.Status == http.StatusUnauthorized, err
	})
	switch {
	case rqUID == "": // no token: nothing was sent
		return bank.Slip{}, fmt.Errorf("%w: kbank: %w", bank.ErrUpstream, err)
	case err != nil:
		return bank.Slip{}, fmt.Errorf("%w: kbank: rqUID %s: %w", bank.ErrUpstream, rqUID, err)
	}
	return decode(rep, rqUID, transRef)
}

// decode reads a verify reply to the lookup rqUID of transRef.
func decode(rep upstream.Reply, rqUID, transRef string) (bank.Slip, error) {
	var r verifyReply
	jerr := json.Unmarshal(rep.Body, &r)
	if jerr != nil || r.StatusCode == "" {
		if rep.Status != http.StatusOK {
			return bank.Slip{}, fmt.Errorf("%w: kbank: rqUID %s: HTTP %d", bank.ErrUpstream, rqUID, rep.Status)
		}
		return bank.Slip{}, fmt.Errorf("%w: kbank: rqUID %s: malformed reply: %v", bank.ErrUpstream, rqUID, jerr)
	}
	trace := fmt.Sprintf("rqUID %s kbankTxnId %.64q", rqUID, r.KbankTxnID)
	switch r.StatusCode {
	case StatusOK:
		if rep.Status != http.StatusOK || r.Data == nil {
			return bank.Slip{}, fmt.Errorf("%w: kbank: %s: HTTP %d, status 0000 without data", bank.ErrUpstream, trace, rep.Status)
		}
		s, err := slipdata.Map(r.Data)
		if err != nil {
			return bank.Slip{}, fmt.Errorf("%w: kbank: %s: %w", bank.ErrUpstream, trace, err)
		}
		if s.TransRef != transRef {
			return bank.Slip{}, fmt.Errorf("%w: kbank: %s: asked for %q, reply is for %.40q", bank.ErrUpstream, trace, transRef, s.TransRef)
		}
		return s, nil
	case StatusNotFound:
		return bank.Slip{}, fmt.Errorf("%w: kbank: %s: status %s", bank.ErrNotFound, trace, r.StatusCode)
	}
	return bank.Slip{}, fmt.Errorf("%w: kbank: %s: HTTP %d status %.10q %.100q", bank.ErrUpstream, trace, rep.Status, r.StatusCode, r.StatusMessage)
}

// Wallet is not a KBank lookup: wallet transfers are not on the
// interbank switch's slip API.
func (c *Connector) Wallet(context.Context, string) (bank.WalletSlip, error) {
	return c.com.Guard.NoWallet()
}
