package imaging

import (
	"image"
	"image/color"
	"testing"
)

// boxScale averages k×k blocks exactly (rounded), and leaves every other
// case to Catmull-Rom.
func TestBoxScale(t *testing.T) {
	src := image.NewRGBA(image.Rect(0, 0, 4, 2))
	for i, v := range []uint8{0, 10, 20, 31, 100, 200, 40, 50} { // rows of 4
		src.Set(i%4, i/4, color.RGBA{R: v, G: 255 - v, B: 7, A: 255})
	}
	dst := image.NewRGBA(image.Rect(0, 0, 2, 1))
	if !boxScale(dst, src) {
		t.Fatal("a 2× RGBA image was not box-scaled")
	}
	// R: (0+10+100+200)/4 = 77.5 → 78, (20+31+40+50)/4 = 35.25 → 35;
	// G: (255+245+155+55)/4 = 177.5 → 178, (235+224+215+205)/4 = 219.75 → 220.
	for x, want := range []color.RGBA{{R: 78, G: 178, B: 7, A: 255}, {R: 35, G: 220, B: 7, A: 255}} {
		if got := dst.RGBAAt(x, 0); got != want {
			t.Errorf("pixel %d = %+v, want %+v", x, got, want)
		}
	}
	for _, c := range []struct {
		name string
		src  image.Image
		dst  image.Rectangle
	}{
		{"not a whole factor", image.NewRGBA(image.Rect(0, 0, 5, 2)), image.Rect(0, 0, 2, 1)},
		{"different factors", image.NewRGBA(image.Rect(0, 0, 4, 3)), image.Rect(0, 0, 2, 1)},
		{"factor 1", image.NewRGBA(image.Rect(0, 0, 2, 1)), image.Rect(0, 0, 2, 1)},
		{"not RGBA", image.NewNRGBA(image.Rect(0, 0, 4, 2)), image.Rect(0, 0, 2, 1)},
	} {
		if boxScale(image.NewRGBA(c.dst), c.src) {
			t.Errorf("%s: box-scaled", c.name)
		}
	}
}

func TestFit(t *testing.T) {
	for _, c := range []struct{ w, h, bw, bh, ww, wh int }{
		{1280, 800, 640, 400, 640, 400},
		{1280, 800, 320, 320, 320, 200},
		{800, 1280, 320, 200, 125, 200},
		{100, 50, 640, 400, 100, 50},
		{1280, 800, 0, 400, 1280, 800},
	} {
		if w, h := Fit(c.w, c.h, c.bw, c.bh); w != c.ww || h != c.wh {
			t.Errorf("Fit(%d, %d, %d, %d) = %d×%d, want %d×%d", c.w, c.h, c.bw, c.bh, w, h, c.ww, c.wh)
		}
	}
}
