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

	img  []byte
	f    format
	cfg  image.Config
	read reader
	// scale is the factor jpegluma shrinks the working plane's luma by,
	// first the factor it shrinks the first pass's plane by in the
	// frequency domain (0: the first pass searches a plane made from the
	// working one).
	scale, first int
}

// reader is how Checked.Scan reads an image's luma.
type reader uint8

const (
	readDecoder  reader = iota // the format's decoder, then toGray
	readPNGRows                // a non-interlaced PNG, row by row into the plane (pngrows.go)
	readJPEGLuma               // a grey or YCbCr JPEG's luma alone (internal/jpegluma)
)

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
	// The decoder's estimate, which also refuses malformed headers.
	cost, err := decodeCost(f, img, cfg.Width, cfg.Height)
	if err != nil {
		return Checked{}, err
	}
	// Cheaper readers where the format allows: a PNG read row by row into
	// the working plane, a JPEG's luma alone, at a reduced scale when the
	// working plane is reduced, and for the first pass at the scale of
	// its plane. They read the pixels the decoder would (TestPNGLumaAsDecoded,
	// TestJPEGLumaAsDecoded) at a fraction of the memory and time.
	w, h := cfg.Width, cfg.Height
	c := Checked{img: img, f: f, cfg: cfg}
	switch {
	case f == formatPNG && pngStreamable(img):
		c.read, cost = readPNGRows, pngStreamCost(img, w, h)
	case f == formatJPEG:
		s := jpegLumaScale(w, h)
		if lc, ok := jpegLumaCost(img, w, h, s); ok {
			c.read, c.scale, cost = readJPEGLuma, s, lc
			if d := firstScale(w, h); d > s && d <= 8 && d&(d-1) == 0 {
				fc, _ := jpegLumaCost(img, w, h, d)
				c.first, cost = d, cost+fc
			}
		}
	}
	ww, wh := w, h // the size the working plane is made from
	if c.read == readJPEGLuma {
		ww, wh = w/c.scale, h/c.scale
	}
	if c.Cost = cost + workCost(ww, wh); c.Cost > Budget {
		return Checked{}, fmt.Errorf("%w: %s of %d×%d pixels needs about %d MiB to decode, over %d MiB",
			ErrTooManyPixels, f, cfg.Width, cfg.Height, c.Cost>>20, Budget>>20)
	}
	return c, nil
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
	s := newScanner(accept)
	defer s.release()
	w, h := c.cfg.Width, c.cfg.Height
	switch c.read {
	case readPNGRows:
		p, err := pngLuma(c.img, w, h, shrinkFactor(w, h), s.fullBuf)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrFormat, err)
		}
		s.setFull(p)
	case readJPEGLuma:
		full := func() (plane, error) {
			m, err := jpegluma.DecodeLuma(bytes.NewReader(c.img), c.scale, s.decBuf)
			if err != nil {
				return plane{}, fmt.Errorf("%w: %s: %v", ErrFormat, c.f, err)
			}
			s.decBuf = m.Pix[:0]
			b := m.Bounds()
			return toGray(m, shrinkFactor(b.Dx(), b.Dy()), s.fullBuf), nil
		}
		if c.first == 0 {
			p, err := full()
			if err != nil {
				return "", err
			}
			s.setFull(p)
			break
		}
		// The first pass's plane straight from the file, shrunk in the
		// frequency domain; the working plane only if that pass misses.
		m, err := jpegluma.DecodeLumaDCT(bytes.NewReader(c.img), c.first, s.dctBuf)
		if err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrFormat, c.f, err)
		}
		s.dctBuf = m.Pix[:0]
		s.small = toGray(m, 1, s.smallBuf) // without the decoder's padding to whole blocks
		s.smallBuf, s.load = s.small.pix[:0], full
	default:
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
		b, screen := m.Bounds(), image.Rect(0, 0, w, h)
		switch {
		case b == screen:
		case c.f == formatGIF && b.In(screen):
			m = onScreen{frame: m, screen: screen}
		default:
			return "", fmt.Errorf("%w: %s: decoded %v, header says %d×%d", ErrFormat, c.f, b, w, h)
		}
		s.setFull(toGray(m, shrinkFactor(w, h), s.fullBuf))
	}
	return s.scan()
}

// panicHook, when set by a test, hears of every panic Scan recovers.
var panicHook func(any)
