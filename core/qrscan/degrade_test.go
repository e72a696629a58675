package qrscan

// This file degrades corpus scenes the way customers' pictures are
// degraded: sensor noise, blur of a given σ, and photos of a screen taken
// at an angle, with the screen's pixel grid beating against the camera's
// (moiré), glare, uneven light and a colour cast. Every function draws its
// randomness from the scene's seeded source.

import (
	"image"
	"math"
	"math/rand/v2"
)

// gaussNoise adds normal noise of deviation sigma to every channel of img
// (a phone camera's sensor noise in dim light; JPEG and WebP then smear
// it).
func gaussNoise(r *rand.Rand, img *image.RGBA, sigma float64) {
	for i := 0; i < len(img.Pix); i += 4 {
		for ch := range 3 {
			img.Pix[i+ch] = clamp(float64(img.Pix[i+ch]) + r.NormFloat64()*sigma)
		}
	}
}

// gaussBlur blurs img with a Gaussian of deviation sigma pixels (kernel to
// 3σ, rows then columns; the edge repeated beyond it): a lens out of focus.
func gaussBlur(img *image.RGBA, sigma float64) {
	rad := int(math.Ceil(3 * sigma))
	k := make([]float64, 2*rad+1)
	sum := 0.0
	for i := range k {
		d := float64(i - rad)
		k[i] = math.Exp(-d * d / (2 * sigma * sigma))
		sum += k[i]
	}
	for i := range k {
		k[i] /= sum
	}
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	tmp := make([]float64, 3*w*h)
	for y := range h {
		for x := range w {
			var acc [3]float64
			for i, kv := range k {
				o := y*img.Stride + 4*clampInt(x+i-rad, 0, w-1)
				acc[0], acc[1], acc[2] = acc[0]+kv*float64(img.Pix[o]), acc[1]+kv*float64(img.Pix[o+1]), acc[2]+kv*float64(img.Pix[o+2])
			}
			copy(tmp[3*(y*w+x):], acc[:])
		}
	}
	for y := range h {
		for x := range w {
			var acc [3]float64
			for i, kv := range k {
				o := 3 * (clampInt(y+i-rad, 0, h-1)*w + x)
				acc[0], acc[1], acc[2] = acc[0]+kv*tmp[o], acc[1]+kv*tmp[o+1], acc[2]+kv*tmp[o+2]
			}
			o := y*img.Stride + 4*x
			img.Pix[o], img.Pix[o+1], img.Pix[o+2] = clamp(acc[0]), clamp(acc[1]), clamp(acc[2])
		}
	}
}

// screenShot is how one photo of a screen is taken.
type screenShot struct {
	w, h   int     // the photo's size
	fill   float64 // the screen's height as a share of the photo's
	tilt   float64 // perspective: how much nearer one side of the screen is (0 none, 0.3 strong)
	turn   float64 // degrees
	moire  float64 // depth of the screen's pixel grid as the camera samples it (0 to 0.5)
	glares int     // bright patches of reflected light
	glare  float64 // their peak, in levels
	light  float64 // the darkest corner's share of the light (1 even)
	tint   [3]float64
	blur   float64 // lens blur σ, in photo pixels
	noise  float64 // sensor noise σ, in levels
}

// tints are the colour casts of the screen condition: none, tungsten,
// fluorescent green, cold daylight, a warm night-mode screen.
var tints = [][3]float64{{1, 1, 1}, {1, 0.86, 0.62}, {0.85, 1, 0.8}, {0.8, 0.9, 1.1}, {1.05, 0.82, 0.55}}

// photographScreen takes a photo of screen as shot describes: the screen
// a quadrilateral in the photo (perspective from shot.tilt in a random
// direction, turned by shot.turn), its pixel grid sampled point-wise by
// the camera so that it beats into moiré fringes, light falling off
// towards one corner, glare patches, a colour cast, lens blur and noise.
func photographScreen(r *rand.Rand, screen *image.RGBA, shot screenShot) *image.RGBA {
	W, H := shot.w, shot.h
	out := image.NewRGBA(image.Rect(0, 0, W, H))
	sw, sh := float64(screen.Bounds().Dx()), float64(screen.Bounds().Dy())
	// The screen's corners in the photo: a rectangle of the right aspect,
	// turned, then one side pulled in (the far side of a tilted phone).
	k := shot.fill * float64(H) / sh
	a := shot.turn * math.Pi / 180
	c, s := math.Cos(a), math.Sin(a)
	cx, cy := float64(W)/2+(r.Float64()-0.5)*0.05*float64(W), float64(H)/2+(r.Float64()-0.5)*0.05*float64(H)
	src := [4][2]float64{{0, 0}, {sw, 0}, {sw, sh}, {0, sh}}
	var dst [4][2]float64
	side := r.IntN(4) // the far side: top, right, bottom, left
	for i, p := range src {
		dx, dy := (p[0]-sw/2)*k, (p[1]-sh/2)*k
		// Corners of the far side move towards its middle.
		far := (side == 0 && i < 2) || (side == 1 && (i == 1 || i == 2)) || (side == 2 && i >= 2) || (side == 3 && (i == 0 || i == 3))
		if far {
			if side%2 == 0 {
				dx *= 1 - shot.tilt
			} else {
				dy *= 1 - shot.tilt
			}
		}
		dst[i] = [2]float64{cx + c*dx - s*dy, cy + s*dx + c*dy}
	}
	toScreen := homography(dst, src)
	desk := deskColor(r)
	// Light: a linear fall towards a random corner, times a vignette.
	ga := r.Float64() * 2 * math.Pi
	gx, gy := math.Cos(ga), math.Sin(ga)
	type patch struct{ x, y, rx, ry, peak float64 }
	var glares []patch
	for range shot.glares {
		glares = append(glares, patch{r.Float64() * float64(W), r.Float64() * float64(H),
			(0.05 + 0.12*r.Float64()) * float64(W), (0.03 + 0.08*r.Float64()) * float64(H), shot.glare * (0.6 + 0.4*r.Float64())})
	}
	black := 18 + 20*r.Float64()
	gain := 0.75 + 0.1*r.Float64()
	var p [3]float64
	for y := range H {
		for x := range W {
			fx, fy := float64(x)+0.5, float64(y)+0.5
			sx, sy := apply(toScreen, fx, fy)
			var v [3]float64
			switch {
			case bilinear(screen, sx-0.5, sy-0.5, &p):
				// The camera samples the screen's grid: each screen pixel
				// is three stripes (R, G, B) with a dark gap around them.
				u, w := sx-math.Floor(sx), sy-math.Floor(sy)
				gap := 0.0
				if u > 0.85 || w > 0.85 {
					gap = 1
				}
				stripe := min(2, int(u*3))
				for ch := range 3 {
					m := 1 - shot.moire*gap
					if ch != stripe {
						m *= 1 - shot.moire/2
					}
					v[ch] = (black + p[ch]*gain) * m
				}
			case sx > -20/k && sy > -20/k && sx < sw+20/k && sy < sh+20/k:
				v = [3]float64{12, 12, 14}
			default:
				v = [3]float64{float64(desk.R), float64(desk.G), float64(desk.B)}
			}
			t := ((fx/float64(W)-0.5)*gx+(fy/float64(H)-0.5)*gy)/1.2 + 0.5
			light := shot.light + (1-shot.light)*t
			dx, dy := fx/float64(W)-0.5, fy/float64(H)-0.5
			light *= 1 - 0.5*(dx*dx+dy*dy)
			glare := 0.0
			for _, g := range glares {
				ex, ey := (fx-g.x)/g.rx, (fy-g.y)/g.ry
				// A flat-topped patch with soft edges.
				glare += g.peak / (1 + math.Pow(ex*ex+ey*ey, 3))
			}
			o := y*out.Stride + x*4
			for ch := range 3 {
				out.Pix[o+ch] = clamp(v[ch]*light*shot.tint[ch] + glare)
			}
			out.Pix[o+3] = 255
		}
	}
	if shot.blur > 0 {
		gaussBlur(out, shot.blur)
	}
	gaussNoise(r, out, shot.noise)
	return out
}

// homography returns the 3×3 projective map that takes the four points
// from onto to (row-major, h[8] = 1), by solving the eight equations.
func homography(from, to [4][2]float64) [9]float64 {
	var m [8][9]float64
	for i := range 4 {
		x, y, u, v := from[i][0], from[i][1], to[i][0], to[i][1]
		m[2*i] = [9]float64{x, y, 1, 0, 0, 0, -u * x, -u * y, u}
		m[2*i+1] = [9]float64{0, 0, 0, x, y, 1, -v * x, -v * y, v}
	}
	// Gauss-Jordan elimination with partial pivoting.
	for col := range 8 {
		piv := col
		for row := col + 1; row < 8; row++ {
			if math.Abs(m[row][col]) > math.Abs(m[piv][col]) {
				piv = row
			}
		}
		m[col], m[piv] = m[piv], m[col]
		for row := range 8 {
			if row == col {
				continue
			}
			f := m[row][col] / m[col][col]
			for k := col; k < 9; k++ {
				m[row][k] -= f * m[col][k]
			}
		}
	}
	var h [9]float64
	for i := range 8 {
		h[i] = m[i][8] / m[i][i]
	}
	h[8] = 1
	return h
}

// apply maps (x, y) by the homography h.
func apply(h [9]float64, x, y float64) (float64, float64) {
	d := h[6]*x + h[7]*y + h[8]
	return (h[0]*x + h[1]*y + h[2]) / d, (h[3]*x + h[4]*y + h[5]) / d
}
