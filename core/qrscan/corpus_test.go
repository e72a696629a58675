package qrscan

// This file generates the test corpus: slip screenshots and photos of
// screens with the QR code of a real slip payload, under the conditions the
// scanner must survive, each encoded as JPEG, PNG, GIF and WebP. Every image
// comes from a fixed seed, so the corpus is the same on every run (WebP
// depends on the cwebp in PATH; Debian's webp package is what the numbers
// in the README were measured with).

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/skip2/go-qrcode"
	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/slipverify/slipverify/core/slip"
)

// Formats of the corpus, in the order the tables print them.
var formats = []string{"jpeg", "png", "gif", "webp"}

// sample is one corpus image.
type sample struct {
	cond    string
	index   int
	format  string
	payload string // the slip payload in the image
	other   string // the unrelated QR payload in the image, if any
	data    []byte
}

func (s *sample) name() string { return fmt.Sprintf("%s-%02d.%s", s.cond, s.index, s.format) }

// scene is one rendered image before encoding.
type scene struct {
	img     *image.RGBA
	payload string
	other   string
	jpegQ   int // quality of the JPEG encoding; other formats get a JPEG round trip at this quality when round is set
	round   bool
}

// condition names a kind of image and renders its i-th scene.
type condition struct {
	name   string
	n      int // scenes at the default corpus size
	render func(r *rand.Rand, i int) scene
}

// rotations are the angles of the rotation condition, in degrees counter-clockwise.
var rotations = []float64{7, 33, 90, 180, 271, 45, 128, 222, 305, 14}

var conditions = []condition{
	{"clean", 5, func(r *rand.Rand, i int) scene {
		p := bankPayload(r)
		if i%5 == 4 {
			p = walletPayload(r)
		}
		return scene{img: renderSlip(r, slipSpec{payload: p, qrFrac: 0.18 + 0.14*r.Float64()}), payload: p, jpegQ: 85}
	}},
	{"small", 5, func(r *rand.Rand, i int) scene {
		p := bankPayload(r)
		return scene{img: renderSlip(r, slipSpec{payload: p, qrPx: 60}), payload: p, jpegQ: 85}
	}},
	{"jpeg30", 5, func(r *rand.Rand, i int) scene {
		p := bankPayload(r)
		return scene{img: renderSlip(r, slipSpec{payload: p, qrFrac: 0.16 + 0.1*r.Float64()}), payload: p, jpegQ: 30, round: true}
	}},
	{"rotated", 5, func(r *rand.Rand, i int) scene {
		p := bankPayload(r)
		img := renderSlip(r, slipSpec{payload: p, qrFrac: 0.2 + 0.1*r.Float64()})
		return scene{img: rotate(img, rotations[i%len(rotations)], deskColor(r), 3.2e6), payload: p, jpegQ: 85}
	}},
	{"inverted", 5, func(r *rand.Rand, i int) scene {
		p := bankPayload(r)
		img := renderSlip(r, slipSpec{payload: p, qrFrac: 0.18 + 0.12*r.Float64()})
		invertRGBA(img)
		return scene{img: img, payload: p, jpegQ: 85}
	}},
	{"photo", 5, func(r *rand.Rand, i int) scene {
		p := bankPayload(r)
		img := renderSlip(r, slipSpec{payload: p, qrFrac: 0.22 + 0.1*r.Float64()})
		return scene{img: photograph(r, img), payload: p, jpegQ: 85}
	}},
	{"second-qr", 5, func(r *rand.Rand, i int) scene {
		p := bankPayload(r)
		o := otherPayload(r, i)
		return scene{img: renderSlip(r, slipSpec{payload: p, qrFrac: 0.18 + 0.08*r.Float64(), other: o}), payload: p, other: o, jpegQ: 85}
	}},
	{"saltpepper", 5, func(r *rand.Rand, i int) scene {
		p := bankPayload(r)
		// Noise on a picture below the size the half-size pass shrinks
		// (which would average the impulses away): about 3.5-7 px a module.
		img := smallScreen(r, p, i)
		saltPepper(r, img, saltPepperRates[i%len(saltPepperRates)])
		return scene{img: img, payload: p, jpegQ: 85}
	}},
	{"gnoise", 5, func(r *rand.Rand, i int) scene {
		p := bankPayload(r)
		img := smallScreen(r, p, i)
		gaussNoise(r, img, noiseSigmas[i%len(noiseSigmas)])
		return scene{img: img, payload: p, jpegQ: 85}
	}},
	{"motion", 5, func(r *rand.Rand, i int) scene {
		p := bankPayload(r)
		img := smallScreen(r, p, i)
		motionBlur(img, motionLengths[i%len(motionLengths)], float64(37*i))
		return scene{img: img, payload: p, jpegQ: 85}
	}},
	{"gauss", 5, func(r *rand.Rand, i int) scene {
		p := bankPayload(r)
		img := smallScreen(r, p, i)
		gaussBlur(img, gaussSigmas[i%len(gaussSigmas)])
		return scene{img: img, payload: p, jpegQ: 85}
	}},
	{"screen", 5, func(r *rand.Rand, i int) scene {
		p := bankPayload(r)
		img := renderSlip(r, slipSpec{payload: p, qrFrac: 0.2 + 0.12*r.Float64()})
		shot := screenShots[i%len(screenShots)]
		size := photoSizes[(i+i/len(screenShots))%len(photoSizes)]
		shot.w, shot.h = size[0], size[1]
		shot.turn = (r.Float64()*2 - 1) * shot.turn
		shot.tint = tints[(i+i/len(screenShots))%len(tints)]
		return scene{img: photographScreen(r, img, shot), payload: p, jpegQ: 85}
	}},
	{"combo", 5, func(r *rand.Rand, i int) scene {
		p := bankPayload(r)
		c := combos[i%len(combos)]
		img := renderSlip(r, slipSpec{payload: p, qrPx: c.px + 10*float64(i/len(combos))})
		gaussBlur(img, c.blur)
		gaussNoise(r, img, c.noise)
		return scene{img: img, payload: p, jpegQ: 85}
	}},
}

// pitchScales shrink the screenshot under the noise and blur conditions:
// QR modules of about 4, 5 and 6.5 px (a code module area 24-32 % of the
// width), below the size the half-size pass shrinks but for the last.
var pitchScales = []float64{0.5, 0.6, 0.75}

// noiseSigmas are the deviations of the gnoise condition's sensor noise,
// in levels, in turn.
var noiseSigmas = []float64{12, 20, 28, 36, 44}

// gaussSigmas are the deviations of the gauss condition's blur, in
// pixels, in turn.
var gaussSigmas = []float64{1.5, 2, 2.5, 3, 4}

// screenShots are the screen condition's strengths, mildest first;
// scenes take them in turn (size, tint and the sign of the turn vary
// separately).
var screenShots = []screenShot{
	{fill: 0.92, tilt: 0.08, turn: 3, moire: 0.15, glares: 1, glare: 60, light: 0.6, blur: 0.8, noise: 3},
	{fill: 0.88, tilt: 0.16, turn: 8, moire: 0.25, glares: 2, glare: 90, light: 0.45, blur: 1, noise: 4},
	{fill: 0.9, tilt: 0.24, turn: 5, moire: 0.35, glares: 2, glare: 120, light: 0.35, blur: 1.2, noise: 5},
	{fill: 0.85, tilt: 0.3, turn: 12, moire: 0.3, glares: 3, glare: 150, light: 0.3, blur: 1, noise: 6},
	{fill: 0.95, tilt: 0.2, turn: 4, moire: 0.45, glares: 1, glare: 200, light: 0.5, blur: 1.5, noise: 4},
}

// photoSizes are the screen condition's photo sizes, in turn.
var photoSizes = [][2]int{{1200, 1600}, {900, 1200}, {1536, 2048}, {1080, 1440}}

// combos are the combo condition's small, blurred and noisy codes: the
// module area's width in pixels (about 2.5-4 px a module), blur σ and
// noise σ.
var combos = []struct{ px, blur, noise float64 }{
	{100, 0.7, 8}, {90, 0.9, 10}, {110, 1.1, 12}, {120, 1.3, 14}, {100, 1, 16},
}

// motionLengths are the lengths of the motion condition's blur, in pixels,
// in turn; its direction turns by 37° from one scene to the next.
var motionLengths = []int{5, 7, 9, 11, 13}

// smallScreen renders a slip with its QR modules 4 to 6.5 px wide (the
// screenshot shrunk by a pitchScales chosen by i), the ground of the noise
// and blur conditions.
func smallScreen(r *rand.Rand, p string, i int) *image.RGBA {
	img := renderSlip(r, slipSpec{payload: p, qrFrac: 0.24 + 0.08*r.Float64()})
	b := img.Bounds()
	k := pitchScales[(i+i/5)%len(pitchScales)]
	return resize(img, int(float64(b.Dx())*k), int(float64(b.Dy())*k))
}

// motionBlur smears img along a line of n pixels at deg degrees: each
// pixel becomes the mean of n samples along it (nearest neighbour, the
// edge repeated), as a hand moving during the exposure does.
func motionBlur(img *image.RGBA, n int, deg float64) {
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	src := slices.Clone(img.Pix)
	c, s := math.Cos(deg*math.Pi/180), math.Sin(deg*math.Pi/180)
	type off struct{ dx, dy int }
	var offs []off
	for i := range n {
		t := float64(i) - float64(n-1)/2
		offs = append(offs, off{int(math.Round(t * c)), int(math.Round(t * s))})
	}
	for y := range h {
		for x := range w {
			var sum [3]int
			for _, o := range offs {
				xx, yy := clampInt(x+o.dx, 0, w-1), clampInt(y+o.dy, 0, h-1)
				p := src[yy*img.Stride+4*xx:]
				sum[0], sum[1], sum[2] = sum[0]+int(p[0]), sum[1]+int(p[1]), sum[2]+int(p[2])
			}
			q := img.Pix[y*img.Stride+4*x:]
			for ch := range 3 {
				q[ch] = uint8((sum[ch] + n/2) / n)
			}
		}
	}
}

// saltPepperRates are the shares of pixels the saltpepper condition turns
// black or white, in turn.
var saltPepperRates = []float64{0.01, 0.03, 0.045, 0.06, 0.08}

// saltPepper turns a share rate of img's pixels black or white at random
// (impulse noise: a dusty lens, a bad sensor, a fax).
func saltPepper(r *rand.Rand, img *image.RGBA, rate float64) {
	for i := 0; i < len(img.Pix); i += 4 {
		if r.Float64() >= rate {
			continue
		}
		v := uint8(0)
		if r.IntN(2) == 0 {
			v = 255
		}
		img.Pix[i], img.Pix[i+1], img.Pix[i+2] = v, v, v
	}
}

// corpusN is the number of scenes per condition: the default, or
// QRSCAN_CORPUS_N.
func corpusN(c condition) int {
	if s := os.Getenv("QRSCAN_CORPUS_N"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return c.n
}

var (
	corpusOnce    sync.Once
	corpusSamples []*sample
	corpusErr     error
)

// corpus returns the generated corpus, built once per test binary.
func corpus(tb testing.TB) []*sample {
	tb.Helper()
	corpusOnce.Do(func() { corpusSamples, corpusErr = buildCorpus() })
	if corpusErr != nil {
		tb.Fatal(corpusErr)
	}
	return corpusSamples
}

// haveCWebP reports whether the WebP samples can be made.
func haveCWebP() bool {
	_, err := exec.LookPath("cwebp")
	return err == nil
}

func buildCorpus() ([]*sample, error) {
	type job struct {
		c condition
		i int
	}
	var jobs []job
	only := os.Getenv("QRSCAN_CONDITIONS") // a comma-separated list, to look at some alone
	for _, c := range conditions {
		if only != "" && !slices.Contains(strings.Split(only, ","), c.name) {
			continue
		}
		for i := range corpusN(c) {
			jobs = append(jobs, job{c, i})
		}
	}
	out := make([][]*sample, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				j := jobs[k]
				r := rand.New(rand.NewPCG(uint64(len(j.c.name))*7919+uint64(j.c.name[0]), uint64(j.i)))
				sc := j.c.render(r, j.i)
				out[k], errs[k] = encodeScene(j.c.name, j.i, sc)
			}
		}()
	}
	for k := range jobs {
		next <- k
	}
	close(next)
	wg.Wait()
	var all []*sample
	for k := range jobs {
		if errs[k] != nil {
			return nil, errs[k]
		}
		all = append(all, out[k]...)
	}
	return all, nil
}

// encodeScene encodes sc in every format. A file over MaxBytes is shrunk
// until it fits, as a user would have to.
func encodeScene(cond string, i int, sc scene) ([]*sample, error) {
	img := sc.img
	if sc.round {
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: sc.jpegQ}); err != nil {
			return nil, err
		}
		m, err := jpeg.Decode(&buf)
		if err != nil {
			return nil, err
		}
		img = toRGBA(m)
	}
	var res []*sample
	for _, f := range formats {
		if f == "webp" && !haveCWebP() {
			continue
		}
		m := img
		if f == "jpeg" {
			m = sc.img // the JPEG itself carries the artefacts
		}
		var data []byte
		for {
			var err error
			data, err = encode(f, m, sc.jpegQ)
			if err != nil {
				return nil, fmt.Errorf("%s-%d.%s: %w", cond, i, f, err)
			}
			if len(data) <= MaxBytes {
				break
			}
			b := m.Bounds()
			m = resize(m, int(float64(b.Dx())*0.85), int(float64(b.Dy())*0.85))
		}
		res = append(res, &sample{cond: cond, index: i, format: f, payload: sc.payload, other: sc.other, data: data})
	}
	return res, nil
}

func encode(format string, m *image.RGBA, q int) ([]byte, error) {
	var buf bytes.Buffer
	switch format {
	case "jpeg":
		err := jpeg.Encode(&buf, m, &jpeg.Options{Quality: q})
		return buf.Bytes(), err
	case "png":
		err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, m)
		return buf.Bytes(), err
	case "gif":
		err := gif.Encode(&buf, quantize(m), nil)
		return buf.Bytes(), err
	case "webp":
		return cwebp(m, q)
	}
	return nil, fmt.Errorf("unknown format %q", format)
}

// cwebp encodes m as lossy WebP with the cwebp tool, the way a phone app
// shares a picture. The quality is at least 75 (cwebp's default), or q for
// the JPEG-artefact condition, whose source already carries them.
func cwebp(m *image.RGBA, q int) ([]byte, error) {
	dir, err := os.MkdirTemp("", "qrscan-webp")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, m); err != nil {
		return nil, err
	}
	in, out := filepath.Join(dir, "in.png"), filepath.Join(dir, "out.webp")
	if err := os.WriteFile(in, buf.Bytes(), 0o600); err != nil {
		return nil, err
	}
	q = max(q, 75)
	if b, err := exec.Command("cwebp", "-quiet", "-q", strconv.Itoa(q), in, "-o", out).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("cwebp: %v: %s", err, b)
	}
	return os.ReadFile(out)
}

// quantize maps m onto a fixed palette (a 6×6×6 colour cube plus 40 greys)
// without dithering, as a simple GIF encoder does.
func quantize(m *image.RGBA) *image.Paletted {
	pal := make(color.Palette, 0, 256)
	for r := range 6 {
		for g := range 6 {
			for b := range 6 {
				pal = append(pal, color.RGBA{uint8(r * 51), uint8(g * 51), uint8(b * 51), 255})
			}
		}
	}
	for i := range 40 {
		v := uint8(3 + i*255/41)
		pal = append(pal, color.RGBA{v, v, v, 255})
	}
	b := m.Bounds()
	p := image.NewPaletted(b, pal)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			o := m.PixOffset(x, y)
			r, g, bl := int(m.Pix[o]), int(m.Pix[o+1]), int(m.Pix[o+2])
			ri, gi, bi := (r+25)/51, (g+25)/51, (bl+25)/51
			idx := ri*36 + gi*6 + bi
			if mx, mn := max(r, g, bl), min(r, g, bl); mx-mn < 12 {
				// Near grey: the nearer of the cube's and the ramp's greys.
				avg := (r + g + bl) / 3
				gi := min(39, max(0, (avg-3)*41/255))
				gv := 3 + gi*255/41
				if cv := ri * 51; abs(gv-avg) < abs(cv-avg) || ri != gi || ri != bi {
					idx = 216 + gi
				}
			}
			p.Pix[p.PixOffset(x, y)] = uint8(idx)
		}
	}
	return p
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// Payloads.

var bankCodes = []string{"002", "004", "006", "011", "014", "022", "024", "025", "030", "034", "065", "066", "067", "069", "070", "071", "073", "098"}

const upperAlnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"

// bankPayload returns the payload of a random bank slip, shaped like the
// transaction references Thai bank apps print.
func bankPayload(r *rand.Rand) string {
	b := slip.Bank{BankCode: bankCodes[r.IntN(len(bankCodes))]}
	var ref []byte
	switch r.IntN(3) {
	case 0: // e.g. 015090155523BPP02449
		ref = fmt.Appendf(nil, "%03d%09d", r.IntN(1000), r.IntN(1e9))
		for range 3 {
			ref = append(ref, upperAlnum[10+r.IntN(26)])
		}
		ref = fmt.Appendf(ref, "%05d", r.IntN(1e5))
	case 1: // digits only
		ref = fmt.Appendf(nil, "%010d%08d", r.Int64N(1e10), r.IntN(1e8))
	default: // 2024... mixed
		n := 12 + r.IntN(14)
		for range n {
			ref = append(ref, upperAlnum[r.IntN(len(upperAlnum))])
		}
	}
	b.TransRef = string(ref)
	if err := b.Validate(); err != nil {
		panic(err)
	}
	return b.Encode()
}

// walletPayload returns the payload of a random wallet slip.
func walletPayload(r *rand.Rand) string {
	w := slip.Wallet{
		EventType:     []string{"P2P", "TOPUP", "BILLPAY"}[r.IntN(3)],
		TransactionID: fmt.Sprintf("%014d", r.Int64N(1e14)),
		Date:          fmt.Sprintf("%02d%02d%d", 1+r.IntN(28), 1+r.IntN(12), 2025+r.IntN(2)),
	}
	if err := w.Validate(); err != nil {
		panic(err)
	}
	return w.Encode()
}

// otherPayload returns an unrelated QR payload: a PromptPay payment QR or a URL.
func otherPayload(r *rand.Rand, i int) string {
	if i%2 == 0 {
		var dst []byte
		dst = slip.AppendTLV(dst, "00", "01")
		dst = slip.AppendTLV(dst, "01", "11")
		var pp []byte
		pp = slip.AppendTLV(pp, "00", "A000000677010111")
		pp = slip.AppendTLV(pp, "01", fmt.Sprintf("0066%09d", 800000000+r.IntN(99999999)))
		dst = slip.AppendTLV(dst, "29", string(pp))
		dst = slip.AppendTLV(dst, "53", "764")
		dst = slip.AppendTLV(dst, "58", "TH")
		dst = slip.AppendCRC(dst, "63", true)
		return string(dst)
	}
	return fmt.Sprintf("https://line.me/R/ti/p/@shop%05d?from=slip", r.IntN(100000))
}

// Rendering of a bank app's slip screen.

type slipSpec struct {
	payload string
	other   string  // a second, unrelated QR code, if not empty
	qrFrac  float64 // width of the QR's module area as a fraction of the screen width
	qrPx    float64 // or its width in pixels
}

var brandColors = []color.RGBA{
	{0x00, 0xa9, 0x50, 255}, // green
	{0x4e, 0x2a, 0x84, 255}, // purple
	{0x00, 0xa4, 0xe4, 255}, // light blue
	{0x1e, 0x40, 0x8f, 255}, // dark blue
	{0xfc, 0xc3, 0x0b, 255}, // yellow
	{0xe6, 0x1e, 0x2a, 255}, // red
	{0x12, 0x7d, 0x75, 255}, // teal
}

var (
	names   = []string{"MR. SOMCHAI JAIDEE", "MS. SUDA RAKDEE", "NAPAT S.", "KANYA W.", "BOONMEE SHOP", "MR. ANAN K."}
	months  = []string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
	screens = [][2]int{{1080, 2340}, {720, 1600}, {1080, 2400}, {1170, 2532}}
)

// renderSlip draws a phone screenshot of a transfer slip: status bar,
// coloured header, a card with the transfer's details and the slip QR,
// and the app's buttons.
func renderSlip(r *rand.Rand, s slipSpec) *image.RGBA {
	sz := screens[r.IntN(len(screens))]
	w, h := sz[0], sz[1]
	dp := float64(w) / 360
	px := func(v float64) int { return int(math.Round(v * dp)) }
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	brand := brandColors[r.IntN(len(brandColors))]
	dark := darker(brand, 0.75)
	bg := color.RGBA{0xee + uint8(r.IntN(12)), 0xf0 + uint8(r.IntN(10)), 0xf3, 255}
	fill(img, img.Bounds(), bg)
	// Faint decoration behind the card: large translucent circles.
	for range 3 {
		circle(img, r.IntN(w), px(120)+r.IntN(h/2), px(60+r.Float64()*120), mix(bg, brand, 0.08))
	}
	// Status bar and header.
	fill(img, image.Rect(0, 0, w, px(24)), dark)
	text(img, px(14), px(6), fmt.Sprintf("%02d:%02d", r.IntN(24), r.IntN(60)), scale(dp*0.9), white)
	fill(img, image.Rect(w-px(40), px(8), w-px(18), px(16)), white)
	fill(img, image.Rect(0, px(24), w, px(80)), brand)
	text(img, px(56), px(44), "Transfer successful", scale(dp*1.3), white)
	text(img, px(18), px(40), "<", scale(dp*1.8), white)
	// Card.
	cx0, cx1 := px(16), w-px(16)
	card := image.Rect(cx0, px(96), cx1, h-px(110))
	roundRect(img, card, px(12), white)
	y := card.Min.Y + px(20)
	circle(img, w/2, y+px(22), px(22), color.RGBA{0x21, 0xb5, 0x5c, 255})
	text(img, w/2-px(8), y+px(12), "v", scale(dp*2), white)
	y += px(54)
	centered(img, w/2, y, "Transaction successful", scale(dp*1.2), ink)
	y += px(22)
	centered(img, w/2, y, fmt.Sprintf("%d %s %d - %02d:%02d", 1+r.IntN(28), months[r.IntN(12)], 2025+r.IntN(2), r.IntN(24), r.IntN(60)), scale(dp), grey)
	y += px(24)
	fill(img, image.Rect(cx0+px(16), y, cx1-px(16), y+max(1, px(0.7))), line)
	y += px(14)
	for k, who := range []string{"From", "To"} {
		circle(img, cx0+px(36), y+px(20), px(18), brandColors[(k+r.IntN(7))%len(brandColors)])
		text(img, cx0+px(64), y+px(4), who, scale(dp*0.9), grey)
		text(img, cx0+px(64), y+px(16), names[r.IntN(len(names))], scale(dp*1.1), ink)
		text(img, cx0+px(64), y+px(30), fmt.Sprintf("xxx-x-x%04d-x", r.IntN(10000)), scale(dp*0.9), grey)
		y += px(52)
		if k == 0 {
			text(img, cx0+px(31), y-px(8), "|", scale(dp*1.2), grey)
		}
	}
	fill(img, image.Rect(cx0+px(16), y, cx1-px(16), y+max(1, px(0.7))), line)
	y += px(14)
	text(img, cx0+px(20), y, "Amount", scale(dp), grey)
	amount := fmt.Sprintf("%d,%03d.%02d", 1+r.IntN(49), r.IntN(1000), r.IntN(100))
	text(img, cx1-px(20)-len(amount)*7*scale(dp*1.6), y-px(4), amount, scale(dp*1.6), ink)
	y += px(24)
	text(img, cx0+px(20), y, "Fee", scale(dp), grey)
	text(img, cx1-px(60), y, "0.00", scale(dp), ink)
	y += px(20)
	text(img, cx0+px(20), y, "Ref. no.", scale(dp), grey)
	text(img, cx0+px(90), y, fmt.Sprintf("%d%s", 2025, s.payload[20:min(len(s.payload), 36)]), scale(dp*0.9), ink)
	y += px(22)
	// QR codes. The module area is qrPx wide (or qrFrac of the width).
	q := mustQR(s.payload, qrLevel(r))
	n := float64(len(q))
	area := s.qrPx
	if area == 0 {
		area = s.qrFrac * float64(w)
	}
	mod := area / n
	bottom := card.Max.Y - px(30)
	qy := min(y+px(24), bottom-int(area))
	if qy < y {
		qy = y
	}
	qx := cx1 - px(28) - int(area)
	if s.other != "" {
		// The unrelated code comes first in reading order: left of or above the slip's.
		o := mustQR(s.other, qrcode.Medium)
		omod := math.Max(mod*(0.8+0.5*r.Float64()), 2.2*dp)
		oarea := omod * float64(len(o))
		if r.IntN(2) == 0 && oarea+area+float64(px(40)) < float64(cx1-cx0) {
			drawQR(img, o, float64(cx0+px(24)), float64(qy), omod)
			text(img, cx0+px(24), qy+int(oarea+4*omod)+px(2), "Pay again", scale(dp*0.8), grey)
		} else {
			// A banner above the card, like an advertisement.
			by := px(84)
			drawQR(img, o, float64(cx0+px(8)), float64(by), omod)
		}
	} else if r.IntN(2) == 0 {
		qx = (w - int(area)) / 2
	}
	drawQR(img, q, float64(qx), float64(qy), mod)
	text(img, qx, qy+int(area+4*mod)+px(2), "Scan to verify", scale(dp*0.8), grey)
	// Buttons.
	bw := (w - px(48)) / 2
	for k, label := range []string{"Share", "Save"} {
		b := image.Rect(px(16)+k*(bw+px(16)), h-px(92), px(16)+k*(bw+px(16))+bw, h-px(52))
		c := brand
		if k == 1 {
			c = white
		}
		roundRect(img, b, px(20), c)
		tc := white
		if k == 1 {
			tc = brand
		}
		centered(img, (b.Min.X+b.Max.X)/2, b.Min.Y+px(13), label, scale(dp*1.1), tc)
	}
	fill(img, image.Rect(w/2-px(60), h-px(12), w/2+px(60), h-px(8)), ink)
	return img
}

func qrLevel(r *rand.Rand) qrcode.RecoveryLevel {
	return []qrcode.RecoveryLevel{qrcode.Low, qrcode.Medium, qrcode.Medium, qrcode.High}[r.IntN(4)]
}

func mustQR(payload string, level qrcode.RecoveryLevel) [][]bool {
	q, err := qrcode.New(payload, level)
	if err != nil {
		panic(err)
	}
	q.DisableBorder = true
	return q.Bitmap()
}

var (
	white = color.RGBA{255, 255, 255, 255}
	ink   = color.RGBA{0x22, 0x25, 0x2b, 255}
	grey  = color.RGBA{0x80, 0x86, 0x8f, 255}
	line  = color.RGBA{0xe3, 0xe5, 0xe8, 255}
)

func scale(v float64) int { return max(1, int(math.Round(v))) }

func darker(c color.RGBA, f float64) color.RGBA {
	return color.RGBA{uint8(float64(c.R) * f), uint8(float64(c.G) * f), uint8(float64(c.B) * f), 255}
}

func mix(a, b color.RGBA, t float64) color.RGBA {
	l := func(x, y uint8) uint8 { return uint8(float64(x)*(1-t) + float64(y)*t) }
	return color.RGBA{l(a.R, b.R), l(a.G, b.G), l(a.B, b.B), 255}
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	draw.Draw(img, r, image.NewUniform(c), image.Point{}, draw.Src)
}

func circle(img *image.RGBA, cx, cy, rad int, c color.RGBA) {
	b := image.Rect(cx-rad, cy-rad, cx+rad+1, cy+rad+1).Intersect(img.Bounds())
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if (x-cx)*(x-cx)+(y-cy)*(y-cy) <= rad*rad {
				img.SetRGBA(x, y, c)
			}
		}
	}
}

func roundRect(img *image.RGBA, r image.Rectangle, rad int, c color.RGBA) {
	fill(img, image.Rect(r.Min.X+rad, r.Min.Y, r.Max.X-rad, r.Max.Y), c)
	fill(img, image.Rect(r.Min.X, r.Min.Y+rad, r.Max.X, r.Max.Y-rad), c)
	for _, p := range []image.Point{{r.Min.X + rad, r.Min.Y + rad}, {r.Max.X - rad - 1, r.Min.Y + rad}, {r.Min.X + rad, r.Max.Y - rad - 1}, {r.Max.X - rad - 1, r.Max.Y - rad - 1}} {
		circle(img, p.X, p.Y, rad, c)
	}
}

// text draws s with the 7×13 bitmap font magnified k times, top-left at x, y.
func text(img *image.RGBA, x, y int, s string, k int, c color.RGBA) {
	mask := image.NewAlpha(image.Rect(0, 0, 7*len(s), 13))
	d := font.Drawer{Dst: mask, Src: image.Opaque, Face: basicfont.Face7x13, Dot: fixed.P(0, 10)}
	d.DrawString(s)
	b := img.Bounds()
	for my := range 13 {
		for mx := range 7 * len(s) {
			if mask.AlphaAt(mx, my).A < 128 {
				continue
			}
			fill(img, image.Rect(x+mx*k, y+my*k, x+mx*k+k, y+my*k+k).Intersect(b), c)
		}
	}
}

func centered(img *image.RGBA, cx, y int, s string, k int, c color.RGBA) {
	text(img, cx-len(s)*7*k/2, y, s, k, c)
}

// drawQR draws the modules of q with their top-left corner at x, y and a
// module size of mod pixels (any real number), anti-aliased like a
// screenshot of a scaled QR image, on a white quiet zone of 4 modules.
func drawQR(img *image.RGBA, q [][]bool, x, y, mod float64) {
	n := len(q)
	size := mod * float64(n)
	qz := 4 * mod
	fill(img, image.Rect(int(x-qz), int(y-qz), int(math.Ceil(x+size+qz)), int(math.Ceil(y+size+qz))), white)
	const ss = 4
	b := image.Rect(int(x), int(y), int(math.Ceil(x+size)), int(math.Ceil(y+size))).Intersect(img.Bounds())
	for py := b.Min.Y; py < b.Max.Y; py++ {
		for px := b.Min.X; px < b.Max.X; px++ {
			dark := 0
			for sy := range ss {
				my := int((float64(py) + (float64(sy)+0.5)/ss - y) / mod)
				for sx := range ss {
					mx := int((float64(px) + (float64(sx)+0.5)/ss - x) / mod)
					if mx >= 0 && my >= 0 && mx < n && my < n && q[my][mx] {
						dark++
					}
				}
			}
			v := uint8(255 - (255-0x10)*dark/(ss*ss))
			img.SetRGBA(px, py, color.RGBA{v, v, v, 255})
		}
	}
}

func invertRGBA(img *image.RGBA) {
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2] = 255-img.Pix[i], 255-img.Pix[i+1], 255-img.Pix[i+2]
	}
}

func toRGBA(m image.Image) *image.RGBA {
	b := m.Bounds()
	out := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(out, out.Bounds(), m, b.Min, draw.Src)
	return out
}

func deskColor(r *rand.Rand) color.RGBA {
	return []color.RGBA{{0x5a, 0x4a, 0x3c, 255}, {0x9a, 0x9a, 0x98, 255}, {0x2b, 0x2d, 0x30, 255}, {0xc8, 0xb8, 0xa0, 255}}[r.IntN(4)]
}

// bilinear samples src at (fx, fy) into p[0:3], or reports false outside.
func bilinear(src *image.RGBA, fx, fy float64, p *[3]float64) bool {
	b := src.Bounds()
	if fx < 0 || fy < 0 || fx > float64(b.Dx()-1) || fy > float64(b.Dy()-1) {
		return false
	}
	x0, y0 := int(fx), int(fy)
	x1, y1 := min(x0+1, b.Dx()-1), min(y0+1, b.Dy()-1)
	tx, ty := fx-float64(x0), fy-float64(y0)
	for c := range 3 {
		v00 := float64(src.Pix[y0*src.Stride+x0*4+c])
		v10 := float64(src.Pix[y0*src.Stride+x1*4+c])
		v01 := float64(src.Pix[y1*src.Stride+x0*4+c])
		v11 := float64(src.Pix[y1*src.Stride+x1*4+c])
		p[c] = (v00*(1-tx)+v10*tx)*(1-ty) + (v01*(1-tx)+v11*tx)*ty
	}
	return true
}

// rotate turns src by deg degrees counter-clockwise about its centre onto
// a background of colour bg, on a canvas that holds it all, scaled down to
// at most maxPixels.
func rotate(src *image.RGBA, deg float64, bg color.RGBA, maxPixels float64) *image.RGBA {
	w, h := float64(src.Bounds().Dx()), float64(src.Bounds().Dy())
	a := deg * math.Pi / 180
	c, s := math.Cos(a), math.Sin(a)
	if math.Mod(deg, 90) == 0 {
		c, s = math.Round(c), math.Round(s)
	}
	bw, bh := math.Abs(w*c)+math.Abs(h*s), math.Abs(w*s)+math.Abs(h*c)
	k := math.Min(1, math.Sqrt(maxPixels/(bw*bh)))
	ow, oh := int(math.Ceil(bw*k)), int(math.Ceil(bh*k))
	out := image.NewRGBA(image.Rect(0, 0, ow, oh))
	var p [3]float64
	for y := range oh {
		for x := range ow {
			// Output pixel centre → source coordinates.
			dx, dy := (float64(x)+0.5)/k-bw/2, (float64(y)+0.5)/k-bh/2
			sx := c*dx - s*dy + w/2 - 0.5
			sy := s*dx + c*dy + h/2 - 0.5
			o := y*out.Stride + x*4
			if bilinear(src, sx, sy, &p) {
				out.Pix[o], out.Pix[o+1], out.Pix[o+2] = uint8(p[0]+0.5), uint8(p[1]+0.5), uint8(p[2]+0.5)
			} else {
				out.Pix[o], out.Pix[o+1], out.Pix[o+2] = bg.R, bg.G, bg.B
			}
			out.Pix[o+3] = 255
		}
	}
	return out
}

// resize scales src to w×h by area averaging (down) or bilinear sampling (up).
func resize(src *image.RGBA, w, h int) *image.RGBA {
	out := image.NewRGBA(image.Rect(0, 0, w, h))
	sw, sh := src.Bounds().Dx(), src.Bounds().Dy()
	kx, ky := float64(sw)/float64(w), float64(sh)/float64(h)
	var p [3]float64
	for y := range h {
		for x := range w {
			o := y*out.Stride + x*4
			var acc [3]float64
			n := 0.0
			for sy := 0.25; sy < 1; sy += 0.5 {
				for sx := 0.25; sx < 1; sx += 0.5 {
					if bilinear(src, (float64(x)+sx)*kx-0.5, (float64(y)+sy)*ky-0.5, &p) {
						acc[0], acc[1], acc[2] = acc[0]+p[0], acc[1]+p[1], acc[2]+p[2]
						n++
					}
				}
			}
			if n == 0 {
				n = 1
			}
			out.Pix[o], out.Pix[o+1], out.Pix[o+2], out.Pix[o+3] = uint8(acc[0]/n+0.5), uint8(acc[1]/n+0.5), uint8(acc[2]/n+0.5), 255
		}
	}
	return out
}

// photograph turns a screenshot into a photo of the phone's screen: the
// screen's washed-out blacks, the phone slightly turned on a desk, light
// that falls off across the picture and a glare spot, lens blur and sensor
// noise. There is no perspective.
func photograph(r *rand.Rand, screen *image.RGBA) *image.RGBA {
	const W, H = 1200, 1600
	out := image.NewRGBA(image.Rect(0, 0, W, H))
	sw, sh := float64(screen.Bounds().Dx()), float64(screen.Bounds().Dy())
	k := (0.82 + 0.12*r.Float64()) * H / sh // screen pixels → photo pixels
	a := (r.Float64()*12 - 6) * math.Pi / 180
	c, s := math.Cos(a), math.Sin(a)
	cx, cy := W/2+(r.Float64()-0.5)*60, H/2+(r.Float64()-0.5)*60
	bezel := 14.0 / k
	desk := deskColor(r)
	lo := 0.25 + 0.35*r.Float64()
	ga := r.Float64() * 2 * math.Pi
	gx, gy := math.Cos(ga), math.Sin(ga)
	hx, hy, hs := r.Float64()*W, r.Float64()*H, 120+r.Float64()*200
	glareMax := 50 + 60*r.Float64()
	blur := 1 + r.IntN(2)
	noise := 4 + 4*r.Float64()
	black := 20 + r.Float64()*25
	gain := 0.72 + 0.1*r.Float64()
	var p [3]float64
	for y := range H {
		for x := range W {
			dx, dy := float64(x)-cx, float64(y)-cy
			sx := (c*dx+s*dy)/k + sw/2
			sy := (-s*dx+c*dy)/k + sh/2
			var v [3]float64
			switch {
			case bilinear(screen, sx, sy, &p):
				for ch := range 3 {
					v[ch] = black + p[ch]*gain
				}
				v[2] += 6 // cold screen light
			case sx > -bezel && sy > -bezel && sx < sw+bezel && sy < sh+bezel:
				v = [3]float64{12, 12, 14}
			default:
				v = [3]float64{float64(desk.R), float64(desk.G), float64(desk.B)}
			}
			t := ((float64(x)/W-0.5)*gx+(float64(y)/H-0.5)*gy)/1.2 + 0.5
			light := lo + (1-lo)*t
			glare := glareMax * math.Exp(-((float64(x)-hx)*(float64(x)-hx)+(float64(y)-hy)*(float64(y)-hy))/(2*hs*hs))
			o := y*out.Stride + x*4
			for ch := range 3 {
				out.Pix[o+ch] = clamp(v[ch]*light + glare)
			}
			out.Pix[o+3] = 255
		}
	}
	boxBlur(out, blur)
	boxBlur(out, 1)
	for i := 0; i < len(out.Pix); i += 4 {
		for ch := range 3 {
			out.Pix[i+ch] = clamp(float64(out.Pix[i+ch]) + r.NormFloat64()*noise)
		}
	}
	return out
}

func clamp(v float64) uint8 {
	return uint8(math.Max(0, math.Min(255, v+0.5)))
}

// boxBlur averages each pixel with its (2r+1)² neighbourhood (a
// horizontal then a vertical running sum; edges average fewer pixels).
func boxBlur(img *image.RGBA, rad int) {
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	tmp := make([]uint8, len(img.Pix))
	blur1 := func(src, dst []uint8, n, count, step, stride int) {
		// n lines of count pixels; pixels step bytes apart, lines stride apart.
		for l := range n {
			base := l * stride
			for ch := range 4 {
				sum, cnt := 0, 0
				for i := 0; i < min(rad, count); i++ {
					sum += int(src[base+i*step+ch])
					cnt++
				}
				for i := range count {
					if j := i + rad; j < count {
						sum += int(src[base+j*step+ch])
						cnt++
					}
					if j := i - rad - 1; j >= 0 {
						sum -= int(src[base+j*step+ch])
						cnt--
					}
					dst[base+i*step+ch] = uint8(sum / cnt)
				}
			}
		}
	}
	blur1(img.Pix, tmp, h, w, 4, img.Stride)
	blur1(tmp, img.Pix, w, h, img.Stride, 4)
}
