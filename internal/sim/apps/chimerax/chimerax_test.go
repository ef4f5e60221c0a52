package chimerax

import (
	"fmt"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/desktop/desktoptest"
	"github.com/codapipe/codapipe/internal/sim/screen"
)

func TestChimeraXCommands(t *testing.T) {
	m := desktoptest.Start(t, Spec(), "chimerax --cmd 'remotecontrol rest start json true port 8123'")
	if port := m.Value("/chimerax/state", "remotecontrol.port"); port != float64(8123) {
		t.Fatalf("port not from --cmd: %v", port)
	}
	run := func(cmd string) map[string]any { return m.Get("/chimerax/run", cmd) }
	st := func() map[string]any { return m.Get("/chimerax/state", "") }
	cases := []struct {
		cmd   string
		key   string
		want  any
		error bool
	}{
		{"style stick", "", nil, true}, // no models
		{"open 4hhb", "models.(1,).name", "4hhb", false},
		{"open 1crn", "models.count", float64(2), false},
		{"style #2 sphere", "models.(2,).style", "sphere", false},
		{"style #1 ball", "models.(1,).style", "ball", false},
		{"color red", "models.(1,).color", "#ff0000", false},
		{"color #2 #0f0", "models.(2,).color", "#00ff00", false},
		{"color notacolor", "", nil, true},
		{"rainbow #1", "models.(1,).color", "rainbow", false},
		{"show atoms", "models.(2,).atoms_shown", true, false},
		{"hide #2 cartoons", "models.(2,).cartoon", false, false},
		{"surface", "models.(1,).surface", true, false},
		{"~surface #1", "models.(1,).surface", false, false},
		{"set bgColor white", "view.background", "#ffffff", false},
		{"lighting soft", "view.lighting", "soft", false},
		{"lighting weird", "", nil, true},
		{"graphics silhouettes true", "view.silhouettes", true, false},
		{"turn y 90; turn y 300", "view.turn.y", float64(30), false},
		{"turn q 5", "", nil, true},
		{"view", "view.turn.y", float64(0), false},
		{"select /A", "selection.atoms", float64(4779/4 + 327), false}, // chain A of both models
		{"select clear", "selection.atoms", float64(0), false},
		{"addh #2", "models.(2,).hydrogens", float64(46*7 + int(screen.Hash("h", "1crn")%7)), false},
		{"close #1", "models.count", float64(1), false},
		{"open /home/user/nothere.pdb", "", nil, true},
		{"frobnicate", "", nil, true},
		{"log clear", "log.lines", float64(0), false},
	}
	for _, c := range cases {
		t.Run(c.cmd, func(t *testing.T) {
			reply := run(c.cmd)
			if (reply["error"] != nil) != c.error {
				t.Fatalf("%q: reply %v", c.cmd, reply)
			}
			if c.key != "" {
				if got := st()[c.key]; got != c.want {
					t.Errorf("%q: %s = %v, want %v", c.cmd, c.key, got, c.want)
				}
			}
		})
	}
	// info models reports the simulated counts.
	run("open 3ppd")
	reply := run("info models")
	lines := fmt.Sprint(reply["log messages"])
	if !strings.Contains(lines, fmt.Sprintf("%d atoms", chimeraxStructure("3ppd").Atoms)) {
		t.Errorf("info models: %s", lines)
	}
	// The command line keeps the command selected after Enter.
	m.Click("ChimeraX command line")
	m.Write("close\n")
	m.Write("open 2olx\n")
	if s := m.State(); s.Fields["cmdline"] != "open 2olx" || st()["models.(1,).name"] != "2olx" {
		t.Errorf("command line %q, state %v", s.Fields["cmdline"], st()["models.(1,).name"])
	}
	// Dragging on the graphics window rotates the view.
	g, _ := m.Catalog.FindElement("ChimeraX graphics window")
	c := g.Center()
	m.Input(desktop.Event{Kind: desktop.EvMoveTo, X: c.X, Y: c.Y, HasXY: true}, desktop.Event{Kind: desktop.EvDragTo, X: c.X + 40, Y: c.Y, HasXY: true, Button: "left"})
	if st()["view.turn.y"] != float64(20) {
		t.Errorf("drag: turn.y %v", st()["view.turn.y"])
	}
}
