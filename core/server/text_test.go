package server_test

import (
	"testing"
)

// TestTextIsUTF8: text that is not UTF-8 is refused with VALIDATION_ERROR,
// in a JSON body (which encoding/json would read with U+FFFD for each bad
// byte), a form's field and a query's.
func TestTextIsUTF8(t *testing.T) {
	c := startCore(t, nil)
	p := bankPayload("004", "UTF8REF0001")
	a := c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main", contentType: "application/json",
		body: []byte("{\"payload\":\"" + p + "\",\"remark\":\"order \xff\xfe 42\"}")})
	a.v2err(t, 400, "VALIDATION_ERROR")
	if msg := get(a.body, "error", "message"); msg != "body: must be UTF-8 text" {
		t.Errorf("JSON: %q", msg)
	}
	body, ct := multipartBody(t, "image", qrPNG(t, p), "remark", "order \xff 42")
	a = c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main", body: body, contentType: ct})
	a.v2err(t, 400, "VALIDATION_ERROR")
	if msg := get(a.body, "error", "message"); msg != "remark: must be UTF-8 text" {
		t.Errorf("form: %q", msg)
	}
	c.do(t, call{method: "GET", path: "/verify?payload=" + p + "%FF", branch: "br-main"}).v1err(t, 400, "invalid_request")
	// Valid text still passes, Thai included.
	d := c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main",
		body: map[string]any{"payload": p, "remark": "คำสั่งซื้อ 42"}}).data(t)
	if d["remark"] != "คำสั่งซื้อ 42" {
		t.Errorf("remark: %v", d["remark"])
	}
}
