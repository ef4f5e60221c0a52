package imaging

import (
	"bytes"
	"errors"
	"image"
	"image/png"
	"slices"
	"strings"
	"testing"
)

// TestDecodePNGChecksThePixelsFirst (issue 40, "images that explode"): a
// valid 20000×20000 PNG of a few hundred KB is refused from its header,
// naming the limit and the flag, without being decoded; one within the
// limit decodes.
func TestDecodePNGChecksThePixelsFirst(t *testing.T) {
	var huge bytes.Buffer
	if err := HugePNG(&huge, 20000, 20000); err != nil {
		t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(huge.Bytes()))
	if err != nil || cfg.Width != 20000 || cfg.Height != 20000 {
		t.Fatalf("HugePNG: %+v, %v", cfg, err)
	}
	t.Logf("a 20000×20000 PNG: %d bytes", huge.Len())
	_, err = DecodePNG("screenshot", huge.Bytes(), 0, "--max-image-pixels")
	var pe *PixelsError
	if !errors.As(err, &pe) || pe.Limit != DefaultMaxPixels || !strings.Contains(err.Error(), "--max-image-pixels raises it") {
		t.Fatalf("DecodePNG: %v; want a PixelsError naming the default limit and the flag", err)
	}
	var small bytes.Buffer
	if err := HugePNG(&small, 64, 32); err != nil {
		t.Fatal(err)
	}
	img, err := DecodePNG("screenshot", small.Bytes(), 64*32, "")
	if err != nil || img.Bounds().Dx() != 64 || img.Bounds().Dy() != 32 {
		t.Fatalf("a 64×32 PNG at its limit: %v, %v", img, err)
	}
	if _, err := DecodePNG("screenshot", small.Bytes(), 64*32-1, ""); !errors.As(err, &pe) {
		t.Errorf("a 64×32 PNG one pixel over the limit: %v", err)
	}
}

// TestHugePNGDecodes: the PNGs HugePNG writes decode, whole, to images of
// their size with every pixel 0, for sizes whose rows fill one block, many
// blocks, and many blocks and a part of one (its checksum included: the
// decoder checks the zlib Adler-32).
func TestHugePNGDecodes(t *testing.T) {
	for _, sz := range [][2]int{{1, 1}, {64, 32}, {1000, 1048}, {1000, 3000}, {3000, 2500}} {
		var b bytes.Buffer
		if err := HugePNG(&b, sz[0], sz[1]); err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b.Bytes()))
		if err != nil {
			t.Fatalf("%d×%d: %v", sz[0], sz[1], err)
		}
		g, ok := img.(*image.Gray)
		if !ok || g.Bounds().Dx() != sz[0] || g.Bounds().Dy() != sz[1] {
			t.Fatalf("%d×%d: decoded a %T of %v", sz[0], sz[1], img, img.Bounds())
		}
		if i := slices.IndexFunc(g.Pix, func(p uint8) bool { return p != 0 }); i >= 0 {
			t.Fatalf("%d×%d: pixel %d is %d, want 0", sz[0], sz[1], i, g.Pix[i])
		}
	}
}
