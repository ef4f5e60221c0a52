package kalgebra

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/sim/desktop/desktoptest"
)

func TestNlohmannNumber(t *testing.T) {
	for lit, want := range map[string]string{
		"-13": "-13", "0": "0", "-0": "0", "11": "11", "9223372036854775807": "9223372036854775807",
		"18446744073709551615": "18446744073709551615", "100000000000000000000": "1e+20",
		"0.42": "0.42", "0.5219615556186337": "0.5219615556186337", "-1.0": "-1.0", "-0.0": "-0.0", "0.0": "0.0",
		"2.0": "2.0", "1e2": "100.0", "16852337.69353376": "16852337.69353376", "-358.7036": "-358.7036",
		"0.0001": "0.0001", "1e-05": "1e-05", "1e-7": "1e-07", "0.00012": "0.00012", "1.5e16": "1.5e+16",
		"1234567890123456.0": "1.234567890123456e+15", "123456789012345.6": "123456789012345.6",
		"2.5e-300": "2.5e-300", "1e400": "null",
	} {
		if got := NlohmannNumber(lit); got != want {
			t.Errorf("NlohmannNumber(%s) = %s, want %s", lit, got, want)
		}
	}
}

func TestStoi(t *testing.T) {
	for s, want := range map[string]int{"1": 1, " 2\n": 2, "-3": -3, "+4": 4, "1.9": 1, "7abc": 7, "0": 0} {
		if got, ok := stoi(s); !ok || got != want {
			t.Errorf("stoi(%q) = %d, %v; want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "abc", "-", " ", "99999999999", `"1"`} {
		if got, ok := stoi(s); ok {
			t.Errorf("stoi(%q) = %d, want an error", s, got)
		}
	}
}

// server starts KAlgebra on a machine and returns a function that sends
// one request to its server.
func server(t *testing.T) (*desktoptest.Machine, *kalgebra, func(method, path, body string) (string, int)) {
	t.Helper()
	spec, r := desktoptest.Watch[*kalgebra](Spec())
	m := desktoptest.Start(t, spec, "LD_LIBRARY_PATH=/home/user/6.5.0/gcc_64/lib /app/bin/kalgebra 8000")
	return m, r.App, r.Call
}

func TestServerRoutes(t *testing.T) {
	_, k, call := server(t)
	type want struct {
		status int
		body   string // exact; "" with status 200: not checked here
	}
	check := func(method, path, body string, w want) string {
		t.Helper()
		got, status := call(method, path, body)
		if status != w.status || (w.body != "" || status != 200) && got != w.body {
			t.Errorf("%s %s %q = %d %q, want %d %q", method, path, body, status, got, w.status, w.body)
		}
		return got
	}
	check("GET", "/version", "", want{200, "1.1"})
	check("HEAD", "/version", "", want{200, "1.1"})
	check("POST", "/version", "x", want{405, ""})
	check("GET", "/eqns", "", want{404, ""})
	check("POST", "/func2d", `{"expr": "x"}`, want{404, ""})
	check("GET", "/func/2d", "", want{405, ""})
	check("GET", "/tab", "", want{405, ""})

	// /tab: the bare integer; a JSON object is no integer.
	check("POST", "/tab", "2", want{200, "OK"})
	if k.Open != 2 {
		t.Errorf("tab %d, want 2", k.Open)
	}
	check("POST", "/tab", `{"index": 1}`, want{400, ""})
	check("POST", "/tab", "", want{400, ""})
	check("HEAD", "/tab", "", want{400, ""})
	check("POST", "/tab", "7", want{200, "OK"}) // QTabWidget ignores it
	if k.Open != 2 {
		t.Errorf("tab %d after /tab 7, want 2", k.Open)
	}
	check("POST", "/tab", "1", want{200, "OK"})

	// /add/2d and /add/3d take the raw expression and always answer OK.
	check("POST", "/add/2d", "x->x^2", want{200, "OK"})
	check("POST", "/add/2d", "x^2+y^2=9", want{200, "OK"})
	check("POST", "/add/2d", "q->6*sin(3*q)", want{200, "OK"}) // not simulated: dropped
	check("POST", "/add/2d", `{"expr": "x"}`, want{200, "OK"}) // not an expression: dropped
	check("GET", "/add/2d", "", want{405, ""})
	if got := len(k.plotsOf(2)); got != 2 {
		t.Errorf("%d 2D plots, want 2", got)
	}
	check("POST", "/add/3d", "x*y", want{200, "OK"})
	check("POST", "/add/3d", "x^2-y^2=2", want{200, "OK"}) // replaces x*y
	if ps := k.plotsOf(3); len(ps) != 1 || ps[0].Expr != "(x, y)->x^2-y^2-2" {
		t.Errorf("3D plots %v", ps)
	}
	check("POST", "/add/calc", "a := 3*4", want{200, "OK"})

	// /vars: names to strings.
	var vars map[string]any
	if err := json.Unmarshal([]byte(check("GET", "/vars", "", want{200, ""})), &vars); err != nil || vars["a"] != "12" || vars["pi"] != "3.14159265359" {
		t.Errorf("/vars = %v, %v", vars, err)
	}

	// /func/2d: one object per plot, point keys as nlohmann prints them.
	body := check("POST", "/func/2d", "[[-13, -15], [3, 9], [0, -3.0], [1.8, 2.4], [0.42, 0.1764]]", want{200, ""})
	var plots []map[string]any
	if err := json.Unmarshal([]byte(body), &plots); err != nil || len(plots) != 2 {
		t.Fatalf("/func/2d = %s, %v", body, err)
	}
	wantPlots := []map[string]any{
		{"expr": "x->x^2", "res": float64(832), "(-13, -15)": false, "(3, 9)": true, "(0, -3.0)": false, "(1.8, 2.4)": false, "(0.42, 0.1764)": true},
		{"expr": "(x, y)->x^2+y^2-9", "res": float64(832), "(-13, -15)": false, "(3, 9)": false, "(0, -3.0)": true, "(1.8, 2.4)": true, "(0.42, 0.1764)": false},
	}
	for i, w := range wantPlots {
		for key, v := range w {
			if plots[i][key] != v {
				t.Errorf("plot %d: %s = %v, want %v (%v)", i, key, plots[i][key], v, plots[i])
			}
		}
		if c, _ := plots[i]["color"].(string); len(c) != 7 || c[0] != '#' || len(plots[i]) != 3+5 {
			t.Errorf("plot %d: color %q, keys %v", i, c, plots[i])
		}
	}
	check("POST", "/func/2d", "[]", want{200, ""})
	check("POST", "/func/2d", `{"b": [3, 9], "a": [1, 1]}`, want{200, ""}) // an object's values are the points
	for _, bad := range []string{"", "[[1]]", `[["a", 1]]`, "[1, 2]", "[[1, 2]] x", "[[1, 2]"} {
		check("POST", "/func/2d", bad, want{400, ""})
	}
	check("HEAD", "/func/2d", "", want{400, ""})

	// /func/3d: one object for the 3D plot.
	body = check("POST", "/func/3d", "[[-6.58, 20, -358.7036], [1, 1, 1], [16, -3, 245.0]]", want{200, ""})
	var p3 map[string]any
	if err := json.Unmarshal([]byte(body), &p3); err != nil {
		t.Fatal(err)
	}
	for key, v := range map[string]any{"expr": "(x, y)->x^2-y^2-2", "style": float64(2), "(-6.58, 20, -358.7036)": true, "(1, 1, 1)": false, "(16, -3, 245.0)": true} {
		if p3[key] != v {
			t.Errorf("/func/3d: %s = %v, want %v (%v)", key, p3[key], v, p3)
		}
	}
	check("POST", "/func/3d", "[[1, 2]]", want{400, ""})

	// With no plots: [] and {"expr": "", "style": 2}, whatever the points.
	k.plots = nil
	check("POST", "/func/2d", "[[1]]", want{200, "[]"})
	check("POST", "/func/3d", "[[1]]", want{200, `{"expr":"","style":2}`})
}

// TestOnPlotFloats: the server compares as C++ floats, so a large value
// passes within a float's spacing (2 at 1.7e7) and a point off by 1e-3
// fails.
func TestOnPlotFloats(t *testing.T) {
	k := newKAlgebra()
	p, err := k.addPlot("x->e^x-1", 2)
	if err != nil {
		t.Fatal(err)
	}
	x := 16.64
	y := math.Exp(x) - 1
	for _, c := range []struct {
		y    float64
		want bool
	}{{y, true}, {y + 1, true}, {y + 4, false}, {0.5, false}} {
		if got := k.onPlot(p, []float64{x, c.y}); got != c.want {
			t.Errorf("onPlot(%v, %v) = %v", x, c.y, got)
		}
	}
	if p2, _ := k.addPlot("x->x", 2); k.onPlot(p2, []float64{0.5, 0.5 + 1e-3}) || !k.onPlot(p2, []float64{0.5, 0.5 + 5e-5}) {
		t.Error("tolerance is not 1e-4")
	}
	if !strings.HasPrefix(ServerVersion, "1.") {
		t.Error(ServerVersion)
	}
}

// TestServeState: a screenshot's state answers /vars and /version as the
// running app does, and nothing else.
func TestServeState(t *testing.T) {
	m, _, _ := server(t)
	spec := Spec()
	m.ServeState(spec, nil, "GET", "/vars", nil, nil)
	m.Click("KAlgebra expression input")
	m.Write("p := 3*4\n")
	m.Write("q := p/5\n")
	if b, _ := m.ServeState(spec, nil, "GET", "/vars", nil, nil); !strings.Contains(string(b), `"p":"12"`) {
		t.Errorf("/vars: %q", b)
	}
	m.ServeState(spec, nil, "HEAD", "/vars", nil, nil)
	m.ServeState(spec, nil, "POST", "/vars", nil, []byte("x"))
	m.ServeState(spec, nil, "GET", "/version", nil, nil)
	for _, p := range []string{"/func/2d", "/tab", "/add/calc", "/nothing"} {
		if _, _, ok := ServeState(nil, m.ChunkState(), "POST", p, nil, []byte("[[0, 0]]")); ok {
			t.Errorf("POST %s answered from the state", p)
		}
	}
}
