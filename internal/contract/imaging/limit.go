package imaging

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
)

// DefaultMaxPixels bounds the pixels of one screenshot by default: 36
// million, an 8K screen (7680×4320, 33.2 million) and some. Decoding one
// takes 4 bytes a pixel (about 140 MB); a 20000×20000 PNG, 560 KB on the
// wire, would take 1.6 GB.
const DefaultMaxPixels = 36_000_000

// PixelsError is the error of an image with more pixels than a limit.
type PixelsError struct {
	W, H  int
	Limit int64
	Flag  string // the flag that raises the limit
	What  string // "screenshot", "judge request", ...
}

func (e *PixelsError) Error() string {
	msg := fmt.Sprintf("%s of %d×%d = %d pixels, more than the limit of %d", e.What, e.W, e.H, int64(e.W)*int64(e.H), e.Limit)
	if e.H == 1 { // a total, not an image
		msg = fmt.Sprintf("%s of %d pixels, more than the limit of %d", e.What, e.W, e.Limit)
	}
	if e.Flag != "" {
		msg += "; " + e.Flag + " raises it"
	}
	return msg
}

// CheckPixels returns a *PixelsError when a w×h image of what is beyond
// limit pixels (DefaultMaxPixels when limit ≤ 0), or its size is not
// positive.
func CheckPixels(what string, w, h int, limit int64, flag string) error {
	if limit <= 0 {
		limit = DefaultMaxPixels
	}
	if w <= 0 || h <= 0 {
		return fmt.Errorf("%s of %d×%d pixels: not an image size", what, w, h)
	}
	if int64(w)*int64(h) > limit {
		return &PixelsError{W: w, H: h, Limit: limit, Flag: flag, What: what}
	}
	return nil
}

// DecodePNG decodes a PNG whose header says at most limit pixels
// (CheckPixels): the size is read before anything is decoded, so an image
// that would explode in memory costs nothing.
func DecodePNG(what string, data []byte, limit int64, flag string) (image.Image, error) {
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	if err := CheckPixels(what, cfg.Width, cfg.Height, limit, flag); err != nil {
		return nil, err
	}
	return png.Decode(bytes.NewReader(data))
}
