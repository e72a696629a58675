package promptpay

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"
)

// TestPNG checks the image PNG draws: a square of the size asked for, with a
// white quiet zone. TestPNGDecodes (build tag gozxing) scans it back.
func TestPNG(t *testing.T) {
	amount := 9999999999.99
	longest, err := Payload("004999000288505", &amount)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ size, want int }{{0, DefaultSize}, {300, 300}, {1000, 1000}, {MaxSize, MaxSize}} {
		b, err := PNG(longest, tc.size)
		if err != nil {
			t.Fatalf("PNG(%d): %v", tc.size, err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("PNG(%d) is not a PNG: %v", tc.size, err)
		}
		if r := img.Bounds(); r.Dx() != tc.want || r.Dy() != tc.want {
			t.Errorf("PNG(%d) is %dx%d, want %dx%[4]d", tc.size, r.Dx(), r.Dy(), tc.want)
		}
		checkQuietZone(t, img)
	}
}

// checkQuietZone checks that the black modules are surrounded by at least 4
// modules of white, measuring a module on the image itself: the finder
// pattern in the top-left corner is a black run 7 modules wide.
func checkQuietZone(tb testing.TB, img image.Image) {
	tb.Helper()
	black := func(x, y int) bool { return color.GrayModel.Convert(img.At(x, y)).(color.Gray).Y < 0x80 }
	r := img.Bounds()
	minX, minY, maxX, maxY := r.Max.X, r.Max.Y, r.Min.X-1, r.Min.Y-1
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if black(x, y) {
				minX, minY, maxX, maxY = min(minX, x), min(minY, y), max(maxX, x), max(maxY, y)
			}
		}
	}
	if maxX < minX {
		tb.Fatal("image has no black pixel")
	}
	run := 0
	for x := minX; x <= maxX && black(x, minY); x++ {
		run++
	}
	module := float64(run) / 7
	// Modules are whole pixels, so a module may be up to one pixel narrower
	// than the mean when the side is not a multiple of the module count.
	want := int(4*module) - 4
	for _, m := range []int{minX - r.Min.X, minY - r.Min.Y, r.Max.X - 1 - maxX, r.Max.Y - 1 - maxY} {
		if m < want {
			tb.Fatalf("quiet zone %d pixels wide, want at least %d (4 modules of %.1f pixels)", m, want, module)
		}
	}
}

func TestPNGRejects(t *testing.T) {
	f := func(payload string, size int, want string) {
		t.Helper()
		b, err := PNG(payload, size)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("PNG(%q, %d) = %d bytes, %v; want error containing %q", payload, size, len(b), err, want)
		}
	}
	f("000201", -1, "size: must be between 1 and 4096")
	f("000201", MaxSize+1, "size: must be between 1 and 4096")
	f("", 0, "payload: is required")
	f(strings.Repeat("x", 3000), 0, "promptpay: qr code:")
}

func BenchmarkPNG(b *testing.B) {
	amount := 1234.5
	p, err := Payload("0812345678", &amount)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := PNG(p, DefaultSize); err != nil {
			b.Fatal(err)
		}
	}
}
