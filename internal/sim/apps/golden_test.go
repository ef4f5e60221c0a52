package apps

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/scienceboard/sbtest"
	"github.com/codapipe/codapipe/internal/sim/apps/celestia"
	"github.com/codapipe/codapipe/internal/sim/apps/chimerax"
	"github.com/codapipe/codapipe/internal/sim/apps/grass"
	"github.com/codapipe/codapipe/internal/sim/apps/kalgebra"
	"github.com/codapipe/codapipe/internal/sim/desktop"
)

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
				resp, status, ok := r.App.Serve(r.UI, method, path, q, body)
				if !ok {
					return nil, 404
				}
				return resp, status
			}
			// play sends a request of the real contract to the app, as
			// the guest server relays it; ok is false for the guest
			// server's own routes (package guest).
			const stamp = "1767323045000"
			play := func(rq sbtest.Message) (got []byte, status int, ok bool) {
				path, query, _, body := rq.Sent(stamp)
				switch {
				case rq.Server == "app":
					got, status = serve(rq.Method, path, query, body)
				case path == "/chimerax/run":
					var c struct{ Command string }
					_ = json.Unmarshal(body, &c)
					got, status = serve("GET", "/run", url.Values{"command": {c.Command}}, nil)
				case path == "/read" && strings.Contains(rq.Query["path"], "{{STAMP}}"):
					text, ok := r.UI.ReadFile(query.Get("path"))
					got, status = []byte(text), 200
					if !ok {
						status = 500
					}
				default:
					return nil, 0, false
				}
				return got, status, true
			}
			for _, rq := range pair.Stage {
				if got, status, ok := play(rq); ok && status != 200 {
					t.Fatalf("stage %s %s: %d (%.200s)", rq.Method, rq.Path, status, got)
				}
			}
			for _, ex := range pair.Exchanges {
				got, status, ok := play(ex.Request)
				if !ok {
					continue
				}
				played++
				if d := ex.Reply.MatchShape(status, got); d != "" {
					t.Errorf("%s %s: %s (%.200s)", ex.Request.Method, ex.Request.Path, d, got)
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
