// Package scb is a bank.Connector for SCB's Slip Verification API
// (documented for QR 30 bill payments; it answers for transfers on the
// interbank switch).
//
// # Wire format
//
// A token:
//
//	POST {base}/v1/oauth/token
//	Content-Type: application/json
//	resourceOwnerId: <API key>
//	requestUId: <uuid>
//	{"applicationKey": "<API key>", "applicationSecret": "<API secret>"}
//	→ {"status": {"code": 1000, "description": "Success"},
//	   "data": {"accessToken": "...", "tokenType": "Bearer", "expiresIn": 1800, ...}}
//
// then one lookup per call:
//
//	GET {base}/v1/payment/billpayment/transactions/{transRef}?sendingBank=014
//	authorization: Bearer <token>
//	requestUId: <uuid>
//	resourceOwnerId: <API key>
//	accept-language: EN
//	→ {"status": {"code": 1000, "description": "Success"}, "data": {...}}
//
// where data is the switch's record with every field a string ("amount":
// "5345.45"). {base} is the base SCB gives, with its /partners/... prefix.
//
// # Answers
//
// Status 1000 with data is the slip; 1104 (and the switch's 8404) is
// bank.ErrNotFound. SCB does not tell a transfer still settling from one
// that does not exist, so bank.ErrPending is never answered. HTTP 401 or
// status 9300 means the token expired: the lookup is sent once more with a
// new one (upstream.Tokens.Send). Everything else is bank.ErrUpstream, with
// the status code and requestUId in the error text for core's log.
package scb

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/bank/slipdata"
	"github.com/slipverify/slipverify/core/bank/upstream"
)

// Paths below the base URL.
const (
	TokenPath  = "/v1/oauth/token"
	LookupPath = "/v1/payment/billpayment/transactions/"
)

// Status codes of SCB's replies.
const (
	StatusOK           = 1000
	StatusNotFound     = 1104
	StatusSwitchNotFnd = 8404
	StatusTokenExpired = 9300
)

// Config configures a Connector.
type Config struct {
	URL       string // base, https://api-sandbox.partners.scb/partners/sandbox say
	APIKey    string // applicationKey, also sent as resourceOwnerId
	APISecret string // applicationSecret
	upstream.Transport
}

// Connector is a bank.Connector asking SCB. It is safe for concurrent use.
type Connector struct {
	com         upstream.Common
	key, secret string
}

// New returns a connector for cfg, reporting every problem of cfg at once.
func New(cfg Config) (*Connector, error) {
	c := &Connector{key: cfg.APIKey, secret: cfg.APISecret}
	return upstream.Connect(c, &c.com, upstream.Settings{Name: "scb", Prefix: "SLIP_SCB", URL: cfg.URL, TokenPath: TokenPath, Fetch: c.fetchToken,
		Credentials: [][2]string{{"API_KEY", cfg.APIKey}, {"API_SECRET", cfg.APISecret}}, Transport: cfg.Transport})
}

// code is a status code sent as a number or a string.
type code int

func (c *code) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		b = []byte(s)
	}
	n, err := strconv.Atoi(string(b))
	if err != nil {
		return fmt.Errorf("status code %.20q is not a number", b)
	}
	*c = code(n)
	return nil
}

type status struct {
	Code        code   `json:"code"`
	Description string `json:"description"`
}

type tokenReply struct {
	Status status `json:"status"`
	Data   *struct {
		AccessToken string           `json:"accessToken"`
		TokenType   string           `json:"tokenType"`
		ExpiresIn   upstream.Seconds `json:"expiresIn"`
	} `json:"data"`
}

type tokenRequest struct {
	ApplicationKey    string `json:"applicationKey"`
	ApplicationSecret string `json:"applicationSecret"`
}

func (c *Connector) fetchToken(ctx context.Context) (upstream.Token, error) {
	body, err := json.Marshal(tokenRequest{ApplicationKey: c.key, ApplicationSecret: c.secret})
	if err != nil {
		return upstream.Token{}, err
	}
	rqUID := upstream.RequestID()
	rep, err := upstream.Send(c.com.Client, func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.com.TokenURL, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		req.Header.Set("resourceOwnerId", c.key)
		req.Header.Set("requestUId", rqUID)
		req.Header.Set("accept-language", "EN")
		return req, nil
	})
	if err != nil {
		return upstream.Token{}, err
	}
	var tr tokenReply
	if err := json.Unmarshal(rep.Body, &tr); err != nil || rep.Status != http.StatusOK {
		return upstream.Token{}, fmt.Errorf("scb: POST %s: requestUId %s: HTTP %d: %v", TokenPath, rqUID, rep.Status, err)
	}
	if tr.Status.Code != StatusOK || tr.Data == nil {
		return upstream.Token{}, fmt.Errorf("scb: POST %s: requestUId %s: status %d %.100q", TokenPath, rqUID, tr.Status.Code, tr.Status.Description)
	}
	if !upstream.IsBearer(tr.Data.TokenType) {
		return upstream.Token{}, fmt.Errorf("scb: token type %.20q is not a bearer token", tr.Data.TokenType)
	}
	return upstream.Token{Value: tr.Data.AccessToken, Life: tr.Data.ExpiresIn.Life()}, nil
}

type lookupReply struct {
	Status status         `json:"status"`
	Data   *slipdata.Data `json:"data"`
}

// Bank looks up (bankCode, transRef): one billed lookup, sent again only
// after an expired-token answer.
func (c *Connector) Bank(ctx context.Context, bankCode, transRef string) (bank.Slip, error) {
	return c.com.Lookup(ctx, bankCode, transRef, c.lookup)
}

func (c *Connector) lookup(ctx context.Context, bankCode, transRef string) (bank.Slip, error) {
	target := c.com.Base + LookupPath + url.PathEscape(transRef) + "?sendingBank=" + url.QueryEscape(bankCode)
	var rqUID string // the last request's
	var r lookupReply
	var jerr error
	rep, err := c.com.Tokens.Send(ctx, func(token string) (upstream.Reply, bool, error) {
		rqUID = upstream.RequestID()
		rep, err := upstream.Send(c.com.Client, func() (*http.Request, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
			if err != nil {
				return nil, err
			}
			upstream.Unreplayable(req)
			req.Header.Set("authorization", "Bearer "+token)
			req.Header.Set("requestUId", rqUID)
			req.Header.Set("resourceOwnerId", c.key)
			req.Header.Set("accept-language", "EN")
			req.Header.Set("Accept", "application/json")
			return req, nil
		})
		if err != nil {
			return rep, false, err
		}
		r = lookupReply{}
		jerr = json.Unmarshal(rep.Body, &r)
		expired := rep.Status == http.StatusUnauthorized || (jerr == nil && r.Status.Code == StatusTokenExpired)
		return rep, expired, nil
	})
	switch {
	case rqUID == "": // no token: nothing was sent
		return bank.Slip{}, fmt.Errorf("%w: scb: %w", bank.ErrUpstream, err)
	case err != nil:
		return bank.Slip{}, fmt.Errorf("%w: scb: requestUId %s: %w", bank.ErrUpstream, rqUID, err)
	}
	return decode(rep.Status, &r, jerr, rqUID, transRef)
}

func decode(httpStatus int, r *lookupReply, jerr error, rqUID, transRef string) (bank.Slip, error) {
	if jerr != nil || r.Status.Code == 0 {
		if httpStatus != http.StatusOK {
			return bank.Slip{}, fmt.Errorf("%w: scb: requestUId %s: HTTP %d", bank.ErrUpstream, rqUID, httpStatus)
		}
		return bank.Slip{}, fmt.Errorf("%w: scb: requestUId %s: malformed reply: %v", bank.ErrUpstream, rqUID, jerr)
	}
	switch r.Status.Code {
	case StatusOK:
		if httpStatus != http.StatusOK || r.Data == nil {
			return bank.Slip{}, fmt.Errorf("%w: scb: requestUId %s: HTTP %d, status 1000 without data", bank.ErrUpstream, rqUID, httpStatus)
		}
		s, err := slipdata.Map(r.Data)
		if err != nil {
			return bank.Slip{}, fmt.Errorf("%w: scb: requestUId %s: %w", bank.ErrUpstream, rqUID, err)
		}
		if s.TransRef != transRef {
			return bank.Slip{}, fmt.Errorf("%w: scb: requestUId %s: asked for %q, reply is for %.40q", bank.ErrUpstream, rqUID, transRef, s.TransRef)
		}
		return s, nil
	case StatusNotFound, StatusSwitchNotFnd:
		return bank.Slip{}, fmt.Errorf("%w: scb: requestUId %s: status %d", bank.ErrNotFound, rqUID, r.Status.Code)
	}
	return bank.Slip{}, fmt.Errorf("%w: scb: requestUId %s: HTTP %d status %d %.100q", bank.ErrUpstream, rqUID, httpStatus, r.Status.Code, r.Status.Description)
}

// Wallet is not an SCB slip lookup.
func (c *Connector) Wallet(context.Context, string) (bank.WalletSlip, error) {
	return c.com.Guard.NoWallet()
}
