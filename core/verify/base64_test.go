package verify_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/verify"
)

// TestDecodeBase64: an image's base64 text is decoded padded or not, with a
// data URL prefix and white space anywhere; text that is not base64 is an
// unreadable image, and an image over 4 MB is refused as one.
func TestDecodeBase64(t *testing.T) {
	f := func(in, want string, code api.Code) {
		t.Helper()
		img, err := verify.DecodeBase64(in)
		var e *api.Error
		switch {
		case code == 0 && (err != nil || string(img) != want):
			t.Errorf("%.40q: %q, %v; want %q", in, img, err, want)
		case code != 0 && (!errors.As(err, &e) || e.Code != code || img != nil):
			t.Errorf("%.40q: %q, %v; want %v", in, img, err, code)
		}
	}
	f("c2xpcA==", "slip", 0)
	f("c2xpcA", "slip", 0)
	f("data:image/png;base64,c2xpcA==", "slip", 0)
	f("c2xp\r\ncA= =\n", "slip", 0)
	f("\tc2 xp cA", "slip", 0)
	f("!!!notbase64", "", api.InvalidImageFormat)
	f("c2xpcA=", "", api.InvalidImageFormat)
	f("data:image/png;base64,!!", "", api.InvalidImageFormat)
	f(strings.Repeat("A", 6<<20), "", api.ImageSizeTooLarge)
	f(strings.Repeat("A", (4<<20)/3*4+8), "", api.ImageSizeTooLarge) // just over 4 MiB decoded
}
