package screen

import (
	"bytes"
	"image"
	"image/png"
	"testing"
)

// TestEncodePNG: image/png decodes what EncodePNG writes, pixel for pixel,
// at sizes that take one band and several; ReadText finds the text chunk.
func TestEncodePNG(t *testing.T) {
	for _, size := range []image.Point{{3, 2}, {300, 260}} {
		t.Run(size.String(), func(t *testing.T) {
			c := NewCanvas(size.X, size.Y, 1)
			c.Gradient(c.Img.Rect, RGB(10, 200, 30), RGB(250, 0, 90))
			c.Noise(c.Img.Rect, 7, GrainMain+5)
			c.Text(1, 1, "SIMULATOR", ColBlack)
			b, err := EncodePNG(c.Img, TextChunk{Keyword: "k", Text: []byte("v")})
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			for y := range size.Y {
				for x := range size.X {
					if got, want := img.At(x, y), c.Img.RGBAAt(x, y); got != want {
						t.Fatalf("pixel (%d,%d) = %v, want %v", x, y, got, want)
					}
				}
			}
			if text, err := ReadText(b, "k"); err != nil || string(text) != "v" {
				t.Errorf("ReadText = %q, %v", text, err)
			}
			if _, err := ReadText(b, "other"); err == nil {
				t.Error("ReadText found a missing keyword")
			}
		})
	}
}
