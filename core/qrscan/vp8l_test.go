package qrscan

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/image/webp"
)

// bitWriter writes a VP8L bitstream, least significant bit first.
type bitWriter struct {
	b     []byte
	acc   uint64
	nBits uint
}

func (w *bitWriter) write(v uint32, n uint) {
	w.acc |= uint64(v) << w.nBits
	w.nBits += n
	for w.nBits >= 8 {
		w.b = append(w.b, byte(w.acc))
		w.acc >>= 8
		w.nBits -= 8
	}
}

func (w *bitWriter) bytes() []byte {
	if w.nBits > 0 {
		return append(w.b, byte(w.acc))
	}
	return w.b
}

// canonical returns the canonical Huffman codes of lengths.
func canonical(lengths []int) []uint32 {
	var count [16]uint32
	for _, l := range lengths {
		count[l]++
	}
	count[0] = 0
	var next [16]uint32
	code := uint32(0)
	for l := 1; l < 16; l++ {
		code = (code + count[l-1]) << 1
		next[l] = code
	}
	codes := make([]uint32, len(lengths))
	for s, l := range lengths {
		if l > 0 {
			codes[s] = next[l]
			next[l]++
		}
	}
	return codes
}

// writeCode writes code, length bits, most significant first.
func (w *bitWriter) writeCode(code uint32, length int) {
	for j := length - 1; j >= 0; j-- {
		w.write(code>>j&1, 1)
	}
}

// normalTree writes a normal VP8L Huffman code with the given code lengths
// and returns its codes. Each length is written as a literal of the code
// length code, which gets a complete code over the lengths used.
func (w *bitWriter) normalTree(lengths []int) []uint32 {
	var used []int
	seen := map[int]bool{}
	for _, l := range lengths {
		if !seen[l] {
			seen[l] = true
			used = append(used, l)
		}
	}
	k := len(used)
	clcl := make([]int, 19)
	if k > 1 {
		L := bits.Len(uint(k - 1))
		a := 1<<L - k // this many at length L-1
		for i, v := range used {
			clcl[v] = L
			if i < a {
				clcl[v] = L - 1
			}
		}
	} else {
		clcl[used[0]] = 1 // a single symbol: x/image gives it no bits
	}
	w.write(0, 1)
	w.write(19-4, 4)
	for _, s := range codeLengthOrder {
		w.write(uint32(clcl[s]), 3)
	}
	w.write(0, 1) // no max symbol
	clc := canonical(clcl)
	for _, l := range lengths {
		if k > 1 {
			w.writeCode(clc[l], clcl[l])
		}
	}
	return canonical(lengths)
}

// simpleZero writes a simple code of the one symbol 0.
func (w *bitWriter) simpleZero() {
	w.write(1, 1)
	w.write(0, 1)
	w.write(0, 1)
	w.write(0, 1)
}

// vp8lHuffmanBomb is a 204×204 lossless WebP whose main image uses 2,600
// groups of maximal Huffman trees: about 1 MB of file for which
// golang.org/x/image/vp8l allocates well over 100 MB before it reads a
// pixel. Its pixel data is garbage.
func vp8lHuffmanBomb() []byte {
	const side = 204
	var w bitWriter
	w.write(0x2f, 8)
	w.write(side-1, 14)
	w.write(side-1, 14)
	w.write(0, 1)
	w.write(0, 3)
	w.write(0, 1) // no transforms
	w.write(1, 1) // colour cache of 11 bits
	w.write(11, 4)
	w.write(1, 1) // meta image of 4×4 tiles: 51×51
	w.write(0, 3)
	// The meta image: tile i uses group min(i, 2599).
	w.write(0, 1) // no cache
	green := make([]int, 280)
	red := make([]int, 256)
	for i := range 256 {
		green[i], red[i] = 8, 8
	}
	gc := w.normalTree(green)
	rc := w.normalTree(red)
	w.simpleZero()
	w.simpleZero()
	w.simpleZero()
	for i := range 51 * 51 {
		g := min(i, 2599)
		w.writeCode(gc[g&0xff], 8)
		w.writeCode(rc[g>>8], 8)
	}
	// 2,600 groups of the largest trees.
	big := make([]int, 256+24+2048)
	for i := range big {
		big[i] = 11
		if i >= 1768 {
			big[i] = 12
		}
	}
	dist := make([]int, 40)
	for i := range dist {
		dist[i] = 5
		if i >= 24 {
			dist[i] = 6
		}
	}
	for range 2600 {
		w.normalTree(big)
		w.normalTree(red)
		w.normalTree(red)
		w.normalTree(red)
		w.normalTree(dist)
	}
	w.write(0, 32)
	chunk := w.bytes()
	out := []byte("RIFF")
	out = binary.LittleEndian.AppendUint32(out, uint32(4+8+len(chunk)+len(chunk)&1))
	out = append(out, "WEBPVP8L"...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(chunk)))
	out = append(out, chunk...)
	if len(chunk)&1 == 1 {
		out = append(out, 0)
	}
	return out
}

// TestVP8LHuffmanBomb checks that the bomb really is one for x/image, and
// that Scan refuses it from the bitstream's trees, cheaply.
func TestVP8LHuffmanBomb(t *testing.T) {
	bomb := vp8lHuffmanBomb()
	if len(bomb) > MaxBytes {
		t.Fatalf("bomb of %d bytes", len(bomb))
	}
	c, err := vp8lCost(bomb[20:], 204, 204, true)
	if err != nil {
		t.Fatalf("vp8lCost: %v", err)
	}
	if testing.Short() {
		t.Log("short: not decoding the bomb with x/image")
	} else {
		var derr error
		n := allocated(func() { _, derr = webp.Decode(bytes.NewReader(bomb)) })
		t.Logf("%d bytes of file: x/image allocated %d MiB (%v); estimate %d MiB", len(bomb), n>>20, derr, c>>20)
		if n < 100<<20 {
			t.Errorf("x/image allocated only %d MiB: not a bomb", n>>20)
		}
		if c < int64(n) {
			t.Errorf("estimate %d below the %d allocated", c, n)
		}
	}
	var serr error
	n := allocated(func() { _, serr = Scan(bomb, nil) })
	if !errors.Is(serr, ErrTooManyPixels) {
		t.Errorf("Scan: %v, want ErrTooManyPixels", serr)
	}
	if n > 16<<20 {
		t.Errorf("Scan allocated %d MiB refusing it", n>>20)
	}
}

// TestVP8LCost compares the estimate with what x/image allocates for real
// lossless files (made by cwebp from corpus images, and the fixtures).
func TestVP8LCost(t *testing.T) {
	files := map[string][]byte{}
	for _, n := range []string{"slip-lossless.webp", "slip-alpha.webp"} {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			t.Fatal(err)
		}
		files[n] = b
	}
	if haveCWebP() && !testing.Short() {
		dir := t.TempDir()
		for i, s := range corpus(t) {
			if s.format != "png" || s.index != 0 || (s.cond != "clean" && s.cond != "photo" && s.cond != "rotated") {
				continue
			}
			in, out := filepath.Join(dir, s.name()), filepath.Join(dir, s.name()+".webp")
			if err := os.WriteFile(in, s.data, 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"-quiet", "-lossless", "-z", "1", in, "-o", out}
			if i%2 == 1 {
				args = []string{"-quiet", "-near_lossless", "60", in, "-o", out}
			}
			if b, err := exec.Command("cwebp", args...).CombinedOutput(); err != nil {
				t.Fatalf("cwebp: %v: %s", err, b)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			files[s.name()+".webp"] = b
		}
	}
	for name, b := range files {
		cfg, err := webp.DecodeConfig(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		est, err := webpCost(b, cfg.Width, cfg.Height)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var derr error
		n := allocated(func() { _, derr = webp.Decode(bytes.NewReader(b)) })
		if derr != nil {
			t.Fatalf("%s: %v", name, derr)
		}
		t.Logf("%s %d×%d: allocated %d KiB, estimated %d KiB", name, cfg.Width, cfg.Height, n>>10, est>>10)
		if int64(n) > est {
			t.Errorf("%s: allocated %d, over the estimate %d", name, n, est)
		}
		if est > 2*int64(n)+1<<20 {
			t.Errorf("%s: estimate %d is far above the %d allocated", name, est, n)
		}
	}
}
