package promptpay

import (
	"errors"
	"fmt"

	qrcode "github.com/skip2/go-qrcode"
)

// Image sizes PNG accepts, in pixels per side.
const (
	// DefaultSize is the side of the image PNG draws when asked for size 0:
	// large enough for a phone to scan from a screen or from print.
	DefaultSize = 512
	// MaxSize bounds the image, and with it the memory one request can make
	// PNG use (one byte per pixel while drawing).
	MaxSize = 4096
)

// PNG draws payload as a QR code and returns the PNG file: black on white,
// error correction level M (it survives about 15% of the symbol damaged, a
// usual balance for codes shown on screens and printed on counters), and
// the 4-module quiet zone scanners need around the symbol. The image is size
// pixels on each side, DefaultSize if size is 0; a size below the symbol with
// its quiet zone (37 or 41 modules for a PromptPay payload) is raised to one
// pixel per module. A PromptPay code at DefaultSize is some 800 bytes.
//
// The modules are spread over the pixels as evenly as whole pixels allow, so
// at most sizes they differ in width by a pixel, which scanners tolerate.
func PNG(payload string, size int) ([]byte, error) {
	if size == 0 {
		size = DefaultSize
	}
	if size < 0 || size > MaxSize {
		return nil, fmt.Errorf("size: must be between 1 and %d pixels, or 0 for %d; got %d", MaxSize, DefaultSize, size)
	}
	if payload == "" {
		return nil, errors.New("payload: is required")
	}
	q, err := qrcode.New(payload, qrcode.Medium)
	if err != nil {
		return nil, fmt.Errorf("promptpay: qr code: %w", err)
	}
	b, err := q.PNG(size)
	if err != nil {
		return nil, fmt.Errorf("promptpay: png: %w", err)
	}
	return b, nil
}
