package server_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	qrcode "github.com/skip2/go-qrcode"
)

// qrPNG is a PNG holding one QR code of payload.
func qrPNG(t testing.TB, payload string) []byte {
	t.Helper()
	b, err := qrcode.Encode(payload, qrcode.Medium, 320)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// multipartBody is a form with one file part and optional fields.
func multipartBody(t testing.TB, part string, file []byte, fields ...string) ([]byte, string) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for i := 0; i+1 < len(fields); i += 2 {
		w.WriteField(fields[i], fields[i+1])
	}
	fw, _ := w.CreateFormFile(part, "slip.png")
	fw.Write(file)
	w.Close()
	return buf.Bytes(), w.FormDataContentType()
}

func TestImageSources(t *testing.T) {
	c := startCore(t, nil)
	p := bankPayload("004", "IMAGEREF0001")
	img := qrPNG(t, p)
	imgs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slip.png":
			w.Write(img)
		case "/text":
			w.Write([]byte("hello"))
		case "/moved":
			http.Redirect(w, r, "http://10.0.0.1/slip.png", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer imgs.Close()

	// v2 upload in part "image", with form fields.
	body, ct := multipartBody(t, "image", img, "remark", "from a photo", "matchAmount", "1")
	d := c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main", body: body, contentType: ct}).data(t)
	if get(d, "rawSlip", "payload") != p || d["remark"] != "from a photo" {
		t.Fatalf("v2 upload: %v", d)
	}
	// A payload with white space around it is the slip's payload without it.
	d = c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main", body: map[string]any{"payload": "  " + p + " \n"}}).data(t)
	if get(d, "rawSlip", "payload") != p {
		t.Errorf("rawSlip.payload of a padded payload: %q", get(d, "rawSlip", "payload"))
	}
	// v1 upload in part "file"; the same slip again is a duplicate.
	body, ct = multipartBody(t, "file", img, "checkDuplicate", "true")
	c.do(t, call{method: "POST", path: "/verify", branch: "br-main", body: body, contentType: ct}).v1err(t, 400, "duplicate_slip")
	// base64, plain, as a data URL, with a final line break and wrapped as
	// MIME wraps it (the image's length not a multiple of 3, so the text
	// ends in padding); a URL.
	if len(img)%3 == 0 {
		img = append(img, 0) // after the PNG's end: ignored
	}
	b64 := base64.StdEncoding.EncodeToString(img)
	var mime, spaced strings.Builder
	for rest := b64; rest != ""; rest = rest[min(76, len(rest)):] {
		mime.WriteString(rest[:min(76, len(rest))] + "\r\n")
		spaced.WriteString(rest[:min(76, len(rest))] + " \t")
	}
	for _, src := range []map[string]any{
		{"base64": b64},
		{"base64": "data:image/png;base64," + b64},
		{"base64": b64 + "\n"},
		{"base64": mime.String()},
		{"base64": spaced.String()}, // white space of any kind, as line breaks
		{"url": imgs.URL + "/slip.png"},
	} {
		d := c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main", body: src}).data(t)
		if get(d, "rawSlip", "transRef") != "IMAGEREF0001" || d["isDuplicate"] != true {
			t.Errorf("%.40v: %v", src, d)
		}
	}

	// Errors, in both versions.
	noQR := new(bytes.Buffer)
	blank := image.NewGray(image.Rect(0, 0, 200, 200))
	for i := range blank.Pix {
		blank.Pix[i] = 0xff
	}
	blank.Set(5, 5, color.Black)
	png.Encode(noQR, blank)
	notSlip := qrPNG(t, "https://example.com/not-a-slip")
	cases := []struct {
		src     map[string]any
		status2 int
		code2   string
		status1 int
		code1   string
	}{
		{map[string]any{"base64": base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\ntruncated"))}, 400, "INVALID_IMAGE_FORMAT", 400, "invalid_image"},
		{map[string]any{"base64": base64.StdEncoding.EncodeToString([]byte("plain text"))}, 400, "INVALID_IMAGE_FORMAT", 400, "invalid_image"},
		{map[string]any{"base64": base64.StdEncoding.EncodeToString(noQR.Bytes())}, 404, "SLIP_NOT_FOUND", 404, "qrcode_not_found"},
		{map[string]any{"base64": base64.StdEncoding.EncodeToString(notSlip)}, 404, "SLIP_NOT_FOUND", 400, "invalid_payload"},
		{map[string]any{"url": "ftp://127.0.0.1/slip.png"}, 400, "URL_PROTOCOL_NOT_ALLOWED", 400, "invalid_url"},
		{map[string]any{"url": "http://10.0.0.1/slip.png"}, 400, "URL_INVALID_IP_RANGE", 400, "invalid_url"},
		{map[string]any{"url": "http://2130706434/slip.png"}, 400, "URL_INVALID_IP_RANGE", 400, "invalid_url"},
		{map[string]any{"url": imgs.URL + "/moved"}, 400, "URL_INVALID_IP_RANGE", 400, "invalid_url"},
		{map[string]any{"url": imgs.URL + "/missing.png"}, 400, "IMAGE_URL_UNREACHABLE", 400, "invalid_url"},
		{map[string]any{"url": imgs.URL + "/text"}, 400, "INVALID_IMAGE_FORMAT", 400, "invalid_image"},
		{map[string]any{"base64": strings.Repeat("A", 6<<20)}, 400, "IMAGE_SIZE_TOO_LARGE", 400, "image_size_too_large"},
	}
	for i, k := range cases {
		c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main", body: k.src}).v2err(t, k.status2, k.code2)
		c.do(t, call{method: "POST", path: "/verify", branch: "br-main", body: k.src}).v1err(t, k.status1, k.code1)
		if t.Failed() {
			t.Fatalf("case %d (%.60v)", i, fmt.Sprint(k.src))
		}
	}
	// A big upload is refused before it is decoded.
	big := append(append([]byte{}, img...), make([]byte, 5<<20)...)
	body, ct = multipartBody(t, "image", big)
	c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main", body: body, contentType: ct}).v2err(t, 400, "IMAGE_SIZE_TOO_LARGE")
	// A payload and an image are two sources.
	c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main",
		body: map[string]any{"payload": p, "base64": base64.StdEncoding.EncodeToString(img)}}).v2err(t, 400, "VALIDATION_ERROR")
	// Errors consumed nothing: one slip verified, once charged.
	if u, _, _ := c.usage(t, "br-main"); u != 1 {
		t.Errorf("used %v, want 1", u)
	}
}

// TestTooManyPixels: a picture within 4 MB that declares more pixels than
// any camera makes is refused before decoding, naming the real reason.
func TestTooManyPixels(t *testing.T) {
	c := startCore(t, nil)
	ihdr := binary.BigEndian.AppendUint32(nil, 100_000)
	ihdr = binary.BigEndian.AppendUint32(ihdr, 100_000)
	ihdr = append(ihdr, 8, 0, 0, 0, 0) // 8-bit grey
	chunk := append([]byte("IHDR"), ihdr...)
	png := append([]byte("\x89PNG\r\n\x1a\n"), binary.BigEndian.AppendUint32(nil, uint32(len(ihdr)))...)
	png = binary.BigEndian.AppendUint32(append(png, chunk...), crc32.ChecksumIEEE(chunk))
	a := c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "br-main",
		body: map[string]any{"base64": base64.StdEncoding.EncodeToString(png)}})
	a.v2err(t, 400, "IMAGE_SIZE_TOO_LARGE")
	if msg, _ := get(a.body, "error", "message").(string); !strings.Contains(msg, "pixels") || strings.Contains(msg, "4 MB") {
		t.Errorf("message %q: want the pixels named, not the file size", msg)
	}
}
