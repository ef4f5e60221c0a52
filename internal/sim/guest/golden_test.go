package guest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"mime/multipart"
	"net/url"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/scienceboard"
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

type goldenFile struct {
	Pairs []goldenPair `json:"pairs"`
}

type goldenPair struct {
	Name      string          `json:"name"`
	Phase     string          `json:"phase"`
	Task      json.RawMessage `json:"task"`
	Exchanges []struct {
		Request goldenRequest `json:"request"`
		Reply   goldenReply   `json:"reply"`
	} `json:"exchanges"`
}

type goldenRequest struct {
	Server      string            `json:"server"`
	Method      string            `json:"method"`
	Path        string            `json:"path"`
	Query       map[string]string `json:"query"`
	ContentType string            `json:"content_type"`
	Body        *string           `json:"body"`
	BodyJSON    json.RawMessage   `json:"body_json"`
}

type goldenReply struct {
	Status   int             `json:"status"`
	Body     *string         `json:"body"`
	BodyJSON json.RawMessage `json:"body_json"`
}

// stamp replaces {{STAMP}}.
func stamp(s string) string { return strings.ReplaceAll(s, "{{STAMP}}", goldenStamp) }

// request builds the request the harness sends.
func (r goldenRequest) request(t *testing.T) vmguest.Request {
	t.Helper()
	out := vmguest.Request{Server: r.Server, Method: r.Method, Path: stamp(r.Path), ContentType: r.ContentType}
	if len(r.Query) > 0 {
		out.Query = url.Values{}
		for k, v := range r.Query {
			out.Query.Set(k, stamp(v))
		}
	}
	switch {
	case r.ContentType == "multipart/form-data":
		var fields map[string]string
		if err := json.Unmarshal(r.BodyJSON, &fields); err != nil {
			t.Fatalf("multipart body_json: %v", err)
		}
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		_ = mw.WriteField("file_path", fields["file_path"])
		fw, _ := mw.CreateFormFile("file_data", "data")
		_, _ = fw.Write([]byte(fields["file_data"]))
		_ = mw.Close()
		out.Body, out.ContentType = buf.Bytes(), mw.FormDataContentType()
	case r.Body != nil:
		out.Body = []byte(stamp(*r.Body))
	case r.BodyJSON != nil:
		var c bytes.Buffer
		if err := json.Compact(&c, []byte(stamp(string(r.BodyJSON)))); err != nil {
			t.Fatal(err)
		}
		out.Body = c.Bytes()
	}
	return out
}

// received reports how the recorded request differs from the golden one
// ("" when it is exactly that request).
func (r goldenRequest) received(t *testing.T, got guest.Recorded) string {
	want := r.request(t)
	var diffs []string
	if got.Server != want.Server || got.Method != want.Method || got.Path != want.Path {
		diffs = append(diffs, fmt.Sprintf("%s %s %s, want %s %s %s", got.Server, got.Method, got.Path, want.Server, want.Method, want.Path))
	}
	wq := want.Query
	if wq == nil {
		wq = url.Values{}
	}
	if !reflect.DeepEqual(got.Query, wq) {
		diffs = append(diffs, fmt.Sprintf("query %v, want %v", got.Query, wq))
	}
	gmt, gparams, _ := mime.ParseMediaType(got.ContentType)
	wmt, _, _ := mime.ParseMediaType(want.ContentType)
	if gmt != wmt {
		diffs = append(diffs, fmt.Sprintf("content type %q, want %q", got.ContentType, want.ContentType))
	}
	switch {
	case r.ContentType == "multipart/form-data":
		form, err := multipart.NewReader(bytes.NewReader(got.Body), gparams["boundary"]).ReadForm(1 << 20)
		var fields map[string]string
		_ = json.Unmarshal(r.BodyJSON, &fields)
		if err != nil || len(form.Value["file_path"]) != 1 || form.Value["file_path"][0] != fields["file_path"] || len(form.File["file_data"]) != 1 {
			diffs = append(diffs, fmt.Sprintf("multipart body %q (%v)", got.Body, err))
			break
		}
		f, _ := form.File["file_data"][0].Open()
		var data bytes.Buffer
		_, _ = data.ReadFrom(f)
		f.Close()
		if data.String() != fields["file_data"] {
			diffs = append(diffs, fmt.Sprintf("file_data %q, want %q", data.String(), fields["file_data"]))
		}
	case r.Body != nil:
		if !bytes.Equal(got.Body, want.Body) {
			diffs = append(diffs, fmt.Sprintf("body %q, want %q", got.Body, want.Body))
		}
	case r.BodyJSON != nil:
		if !jsonEq(got.Body, want.Body) {
			diffs = append(diffs, fmt.Sprintf("body %s, want %s", got.Body, want.Body))
		}
	default:
		if len(got.Body) != 0 {
			diffs = append(diffs, fmt.Sprintf("body %q, want none", got.Body))
		}
	}
	return strings.Join(diffs, "; ")
}

// sameShape reports where got differs in shape from want: objects need
// want's keys (more are allowed) with values of the same shape, lists are
// compared by their first element, other values by JSON type; a null in
// want matches anything (as in the apps' golden test: the golden replies'
// nulls stand for values that may be objects, such as Celestia's mark).
func sameShape(want, got any, at string) string {
	switch w := want.(type) {
	case nil:
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: %T, want an object", at, got)
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Sprintf("%s: no key %q", at, k)
			}
			if d := sameShape(wv, gv, at+"."+k); d != "" {
				return d
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			return fmt.Sprintf("%s: %T, want a list", at, got)
		}
		if len(w) > 0 {
			if len(g) == 0 {
				return fmt.Sprintf("%s: an empty list, want elements", at)
			}
			return sameShape(w[0], g[0], at+"[0]")
		}
	default:
		if reflect.TypeOf(want) != reflect.TypeOf(got) {
			return fmt.Sprintf("%s: %T (%v), want %T (%v)", at, got, got, want, want)
		}
	}
	return ""
}

// appOf is the app whose routes decide an exchange's reply, or "".
func appOf(taskType string, r goldenRequest) string {
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
	raw, err := os.ReadFile("../../../testdata/scienceboard/contract/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var gf goldenFile
	if err := json.Unmarshal(raw, &gf); err != nil {
		t.Fatal(err)
	}
	if len(gf.Pairs) == 0 {
		t.Fatal("no golden pairs")
	}
	for _, pair := range gf.Pairs {
		t.Run(pair.Name, func(t *testing.T) {
			var meta struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal(pair.Task, &meta); err != nil {
				t.Fatal(err)
			}
			vm := startVM(t, guest.Config{}, apps.All()...)
			g, err := vmguest.New(vm.srv.URL, vmguest.Options{StateURL: vm.srv.AppURL, Retries: -1})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if pair.Phase == "evaluate" {
				stageEvaluate(ctx, t, g, pair, meta.Type)
			}
			for i, ex := range pair.Exchanges {
				req := ex.Request
				app := appOf(meta.Type, req)
				t.Run(fmt.Sprintf("%d %s %s %s", i, req.Method, req.Server, req.Path), func(t *testing.T) {
					// An agent left the file a /read reads: stage the golden
					// reply (the guest's /read must give it back untouched).
					if app == "" && req.Path == "/read" && ex.Reply.Status == 200 && ex.Reply.Body != nil {
						body, _ := json.Marshal(map[string]string{"path": req.Query["path"], "content": *ex.Reply.Body})
						if _, err := g.Call(ctx, vmguest.Request{Server: "guest", Method: "POST", Path: "/write", Body: body, ContentType: "application/json"}); err != nil {
							t.Fatalf("staging %s: %v", req.Query["path"], err)
						}
					}
					vm.rec.take()
					got, err := g.Call(ctx, req.request(t))
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
					} else if d := req.received(t, *first); d != "" {
						t.Errorf("the simulator received another request: %s", d)
					}
					if status != ex.Reply.Status {
						t.Fatalf("status %d, want %d (%v)", status, ex.Reply.Status, err)
					}
					if err != nil {
						return
					}
					switch {
					case ex.Reply.Body != nil:
						if string(got) != stamp(*ex.Reply.Body) {
							t.Errorf("reply %q, want %q", got, stamp(*ex.Reply.Body))
						}
					case ex.Reply.BodyJSON != nil:
						var want, have any
						if err := json.Unmarshal(ex.Reply.BodyJSON, &want); err != nil {
							t.Fatal(err)
						}
						if err := json.Unmarshal(got, &have); err != nil {
							t.Fatalf("reply %q is not JSON: %v", got, err)
						}
						if d := sameShape(want, have, "reply"); d != "" {
							t.Errorf("%s\nreply: %s", d, got)
						}
					}
				})
			}
		})
	}
}

// stageEvaluate brings a fresh VM to where an evaluate entry starts: the
// task's initialize items run through the guest client, and the app
// running (and staged, see stageApp).
func stageEvaluate(ctx context.Context, t *testing.T, g *vmguest.Client, pair goldenPair, app string) {
	t.Helper()
	var task map[string]any
	if err := json.Unmarshal(pair.Task, &task); err != nil {
		t.Fatal(err)
	}
	task["instruction"] = "golden: " + pair.Name // the fields the README says the tests fill in
	task["steps"] = 15
	data, _ := json.Marshal(task)
	st, err := scienceboard.ParseTask("VM/"+app+"/golden.json", data)
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
