package judge

import (
	"testing"

	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/desktop"
)

// BenchmarkResize: one simulated 1280×800 screenshot scaled to fit 640×400
// (Catmull-Rom), as the low-resolution pass does for each frame.
func BenchmarkResize(b *testing.B) {
	m := desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog(), Seed: 3})
	if err := m.Launch("chimerax"); err != nil {
		b.Fatal(err)
	}
	shot, err := m.Screenshot()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(shot)))
	for b.Loop() {
		if _, _, err := Resize(shot, Size{640, 400}); err != nil {
			b.Fatal(err)
		}
	}
}
