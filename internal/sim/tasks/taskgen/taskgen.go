// Package taskgen is part of codapipe's SIMULATOR (see package sim): the
// generator of the simulator's task files, internal/sim/tasks/VM/<App
// folder>/<ID>.json (which package tasks embeds). Each app package states
// its tasks as a Set (its Tasks function), with answers and expected
// values computed from the app's simulated data and oracle clicks at the
// centres of the current element boxes; Files renders them in the
// ScienceBoard format with the hidden oracle. TestTaskFiles (package apps)
// fails when the files are stale; -update-tasks rewrites them:
//
//	go test ./internal/sim/apps -run TestTaskFiles -update-tasks
package taskgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
)

// KV is one key of an Obj.
type KV struct {
	K string
	V any
}

// Obj is a JSON object whose keys keep their order.
type Obj []KV

// O returns the object of keys and values, alternating: O("func",
// "open", "name", "1crn").
func O(keysAndValues ...any) Obj {
	o := make(Obj, 0, len(keysAndValues)/2)
	for i := 0; i+1 < len(keysAndValues); i += 2 {
		o = append(o, KV{K: keysAndValues[i].(string), V: keysAndValues[i+1]})
	}
	return o
}

// MarshalJSON writes the keys in order, without HTML escaping.
func (o Obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(e.K)
		b.Write(k)
		b.WriteByte(':')
		v, err := traj.MarshalCompact(e.V)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Step is one step of an oracle plan in spec form.
type Step struct {
	kind  string // click, type, hotkey, done, fail, answer
	label string
	text  string
	keys  []string
	why   string
}

// Click clicks the element with this label; why is a reason sentence
// before the thought's "Click the '<label>'." ("" for none).
func Click(label, why string) Step { return Step{kind: "click", label: label, why: why} }

// Type types text.
func Type(text string) Step { return Step{kind: "type", text: text} }

// Enter types text and presses Enter.
func Enter(text string) Step { return Type(text + "\n") }

// Hotkey presses keys together.
func Hotkey(why string, keys ...string) Step { return Step{kind: "hotkey", keys: keys, why: why} }

// Done ends the episode: the task is complete.
func Done(why string) Step { return Step{kind: "done", why: why} }

// Fail ends the episode giving up: the task cannot be done.
func Fail(why string) Step { return Step{kind: "fail", why: why} }

// Answer ends the episode with an answer.
func Answer(ans, why string) Step { return Step{kind: "answer", text: ans, why: why} }

// Parts returns what the step does, for tests that play a task's spec on
// a machine: its kind (click, type, hotkey, done, fail, answer), the label
// it clicks, the text it types or answers, the keys it presses.
func (s Step) Parts() (kind, label, text string, keys []string) {
	return s.kind, s.label, s.text, s.keys
}

func sentence(why, rest string) string { return strings.TrimSpace(why + " " + rest) }

// fileStep is the file form of tasks.OracleStep (this package cannot
// import package tasks, which imports the apps that import this one).
type fileStep struct {
	Thought string `json:"thought"`
	Action  string `json:"action"`
	Target  string `json:"target,omitempty"`
}

// oracleStep turns a spec step into the file form, with clicks at the
// centres of the elements of els.
func (s Step) oracleStep(els []desktop.Element) (fileStep, error) {
	var a traj.Action
	var thought, target string
	switch s.kind {
	case "click":
		i := slices.IndexFunc(els, func(e desktop.Element) bool { return strings.EqualFold(e.Label, s.label) })
		if i < 0 {
			return fileStep{}, fmt.Errorf("oracle: no element %q", s.label)
		}
		e := els[i]
		gx, gy := e.GridCenter()
		a = traj.Action{Type: traj.Click, Point: &traj.Point{X: float64(gx) / 1000, Y: float64(gy) / 1000}}
		thought, target = sentence(s.why, fmt.Sprintf("Click the '%s'.", e.Label)), e.Label
	case "type":
		a = traj.Action{Type: traj.TypeText, Text: s.text}
		if body, ok := strings.CutSuffix(s.text, "\n"); ok {
			thought = fmt.Sprintf("Type '%s' and press Enter.", body)
		} else {
			thought = fmt.Sprintf("Type '%s'.", s.text)
		}
	case "hotkey":
		a = traj.Action{Type: traj.Hotkey, Keys: s.keys}
		thought = sentence(s.why, fmt.Sprintf("Press '%s'.", strings.Join(s.keys, "+")))
	case "done":
		a = traj.Action{Type: traj.Finished}
		thought = sentence(s.why, "The task is complete.")
	case "fail":
		a = traj.Action{Type: traj.CallUser}
		thought = sentence(s.why, "The task cannot be done, so I give up.")
	case "answer":
		a = traj.Action{Type: traj.Answer, Text: s.text}
		thought = sentence(s.why, fmt.Sprintf("Submit the answer %s.", s.text))
	default:
		return fileStep{}, fmt.Errorf("oracle: unknown step kind %q", s.kind)
	}
	return fileStep{Thought: thought, Action: uitars.Format(a, uitars.DefaultOptions()), Target: target}, nil
}

// Task is the spec of one task of an app.
type Task struct {
	ID          string // file stem, e.g. "S01"
	Steps       int    // step limit
	Instruction string
	Pre         []Obj // initialize items before the app's launch
	Init        []Obj // initialize items after it
	Eval        []Obj // evaluate checks
	// Query is Celestia's top-level "query": the objects the state dump
	// (POST /dump) is asked about, [{"name", "type"}]; nil for none.
	Query  []Obj
	Oracle []Step
	// Alternatives are the labels of elements that also solve the task
	// (another way to the goal), which the simulated planner's mistakes
	// must not use.
	Alternatives []string
}

// Set is the tasks of one app.
type Set struct {
	App    desktop.AppSpec
	Launch Obj // the initialize item that starts the app
	Tasks  []*Task
}

// Add appends a task to the set and returns it (for the fields Add does
// not set).
func (s *Set) Add(id string, steps int, instruction string, init, eval []Obj, oracle ...Step) *Task {
	t := &Task{ID: id, Steps: steps, Instruction: instruction, Init: init, Eval: eval, Oracle: oracle}
	s.Tasks = append(s.Tasks, t)
	return t
}

// Check builders, in ScienceBoard's check formats.

// States is a ChimeraX "states" check of a key's value.
func States(key string, value any) Obj {
	return Obj{{"type", "states"}, {"key", key}, {"value", value}}
}

// StatesPattern is a ChimeraX "states" check of a key against a pattern.
func StatesPattern(key, pattern string) Obj {
	return Obj{{"type", "states"}, {"key", key}, {"pattern", pattern}}
}

// Info is an "info" check of a key (lambda) against a value.
func Info(key string, value any) Obj { return Obj{{"type", "info"}, {"key", key}, {"value", value}} }

// InfoPred is an "info" check with a predicate (see Near).
func InfoPred(key string, value any, pred string) Obj {
	return Obj{{"type", "info"}, {"key", key}, {"value", value}, {"pred", pred}}
}

// Near is the predicate of a value within tol of the expected one.
func Near(tol float64) string {
	return "lambda key, value: abs(key - value) < " + strconv.FormatFloat(tol, 'g', -1, 64)
}

// StopAns is the "stop" check of an answer.
func StopAns(args ...string) Obj { return Obj{{"type", "stop"}, {"value", "ANS"}, {"args", args}} }

// StopFail is the "stop" check of giving up.
func StopFail() Obj { return Obj{{"type", "stop"}, {"value", "FAIL"}} }

// Val is a KAlgebra "val" check of a variable's number.
func Val(key string, v float64) Obj { return Obj{{"type", "val"}, {"key", key}, {"value", v}} }

// Var is a KAlgebra "var" check of a variable's text.
func Var(key, v string) Obj { return Obj{{"type", "var"}, {"key", key}, {"value", v}} }

// DB is a GRASS "db" check of a module's output (pred "" for none).
func DB(cmd string, kwargs Obj, key string, value any, pred string) Obj {
	o := Obj{{"type", "db"}, {"cmd", cmd}, {"kwargs", kwargs}, {"key", key}, {"value", value}}
	if pred != "" {
		o = append(o, KV{"pred", pred})
	}
	return o
}

// Folder is the folder of an app's task files below VM/: its name
// without spaces.
func Folder(app desktop.AppSpec) string { return strings.ReplaceAll(app.Name, " ", "") }

// Files returns the task files of the set by file name (<ID>.json).
func Files(set Set) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, s := range set.Tasks {
		name := s.ID + ".json"
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s: duplicate task %s", set.App.Name, s.ID)
		}
		b, err := render(set, s)
		if err != nil {
			return nil, fmt.Errorf("%s/%w", set.App.Name, err)
		}
		out[name] = b
	}
	return out, nil
}

// render returns the file content of a task of the set.
func render(set Set, s *Task) ([]byte, error) {
	init := append(append(slices.Clone(s.Pre), set.Launch), s.Init...)
	var oracle []fileStep
	for _, o := range s.Oracle {
		f, err := o.oracleStep(set.App.Elements)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.ID, err)
		}
		oracle = append(oracle, f)
	}
	sim := Obj{{"oracle", oracle}}
	if s.Alternatives != nil {
		sim = append(sim, KV{"alternatives", s.Alternatives})
	}
	file := Obj{
		{"type", set.App.Name}, {"sort", "VM"}, {"steps", s.Steps}, {"instruction", s.Instruction},
		{"version", "0.1"}, {"snapshot", "sim_bench"}, {"initialize", init},
	}
	if s.Query != nil {
		file = append(file, KV{"query", s.Query})
	}
	file = append(file, KV{"evaluate", s.Eval}, KV{"sim", sim})
	raw, err := traj.MarshalCompact(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.ID, err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "    "); err != nil {
		return nil, fmt.Errorf("%s: %w", s.ID, err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}
