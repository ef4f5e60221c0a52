package apps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/sim/apps/celestia"
	"github.com/codapipe/codapipe/internal/sim/apps/chimerax"
	"github.com/codapipe/codapipe/internal/sim/apps/grass"
	"github.com/codapipe/codapipe/internal/sim/apps/kalgebra"
	"github.com/codapipe/codapipe/internal/sim/desktop"
)

// goldenFile holds request/reply pairs from the real ScienceBoard sources
// (see its README.md).
var goldenFile = filepath.Join("..", "..", "..", "testdata", "scienceboard", "contract", "golden.json")

type goldenExchange struct {
	Request struct {
		Server   string            `json:"server"`
		Method   string            `json:"method"`
		Path     string            `json:"path"`
		Query    map[string]string `json:"query"`
		Body     *string           `json:"body"`
		BodyJSON json.RawMessage   `json:"body_json"`
	} `json:"request"`
	Reply struct {
		Status   int             `json:"status"`
		Body     *string         `json:"body"`
		BodyJSON json.RawMessage `json:"body_json"`
	} `json:"reply"`
}

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
// /run, and the /read of the states dump) on the simulated apps: a golden
// "body" must come back byte for byte, a "body_json" with the same shape
// (every golden key, with a value of the same JSON type, lists by their
// first element; a golden null matches anything).
func TestGoldenReplies(t *testing.T) {
	raw, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Pairs []struct {
			Task      map[string]any   `json:"task"`
			Phase     string           `json:"phase"`
			Exchanges []goldenExchange `json:"exchanges"`
		} `json:"pairs"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	launch := map[string]string{
		kalgebra.Name: "kalgebra 8000", celestia.Name: "celestia-qt6 8000",
		grass.Name:    "grass --gui /home/user/grassdata/world_latlong_wgs84/PERMANENT",
		chimerax.Name: "chimerax --cmd 'remotecontrol rest start json true port 8000'",
	}
	played := 0
	for i, pair := range g.Pairs {
		app, _ := pair.Task["type"].(string)
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
				body := []byte(nil)
				switch {
				case rq.Body != nil:
					body = []byte(*rq.Body)
				case rq.BodyJSON != nil:
					body = compactJSON(t, rq.BodyJSON)
				}
				var got []byte
				var status int
				switch {
				case rq.Server == "app":
					got, status = serve(rq.Method, rq.Path, nil, body)
				case rq.Path == "/chimerax/run":
					var c struct{ Command string }
					_ = json.Unmarshal(body, &c)
					got, status = serve("GET", "/run", url.Values{"command": {strings.ReplaceAll(c.Command, "{{STAMP}}", stamp)}}, nil)
				case rq.Path == "/read" && strings.Contains(rq.Query["path"], "{{STAMP}}"):
					text, ok := r.u.ReadFile(strings.ReplaceAll(rq.Query["path"], "{{STAMP}}", stamp))
					got, status = []byte(text), 200
					if !ok {
						status = 500
					}
				default:
					continue // the guest server's own routes: package guest
				}
				played++
				what := rq.Method + " " + rq.Path
				if status != ex.Reply.Status {
					t.Errorf("%s: status %d, want %d (%.200s)", what, status, ex.Reply.Status, got)
					continue
				}
				if ex.Reply.Body != nil {
					if string(got) != *ex.Reply.Body {
						t.Errorf("%s: body %q, want %q", what, got, *ex.Reply.Body)
					}
					continue
				}
				var want, have any
				if err := json.Unmarshal(ex.Reply.BodyJSON, &want); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(got, &have); err != nil {
					t.Errorf("%s: not JSON: %v: %.200s", what, err, got)
					continue
				}
				if err := sameShape(want, have, "$"); err != nil {
					t.Errorf("%s: %v", what, err)
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

func compactJSON(t *testing.T, raw json.RawMessage) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// sameShape reports how have differs in shape from want: a key of want
// missing, a value of another JSON type, a list empty where want's is not
// (lists compare by their first element). A null in want matches anything.
func sameShape(want, have any, at string) error {
	switch w := want.(type) {
	case nil:
		return nil
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %T, want an object", at, have)
		}
		for k, v := range w {
			hv, ok := h[k]
			if !ok {
				return fmt.Errorf("%s: no key %q", at, k)
			}
			if err := sameShape(v, hv, at+"."+k); err != nil {
				return err
			}
		}
		return nil
	case []any:
		h, ok := have.([]any)
		if !ok {
			return fmt.Errorf("%s: %T, want a list", at, have)
		}
		if len(w) == 0 {
			return nil
		}
		if len(h) == 0 {
			return fmt.Errorf("%s: empty list", at)
		}
		return sameShape(w[0], h[0], at+"[0]")
	}
	if fmt.Sprintf("%T", want) != fmt.Sprintf("%T", have) {
		return fmt.Errorf("%s: %T %v, want a %T", at, have, have, want)
	}
	return nil
}

func TestSameShape(t *testing.T) {
	dec := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		want, have string
		ok         bool
	}{
		{`{"a": 1, "b": [{"c": "x"}]}`, `{"a": 2.5, "b": [{"c": "y", "d": 1}, 3], "e": null}`, true},
		{`{"a": 1}`, `{"b": 1}`, false},
		{`{"a": "1"}`, `{"a": 1}`, false},
		{`[{"a": 1}]`, `[]`, false},
		{`[]`, `[1]`, true},
		{`{"mark": null}`, `{"mark": {"x": true}}`, true},
		{`{"res": 1}`, `{"res": "..."}`, false},
	} {
		if err := sameShape(dec(c.want), dec(c.have), "$"); (err == nil) != c.ok {
			t.Errorf("sameShape(%s, %s) = %v", c.want, c.have, err)
		}
	}
}
