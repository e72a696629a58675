package server

import (
	"encoding/base64"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/promptpay"
)

// QR is the answer of POST /qr/generate: the EMVCo PromptPay payload and a
// base64 PNG of its QR code.
type QR struct {
	Payload string `json:"payload"`
	Image   string `json:"image"`
}

// generateQR answers POST /qr/generate {type: "promptpay", target, amount?}.
func (s *Server) generateQR(ctx *fasthttp.RequestCtx, _ caller) (any, error) {
	f, err := jsonFields(ctx.PostBody())
	if err != nil {
		return nil, err
	}
	var fe api.FieldErrors
	f.only(&fe, "type", "target", "amount")
	if kind, ok := f.str("type"); !ok || kind != "promptpay" {
		fe.Add("type", `must be "promptpay"`)
	}
	target, ok := f.str("target")
	if !ok || target == "" {
		fe.Add("target", "is required: a phone number, a national or tax ID, or an e-wallet ID")
	}
	var amount *float64
	if f.has("amount") && !f.null("amount") {
		if n, ok := f.number("amount"); ok {
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
