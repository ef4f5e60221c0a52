package scienceboard

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// minimal returns a valid task document with extra top-level fields merged
// in (a nil value deletes the field).
func minimal(t *testing.T, extra map[string]any) []byte {
	t.Helper()
	doc := map[string]any{
		"type":        "App",
		"steps":       5,
		"instruction": "Do it.",
		"initialize":  []any{},
		"evaluate":    []any{},
	}
	for k, v := range extra {
		if v == nil {
			delete(doc, k)
			continue
		}
		doc[k] = v
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fileErrors(err error) []*FileError {
	var out []*FileError
	var walk func(error)
	walk = func(e error) {
		if fe, ok := e.(*FileError); ok {
			out = append(out, fe)
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, c := range j.Unwrap() {
				walk(c)
			}
		}
	}
	walk(err)
	return out
}

func TestParseTaskSyntaxErrors(t *testing.T) {
	tests := []struct {
		name      string
		data      string
		line, col int
	}{
		{"missing value", "{\n  \"type\": \"A\",\n  \"steps\": ,\n}", 3, 12},
		{"trailing comma", "{\n  \"type\": \"A\",\n}", 3, 1},
		{"unicode before error", "{\"instruction\": \"été\", x}", 1, 24},
		{"truncated", "{\n  \"type\": \"A\"", 2, 14},
		{"garbage after object", "{}\nx", 2, 1},
		{"empty file", "", 1, 1},
		{"top-level array", "\n  [1, 2]", 2, 3},
		{"top-level null", "null", 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTask("dir/bad.json", []byte(tc.data))
			if err == nil {
				t.Fatal("no error")
			}
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T is not a *FileError: %v", err, err)
			}
			if fe.Path != "dir/bad.json" || fe.Line != tc.line || fe.Col != tc.col {
				t.Errorf("got path %q line %d col %d, want line %d col %d (%v)", fe.Path, fe.Line, fe.Col, tc.line, tc.col, err)
			}
			want := "dir/bad.json: line " + itoa(tc.line) + ", column " + itoa(tc.col) + ": "
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
		})
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestParseTaskFieldErrors(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		// want lists, per expected FileError, the field and a fragment of
		// the message.
		want     [][2]string
		kind     error
		position bool
	}{
		{"missing type", minimal(t, map[string]any{"type": nil}),
			[][2]string{{"type", "missing; expected a string"}}, ErrMissingField, false},
		{"missing instruction", minimal(t, map[string]any{"instruction": nil}),
			[][2]string{{"instruction", "missing"}}, ErrMissingField, false},
		{"missing steps", minimal(t, map[string]any{"steps": nil}),
			[][2]string{{"steps", "missing; expected a positive integer"}}, ErrMissingField, false},
		{"zero steps", minimal(t, map[string]any{"steps": 0}),
			[][2]string{{"steps", "expected a positive integer, got 0"}}, ErrInvalidField, true},
		{"negative steps", minimal(t, map[string]any{"steps": -3}),
			[][2]string{{"steps", "expected a positive integer, got -3"}}, ErrInvalidField, true},
		{"string steps", minimal(t, map[string]any{"steps": "five"}),
			[][2]string{{"steps", `expected integer, got string "five"`}}, ErrInvalidField, true},
		{"fractional steps", minimal(t, map[string]any{"steps": 2.5}),
			[][2]string{{"steps", "expected integer, got number 2.5"}}, ErrInvalidField, true},
		{"numeric type", minimal(t, map[string]any{"type": 7}),
			[][2]string{{"type", "expected string, got number 7"}}, ErrInvalidField, true},
		{"null instruction", minimal(t, map[string]any{"instruction": json.RawMessage("null")}),
			[][2]string{{"instruction", "expected string, got null"}}, ErrInvalidField, true},
		{"blank instruction", minimal(t, map[string]any{"instruction": "  "}),
			[][2]string{{"instruction", "expected a non-empty string"}}, ErrInvalidField, true},
		{"type with slash", minimal(t, map[string]any{"type": "a/b"}),
			[][2]string{{"type", "'/' or"}}, ErrInvalidField, true},
		{"initialize object", minimal(t, map[string]any{"initialize": map[string]any{"func": "x"}}),
			[][2]string{{"initialize", "expected array, got object"}}, ErrInvalidField, true},
		{"ans number", minimal(t, map[string]any{"ans": 5}),
			[][2]string{{"ans", "expected string, got number 5"}}, ErrInvalidField, true},
		{"several at once", minimal(t, map[string]any{"type": nil, "instruction": nil, "steps": 0}),
			[][2]string{{"type", "missing"}, {"instruction", "missing"}, {"steps", "positive"}}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			task, err := ParseTask("x/T-1.json", tc.data)
			if err == nil {
				t.Fatalf("no error; task %+v", task)
			}
			fes := fileErrors(err)
			if len(fes) != len(tc.want) {
				t.Fatalf("got %d file errors, want %d: %v", len(fes), len(tc.want), err)
			}
			for i, fe := range fes {
				if fe.Path != "x/T-1.json" || fe.Field != tc.want[i][0] || !strings.Contains(fe.Error(), tc.want[i][1]) {
					t.Errorf("error %d = %q (field %q), want field %q containing %q", i, fe, fe.Field, tc.want[i][0], tc.want[i][1])
				}
				if !strings.Contains(fe.Error(), `field "`+tc.want[i][0]+`"`) {
					t.Errorf("error %q does not name the field", fe)
				}
			}
			if tc.kind != nil && !errors.Is(err, tc.kind) {
				t.Errorf("errors.Is(err, %v) = false: %v", tc.kind, err)
			}
			if tc.position && (fes[0].Line == 0 || fes[0].Col == 0) {
				t.Errorf("no position in %v", fes[0])
			}
		})
	}
}

func TestParseTaskTypeErrorPosition(t *testing.T) {
	data := "{\n  \"type\": \"App\",\n  \"instruction\": \"x\",\n  \"steps\":   \"five\"\n}"
	_, err := ParseTask("p.json", []byte(data))
	var fe *FileError
	if !errors.As(err, &fe) {
		t.Fatalf("got %v", err)
	}
	if fe.Line != 4 || fe.Col != 14 || fe.Field != "steps" {
		t.Errorf("got line %d col %d field %q, want 4, 14, steps: %v", fe.Line, fe.Col, fe.Field, err)
	}
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		t.Errorf("error does not wrap *json.UnmarshalTypeError: %v", err)
	}
	want := `p.json: line 4, column 14: field "steps": expected integer, got string "five"`
	if err.Error() != want {
		t.Errorf("got  %q\nwant %q", err, want)
	}
}

func TestParseTaskItems(t *testing.T) {
	type itemWant struct {
		known bool
		issue string // substring; "" = no issue
	}
	tests := []struct {
		name  string
		init  []any
		eval  []any
		wantI []itemWant
		wantE []itemWant
	}{
		{
			name:  "unknown func and check type",
			init:  []any{map[string]any{"func": "transmogrify", "name": "A8Z1J3"}},
			eval:  []any{map[string]any{"type": "pixel", "x": 1}},
			wantI: []itemWant{{false, `func "transmogrify" not supported`}},
			wantE: []itemWant{{false, `type "pixel" not supported`}},
		},
		{
			name: "generic funcs typed",
			init: []any{
				map[string]any{"func": "execute", "command": []string{"rm", "-f", "x"}},
				map[string]any{"func": "execute", "command": "rm -f x", "shell": true},
				map[string]any{"func": "launch", "command": "app", "shell": true, "wait": 5},
				map[string]any{"func": "opt", "depth": 6},
				map[string]any{"func": "touch", "path": "/p", "text": ""},
				map[string]any{"func": "download", "url": "https://x/y", "path": "/p"},
			},
			wantI: []itemWant{{true, ""}, {true, ""}, {true, ""}, {true, ""}, {true, ""}, {true, ""}},
		},
		{
			name: "bad fields of known items",
			init: []any{
				map[string]any{"func": "execute", "command": 5},
				map[string]any{"func": "execute"},
				map[string]any{"func": "execute", "command": ""},
				map[string]any{"func": "launch", "command": "x", "wait": -1},
				map[string]any{"func": "tab", "index": 1.5},
				map[string]any{"func": "execute", "command": "ls", "shell": nil},
				map[string]any{"func": "open", "name": "1abc", "speed": 3},
				"not an object",
				map[string]any{"name": "x"},
				map[string]any{"func": 3},
			},
			eval: []any{
				map[string]any{"type": "stop", "value": "MAYBE"},
				map[string]any{"type": "states", "key": "k"},
				map[string]any{"type": "file", "path": "/p", "value": "x"},
				map[string]any{"type": "val", "key": "p", "value": "1.5"},
			},
			wantI: []itemWant{
				{false, `func "execute": field "command": expected string or array of strings, got number 5`},
				{false, `func "execute": missing field "command"`},
				{false, `expected a non-empty command`},
				{false, `field "wait": expected a non-negative number`},
				{false, `field "index": expected integer, got number 1.5`},
				{false, `field "shell": expected boolean, got null`},
				{true, `func "open": unknown field "speed" kept raw`},
				{false, `expected an object, got string`},
				{false, `missing field "func"`},
				{false, `field "func": expected string, got number 3`},
			},
			wantE: []itemWant{
				{false, `type "stop": field "value": expected one of DONE, FAIL, ANS, got "MAYBE"`},
				{false, `type "states": needs field "value" or "pattern"`},
				{false, `type "file": expected fields path/source/target or key/value`},
				{false, `type "val": field "value": expected number, got string "1.5"`},
			},
		},
		{
			name: "checks typed",
			eval: []any{
				map[string]any{"type": "stop", "value": "ANS", "args": []string{"TYC", "2082"}},
				map[string]any{"type": "stop", "value": "FAIL"},
				map[string]any{"type": "states", "key": "lambda key: key", "find": "lambda key, value: True", "pattern": ".+"},
				map[string]any{"type": "states", "key": "a.b", "value": nil},
				map[string]any{"type": "info", "key": "lambda dump: dump['t']", "value": 1, "pred": "lambda key, value: key == value"},
				map[string]any{"type": "info", "key": "sel", "value": []string{"a", "b"}},
				map[string]any{"type": "val", "key": "p", "value": 1.5},
				map[string]any{"type": "var", "key": "p", "value": "#UNDEF"},
				map[string]any{"type": "eqn", "key": [][]float64{{1, 2}}, "value": map[string]bool{"(1, 2)": true}},
				map[string]any{"type": "eqn", "key": "#SIZE", "value": 0},
				map[string]any{"type": "file", "path": "/p", "source": "a", "target": "b"},
				map[string]any{"type": "file", "key": "/p", "value": "lambda: 'x'"},
				map[string]any{"type": "include", "path": "/p", "pattern": "x"},
				map[string]any{"type": "compile", "path": "/d", "file": "main"},
			},
			wantE: []itemWant{{true, ""}, {true, ""}, {true, ""}, {true, ""}, {true, ""}, {true, ""}, {true, ""},
				{true, ""}, {true, ""}, {true, ""}, {true, ""}, {true, ""}, {true, ""}, {true, ""}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			extra := map[string]any{}
			if tc.init != nil {
				extra["initialize"] = tc.init
			}
			if tc.eval != nil {
				extra["evaluate"] = tc.eval
			}
			task, err := ParseTask("App/T.json", minimal(t, extra))
			if err != nil {
				t.Fatal(err)
			}
			check := func(kind string, i int, known bool, issue string, w itemWant) {
				t.Helper()
				if known != w.known {
					t.Errorf("%s[%d]: known = %v, want %v (issue %q)", kind, i, known, w.known, issue)
				}
				if (w.issue == "") != (issue == "") || !strings.Contains(issue, w.issue) {
					t.Errorf("%s[%d]: issue %q, want %q", kind, i, issue, w.issue)
				}
			}
			if len(task.Initialize) != len(tc.wantI) || len(task.Evaluate) != len(tc.wantE) {
				t.Fatalf("got %d/%d items, want %d/%d", len(task.Initialize), len(task.Evaluate), len(tc.wantI), len(tc.wantE))
			}
			var wantUns []string
			for i, it := range task.Initialize {
				check("initialize", i, it.Known(), it.Issue, tc.wantI[i])
				if it.Issue != "" {
					wantUns = append(wantUns, "initialize["+itoa(i)+"]: "+it.Issue)
				}
			}
			for i, c := range task.Evaluate {
				check("evaluate", i, c.Known(), c.Issue, tc.wantE[i])
				if c.Issue != "" {
					wantUns = append(wantUns, "evaluate["+itoa(i)+"]: "+c.Issue)
				}
			}
			if wantUns == nil {
				wantUns = []string{}
			}
			// The app "App" has no evaluator: its non-stop checks are listed
			// as such after the loader's issues.
			var loaderUns []string
			for _, u := range task.Unsupported {
				if !strings.Contains(u, `app "App" has no evaluator`) {
					loaderUns = append(loaderUns, u)
				}
			}
			if loaderUns == nil {
				loaderUns = []string{}
			}
			if !reflect.DeepEqual(loaderUns, wantUns) {
				t.Errorf("Unsupported = %q, want %q", task.Unsupported, wantUns)
			}
			assertRoundTrip(t, minimal(t, extra), task)
		})
	}
}

func TestTypedValues(t *testing.T) {
	data := minimal(t, map[string]any{
		"initialize": []any{
			map[string]any{"func": "launch", "wait": 7.5, "command": []string{"chimerax", "--cmd", "x"}},
			map[string]any{"func": "execute", "command": "rm -f a", "shell": true},
			map[string]any{"func": "chimerax_turn", "axis": "y", "angle": 90},
			map[string]any{"func": "func_3d", "expr": "x^2-y^2=2"},
		},
		"evaluate": []any{
			map[string]any{"type": "stop", "value": "ANS", "args": []string{"5"}},
			map[string]any{"type": "states", "key": "a", "value": nil},
			map[string]any{"type": "eqn", "key": [][]float64{{1, 2.5}}, "value": map[string]bool{"(1, 2.5)": true}},
			map[string]any{"type": "eqn", "key": "#SIZE", "value": 0},
		},
		"ans":     "ANS 5",
		"query":   []any{map[string]any{"name": "Sol", "type": 1}},
		"comment": "x",
	})
	task, err := ParseTask("tasks/VM/App/A-07.json", data)
	if err != nil {
		t.Fatal(err)
	}
	if task.ID != "App/A-07" || task.App != "App" || task.Steps != 5 || task.Answer == nil || *task.Answer != "ANS 5" {
		t.Errorf("top level: %+v", task)
	}
	if string(task.Query) != `[{"name":"Sol","type":1}]` || string(task.Extra["comment"]) != `"x"` || task.Penalty != nil {
		t.Errorf("raw top level: query %s extra %v penalty %s", task.Query, task.Extra, task.Penalty)
	}
	l := task.Initialize[0].Args.(*Launch)
	if !l.Command.IsArgv() || l.Command.String() != "chimerax --cmd x" || l.UseShell() || task.Initialize[0].WaitDuration().Seconds() != 7.5 {
		t.Errorf("launch: %+v wait %v", l, task.Initialize[0].Wait)
	}
	e := task.Initialize[1].Args.(*Execute)
	if e.Command.IsArgv() || e.Command.Line != "rm -f a" || !e.UseShell() {
		t.Errorf("execute: %+v", e)
	}
	if tu := task.Initialize[2].Args.(*Turn); tu.Axis != "y" || tu.Angle != 90 || task.Initialize[2].Func != "chimerax_turn" {
		t.Errorf("turn: %+v", tu)
	}
	if f := task.Initialize[3].Args.(*Func3D); f.Expr != "x^2-y^2=2" {
		t.Errorf("func_3d: %+v", f)
	}
	if s := task.Evaluate[0].Args.(*StopCheck); s.Value != StopAns || !reflect.DeepEqual(s.Args, []string{"5"}) {
		t.Errorf("stop: %+v", s)
	}
	if s := task.Evaluate[1].Args.(*StatesCheck); string(s.Value) != "null" || s.Pattern != nil {
		t.Errorf("states value null: %+v", s)
	}
	eq := task.Evaluate[2].Args.(*EqnCheck)
	if pts, ok := eq.Points(); !ok || !reflect.DeepEqual(pts, [][]float64{{1, 2.5}}) {
		t.Errorf("eqn points: %v %v", pts, ok)
	}
	if _, ok := eq.Special(); ok {
		t.Error("eqn with points has a special key")
	}
	if sp, ok := task.Evaluate[3].Args.(*EqnCheck).Special(); !ok || sp != "#SIZE" {
		t.Errorf("eqn special: %q %v", sp, ok)
	}
}

func TestIsLambda(t *testing.T) {
	tests := []struct {
		s    string
		want bool
	}{
		{"lambda dump: dump['time']['value']", true},
		{"lambda key, value: abs(key - value) < 0.1", true},
		{"lambda: __import__('datetime')", true},
		{"  lambda\tx: x", true},
		{"lambdas are fun", false},
		{"lambda", false},
		{"_state_containers.models._models.(1,)._name", false},
		{"sel", false},
		{"", false},
	}
	for _, tc := range tests {
		t.Run(tc.s, func(t *testing.T) {
			if got := IsLambda(tc.s); got != tc.want {
				t.Errorf("IsLambda(%q) = %v, want %v", tc.s, got, tc.want)
			}
		})
	}
}

func TestKnownSets(t *testing.T) {
	wantInit := []string{"alphafold_match", "append", "chimerax_clear_log", "chimerax_open", "chimerax_turn", "clear_log", "cmd", "color",
		"def", "destroy", "download", "execute", "func_2d", "func_3d", "import", "launch", "layer", "map", "open", "opt", "query",
		"scale", "tab", "touch", "turn"}
	if got := KnownInitFuncs(""); !reflect.DeepEqual(got, wantInit) {
		t.Errorf("KnownInitFuncs = %q", got)
	}
	wantCheck := []string{"compile", "db", "eqn", "file", "include", "info", "placeholder", "states", "stop", "val", "var"}
	if got := KnownCheckTypes(""); !reflect.DeepEqual(got, wantCheck) {
		t.Errorf("KnownCheckTypes = %q", got)
	}
	if got, want := KnownCheckTypes("KAlgebra"), []string{"eqn", "stop", "val", "var"}; !reflect.DeepEqual(got, want) {
		t.Errorf("KnownCheckTypes(KAlgebra) = %q", got)
	}
	if got, want := KnownInitFuncs("Lean"), []string{"append", "def", "download", "execute", "import", "launch", "open", "opt", "query", "touch"}; !reflect.DeepEqual(got, want) {
		t.Errorf("KnownInitFuncs(Lean) = %q", got)
	}
}

// assertRoundTrip checks that the task re-encodes to the same JSON as data,
// both from its typed items (FileJSON) and item by item from Raw.
func assertRoundTrip(t *testing.T, data []byte, task *Task) {
	t.Helper()
	var want map[string]any
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	enc, err := task.FileJSON()
	if err != nil {
		t.Fatalf("FileJSON: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(enc, &got); err != nil {
		t.Fatalf("FileJSON output does not decode: %v\n%s", err, enc)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FileJSON differs from the file:\n got  %s\n want %s", enc, data)
	}
	wantInit, _ := want["initialize"].([]any)
	for i, it := range task.Initialize {
		var g any
		if err := json.Unmarshal(it.Raw, &g); err != nil || !reflect.DeepEqual(g, wantInit[i]) {
			t.Errorf("initialize[%d].Raw = %s, want %v", i, it.Raw, wantInit[i])
		}
	}
	wantEval, _ := want["evaluate"].([]any)
	for i, c := range task.Evaluate {
		var g any
		if err := json.Unmarshal(c.Raw, &g); err != nil || !reflect.DeepEqual(g, wantEval[i]) {
			t.Errorf("evaluate[%d].Raw = %s, want %v", i, c.Raw, wantEval[i])
		}
	}
}
