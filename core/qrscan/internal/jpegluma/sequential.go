package jpegluma

import "encoding/binary"

// Sequential (baseline and extended) scans, which phones and encoders
// write for nearly every photo and screenshot, are entropy-decoded here
// rather than by processSOS's general loop, at a fraction of its cost: the
// bits are held 64 at a time and refilled when fewer than 32 are left (a
// code and its value), eight bytes at once where none of them is FF;
// Huffman codes of up to fastBits bits are read with one look-up, an AC
// code with its value; the coefficients nobody will look at (the
// chroma's, and the luma's past the lowest frequencies a shrunk block is
// made of) are decoded to be skipped, not stored. The result is
// processSOS's, bit for bit (TestJPEGLumaAsDecoded).

// fastBits is the length of the Huffman codes read with one look-up: 9
// bits hold the codes of nearly every coefficient of a photo.
const fastBits = 9

// buildFast derives h.fast from the code lengths nCodes and h.vals. An
// oversubscribed table's codes past the last one that fits are left to
// the slow path, which refuses them.
func (h *huffman) buildFast(nCodes *[maxCodeLength]int32) {
	clear(h.fast[:])
	clear(h.fastAC[:])
	code, x := 0, int32(0)
	for l := 1; l <= fastBits; l++ {
		for range nCodes[l-1] {
			if code >= 1<<l {
				return
			}
			base := code << (fastBits - l)
			v := uint16(h.vals[x])<<8 | uint16(l)
			run, size := int32(h.vals[x]>>4), int(h.vals[x]&0x0f)
			for k := range 1 << (fastBits - l) {
				h.fast[base|k] = v
				// An AC coefficient whose value's bits fit too, or the
				// end of the block (a run past its last coefficient).
				switch {
				case size != 0 && l+size <= fastBits:
					x := int32(k>>(fastBits-l-size)) & (1<<size - 1)
					h.fastAC[base|k] = extend(x, uint8(size))<<16 | run<<8 | int32(l+size)
				case h.vals[x] == 0x00:
					h.fastAC[base|k] = blockSize<<8 | int32(l)
				}
			}
			code++
			x++
		}
		code <<= 1
	}
}

// seqBits is the bit reader of sequential scans: the next bits at the top
// of acc, n of them read from the file. Past the end of the scan's data (a
// marker, or the end of the file) acc fills with zeros and end is set; a
// code that reads them takes n below zero, which is an error, as reading
// past the data is in processSOS.
type seqBits struct {
	acc uint64
	n   int
	end bool
}

// refill tops the bits acc (n of them) up to at least 57, unless the
// data ends first. Its fast paths read d.bytes while two bytes or more are
// buffered, eight at once where none is FF.
func (d *decoder) refill(acc uint64, n int) (uint64, int) {
	for n <= 56 && !d.seq.end {
		i := d.bytes.i
		if i+2 > d.bytes.j {
			c, ok := d.refillSlow()
			if ok {
				acc |= uint64(c) << (56 - n)
				n += 8
			}
			continue
		}
		if i+8 <= d.bytes.j {
			// Eight bytes at once if none is FF (no stuffing, no marker):
			// as many as fit are counted; the bits of the rest, below
			// them, are the same bytes the next refill adds again.
			v := binary.BigEndian.Uint64(d.bytes.buf[i:])
			if x := ^v; (x-0x0101010101010101)&^x&0x8080808080808080 == 0 {
				acc |= v >> n
				k := (64 - n) >> 3
				d.bytes.i = i + k
				n += 8 * k
				continue
			}
		}
		c := d.bytes.buf[i]
		if c == 0xff {
			if d.bytes.buf[i+1] != 0x00 {
				d.seq.end = true // a marker: the scan's data ends here
				break
			}
			i++ // stuffed "FF 00"
		}
		d.bytes.i = i + 1
		acc |= uint64(c) << (56 - n)
		n += 8
	}
	return acc, n
}

// refillSlow reads one byte where the buffer may need filling; at a marker
// or the end of the file it gives back what it read and sets d.seq.end.
func (d *decoder) refillSlow() (byte, bool) {
	c, err := d.readByteStuffedByte()
	if err != nil {
		d.bytes.i -= d.bytes.nUnreadable
		d.bytes.nUnreadable = 0
		d.seq.end = true
		return 0, false
	}
	d.bytes.nUnreadable = 0
	return c, true
}

// symbolSlow decodes a code longer than fastBits bits from the top of
// acc, as decodeHuffman's slow path does, and returns the value and the
// code's length; a bad code sets d.seqErr and reads as 0.
func (d *decoder) symbolSlow(h *huffman, acc uint64) (v uint8, n int) {
	if h.nCodes == 0 {
		d.seqErr = FormatError("uninitialized Huffman table")
		return 0, 0
	}
	for i := range maxCodeLength {
		code := int32(acc >> (63 - i))
		if code <= h.maxCodes[i] && code >= h.minCodes[i] {
			return h.vals[h.valsIndices[i]+code-h.minCodes[i]], i + 1
		}
	}
	d.seqErr = FormatError("bad Huffman code")
	return 0, 0
}

// extend is the s-bit value x with its sign extended (EXTEND, section
// F.2.2.1).
func extend(x int32, s uint8) int32 {
	if x < 1<<(s-1) {
		x += -1<<s + 1
	}
	return x
}

// keepZig is, for DecodeLumaDCT at each scale, the last zig-zag index of
// the lowest frequencies reconstructShrunk reads; the luma's coefficients
// past it are decoded to be skipped.
var keepZig = func() (t [9]int) {
	for _, s := range []int{2, 4, 8} {
		for _, k := range lowFreqs[s] {
			t[s] = max(t[s], k[1])
		}
	}
	return t
}()

// processSequential decodes a sequential scan's MCUs (the scan's header
// is read and checked by processSOS), storing the luma's blocks.
func (d *decoder) processSequential(scan []scanComp, mxx, myy int) error {
	keep := blockSize - 1
	if d.dct {
		keep = keepZig[d.scale]
	}
	qt := &d.quant[d.comp[0].tq]
	d.seq, d.seqErr = seqBits{}, nil
	d.bytes.nUnreadable = 0
	var (
		b          block // the luma's, dequantized
		nz         int   // its AC coefficients stored
		dc         [maxComponents]int32
		eobRun     int
		blockCount int
	)
	mcu, expectedRST := 0, uint8(rst0Marker)
	for my := 0; my < myy; my++ {
		for mx := 0; mx < mxx; mx++ {
			for _, sc := range scan {
				ci := sc.compIndex
				hi, vi := d.comp[ci].h, d.comp[ci].v
				dcH, acH := &d.huff[dcTable][sc.td], &d.huff[acTable][sc.ta]
				for j := 0; j < hi*vi; j++ {
					var bx, by int
					if len(scan) != 1 {
						bx, by = hi*mx+j%hi, vi*my+j/hi
					} else {
						q := mxx * hi
						bx, by = blockCount%q, blockCount/q
						blockCount++
						if bx*8 >= d.width || by*8 >= d.height {
							continue
						}
					}
					// DC, then AC, as in processSOS (its eobRun included,
					// which a sequential file should not use). The bits
					// are in acc and n, the Huffman look-ups inlined.
					acc, n := d.seq.acc, d.seq.n
					if n < 32 {
						acc, n = d.refill(acc, n)
					}
					var s uint8
					if v := dcH.fast[acc>>(64-fastBits)]; v != 0 {
						s, acc, n = uint8(v>>8), acc<<(v&0xff), n-int(v&0xff)
					} else {
						var l int
						s, l = d.symbolSlow(dcH, acc)
						acc, n = acc<<l, n-l
					}
					if s > 16 {
						return UnsupportedError("excessive DC component")
					}
					if s != 0 {
						dc[ci] += extend(int32(acc>>(64-s)), s)
						acc, n = acc<<s, n-int(s)
					}
					luma := ci == 0
					if luma {
						b = block{}
						b[0] = dc[ci] * qt[0]
						nz = 0
					}
					if eobRun > 0 {
						eobRun--
					} else {
						last := -1 // the last zig-zag index stored
						if luma {
							last = keep
						}
						for zig := 1; zig < blockSize; zig++ {
							if n < 32 {
								acc, n = d.refill(acc, n)
							}
							if f := acH.fastAC[acc>>(64-fastBits)]; f != 0 {
								// Code and value in one look-up.
								l := uint8(f)
								acc, n = acc<<l, n-int(l)
								zig += int(f>>8) & 0xff
								if zig >= blockSize {
									break
								}
								if zig <= last {
									b[unzig[zig]] = (f >> 16) * qt[zig]
									nz++
								}
								continue
							}
							var rs uint8
							if v := acH.fast[acc>>(64-fastBits)]; v != 0 {
								rs, acc, n = uint8(v>>8), acc<<(v&0xff), n-int(v&0xff)
							} else {
								var l int
								rs, l = d.symbolSlow(acH, acc)
								acc, n = acc<<l, n-l
							}
							run, size := int(rs>>4), rs&0x0f
							if size == 0 {
								if run != 0x0f {
									eobRun = 1<<run | int(acc>>(64-run))
									acc, n = acc<<run, n-run
									eobRun--
									break
								}
								zig += 0x0f
								continue
							}
							zig += run
							if zig >= blockSize {
								break
							}
							if zig <= last {
								b[unzig[zig]] = extend(int32(acc>>(64-size)), size) * qt[zig]
								nz++
							}
							acc, n = acc<<size, n-int(size)
						}
					}
					d.seq.acc, d.seq.n = acc, n
					if d.seqErr != nil {
						return d.seqErr
					}
					if d.seq.n < 0 {
						return errShortHuffmanData
					}
					if luma {
						d.storeBlock(&b, nz == 0, bx, by)
					}
				}
			}
			mcu++
			if d.ri > 0 && mcu%d.ri == 0 && mcu < mxx*myy {
				// The restart marker follows the data, which the reader
				// stopped at; findRST resynchronizes on damaged files.
				d.seq = seqBits{}
				if err := d.readFull(d.tmp[:2]); err != nil {
					return err
				} else if d.tmp[0] != 0xff || d.tmp[1] != expectedRST {
					if err := d.findRST(expectedRST); err != nil {
						return err
					}
				}
				expectedRST++
				if expectedRST == rst7Marker+1 {
					expectedRST = rst0Marker
				}
				dc = [maxComponents]int32{}
				eobRun = 0
			}
		}
	}
	return nil
}
