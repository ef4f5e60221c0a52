package celestia

// The HTTP server of ScienceBoard's Celestia build (the fork
// ShiinaHiiragi/Celestia: src/celestia/qt/qtmain.cpp registers the routes
// on the simple C++ HTTP server KAlgebra's fork uses,
// src/celestia/celestiacore.cpp getStatus and visible build the dump).
// Every route answers HEAD too; a known path with another method is 405
// with an empty body.
//
//	GET  /version  "1.0"
//	POST /dump     body: JSON list [{"name": NAME, "type": T}, ...] (T is
//	               Celestia's SelectionType: 1 star, 2 solar-system body,
//	               3 deep-sky object), sent without a content type →
//	               {"time": {"value", "scale", "pause"},
//	                "entity": {"observer": {"position", "distance", "visible"},
//	                           NAME: {"position", "object", "distance",
//	                                  "radius", "visible", "hidden", "mark"}},
//	                "config": {"render": {...}, "orbit": {...}, "label": {...},
//	                           "resolution", "starStyle", "autoMagnitude"}}
//
// A body that does not parse, an entry without a string name and a
// numeric type, and a name the catalogue of that type lacks all make the
// fork's getStatus throw: 400 with an empty body. Positions are
// UniversalCoord values (micro-light-years from the Sun); "object" is the
// offset from the observer in km; "distance" is its length minus the
// object's radius (km). "mark" holds the reference marks of a
// solar-system body (the simulator draws none: all false) and is null for
// stars and deep-sky objects, whose "hidden" is always false.

import (
	"errors"
	"net/url"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/desktop"
)

// ServerVersion is what GET /version answers (the fork's SERVER_VERSION).
const ServerVersion = "1.0"

// Celestia's SelectionType values, the "type" of a /dump query entry.
const (
	SelStar    = 1
	SelBody    = 2
	SelDeepSky = 3
)

// Celestia's StarStyle values, the dump's config.starStyle.
const (
	StarFuzzy  = 0
	StarPoints = 1
	StarDiscs  = 2
)

// kmPerMicroLY is Celestia's astro::KM_PER_MICROLY: UniversalCoord's unit.
const kmPerMicroLY = 9460730.4725808

// The dump's flag groups, in getStatus's order: config.render (Renderer
// render flags), config.orbit (the orbit mask's body classes) and
// config.label (label modes).
var (
	renderFlags = []string{"nothing", "stars", "planets", "galaxies", "diagrams", "cloudMaps", "orbits",
		"celestialSphere", "nightMaps", "atmospheres", "smoothLines", "eclipseShadows", "starsAsPoints",
		"ringShadows", "boundaries", "autoMag", "cometTails", "markers", "partialTrajectories", "nebulae",
		"openClusters", "globulars", "cloudShadows", "galacticGrid", "eclipticGrid", "horizonGrid", "ecliptic",
		"dwarfPlanets", "moons", "minorMoons", "asteroids", "comets", "spacecrafts", "fadingOrbits", "planetRings"}
	orbitFlags = []string{"planet", "moon", "asteroid", "comet", "spacecraft", "invisible", "barycenter",
		"smallBody", "dwarfPlanet", "stellar", "surfaceFeature", "component", "minorMoon", "diffuse", "unknown"}
	labelFlags = []string{"star", "planet", "moon", "constellation", "galaxy", "asteroid", "spacecraft",
		"location", "comet", "nebula", "openCluster", "i18nConstellation", "dwarfPlanet", "minorMoon", "globular"}
	// markNames are the reference marks of a body's "mark".
	markNames = []string{"bodyAxes", "frameAxes", "sunDirection", "velocityVector", "spinVector", "planetographicGrid", "terminator"}
)

// defaults returns every flag of a group, those named on.
func defaults(all []string, on ...string) map[string]bool {
	m := make(map[string]bool, len(all))
	for _, f := range all {
		m[f] = false
	}
	for _, f := range on {
		m[f] = true
	}
	return m
}

// Serve serves the routes of the fork's server (see the top of server.go).
// They only read Celestia: Serve is ServeState on its state.
func (c *celestia) Serve(_ *desktop.UI, method, p string, q url.Values, body []byte) ([]byte, int, bool) {
	return ServeState(nil, c.State(), method, p, q, body)
}

// ServeState answers the routes of the fork's server from a state State
// returned (see desktop.AppSpec.ServeState): POST /dump keeps, of the
// state's "dump" (which holds every catalogue object under its catalogue
// name), the observer and the objects the query names, each under the
// name the query spells; a name the catalogue lacks under its type is 400.
// ok is false for a state without a dump.
func ServeState(_ desktop.Files, state map[string]any, method, p string, _ url.Values, body []byte) ([]byte, int, bool) {
	want, ok := map[string]string{"/version": "GET", "/dump": "POST"}[p]
	if !ok {
		return nil, 0, false
	}
	if method != want && method != "HEAD" {
		return nil, 405, true
	}
	if p == "/version" {
		return []byte(ServerVersion), 200, true
	}
	all, _ := state["dump"].(map[string]any)
	objects, _ := all["entity"].(map[string]any)
	if objects == nil {
		return nil, 0, false
	}
	query, err := parseQuery(body)
	if err != nil {
		return nil, 400, true
	}
	entity := map[string]any{"observer": objects["observer"]}
	for _, q := range query {
		b, ok := lookup(q.name, q.typ)
		if !ok {
			return nil, 400, true
		}
		e, ok := objects[b.Name]
		if !ok {
			return nil, 0, false
		}
		entity[q.name] = e
	}
	return desktop.JSON(map[string]any{"time": all["time"], "entity": entity, "config": all["config"]}), 200, true
}

// queryEntry is one object the dump is asked about.
type queryEntry struct {
	name string
	typ  int
}

// parseQuery reads a /dump body as getStatus does: json::parse and a
// range loop over it (desktop.RangeJSON), each entry's "name" a string and
// "type" a number (truncated to an int).
func parseQuery(body []byte) ([]queryEntry, error) {
	elems, err := desktop.RangeJSON(body, false)
	if err != nil {
		return nil, err
	}
	out := make([]queryEntry, 0, len(elems))
	for _, e := range elems {
		obj, ok := e.(map[string]any)
		if !ok {
			return nil, errors.New("an entry is not an object")
		}
		name, ok := obj["name"].(string)
		typ, isNum := obj["type"].(float64)
		if !ok || !isNum {
			return nil, errors.New(`an entry lacks a string "name" or a numeric "type"`)
		}
		out = append(out, queryEntry{name: name, typ: int(typ)})
	}
	return out, nil
}

// selectionType is the SelectionType under which Celestia finds a
// catalogue object.
func selectionType(b *celBody) int {
	switch b.Type {
	case "star":
		return SelStar
	case "galaxy":
		return SelDeepSky
	}
	return SelBody
}

// starNames are other names of catalogue stars that the benchmark's
// tasks query ("Sirius A").
var starNames = map[string]string{"sirius a": "Sirius"}

// lookup finds a catalogue object by its name (case-insensitive; not the
// Go-to field's aliases) under a selection type.
func lookup(name string, typ int) (*celBody, bool) {
	if alias, ok := starNames[strings.ToLower(name)]; ok && typ == SelStar {
		name = alias
	}
	for i := range celCatalogue {
		b := &celCatalogue[i]
		if strings.EqualFold(b.Name, name) && selectionType(b) == typ {
			return b, true
		}
	}
	return nil, false
}

func microLY(v vec3) []float64 {
	return []float64{v[0] / kmPerMicroLY, v[1] / kmPerMicroLY, v[2] / kmPerMicroLY}
}

// dump is getStatus with every catalogue object queried, each under its
// catalogue name (its "mark" as queried under its own SelectionType),
// and the observer.
func (c *celestia) dump() map[string]any {
	obs := c.observer()
	entity := map[string]any{
		"observer": map[string]any{"position": microLY(obs), "distance": 0.0, "visible": false},
	}
	for i := range celCatalogue {
		b := &celCatalogue[i]
		pos := b.position(c.jd)
		off := pos.sub(obs)
		e := map[string]any{
			"position": microLY(pos),
			"object":   []float64{off[0], off[1], off[2]},
			"distance": off.norm() - b.Radius,
			"radius":   b.Radius,
			"visible":  c.visibleBody(b),
			"hidden":   false,
			"mark":     nil,
		}
		if selectionType(b) == SelBody {
			marks := map[string]any{}
			for _, m := range markNames {
				marks[m] = false
			}
			e["mark"] = marks
		}
		entity[b.Name] = e
	}
	group := func(m map[string]bool) map[string]any {
		out := make(map[string]any, len(m))
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	return map[string]any{
		"time":   map[string]any{"value": c.jd, "scale": c.scale, "pause": c.paused},
		"entity": entity,
		"config": map[string]any{
			"render": group(c.rflags), "orbit": group(c.orbit), "label": group(c.label),
			"resolution": c.res, "starStyle": c.star, "autoMagnitude": c.autoMag,
		},
	}
}

// State is what POST /dump answers from (ServeState) and what the window
// shows besides:
//
//	dump       the dump with every catalogue object (see dump)
//	selection  {"name": the selected object}
//	target     the object the observer follows
func (c *celestia) State() map[string]any {
	return map[string]any{
		"dump":      c.dump(),
		"selection": map[string]any{"name": c.selected},
		"target":    c.target,
	}
}
