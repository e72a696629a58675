package server_test

import (
	"testing"
)

// TestNotBase64IsUnreadableImage: an image sent as text that is not base64
// is an image that cannot be read, answered as one whose bytes are no image
// (v1 invalid_image, v2 INVALID_IMAGE_FORMAT), in every field that carries
// one, on bank and wallet routes, sync and async: the commercial API's SDKs
// map those codes, not invalid_request.
func TestNotBase64IsUnreadableImage(t *testing.T) {
	c, async := startCore(t, nil), startAsyncCore(t)
	for _, text := range []string{"!!!notbase64", "AAAA"} { // not base64; base64 of no image (sync only: a job reads it later)
		for _, k := range []struct {
			c       *core
			path    string
			field   string
			v1      bool
			wrapped string // the body around the image's field
		}{
			{c, "/verify", "image", true, ""},
			{c, "/verify", "base64", true, ""},
			{c, "/verify", "data", true, ""},
			{c, "/api/v1/verify", "image", true, ""},
			{c, "/verify/wallet", "image", true, ""},
			{c, "/verify/wallet", "base64", true, ""},
			{c, "/v2/verify/bank", "base64", false, ""},
			{c, "/v2/verify/wallet", "base64", false, ""},
			{async, "/v2/verify/bank/async", "base64", false, `"callbackUrl":"https://127.0.0.1/cb",`},
			{async, "/v2/verify/bank/async/batch", "base64", false, "batch"},
		} {
			if k.c == async && text == "AAAA" {
				continue
			}
			body := `{` + k.wrapped + `"` + k.field + `":"` + text + `"}`
			if k.wrapped == "batch" {
				body = `{"callbackUrl":"https://127.0.0.1/cb","items":[{"` + k.field + `":"` + text + `"}]}`
			}
			a := k.c.do(t, call{method: "POST", path: k.path, branch: "br-main", contentType: "application/json", body: []byte(body)})
			if k.v1 {
				a.v1err(t, 400, "invalid_image")
			} else {
				a.v2err(t, 400, "INVALID_IMAGE_FORMAT")
			}
		}
	}
	// A field that is no string is a malformed request, not an image.
	c.do(t, call{method: "POST", path: "/verify", branch: "br-main", body: map[string]any{"image": 12}}).v1err(t, 400, "invalid_request")
	c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main", body: map[string]any{"base64": ""}}).v2err(t, 400, "VALIDATION_ERROR")
}
