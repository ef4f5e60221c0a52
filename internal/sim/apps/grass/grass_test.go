package grass

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/sim/desktop/desktoptest"
)

// server starts GRASS as the benchmark does and returns the machine, the
// app and a function that sends one request to its server.
func server(t *testing.T) (*desktoptest.Machine, *grass, func(method, path, body string) (string, int)) {
	t.Helper()
	spec, r := desktoptest.Watch[*grass](Spec())
	m := desktoptest.Start(t, spec, `gnome-terminal -- /bin/bash -ic "FLASK_PORT=8000 grass --gui /home/user/grassdata/world_latlong_wgs84/PERMANENT"`)
	return m, r.App, r.Call
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v: %.300s", err, s)
	}
	return v
}

func TestServerRoutes(t *testing.T) {
	_, g, call := server(t)
	if g.loc.Name != WorldLocation {
		t.Fatalf("started in %s", g.loc.Name)
	}
	routes := []desktoptest.Route{
		{Method: "GET", Path: "/version", Status: 200, Want: "1.0"},
		{Method: "HEAD", Path: "/version", Status: 200, Want: "1.0"},
		{Method: "POST", Path: "/version", Body: "{}", Status: 405, Want: "-"},
		{Method: "GET", Path: "/init/map", Status: 405, Want: "-"},
		{Method: "HEAD", Path: "/gcmd", Status: 405, Want: "-"},
		{Method: "GET", Path: "/quit", Status: 404},
		{Method: "GET", Path: "/gcmd2", Status: 404},
		{Method: "POST", Path: "/init/map", Body: "{", Status: 400, Want: "-"},
		{Method: "POST", Path: "/init/map", Body: "[1]", Status: 500, Want: "-"},
		{Method: "POST", Path: "/init/map", Body: `{"grassdb": "/home/user/grassdata", "location": "natural_earth_dataset"}`, Status: 500, Want: "-"},
		{Method: "POST", Path: "/init/map", Body: `{"grassdb": "/home/user/grassdata", "location": "nowhere", "mapset": "PERMANENT"}`, Status: 200, Want: "ERROR"},
		{Method: "POST", Path: "/init/map", Body: `{"grassdb": "/tmp", "location": "natural_earth_dataset", "mapset": "PERMANENT"}`, Status: 200, Want: "ERROR"},
		{Method: "POST", Path: "/init/map", Body: `{"grassdb": "/home/user/grassdata", "location": "natural_earth_dataset", "mapset": "user1"}`, Status: 200, Want: "ERROR"},
		{Method: "POST", Path: "/init/map", Body: `{"grassdb": "/home/user/grassdata", "location": "natural_earth_dataset", "mapset": "PERMANENT"}`, Status: 200, Want: "OK"},
		{Method: "POST", Path: "/init/layer", Body: `{"query": {"name": "natural_earth"}}`, Status: 200, Want: "OK"},
		{Method: "POST", Path: "/init/layer", Body: `{"query": {"name": "boundary_region"}}`, Status: 200, Want: "ERROR"}, // another location: a modal dialog
		{Method: "POST", Path: "/init/layer", Body: `{"query": {"name": "nothing"}}`, Status: 200, Want: "ERROR"},
		{Method: "POST", Path: "/init/layer", Body: `{"query": ["countries"]}`, Status: 200, Want: "ERROR"},
		{Method: "POST", Path: "/init/layer", Body: `{"query": {"type": "location", "name": "natural_earth_dataset"}}`, Status: 200, Want: "OK"},
		{Method: "POST", Path: "/init/layer", Body: `{"query": {"name": "countries", "type": "vector"}}`, Status: 200, Want: "OK"},
		{Method: "POST", Path: "/init/layer", Body: `{}`, Status: 500, Want: "-"},
		{Method: "POST", Path: "/init/scale", Body: `{"scale": "25"}`, Status: 200, Want: "ERROR"},
		{Method: "POST", Path: "/init/scale", Body: `{"scale": 25}`, Status: 200, Want: "OK"},
		{Method: "POST", Path: "/init/scale", Body: `{}`, Status: 500, Want: "-"},
		{Method: "POST", Path: "/gcmd", Body: `{"cmd": "g.list"}`, Status: 500, Want: "-"},
		{Method: "POST", Path: "/gcmd", Body: `{"cmd": "g.list", "kwargs": [1]}`, Status: 500, Want: "-"},
		{Method: "POST", Path: "/gcmd", Body: `{"cmd": 5, "kwargs": {}}`, Status: 200, Want: "ERROR"},
		{Method: "POST", Path: "/gcmd", Body: `{"cmd": "g.list", "kwargs": {"type": "raster", "format": "json"}}`, Status: 500, Want: "-"}, // plain text is no JSON
	}
	for i, got := range desktoptest.CheckRoutes(t, call, routes) {
		if r := routes[i]; r.Status == 405 && !strings.Contains(got, "<title>405 Method Not Allowed</title>") {
			t.Errorf("%s %s: not Werkzeug's 405 page: %q", r.Method, r.Path, got)
		}
	}

	// The dump's schema.
	body, _ := call("GET", "/dump", "")
	d := decode(t, body)
	for _, k := range []string{"layers", "windows", "toolbars", "statusbar", "region", "output"} {
		if _, ok := d[k]; !ok || len(d) != 6 {
			t.Errorf("dump lacks %q: %v", k, d)
		}
	}
	layers := d["layers"].([]any)
	if len(layers) != 2 || layers[0].(map[string]any)["name"] != "natural_earth@PERMANENT" || layers[1].(map[string]any)["name"] != "countries@PERMANENT" {
		t.Errorf("layers %v", layers)
	}
	l1 := layers[1].(map[string]any)
	if l1["type"] != "vector" || l1["opacity"] != 1.0 || fmt.Sprint(l1["cmd"]) != "[d.vect map[map:countries@PERMANENT]]" {
		t.Errorf("layer %v", l1)
	}
	w := d["windows"].([]any)[1].(map[string]any)
	data := w["_data"].([]any)
	if w["name"] != "countries@PERMANENT" || w["_text"] != "countries@PERMANENT" || data[1].(map[string]any)["name"] != "d.vect" {
		t.Errorf("window %v", w)
	}
	if tb := d["toolbars"].(map[string]any); tb["shown"] != true || tb["layer"] != nil || fmt.Sprint(tb["keys"]) != "[map]" {
		t.Errorf("toolbars %v", tb)
	}
	if sb := d["statusbar"].(map[string]any); sb["scale"] != 25.0 || sb["mode"] != 0.0 {
		t.Errorf("statusbar %v", sb)
	}
	region := d["region"].(map[string]any)
	for _, k := range []string{"n", "s", "e", "w", "nsres", "ewres", "rows", "cols", "cells", "center_easting", "center_northing", "projection", "zone"} {
		if _, ok := region[k]; !ok {
			t.Errorf("region lacks %s: %v", k, region)
		}
	}
	// Scale 25 (map units per metre of screen) about the centre (0, 0).
	if width := region["e"].(float64) - region["w"].(float64); math.Abs(width-25*float64(displayCols())/ppm) > 1e-9 || region["center_easting"] != 0.0 {
		t.Errorf("region %v", region)
	}

	// /gcmd: stdout parsed when format=json, text otherwise; not in the console.
	before := len(g.console)
	body, status := call("POST", "/gcmd", `{"cmd": "v.db.select", "kwargs": {"map": "countries@PERMANENT", "format": "json"}}`)
	r := decode(t, body)
	out, ok := r["stdout"].(map[string]any)
	if status != 200 || r["returncode"] != 0.0 || !ok || len(r) != 2 {
		t.Fatalf("/gcmd json: %d %.300s", status, body)
	}
	cols := out["info"].(map[string]any)["columns"].([]any)
	recs := out["records"].([]any)
	if cols[0].(map[string]any)["name"] != "cat" || cols[0].(map[string]any)["sql_type"] != "INTEGER" || len(recs) != len(countryNames) || recs[0].(map[string]any)["cat"] != 1.0 {
		t.Errorf("v.db.select json: %v / %v", cols, recs[0])
	}
	body, _ = call("POST", "/gcmd", `{"cmd": "v.db.select", "kwargs": {"map": "countries", "flags": "c", "where": "NAME='Bulgaria'"}}`)
	if r := decode(t, body); !strings.HasPrefix(r["stdout"].(string), "4|Bulgaria|") {
		t.Errorf("v.db.select where: %v", r)
	}
	body, _ = call("POST", "/gcmd", `{"cmd": "r.univar", "kwargs": {"map": "nothere"}}`)
	if r := decode(t, body); r["returncode"] != 1.0 || r["stdout"] != "" {
		t.Errorf("failing module: %v", r)
	}
	if len(g.console) != before {
		t.Error("/gcmd wrote to the console")
	}

	// /init/cmd disables the console.
	if got, _ := call("GET", "/init/cmd", ""); got != "OK" || !g.cmdDisabled {
		t.Errorf("/init/cmd: %q", got)
	}
}

func TestGRASSCommands(t *testing.T) {
	m, g, call := server(t)
	call("POST", "/init/map", `{"grassdb": "/home/user/grassdata", "location": "grassdata_piemonte_utm32n_wgs84_grass7", "mapset": "PERMANENT"}`)
	output := func() string { return g.dump()["output"].(string) }
	m.Click("GRASS Console tab")
	m.Click("GRASS console")
	// want is what the console shows after the line, if anything.
	for _, c := range []struct{ line, want string }{
		{line: `r.mapcalc "double = elevation * 2"`},
		{line: `r.mapcalc expression="double = 1"`, want: "To overwrite, use the --overwrite flag"}, // exists without --overwrite
		{line: "g.region raster=elevation"},
		{line: "g.remove type=raster name=lakes", want: "Nothing removed"}, // no -f: nothing removed
		{line: "d.rast elevation"},
		{line: "d.vect map=roadsmajor color=255:255:255:255"},
		{line: "v.buffer input=schools output=sb distance=50"},
		{line: "g.rename vector=sb,school_buffers"},
		{line: "g.copy raster=double,double2"},
		{line: "r.slope.aspect elevation=elevation slope=s aspect=a"},
		{line: "v.info nothere", want: "Vector map <nothere> not found"},
		{line: `v.db.addcolumn map=boundary_region columns="COLOR varchar(20)"`},
		{line: "v.db.dropcolumn map=boundary_region columns=ISTAT"},
		{line: "v.db.select map=boundary_region", want: "cat|NOME|COLOR\n1|TORINO|"},
		{line: "v.to.db -p map=hospitals option=coor", want: "cat|x|y|z\n1|"},
		{line: "v.info map=boundary_region@PERMANENT", want: "Number of areas:        8"},
	} {
		m.Write(c.line + "\n")
		if out := output(); !strings.Contains(out, c.line+"\n") || !strings.Contains(out, c.want) {
			t.Errorf("%s: output lacks the command or %q:\n%s", c.line, c.want, out[max(0, len(out)-600):])
		}
	}
	rs := fmt.Sprint(slices.Sorted(maps.Keys(g.rasters())))
	if rs != "[a double double2 elevation lakes s]" {
		t.Errorf("rasters %s", rs)
	}
	if vs := fmt.Sprint(slices.Sorted(maps.Keys(g.vectors()))); !strings.Contains(vs, "school_buffers") || strings.Contains(vs, " sb ") {
		t.Errorf("vectors %s", vs)
	}
	d := g.dump()
	var names []string
	for _, l := range d["layers"].([]any) {
		names = append(names, l.(map[string]any)["name"].(string))
	}
	if fmt.Sprint(names) != "[elevation@PERMANENT roadsmajor@PERMANENT]" {
		t.Errorf("layers (bottom first) %v", names)
	}
	for _, p := range d["windows"].([]any)[1].(map[string]any)["_data"].([]any)[1].(map[string]any)["params"].([]any) {
		if p := p.(map[string]any); p["name"] == "color" && p["value"] != "255:255:255:255" {
			t.Errorf("color param %v", p)
		}
	}
	dbl, el := g.rasters()["double"], g.rasters()["elevation"]
	_, _, dmx, _, _, _ := rasterStats(dbl.Data)
	_, _, emx, _, _, _ := rasterStats(el.Data)
	if math.Abs(dmx-2*emx) > 1e-6 {
		t.Errorf("double max %v, elevation max %v", dmx, emx)
	}
	// g.region keeps the extent and adjusts the resolution.
	m.Write("g.region n=5100000 s=4900000 res=30000\n")
	if r := g.region; r.N != 5100000 || r.S != 4900000 || math.Abs(r.NSRes-200000.0/7) > 1e-6 {
		t.Errorf("region %+v", r)
	}
	m.Write("d.erase\n")
	if len(g.dump()["layers"].([]any)) != 0 {
		t.Error("d.erase kept layers")
	}
	m.Write("g.mapset mapset=PERMANENT location=natural_earth_dataset\n")
	if g.loc.Name != NaturalEarth {
		t.Errorf("g.mapset: %s", g.loc.Name)
	}
	// The zoom buttons halve and double the scale.
	s := g.scale
	m.Click("GRASS Zoom In button")
	if g.scale != s/2 {
		t.Errorf("zoom in: %v → %v", s, g.scale)
	}
}

// TestServeState: a screenshot's state answers /dump and /version as the
// running app does, and nothing else; what the window shows beyond the
// dump (the open tab, the console's scroll and prompt) is in the state.
func TestServeState(t *testing.T) {
	m, _, call := server(t)
	spec := Spec()
	m.ServeState(spec, nil, "GET", "/dump", nil, nil)
	before := m.State().AppState
	m.Click("GRASS Console tab")
	if st := m.State().AppState; st["tab"] != "console" || reflect.DeepEqual(st, before) {
		t.Errorf("the Console tab is open; state %v", st["tab"])
	}
	m.Click("GRASS console")
	m.Write("g.region -p\n")
	m.ServeState(spec, nil, "GET", "/dump", nil, nil)
	m.ServeState(spec, nil, "HEAD", "/dump", nil, nil)
	m.ServeState(spec, nil, "POST", "/dump", nil, []byte("{}"))
	m.ServeState(spec, nil, "GET", "/version", nil, nil)
	call("GET", "/init/cmd", "")
	if m.State().AppState["prompt_disabled"] != true {
		t.Error("/init/cmd is not in the state")
	}
	for _, p := range []string{"/gcmd", "/init/layer", "/init/cmd", "/nothing"} {
		if _, _, ok := ServeState(nil, m.ChunkState(), "POST", p, nil, []byte(`{"cmd": "g.list", "kwargs": {"type": "raster"}}`)); ok {
			t.Errorf("POST %s answered from the state", p)
		}
	}
}
