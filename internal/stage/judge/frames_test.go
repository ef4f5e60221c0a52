package judge

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"testing"

	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/pkg/traj"
)

// trajWithSteps is a trajectory of n steps, each with its own screenshot,
// and a final screenshot.
func trajWithSteps(n int) *traj.Trajectory {
	t := &traj.Trajectory{}
	for i := 0; i < n; i++ {
		t.Steps = append(t.Steps, traj.Step{
			Index: i, Screenshot: traj.ImageRef{SHA256: fmt.Sprintf("%064x", i+1), Width: 1280, Height: 800},
			Candidates: []traj.Candidate{{Thought: fmt.Sprintf("thought %d", i+1)}}, Code: fmt.Sprintf("pyautogui.click(%d, 1)", i),
		})
	}
	t.FinalScreenshot = &traj.ImageRef{SHA256: fmt.Sprintf("%064x", 999), Width: 1280, Height: 800}
	return t
}

func TestKeyframes(t *testing.T) {
	cases := []struct {
		steps, max int
		want       []int // steps shown; the last entry is the final screen
	}{
		{steps: 1, max: 16, want: []int{1, 1}},
		{steps: 15, max: 16, want: []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 15}},
		{steps: 16, max: 16, want: []int{1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 16}}, // 17 frames: the middle one goes
		{steps: 30, max: 4, want: []int{1, 11, 21, 30}},
		{steps: 9, max: 2, want: []int{1, 9}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d steps, max %d", c.steps, c.max), func(t *testing.T) {
			tr := trajWithSteps(c.steps)
			fs := Keyframes(tr, c.max)
			if len(fs) != len(c.want) {
				t.Fatalf("%d frames, want %d", len(fs), len(c.want))
			}
			for i, f := range fs {
				if f.Step != c.want[i] {
					t.Errorf("frame %d shows step %d, want %d", i, f.Step, c.want[i])
				}
				final := i == len(fs)-1
				if f.Final != final {
					t.Errorf("frame %d: final %v, want %v", i, f.Final, final)
				}
				if !final && (f.Thought != fmt.Sprintf("thought %d", f.Step) || f.Image != tr.Steps[f.Step-1].Screenshot) {
					t.Errorf("frame %d: %+v is not step %d", i, f, f.Step)
				}
			}
			if fs[0].Step != 1 || !fs[len(fs)-1].Final {
				t.Errorf("the first step and the final screen must be kept: %+v", fs)
			}
		})
	}
	t.Run("no final screenshot, a step without one", func(t *testing.T) {
		tr := trajWithSteps(3)
		tr.FinalScreenshot = nil
		tr.Steps[1].Screenshot = traj.ImageRef{}
		fs := Keyframes(tr, 16)
		if len(fs) != 2 || fs[0].Step != 1 || fs[1].Step != 3 || fs[1].Final {
			t.Fatalf("frames %+v", fs)
		}
	})
}

// TestSubsampleEven: the gaps between subsampled positions differ by at
// most one, for every length and bound.
func TestSubsampleEven(t *testing.T) {
	for n := 1; n <= 60; n++ {
		all := make([]Frame, n)
		for i := range all {
			all[i].Step = i
		}
		for m := 2; m <= 20; m++ {
			got := subsample(all, m)
			if want := min(n, m); len(got) != want {
				t.Fatalf("n=%d m=%d: %d frames, want %d", n, m, len(got), want)
			}
			if got[0].Step != 0 || got[len(got)-1].Step != n-1 {
				t.Fatalf("n=%d m=%d: first/last not kept", n, m)
			}
			lo, hi := n, 0
			for i := 1; i < len(got); i++ {
				g := got[i].Step - got[i-1].Step
				lo, hi = min(lo, g), max(hi, g)
			}
			if len(got) > 1 && (lo < 1 || hi-lo > 1) {
				t.Fatalf("n=%d m=%d: gaps from %d to %d", n, m, lo, hi)
			}
		}
	}
}

func TestFitAndParseSize(t *testing.T) {
	for _, c := range []struct {
		box  Size
		w, h int
		want Size
	}{
		{Size{640, 400}, 1280, 800, Size{640, 400}},
		{Size{640, 640}, 1280, 800, Size{640, 400}},
		{Size{1000, 400}, 1280, 800, Size{640, 400}},
		{Size{2000, 2000}, 1280, 800, Size{1280, 800}}, // never up
		{Size{}, 1280, 800, Size{1280, 800}},
		{Size{100, 100}, 1920, 1080, Size{100, 56}},
	} {
		if got := c.box.Fit(c.w, c.h); got != c.want {
			t.Errorf("%v.Fit(%d, %d) = %v, want %v", c.box, c.w, c.h, got, c.want)
		}
	}
	if s, err := ParseSize(" 640X400 "); err != nil || s != (Size{640, 400}) || s.String() != "640x400" {
		t.Errorf("ParseSize: %v %v", s, err)
	}
	for _, bad := range []string{"", "640", "640x", "x400", "8x8", "640x-4", "1e3x400"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q): no error", bad)
		}
	}
}

// chimeraxScreenshot is a simulated 1280×800 screenshot of ChimeraX just
// launched (seed 3).
func chimeraxScreenshot(tb testing.TB) []byte {
	tb.Helper()
	m := desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog(), Seed: 3})
	if err := m.Launch("chimerax"); err != nil {
		tb.Fatal(err)
	}
	shot, err := m.Screenshot()
	if err != nil {
		tb.Fatal(err)
	}
	return shot
}

// TestResizeKeepsTheStateChunk: a simulated screenshot scaled down keeps
// its text chunks (the simulator's state among them) and gets the size
// asked for; one that fits comes back unchanged.
func TestResizeKeepsTheStateChunk(t *testing.T) {
	shot := chimeraxScreenshot(t)
	want, err := desktop.ReadStateChunk(shot)
	if err != nil {
		t.Fatal(err)
	}
	small, size, err := Resize(shot, Size{640, 400})
	if err != nil {
		t.Fatal(err)
	}
	if size != (Size{640, 400}) {
		t.Fatalf("size %v", size)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(small))
	if err != nil || cfg.Width != 640 || cfg.Height != 400 {
		t.Fatalf("decoded %dx%d, %v", cfg.Width, cfg.Height, err)
	}
	got, err := desktop.ReadStateChunk(small)
	if err != nil {
		t.Fatalf("state chunk lost: %v", err)
	}
	if got.App != want.App || got.App == "" {
		t.Fatalf("state app %q, want %q", got.App, want.App)
	}
	if len(small) >= len(shot) {
		t.Errorf("the small image (%d bytes) is not smaller than the original (%d)", len(small), len(shot))
	}
	same, size, err := Resize(shot, Size{2000, 2000})
	if err != nil || !bytes.Equal(same, shot) || size != (Size{desktop.ScreenW, desktop.ScreenH}) {
		t.Fatalf("an image that fits must come back as it is: %v %v", size, err)
	}
}

// TestResizeQuality: a smooth gradient scaled down stays close to the
// gradient (a good kernel, not nearest-neighbour on a checkerboard).
func TestResizeQuality(t *testing.T) {
	src := image.NewRGBA(image.Rect(0, 0, 400, 200))
	for y := 0; y < 200; y++ {
		for x := 0; x < 400; x++ {
			if (x+y)%2 == 0 {
				src.Set(x, y, color.White)
			} else {
				src.Set(x, y, color.Black)
			}
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, src); err != nil {
		t.Fatal(err)
	}
	out, _, err := Resize(buf.Bytes(), Size{100, 50})
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	// A checkerboard averages to mid grey; nearest-neighbour would keep
	// pure black or white.
	for _, p := range []image.Point{{10, 10}, {50, 25}, {90, 40}} {
		r, _, _, _ := img.At(p.X, p.Y).RGBA()
		if v := r >> 8; v < 96 || v > 160 {
			t.Errorf("pixel %v = %d, want mid grey", p, v)
		}
	}
}

func TestResizeRejectsDamagedPNG(t *testing.T) {
	for name, data := range map[string][]byte{
		"empty":    nil,
		"not png":  []byte("GIF89a...."),
		"cut off":  pngHead(t)[:40],
		"bad CRC":  corruptCRC(t),
		"bad data": append(pngHead(t)[:33], []byte("\x00\x00\x00\x04IDATabcd\x00\x00\x00\x00")...),
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := Resize(data, Size{16, 16}); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

func pngHead(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 64, 64))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func corruptCRC(t *testing.T) []byte {
	b := append([]byte(nil), pngHead(t)...)
	b[29] ^= 0xff // inside IHDR's CRC
	return b
}
