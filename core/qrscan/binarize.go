package qrscan

import (
	"encoding/binary"

	"github.com/makiuchi-d/gozxing"
)

// hybridBits is gozxing's HybridBinarizer (zxing's local-threshold
// binarizer) over a plane, bit for bit (TestHybridAsGozxing), without its
// cost: gozxing sets one bit at a time through a method call and allocates
// a row of black points per block row and a new matrix per call; here a
// block's eight pixels of a row become a byte of bits, and the black
// points, the bits and the matrix are the caller's to reuse (bin).
//
// The rule, as zxing's: the plane is cut into 8×8 blocks (the last row and
// column of blocks moved back to end at the edge, so they overlap the one
// before); a block's black point is the mean of its pixels, or, where
// they span no more than 24 levels (flat), half its minimum, or its
// neighbours' black point if its minimum is under that; a pixel is black
// if it is at most the mean black point of the 5×5 blocks around its
// block, in any block that covers it.
type hybridBits struct {
	points []int32
	words  []uint32
	row    *gozxing.BitArray
	mats   []*gozxing.BitMatrix // by size, the most recent first
}

// maxMats bounds the matrices a hybridBits keeps: the half and full
// planes, and zoom's windows.
const maxMats = 4

// matrix returns a w×h bit matrix that the caller overwrites row by row.
func (hb *hybridBits) matrix(w, h int) *gozxing.BitMatrix {
	for i, m := range hb.mats {
		if m.GetWidth() == w && m.GetHeight() == h {
			copy(hb.mats[1:i+1], hb.mats[:i])
			hb.mats[0] = m
			return m
		}
	}
	m, _ := gozxing.NewBitMatrix(w, h)
	if len(hb.mats) < maxMats {
		hb.mats = append(hb.mats, nil)
	}
	copy(hb.mats[1:], hb.mats)
	hb.mats[0] = m
	return m
}

// binarize returns p's bits, as gozxing's HybridBinarizer would; planes
// under 40 pixels a side go to gozxing's global histogram, as there.
// The matrix is valid until the next call.
func (hb *hybridBits) binarize(p plane) (*gozxing.BitMatrix, error) {
	const blk, minRange = 8, 24
	w, h := p.w, p.h
	if w < 5*blk || h < 5*blk {
		return binarize(p, global)
	}
	sw, sh := (w+blk-1)/blk, (h+blk-1)/blk
	if cap(hb.points) < sw*sh {
		hb.points = make([]int32, sw*sh)
	}
	bp := hb.points[:sw*sh]
	pix := p.pix
	for by := range sh {
		y0 := min(by*blk, h-blk)
		for bx := range sw {
			x0 := min(bx*blk, w-blk)
			// The sum in four 16-bit lanes (at most 16 × 255 each), the
			// least and greatest of each column in the bytes of lo and
			// hi, then of the block in their lowest byte.
			lanes, lo, hi := uint64(0), ^uint64(0), uint64(0)
			for y := y0; y < y0+blk; y++ {
				v := binary.LittleEndian.Uint64(pix[y*w+x0:])
				lanes += v&0x00ff00ff00ff00ff + v>>8&0x00ff00ff00ff00ff
				lo, hi = minBytes(lo, v), maxBytes(hi, v)
			}
			lo, hi = minBytes(lo, lo>>32), maxBytes(hi, hi>>32)
			lo, hi = minBytes(lo, lo>>16), maxBytes(hi, hi>>16)
			lo, hi = minBytes(lo, lo>>8), maxBytes(hi, hi>>8)
			sum := int32(lanes * 0x0001000100010001 >> 48)
			avg := sum >> 6
			if lo, hi := uint8(lo), uint8(hi); hi-lo <= minRange {
				avg = int32(lo) / 2
				if by > 0 && bx > 0 {
					nb := (bp[(by-1)*sw+bx] + 2*bp[by*sw+bx-1] + bp[(by-1)*sw+bx-1]) / 4
					if int32(lo) < nb {
						avg = nb
					}
				}
			}
			bp[by*sw+bx] = avg
		}
	}
	rowWords := (w + 31) / 32
	if cap(hb.words) < rowWords*h {
		hb.words = make([]uint32, rowWords*h)
	}
	words := hb.words[:rowWords*h]
	clear(words)
	for by := range sh {
		y0 := min(by*blk, h-blk)
		top := clampInt(by, 2, sh-3)
		for bx := range sw {
			x0 := min(bx*blk, w-blk)
			left := clampInt(bx, 2, sw-3)
			sum := int32(0)
			for z := top - 2; z <= top+2; z++ {
				r := bp[z*sw+left-2 : z*sw+left+3]
				sum += r[0] + r[1] + r[2] + r[3] + r[4]
			}
			th := uint64(sum/25) * 0x0101010101010101 // a mean of black points, each at most 255, in every byte
			wi, shift := x0/32, uint(x0%32)
			for y := y0; y < y0+blk; y++ {
				bits := atMost(binary.LittleEndian.Uint64(pix[y*w+x0:]), th) << shift
				o := y*rowWords + wi
				words[o] |= uint32(bits)
				if hi := uint32(bits >> 32); hi != 0 {
					words[o+1] |= hi
				}
			}
		}
	}
	m := hb.matrix(w, h)
	if hb.row == nil || hb.row.GetSize() < w {
		hb.row = gozxing.NewBitArray(w)
	}
	for y := range h {
		for i, v := range words[y*rowWords : (y+1)*rowWords] {
			hb.row.SetBulk(32*i, v)
		}
		m.SetRow(y, hb.row)
	}
	return m, nil
}

// atMostBytes returns, for each of the eight bytes of v, its top bit set
// if it is at most the byte of t in the same place, all of them compared
// at once: below 128 by a subtraction that cannot borrow from the next
// byte, and by their top bits above.
func atMostBytes(v, t uint64) uint64 {
	const top = 0x8080808080808080
	low := (t | top) - (v &^ top) // top bit set: v's low 7 bits at most t's
	return ((^v & t) | (^(v ^ t) & low)) & top
}

// minBytes and maxBytes are the least and the greatest of each byte of a
// and the byte of b in the same place.
func minBytes(a, b uint64) uint64 {
	le := atMostBytes(a, b) >> 7 * 0xff // bytes of ones where a's is at most b's
	return b ^ (a^b)&le
}

func maxBytes(a, b uint64) uint64 {
	le := atMostBytes(a, b) >> 7 * 0xff
	return a ^ (a^b)&le
}

// atMost returns a bit for each of the eight bytes of v (the first byte,
// the lowest bit) that is at most the byte of t in the same place.
func atMost(v, t uint64) uint64 {
	return atMostBytes(v, t) * 0x0002040810204081 >> 56 // the eight top bits, gathered
}
