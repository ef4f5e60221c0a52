package apps

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/scienceboard"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/desktop/desktoptest"
	"github.com/codapipe/codapipe/internal/sim/tasks/taskgen"
)

// running is the app a test machine runs, as its spec's Start made it.
type running struct {
	u    *desktop.UI
	inst desktop.App
}

// startMachine returns a machine that runs app (not started yet) and the
// app it starts, filled in by the launch.
func startMachine(t *testing.T, app desktop.AppSpec) (*desktoptest.Machine, *running) {
	t.Helper()
	r := &running{}
	start := app.Start
	app.Start = func(u *desktop.UI, args []string) desktop.App {
		r.u, r.inst = u, start(u, args)
		return r.inst
	}
	return desktoptest.New(t, 1, app), r
}

// statusError is a reply with a status other than 2xx.
type statusError struct {
	status int
	body   []byte
}

func (e *statusError) Error() string   { return fmt.Sprintf("HTTP %d: %.200s", e.status, e.body) }
func (e *statusError) HTTPStatus() int { return e.status }

// testCaller answers a task's requests on a test machine: the app server
// is the running app's Serve; the guest server is a minimal stand-in for
// the routes ScienceBoard's tasks of these apps use (package guest has
// the real one): /setup/execute, /setup/launch, /write, /opt, /read and
// /chimerax/run, which forwards to GET /run?command= as the real guest
// server does.
type testCaller struct {
	m   *desktoptest.Machine
	app *running
}

func (c *testCaller) Call(_ context.Context, r scienceboard.Request) ([]byte, error) {
	if r.Server == scienceboard.AppServer {
		return c.serve(r.Method, r.Path, r.Query, r.Body)
	}
	var body struct {
		Command scienceboard.Command `json:"command"`
		Path    string               `json:"path"`
		Content string               `json:"content"`
	}
	if len(r.Body) > 0 {
		if err := json.Unmarshal(r.Body, &body); err != nil {
			return nil, &statusError{400, []byte(err.Error())}
		}
	}
	switch r.Path {
	case "/setup/execute":
		out, code := c.m.Shell(scienceboard.CommandLine(body.Command))
		return json.Marshal(map[string]any{"status": "success", "output": out, "error": "", "returncode": code})
	case "/setup/launch":
		if err := c.m.Launch(scienceboard.CommandLine(body.Command)); err != nil {
			return nil, &statusError{500, []byte(err.Error())}
		}
		return []byte(scienceboard.CommandLine(body.Command) + " launched successfully"), nil
	case "/write":
		if out, code := c.m.Shell("printf '%s' " + scienceboard.ShellQuote(body.Content) + " > " + scienceboard.ShellQuote(body.Path)); code != 0 {
			return nil, &statusError{500, []byte(out)}
		}
		return []byte("OK"), nil
	case "/opt":
		return []byte("OK"), nil
	case "/read":
		out, code := c.m.Shell("cat " + scienceboard.ShellQuote(r.Query.Get("path")))
		if code != 0 {
			return nil, &statusError{500, []byte(out)}
		}
		return []byte(out), nil
	case "/chimerax/run":
		var cmd struct {
			Command string `json:"command"`
		}
		if err := json.Unmarshal(r.Body, &cmd); err != nil {
			return nil, &statusError{400, nil}
		}
		return c.serve("GET", "/run", url.Values{"command": {cmd.Command}}, nil)
	}
	return nil, &statusError{404, []byte("no route " + r.Path)}
}

func (c *testCaller) serve(method, p string, q url.Values, body []byte) ([]byte, error) {
	if c.app.inst == nil {
		return nil, fmt.Errorf("connection refused: no app runs")
	}
	resp, status, ok := c.app.inst.Serve(c.app.u, method, p, q, body)
	if !ok {
		status = 404
	}
	if status/100 != 2 {
		return nil, &statusError{status, resp}
	}
	return resp, nil
}

// TestOraclePlansPass plays every task's spec on a machine: its setup
// items as ScienceBoard's harness sends them (scienceboard.SetupSteps, the
// replies judged by CheckReply), its oracle plan, then its checks
// (scienceboard.Evaluate), which must fail before the plan and pass after
// it. A task whose checks need lambdas is skipped
// while package pylambda is a placeholder. The acceptance tests of package
// sim play the task files end to end on the real guest server.
func TestOraclePlansPass(t *testing.T) {
	sets, err := TaskSets()
	if err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	for _, set := range sets {
		files, err := taskgen.Files(set)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range set.Tasks {
			t.Run(set.App.Name+"/"+spec.ID, func(t *testing.T) {
				name := path.Join("VM", taskgen.Folder(set.App), spec.ID+".json")
				task, err := scienceboard.ParseTask(name, files[spec.ID+".json"])
				if err != nil {
					t.Fatal(err)
				}
				if task, err = task.ExpandPlaceholders(map[string]string{"PORTLIKE": "8000"}); err != nil {
					t.Fatal(err)
				}
				m, app := startMachine(t, set.App)
				c := &testCaller{m: m, app: app}
				steps, err := scienceboard.SetupSteps(task)
				if err != nil {
					t.Fatal(err)
				}
				for _, st := range steps {
					if st.Request == nil {
						continue
					}
					body, err := c.Call(context.Background(), *st.Request)
					if err == nil {
						err = st.CheckReply(body)
					}
					if err != nil {
						t.Fatalf("setup %s: %s: %v", st.Func, st.Request, err)
					}
				}
				// Before the plan, the task is not done yet.
				final := scienceboard.FinalAction{Kind: scienceboard.FinalNone}
				if res := (scienceboard.Evaluator{Now: clock}).Evaluate(context.Background(), task, c, final); res.Passed {
					t.Errorf("passes without the oracle plan: %+v", res)
				}
				for _, s := range spec.Oracle {
					kind, label, text, keys := s.Parts()
					switch kind {
					case "click":
						m.Click(label)
					case "type":
						m.Write(text)
					case "hotkey":
						m.Key(keys...)
					case "done":
						final.Kind = scienceboard.FinalDone
					case "fail":
						final.Kind = scienceboard.FinalFail
					case "answer":
						final = scienceboard.FinalAction{Kind: scienceboard.FinalAns, Answer: text}
					}
				}
				res := scienceboard.Evaluator{Now: clock}.Evaluate(context.Background(), task, c, final)
				if len(res.Unsupported) > 0 {
					t.Skipf("not evaluable yet: %v", res.Unsupported)
				}
				if !res.Passed || res.Error != "" {
					t.Errorf("oracle does not pass: %+v", res)
				}
			})
		}
	}
}
