package chimerax

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/desktop/desktoptest"
)

// TestNumpy: arrays print as numpy 1.24's str() with the newlines removed
// (the wants are numpy's own output; the first three are values from the
// real task files).
func TestNumpy(t *testing.T) {
	rep := func(v float64, n int) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	alt := func(a, b float64, n int) []float64 {
		var out []float64
		for range n {
			out = append(out, a, b)
		}
		return out
	}
	var steps []float64
	for i := 0; i < 300; i += 7 {
		steps = append(steps, float64(i))
	}
	for _, c := range []struct {
		a    ndarray
		want string
	}{
		{vector32(f32(-0.30499998), f32(-5.4719996), f32(-11.4869995)), "[ -0.30499998  -5.4719996  -11.4869995 ]"},
		{rgba("#808080"), "[0.5019608 0.5019608 0.5019608 0.       ]"},
		{vector32(f32(-1.37), f32(-6.882), f32(-12.582)), "[ -1.37   -6.882 -12.582]"},
		{matrix(64, 3, 4, []float64{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}), "[[1. 0. 0. 0.] [0. 1. 0. 0.] [0. 0. 1. 0.]]"},
		{matrix(32, 4, 4, []float64{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, -1.5, 2.25, -53, 1}),
			"[[  1.     0.     0.     0.  ] [  0.     1.     0.     0.  ] [  0.     0.     1.     0.  ] [ -1.5    2.25 -53.     1.  ]]"},
		{matrix(32, 4, 4, []float64{f32(0.70710677), 0, f32(-0.70710677), 0, 0, 1, 0, 0, f32(0.70710677), 0, f32(0.70710677), 0, -12.5, 3.25, -150.75, 1}),
			"[[   0.70710677    0.           -0.70710677    0.        ] [   0.            1.            0.            0.        ] [   0.70710677    0.            0.70710677    0.        ] [ -12.5           3.25       -150.75          1.        ]]"},
		{matrix(32, 2, 3, []float64{f32(1e-5), 1, 250, 3.5, -2, 1e9}), "[[ 1.0e-05  1.0e+00  2.5e+02] [ 3.5e+00 -2.0e+00  1.0e+09]]"},
		{vector32(rep(f32(0.12345679), 20)...), "[" + strings.TrimSpace(strings.Repeat("0.12345679 ", 20)) + "]"},
		{ndarray{cols: 30, bits: 64, data: alt(-0.5, 12.25, 15)}, "[" + strings.TrimSpace(strings.Repeat("-0.5  12.25 ", 15)) + "]"},
		{matrix(0, 3, 4, []float64{79, 79, 255, 255, 80, 80, 255, 255, 139, 0, 0, 255}), "[[ 79  79 255 255] [ 80  80 255 255] [139   0   0 255]]"},
		{ndarray{cols: len(steps), data: steps},
			"[  0   7  14  21  28  35  42  49  56  63  70  77  84  91  98 105 112 119 126 133 140 147 154 161 168 175 182 189 196 203 210 217 224 231 238 245 252 259 266 273 280 287 294]"},
		{ndarray{cols: 3, bits: 64, data: []float64{0.1, 1.0 / 3, 2}}, "[0.1        0.33333333 2.        ]"},
		{vector32(0, 0, 0), "[0. 0. 0.]"},
		{matrix(32, 2, 9, rep(f32(0.12345679), 18)),
			"[[0.12345679 0.12345679 0.12345679 0.12345679 0.12345679 0.12345679  0.12345679 0.12345679 0.12345679] [0.12345679 0.12345679 0.12345679 0.12345679 0.12345679 0.12345679  0.12345679 0.12345679 0.12345679]]"},
	} {
		if got := c.a.String(); got != c.want {
			t.Errorf("%v:\n got %s\nwant %s", c.a.data, got, c.want)
		}
	}
}

func TestPyJSON(t *testing.T) {
	tree := newODict().set("a", newODict().set("(1,)", newODict().set("_name", "x<&>\"é").set("v", 1.0))).
		set("l", []any{1, newODict().set("b", true), []any{}}).set("e", newODict()).set("n", nil)
	flat := flatten(tree)
	if got := strings.Join(flat.keys, " "); got != "a.(1,)._name a.(1,).v l.#0 l.#1.b n" {
		t.Errorf("flatten keys %s", got)
	}
	want := "{\n  \"a.(1,)._name\": \"x<&>\\\"é\",\n  \"a.(1,).v\": 1.0,\n  \"l.#0\": 1,\n  \"l.#1.b\": true,\n  \"n\": null\n}"
	if got := string(pyJSON(flat)); got != want {
		t.Errorf("pyJSON:\n%s\nwant\n%s", got, want)
	}
	if got := string(pyJSON(tree)); !strings.Contains(got, "\"l\": [\n    1,\n    {\n      \"b\": true\n    },\n    []\n  ],\n  \"e\": {}") {
		t.Errorf("pyJSON nested:\n%s", got)
	}
}

// machine starts ChimeraX as the benchmark does and returns the machine,
// the app and a function that runs commands through the REST server
// (GET /run?command=), returning the decoded reply.
func machine(t *testing.T) (*desktoptest.Machine, *chimerax, *desktop.UI, func(cmds ...string) restReply) {
	t.Helper()
	spec, r := desktoptest.Watch[*chimerax](Spec())
	m := desktoptest.Start(t, spec, "chimerax --cmd 'remotecontrol rest start json true port 8000'")
	c, u := r.App, r.UI
	return m, c, u, func(cmds ...string) restReply {
		t.Helper()
		resp, status, ok := c.Serve(u, "GET", "/run", url.Values{"command": cmds}, nil)
		if !ok || status != 200 {
			t.Fatalf("%v: %d %s", cmds, status, resp)
		}
		var r restReply
		if err := json.Unmarshal(resp, &r); err != nil {
			t.Fatalf("%v: %v: %s", cmds, err, resp)
		}
		return r
	}
}

type restReply struct {
	JSON   []any               `json:"json values"`
	Python []any               `json:"python values"`
	Log    map[string][]string `json:"log messages"`
	Error  *cxError            `json:"error"`
}

func TestRESTServer(t *testing.T) {
	_, c, u, run := machine(t)
	if c.restPort != 8000 {
		t.Fatalf("port not from --cmd: %v", c.restPort)
	}
	r := run("log clear")
	if r.Error != nil || len(r.JSON) != 1 || len(r.Python) != 1 || r.JSON[0] != nil || len(r.Log) != 4 {
		t.Errorf("log clear: %+v", r)
	}
	for _, level := range []string{"note", "warning", "error", "bug"} {
		if r.Log[level] == nil {
			t.Errorf("no %q log level: %+v", level, r.Log)
		}
	}
	r = run("open 2olx; turn y 1")
	if r.Error != nil || len(r.JSON) != 2 || len(r.Log["note"]) == 0 || !strings.HasSuffix(r.Log["note"][0], "\n") {
		t.Errorf("open; turn: %+v", r)
	}
	if strings.Contains(strings.Join(c.log, "\n"), "> open") {
		t.Error("the REST server echoed the command in the log")
	}
	r = run("frobnicate")
	if r.Error == nil || r.Error.Type != "UserError" || r.Error.Message != "Unknown command: frobnicate" ||
		len(r.Log["note"]) != 1 || r.Log["note"][0] != "Unknown command: frobnicate\n" || len(r.JSON) != 0 {
		t.Errorf("unknown command: %+v", r)
	}
	r = run("turn y 1", "style ball", "turn q 1", "turn y 2") // stops at the error
	if r.Error == nil || len(r.JSON) != 2 || c.rot[1] != 2 {
		t.Errorf("several commands: %+v, turn %v", r, c.rot)
	}
	// No command; POST with a form body; other paths and methods.
	if resp, status, _ := c.Serve(u, "GET", "/run", nil, nil); status != 200 || !strings.Contains(string(resp), `"error":["\"command\" parameter missing\n"]`) {
		t.Errorf("no command: %d %s", status, resp)
	}
	if resp, status, _ := c.Serve(u, "POST", "/run", nil, []byte("command=turn+x+90")); status != 200 || c.rot[0] != 90 {
		t.Errorf("POST form: %d %s, turn %v", status, resp, c.rot)
	}
	if _, status, _ := c.Serve(u, "HEAD", "/run", url.Values{"command": {"turn x 1"}}, nil); status != 501 {
		t.Errorf("HEAD /run: %d", status)
	}
	for _, p := range []string{"/chimerax/run", "/chimerax/state", "/", "/run/"} {
		if _, _, ok := c.Serve(u, "GET", p, url.Values{"command": {"turn x 1"}}, nil); ok {
			t.Errorf("%s is served", p)
		}
	}
}

func TestChimeraXCommands(t *testing.T) {
	m, c, _, run := machine(t)
	const p1, p2 = "_state_containers.models._models.(1,).", "_state_containers.models._models.(2,)."
	const view = p1 + "_atoms_drawing._draw_shape.bindings._opengl_context.window.view."
	cases := []struct {
		cmd   string
		key   string
		want  any
		error bool
	}{
		{"style stick", "", nil, true}, // no models
		{"set bgColor gray", "main_view._background_rgba", "[0.5019608 0.5019608 0.5019608 0.       ]", false},
		{"open 4hhb", p1 + "_name", "4hhb", false},
		{"open 1crn", p2 + "_name", "1crn", false},
		{"set bgColor white", view + "_background_rgba", "[1. 1. 1. 0.]", false},
		{"lighting soft", view + "_render.lighting.ambient_light_intensity", 1.5, false},
		{"lighting flat", view + "_render.silhouette.depth_jump", 0.01, false},
		{"lighting simple", view + "_render.lighting.ambient_light_intensity", 0.4, false},
		{"lighting weird", "", nil, true},
		{"lighting full", view + "_render.lighting.multishadow", 64, false},
		{"graphics silhouettes false", view + "_render.silhouette.enabled", false, false},
		{"surface #2", "_state_containers.models._models.(2, 1)._name", "1crn_A SES surface", false},
		{"~surface #2", "_state_containers.models._models.(2, 1)._display", false, false},
		{"hbonds #1", "_state_containers.models._models.(1, 1)._pbond_drawing.name", "pbonds", false},
		{"turn y 90; turn y 300", view + "_render.current_model_view_matrix._m44", nil, false},
		{"turn q 5", "", nil, true},
		{"close #1", p1 + "_name", nil, false},
		{"open /home/user/nothere.pdb", "", nil, true},
		{"frobnicate", "", nil, true},
		{"log clear", "_state_containers.tools._tool_instances.1.page_source", "<html><head><title>Log</title></head><body></body></html>", false},
	}
	for _, cs := range cases {
		t.Run(cs.cmd, func(t *testing.T) {
			reply := run(cs.cmd)
			if (reply.Error != nil) != cs.error {
				t.Fatalf("%q: reply %+v", cs.cmd, reply)
			}
			if cs.key != "" && cs.want != nil {
				if got := flatDump(c)[cs.key]; fmt.Sprint(got) != fmt.Sprint(cs.want) {
					t.Errorf("%q: %s = %v, want %v", cs.cmd, cs.key, got, cs.want)
				}
			}
		})
	}
	if c.rot[1] != 30 {
		t.Errorf("turn y: %v", c.rot)
	}
	// close #1 left #2; the view is reached through it.
	if _, ok := flatDump(c)["_state_containers.models._models.(2,)._atoms_drawing._draw_shape.bindings._opengl_context.window.view._background_rgba"]; !ok {
		t.Error("no view under the first open model")
	}
	// Selection and info.
	run("close", "open 2olx")
	if r := run("select /A"); !strings.HasPrefix(r.Log["note"][0], fmt.Sprintf("%d atoms, 4 residues, 1 models selected", 54-6)) {
		t.Errorf("select /A: %v", r.Log)
	}
	r := run("info sel")
	lines := strings.Split(strings.TrimSpace(strings.Join(r.Log["note"], "")), "\n")
	if len(lines) != 48 || lines[0] != "atom id /A:1@N idatm_type Npl" {
		t.Errorf("info sel: %d lines: %v", len(lines), lines[:min(3, len(lines))])
	}
	run("color red")
	r = run("info rescolor /A")
	if got := strings.TrimSpace(strings.Join(r.Log["note"], "")); got != "#1/A:1 color #ff0000\n#1/A:2 color #ff0000\n#1/A:3 color #ff0000\n#1/A:4 color #ff0000" {
		t.Errorf("info rescolor: %q", got)
	}
	run("select :HOH")
	if r := run("info sel"); !strings.Contains(r.Log["note"][0], "atom id /A:201@O idatm_type O3") {
		t.Errorf("info sel waters: %v", r.Log)
	}
	// addh logs the termini message the real tasks match.
	run("addh")
	if src, _ := flatDump(c)["_state_containers.tools._tool_instances.1.page_source"].(string); !strings.Contains(src, "termini: <br>") {
		t.Errorf("page_source: %.300s", src)
	}
	// The command line keeps the command selected after Enter; destroy
	// removes it.
	m.Click("ChimeraX command line")
	m.Write("close\n")
	m.Write("open 1crn\n")
	if s := m.State(); s.Fields["cmdline"] != "open 1crn" || flatDump(c)[p1+"_name"] != "1crn" {
		t.Errorf("command line %q, state %v", s.Fields["cmdline"], flatDump(c)[p1+"_name"])
	}
	run("destroy")
	if c.Visible("cmdline") {
		t.Error("the command line shows after destroy")
	}
	// Dragging on the graphics window rotates the view.
	g, _ := m.Catalog.FindElement("ChimeraX graphics window")
	ctr := g.Center()
	before := c.rot[1]
	m.Input(desktop.Event{Kind: desktop.EvMoveTo, X: ctr.X, Y: ctr.Y, HasXY: true}, desktop.Event{Kind: desktop.EvDragTo, X: ctr.X + 40, Y: ctr.Y, HasXY: true, Button: "left"})
	if c.rot[1] != normDeg(before+20) {
		t.Errorf("drag: turn.y %v", c.rot[1])
	}
}

// TestStatesCommand: states DIR STAMP writes DIR/STAMP.json, a flat
// object whose keys are in walk order, and DIR/STAMP.raw.json.
func TestStatesCommand(t *testing.T) {
	_, c, u, run := machine(t)
	run("open 3ppd", "turn y 1")
	if r := run("states /home/user/Downloads 1767323045000"); r.Error != nil {
		t.Fatalf("states: %+v", r)
	}
	flat, ok := u.ReadFile("/home/user/Downloads/1767323045000.json")
	raw, ok2 := u.ReadFile("~/Downloads/1767323045000.raw.json")
	if !ok || !ok2 {
		t.Fatal("no dump files")
	}
	var d map[string]any
	if err := json.Unmarshal([]byte(flat), &d); err != nil {
		t.Fatal(err)
	}
	var nested map[string]any
	if err := json.Unmarshal([]byte(raw), &nested); err != nil || nested["_state_containers"] == nil {
		t.Fatalf("raw dump: %v", err)
	}
	for key, want := range map[string]any{
		"_state_containers.models._models.(1,)._name":    "3ppd",
		"_state_containers.models._models.(1,)._display": true,
		"_state_containers.models._models.(1,).position": "[[1. 0. 0. 0.] [0. 1. 0. 0.] [0. 0. 1. 0.]]",
	} {
		if d[key] != want {
			t.Errorf("%s = %v, want %v", key, d[key], want)
		}
	}
	min, _ := d["_state_containers.models._models.(1,)._redraw_needed.cached_drawing_bounds.xyz_min"].(string)
	if !strings.HasPrefix(min, "[") || !strings.HasSuffix(min, "]") || strings.Count(min, ".") != 3 {
		t.Errorf("xyz_min %q", min)
	}
	if !strings.HasPrefix(flat, "{\n  \"_state_containers.models._models.(1,)._name\": \"3ppd\",\n") {
		t.Errorf("dump starts %.120q", flat)
	}
	// The style changes the bounds, as ChimeraX's drawn radii do.
	run("style sphere", "show atoms", "states ~/Downloads s")
	after, _ := u.ReadFile("~/Downloads/s.json")
	var d2 map[string]any
	_ = json.Unmarshal([]byte(after), &d2)
	if d2["_state_containers.models._models.(1,)._redraw_needed.cached_drawing_bounds.xyz_min"] == min {
		t.Error("sphere style kept the bounds")
	}
	// A missing folder is Python's FileNotFoundError.
	if r := run("states /nowhere x"); r.Error == nil || r.Error.Type != "FileNotFoundError" {
		t.Errorf("states into a missing folder: %+v", r)
	}
	if len(flatDump(c)) != len(d2) {
		t.Errorf("the session has %d keys, the dump %d", len(flatDump(c)), len(d2))
	}
}

// TestAlphaFoldMatch: the model comes from ChimeraX's cache, written
// there when missing.
func TestAlphaFoldMatch(t *testing.T) {
	_, c, u, run := machine(t)
	if _, ok := u.ReadFile(alphaFoldFile("A8Z1J3")); !ok {
		t.Fatal("A8Z1J3 is not cached in the snapshot")
	}
	if r := run("alphafold match A8Z1J3", "color bypolymer"); r.Error != nil || len(c.models) != 1 || c.models[0].Name != "AlphaFold A8Z1J3" {
		t.Fatalf("alphafold match: %+v %v", r, c.models)
	}
	run("alphafold match P69905")
	if text, ok := u.ReadFile(AlphaFoldCache + "/AF-P69905-F1-model_v4.cif"); !ok || !strings.HasPrefix(text, "data_AF-P69905-F1") {
		t.Errorf("P69905 not cached: %q", text)
	}
	if r := run("alphafold match x"); r.Error == nil {
		t.Error("a bad accession is accepted")
	}
}

// flatDump is the flat states dump of the session, its values decoded.
func flatDump(c *chimerax) map[string]any {
	d := flatten(c.sessionTree())
	out := make(map[string]any, len(d.keys))
	for _, k := range d.keys {
		out[k] = d.vals[k]
	}
	return out
}
