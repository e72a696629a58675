package verify

import (
	"context"
	"errors"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/egress"
	"github.com/slipverify/slipverify/core/qrscan"
)

// Images reads slip QR payloads from uploaded images and image URLs,
// fetched through the SSRF-safe egress client.
type Images struct {
	Egress *egress.Client
}

// Payload returns the QR payload of an image source: the code accept takes
// (the slip) when the image holds several, else the first one found.
func (im Images) Payload(ctx context.Context, src Source, accept func(string) bool) (string, error) {
	img := src.Image
	if src.URL != "" {
		var err error
		if img, err = im.Egress.Fetch(ctx, src.URL); err != nil {
			return "", err // egress errors are catalog errors
		}
	}
	p, err := qrscan.Scan(img, accept)
	switch {
	case err == nil:
		return p, nil
	case errors.Is(err, qrscan.ErrTooLarge):
		return "", api.E(api.ImageSizeTooLarge)
	case errors.Is(err, qrscan.ErrFormat):
		return "", api.E(api.InvalidImageFormat)
	case errors.Is(err, qrscan.ErrNoQR):
		return "", api.E(api.QRCodeNotFound)
	}
	return "", api.Internal(err)
}
