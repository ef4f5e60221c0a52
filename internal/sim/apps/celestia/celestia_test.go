package celestia

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/desktop/desktoptest"
)

// server starts Celestia on a machine and returns it, the app and a
// function that sends one request to its server.
func server(t *testing.T) (*desktoptest.Machine, *celestia, func(method, path, body string) (string, int)) {
	t.Helper()
	spec, r := desktoptest.Watch[*celestia](Spec())
	m := desktoptest.Start(t, spec, "LD_LIBRARY_PATH=/home/user/6.5.0/gcc_64/lib /app/bin/celestia-qt6 8000")
	return m, r.App, r.Call
}

// everything is a /dump query for every catalogue object.
func everything() string {
	var q []map[string]any
	for i := range celCatalogue {
		q = append(q, map[string]any{"name": celCatalogue[i].Name, "type": selectionType(&celCatalogue[i])})
	}
	b, _ := json.Marshal(q)
	return string(b)
}

// dumpValue is what the test machine's state dump (every object queried)
// holds at keys.
func dumpValue(t *testing.T, call func(method, path, body string) (string, int), keys ...string) any {
	t.Helper()
	body, status := call("POST", "/dump", everything())
	if status != 200 {
		t.Fatalf("/dump: %d %s", status, body)
	}
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		obj, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("no object at %q", k)
		}
		v = obj[k]
	}
	return v
}

func TestCelestia(t *testing.T) {
	m, c, call := server(t)
	value := func(_ string, keys ...string) any {
		t.Helper()
		if keys[0] == "selection" {
			return c.selected
		}
		return dumpValue(t, call, keys...)
	}
	if d := value("/dump", "entity", "Earth", "distance").(float64); math.Abs(d-4*6371) > 1 {
		t.Errorf("initial Earth distance %v", d)
	}
	m.Click("Celestia Go to object field")
	m.Write("saturn\n")
	if value("/dump", "selection", "name") != "Saturn" || value("/dump", "entity", "Saturn", "distance").(float64) > 5*58232 {
		t.Errorf("goto Saturn: %v %v", value("/dump", "selection", "name"), value("/dump", "entity", "Saturn", "distance"))
	}
	if value("/dump", "entity", "Titan", "visible") != true || value("/dump", "entity", "Mars", "visible") != false {
		t.Error("visibility around Saturn")
	}
	m.Input(desktop.Event{Kind: desktop.EvScroll, Amount: 3, X: 400, Y: 400, HasXY: true})
	if d := value("/dump", "entity", "Saturn", "distance").(float64); d >= 4*58232 {
		t.Errorf("zoom in did not approach: %v", d)
	}
	m.Key("ctrl", "a")
	m.Write("Nowhere\n")
	if value("/dump", "selection", "name") != "Saturn" {
		t.Error("unknown object changed the selection")
	}
	for _, b := range []string{"Celestia 10x Faster button", "Celestia 10x Faster button", "Celestia Reverse Time button", "Celestia Pause button"} {
		m.Click(b)
	}
	if value("/dump", "time", "scale") != float64(-100) || value("/dump", "time", "pause") != true {
		t.Errorf("time %v", value("/dump", "time"))
	}
	m.Key("space") // no field focused after the buttons: toggles pause
	m.Key("k")
	if value("/dump", "time", "pause") != false || value("/dump", "time", "scale") != float64(-10) {
		t.Errorf("shortcuts: time %v", value("/dump", "time"))
	}
	m.Click("Celestia Julian date field")
	m.Key("ctrl", "a")
	m.Write("2451545\n")
	if value("/dump", "time", "value") != float64(2451545) {
		t.Errorf("JD %v", value("/dump", "time", "value"))
	}
	m.Click("Celestia Orbits checkbox")
	m.Click("Celestia Scaled Discs radio")
	m.Click("Celestia Low Texture radio")
	if value("/dump", "config", "render", "orbits") != true || value("/dump", "config", "starStyle") != float64(2) || value("/dump", "config", "resolution") != float64(0) {
		t.Errorf("config %v", value("/dump", "config"))
	}
	for jd, want := range map[float64]string{2451545: "2000 Jan 01 12:00:00 UTC", 2460000.5: "2023 Feb 25 00:00:00 UTC", 2299160.5: "1582 Oct 15 00:00:00 UTC"} {
		if got := calendarDate(jd); got != want {
			t.Errorf("calendarDate(%v) = %q, want %q", jd, got, want)
		}
	}
}

func TestServerRoutes(t *testing.T) {
	_, c, call := server(t)
	routes := []desktoptest.Route{
		{Method: "GET", Path: "/version", Status: 200, Want: "1.0"},
		{Method: "HEAD", Path: "/version", Status: 200, Want: "1.0"},
		{Method: "POST", Path: "/version", Body: "x", Status: 405},
		{Method: "GET", Path: "/dump", Status: 405},
		{Method: "GET", Path: "/celestia/dump", Status: 404},
		{Method: "POST", Path: "/dump", Status: 400},
		{Method: "HEAD", Path: "/dump", Status: 400},
		{Method: "POST", Path: "/dump", Body: "[{\"name\": \"Mercury\"", Status: 400},
		{Method: "POST", Path: "/dump", Body: `[{"name": "Mercury", "type": 2}] []`, Status: 400},
		{Method: "POST", Path: "/dump", Body: `[{"name": "Vulcan", "type": 2}]`, Status: 400},    // unknown: the fork throws
		{Method: "POST", Path: "/dump", Body: `[{"name": "Mercury", "type": 1}]`, Status: 400},   // not a star
		{Method: "POST", Path: "/dump", Body: `[{"name": "Mercury", "type": "2"}]`, Status: 400}, // type not a number
		{Method: "POST", Path: "/dump", Body: `[{"type": 2}]`, Status: 400},
		{Method: "POST", Path: "/dump", Body: `[3]`, Status: 400},
		{Method: "POST", Path: "/dump", Body: `[]`, Status: 200, Want: "-"},
		{Method: "POST", Path: "/dump", Body: `null`, Status: 200, Want: "-"},
		{Method: "POST", Path: "/dump", Body: `{"a": {"name": "Sol", "type": 1}}`, Status: 200, Want: "-"},
		{Method: "POST", Path: "/dump", Body: `[{"name": "mercury", "type": 2.0}]`, Status: 200, Want: "-"},
	}
	desktoptest.CheckRoutes(t, call, routes)

	body, status := call("POST", "/dump", `[{"name": "Mercury", "type": 2}, {"name": "Sol", "type": 1}, {"name": "Andromeda Galaxy", "type": 3}]`)
	if status != 200 {
		t.Fatal(status, body)
	}
	var d map[string]map[string]any
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	if len(d) != 3 || len(d["time"]) != 3 || len(d["entity"]) != 4 {
		t.Errorf("dump: %v", d)
	}
	cfg := d["config"]
	if len(cfg["render"].(map[string]any)) != 35 || len(cfg["orbit"].(map[string]any)) != 15 || len(cfg["label"].(map[string]any)) != 15 ||
		cfg["starStyle"] != float64(StarFuzzy) || cfg["resolution"] != float64(1) || cfg["autoMagnitude"] == nil {
		t.Errorf("config %v", cfg)
	}
	obs := d["entity"]["observer"].(map[string]any)
	if len(obs) != 3 || obs["visible"] != false {
		t.Errorf("observer %v", obs)
	}
	mercury := d["entity"]["Mercury"].(map[string]any)
	if len(mercury) != 7 || len(mercury["mark"].(map[string]any)) != 7 || mercury["hidden"] != false {
		t.Errorf("Mercury %v", mercury)
	}
	for _, name := range []string{"Sol", "Andromeda Galaxy"} {
		e := d["entity"][name].(map[string]any)
		if e["mark"] != nil || e["hidden"] != false {
			t.Errorf("%s %v", name, e)
		}
	}
	// position is in micro-light-years; object is the offset in km; the
	// distance is its length less the radius.
	pos, obj, obsPos := mercury["position"].([]any), mercury["object"].([]any), obs["position"].([]any)
	var dist float64
	for i := range 3 {
		if d := (pos[i].(float64)-obsPos[i].(float64))*kmPerMicroLY - obj[i].(float64); math.Abs(d) > 1e-3*math.Abs(obj[i].(float64))+1 {
			t.Errorf("axis %d: position and object disagree by %v km", i, d)
		}
		dist += obj[i].(float64) * obj[i].(float64)
	}
	if want := math.Sqrt(dist) - mercury["radius"].(float64); math.Abs(mercury["distance"].(float64)-want) > 1e-6*want {
		t.Errorf("distance %v, want %v", mercury["distance"], want)
	}
	if c.jd != d["time"]["value"] {
		t.Errorf("time %v", d["time"])
	}
}

// TestServeState: a screenshot's state answers /dump for any query as the
// running app does (the full dump keeps each object under its catalogue
// name, so names must be unique).
func TestServeState(t *testing.T) {
	seen := map[string]bool{}
	for _, b := range celCatalogue {
		if seen[strings.ToLower(b.Name)] {
			t.Fatalf("two catalogue objects are named %q", b.Name)
		}
		seen[strings.ToLower(b.Name)] = true
	}
	m, _, _ := server(t)
	m.Click("Celestia Go to object field")
	m.Write("Saturn\n")
	spec := Spec()
	for _, r := range []struct {
		method, body string
		status       int
	}{
		{"POST", everything(), 200},
		{"POST", `[{"name": "Sirius A", "type": 1}, {"name": "mars", "type": 2}, {"name": "Andromeda Galaxy", "type": 3}]`, 200},
		{"POST", `{"b": {"name": "Titan", "type": 2.7}, "a": {"name": "Sol", "type": 1}}`, 200},
		{"POST", `[]`, 200},
		{"POST", `null`, 200},
		{"POST", `[{"name": "Mars", "type": 1}]`, 400}, // not a star
		{"POST", `[{"name": "Vulcan", "type": 2}]`, 400},
		{"POST", `[{"name": "Mars"}]`, 400},
		{"POST", `not json`, 400},
		{"GET", "", 405},
	} {
		_, status := m.ServeState(spec, nil, r.method, "/dump", nil, []byte(r.body))
		if status != r.status {
			t.Errorf("%s /dump %s: %d, want %d", r.method, r.body, status, r.status)
		}
	}
	if b, status := m.ServeState(spec, nil, "GET", "/version", nil, nil); status != 200 || string(b) != ServerVersion {
		t.Errorf("/version: %d %q", status, b)
	}
	if _, _, ok := ServeState(nil, map[string]any{}, "POST", "/dump", nil, []byte(`[]`)); ok {
		t.Error("a state without a dump answers /dump")
	}
	if _, _, ok := ServeState(nil, m.ChunkState(), "POST", "/quit", nil, nil); ok {
		t.Error("an unknown route is answered")
	}
}
