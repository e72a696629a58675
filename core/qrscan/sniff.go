package qrscan

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"

	"golang.org/x/image/webp"

	"github.com/slipverify/slipverify/core/qrscan/internal/jpegluma"
)

// format is an image format the scanner accepts.
type format uint8

const (
	formatJPEG format = iota + 1
	formatPNG
	formatGIF
	formatWebP
)

func (f format) String() string {
	switch f {
	case formatJPEG:
		return "jpeg"
	case formatPNG:
		return "png"
	case formatGIF:
		return "gif"
	case formatWebP:
		return "webp"
	}
	return "unknown"
}

// sniff names the format of img from its magic bytes, or returns 0. The
// file name and any declared content type play no part.
func sniff(img []byte) format {
	switch {
	case len(img) >= 3 && img[0] == 0xff && img[1] == 0xd8 && img[2] == 0xff:
		return formatJPEG
	case bytes.HasPrefix(img, []byte("\x89PNG\r\n\x1a\n")):
		return formatPNG
	case bytes.HasPrefix(img, []byte("GIF87a")), bytes.HasPrefix(img, []byte("GIF89a")):
		return formatGIF
	case len(img) >= 12 && string(img[0:4]) == "RIFF" && string(img[8:12]) == "WEBP":
		return formatWebP
	}
	return 0
}

// decodeConfig reads the dimensions of img.
func decodeConfig(f format, img []byte) (image.Config, error) {
	r := bytes.NewReader(img)
	switch f {
	case formatJPEG:
		return jpeg.DecodeConfig(r)
	case formatPNG:
		return png.DecodeConfig(r)
	case formatGIF:
		return gif.DecodeConfig(r)
	case formatWebP:
		return webp.DecodeConfig(r)
	}
	return image.Config{}, ErrFormat
}

// decodeImage decodes img, whose format is f.
func decodeImage(f format, img []byte) (image.Image, error) {
	r := bytes.NewReader(img)
	switch f {
	case formatJPEG:
		return jpeg.Decode(r)
	case formatPNG:
		return png.Decode(r)
	case formatGIF:
		return gif.Decode(r) // the first frame
	case formatWebP:
		return webp.Decode(r)
	}
	return nil, ErrFormat
}

// decodeCost estimates, from the header alone, the bytes the standard
// decoder allocates to decode img, whose format is f and whose declared
// size is w×h. It errs on the high side. The estimates follow what the
// decoders of the Go standard library and golang.org/x/image allocate:
//
//   - JPEG: the Y, Cb, Cr (and K) planes at their sampling, padded to whole
//     MCUs; plus an RGBA copy for RGB and CMYK files; plus 256 bytes per
//     8×8 block per component for progressive files, which keep every
//     coefficient until the last scan.
//   - PNG: 1, 2, 4 or 8 bytes per pixel by colour type, bit depth and
//     transparency; twice that for interlaced files, whose passes are
//     decoded apart and merged; plus two rows as the file stores them.
//   - GIF: 1 byte per pixel, twice for interlaced frames (which are
//     reordered into a copy).
//   - WebP: 1.5 bytes per pixel for lossy (YCbCr 4:2:0 padded to 16×16
//     macroblocks) plus its per-macroblock state; for lossless, what
//     vp8lCost measures in the bitstream (NRGBA pixels, transform data,
//     and the Huffman trees, which the dimensions do not bound); both for
//     a lossy image with lossless alpha.
//
// An error means the header is malformed.
func decodeCost(f format, img []byte, w, h int) (int64, error) {
	px := int64(w) * int64(h)
	switch f {
	case formatJPEG:
		return jpegCost(img, w, h)
	case formatPNG:
		return pngCost(img, w, h)
	case formatGIF:
		return 2 * px, nil
	case formatWebP:
		return webpCost(img, w, h)
	}
	return 0, ErrFormat
}

// maxJPEGScans bounds the scans of a JPEG file. Each scan of a progressive
// file passes over every block of its components, so a few kilobytes of
// near-empty scans would keep a decode busy for minutes; real encoders
// write about 10.
const maxJPEGScans = 100

// jpegCost walks the markers of a JPEG file as image/jpeg's decoder does,
// to its end: "FF 00" outside a scan is skipped, bytes that are no marker
// are skipped, and an APP0 (JFIF) or APP14 (Adobe) segment anywhere before
// the end changes the colour conversion. It counts the scans, refusing a
// file with more than maxJPEGScans, and prices the frame header (SOFn).
func jpegCost(img []byte, w, h int) (int64, error) {
	hdr, err := readJPEGHeader(img)
	if err != nil {
		return 0, err
	}
	return sofCost(hdr.sof, hdr.progressive, hdr.jfif, hdr.adobe, hdr.adobeTransform, w, h)
}

// jpegHeader is what the estimates need of a JPEG file's markers.
type jpegHeader struct {
	sof                      []byte // the frame header's segment
	progressive, jfif, adobe bool
	adobeTransform           byte
}

// readJPEGHeader walks the markers of a JPEG file as image/jpeg's decoder
// does (see jpegCost).
func readJPEGHeader(img []byte) (jpegHeader, error) {
	jfif, adobe, adobeTransform := false, false, byte(0)
	var sof []byte
	progressive, scans := false, 0
	for i := 2; i+2 <= len(img); {
		if img[i] != 0xff { // extraneous data, which the decoder skips too
			i++
			continue
		}
		m := img[i+1]
		if m == 0x00 { // "FF 00" outside a scan: extraneous data
			i += 2
			continue
		}
		i++
		for m == 0xff && i+1 < len(img) { // fill bytes
			i++
			m = img[i]
		}
		i++            // past the marker
		if m == 0xd9 { // end of image
			break
		}
		if m >= 0xd0 && m <= 0xd7 { // a restart marker: no length
			continue
		}
		if i+2 > len(img) {
			break
		}
		n := int(binary.BigEndian.Uint16(img[i:]))
		if n < 2 || i+n > len(img) {
			return jpegHeader{}, fmt.Errorf("%w: jpeg: truncated segment", ErrFormat)
		}
		seg := img[i+2 : i+n]
		i += n
		switch {
		case m == 0xe0 && len(seg) >= 5:
			// As Go's decoder: every APP0 decides anew (a JFXX after the
			// JFIF one unsets it, and with Adobe transform 0 the image is
			// converted to RGBA, 4 more bytes a pixel).
			jfif = bytes.HasPrefix(seg, []byte("JFIF\x00"))
		case m == 0xee && len(seg) >= 12 && bytes.HasPrefix(seg, []byte("Adobe")):
			adobe, adobeTransform = true, seg[11]
		case m == 0xc0 || m == 0xc1 || m == 0xc2:
			if sof != nil {
				return jpegHeader{}, fmt.Errorf("%w: jpeg: two frame headers", ErrFormat)
			}
			sof, progressive = seg, m == 0xc2
		case m == 0xda:
			if scans++; scans > maxJPEGScans {
				return jpegHeader{}, fmt.Errorf("%w: jpeg: more than %d scans", ErrFormat, maxJPEGScans)
			}
			i = scanEnd(img, i)
		}
	}
	if sof == nil {
		return jpegHeader{}, fmt.Errorf("%w: jpeg: no frame header", ErrFormat)
	}
	return jpegHeader{sof: sof, progressive: progressive, jfif: jfif, adobe: adobe, adobeTransform: adobeTransform}, nil
}

// jpegLumaScale is the factor jpegluma shrinks a w×h JPEG by: the largest
// of 8, 4, 2 and 1 that leaves it no smaller than the working plane would
// be (shrinkFactor), so it costs no resolution the scan uses.
func jpegLumaScale(w, h int) int {
	k := shrinkFactor(w, h)
	s := 8
	for s > k {
		s /= 2
	}
	return s
}

// jpegLumaCost is what decoding the luma of a w×h JPEG alone, shrunk by
// scale, allocates (jpegluma.Cost); false if the file's luma is no one
// component (RGB, CMYK), which only image/jpeg can read.
func jpegLumaCost(img []byte, w, h, scale int) (int64, bool) {
	hdr, err := readJPEGHeader(img)
	if err != nil || len(hdr.sof) < 6 {
		return 0, false
	}
	seg := hdr.sof
	nc := int(seg[5])
	if nc != 1 && nc != 3 || len(seg) < 6+3*nc {
		return 0, false
	}
	rgb := !hdr.jfif && nc == 3 && ((hdr.adobe && hdr.adobeTransform == 0) ||
		(seg[6] == 'R' && seg[9] == 'G' && seg[12] == 'B'))
	if rgb {
		return 0, false
	}
	h0, v0 := int(seg[7]>>4), int(seg[7]&15)
	hmax, vmax := 1, 1
	for c := range nc {
		s := seg[6+3*c+1]
		hmax, vmax = max(hmax, int(s>>4)), max(vmax, int(s&15))
	}
	if nc == 1 { // one component is read in 8×8 blocks whatever it declares
		h0, v0, hmax, vmax = 1, 1, 1, 1
	}
	return jpegluma.Cost(w, h, h0, v0, hmax, vmax, scale, hdr.progressive), true
}

// scanEnd returns where the entropy-coded data that starts at i ends: at
// the first marker that is neither a stuffed "FF 00" nor a restart marker.
func scanEnd(img []byte, i int) int {
	for {
		k := bytes.IndexByte(img[i:], 0xff)
		if k < 0 || i+k+1 >= len(img) {
			return len(img)
		}
		i += k
		switch m := img[i+1]; {
		case m == 0xff: // a fill byte: the marker may follow
			i++
		case m == 0x00 || (m >= 0xd0 && m <= 0xd7): // stuffed data, a restart marker
			i += 2
		default:
			return i
		}
	}
}

func sofCost(seg []byte, progressive, jfif, adobe bool, adobeTransform byte, w, h int) (int64, error) {
	if len(seg) < 6 {
		return 0, fmt.Errorf("%w: jpeg: short frame header", ErrFormat)
	}
	nc := int(seg[5])
	if nc != 1 && nc != 3 && nc != 4 || len(seg) < 6+3*nc {
		return 0, fmt.Errorf("%w: jpeg: %d components", ErrFormat, nc)
	}
	hmax, vmax := 1, 1
	for c := range nc {
		s := seg[6+3*c+1]
		hmax, vmax = max(hmax, int(s>>4)), max(vmax, int(s&15))
	}
	mxx := (int64(w) + 8*int64(hmax) - 1) / (8 * int64(hmax))
	myy := (int64(h) + 8*int64(vmax) - 1) / (8 * int64(vmax))
	var cost int64
	for c := range nc {
		s := seg[6+3*c+1]
		blocks := mxx * myy * int64(s>>4) * int64(s&15)
		cost += 64 * blocks // the component's plane
		if progressive {
			cost += 256 * blocks // its coefficients, [64]int32 a block
		}
	}
	px := int64(w) * int64(h)
	rgb := !jfif && nc == 3 && ((adobe && adobeTransform == 0) ||
		(seg[6] == 'R' && seg[9] == 'G' && seg[12] == 'B'))
	if rgb || nc == 4 {
		cost += 4 * px
	}
	return cost, nil
}

// pngCost reads the header (IHDR) of a PNG file and looks for a
// transparency chunk (tRNS) before the image data.
func pngCost(img []byte, w, h int) (int64, error) {
	px := int64(w) * int64(h)
	if len(img) < 33 || string(img[12:16]) != "IHDR" {
		return 0, fmt.Errorf("%w: png: no header", ErrFormat)
	}
	depth, ctype, interlace := img[24], img[25], img[28]
	trns := false
	for i := 33; i+8 <= len(img); {
		n := int64(binary.BigEndian.Uint32(img[i:]))
		typ := string(img[i+4 : i+8])
		if typ == "IDAT" || typ == "IEND" {
			break
		}
		if typ == "tRNS" {
			trns = true
		}
		if n > int64(len(img)) {
			break
		}
		i += 12 + int(n)
	}
	var bpp int64
	switch {
	case ctype == 3:
		bpp = 1
	case ctype == 0 && depth <= 8 && !trns:
		bpp = 1
	case ctype == 0 && depth == 16 && !trns:
		bpp = 2
	case depth == 16:
		bpp = 8
	default:
		bpp = 4
	}
	cost := bpp * px
	if interlace != 0 {
		cost *= 2
	}
	// The decoder's current and previous rows, as stored in the file (a
	// filter byte and the samples): what a very wide image costs most.
	channels := map[byte]int64{0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[ctype]
	cost += 2 * (1 + (max(channels, 1)*int64(depth)*int64(w)+7)/8)
	return cost, nil
}

// webpCost reads the chunk list of a WebP file: VP8 (lossy), VP8L
// (lossless, measured by vp8lCost), or VP8X with ALPH for lossy with alpha.
func webpCost(img []byte, w, h int) (int64, error) {
	px := int64(w) * int64(h)
	mbs := int64((w+15)/16) * int64((h+15)/16)
	lossy := 384*mbs + 64*mbs // YCbCr 4:2:0 in whole macroblocks, and per-macroblock state
	var cost int64
	for i := 12; i+8 <= len(img); {
		id := string(img[i : i+4])
		n := int64(binary.LittleEndian.Uint32(img[i+4:]))
		if n > int64(len(img)-i-8) && (id == "VP8 " || id == "ALPH") {
			// The decoder allocates what the chunk declares before it
			// reads: a 70-byte file declaring 128 MiB of partitions.
			return 0, fmt.Errorf("%w: webp: chunk %q of %d bytes runs past the end of the file", ErrFormat, id, n)
		}
		data := img[i+8 : i+8+int(min(n, int64(len(img)-i-8)))]
		switch id {
		case "VP8 ":
			return cost + lossy, nil
		case "VP8L":
			if 4*px > Budget { // refused anyway: do not spend memory measuring
				return 4 * px, nil
			}
			c, err := vp8lCost(data, w, h, true)
			if err != nil {
				return 0, fmt.Errorf("%w: webp: %v", ErrFormat, err)
			}
			return cost + c, nil
		case "ALPH":
			cost += px // the alpha plane
			if 5*px > Budget {
				return 5 * px, nil
			}
			if len(data) > 0 && data[0]&3 == 1 {
				c, err := vp8lCost(data[1:], w, h, false)
				if err != nil {
					return 0, fmt.Errorf("%w: webp alpha: %v", ErrFormat, err)
				}
				cost += c
			}
		}
		i += 8 + int(n) + int(n&1)
		if i < 0 || int64(i) > int64(len(img)) {
			break
		}
	}
	return 0, fmt.Errorf("%w: webp: no image data", ErrFormat)
}
