package desktop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/codapipe/codapipe/internal/sim/screen"
)

func TestLayouts(t *testing.T) {
	prefix := map[string]string{AppChimeraX: "ChimeraX ", AppCelestia: "Celestia ", AppKAlgebra: "KAlgebra ", AppGRASS: "GRASS "}
	seen := map[string]bool{}
	for _, app := range Apps() {
		els := Elements(app)
		if len(els) < 8 {
			t.Errorf("%s: only %d elements", app, len(els))
		}
		for _, e := range els {
			if !strings.HasPrefix(e.Label, prefix[app]) {
				t.Errorf("%s: label %q lacks the app prefix", app, e.Label)
			}
			if seen[strings.ToLower(e.Label)] {
				t.Errorf("duplicate label %q", e.Label)
			}
			seen[strings.ToLower(e.Label)] = true
			if !e.Box.In(image.Rect(0, appTop, ScreenW, ScreenH)) {
				t.Errorf("%q: box %v outside the app window", e.Label, e.Box)
			}
			if got, ok := FindElement(strings.ToUpper(e.Label)); !ok || got != e {
				t.Errorf("FindElement(%q) = %v, %v", e.Label, got, ok)
			}
		}
	}
	if _, ok := FindElement("no such element"); ok {
		t.Error("FindElement found a missing label")
	}
	if Elements("Blender") != nil {
		t.Error("Elements of an unknown app")
	}
}

// TestVisibleElementsDoNotOverlap visits every tab of every app and checks
// that the visible elements never overlap, so that a label grounds to one
// clickable box.
func TestVisibleElementsDoNotOverlap(t *testing.T) {
	for _, app := range Apps() {
		t.Run(app, func(t *testing.T) {
			m := NewMachine(MachineConfig{Seed: 1})
			if err := m.Launch(strings.ToLower(strings.Fields(app)[0])); err != nil {
				t.Fatal(err)
			}
			for _, tab := range append([]Element{{}}, Elements(app)...) {
				if tab.Kind != "tab" && tab.Label != "" {
					continue
				}
				if tab.Label != "" {
					c := tab.Center()
					if err := m.Input(Event{Kind: EvClick, X: c.X, Y: c.Y, HasXY: true, Button: "left", Clicks: 1}); err != nil {
						t.Fatalf("click on %q: %v", tab.Label, err)
					}
				}
				vis := visibleElements(m)
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

func clickOn(t *testing.T, m Machine, label string) {
	t.Helper()
	e, ok := FindElement(label)
	if !ok {
		t.Fatalf("no element %q", label)
	}
	c := e.Center()
	if err := m.Input(Event{Kind: EvClick, X: c.X, Y: c.Y, HasXY: true, Button: "left", Clicks: 1}); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, m Machine, text string) {
	t.Helper()
	if err := m.Input(Event{Kind: EvWrite, Text: text}); err != nil {
		t.Fatal(err)
	}
}

func key(t *testing.T, m Machine, keys ...string) {
	t.Helper()
	kind := EvHotkey
	if len(keys) == 1 {
		kind = EvPress
	}
	if err := m.Input(Event{Kind: kind, Keys: keys}); err != nil {
		t.Fatal(err)
	}
}

func appState(t *testing.T, m Machine, path, body string) map[string]any {
	t.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	resp, status := m.AppState(path, b)
	if status != 200 {
		t.Fatalf("%s: status %d: %s", path, status, resp)
	}
	var v map[string]any
	if err := json.Unmarshal(resp, &v); err != nil {
		t.Fatalf("%s: %v: %s", path, err, resp)
	}
	return v
}

func TestFieldEditing(t *testing.T) {
	m := NewMachine(MachineConfig{Seed: 1})
	if err := m.Launch("kalgebra 8000"); err != nil {
		t.Fatal(err)
	}
	field := func() string { return m.State().Fields["input"] }
	write(t, m, "ignored without focus")
	if m.State().Focus != "" || field() != "" {
		t.Fatalf("typing without focus changed %q", field())
	}
	clickOn(t, m, "KAlgebra expression input")
	if m.State().Focus != "input" {
		t.Fatalf("focus %q", m.State().Focus)
	}
	steps := []struct {
		name string
		do   func()
		want string
	}{
		{"type", func() { write(t, m, "p := 3*4") }, "p := 3*4"},
		{"backspace", func() { key(t, m, "backspace") }, "p := 3*"},
		{"press char", func() { key(t, m, "5") }, "p := 3*5"},
		{"shift char", func() { key(t, m, "shift", "x") }, "p := 3*5X"},
		{"select all + type replaces", func() { key(t, m, "ctrl", "a"); write(t, m, "q") }, "q"},
		{"copy + paste", func() { key(t, m, "ctrl", "a"); key(t, m, "ctrl", "c"); key(t, m, "end"); key(t, m, "ctrl", "v") }, "qq"},
		{"select all + delete", func() { key(t, m, "ctrl", "a"); key(t, m, "delete") }, ""},
		{"space", func() { write(t, m, "a"); key(t, m, "space"); write(t, m, "b") }, "a b"},
		{"enter submits and clears", func() { key(t, m, "ctrl", "a"); write(t, m, "z := 2^10\n") }, ""},
	}
	for _, s := range steps {
		s.do()
		if got := field(); got != s.want {
			t.Fatalf("%s: field %q, want %q", s.name, got, s.want)
		}
	}
	if v := appState(t, m, "/vars", ""); v["z"] != "1024" {
		t.Fatalf("vars %v", v)
	}
	// A click elsewhere drops the focus.
	clickOn(t, m, "KAlgebra 2D Graph tab")
	if m.State().Focus != "" {
		t.Fatalf("focus %q after clicking a tab", m.State().Focus)
	}
	// Tab focuses the next field and selects it.
	key(t, m, "tab")
	if m.State().Focus != "input2d" {
		t.Fatalf("tab focused %q", m.State().Focus)
	}
}

func TestMachineBasics(t *testing.T) {
	m := NewMachine(MachineConfig{Seed: 3})
	if st := m.State(); st.App != "" || len(st.AppState) != 0 {
		t.Fatalf("fresh machine runs %q", st.App)
	}
	if _, status := m.AppState("/dump", nil); status != 503 {
		t.Errorf("no app: status %d, want 503", status)
	}
	if err := m.Launch("firefox"); err == nil {
		t.Error("launching an unknown program succeeds")
	}
	if err := m.Launch(`/bin/bash -ic "conda activate grass; LD_PRELOAD=/x FLASK_PORT=8000 /app/bin/grass --gui ~/grassdata/x"`); err != nil {
		t.Fatal(err)
	}
	if m.State().App != AppGRASS {
		t.Fatalf("app %q", m.State().App)
	}
	if _, status := m.AppState("/vars", nil); status != 404 {
		t.Errorf("GRASS /vars: status %d, want 404", status)
	}
	if !strings.Contains(m.Accessibility(), `name="GRASS Layers tab"`) || strings.Contains(m.Accessibility(), `name="GRASS console"`) {
		t.Errorf("accessibility tree:\n%s", m.Accessibility())
	}
	m.Input(Event{Kind: EvMoveTo, X: 5000, Y: -3, HasXY: true})
	if c := m.Cursor(); c != image.Pt(ScreenW-1, 0) {
		t.Errorf("cursor %v not clamped", c)
	}
	if err := m.Input(Event{Kind: "teleport"}); err == nil {
		t.Error("unknown event kind accepted")
	}
	seq := m.State().Seq
	m.Reset()
	if st := m.State(); st.App != "" || st.Seq != 0 || seq == 0 {
		t.Errorf("after reset: %+v (seq before %d)", st, seq)
	}
}

func TestShell(t *testing.T) {
	m := NewMachine(MachineConfig{})
	cases := []struct {
		cmd  string
		out  string
		code int
	}{
		{"echo hello world", "hello world\n", 0},
		{"printf '%s' 'a b' > ~/Desktop/x.txt && cat /home/user/Desktop/x.txt", "a b", 0},
		{"printf 'line\\n' >> ~/Desktop/x.txt; cat ~/Desktop/x.txt", "a bline\n", 0},
		{"ls ~/Desktop", "x.txt\n", 0},
		{"rm ~/Desktop/x.txt && ls ~/Desktop", "", 0},
		{"rm /nope", "rm: cannot remove '/nope': No such file or directory\n", 1},
		{"rm -f /nope /home/user/.config/ChimeraX/ui-*", "", 0},
		{"mkdir -p /tmp/a/b && touch /tmp/a/b/c && ls /tmp/a/b", "c\n", 0},
		{"false || echo fallback", "fallback\n", 0},
		{"false && echo skipped", "", 1},
		{"LD_LIBRARY_PATH=/x true", "", 0},
		{"cat /missing 2>/dev/null", "", 1},
		{"frobnicate --now", "sh: 1: frobnicate: not found\n", 127},
		{"echo 'unterminated", "sh: 1: Syntax error: unterminated single quote\n", 2},
		{`echo "a \"b\" $c"`, "a \"b\" $c\n", 0},
		{"curl -fsSL -o ~/Downloads/p.cif https://example.org/p.cif && cat ~/Downloads/p.cif", "simulated download of https://example.org/p.cif\n", 0},
		{"wget -q https://example.org/x", "simulated download of https://example.org/x\n", 0},
	}
	for _, c := range cases {
		t.Run(c.cmd, func(t *testing.T) {
			out, code := m.Shell(c.cmd)
			if out != c.out || code != c.code {
				t.Errorf("Shell(%q) = %q, %d; want %q, %d", c.cmd, out, code, c.out, c.code)
			}
		})
	}
	// Starting and stopping an app from the shell.
	if _, code := m.Shell("nohup /app/bin/kalgebra 8000 &"); code != 0 || m.State().App != AppKAlgebra {
		t.Fatalf("shell launch: code %d, app %q", code, m.State().App)
	}
	if _, code := m.Shell("pkill kalgebra"); code != 0 || m.State().App != "" {
		t.Fatalf("pkill: code %d, app %q", code, m.State().App)
	}
}

func TestExpressions(t *testing.T) {
	// want is the exact value text; wantErr the exact error text.
	cases := []struct {
		in      string
		want    string
		wantErr string
	}{
		{in: "17*23", want: "391"}, {in: "2^10", want: "1024"}, {in: "2^-1", want: "0.5"}, {in: "-2^2", want: "-4"},
		{in: "(1+2)*3", want: "9"}, {in: "7 % 4", want: "3"},
		{in: "sqrt(2)", want: "1.41421356237"}, {in: "sin(pi/6)", want: "0.5"}, {in: "ln(e)", want: "1"},
		{in: "log(1000)", want: "3"}, {in: "root(27, 3)", want: "3"},
		{in: "sum(n : n=1..100)", want: "5050"}, {in: "product(k : k=1..5)", want: "120"},
		{in: "sum(1/n : n=1..20)", want: "3.59773965714"},
		{in: "2x", wantErr: "unknown identifier: x"}, {in: "3(1+1)", want: "6"}, {in: "π", want: "3.14159265359"},
		{in: "x->x^2+1", want: "x->x^2+1"}, {in: "(x, y)->x*y", want: "(x, y)->x*y"}, {in: "(x->x^2)(3)", want: "9"},
		{in: "max(1, 5, 3)", want: "5"}, {in: "factorial(5)", want: "120"},
		{in: "1/0", want: "inf"}, {in: "foo(1)", wantErr: "unknown function: foo"},
		{in: "1 +", wantErr: "unexpected end of input"}, {in: "1 $ 2", wantErr: `unexpected character '$'`},
		{in: "sum(n : n=1)", wantErr: `sum: expected "..", found ")"`},
		{in: "(x->x)(1, 2)", wantErr: "wrong number of arguments: expected 1, got 2"},
		{in: "a-(b-c)", wantErr: "unknown identifier: a"}, {in: "f(1)", wantErr: "unknown function: f"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			k := newKAlgebra()
			got, err := k.eval(c.in)
			switch {
			case c.wantErr != "":
				if err == nil || err.Error() != c.wantErr {
					t.Errorf("eval(%q) = %q, %v; want the error %q", c.in, got, err, c.wantErr)
				}
			case err != nil || got != c.want:
				t.Errorf("eval(%q) = %q, %v; want %q", c.in, got, err, c.want)
			}
		})
	}
	// Closures and recursion limits.
	k := newKAlgebra()
	for _, in := range []string{"r := a->q->a*q", "f := n->f(n)"} {
		if _, err := k.eval(in); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := k.eval("(r(2))(5)"); err != nil || got != "10" {
		t.Errorf("curried call = %q, %v", got, err)
	}
	if _, err := k.eval("f(1)"); err == nil {
		t.Error("infinite recursion did not stop")
	}
}

func TestChimeraXCommands(t *testing.T) {
	m := NewMachine(MachineConfig{})
	if err := m.Launch("chimerax --cmd 'remotecontrol rest start json true port 8123'"); err != nil {
		t.Fatal(err)
	}
	run := func(cmd string) map[string]any { return appState(t, m, "/chimerax/run", cmd) }
	st := func() map[string]any { return appState(t, m, "/chimerax/state", "") }
	if st()["remotecontrol.port"] != float64(8123) {
		t.Fatalf("port not from --cmd: %v", st()["remotecontrol.port"])
	}
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
	clickOn(t, m, "ChimeraX command line")
	write(t, m, "close\n")
	write(t, m, "open 2olx\n")
	if s := m.State(); s.Fields["cmdline"] != "open 2olx" || st()["models.(1,).name"] != "2olx" {
		t.Errorf("command line %q, state %v", s.Fields["cmdline"], st()["models.(1,).name"])
	}
	// Dragging on the graphics window rotates the view.
	g, _ := FindElement("ChimeraX graphics window")
	c := g.Center()
	m.Input(Event{Kind: EvMoveTo, X: c.X, Y: c.Y, HasXY: true})
	m.Input(Event{Kind: EvDragTo, X: c.X + 40, Y: c.Y, HasXY: true, Button: "left"})
	if st()["view.turn.y"] != float64(20) {
		t.Errorf("drag: turn.y %v", st()["view.turn.y"])
	}
}

func TestCelestia(t *testing.T) {
	m := NewMachine(MachineConfig{})
	if err := m.Launch("/app/bin/celestia-qt6 8000"); err != nil {
		t.Fatal(err)
	}
	dump := func() map[string]any { return appState(t, m, "/dump", "") }
	get := func(path ...string) any {
		var v any = dump()
		for _, p := range path {
			v = v.(map[string]any)[p]
		}
		return v
	}
	if d := get("entity", "Earth", "distance").(float64); math.Abs(d-4*6371) > 1 {
		t.Errorf("initial Earth distance %v", d)
	}
	clickOn(t, m, "Celestia Go to object field")
	write(t, m, "saturn\n")
	if get("selection", "name") != "Saturn" || get("entity", "Saturn", "distance").(float64) > 5*58232 {
		t.Errorf("goto Saturn: %v %v", get("selection", "name"), get("entity", "Saturn", "distance"))
	}
	if get("entity", "Titan", "visible") != true || get("entity", "Mars", "visible") != false {
		t.Error("visibility around Saturn")
	}
	m.Input(Event{Kind: EvScroll, Amount: 3, X: 400, Y: 400, HasXY: true})
	if d := get("entity", "Saturn", "distance").(float64); d >= 4*58232 {
		t.Errorf("zoom in did not approach: %v", d)
	}
	key(t, m, "ctrl", "a")
	write(t, m, "Nowhere\n")
	if get("selection", "name") != "Saturn" {
		t.Error("unknown object changed the selection")
	}
	for _, b := range []string{"Celestia 10x Faster button", "Celestia 10x Faster button", "Celestia Reverse Time button", "Celestia Pause button"} {
		clickOn(t, m, b)
	}
	if get("time", "scale") != float64(-100) || get("time", "pause") != true {
		t.Errorf("time %v", get("time"))
	}
	key(t, m, "space") // no field focused after the buttons: toggles pause
	key(t, m, "k")
	if get("time", "pause") != false || get("time", "scale") != float64(-10) {
		t.Errorf("shortcuts: time %v", get("time"))
	}
	clickOn(t, m, "Celestia Julian date field")
	key(t, m, "ctrl", "a")
	write(t, m, "2451545\n")
	if get("time", "value") != float64(2451545) {
		t.Errorf("JD %v", get("time", "value"))
	}
	clickOn(t, m, "Celestia Orbits checkbox")
	clickOn(t, m, "Celestia Scaled Discs radio")
	clickOn(t, m, "Celestia Low Texture radio")
	if get("config", "render", "orbits") != true || get("config", "starStyle") != float64(2) || get("config", "resolution") != float64(0) {
		t.Errorf("config %v", get("config"))
	}
	for jd, want := range map[float64]string{2451545: "2000 Jan 01 12:00:00 UTC", 2460000.5: "2023 Feb 25 00:00:00 UTC", 2299160.5: "1582 Oct 15 00:00:00 UTC"} {
		if got := calendarDate(jd); got != want {
			t.Errorf("calendarDate(%v) = %q, want %q", jd, got, want)
		}
	}
}

func TestKAlgebraPlots(t *testing.T) {
	k := newKAlgebra()
	cases := []struct {
		in, expr string
		dim      int
		on, off  [][]float64
		err      string
	}{
		{in: "sin(x)", expr: "x->sin(x)", dim: 2, on: [][]float64{{1, math.Sin(1)}}, off: [][]float64{{1, 1}}},
		{in: "x->x^2-4", expr: "x->x^2-4", dim: 2, on: [][]float64{{2, 0}, {-3, 5}}, off: [][]float64{{0, 0}}},
		{in: "x^2+y^2=9", expr: "x^2+y^2=9", dim: 2, on: [][]float64{{3, 0}, {1.8, 2.4}}, off: [][]float64{{1, 1}}},
		{in: "x*y", expr: "(x, y)->x*y", dim: 3, on: [][]float64{{2, 3, 6}}, off: [][]float64{{2, 3, 5}}},
		{in: "x^2+y^2+z^2=8", expr: "x^2+y^2+z^2=8", dim: 3, on: [][]float64{{2, 2, 0}}, off: [][]float64{{0, 0, 0}}},
		{in: "q->6*sin(3*q)", dim: 2, err: "polar"},
		{in: "x+y", dim: 2, err: "cannot appear in an explicit function"},
		{in: "w^2", dim: 2, err: "unknown identifier: w"},
		{in: "(x, y)->x", dim: 2, err: "takes 1 parameter"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			p, err := k.addPlot(c.in, c.dim)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("addPlot(%q) = %v, want error %q", c.in, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Expr != c.expr {
				t.Errorf("expr %q, want %q", p.Expr, c.expr)
			}
			for _, pt := range c.on {
				if !k.onPlot(p, pt) {
					t.Errorf("%v not on %s", pt, p.Expr)
				}
			}
			for _, pt := range c.off {
				if k.onPlot(p, pt) {
					t.Errorf("%v on %s", pt, p.Expr)
				}
			}
		})
	}
}

func TestGRASSCommands(t *testing.T) {
	m := NewMachine(MachineConfig{})
	if err := m.Launch("grass --gui"); err != nil {
		t.Fatal(err)
	}
	gcmd := func(cmd string, kwargs map[string]any) map[string]any {
		b, _ := json.Marshal(map[string]any{"cmd": cmd, "kwargs": kwargs})
		return appState(t, m, "/gcmd", string(b))
	}
	dump := func() map[string]any { return appState(t, m, "/dump", "") }
	if r := gcmd("r.univar", map[string]any{"map": "elevation", "format": "json"}); r["returncode"] != float64(0) {
		t.Fatalf("r.univar: %v", r)
	} else if st := r["stdout"].(map[string]any); st["n"] != float64(grassRows*grassCols) || st["max"].(float64) < st["min"].(float64) {
		t.Errorf("r.univar stdout %v", st)
	}
	clickOn(t, m, "GRASS Console tab")
	clickOn(t, m, "GRASS console")
	for _, line := range []string{
		`r.mapcalc "double = elevation * 2"`,
		`r.mapcalc expression="double = 1"`, // exists without --overwrite
		"g.region raster=elevation",
		"g.remove type=raster name=landuse", // no -f: nothing removed
		"d.rast elevation",
		"d.vect map=roads",
		"v.buffer input=schools output=sb distance=50",
		"g.rename vector=sb,school_buffers",
		"g.copy raster=double,double2",
		"r.slope.aspect elevation=elevation slope=s aspect=a",
		"v.info nothere",
	} {
		write(t, m, line+"\n")
	}
	d := dump()
	rasters := fmt.Sprint(d["raster_list"])
	if rasters != "[a double double2 elevation elevation_tmp landuse s]" {
		t.Errorf("rasters %s", rasters)
	}
	if fmt.Sprint(d["vector_list"]) != "[roads school_buffers schools streams]" {
		t.Errorf("vectors %v", d["vector_list"])
	}
	if fmt.Sprint(d["layers"]) != "[vector/roads raster/elevation]" {
		t.Errorf("layers %v", d["layers"])
	}
	region := d["region"].(map[string]any)
	if region["rows"] != float64(grassRows) || region["n"] != grassN {
		t.Errorf("region %v", region)
	}
	el := d["rasters"].(map[string]any)["elevation"].(map[string]any)
	dbl := d["rasters"].(map[string]any)["double"].(map[string]any)
	if math.Abs(dbl["max"].(float64)-2*el["max"].(float64)) > 1e-6 {
		t.Errorf("double max %v, elevation max %v", dbl["max"], el["max"])
	}
	console := strings.Join(m.(*machine).app.(*grass).console, "\n")
	for _, want := range []string{"To overwrite, use the --overwrite flag", "Nothing removed", "Vector map <nothere> not found"} {
		if !strings.Contains(console, want) {
			t.Errorf("console lacks %q:\n%s", want, console)
		}
	}
	write(t, m, "d.erase\n")
	if len(dump()["layers"].([]any)) != 0 {
		t.Error("d.erase kept layers")
	}
}

func TestReadStateChunkErrors(t *testing.T) {
	m := NewMachine(MachineConfig{Seed: 1})
	png, err := m.Screenshot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadStateChunk(png); err != nil {
		t.Fatal(err)
	}
	corrupt := bytes.Clone(png)
	i := bytes.Index(corrupt, []byte(StateChunkKeyword))
	corrupt[i+len(StateChunkKeyword)+3] ^= 0xff
	plain, _ := screen.EncodePNG(image.NewRGBA(image.Rect(0, 0, 4, 4)))
	for name, data := range map[string][]byte{
		"not a png": []byte("GIF89a"), "crc mismatch": corrupt, "no chunk": plain, "truncated": png[:len(png)/2],
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ReadStateChunk(data); err == nil {
				t.Error("no error")
			}
		})
	}
}

// TestConcurrentUse drives one machine from several goroutines (run with
// -race).
func TestConcurrentUse(t *testing.T) {
	m := NewMachine(MachineConfig{Seed: 1})
	if err := m.Launch("chimerax"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				switch (g + i) % 5 {
				case 0:
					m.Input(Event{Kind: EvClick, X: 300 + i, Y: 736, HasXY: true, Button: "left", Clicks: 1})
				case 1:
					m.Input(Event{Kind: EvWrite, Text: "turn y 1\n"})
				case 2:
					m.AppState("/chimerax/state", nil)
				case 3:
					m.State()
					m.Accessibility()
				case 4:
					if g == 0 && i%10 == 4 {
						if _, err := m.Screenshot(); err != nil {
							t.Error(err)
						}
					}
				}
			}
		}(g)
	}
	wg.Wait()
}

// visibleElements returns the elements the accessibility tree lists.
func visibleElements(m Machine) []Element {
	var out []Element
	tree := m.Accessibility()
	for _, e := range Elements(m.State().App) {
		if strings.Contains(tree, `name="`+e.Label+`"`) {
			out = append(out, e)
		}
	}
	return out
}
