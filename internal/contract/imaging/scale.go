// Package imaging scales screenshots down: the judge's low-resolution
// frames and the run report's thumbnails use it, with one rule for the
// size (Fit) and one for the pixels (Scale).
package imaging

import (
	"image"

	"golang.org/x/image/draw"
)

// Fit is the size of a w×h image scaled down to fit in boxW×boxH with
// its aspect ratio kept, rounded to the nearest pixel; an image that
// fits, or a size that is not positive, is kept.
func Fit(w, h, boxW, boxH int) (int, int) {
	if w <= 0 || h <= 0 || boxW <= 0 || boxH <= 0 || (w <= boxW && h <= boxH) {
		return w, h
	}
	// scale = min(boxW/w, boxH/h), rounded to the nearest pixel.
	if boxW*h <= boxH*w { // width limits
		return boxW, max(1, (h*boxW+w/2)/w)
	}
	return max(1, (w*boxH+h/2)/h), boxH
}

// Scale scales src into a new w×h RGBA image: by the area average of
// k×k blocks when src is exactly k times that size (boxScale), with a
// Catmull-Rom kernel otherwise.
func Scale(src image.Image, w, h int) *image.RGBA {
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	if !boxScale(dst, src) {
		draw.CatmullRom.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Src, nil)
	}
	return dst
}

// boxScale scales an opaque RGBA src down into dst by averaging k×k
// blocks when src is exactly k times dst's size (k ≥ 2; a 1280×800
// screenshot into 640×400): for such a factor the box filter is the
// area average, without the aliasing of point sampling and several times
// faster than Catmull-Rom. It reports false, doing nothing, for any
// other case.
func boxScale(dst *image.RGBA, src image.Image) bool {
	s, ok := src.(*image.RGBA)
	w, h := dst.Rect.Dx(), dst.Rect.Dy()
	if !ok || w == 0 || h == 0 || s.Rect.Dx()%w != 0 || s.Rect.Dy()%h != 0 || s.Rect.Dx()/w != s.Rect.Dy()/h || s.Rect.Dx()/w < 2 {
		return false
	}
	k := s.Rect.Dx() / w
	n := uint32(k * k)
	for y := range h {
		for x := range w {
			var r, g, b, a uint32
			for dy := range k {
				row := s.Pix[(y*k+dy)*s.Stride+x*k*4:]
				for dx := range k {
					p := row[dx*4 : dx*4+4 : dx*4+4]
					r, g, b, a = r+uint32(p[0]), g+uint32(p[1]), b+uint32(p[2]), a+uint32(p[3])
				}
			}
			o := dst.Pix[y*dst.Stride+x*4 : y*dst.Stride+x*4+4 : y*dst.Stride+x*4+4]
			o[0], o[1], o[2], o[3] = uint8((r+n/2)/n), uint8((g+n/2)/n), uint8((b+n/2)/n), uint8((a+n/2)/n)
		}
	}
	return true
}
