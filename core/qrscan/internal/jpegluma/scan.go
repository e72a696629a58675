// Copyright 2012 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package jpegluma

import "math"

// makeImg allocates the shrunk luma of whole MCUs.
func (d *decoder) makeImg(mxx, myy int) {
	h0, v0 := d.comp[0].h, d.comp[0].v
	d.lumStride = 8 * h0 * mxx / d.scale
	n := d.lumStride * (8 * v0 * myy / d.scale)
	if cap(d.buf) >= n {
		d.lum = d.buf[:n]
		clear(d.lum) // blocks a damaged or progressive file never writes stay black, as in new memory
		return
	}
	d.lum = make([]byte, n)
}

// block16 is a block of quantized coefficients, which fit 16 bits in any
// file this package decodes well (8-bit samples); a damaged file wraps.
type block16 [blockSize]int16

// scanComp is a component of a scan and its Huffman tables.
type scanComp struct {
	compIndex uint8
	td        uint8 // DC table selector.
	ta        uint8 // AC table selector.
}

// Specified in section B.2.3.
func (d *decoder) processSOS(n int) error {
	if d.nComp == 0 {
		return FormatError("missing SOF marker")
	}
	if n < 6 || 4+2*d.nComp < n || n%2 != 0 {
		return FormatError("SOS has wrong length")
	}
	if err := d.readFull(d.tmp[:n]); err != nil {
		return err
	}
	nComp := int(d.tmp[0])
	if n != 4+2*nComp {
		return FormatError("SOS length inconsistent with number of components")
	}
	var scan [maxComponents]scanComp
	totalHV := 0
	for i := 0; i < nComp; i++ {
		cs := d.tmp[1+2*i] // Component selector.
		compIndex := -1
		for j, comp := range d.comp[:d.nComp] {
			if cs == comp.c {
				compIndex = j
			}
		}
		if compIndex < 0 {
			return FormatError("unknown component selector")
		}
		scan[i].compIndex = uint8(compIndex)
		// Section B.2.3 states that "the value of Cs_j shall be different from
		// the values of Cs_1 through Cs_(j-1)". Since we have previously
		// verified that a frame's component identifiers (C_i values in section
		// B.2.2) are unique, it suffices to check that the implicit indexes
		// into d.comp are unique.
		for j := 0; j < i; j++ {
			if scan[i].compIndex == scan[j].compIndex {
				return FormatError("repeated component selector")
			}
		}
		totalHV += d.comp[compIndex].h * d.comp[compIndex].v

		// The baseline t <= 1 restriction is specified in table B.3.
		scan[i].td = d.tmp[2+2*i] >> 4
		if t := scan[i].td; t > maxTh || (d.baseline && t > 1) {
			return FormatError("bad Td value")
		}
		scan[i].ta = d.tmp[2+2*i] & 0x0f
		if t := scan[i].ta; t > maxTh || (d.baseline && t > 1) {
			return FormatError("bad Ta value")
		}
	}
	// Section B.2.3 states that if there is more than one component then the
	// total H*V values in a scan must be <= 10.
	if d.nComp > 1 && totalHV > 10 {
		return FormatError("total sampling factors too large")
	}

	// zigStart and zigEnd are the spectral selection bounds.
	// ah and al are the successive approximation high and low values.
	// The spec calls these values Ss, Se, Ah and Al.
	//
	// For progressive JPEGs, these are the two more-or-less independent
	// aspects of progression. Spectral selection progression is when not
	// all of a block's 64 DCT coefficients are transmitted in one pass.
	// For example, three passes could transmit coefficient 0 (the DC
	// component), coefficients 1-5, and coefficients 6-63, in zig-zag
	// order. Successive approximation is when not all of the bits of a
	// band of coefficients are transmitted in one pass. For example,
	// three passes could transmit the 6 most significant bits, followed
	// by the second-least significant bit, followed by the least
	// significant bit.
	//
	// For sequential JPEGs, these parameters are hard-coded to 0/63/0/0, as
	// per table B.3.
	zigStart, zigEnd, ah, al := int32(0), int32(blockSize-1), uint32(0), uint32(0)
	if d.progressive {
		zigStart = int32(d.tmp[1+2*nComp])
		zigEnd = int32(d.tmp[2+2*nComp])
		ah = uint32(d.tmp[3+2*nComp] >> 4)
		al = uint32(d.tmp[3+2*nComp] & 0x0f)
		if (zigStart == 0 && zigEnd != 0) || zigStart > zigEnd || blockSize <= zigEnd {
			return FormatError("bad spectral selection bounds")
		}
		if zigStart != 0 && nComp != 1 {
			return FormatError("progressive AC coefficients for more than one component")
		}
		if ah != 0 && ah != al+1 {
			return FormatError("bad successive approximation values")
		}
	}

	// mxx and myy are the number of MCUs (Minimum Coded Units) in the image.
	h0, v0 := d.comp[0].h, d.comp[0].v // The h and v values from the Y components.
	mxx := (d.width + 8*h0 - 1) / (8 * h0)
	myy := (d.height + 8*v0 - 1) / (8 * v0)
	if d.lum == nil {
		d.makeImg(mxx, myy)
	}
	hasLuma := false
	for i := 0; i < nComp; i++ {
		hasLuma = hasLuma || scan[i].compIndex == 0
	}
	if !hasLuma {
		// A scan of chroma alone: its data is left unread, and the marker
		// loop skips it as it skips extraneous data ("FF 00" and restart
		// markers included).
		return nil
	}
	if !d.progressive {
		return d.processSequential(scan[:nComp], mxx, myy)
	}
	if d.progCoeffs == nil {
		d.progCoeffs = make([]block16, mxx*myy*h0*v0)
	}
	d.eobRun = 0

	d.bits = bits{}
	mcu, expectedRST := 0, uint8(rst0Marker)
	var (
		// b is the decoded coefficients, in natural (not zig-zag) order.
		b  block
		dc [maxComponents]int32
		// bx and by are the location of the current block, in units of 8x8
		// blocks: the third block in the first row has (bx, by) = (2, 0).
		bx, by     int
		blockCount int
	)
	for my := 0; my < myy; my++ {
		for mx := 0; mx < mxx; mx++ {
			for i := 0; i < nComp; i++ {
				compIndex := scan[i].compIndex
				hi := d.comp[compIndex].h
				vi := d.comp[compIndex].v
				for j := 0; j < hi*vi; j++ {
					// The blocks are traversed one MCU at a time. For 4:2:0 chroma
					// subsampling, there are four Y 8x8 blocks in every 16x16 MCU.
					//
					// For a sequential 32x16 pixel image, the Y blocks visiting order is:
					//	0 1 4 5
					//	2 3 6 7
					//
					// For progressive images, the interleaved scans (those with nComp > 1)
					// are traversed as above, but non-interleaved scans are traversed left
					// to right, top to bottom:
					//	0 1 2 3
					//	4 5 6 7
					// Only DC scans (zigStart == 0) can be interleaved. AC scans must have
					// only one component.
					//
					// To further complicate matters, for non-interleaved scans, there is no
					// data for any blocks that are inside the image at the MCU level but
					// outside the image at the pixel level. For example, a 24x16 pixel 4:2:0
					// progressive image consists of two 16x16 MCUs. The interleaved scans
					// will process 8 Y blocks:
					//	0 1 4 5
					//	2 3 6 7
					// The non-interleaved scans will process only 6 Y blocks:
					//	0 1 2
					//	3 4 5
					if nComp != 1 {
						bx = hi*mx + j%hi
						by = vi*my + j/hi
					} else {
						q := mxx * hi
						bx = blockCount % q
						by = blockCount / q
						blockCount++
						if bx*8 >= d.width || by*8 >= d.height {
							continue
						}
					}

					// Load the previous partially decoded coefficients, if applicable.
					if d.progressive && compIndex == 0 {
						for k, v := range &d.progCoeffs[by*mxx*hi+bx] {
							b[k] = int32(v)
						}
					} else {
						b = block{}
					}

					if ah != 0 {
						if err := d.refine(&b, &d.huff[acTable][scan[i].ta], zigStart, zigEnd, 1<<al); err != nil {
							return err
						}
					} else {
						zig := zigStart
						if zig == 0 {
							zig++
							// Decode the DC coefficient, as specified in section F.2.2.1.
							value, err := d.decodeHuffman(&d.huff[dcTable][scan[i].td])
							if err != nil {
								return err
							}
							if value > 16 {
								return UnsupportedError("excessive DC component")
							}
							dcDelta, err := d.receiveExtend(value)
							if err != nil {
								return err
							}
							dc[compIndex] += dcDelta
							b[0] = dc[compIndex] << al
						}

						if zig <= zigEnd && d.eobRun > 0 {
							d.eobRun--
						} else {
							// Decode the AC coefficients, as specified in section F.2.2.2.
							huff := &d.huff[acTable][scan[i].ta]
							for ; zig <= zigEnd; zig++ {
								value, err := d.decodeHuffman(huff)
								if err != nil {
									return err
								}
								val0 := value >> 4
								val1 := value & 0x0f
								if val1 != 0 {
									zig += int32(val0)
									if zig > zigEnd {
										break
									}
									ac, err := d.receiveExtend(val1)
									if err != nil {
										return err
									}
									b[unzig[zig]] = ac << al
								} else {
									if val0 != 0x0f {
										d.eobRun = uint16(1 << val0)
										if val0 != 0 {
											bits, err := d.decodeBits(int32(val0))
											if err != nil {
												return err
											}
											d.eobRun |= uint16(bits)
										}
										d.eobRun--
										break
									}
									zig += 0x0f
								}
							}
						}
					}

					if d.progressive {
						// Save the coefficients of the luma; the chroma's go.
						if compIndex == 0 {
							p := &d.progCoeffs[by*mxx*hi+bx]
							for k, v := range &b {
								p[k] = int16(v)
							}
						}
						// At this point, we could call reconstructBlock to dequantize and perform the
						// inverse DCT, to save early stages of a progressive image to the *image.YCbCr
						// buffers (the whole point of progressive encoding), but in Go, the jpeg.Decode
						// function does not return until the entire image is decoded, so we "continue"
						// here to avoid wasted computation. Instead, reconstructBlock is called on each
						// accumulated block by the reconstructProgressiveImage method after all of the
						// SOS markers are processed.
						continue
					}
					if err := d.reconstructBlock(&b, bx, by, int(compIndex)); err != nil {
						return err
					}
				} // for j
			} // for i
			mcu++
			if d.ri > 0 && mcu%d.ri == 0 && mcu < mxx*myy {
				// For well-formed input, the RST[0-7] restart marker follows
				// immediately. For corrupt input, call findRST to try to
				// resynchronize.
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
				// Reset the Huffman decoder.
				d.bits = bits{}
				// Reset the DC components, as per section F.2.1.3.1.
				dc = [maxComponents]int32{}
				// Reset the progressive decoder state, as per section G.1.2.2.
				d.eobRun = 0
			}
		} // for mx
	} // for my

	return nil
}

// refine decodes a successive approximation refinement block, as specified in
// section G.1.2.
func (d *decoder) refine(b *block, h *huffman, zigStart, zigEnd, delta int32) error {
	// Refining a DC component is trivial.
	if zigStart == 0 {
		if zigEnd != 0 {
			panic("unreachable")
		}
		bit, err := d.decodeBit()
		if err != nil {
			return err
		}
		if bit {
			b[0] |= delta
		}
		return nil
	}

	// Refining AC components is more complicated; see sections G.1.2.2 and G.1.2.3.
	zig := zigStart
	if d.eobRun == 0 {
	loop:
		for ; zig <= zigEnd; zig++ {
			z := int32(0)
			value, err := d.decodeHuffman(h)
			if err != nil {
				return err
			}
			val0 := value >> 4
			val1 := value & 0x0f

			switch val1 {
			case 0:
				if val0 != 0x0f {
					d.eobRun = uint16(1 << val0)
					if val0 != 0 {
						bits, err := d.decodeBits(int32(val0))
						if err != nil {
							return err
						}
						d.eobRun |= uint16(bits)
					}
					break loop
				}
			case 1:
				z = delta
				bit, err := d.decodeBit()
				if err != nil {
					return err
				}
				if !bit {
					z = -z
				}
			default:
				return FormatError("unexpected Huffman code")
			}

			zig, err = d.refineNonZeroes(b, zig, zigEnd, int32(val0), delta)
			if err != nil {
				return err
			}
			if zig > zigEnd {
				return FormatError("too many coefficients")
			}
			if z != 0 {
				b[unzig[zig]] = z
			}
		}
	}
	if d.eobRun > 0 {
		d.eobRun--
		if _, err := d.refineNonZeroes(b, zig, zigEnd, -1, delta); err != nil {
			return err
		}
	}
	return nil
}

// refineNonZeroes refines non-zero entries of b in zig-zag order. If nz >= 0,
// the first nz zero entries are skipped over.
func (d *decoder) refineNonZeroes(b *block, zig, zigEnd, nz, delta int32) (int32, error) {
	for ; zig <= zigEnd; zig++ {
		u := unzig[zig]
		if b[u] == 0 {
			if nz == 0 {
				break
			}
			nz--
			continue
		}
		bit, err := d.decodeBit()
		if err != nil {
			return 0, err
		}
		if !bit {
			continue
		}
		if b[u] >= 0 {
			b[u] += delta
		} else {
			b[u] -= delta
		}
	}
	return zig, nil
}

func (d *decoder) reconstructProgressiveImage() error {
	// The h0, mxx, by and bx variables have the same meaning as in the
	// processSOS method.
	if d.progCoeffs == nil {
		return nil
	}
	h0 := d.comp[0].h
	mxx := (d.width + 8*h0 - 1) / (8 * h0)
	stride := mxx * h0
	var b block
	for by := 0; by*8 < d.height; by++ {
		for bx := 0; bx*8 < d.width; bx++ {
			for k, v := range &d.progCoeffs[by*stride+bx] {
				b[k] = int32(v)
			}
			if err := d.reconstructBlock(&b, bx, by, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// reconstructBlock dequantizes b and stores it (storeBlock) if it is the
// luma's; other components' blocks are dropped.
func (d *decoder) reconstructBlock(b *block, bx, by, compIndex int) error {
	if compIndex != 0 {
		return nil
	}
	qt := &d.quant[d.comp[compIndex].tq]
	for zig := 0; zig < blockSize; zig++ {
		b[unzig[zig]] *= qt[zig]
	}
	d.storeBlock(b, false, bx, by)
	return nil
}

// flatBlock is the last block of DC alone that storeBlock transformed:
// its DC and pixels. Screenshots are mostly flat blocks, many of one level.
type flatBlock struct {
	ok bool
	dc int32
	px [blockSize]uint8
}

// storeBlock performs the inverse DCT of the luma block b (dequantized,
// in natural order) and stores it, shrunk by d.scale, to the luma; or,
// for DecodeLumaDCT, shrinks it in the frequency domain. dcOnly says its
// AC coefficients are all zero: a block with the DC of the last such one
// is stored from its pixels without a transform.
func (d *decoder) storeBlock(b *block, dcOnly bool, bx, by int) {
	if d.dct {
		d.reconstructShrunk(b, bx, by)
		return
	}
	px := &d.flat.px
	if !dcOnly || !d.flat.ok || d.flat.dc != b[0] {
		if !dcOnly {
			px = &d.px
		}
		dc := b[0]
		idct(b)
		// Level shift by +128, clip to [0, 255].
		for i, c := range b {
			px[i] = uint8(min(255, max(0, c+128)))
		}
		if dcOnly {
			d.flat.ok, d.flat.dc = true, dc
		}
	}
	s := d.scale
	n := 8 / s
	dst := d.lum[by*n*d.lumStride+bx*n:]
	if s == 1 {
		for y := 0; y < 8; y++ {
			copy(dst[y*d.lumStride:y*d.lumStride+8], px[y*8:y*8+8])
		}
		return
	}
	half := uint32(s * s / 2)
	for y := 0; y < n; y++ {
		for x := 0; x < n; x++ {
			sum := uint32(0)
			for yy := y * s; yy < y*s+s; yy++ {
				for _, v := range px[yy*8+x*s : yy*8+x*s+s] {
					sum += uint32(v)
				}
			}
			dst[y*d.lumStride+x] = uint8((sum + half) / uint32(s*s))
		}
	}
}

// shrinkBits is the fixed-point precision of shrinkBasis.
const shrinkBits = 14

// shrinkBasis holds, for each scale s of 2, 4 and 8, the n×n matrix (n =
// 8/s, row m, column u) of the 1-D inverse DCT's basis function of
// frequency u averaged over the s pixels of output pixel m, times
// 1<<shrinkBits. An 8×8 block of frequencies F(v, u) whose higher ones are
// zero is, box-averaged, M·F·Mᵀ over the n×n lowest: what
// reconstructShrunk computes.
var shrinkBasis = func() (t [9][]int64) {
	for _, s := range []int{2, 4, 8} {
		n := 8 / s
		m := make([]int64, n*n)
		for o := range n {
			if o > (n-1)/2 { // the mirror image of output pixel n-1-o: M(n-1-o, u) = (-1)^u M(o, u)
				for u := range n {
					m[o*n+u] = m[(n-1-o)*n+u] * int64(1-2*(u%2))
				}
				continue
			}
			for u := range n {
				c := 0.5
				if u == 0 {
					c = 0.5 / math.Sqrt2
				}
				sum := 0.0
				for x := o * s; x < o*s+s; x++ {
					sum += c * math.Cos(float64((2*x+1)*u)*math.Pi/16)
				}
				m[o*n+u] = int64(math.Round(sum / float64(s) * (1 << shrinkBits)))
			}
		}
		t[s] = m
	}
	return t
}()

// lowFreqs lists, for each scale, the natural-order and zig-zag indexes of
// the n×n lowest frequencies, row by row.
var lowFreqs = func() (t [9][][2]int) {
	zigOf := [blockSize]int{}
	for zig, nat := range unzig {
		zigOf[nat] = zig
	}
	for _, s := range []int{2, 4, 8} {
		n := 8 / s
		for v := range n {
			for u := range n {
				t[s] = append(t[s], [2]int{v*8 + u, zigOf[v*8+u]})
			}
		}
	}
	return t
}()

// reconstructShrunk stores the luma block b (dequantized, in natural
// order), shrunk by d.scale in the frequency domain from its lowest
// frequencies alone: DecodeLumaDCT's path.
func (d *decoder) reconstructShrunk(b *block, bx, by int) {
	n := 8 / d.scale
	dst := d.lum[by*n*d.lumStride+bx*n:]
	if n == 4 {
		shrink2(b, dst, d.lumStride)
		return
	}
	m := shrinkBasis[d.scale]
	var f, t [16]int64
	for i, k := range lowFreqs[d.scale] {
		f[i] = int64(b[k[0]])
	}
	for v := range n { // rows: t(v, x) = Σu F(v, u) M(x, u)
		for x := range n {
			acc := int64(0)
			for u := range n {
				acc += f[v*n+u] * m[x*n+u]
			}
			t[v*n+x] = acc
		}
	}
	for y := range n { // columns: out(y, x) = Σv M(y, v) t(v, x), level-shifted
		row := dst[y*d.lumStride : y*d.lumStride+n]
		for x := range row {
			acc := int64(128<<(2*shrinkBits) + 1<<(2*shrinkBits-1))
			for v := range n {
				acc += m[y*n+v] * t[v*n+x]
			}
			row[x] = pixel(acc)
		}
	}
}

// shrink2 is reconstructShrunk at scale 2, unrolled (the first pass of
// every JPEG screenshot runs it on each block): rows of frequencies that
// are all zero, most of them, are skipped, a block whose 4×4 lowest
// frequencies are its mean alone is filled with it, and the basis's
// symmetry (output pixel 3-x weighs the even frequencies as pixel x does,
// the odd ones negated) halves the multiplications: pixel x and 3-x are
// the sum and the difference of the even and odd parts.
func shrink2(b *block, dst []byte, stride int) {
	m := (*[16]int64)(shrinkBasis[2])
	var t [16]int64
	flat := true // no frequency but the mean
	for v := range 4 {
		r := (*[4]int32)(b[8*v:])
		if r[0]|r[1]|r[2]|r[3] == 0 {
			continue
		}
		flat = flat && v == 0 && r[1]|r[2]|r[3] == 0
		f0, f1, f2, f3 := int64(r[0]), int64(r[1]), int64(r[2]), int64(r[3])
		e0, o0 := f0*m[0]+f2*m[2], f1*m[1]+f3*m[3]
		e1, o1 := f0*m[4]+f2*m[6], f1*m[5]+f3*m[7]
		tv := (*[4]int64)(t[4*v:])
		tv[0], tv[3], tv[1], tv[2] = e0+o0, e0-o0, e1+o1, e1-o1
	}
	const half = 128<<(2*shrinkBits) + 1<<(2*shrinkBits-1)
	if flat {
		v := pixel(t[0]*m[0] + half)
		for y := range 4 {
			row := (*[4]uint8)(dst[y*stride:])
			row[0], row[1], row[2], row[3] = v, v, v, v
		}
		return
	}
	r0, r1 := (*[4]uint8)(dst), (*[4]uint8)(dst[stride:])
	r2, r3 := (*[4]uint8)(dst[2*stride:]), (*[4]uint8)(dst[3*stride:])
	for x := range 4 {
		t0, t1, t2, t3 := t[x], t[4+x], t[8+x], t[12+x]
		e0, o0 := half+m[0]*t0+m[2]*t2, m[1]*t1+m[3]*t3
		e1, o1 := half+m[4]*t0+m[6]*t2, m[5]*t1+m[7]*t3
		r0[x], r3[x], r1[x], r2[x] = pixel(e0+o0), pixel(e0-o0), pixel(e1+o1), pixel(e1-o1)
	}
}

// pixel is a level of fixed point with 2×shrinkBits fraction bits,
// floored and clamped to a byte.
func pixel(v int64) uint8 {
	return uint8(min(255, max(0, v>>(2*shrinkBits))))
}

// findRST advances past the next RST restart marker that matches expectedRST.
// Other than I/O errors, it is also an error if we encounter an {0xFF, M}
// two-byte marker sequence where M is not 0x00, 0xFF or the expectedRST.
//
// This is similar to libjpeg's jdmarker.c's next_marker function.
// https://github.com/libjpeg-turbo/libjpeg-turbo/blob/2dfe6c0fe9e18671105e94f7cbf044d4a1d157e6/jdmarker.c#L892-L935
//
// Precondition: d.tmp[:2] holds the next two bytes of JPEG-encoded input
// (input in the d.readFull sense).
func (d *decoder) findRST(expectedRST uint8) error {
	for {
		// i is the index such that, at the bottom of the loop, we read 2-i
		// bytes into d.tmp[i:2], maintaining the invariant that d.tmp[:2]
		// holds the next two bytes of JPEG-encoded input. It is either 0 or 1,
		// so that each iteration advances by 1 or 2 bytes (or returns).
		i := 0

		if d.tmp[0] == 0xff {
			if d.tmp[1] == expectedRST {
				return nil
			} else if d.tmp[1] == 0xff {
				i = 1
			} else if d.tmp[1] != 0x00 {
				// libjpeg's jdmarker.c's jpeg_resync_to_restart does something
				// fancy here, treating RST markers within two (modulo 8) of
				// expectedRST differently from RST markers that are 'more
				// distant'. Until we see evidence that recovering from such
				// cases is frequent enough to be worth the complexity, we take
				// a simpler approach for now. Any marker that's not 0x00, 0xff
				// or expectedRST is a fatal FormatError.
				return FormatError("bad RST marker")
			}

		} else if d.tmp[1] == 0xff {
			d.tmp[0] = 0xff
			i = 1
		}

		if err := d.readFull(d.tmp[i:2]); err != nil {
			return err
		}
	}
}
