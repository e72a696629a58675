package server

import (
	"encoding/base64"
	"encoding/json"
	"slices"

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
	var f map[string]json.RawMessage
	if err := json.Unmarshal(ctx.PostBody(), &f); err != nil || f == nil {
		return nil, api.Errorf(api.Validation, "body: must be a JSON object")
	}
	var fe api.FieldErrors
	for name := range f {
		if !slices.Contains([]string{"type", "target", "amount"}, name) {
			fe.Add(name, "unknown field")
		}
	}
	var kind, target string
	if json.Unmarshal(f["type"], &kind) != nil || kind != "promptpay" {
		fe.Add("type", `must be "promptpay"`)
	}
	if json.Unmarshal(f["target"], &target) != nil || target == "" {
		fe.Add("target", "is required: a phone number, a national or tax ID, or an e-wallet ID")
	}
	var amount *float64
	if raw, ok := f["amount"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &amount) != nil {
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
		return nil, &api.Error{Code: api.InternalServerError, Cause: err}
	}
	return QR{Payload: payload, Image: base64.StdEncoding.EncodeToString(png)}, nil
}
