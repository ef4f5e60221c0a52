package apps

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/scienceboard/sbtest"
	"github.com/codapipe/codapipe/internal/sim/apps/celestia"
	"github.com/codapipe/codapipe/internal/sim/apps/chimerax"
	"github.com/codapipe/codapipe/internal/sim/apps/grass"
	"github.com/codapipe/codapipe/internal/sim/apps/kalgebra"
	"github.com/codapipe/codapipe/internal/sim/desktop"
)

// goldenPrep is what a simulated app is told before a golden entry's
// exchanges, so that its replies hold what the golden replies show: the
// requests to its own server (method, path, body).
var goldenPrep = map[string][][3]string{
	kalgebra.Name: {{"POST", "/add/calc", "a := 3.0000001"}, {"POST", "/add/calc", "f := x->x^2"}, {"POST", "/add/2d", "x->x^2"}},
	grass.Name: {
		{"POST", "/init/map", `{"grassdb": "/home/user/grassdata", "location": "natural_earth_dataset", "mapset": "PERMANENT"}`},
		{"POST", "/init/layer", `{"query": {"name": "countries"}}`},
	},
	chimerax.Name: {{"GET", "/run", "open 3ppd"}, {"GET", "/run", "select /A"}},
}

// TestGoldenReplies plays the golden entries' requests to the app servers
// (port 8000; for ChimeraX, the guest server's /chimerax/run forwarded to
// /run, and the /read of the states dump) on the simulated apps: the
// golden status, and a reply that matches the golden's (sbtest's
// MatchShape: a "body" byte for byte, a "body_json" by shape).
func TestGoldenReplies(t *testing.T) {
	pairs, err := sbtest.Golden()
	if err != nil {
		t.Fatal(err)
	}
	launch := map[string]string{
		kalgebra.Name: "kalgebra 8000", celestia.Name: "celestia-qt6 8000",
		grass.Name:    "grass --gui /home/user/grassdata/world_latlong_wgs84/PERMANENT",
		chimerax.Name: "chimerax --cmd 'remotecontrol rest start json true port 8000'",
	}
	played := 0
	for i, pair := range pairs {
		app := pair.App()
		if app == "TeXstudio" {
			app = chimerax.Name // its ChimeraX steps
		}
		spec, ok := appSpec(app)
		if !ok {
			continue
		}
		t.Run(fmt.Sprintf("%d-%s-%s", i, app, pair.Phase), func(t *testing.T) {
			m, r := startMachine(t, spec)
			m.Start(launch[app])
			serve := func(method, path string, q url.Values, body []byte) ([]byte, int) {
				resp, status, ok := r.inst.Serve(r.u, method, path, q, body)
				if !ok {
					return nil, 404
				}
				return resp, status
			}
			if pair.Phase == "evaluate" {
				for _, p := range goldenPrep[app] {
					var status int
					if p[1] == "/run" {
						_, status = serve(p[0], p[1], url.Values{"command": {p[2]}}, nil)
					} else {
						_, status = serve(p[0], p[1], nil, []byte(p[2]))
					}
					if status != 200 {
						t.Fatalf("prep %v: %d", p, status)
					}
				}
			}
			const stamp = "1767323045000"
			for _, ex := range pair.Exchanges {
				rq := ex.Request
				path, query, _, body := rq.Sent(stamp)
				var got []byte
				var status int
				switch {
				case rq.Server == "app":
					got, status = serve(rq.Method, path, query, body)
				case path == "/chimerax/run":
					var c struct{ Command string }
					_ = json.Unmarshal(body, &c)
					got, status = serve("GET", "/run", url.Values{"command": {c.Command}}, nil)
				case path == "/read" && strings.Contains(rq.Query["path"], "{{STAMP}}"):
					text, ok := r.u.ReadFile(query.Get("path"))
					got, status = []byte(text), 200
					if !ok {
						status = 500
					}
				default:
					continue // the guest server's own routes: package guest
				}
				played++
				if d := ex.Reply.MatchShape(status, got); d != "" {
					t.Errorf("%s %s: %s (%.200s)", rq.Method, rq.Path, d, got)
				}
			}
		})
	}
	if played < 20 {
		t.Errorf("only %d exchanges played", played)
	}
}

func appSpec(name string) (desktop.AppSpec, bool) {
	for _, a := range All() {
		if a.Name == name {
			return a, true
		}
	}
	return desktop.AppSpec{}, false
}
