package desktop_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/apps/chimerax"
	"github.com/codapipe/codapipe/internal/sim/apps/grass"
	"github.com/codapipe/codapipe/internal/sim/apps/kalgebra"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/screen"
)

func BenchmarkScreenshot(b *testing.B) {
	for _, app := range apps.All() {
		b.Run(strings.ReplaceAll(app.Name, " ", ""), func(b *testing.B) {
			m := desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog(), Seed: 1})
			if err := m.Launch(strings.TrimSuffix(app.Programs[0], "*")); err != nil {
				b.Fatal(err)
			}
			switch app.Name {
			case chimerax.Name:
				m.AppServe("GET", "/run", url.Values{"command": {"open 4hhb; show atoms; style ball"}}, nil)
			case grass.Name:
				m.AppServe("POST", "/gcmd", nil, []byte(`{"cmd":"d.rast","kwargs":{"map":"elevation"}}`))
			case kalgebra.Name:
				m.AppServe("POST", "/tab", nil, []byte(`1`))
				m.AppServe("POST", "/add/2d", nil, []byte(`x->sin(x)`))
			}
			var size int
			var png []byte
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// Move the pointer so that the screenshot cache misses.
				m.Input(desktop.Event{Kind: desktop.EvMoveTo, X: 10 + i%50, Y: 790, HasXY: true})
				var err error
				png, err = m.Screenshot()
				if err != nil {
					b.Fatal(err)
				}
				size = len(png)
			}
			b.ReportMetric(float64(size)/1024, "KB")
			chunk, err := screen.ReadText(png, desktop.StateChunkKeyword)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(chunk))/1024, "chunkKB")
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
		})
	}
}

func BenchmarkInput(b *testing.B) {
	m := desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog(), Seed: 1})
	if err := m.Launch("kalgebra"); err != nil {
		b.Fatal(err)
	}
	e, _ := apps.Catalog().FindElement("KAlgebra expression input")
	c := e.Center()
	evs := []desktop.Event{
		{Kind: desktop.EvClick, X: c.X, Y: c.Y, HasXY: true, Button: "left", Clicks: 1},
		{Kind: desktop.EvWrite, Text: "p := 3*4\n"},
		{Kind: desktop.EvHotkey, Keys: []string{"ctrl", "a"}},
		{Kind: desktop.EvScroll, Amount: -5, X: 400, Y: 400, HasXY: true},
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := m.Input(evs[i%len(evs)]); err != nil {
			b.Fatal(err)
		}
	}
}
