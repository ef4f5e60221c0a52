package apps

import (
	"image"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/desktop/desktoptest"
)

// TestCatalog: the catalogue builds; every app has its elements inside its
// window, labelled with the app's name first (GRASS GIS: "GRASS"), and
// FindElement finds each by its label in any case.
func TestCatalog(t *testing.T) {
	cat := Catalog()
	if got := strings.Join(cat.Names(), ", "); got != "ChimeraX, Celestia, KAlgebra, GRASS GIS" {
		t.Errorf("Names() = %s", got)
	}
	for _, app := range cat.Names() {
		t.Run(app, func(t *testing.T) {
			els := cat.Elements(app)
			if len(els) < 8 {
				t.Errorf("only %d elements", len(els))
			}
			prefix := strings.Fields(app)[0] + " "
			for _, e := range els {
				if !strings.HasPrefix(e.Label, prefix) || e.App != app {
					t.Errorf("element %q of %q lacks the app prefix %q", e.Label, e.App, prefix)
				}
				if !e.Box.In(image.Rect(0, desktop.AppTop, desktop.ScreenW, desktop.ScreenH)) {
					t.Errorf("%q: box %v outside the app window", e.Label, e.Box)
				}
				if got, ok := cat.FindElement(strings.ToUpper(e.Label)); !ok || got != e {
					t.Errorf("FindElement(%q) = %v, %v", e.Label, got, ok)
				}
			}
		})
	}
	if _, ok := cat.FindElement("no such element"); ok {
		t.Error("FindElement found a missing label")
	}
	if cat.Elements("Blender") != nil {
		t.Error("Elements of an unknown app")
	}
}

// TestVisibleElementsDoNotOverlap visits every tab of every app and checks
// that the visible elements never overlap, so that a label grounds to one
// clickable box.
func TestVisibleElementsDoNotOverlap(t *testing.T) {
	for _, app := range All() {
		t.Run(app.Name(), func(t *testing.T) {
			m := desktoptest.New(t, 1, app)
			m.Start(strings.TrimSuffix(app.Programs()[0], "*"))
			for _, tab := range append([]desktop.Element{{}}, m.Catalog.Elements(app.Name())...) {
				if tab.Kind != "tab" && tab.Label != "" {
					continue
				}
				if tab.Label != "" {
					m.Click(tab.Label)
				}
				vis := m.Visible()
				for i, a := range vis {
					for _, b := range vis[i+1:] {
						if a.Box.Overlaps(b.Box) {
							t.Errorf("tab %q: %q %v overlaps %q %v", tab.Label, a.Label, a.Box, b.Label, b.Box)
						}
					}
				}
			}
		})
	}
}
