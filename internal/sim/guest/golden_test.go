package guest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/scienceboard"
	"github.com/codapipe/codapipe/internal/scienceboard/sbtest"
	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/guest"
	"github.com/codapipe/codapipe/internal/sim/tasks"
	vmguest "github.com/codapipe/codapipe/pkg/vmpool/guest"
)

// appLaunch starts each app the way its tasks do, for the evaluate
// entries (which check a running app).
var appLaunch = map[string]vmguest.Command{
	"KAlgebra": vmguest.ShellCommand("LD_LIBRARY_PATH=/home/user/6.5.0/gcc_64/lib /app/bin/kalgebra 8000"),
	"Celestia": vmguest.ShellCommand("LD_LIBRARY_PATH=/home/user/6.5.0/gcc_64/lib /app/bin/celestia-qt6 8000"),
	"ChimeraX": vmguest.ArgvCommand("chimerax", "--cmd", "remotecontrol rest start json true port 8000"),
	"GrassGIS": vmguest.ShellCommand(`gnome-terminal -- /bin/bash -ic "FLASK_PORT=8000 grass --gui /home/user/grassdata/natural_earth_dataset/PERMANENT"`),
}

// stageApp brings a running app into the state its evaluate entries'
// replies describe, with requests of the real contract (the app's own
// routes, ChimeraX's commands through the guest's /chimerax/run); run
// only for apps whose routes are real. The same state as the apps'
// own golden test (internal/sim/apps, goldenPrep).
var stageApp = map[string][]vmguest.Request{
	"KAlgebra": {
		{Server: "app", Method: "POST", Path: "/add/calc", Body: []byte("a := 3.0000001")},
		{Server: "app", Method: "POST", Path: "/add/calc", Body: []byte("f := x->x^2")},
		{Server: "app", Method: "POST", Path: "/add/2d", Body: []byte("x->x^2")},
	},
	"GrassGIS": {
		{Server: "app", Method: "POST", Path: "/init/map", ContentType: "application/json",
			Body: []byte(`{"grassdb": "/home/user/grassdata", "location": "natural_earth_dataset", "mapset": "PERMANENT"}`)},
		{Server: "app", Method: "POST", Path: "/init/layer", ContentType: "application/json", Body: []byte(`{"query": {"name": "countries"}}`)},
	},
	"ChimeraX": {
		{Server: "guest", Method: "POST", Path: "/chimerax/run", ContentType: "application/json", Body: []byte(`{"command": "open 3ppd"}`)},
		{Server: "guest", Method: "POST", Path: "/chimerax/run", ContentType: "application/json", Body: []byte(`{"command": "select /A"}`)},
	},
}

// goldenStamp stands for {{STAMP}}, the ChimeraX states dump's time stamp.
const goldenStamp = "1700000000000"

// request builds the request the harness sends.
func request(m sbtest.Message) vmguest.Request {
	path, query, contentType, body := m.Sent(goldenStamp)
	return vmguest.Request{Server: m.Server, Method: m.Method, Path: path, Query: query, ContentType: contentType, Body: body}
}

// appOf is the app whose routes decide an exchange's reply, or "".
func appOf(taskType string, r sbtest.Message) string {
	switch {
	case r.Server == "app":
		return taskType
	case r.Path == "/chimerax/run", strings.Contains(r.Path+fmt.Sprint(r.Query), "{{STAMP}}"):
		return "ChimeraX" // relayed to ChimeraX, or the file its states command writes
	}
	return ""
}

// callerOf adapts the guest client to scienceboard.Caller.
type callerOf struct{ g *vmguest.Client }

func (c callerOf) Call(ctx context.Context, r scienceboard.Request) ([]byte, error) {
	return c.g.Call(ctx, vmguest.Request(r))
}

// TestGolden sends every request of testdata/scienceboard/contract's
// golden exchanges through the guest client (pkg/vmpool/guest) to a
// started simulated VM — after the entry's task setup for an evaluate
// entry — and checks that the simulator received exactly that request
// and answered with the golden status and a reply of the golden's shape
// (README.md there).
func TestGolden(t *testing.T) {
	pairs, err := sbtest.Golden()
	if err != nil {
		t.Fatal(err)
	}
	if len(pairs) == 0 {
		t.Fatal("no golden pairs")
	}
	for _, pair := range pairs {
		t.Run(pair.Name, func(t *testing.T) {
			app := pair.App()
			vm := startVM(t, guest.Config{}, apps.All()...)
			g, err := vmguest.New(vm.srv.URL, vmguest.Options{StateURL: vm.srv.AppURL, Retries: -1})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if pair.Phase == "evaluate" {
				stageEvaluate(ctx, t, g, pair, app)
			}
			for i, ex := range pair.Exchanges {
				req := ex.Request
				t.Run(fmt.Sprintf("%d %s %s %s", i, req.Method, req.Server, req.Path), func(t *testing.T) {
					// An agent left the file a /read reads: stage the golden
					// reply (the guest's /read must give it back untouched).
					if appOf(app, req) == "" && req.Path == "/read" && ex.Reply.Status == 200 && ex.Reply.Body != nil {
						body, _ := json.Marshal(map[string]string{"path": req.Query["path"], "content": *ex.Reply.Body})
						if _, err := g.Call(ctx, vmguest.Request{Server: "guest", Method: "POST", Path: "/write", Body: body, ContentType: "application/json"}); err != nil {
							t.Fatalf("staging %s: %v", req.Query["path"], err)
						}
					}
					vm.rec.take()
					got, err := g.Call(ctx, request(req))
					status := 200
					if err != nil {
						status = scienceboard.StatusOf(err)
					}
					var first *guest.Recorded
					for _, r := range vm.rec.take() {
						if r.Server == req.Server {
							first = &r
							break
						}
					}
					if first == nil {
						t.Errorf("the %s server received no request (%v)", req.Server, err)
					} else if d := req.MatchRequest(goldenStamp, first.Server, first.Method, first.Path, first.Query, first.ContentType, first.Body); d != "" {
						t.Errorf("the simulator received another request: %s", d)
					}
					if status != ex.Reply.Status {
						t.Fatalf("status %d, want %d (%v)", status, ex.Reply.Status, err)
					}
					if err != nil {
						return // the client gives no body with an error
					}
					if d := ex.Reply.MatchShape(status, got); d != "" {
						t.Errorf("%s\nreply: %s", d, got)
					}
				})
			}
		})
	}
}

// stageEvaluate brings a fresh VM to where an evaluate entry starts: the
// task's initialize items run through the guest client, and the app
// running (and staged, see stageApp).
func stageEvaluate(ctx context.Context, t *testing.T, g *vmguest.Client, pair sbtest.Pair, app string) {
	t.Helper()
	st, err := scienceboard.ParseTask("VM/"+app+"/golden.json", pair.TaskFile(""))
	if err != nil {
		t.Fatalf("the golden task does not load: %v", err)
	}
	if err := tasks.RunInitWith(ctx, callerOf{g}, st, tasks.InitOptions{}); err != nil {
		t.Fatalf("the task's setup: %v", err)
	}
	if cmd, ok := appLaunch[app]; ok {
		if err := g.Launch(ctx, cmd); err != nil {
			t.Fatalf("launching %s: %v", app, err)
		}
	}
	for _, r := range stageApp[app] {
		if _, err := g.Call(ctx, r); err != nil {
			t.Fatalf("staging %s: %s %s: %v", app, r.Method, r.Path, err)
		}
	}
}
