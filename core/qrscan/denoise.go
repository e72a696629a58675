package qrscan

// median3 writes the 3×3 median of src into dst: each pixel becomes the
// middle value of itself and its eight neighbours (the image's edge
// repeated beyond it). It removes impulse noise, pixels turned black or
// white at random, which breaks the runs of a finder pattern, while edges
// wider than a pixel stay where they were.
//
// Each column of three is sorted once, into lo, mid and hi; the median of
// the nine is then the median of the largest of three neighbouring lo,
// the median of three mid and the smallest of three hi.
func median3(src plane, dst []byte) plane {
	w, h := src.w, src.h
	dst = grow(dst, w*h)
	lo, mid, hi := make([]byte, w+2), make([]byte, w+2), make([]byte, w+2)
	for y := range h {
		a := src.pix[max(0, y-1)*w : max(0, y-1)*w+w]
		b := src.pix[y*w : y*w+w]
		c := src.pix[min(h-1, y+1)*w : min(h-1, y+1)*w+w]
		// Each column at x+1, the edge ones repeated at 0 and w+1. The
		// slices of equal length let the loops run without bounds checks.
		lo1, mid1, hi1 := lo[1:w+1], mid[1:w+1], hi[1:w+1]
		b, c = b[:len(a)], c[:len(a)]
		lo1, mid1, hi1 = lo1[:len(a)], mid1[:len(a)], hi1[:len(a)]
		for x, va := range a {
			lo1[x], mid1[x], hi1[x] = sort3(va, b[x], c[x])
		}
		lo[0], mid[0], hi[0] = lo[1], mid[1], hi[1]
		lo[w+1], mid[w+1], hi[w+1] = lo[w], mid[w], hi[w]
		o := dst[y*w : y*w+w]
		l0, l1, l2 := lo[:w], lo[1:w+1], lo[2:w+2]
		m0, m1, m2 := mid[:w], mid[1:w+1], mid[2:w+2]
		h0, h1, h2 := hi[:w], hi[1:w+1], hi[2:w+2]
		for x := range o {
			l := max(l0[x], l1[x], l2[x])
			_, m, _ := sort3(m0[x], m1[x], m2[x])
			u := min(h0[x], h1[x], h2[x])
			_, o[x], _ = sort3(l, m, u)
		}
	}
	return plane{pix: dst, w: w, h: h}
}

// sharpen writes an unsharp mask of src into dst: each pixel pushed away
// from the mean of the (2r+1)² square around it by amount times their
// difference. It steepens the soft edges of a blurred code so that the
// finder patterns' runs show again; tmp is scratch of the plane's size.
func sharpen(src plane, r, amount int, dst, tmp []byte) (plane, []byte) {
	w, h := src.w, src.h
	dst, tmp = grow(dst, w*h), grow(tmp, w*h)
	boxMean(src.pix, tmp, dst, w, h, r) // dst as scratch, then the result
	for i, v := range src.pix[:w*h] {
		d := int(v) + amount*(int(v)-int(tmp[i]))
		dst[i] = uint8(max(0, min(255, d)))
	}
	return plane{pix: dst, w: w, h: h}, tmp
}

// boxMean writes the mean of the (2r+1)² square around each pixel of src
// (fewer at the edges) into dst: rows into rows, scratch of the plane's
// size, then columns of rows into dst, by running sums: one per column,
// moved down a row at a time.
func boxMean(src, dst, rows []byte, w, h, r int) {
	for y := range h {
		boxLine(src[y*w:y*w+w], rows[y*w:y*w+w], r)
	}
	sum := make([]int32, w)
	row := func(y int) []byte { return rows[y*w : y*w+w] }
	cnt := int32(0)
	for y := range min(r, h) {
		for x, v := range row(y) {
			sum[x] += int32(v)
		}
		cnt++
	}
	for y := range h {
		o := dst[y*w : y*w+w]
		add, drop := y+r < h, y-r-1 >= 0
		if add && drop { // the middle of the plane, most of it
			a, d := row(y + r)[:len(o)], row(y - r - 1)[:len(o)]
			half := cnt / 2
			for x := range o {
				s := sum[x] + int32(a[x]) - int32(d[x])
				sum[x] = s
				o[x] = uint8((s + half) / cnt)
			}
			continue
		}
		if add {
			for x, v := range row(y + r) {
				sum[x] += int32(v)
			}
			cnt++
		}
		if drop {
			for x, v := range row(y - r - 1) {
				sum[x] -= int32(v)
			}
			cnt--
		}
		for x := range o {
			o[x] = uint8((sum[x] + cnt/2) / cnt)
		}
	}
}

// boxLine writes the mean of the 2r+1 values of in around each one (fewer
// at the ends) into out, by a running sum: the ends apart, so that the
// middle, most of a line, adds one value and drops one a step.
func boxLine(in, out []byte, r int) {
	n := len(in)
	out = out[:n]
	sum, cnt := 0, 0
	for x := 0; x < min(r, n); x++ {
		sum += int(in[x])
		cnt++
	}
	x := 0
	for ; x < n && x <= r; x++ { // nothing to drop yet
		if j := x + r; j < n {
			sum += int(in[j])
			cnt++
		}
		out[x] = uint8((sum + cnt/2) / cnt)
	}
	if x+r < n {
		add, drop := in[x+r:], in[x-r-1:]
		mid := out[x : n-r]
		for i := range mid {
			sum += int(add[i]) - int(drop[i])
			mid[i] = uint8((sum + cnt/2) / cnt)
		}
		x = n - r
	}
	for ; x < n; x++ { // nothing to add
		sum -= int(in[x-r-1])
		cnt--
		out[x] = uint8((sum + cnt/2) / cnt)
	}
}
