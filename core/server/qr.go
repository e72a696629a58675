package server

import (
	"encoding/base64"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/promptpay"
	"github.com/slipverify/slipverify/core/server/fields"
)

// QR is the answer of POST /qr/generate: the EMVCo PromptPay payload and a
// base64 PNG of its QR code.
type QR struct {
	Payload string `json:"payload"`
	Image   string `json:"image"`
}

// generateQR answers POST /qr/generate {type: "promptpay", target, amount?}.
func (s *Server) generateQR(ctx *fasthttp.RequestCtx, _ caller) (any, error) {
	var fe api.FieldErrors
	f, err := fields.Body(ctx, &fe, "type", "target", "amount")
	if err != nil {
		return nil, err
	}
	if kind, ok := f.Str("type"); !ok || kind != "promptpay" {
		fe.Add("type", `must be "promptpay"`)
	}
	target, ok := f.Str("target")
	if !ok || target == "" {
		fe.Add("target", "is required: a phone number, a national or tax ID, or an e-wallet ID")
	}
	var amount *float64
	if f.Has("amount") && !f.Null("amount") {
		if n, ok := f.Number("amount"); ok {
			amount = &n
		} else {
			fe.Add("amount", "must be a number")
		}
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	payload, err := promptpay.Payload(target, amount)
	if err != nil {
		return nil, api.Errorf(api.Validation, err.Error())
	}
	png, err := promptpay.PNG(payload, 0)
	if err != nil {
		return nil, api.Internal(err)
	}
	return QR{Payload: payload, Image: base64.StdEncoding.EncodeToString(png)}, nil
}
