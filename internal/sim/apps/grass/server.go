package grass

// The Flask server of ScienceBoard's GRASS GUI (the fork
// ShiinaHiiragi/grass-gui: wxgui.py's routes, main_window/frame.py's
// Init* and GCommand, run on the wx thread), on FLASK_PORT (8000 in the
// benchmark). The /init routes and /gcmd answer "OK" or "ERROR" with HTTP
// 200 (ERROR: the GUI call failed or did not answer within 10 s).
//
//	GET  /version     "1.0"
//	GET  /init/cmd    disables the console prompt → "OK"
//	POST /init/map    {"grassdb", "location", "mapset"} → switches mapset
//	                  (the data catalog's SwitchMapset) → "OK" | "ERROR"
//	POST /init/layer  {"query": {KEY: VALUE, ...}} → double-clicks the
//	                  first data-catalog node whose data has every KEY equal
//	                  to VALUE (a map: displays it) → "OK"; no such node,
//	                  or a map of another location (the GUI then asks in a
//	                  modal dialog) → "ERROR"
//	POST /init/scale  {"scale": N} → sets the map display's scale → "OK"
//	GET  /dump        {"layers", "windows", "toolbars", "statusbar",
//	                  "region", "output"} (see dump)
//	POST /gcmd        {"cmd": MODULE, "kwargs": {...}} → runs the module as
//	                  RunCommand(cmd, read=True, getErrorMsg=True, **kwargs)
//	                  → {"returncode", "stdout"}, stdout parsed as JSON when
//	                  kwargs "format" is "json"
//
// Flask's own answers: GET routes take HEAD too; another method is 405, a
// body that is not JSON 400, a missing key (or kwargs that are not an
// object, or JSON stdout that does not parse) 500, each with Werkzeug's
// HTML page. The fork's POST /quit (quits GRASS; only in the benchmark's
// raw mode) is not simulated. The server cannot see the request's content
// type: it takes every body as the JSON the harness sends.

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/desktop"
)

// ServerVersion is what GET /version answers.
const ServerVersion = "1.0"

var grassRoutes = map[string]string{
	"/version": "GET", "/init/cmd": "GET", "/init/map": "POST", "/init/layer": "POST",
	"/init/scale": "POST", "/dump": "GET", "/gcmd": "POST",
}

// werkzeugPage is the HTML page of a Werkzeug HTTP error.
func werkzeugPage(status int, title, text string) []byte {
	return fmt.Appendf(nil, "<!doctype html>\n<html lang=en>\n<title>%d %s</title>\n<h1>%s</h1>\n<p>%s</p>\n", status, title, title, text)
}

var (
	errPage405 = werkzeugPage(405, "Method Not Allowed", "The method is not allowed for the requested URL.")
	errPage500 = werkzeugPage(500, "Internal Server Error", "The server encountered an internal error and was unable to complete your request. Either the server is overloaded or there is an error in the application.")
)

// Serve serves the routes of the fork's Flask server (see the top of
// server.go).
func (g *grass) Serve(u *desktop.UI, method, p string, _ url.Values, body []byte) ([]byte, int, bool) {
	want, ok := grassRoutes[p]
	if !ok {
		return nil, 0, false
	}
	if method != want && !(method == "HEAD" && want == "GET") {
		return errPage405, 405, true
	}
	okOrError := func(ok bool) ([]byte, int, bool) {
		if ok {
			return []byte("OK"), 200, true
		}
		return []byte("ERROR"), 200, true
	}
	switch p {
	case "/version", "/dump":
		return ServeState(nil, g.State(), method, p, nil, body)
	case "/init/cmd":
		g.cmdDisabled = true
		if u != nil {
			u.SetField("console", "")
		}
		return []byte("OK"), 200, true
	}
	var params map[string]any
	if err := json.Unmarshal(body, &params); err != nil {
		var v any
		if json.Unmarshal(body, &v) != nil {
			return werkzeugPage(400, "Bad Request", "Failed to decode JSON object: "+err.Error()), 400, true
		}
		return errPage500, 500, true // valid JSON, not an object: params[...] fails
	}
	need := func(keys ...string) bool {
		for _, k := range keys {
			if _, ok := params[k]; !ok {
				return false
			}
		}
		return true
	}
	switch p {
	case "/init/map":
		if !need("grassdb", "location", "mapset") {
			return errPage500, 500, true
		}
		return okOrError(g.initMap(params["grassdb"], params["location"], params["mapset"]))
	case "/init/layer":
		if !need("query") {
			return errPage500, 500, true
		}
		return okOrError(g.initLayer(params["query"]))
	case "/init/scale":
		if !need("scale") {
			return errPage500, 500, true
		}
		s, isNum := params["scale"].(float64)
		return okOrError(isNum && g.setScale(s))
	}
	// /gcmd
	if !need("cmd", "kwargs") {
		return errPage500, 500, true
	}
	kwargs, ok := params["kwargs"].(map[string]any)
	if !ok {
		return errPage500, 500, true
	}
	cmd, ok := params["cmd"].(string)
	if !ok {
		return []byte("ERROR"), 200, true // RunCommand fails on the wx thread: no answer in time
	}
	stdout, _, code := g.run(parseGcmd(gcmdWords(cmd, kwargs)))
	var out any = stdout
	if f, ok := kwargs["format"].(string); ok && f == "json" {
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			return errPage500, 500, true
		}
	}
	return desktop.JSON(map[string]any{"returncode": code, "stdout": out}), 200, true
}

// gcmdWords is the command line RunCommand makes of a module and its
// keyword arguments (grass.script's make_command): flags="abc" → -abc,
// overwrite/quiet/verbose=True → --overwrite/--quiet/--verbose, lists
// joined by commas, other values as Python's str().
func gcmdWords(cmd string, kwargs map[string]any) []string {
	words := []string{cmd}
	for _, k := range slices.Sorted(maps.Keys(kwargs)) {
		v := kwargs[k]
		switch k {
		case "flags":
			words = append(words, "-"+pyStr(v))
			continue
		case "overwrite", "quiet", "verbose", "superquiet":
			if b, _ := v.(bool); b {
				words = append(words, "--"+k)
			}
			continue
		}
		words = append(words, k+"="+pyStr(v))
	}
	return words
}

// pyStr is how make_command renders a keyword argument: Python's str() of
// a JSON value but lists joined by commas. It is not the guest server's
// pyStr (internal/sim/guest): the body is decoded without json.Number, so a
// whole float64 prints as the int the caller most likely sent, and a dict
// as JSON.
func pyStr(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case bool:
		if v {
			return "True"
		}
		return "False"
	case nil:
		return "None"
	case float64:
		if v == float64(int64(v)) && !strings.Contains(strconv.FormatFloat(v, 'g', -1, 64), "e") {
			return strconv.FormatInt(int64(v), 10)
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = pyStr(x)
		}
		return strings.Join(parts, ",")
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// initMap is InitMapset: the data catalog's SwitchMapset, which succeeds
// for an existing mapset of the database.
func (g *grass) initMap(grassdb, location, mapset any) bool {
	db, _ := grassdb.(string)
	loc, _ := location.(string)
	ms, _ := mapset.(string)
	l, ok := g.db[loc]
	if strings.TrimRight(db, "/") != GRASSDB || !ok || ms != PermanentMapset {
		return false
	}
	if l != g.loc {
		g.switchTo(l)
	}
	return true
}

// initLayer is DisplayLayer: the first data-catalog node matching the
// query, double-clicked.
func (g *grass) initLayer(query any) bool {
	q, ok := query.(map[string]any)
	if !ok || len(q) == 0 {
		return false // SearchNodes(**query) fails, or matches nothing
	}
	for _, n := range g.catalogNodes() {
		data := n.data(g.loc.Name)
		match := true
		for k, v := range q {
			if dv, has := data[k]; !has || !jsonEqual(dv, v) {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		if n.Type == "raster" || n.Type == "vector" {
			return g.displayNode(n)
		}
		return true // a double click expands or collapses other nodes
	}
	return false
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// The parameters of the display modules the layer tree shows, with their
// defaults.
var displayParams = map[string][][2]string{
	"d.vect": {{"map", ""}, {"layer", "1"}, {"cats", ""}, {"where", ""}, {"type", "point,line,boundary,area,face"},
		{"display", "shape"}, {"attribute_column", ""}, {"color", "black"}, {"fill_color", "200:200:200"}, {"width", "0"},
		{"icon", "basic/x"}, {"size", "5"}, {"font", ""}, {"xref", "left"}, {"yref", "center"}, {"label_color", "red"},
		{"label_size", "8"}},
	"d.rast": {{"map", ""}, {"values", ""}, {"bgcolor", ""}},
}

var displayFlags = map[string][]string{"d.vect": {"c", "i", "s", "r"}, "d.rast": {"n", "i"}}

// cmdTuple is core/utils.py's cmdlist_to_tuple: (module, {key: value,
// "flags": "abc"}).
func cmdTuple(cmd []string) []any {
	opts := map[string]any{}
	flags := ""
	for _, w := range cmd[1:] {
		if k, v, ok := strings.Cut(w, "="); ok {
			opts[k] = v
		} else if strings.HasPrefix(w, "-") {
			flags += strings.TrimLeft(w, "-")
		}
	}
	if flags != "" {
		opts["flags"] = flags
	}
	return []any{cmd[0], opts}
}

// dump is GET /dump, the fork's status_dump:
//
//   - layers: the map display's render.Map.layers (bottom first), each
//     its MapLayer's attributes (name "NAME@PERMANENT", type, cmd as
//     (module, {options}), opacity, active, hidden, ...; objects "N/A");
//   - windows: the layer tree's items (oldest first), each with "name"
//     (its map) and its tree item's attributes: "_text" its label,
//     "_data" [layer info, {"name": module, "params": [{"name", "value",
//     ...}], "flags": [...]}];
//   - toolbars: the map display's toolbar keys, whether the map toolbar
//     shows, the digitizer's layer (null: not digitizing);
//   - statusbar: the status bar's mode and the map scale;
//   - region: the map display's region (render.Map.region: n, s, e, w,
//     nsres, ewres, rows, cols, cells, center_easting, center_northing,
//     projection, zone);
//   - output: the console's text.
func (g *grass) dump() map[string]any {
	layers, windows := []any{}, []any{}
	for i, l := range slices.Backward(g.layers) {
		layers = append(layers, map[string]any{
			"type": l.Kind, "name": l.Map, "cmd": cmdTuple(l.Cmd), "active": l.Checked, "hidden": false,
			"opacity": l.Opacity, "mapfile": fmt.Sprintf("/tmp/grass8-user-1000/%d.ppm", i),
			"maskfile": fmt.Sprintf("/tmp/grass8-user-1000/%d.pgm", i), "renderMgr": nil, "Map": "N/A",
			"forceRender": true, "renderedSize": nil,
		})
		given := map[string]string{}
		set := map[string]bool{}
		for _, w := range l.Cmd[1:] {
			if k, v, ok := strings.Cut(w, "="); ok {
				given[k] = v
			} else {
				for _, f := range strings.TrimLeft(w, "-") {
					set[string(f)] = true
				}
			}
		}
		params := []any{}
		for _, p := range displayParams[l.Cmd[0]] {
			params = append(params, map[string]any{"name": p[0], "type": "string", "required": p[0] == "map",
				"value": given[p[0]], "default": p[1]})
		}
		flags := []any{}
		for _, f := range displayFlags[l.Cmd[0]] {
			flags = append(flags, map[string]any{"name": f, "value": set[f]})
		}
		argv := make([]any, len(l.Cmd))
		for k, w := range l.Cmd {
			argv[k] = w
		}
		windows = append(windows, map[string]any{
			"name": l.Map, "_text": l.Map, "_type": 1, "_checked": l.Checked, "_enabled": true,
			"_isCollapsed": true, "_hasPlus": false, "_children": []any{}, "_parent": "N/A", "_wnd": "N/A",
			"_data": []any{
				map[string]any{"type": l.Kind, "cmd": argv, "ctrl": "N/A", "label": nil, "maplayer": "N/A",
					"propwin": nil, "vdigit": nil, "nviz": nil},
				map[string]any{"name": l.Cmd[0], "params": params, "flags": flags},
			},
		})
	}
	return map[string]any{
		"layers":    layers,
		"windows":   windows,
		"toolbars":  map[string]any{"keys": []any{"map"}, "shown": g.toolbarShown, "layer": nil},
		"statusbar": map[string]any{"mode": g.statusMode, "scale": g.scale},
		"region":    g.displayRegion(),
		"output":    strings.Join(g.console, "\n") + "\n",
	}
}

// ServeState answers the routes of the fork's server that only read the
// GUI from a state State returned (see desktop.AppSpec.ServeState): GET
// /version, and GET /dump, the state's "dump". ok is false for the other
// routes (/gcmd among them: the state does not carry the database).
func ServeState(_ desktop.Files, state map[string]any, method, p string, _ url.Values, _ []byte) ([]byte, int, bool) {
	if p != "/version" && p != "/dump" {
		return nil, 0, false
	}
	if method != "GET" && method != "HEAD" {
		return errPage405, 405, true
	}
	if p == "/version" {
		return []byte(ServerVersion), 200, true
	}
	dump, ok := state["dump"]
	if !ok {
		return nil, 0, false
	}
	return desktop.JSON(dump), 200, true
}

// State is what GET /dump answers (ServeState) and what the window shows
// besides:
//
//	dump             the dump (see dump)
//	location, mapset the current location and mapset
//	tab              the layer manager's open tab: layers, console, data
//	output_scroll    how far the console output is scrolled up (lines)
//	prompt_disabled  /init/cmd disabled the console prompt
func (g *grass) State() map[string]any {
	return map[string]any{
		"dump":     g.dump(),
		"location": g.loc.Name, "mapset": PermanentMapset,
		"tab":             strings.ToLower(grassTabs[g.Open]),
		"output_scroll":   g.outScroll,
		"prompt_disabled": g.cmdDisabled,
	}
}
