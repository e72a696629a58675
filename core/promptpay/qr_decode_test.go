// TestPNGDecodes scans the generated QR codes back with gozxing: an
// independent reader must find the payload in the PNG.

package promptpay

import (
	"bytes"
	"image"
	"image/png"
	"testing"

	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode"
)

// decodeQR reads the QR code in a PNG back to its text with gozxing, an
// implementation independent of the encoder.
func decodeQR(tb testing.TB, b []byte) (string, image.Image) {
	tb.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		tb.Fatalf("not a PNG: %v", err)
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		tb.Fatal(err)
	}
	res, err := qrcode.NewQRCodeReader().Decode(bmp, map[gozxing.DecodeHintType]any{gozxing.DecodeHintType_PURE_BARCODE: true})
	if err != nil {
		tb.Fatalf("QR code does not decode: %v", err)
	}
	return res.GetText(), img
}

// TestPNGDecodes checks that the QR code scans back to the payload, for
// every golden vector at the default size and for the longest payload at
// other sizes, down to one pixel per module.
func TestPNGDecodes(t *testing.T) {
	amount := 9999999999.99
	longest, err := Payload("004999000288505", &amount)
	if err != nil {
		t.Fatal(err)
	}
	f := func(payload string, size int) {
		t.Helper()
		b, err := PNG(payload, size)
		if err != nil {
			t.Fatalf("PNG(%q, %d): %v", payload, size, err)
		}
		got, img := decodeQR(t, b)
		if got != payload {
			t.Errorf("PNG(%q, %d) decodes to %q", payload, size, got)
		}
		checkQuietZone(t, img)
	}
	seen := map[string]bool{}
	for _, v := range loadVectors(t) {
		if !seen[v.Promptparse.Payload] {
			seen[v.Promptparse.Payload] = true
			f(v.Promptparse.Payload, 0)
		}
	}
	for _, size := range []int{1, 100, 300, 1000} {
		f(longest, size)
	}
}
