// Package qrscan finds the QR code of a transfer slip in an uploaded image.
//
// Scan takes the image's bytes, checks them the way the interface asks
// (JPEG, PNG, GIF or WebP by content, at most 4 MiB), refuses images that
// would take more than a fixed memory budget to decode before decoding
// them, and then looks for QR codes with a sequence of strategies, cheapest
// first, until one yields a payload the caller accepts as a slip.
package qrscan

import (
	"bytes"
	"errors"
	"fmt"
	"image"

	"github.com/slipverify/slipverify/core/qrscan/internal/jpegluma"
)

// MaxBytes is the largest image accepted: 4 MiB.
const MaxBytes = 4 << 20

// Budget is the memory one Scan may allocate for one image, in bytes:
// decoding plus every working buffer. Images whose header declares more
// pixels than fit are refused with ErrTooManyPixels before decoding.
const Budget = 64 << 20

// MaxPixels is the most pixels an image may have, 64 Mipx (67,108,864):
// above every phone camera's default output (12 to 50 Mpx), far below a
// decompression bomb. A file of a few kilobytes may declare that many, so
// this bounds the time a decode takes as Budget bounds its memory.
const MaxPixels = 64 << 20

// Errors of Scan; test them with errors.Is.
var (
	// ErrFormat means the image is not a JPEG, PNG, GIF or WebP file, or is
	// a damaged one (INVALID_IMAGE_FORMAT, invalid_image).
	ErrFormat = errors.New("qrscan: not a valid JPEG, PNG, GIF or WebP image")
	// ErrTooLarge means the image is over MaxBytes, or declares more pixels
	// than can be decoded within Budget (IMAGE_SIZE_TOO_LARGE,
	// image_size_too_large).
	ErrTooLarge = errors.New("qrscan: image too large")
	// ErrTooManyPixels is the ErrTooLarge of an image under MaxBytes that
	// has more than MaxPixels, or whose dimensions would need more than
	// Budget to decode even at a reduced scale: a decompression bomb.
	// errors.Is(err, ErrTooLarge) holds for it too.
	ErrTooManyPixels = fmt.Errorf("%w: too many pixels", ErrTooLarge)
	// ErrNoQR means no QR code was found (SLIP_NOT_FOUND, qrcode_not_found).
	ErrNoQR = errors.New("qrscan: no QR code found")
)

// Scan returns the payload of the slip QR code in img.
//
// It returns the first payload for which accept returns true, preferring it
// to any other QR code in the image (a payment QR or a link printed beside
// the slip's). If it finds QR codes but accept takes none of them, it
// returns the first one found and a nil error, so that the caller reports
// an invalid slip rather than a missing one. A nil accept takes any payload.
//
// Errors: ErrTooLarge (over MaxBytes), ErrFormat (not one of the four
// formats by its magic bytes, or undecodable), ErrTooManyPixels (its
// declared dimensions do not fit the memory Budget; checked before
// decoding), ErrNoQR. Scan is safe for concurrent use; img is not kept.
// Scan is Check followed by Checked.Scan.
func Scan(img []byte, accept func(payload string) bool) (payload string, err error) {
	c, err := Check(img)
	if err != nil {
		return "", err
	}
	return c.Scan(accept)
}

// Checked is an image that passed Scan's checks on its header: it is a
// JPEG, PNG, GIF or WebP file of at most MaxBytes whose decoding and
// scanning fit the memory Budget.
type Checked struct {
	// Cost is the memory decoding and scanning the image may allocate, in
	// bytes, estimated from its header on the high side; at most Budget.
	Cost int64

	img    []byte
	f      format
	cfg    image.Config
	stream bool // a PNG read row by row into a reduced plane (pngrows.go)
	luma   int  // if not 0, a JPEG whose luma alone is decoded, shrunk by this (jpegluma)
}

// Check checks img from its header, without decoding it, and returns what
// scanning it will cost. Errors: ErrTooLarge, ErrFormat, ErrTooManyPixels,
// as Scan's. The Checked keeps img until its Scan returns.
func Check(img []byte) (Checked, error) {
	if len(img) > MaxBytes {
		return Checked{}, fmt.Errorf("%w: %d bytes, over the %d allowed", ErrTooLarge, len(img), MaxBytes)
	}
	f := sniff(img)
	if f == 0 {
		return Checked{}, ErrFormat
	}
	cfg, err := decodeConfig(f, img)
	if err != nil {
		return Checked{}, fmt.Errorf("%w: %s: %v", ErrFormat, f, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return Checked{}, fmt.Errorf("%w: %s: %d×%d pixels", ErrFormat, f, cfg.Width, cfg.Height)
	}
	if px := int64(cfg.Width) * int64(cfg.Height); px > MaxPixels {
		return Checked{}, fmt.Errorf("%w: %s of %d×%d pixels (%d Mpx), over the %d Mpx allowed",
			ErrTooManyPixels, f, cfg.Width, cfg.Height, px/1_000_000, MaxPixels/1_000_000)
	}
	cost, err := decodeCost(f, img, cfg.Width, cfg.Height)
	if err != nil {
		return Checked{}, err
	}
	// Too big for the standard decoder: a PNG is read row by row into the
	// working plane, a JPEG's luma alone is decoded at a reduced scale;
	// either keeps all of the image that the scan uses.
	w, h := cfg.Width, cfg.Height
	stream, luma := false, 0
	if cost += workCost(w, h); cost > Budget {
		switch {
		case f == formatPNG && pngStreamable(img):
			cost, stream = pngStreamCost(img, w, h)+workCost(w, h), true
		case f == formatJPEG:
			s := jpegLumaScale(w, h)
			if c, ok := jpegLumaCost(img, w, h, s); ok {
				cost, luma = c+workCost(w/s, h/s), s
			}
		}
	}
	if cost > Budget {
		return Checked{}, fmt.Errorf("%w: %s of %d×%d pixels needs about %d MiB to decode, over %d MiB",
			ErrTooManyPixels, f, cfg.Width, cfg.Height, cost>>20, Budget>>20)
	}
	return Checked{Cost: cost, img: img, f: f, cfg: cfg, stream: stream, luma: luma}, nil
}

// Scan decodes the image and returns the payload of its slip QR code, as
// the package's Scan does. Errors: ErrFormat (undecodable), ErrNoQR.
func (c Checked) Scan(accept func(payload string) bool) (payload string, err error) {
	if c.img == nil {
		return "", ErrFormat // the zero Checked
	}
	defer func() {
		// gozxing is a port of Java code that signals some failures by
		// panicking (index out of range on odd geometry); one bad image
		// must not take the process down.
		if r := recover(); r != nil {
			payload, err = "", fmt.Errorf("%w: decoder failure: %v", ErrNoQR, r)
			if panicHook != nil {
				panicHook(r)
			}
		}
	}()
	if c.stream {
		w, h := c.cfg.Width, c.cfg.Height
		p, err := pngLuma(c.img, w, h, shrinkFactor(w, h))
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrFormat, err)
		}
		return scanPlane(p, accept)
	}
	if c.luma != 0 {
		m, err := jpegluma.DecodeLuma(bytes.NewReader(c.img), c.luma)
		if err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrFormat, c.f, err)
		}
		return scanImage(m, accept)
	}
	m, err := decodeImage(c.f, c.img)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrFormat, c.f, err)
	}
	// The decoded image must be the size Cost was reckoned for. A GIF's
	// first frame may cover only part of its logical screen (the rest
	// shows the background, which viewers leave transparent), and its
	// decoder allocates for the frame alone, which the frame's placement
	// (checked by the decoder) keeps within the screen; it is scanned on
	// the screen, over white, so a code at the frame's edge keeps its
	// quiet zone.
	b, screen := m.Bounds(), image.Rect(0, 0, c.cfg.Width, c.cfg.Height)
	switch {
	case b == screen:
	case c.f == formatGIF && b.In(screen):
		m = onScreen{frame: m, screen: screen}
	default:
		return "", fmt.Errorf("%w: %s: decoded %v, header says %d×%d", ErrFormat, c.f, b, c.cfg.Width, c.cfg.Height)
	}
	return scanImage(m, accept)
}

// panicHook, when set by a test, hears of every panic Scan recovers.
var panicHook func(any)
