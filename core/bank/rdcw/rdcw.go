// Package rdcw is a bank.Connector for RDCW Slip Verify, an aggregator that
// resells the banks' slip lookups and returns the switch's data object
// (package slipdata) inside an envelope of its own.
//
// # Wire format
//
//	POST {base}/v1/inquiry
//	Authorization: Basic base64(client id ":" client secret)
//	{"payload": "<the slip's QR payload>"}
//	→ 200 {"valid": true, "data": {...the switch's record...},
//	       "isCached": false, "quota": {"usage": 12, "limit": 100}}
//	→ 4xx {"code": 10001, "message": "..."}
//
// The payload is rebuilt from the bank code and transRef (slip.Bank.Encode,
// byte for byte what the bank's app prints). There is no token: the one
// request is the lookup, sent once.
//
// # Answers
//
// valid with data is the slip. valid false without a code is taken as not
// found (bank.ErrNotFound): RDCW's clients in the wild read it so, and its
// documentation lists no not-found code. Every code (20001 and 20002, bank
// unreachable; 21001, subscription ended; 40000, IP not allowed; 10001 and
// 10002, payload refused) and every other answer is bank.ErrUpstream with
// the code in the error text for core's log. bank.ErrPending is never
// answered.
package rdcw

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/bank/slipdata"
	"github.com/slipverify/slipverify/core/bank/upstream"
	"github.com/slipverify/slipverify/core/slip"
)

// InquiryPath is the lookup's path below the base URL.
const InquiryPath = "/v1/inquiry"

// Config configures a Connector.
type Config struct {
	URL          string // scheme and host, https://suba.rdcw.co.th
	ClientID     string
	ClientSecret string
	CAFile       string        // extra CA roots (PEM); optional
	Timeout      time.Duration // zero: upstream.DefaultTimeout
	Limits       upstream.Limits
	Client       *http.Client     // nil: one of this package's own; redirects never followed
	Now          func() time.Time // nil: time.Now
	Metrics      *metrics.Set     // nil: not exported
}

// Connector is a bank.Connector asking RDCW. It is safe for concurrent use.
type Connector struct {
	com   upstream.Common
	basic string
}

// New returns a connector for cfg, reporting every problem of cfg at once.
func New(cfg Config) (*Connector, error) {
	c := &Connector{basic: "Basic " + base64.StdEncoding.EncodeToString([]byte(cfg.ClientID+":"+cfg.ClientSecret))}
	return upstream.Connect(c, &c.com, upstream.Settings{Name: "rdcw", Prefix: "SLIP_RDCW", URL: cfg.URL,
		Credentials: [][2]string{{"CLIENT_ID", cfg.ClientID}, {"CLIENT_SECRET", cfg.ClientSecret}},
		Transport:   upstream.Transport{TLS: upstream.TLS{CAFile: cfg.CAFile}, Timeout: cfg.Timeout, Limits: cfg.Limits, Client: cfg.Client, Now: cfg.Now, Metrics: cfg.Metrics}})
}

type inquiry struct {
	Payload string `json:"payload"`
}

type reply struct {
	Valid   *bool          `json:"valid"`
	Data    *slipdata.Data `json:"data"`
	Code    *json.Number   `json:"code"`
	Message string         `json:"message"`
}

// Bank looks up (bankCode, transRef) with one request.
func (c *Connector) Bank(ctx context.Context, bankCode, transRef string) (bank.Slip, error) {
	return c.com.Lookup(ctx, bankCode, transRef, c.lookup)
}

func (c *Connector) lookup(ctx context.Context, bankCode, transRef string) (bank.Slip, error) {
	// A struct of one string: it always encodes.
	body, _ := json.Marshal(inquiry{Payload: slip.Bank{BankCode: bankCode, TransRef: transRef}.Encode()})
	rep, err := upstream.Send(c.com.Client, func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.com.Base+InquiryPath, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", c.basic)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		return req, nil
	})
	if err != nil {
		return bank.Slip{}, fmt.Errorf("%w: rdcw: %w", bank.ErrUpstream, err)
	}
	return decode(rep, transRef)
}

func decode(rep upstream.Reply, transRef string) (bank.Slip, error) {
	var r reply
	if err := json.Unmarshal(rep.Body, &r); err != nil {
		return bank.Slip{}, fmt.Errorf("%w: rdcw: HTTP %d: malformed reply: %v", bank.ErrUpstream, rep.Status, err)
	}
	switch {
	case r.Code != nil:
		return bank.Slip{}, fmt.Errorf("%w: rdcw: HTTP %d code %.12s %.100q", bank.ErrUpstream, rep.Status, r.Code.String(), r.Message)
	case rep.Status == http.StatusOK && r.Valid != nil && *r.Valid && r.Data != nil:
		s, err := slipdata.Map(r.Data)
		if err != nil {
			return bank.Slip{}, fmt.Errorf("%w: rdcw: %w", bank.ErrUpstream, err)
		}
		if s.TransRef != transRef {
			return bank.Slip{}, fmt.Errorf("%w: rdcw: asked for %q, reply is for %.40q", bank.ErrUpstream, transRef, s.TransRef)
		}
		return s, nil
	case rep.Status == http.StatusOK && r.Valid != nil && !*r.Valid:
		return bank.Slip{}, fmt.Errorf("%w: rdcw: valid false %.100q", bank.ErrNotFound, r.Message)
	}
	return bank.Slip{}, fmt.Errorf("%w: rdcw: HTTP %d without valid data", bank.ErrUpstream, rep.Status)
}

// Wallet is not an RDCW bank lookup.
func (c *Connector) Wallet(context.Context, string) (bank.WalletSlip, error) {
	return c.com.Guard.NoWallet()
}
