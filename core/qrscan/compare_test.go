package qrscan

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// zxingScript reads file names from stdin and prints, for each, the QR
// texts zxing-cpp finds and the time it took, opening the file included.
// zxing-cpp's defaults are kept (try_rotate, try_downscale, local-average
// binarizer), which is how its Python binding is normally used.
const zxingScript = `
import sys, json, time
from PIL import Image
import zxingcpp
for line in sys.stdin:
    p = line.strip()
    t0 = time.perf_counter()
    img = Image.open(p)
    img.load()
    if img.mode not in ("L", "RGB"):
        img = img.convert("RGB")
    res = zxingcpp.read_barcodes(img, formats=zxingcpp.BarcodeFormat.QRCode)
    dt = time.perf_counter() - t0
    print(json.dumps({"file": p, "texts": [r.text for r in res], "sec": dt}), flush=True)
`

// decoderRun is one decoder's outcome on the corpus.
type decoderRun struct {
	ok    map[string]bool          // file name → decoded the slip payload
	wrong map[string]bool          // file name → returned a payload that is in no code of the picture
	durs  map[string]time.Duration // file name → time
}

func newDecoderRun() decoderRun {
	return decoderRun{ok: map[string]bool{}, wrong: map[string]bool{}, durs: map[string]time.Duration{}}
}

// note records a decoder's answer on s: the texts it returned.
func (d decoderRun) note(s *sample, texts []string, dur time.Duration) {
	k := s.name()
	d.ok[k] = slices.Contains(texts, s.payload)
	for _, t := range texts {
		if t != "" && t != s.payload && t != s.other {
			d.wrong[k] = true
		}
	}
	d.durs[k] = dur
}

// TestCompareDecoders measures this package against zxing-cpp (Debian
// python3-zxing-cpp, with python3-pil) and zbar (zbar-tools) on the corpus
// and prints the decode rate and median time per condition. It runs only
// with QRSCAN_COMPARE=1 and the tools installed:
//
//	apt-get install -y python3-zxing-cpp python3-pil zbar-tools webp
//	QRSCAN_COMPARE=1 go test -run TestCompareDecoders -v ./core/qrscan/
func TestCompareDecoders(t *testing.T) {
	if os.Getenv("QRSCAN_COMPARE") == "" {
		t.Skip("set QRSCAN_COMPARE=1 to compare with zxing-cpp and zbar")
	}
	py := "/usr/bin/python3" // Debian's, where python3-zxing-cpp installs
	if err := exec.Command(py, "-c", "import zxingcpp, PIL").Run(); err != nil {
		t.Skip("python3-zxing-cpp or python3-pil not installed")
	}
	if _, err := exec.LookPath("zbarimg"); err != nil {
		t.Skip("zbar-tools not installed")
	}
	samples := corpus(t)
	dir := t.TempDir()
	for _, s := range samples {
		if err := os.WriteFile(filepath.Join(dir, s.name()), s.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	byName := map[string]*sample{}
	for _, s := range samples {
		byName[s.name()] = s
	}

	// Ours is told which payload is a slip, as core tells it; the second
	// code of a picture is a wrong answer for it.
	ours := newDecoderRun()
	res := scanCorpus(t, samples)
	for _, r := range res {
		ours.note(r.s, []string{r.got}, r.dur)
		ours.wrong[r.s.name()] = r.err == nil && r.got != r.s.payload
	}

	zx := newDecoderRun()
	cmd := exec.Command(py, "-c", zxingScript)
	var in strings.Builder
	for _, s := range samples {
		in.WriteString(filepath.Join(dir, s.name()) + "\n")
	}
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("zxing-cpp: %v", err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var r struct {
			File  string
			Texts []string
			Sec   float64
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		zx.note(byName[filepath.Base(r.File)], r.Texts, time.Duration(r.Sec*float64(time.Second)))
	}

	// zbarimg runs once per file, so its times include starting the
	// process; the time of a run on a 1×1 image is subtracted.
	zb := newDecoderRun()
	base := zbarBase(t, dir)
	for _, s := range samples {
		start := time.Now()
		out, _ := exec.Command("zbarimg", "--raw", "-q", "-Sdisable", "-Sqrcode.enable", filepath.Join(dir, s.name())).Output()
		d := time.Since(start) - base
		zb.note(s, strings.Split(strings.TrimSpace(string(out)), "\n"), max(d, 0))
	}

	var b strings.Builder
	fmt.Fprintf(&b, "zbarimg start-up subtracted: %v\n", base.Round(time.Millisecond))
	fmt.Fprintf(&b, "| Condition | files | ours | zxing-cpp | zbar | wrong (ours/zxing-cpp/zbar) | ours median | ours p95 | zxing-cpp median | zbar median |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|\n")
	row := func(label string, keep func(*sample) bool) {
		var n, a, z, y, wa, wz, wy int
		var da, dz, dy []time.Duration
		for _, s := range samples {
			if !keep(s) {
				continue
			}
			k := s.name()
			n++
			a, z, y = a+b2i(ours.ok[k]), z+b2i(zx.ok[k]), y+b2i(zb.ok[k])
			wa, wz, wy = wa+b2i(ours.wrong[k]), wz+b2i(zx.wrong[k]), wy+b2i(zb.wrong[k])
			da, dz, dy = append(da, ours.durs[k]), append(dz, zx.durs[k]), append(dy, zb.durs[k])
		}
		if n == 0 {
			return
		}
		ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %d / %d / %d | %s | %s | %s | %s |\n", label, n, pct(a, n), pct(z, n), pct(y, n),
			wa, wz, wy, ms(median(da)), ms(quantile(da, 0.95)), ms(median(dz)), ms(median(dy)))
	}
	for _, c := range conditions {
		row(c.name, func(s *sample) bool { return s.cond == c.name })
	}
	for _, f := range formats {
		row("**all ("+f+")**", func(s *sample) bool { return s.format == f })
	}
	row("**all**", func(*sample) bool { return true })
	t.Log("\n" + b.String() + "\nours, per format:\n" + rateTable(res))
	for _, s := range samples {
		k := s.name()
		if zx.ok[k] && !ours.ok[k] {
			t.Logf("zxing-cpp only: %s", k)
		}
		if ours.wrong[k] {
			t.Errorf("%s: a wrong payload", k)
		}
	}
}

// zbarBase is the time zbarimg takes on a tiny image: its start-up.
func zbarBase(t *testing.T, dir string) time.Duration {
	p := filepath.Join(dir, "tiny.png")
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 1, 1))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var ds []time.Duration
	for range 5 {
		start := time.Now()
		_ = exec.Command("zbarimg", "--raw", "-q", p).Run()
		ds = append(ds, time.Since(start))
	}
	return median(ds)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func pct(ok, n int) string {
	return fmt.Sprintf("%.0f %%", 100*float64(ok)/float64(n))
}
