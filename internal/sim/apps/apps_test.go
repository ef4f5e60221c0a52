package apps

import (
	"bytes"
	"flag"
	"image"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/sim/apps/grass"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/desktop/desktoptest"
	"github.com/codapipe/codapipe/internal/sim/tasks/taskgen"
)

// TestCatalog: the catalogue builds; every app has its elements inside its
// window, labelled with the app's name first (GrassGIS: "GRASS"), and
// FindElement finds each by its label in any case.
func TestCatalog(t *testing.T) {
	cat := Catalog()
	if got := strings.Join(cat.Names(), ", "); got != "ChimeraX, Celestia, KAlgebra, GrassGIS" {
		t.Errorf("Names() = %s", got)
	}
	for _, app := range cat.Names() {
		t.Run(app, func(t *testing.T) {
			els := cat.Elements(app)
			if len(els) < 8 {
				t.Errorf("only %d elements", len(els))
			}
			prefix := app + " "
			if app == grass.Name {
				prefix = "GRASS "
			}
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
		t.Run(app.Name, func(t *testing.T) {
			m := desktoptest.New(t, 1, app)
			m.Start(strings.TrimSuffix(app.Programs[0], "*"))
			for _, tab := range append([]desktop.Element{{}}, m.Catalog.Elements(app.Name)...) {
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

var updateTasks = flag.Bool("update-tasks", false, "rewrite the task files in internal/sim/tasks/VM from the apps' task specs")

// TestTaskFiles: the simulator's task files (internal/sim/tasks/VM/<App
// folder>, embedded by package tasks) are what the apps' task specs
// render; with -update-tasks it rewrites them.
func TestTaskFiles(t *testing.T) {
	sets, err := TaskSets()
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range sets {
		t.Run(set.App.Name, func(t *testing.T) {
			want, err := taskgen.Files(set)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join("..", "tasks", "VM", taskgen.Folder(set.App))
			have, err := filepath.Glob(filepath.Join(dir, "*"))
			if err != nil {
				t.Fatal(err)
			}
			if *updateTasks {
				writeTaskFiles(t, dir, have, want)
				return
			}
			for _, p := range have {
				if _, ok := want[filepath.Base(p)]; !ok {
					t.Errorf("stale task file %s (run with -update-tasks)", p)
				}
			}
			for _, name := range slices.Sorted(maps.Keys(want)) {
				got, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil || !bytes.Equal(got, want[name]) {
					t.Errorf("task file %s/%s is out of date (run: go test ./internal/sim/apps -run TestTaskFiles -update-tasks)", dir, name)
				}
			}
		})
	}
}

// writeTaskFiles replaces the files have in dir by want (file name →
// content).
func writeTaskFiles(t *testing.T, dir string, have []string, want map[string][]byte) {
	t.Helper()
	for _, p := range have {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range want {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %d task files to %s", len(want), dir)
}
