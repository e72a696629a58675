package verify

import (
	"container/list"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/egress"
	"github.com/slipverify/slipverify/core/qrscan"
)

// Images reads slip QR payloads from uploaded images and image URLs,
// fetched through the SSRF-safe egress client.
type Images struct {
	Egress *egress.Client
	// Decodes bounds the memory of the images decoded at once; nil means
	// DefaultDecodes, shared by every Images of the process.
	Decodes *DecodeLimit
	// DecodeWait bounds the wait for room in Decodes; 0 means
	// DefaultDecodeWait. A sync request's context does not end while core
	// runs (see core/server), so without it a request could wait for ever.
	DecodeWait time.Duration
}

// DefaultDecodeWait is the longest a decode waits for room in its budget
// when Images.DecodeWait is not set.
const DefaultDecodeWait = 10 * time.Second

// DefaultDecodeBudget is the memory DefaultDecodes lets images take to
// decode and scan at once: four images at qrscan.Budget, the most one may
// take, or nine to eleven phone screenshots (a 1080×2340 PNG reckons
// 28 MiB, as a JPEG 22 MiB), more decodes than a core's CPUs run at once
// (each is 20–50 ms of CPU). Sync requests and every async worker share
// it; without it 16 scans at once reached a 767 MiB heap.
const DefaultDecodeBudget = 256 << 20

// DefaultDecodes is the process-wide bound of an Images without Decodes.
var DefaultDecodes = NewDecodeLimit(DefaultDecodeBudget)

// Payload returns the QR payload of an image source: the code accept takes
// (the slip) when the image holds several, else the first one found.
//
// The decode waits, in turn, until its estimated memory (qrscan's Cost)
// fits in the Decodes budget; if ctx ends or DecodeWait passes first,
// Payload returns API_SERVER_ERROR ("try again") wrapping why.
func (im Images) Payload(ctx context.Context, src Source, accept func(string) bool) (string, error) {
	img := src.Image
	if src.URL != "" {
		var err error
		if img, err = im.Egress.Fetch(ctx, src.URL); err != nil {
			return "", err // egress errors are catalog errors
		}
	}
	c, err := qrscan.Check(img)
	if err != nil {
		return "", imageError(err)
	}
	limit := im.Limit()
	wait := im.DecodeWait
	if wait <= 0 {
		wait = DefaultDecodeWait
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	n, err := limit.acquire(wctx, c.Cost)
	cancel()
	if err != nil {
		return "", &api.Error{Code: api.APIServerError, Cause: fmt.Errorf("verify: waiting for image decode memory: %w", err)}
	}
	defer limit.release(n)
	if decodeHook != nil {
		decodeHook(c.Cost)
	}
	p, err := c.Scan(accept)
	if err != nil {
		return "", imageError(err)
	}
	return p, nil
}

// errNotBase64 means an image sent as base64 text is not base64.
var errNotBase64 = errors.New("verify: image is not valid base64")

// imageError is the catalog error of an image source that cannot be read:
// a qrscan error, or text that is not base64. An image that cannot be
// decoded is INVALID_IMAGE_FORMAT (v1 invalid_image), whatever stood in the
// way: the commercial API's clients know that code for it, not a
// VALIDATION_ERROR.
func imageError(err error) error {
	switch {
	case errors.Is(err, errNotBase64):
		return api.Errorf(api.InvalidImageFormat, "Image is not valid base64")
	case errors.Is(err, qrscan.ErrTooManyPixels): // within 4 MB: name the real reason
		return api.Errorf(api.ImageSizeTooLarge, "image has too many pixels to read: "+
			strings.TrimPrefix(err.Error(), qrscan.ErrTooManyPixels.Error()+": "))
	case errors.Is(err, qrscan.ErrTooLarge):
		return api.E(api.ImageSizeTooLarge)
	case errors.Is(err, qrscan.ErrFormat):
		return api.E(api.InvalidImageFormat)
	case errors.Is(err, qrscan.ErrNoQR):
		return api.E(api.QRCodeNotFound)
	}
	return api.Internal(err)
}

// DecodeBase64 decodes an image sent as base64 text (v1's image, base64 or
// data field, v2's base64), with or without a data URL prefix. Its errors
// are catalog errors, as Payload's: INVALID_IMAGE_FORMAT for text that is
// not base64, IMAGE_SIZE_TOO_LARGE for an image over qrscan.MaxBytes,
// refused before it is decoded.
func DecodeBase64(s string) ([]byte, error) {
	if strings.HasPrefix(s, "data:") {
		if i := strings.Index(s, ";base64,"); i > 0 {
			s = s[i+len(";base64,"):]
		}
	}
	// Encoders often end their text with a line break, and MIME's wrap it
	// every 76 characters; others break it with spaces. White space is no
	// base64 character, so all of it (space, tab, CR, LF) is skipped,
	// wherever it is: the decoders skip only CR and LF, and the choice
	// between them counts characters.
	if strings.ContainsAny(s, " \t\r\n") {
		s = strings.NewReplacer(" ", "", "\t", "", "\r", "", "\n", "").Replace(s)
	}
	enc := base64.StdEncoding
	if !strings.HasSuffix(s, "=") && len(s)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	if enc.DecodedLen(len(s)) > qrscan.MaxBytes+2 {
		return nil, imageError(qrscan.ErrTooLarge)
	}
	img, err := enc.DecodeString(s)
	if err != nil {
		return nil, imageError(errNotBase64)
	}
	if len(img) > qrscan.MaxBytes {
		return nil, imageError(qrscan.ErrTooLarge)
	}
	return img, nil
}

// Limit returns the decode budget im draws on: Decodes, or DefaultDecodes.
func (im Images) Limit() *DecodeLimit {
	if im.Decodes == nil {
		return DefaultDecodes
	}
	return im.Decodes
}

// Test hooks: decodeHook runs inside the budget, before each decode, with
// its cost; waitHook runs when a decode starts to wait for the budget.
var decodeHook, waitHook func(cost int64)

// DecodeLimit is a budget of memory, in bytes, shared by the image decodes
// that run at once (a weighted semaphore). A decode reserves its estimated
// cost and waits while the budget cannot hold it; waiters are served first
// come, first served, so a large image is not starved by small ones. It is
// safe for concurrent use.
type DecodeLimit struct {
	total int64

	mu      sync.Mutex
	used    int64
	waiters list.List // of *decodeWaiter, in arrival order
}

type decodeWaiter struct {
	n     int64
	ready chan struct{} // closed when n is reserved for the waiter
}

// NewDecodeLimit returns a budget of total bytes. A decode that would cost
// more than total reserves all of it (it runs alone) rather than wait
// forever.
func NewDecodeLimit(total int64) *DecodeLimit {
	return &DecodeLimit{total: max(total, 1)}
}

// Total returns the budget in bytes.
func (l *DecodeLimit) Total() int64 { return l.total }

// InUse returns the bytes reserved by the decodes running now.
func (l *DecodeLimit) InUse() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.used
}

// Waiting returns how many decodes wait for the budget.
func (l *DecodeLimit) Waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiters.Len()
}

// acquire reserves cost bytes (at most the total), waiting in turn, and
// returns what it reserved, for release. It fails with ctx's error if ctx
// is done before the bytes are reserved; then nothing is reserved.
func (l *DecodeLimit) acquire(ctx context.Context, cost int64) (int64, error) {
	n := min(max(cost, 0), l.total)
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	l.mu.Lock()
	if l.waiters.Len() == 0 && l.used+n <= l.total { // the fast path
		l.used += n
		l.mu.Unlock()
		return n, nil
	}
	w := &decodeWaiter{n: n, ready: make(chan struct{})}
	e := l.waiters.PushBack(w)
	l.mu.Unlock()
	if waitHook != nil {
		waitHook(cost)
	}
	select {
	case <-w.ready:
		return n, nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-w.ready: // reserved meanwhile: give it back
		l.used -= n
	default:
		l.waiters.Remove(e)
	}
	l.grant() // those behind it may fit now
	return 0, ctx.Err()
}

// release returns n bytes reserved by acquire.
func (l *DecodeLimit) release(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.used -= n
	l.grant()
}

// grant reserves the bytes of the waiters at the front of the queue while
// they fit. l.mu is held.
func (l *DecodeLimit) grant() {
	for e := l.waiters.Front(); e != nil; e = l.waiters.Front() {
		w := e.Value.(*decodeWaiter)
		if l.used+w.n > l.total {
			return
		}
		l.used += w.n
		l.waiters.Remove(e)
		close(w.ready)
	}
}
