package guest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/contract/scienceboard/sbtest"
	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/guest"
	"github.com/codapipe/codapipe/internal/sim/tasks"
	vmguest "github.com/codapipe/codapipe/pkg/vmpool/guest"
)

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
// task's initialize items run through the guest client, then the pair's
// stage requests (the app launched and brought to the state the golden
// replies describe).
func stageEvaluate(ctx context.Context, t *testing.T, g *vmguest.Client, pair sbtest.Pair, app string) {
	t.Helper()
	st, err := scienceboard.ParseTask("VM/"+app+"/golden.json", pair.TaskFile(""))
	if err != nil {
		t.Fatalf("the golden task does not load: %v", err)
	}
	if err := tasks.RunInitWith(ctx, callerOf{g}, st, tasks.InitOptions{}); err != nil {
		t.Fatalf("the task's setup: %v", err)
	}
	for _, m := range pair.Stage {
		if _, err := g.Call(ctx, request(m)); err != nil {
			t.Fatalf("staging %s: %s %s %s: %v", app, m.Method, m.Server, m.Path, err)
		}
	}
}
