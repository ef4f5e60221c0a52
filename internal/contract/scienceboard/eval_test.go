package scienceboard

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/pkg/traj"
)

// statusError is an answer with an error status, as a Caller reports it.
type statusError struct {
	status int
	body   string
}

func (e *statusError) Error() string   { return fmt.Sprintf("HTTP %d: %s", e.status, e.body) }
func (e *statusError) HTTPStatus() int { return e.status }

// fakeVM answers requests from a route table ("METHOD server path") and
// records them as "METHOD server path?query body".
type fakeVM struct {
	routes map[string]string                   // fixed 200 replies
	handle func(r Request) (string, int, bool) // dynamic replies (ok false: not handled)
	err    error                               // no answer at all
	reqs   []string
}

func (f *fakeVM) Call(ctx context.Context, r Request) ([]byte, error) {
	line := r.Method + " " + r.Server + " " + r.Path
	if len(r.Query) > 0 {
		line += "?" + r.Query.Encode()
	}
	if r.Body != nil {
		line += " " + string(r.Body)
	}
	f.reqs = append(f.reqs, line)
	if f.err != nil {
		return nil, f.err
	}
	if f.handle != nil {
		if body, status, ok := f.handle(r); ok {
			if status != 200 {
				return nil, &statusError{status, body}
			}
			return []byte(body), nil
		}
	}
	if body, ok := f.routes[r.Method+" "+r.Server+" "+r.Path]; ok {
		return []byte(body), nil
	}
	return nil, &statusError{404, "no route"}
}

// evalTask builds a task from a JSON file body.
func evalTask(t *testing.T, app, evaluate string) *Task {
	t.Helper()
	src := fmt.Sprintf(`{"type": %q, "steps": 5, "instruction": "x", "evaluate": %s}`, app, evaluate)
	tk, err := ParseTask(app+"/T.json", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestAnswersEqual(t *testing.T) {
	cases := []struct {
		got, want string
		eq        bool
	}{
		{"9.39", "9.39", true}, {" 9.390 ", "9.39", true}, {"asn", "ASN", true}, {"TYC  2082-2143-1", "TYC 2082-2143-1", true},
		{"ANS 42", "42", true}, {"1e3", "1000", true}, {"9.4", "9.39", false}, {"", "5", false}, {"E3", "E4", false},
		{"1048577", "1048576", false}, {"2575", "2575.0", true},
	}
	for _, c := range cases {
		t.Run(c.got+"|"+c.want, func(t *testing.T) {
			if AnswersEqual(c.got, c.want) != c.eq {
				t.Errorf("AnswersEqual(%q, %q) != %v", c.got, c.want, c.eq)
			}
		})
	}
}

func cxReply(note []string, err string) string {
	e := "null"
	if err != "" {
		e = fmt.Sprintf(`{"type": "UserError", "message": %q}`, err)
	}
	n := "[]"
	if note != nil {
		n = PyJSON(func() []any {
			out := make([]any, len(note))
			for i, s := range note {
				out[i] = s
			}
			return out
		}())
	}
	return fmt.Sprintf(`{"json values": [null], "python values": [null], "log messages": {"note": %s, "warning": [], "error": [], "bug": []}, "error": %s}`, n, e)
}

// chimeraX serves the states dump (states then /read) and info commands.
func chimeraX(states string, info map[string][]string) func(r Request) (string, int, bool) {
	return func(r Request) (string, int, bool) {
		switch {
		case r.Path == "/chimerax/run" && strings.Contains(string(r.Body), `"states `):
			return cxReply(nil, ""), 200, true
		case r.Path == "/read" && strings.HasPrefix(r.Query.Get("path"), ChimeraXDumpDir+"/"):
			return states, 200, true
		case r.Path == "/chimerax/run":
			for k, lines := range info {
				if strings.Contains(string(r.Body), `"info `+k+`"`) {
					return cxReply([]string{strings.Join(lines, "\n") + "\n"}, ""), 200, true
				}
			}
			return cxReply([]string{"Unknown command"}, "Unknown command"), 200, true
		}
		return "", 0, false
	}
}

// TestEvaluate covers each check type's semantics without lambdas (the
// lambda cases are in TestEvaluateLambdas).
func TestEvaluate(t *testing.T) {
	cxStates := `{"_state_containers.models._models.(1,)._name": "2olx", "a.turn": 90, "a.bg": "#ffffff",
		"a.rgba": "[0.5 0.5 0.5 0.]", "a.list": [0.5, 0.5], "a.flag": true}`
	kal := map[string]string{"GET app /vars": `{"p": "391", "f": "x->x^2+1", "pi": "3.14159265359"}`}
	kalPlots := func(r Request) (string, int, bool) {
		if r.Path != "/func/2d" {
			return "", 0, false
		}
		if string(r.Body) == "[]" {
			return `[{"expr": "x->x", "color": "#000000"}, {"expr": "x->x^2", "color": "#ff0000"}]`, 200, true
		}
		return `[{"expr": "x->x", "color": "#000000", "(2, 4)": false, "(1, 2)": false},
			{"expr": "x->x^2", "color": "#ff0000", "(2, 4)": true, "(1, 2)": false}]`, 200, true
	}
	cases := []struct {
		name        string
		app, eval   string
		vm          *fakeVM
		final       FinalAction
		passed      bool
		unsupported int
		err         bool
		detail      string // substring of the last check's detail
	}{
		// stop
		{name: "stop done", app: "ChimeraX", eval: `[{"type": "stop", "value": "DONE"}]`, final: FinalAction{Kind: "DONE"}, passed: true},
		{name: "stop fail wanted, done given", app: "Celestia", eval: `[{"type": "stop", "value": "FAIL"}]`, final: FinalAction{Kind: "DONE"}, detail: "final action DONE, want FAIL"},
		{name: "stop fail, step limit", app: "Celestia", eval: `[{"type": "stop", "value": "FAIL"}]`, detail: "no final action"},
		{name: "stop ans", app: "ChimeraX", eval: `[{"type": "stop", "value": "ANS", "args": ["9.39"]}]`, final: FinalAction{Kind: "ANS", Answer: "9.390"}, passed: true},
		{name: "stop ans wrong", app: "ChimeraX", eval: `[{"type": "stop", "value": "ANS", "args": ["ASN"]}]`, final: FinalAction{Kind: "ANS", Answer: "GLN"}, detail: `want "ASN"`},
		{name: "stop mismatch asks the VM nothing", app: "KAlgebra", eval: `[{"type": "val", "key": "p", "value": 391}, {"type": "stop", "value": "DONE"}]`,
			vm: &fakeVM{err: errors.New("must not be called")}, detail: "want DONE"},
		// ChimeraX states (literal keys), info
		{name: "states literal", app: "ChimeraX", eval: `[{"type": "states", "key": "_state_containers.models._models.(1,)._name", "value": "2olx"}]`,
			vm: &fakeVM{handle: chimeraX(cxStates, nil)}, passed: true},
		{name: "states int equals float", app: "ChimeraX", eval: `[{"type": "states", "key": "a.turn", "value": 90.0}]`,
			vm: &fakeVM{handle: chimeraX(cxStates, nil)}, passed: true},
		{name: "states string is not a number", app: "ChimeraX", eval: `[{"type": "states", "key": "a.turn", "value": "90"}]`,
			vm: &fakeVM{handle: chimeraX(cxStates, nil)}, detail: "want"},
		{name: "states list", app: "ChimeraX", eval: `[{"type": "states", "key": "a.list", "value": [0.5, 0.5]}]`,
			vm: &fakeVM{handle: chimeraX(cxStates, nil)}, passed: true},
		{name: "states wrong", app: "ChimeraX", eval: `[{"type": "states", "key": "a.bg", "value": "#000000"}]`,
			vm: &fakeVM{handle: chimeraX(cxStates, nil)}, detail: `want "#000000"`},
		{name: "states pattern on json of a list", app: "ChimeraX", eval: `[{"type": "states", "key": "a.list", "pattern": "^\\[0\\.5, 0\\.5\\]$"}]`,
			vm: &fakeVM{handle: chimeraX(cxStates, nil)}, passed: true},
		{name: "states pattern on bool", app: "ChimeraX", eval: `[{"type": "states", "key": "a.flag", "pattern": "^true$"}]`,
			vm: &fakeVM{handle: chimeraX(cxStates, nil)}, passed: true},
		{name: "states missing key", app: "ChimeraX", eval: `[{"type": "states", "key": "a.nope", "value": "x"}]`,
			vm: &fakeVM{handle: chimeraX(cxStates, nil)}, detail: "not in the states dump"},
		{name: "states dump refused", app: "ChimeraX", eval: `[{"type": "states", "key": "a.bg", "value": "#ffffff"}]`,
			vm: &fakeVM{handle: func(r Request) (string, int, bool) { return cxReply(nil, "Unknown command: states"), 200, true }}, detail: "Unknown command: states"},
		{name: "chimerax info", app: "ChimeraX", eval: `[{"type": "info", "key": "chains", "value": ["chain B", "chain A"]}]`,
			vm: &fakeVM{handle: chimeraX(cxStates, map[string][]string{"chains": {"chain A", "chain B", ""}})}, passed: true},
		{name: "chimerax info lines are not stripped", app: "ChimeraX", eval: `[{"type": "info", "key": "chains", "value": ["chain B", "chain A"]}]`,
			vm: &fakeVM{handle: chimeraX(cxStates, map[string][]string{"chains": {"chain A", "  chain B"}})}, detail: `missing line "chain B"`},
		{name: "chimerax info extra line", app: "ChimeraX", eval: `[{"type": "info", "key": "chains", "value": ["chain A"]}]`,
			vm: &fakeVM{handle: chimeraX(cxStates, map[string][]string{"chains": {"chain A", "chain B"}})}, detail: `unexpected line "chain B"`},
		{name: "chimerax file", app: "ChimeraX", eval: `[{"type": "file", "key": "/tmp/x.pdb", "value": "ATOM     14"}]`,
			vm: &fakeVM{handle: func(r Request) (string, int, bool) {
				if r.Path == "/read" && r.Query.Get("path") == "/tmp/x.pdb" {
					return "HEADER\nATOM     14  CA\n", 200, true
				}
				return chimeraX(cxStates, nil)(r)
			}}, passed: true},
		// KAlgebra
		{name: "val", app: "KAlgebra", eval: `[{"type": "val", "key": "p", "value": 391.0000001}]`, vm: &fakeVM{routes: kal}, passed: true},
		{name: "val off", app: "KAlgebra", eval: `[{"type": "val", "key": "p", "value": 392}]`, vm: &fakeVM{routes: kal}, detail: "want 392"},
		{name: "val undefined", app: "KAlgebra", eval: `[{"type": "val", "key": "q", "value": 1}]`, vm: &fakeVM{routes: kal}, detail: "not defined"},
		{name: "var exact", app: "KAlgebra", eval: `[{"type": "var", "key": "f", "value": "x->x^2+1"}]`, vm: &fakeVM{routes: kal}, passed: true},
		{name: "var spacing differs", app: "KAlgebra", eval: `[{"type": "var", "key": "f", "value": "x -> x^2 + 1"}]`, vm: &fakeVM{routes: kal}, detail: "want"},
		{name: "var undef", app: "KAlgebra", eval: `[{"type": "var", "key": "e", "value": "#UNDEF"}]`, vm: &fakeVM{routes: kal}, passed: true},
		{name: "var defined but wanted undef", app: "KAlgebra", eval: `[{"type": "var", "key": "pi", "value": "#UNDEF"}]`, vm: &fakeVM{routes: kal}, detail: "want it undefined"},
		{name: "eqn points", app: "KAlgebra", eval: `[{"type": "eqn", "key": [[2, 4], [1, 2]], "value": {"(2, 4)": true, "(1, 2)": false, "color": "#ff0000"}}]`,
			vm: &fakeVM{handle: kalPlots}, passed: true},
		{name: "eqn colour differs", app: "KAlgebra", eval: `[{"type": "eqn", "key": [[2, 4], [1, 2]], "value": {"(2, 4)": true, "color": "#000000"}}]`,
			vm: &fakeVM{handle: kalPlots}, detail: "none of 2 plots"},
		{name: "eqn missing key fails", app: "KAlgebra", eval: `[{"type": "eqn", "key": [[2, 4]], "value": {"(3, 9)": true}}]`,
			vm: &fakeVM{handle: kalPlots}, detail: `has no "(3, 9)"`},
		{name: "eqn size", app: "KAlgebra", eval: `[{"type": "eqn", "key": "#SIZE", "value": 2}]`, vm: &fakeVM{handle: kalPlots}, passed: true},
		{name: "eqn size wrong", app: "KAlgebra", eval: `[{"type": "eqn", "key": "#SIZE", "value": 0}]`, vm: &fakeVM{handle: kalPlots}, detail: "want 0"},
		// GRASS GIS and Celestia with plain keys
		{name: "grass info plain key", app: "GrassGIS", eval: `[{"type": "info", "key": "output", "value": "ok"}]`,
			vm: &fakeVM{routes: map[string]string{"GET app /dump": `{"output": "ok"}`}}, passed: true},
		{name: "celestia app refuses", app: "Celestia", eval: `[{"type": "info", "key": "time", "value": 1}]`,
			vm: &fakeVM{routes: map[string]string{}}, detail: "HTTP 404"},
		// TeXstudio and Lean
		{name: "tex compile", app: "TeXstudio", eval: `[{"type": "compile", "path": "/a", "file": "main"}]`,
			vm: &fakeVM{routes: map[string]string{"POST guest /tex/check": `{"pass": true}`}}, passed: true},
		{name: "tex compile fails", app: "TeXstudio", eval: `[{"type": "compile", "path": "/a", "file": "main"}]`,
			vm: &fakeVM{routes: map[string]string{"POST guest /tex/check": `{"pass": false}`}}, detail: "not: "},
		{name: "tex include", app: "TeXstudio", eval: `[{"type": "include", "path": "/a/refs.bib", "pattern": "year=\\{2018\\}"}]`,
			vm: &fakeVM{routes: map[string]string{"GET guest /read": "@a{x, year={2018}}"}}, passed: true},
		{name: "tex file without touch", app: "TeXstudio", eval: `[{"type": "file", "path": "/a/main.tex", "source": "x", "target": "y"}]`,
			vm: &fakeVM{routes: map[string]string{"GET guest /read": "y"}}, detail: "no touch item writes"},
		// unsupported and errors
		{name: "check of another app", app: "Celestia", eval: `[{"type": "states", "key": "a", "value": 1}]`, unsupported: 1},
		{name: "unknown type", app: "ChimeraX", eval: `[{"type": "pixel"}, {"type": "stop", "value": "DONE"}]`, final: FinalAction{Kind: "DONE"}, unsupported: 1},
		{name: "unknown app", app: "Gimp", eval: `[{"type": "info", "key": "a", "value": 1}]`, unsupported: 1},
		{name: "no checks", app: "ChimeraX", eval: `[]`, unsupported: 1},
		{name: "no answer is an error", app: "GrassGIS", eval: `[{"type": "info", "key": "output", "value": 1}]`,
			vm: &fakeVM{err: errors.New("connection refused")}, err: true},
		{name: "invalid dump fails the check", app: "GrassGIS", eval: `[{"type": "info", "key": "output", "value": 1}]`,
			vm: &fakeVM{routes: map[string]string{"GET app /dump": `{not json`}}, detail: "expected JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tk := evalTask(t, c.app, c.eval)
			vm := c.vm
			if vm == nil {
				vm = &fakeVM{}
			}
			r := Evaluate(context.Background(), tk, vm, c.final)
			if r.Passed != c.passed || len(r.Unsupported) != c.unsupported || (r.Error != "") != c.err {
				t.Fatalf("got %+v; want passed=%v unsupported=%d error=%v (requests %q)", r, c.passed, c.unsupported, c.err, vm.reqs)
			}
			if c.detail != "" && (len(r.Checks) == 0 || !strings.Contains(r.Checks[len(r.Checks)-1].Detail, c.detail)) {
				t.Errorf("detail of %+v does not contain %q", r.Checks, c.detail)
			}
		})
	}
}

// TestEvaluateStopsAtFirstFailure: like ScienceBoard, the checks after a
// failed one are not run (a ChimeraX info command changes the log).
func TestEvaluateStopsAtFirstFailure(t *testing.T) {
	tk := evalTask(t, "ChimeraX", `[{"type": "states", "key": "a", "value": 2}, {"type": "info", "key": "sel", "value": []}]`)
	vm := &fakeVM{handle: chimeraX(`{"a": 1}`, nil)}
	r := Evaluator{Now: func() time.Time { return time.UnixMilli(1700000000123) }}.Evaluate(context.Background(), tk, vm, FinalAction{})
	want := []string{
		`POST guest /chimerax/run {"command":"states /home/user/Downloads 1700000000123"}`,
		"GET guest /read?path=%2Fhome%2Fuser%2FDownloads%2F1700000000123.json",
	}
	if !reflect.DeepEqual(vm.reqs, want) || r.Passed || len(r.Checks) != 1 {
		t.Errorf("requests %q, result %+v; want %q and one failed check", vm.reqs, r, want)
	}
}

func TestFinalActionOf(t *testing.T) {
	cases := []struct {
		o    traj.Outcome
		want FinalAction
	}{
		{traj.Outcome{Kind: traj.OutcomeFinished}, FinalAction{Kind: FinalDone}},
		{traj.Outcome{Kind: traj.OutcomeAnswered, Answer: "42"}, FinalAction{Kind: FinalAns, Answer: "42"}},
		{traj.Outcome{Kind: traj.OutcomeFailed}, FinalAction{Kind: FinalFail}},
		{traj.Outcome{Kind: traj.OutcomeStepLimit}, FinalAction{}},
	}
	for _, c := range cases {
		t.Run(string(c.o.Kind), func(t *testing.T) {
			if got := FinalActionOf(c.o); got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestEvaluateRealTasks evaluates real benchmark tasks, lambdas included,
// against replies shaped like the real servers'.
func TestEvaluateRealTasks(t *testing.T) {
	load := func(id string) *Task {
		tk, err := LoadFile(filepath.Join(realTasks, "VM", strings.ReplaceAll(id, "/", string(filepath.Separator))+".json"))
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	grass := func(dump string) *fakeVM { return &fakeVM{routes: map[string]string{"GET app /dump": dump}} }
	celestia := func(dump string) *fakeVM { return &fakeVM{routes: map[string]string{"POST app /dump": dump}} }
	cases := []struct {
		name   string
		id     string
		vm     *fakeVM
		final  FinalAction
		passed bool
	}{
		{name: "name matches", id: "ChimeraX/A-01", vm: &fakeVM{handle: chimeraX(`{"_state_containers.models._models.(1,)._name": "2olx"}`, nil)}, passed: true},
		{name: "name differs", id: "ChimeraX/A-01", vm: &fakeVM{handle: chimeraX(`{"_state_containers.models._models.(1,)._name": "1abc"}`, nil)}},
		{name: "nothing matches the null checks", id: "ChimeraX/A-10", vm: &fakeVM{handle: chimeraX(`{"_state_containers.models._models.(1,)._name": "3bna"}`, nil)}, passed: true},
		{name: "a null check matches", id: "ChimeraX/A-10", vm: &fakeVM{handle: chimeraX(`{"_state_containers.models._models.(1,)._nucleotide_info.x": 1}`, nil)}},
		{name: "fail wanted", id: "ChimeraX/B-08", final: FinalAction{Kind: "FAIL"}, passed: true},
		{name: "answer", id: "ChimeraX/C-01", final: FinalAction{Kind: "ANS", Answer: "asn"}, passed: true},
		{name: "time near", id: "Celestia/A-01", vm: celestia(`{"time": {"value": 2400000.04}}`), passed: true},
		{name: "time far", id: "Celestia/A-01", vm: celestia(`{"time": {"value": 2400001}}`)},
		{name: "layer removed", id: "GrassGIS/A-02", vm: grass(`{"layers": [{"name": "countries@PERMANENT"}]}`), passed: true},
		{name: "layer kept", id: "GrassGIS/A-02", vm: grass(`{"layers": [{"name": "natural_earth@PERMANENT"}, {"name": "countries@PERMANENT"}]}`)},
		{name: "opacity in range", id: "GrassGIS/B-01", vm: grass(`{"layers": [{"name": "countries@PERMANENT", "opacity": 0.5}]}`), passed: true},
		{name: "opacity out of range", id: "GrassGIS/B-01", vm: grass(`{"layers": [{"name": "countries@PERMANENT", "opacity": 1.0}]}`)},
		{name: "lean builds", id: "Lean/A-05", vm: &fakeVM{routes: map[string]string{"POST guest /lean/check": `{"pass": true}`}}, passed: true},
		{name: "lean has sorry", id: "Lean/A-05", vm: &fakeVM{routes: map[string]string{"POST guest /lean/check": `{"pass": false}`}}},
	}
	for _, c := range cases {
		t.Run(c.id+"/"+c.name, func(t *testing.T) {
			tk := load(c.id)
			vm := c.vm
			if vm == nil {
				vm = &fakeVM{}
			}
			r := Evaluate(context.Background(), tk, vm, c.final)
			if r.Passed != c.passed || len(r.Unsupported) != 0 || r.Error != "" {
				t.Fatalf("got %+v; want passed=%v (requests %q)", r, c.passed, vm.reqs)
			}
		})
	}
}

// TestRealTasksAllSupported: every check and setup item of the 169 VM
// task files can be run (acceptance 1 of issue 21).
func TestRealTasksAllSupported(t *testing.T) {
	set, err := LoadDir(realTasks)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Tasks) != 169 {
		t.Fatalf("%d tasks, want the benchmark's 169", len(set.Tasks))
	}
	for _, tk := range set.Tasks {
		if len(tk.Unsupported) > 0 {
			t.Errorf("%s: %q", tk.ID, tk.Unsupported)
		}
		exp, err := tk.ExpandPlaceholders(map[string]string{"PORTLIKE": "8000"})
		if err != nil {
			t.Errorf("%s: %v", tk.ID, err)
			continue
		}
		if _, err := SetupSteps(exp); err != nil {
			t.Errorf("%s: %v", tk.ID, err)
		}
	}
}
