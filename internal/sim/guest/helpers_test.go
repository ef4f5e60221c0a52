package guest_test

import (
	"context"
	"encoding/json"
	"image"
	"net/url"
	"sync"
	"testing"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/guest"
	"github.com/codapipe/codapipe/internal/sim/screen"
	"github.com/codapipe/codapipe/internal/testkit/servertest"
)

// fakeApp is a simulated app for the tests of the servers, independent
// of the real simulated apps: its server echoes requests (/echo), speaks
// ChimeraX's REST reply shape (/run), and answers a few odd replies.
type fakeApp struct{}

// fakeSpec is the fake app, started by the program "fakeapp".
func fakeSpec() desktop.AppSpec {
	return desktop.AppSpec{
		Name:     "Fake",
		Programs: []string{"fakeapp"},
		Elements: []desktop.Element{{ID: "canvas", Label: "Fake canvas", Kind: "canvas", Box: image.Rect(0, 48, 1280, 800)}},
		Start:    func(*desktop.UI, []string) desktop.App { return fakeApp{} },
	}
}

func (fakeApp) Visible(string) bool                                          { return true }
func (fakeApp) Click(*desktop.UI, desktop.Element, string, int, image.Point) {}
func (fakeApp) Submit(*desktop.UI, string, string) bool                      { return true }
func (fakeApp) Shortcut(*desktop.UI, []string)                               {}
func (fakeApp) Scroll(*desktop.UI, desktop.Element, int, int)                {}
func (fakeApp) Drag(*desktop.UI, desktop.Element, image.Point, image.Point)  {}
func (fakeApp) State() map[string]any                                        { return map[string]any{"fake": true} }
func (fakeApp) Render(*screen.Canvas, *desktop.UI)                           {}

func (fakeApp) Serve(_ *desktop.UI, method, p string, q url.Values, body []byte) ([]byte, int, bool) {
	switch p {
	case "/echo":
		b, _ := json.Marshal(map[string]any{"method": method, "path": p, "query": q, "body": string(body)})
		return b, 200, true
	case "/run":
		cmd := q.Get("command")
		switch cmd {
		case "text":
			return []byte("not json"), 200, true
		case "string":
			return []byte(`"just a string"`), 200, true
		case "number":
			return []byte(`42`), 200, true
		}
		var errv any
		if cmd == "bad" {
			errv = map[string]any{"type": "UserError", "message": "Unknown command: bad"}
		}
		b, _ := json.Marshal(map[string]any{"python values": []any{nil}, "json values": []any{nil},
			"log messages": map[string]any{"note": []string{"ran " + cmd, "ünï"}, "warning": []string{}, "error": []string{}, "bug": []string{}},
			"error":        errv})
		return b, 200, true
	case "/teapot":
		return []byte("short and stout"), 418, true
	}
	return nil, 0, false
}

// recorder collects what Config.Record reports.
type recorder struct {
	mu   sync.Mutex
	reqs []guest.Recorded
}

func (r *recorder) record(x guest.Recorded) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, x)
}

// take returns the requests recorded since the last take.
func (r *recorder) take() []guest.Recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reqs
	r.reqs = nil
	return out
}

// vmT is a started simulated VM of a test.
type vmT struct {
	srv *guest.Server
	m   desktop.Machine
	rec *recorder
}

// startVM starts a machine running the given apps (the fake app when
// none) behind its two servers, recording their requests.
func startVM(t *testing.T, cfg guest.Config, apps ...desktop.AppSpec) *vmT {
	t.Helper()
	if len(apps) == 0 {
		apps = []desktop.AppSpec{fakeSpec()}
	}
	cat, err := desktop.NewCatalog(apps...)
	if err != nil {
		t.Fatal(err)
	}
	m := desktop.NewMachine(desktop.MachineConfig{Apps: cat, Seed: 3})
	rec := &recorder{}
	cfg.Record = rec.record
	srv := servertest.Serve(t, "the guest servers", func(ctx context.Context) (*guest.Server, error) { return guest.Start(ctx, m, cfg) })
	return &vmT{srv: srv, m: m, rec: rec}
}
