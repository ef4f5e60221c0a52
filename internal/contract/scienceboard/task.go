package scienceboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/codapipe/codapipe/internal/contract/scienceboard/appname"
	"github.com/codapipe/codapipe/internal/infra/redact"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/codapipe/codapipe/pkg/traj"
)

// Task is one benchmark task as read from its file.
type Task struct {
	// ID is "<App>/<file stem>", e.g. "ChimeraX/A-01". The app part comes
	// from the file's "type" field, not from the folder it lives in.
	ID string
	// App is the file's "type" field (the application under test).
	App string
	// Sort is the "sort" field ("VM" or "Raw" in the benchmark); "" if absent.
	Sort string
	// Steps is the step limit ("steps"), always > 0 for a loaded task.
	Steps int
	// Instruction is the natural-language task given to the agent.
	Instruction string
	// Version is the "version" field; "" if absent.
	Version string
	// Snapshot is the VM snapshot to revert to ("snapshot"); "" if absent.
	Snapshot string
	// Initialize lists the setup items ("initialize") in file order.
	Initialize []InitItem
	// Evaluate lists the checks ("evaluate") in file order.
	Evaluate []Check
	// Answer is the optional reference answer ("ans"); nil if absent.
	Answer *string
	// Penalty is the optional "penalty" field, kept as raw JSON; nil if absent.
	Penalty json.RawMessage
	// Query is the optional "query" field (Celestia object lookups in the
	// benchmark), kept as raw JSON; nil if absent.
	Query json.RawMessage
	// Path is the file the task was read from.
	Path string
	// Extra holds top-level keys the loader does not know, verbatim.
	Extra map[string]json.RawMessage
	// Unsupported describes every item (or item field) the loader did not
	// understand, e.g. `initialize[3]: func "alphafold_match" not supported`.
	// It is never nil for a parsed task (empty when everything was typed).
	Unsupported []string

	// has records which optional top-level keys were present in the file, so
	// that FileJSON reproduces the file even for empty values.
	has presence
}

type presence uint8

const (
	hasSort presence = 1 << iota
	hasVersion
	hasSnapshot
	hasInitialize
	hasEvaluate
)

// UnsupportedNames returns the distinct func/check type names of the items
// that have an issue, in file order (initialize first). An item without a
// usable name is shown by its position, e.g. "evaluate[2]".
func (t *Task) UnsupportedNames() []string {
	var names []string
	seen := map[string]bool{}
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	for i, it := range t.Initialize {
		if it.Issue == "" {
			continue
		}
		if it.Func != "" {
			add(it.Func)
		} else {
			add(fmt.Sprintf("initialize[%d]", i))
		}
	}
	for i, c := range t.Evaluate {
		if len(checkIssues(t, c)) == 0 {
			continue
		}
		if c.Type != "" {
			add(c.Type)
		} else {
			add(fmt.Sprintf("evaluate[%d]", i))
		}
	}
	return names
}

// FileJSON re-encodes the task in the benchmark's file format from its typed
// fields: typed items are rebuilt from their typed arguments plus their
// unknown fields, untyped items are written from their raw JSON. The result
// is semantically equal to the source file (key order and number spelling
// may differ).
func (t *Task) FileJSON() ([]byte, error) {
	m := make(map[string]any, 12+len(t.Extra))
	for k, v := range t.Extra {
		m[k] = v
	}
	m["type"] = t.App
	m["steps"] = t.Steps
	m["instruction"] = t.Instruction
	if t.has&hasSort != 0 || t.Sort != "" {
		m["sort"] = t.Sort
	}
	if t.has&hasVersion != 0 || t.Version != "" {
		m["version"] = t.Version
	}
	if t.has&hasSnapshot != 0 || t.Snapshot != "" {
		m["snapshot"] = t.Snapshot
	}
	if t.has&hasInitialize != 0 || len(t.Initialize) > 0 {
		items := t.Initialize
		if items == nil {
			items = []InitItem{}
		}
		m["initialize"] = items
	}
	if t.has&hasEvaluate != 0 || len(t.Evaluate) > 0 {
		checks := t.Evaluate
		if checks == nil {
			checks = []Check{}
		}
		m["evaluate"] = checks
	}
	if t.Answer != nil {
		m["ans"] = *t.Answer
	}
	if t.Penalty != nil {
		m["penalty"] = t.Penalty
	}
	if t.Query != nil {
		m["query"] = t.Query
	}
	return traj.MarshalCompact(m)
}

// IsLambda reports whether s is Python lambda source text such as
// "lambda dump: dump['time']['value']" (leading whitespace ignored). Task
// files use such strings for keys, predicates and expected values that
// ScienceBoard evaluates with Python's eval; the loader keeps them as text.
func IsLambda(s string) bool {
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	rest, ok := strings.CutPrefix(s, "lambda")
	if !ok || rest == "" {
		return false
	}
	r := rest[0]
	return r == ':' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
}

// InitItem is one entry of a task's "initialize" list.
type InitItem struct {
	// Func is the item's "func" field; "" if missing or not a string.
	Func string
	// Wait is the optional "wait" field in seconds (allowed on any item;
	// used by launch in the benchmark); nil if absent.
	Wait *float64
	// Args holds the typed arguments (one of *Execute, *Launch, *Opt,
	// *Touch, *Download, *Open, *Turn, *ClearLog, *Color, *Tab, *Func2D,
	// *Func3D); nil when the item is not understood (see Issue).
	Args InitArgs
	// Extra holds the fields of a typed item that its type does not define.
	Extra map[string]json.RawMessage
	// Raw is the item exactly as it appeared in the file.
	Raw json.RawMessage
	// Issue says why the item is not (fully) understood; "" when it is.
	Issue string
}

// Known reports whether the item was typed (Args is set).
func (it InitItem) Known() bool { return it.Args != nil }

// WaitDuration returns Wait as a duration (0 if absent).
func (it InitItem) WaitDuration() time.Duration {
	if it.Wait == nil {
		return 0
	}
	return time.Duration(*it.Wait * float64(time.Second))
}

// MarshalJSON encodes the item in file format: typed items from Func, Wait,
// Args and Extra; untyped items from Raw.
func (it InitItem) MarshalJSON() ([]byte, error) {
	if it.Args == nil {
		if len(it.Raw) > 0 {
			return compactRaw(it.Raw)
		}
		m := map[string]any{"func": it.Func}
		if it.Wait != nil {
			m["wait"] = *it.Wait
		}
		return traj.MarshalCompact(m)
	}
	head := map[string]any{"func": it.Func}
	if it.Wait != nil {
		head["wait"] = *it.Wait
	}
	return mergeFields(it.Extra, it.Args, head)
}

// Check is one entry of a task's "evaluate" list.
type Check struct {
	// Type is the check's "type" field; "" if missing or not a string.
	Type string
	// Args holds the typed check (one of *StopCheck, *StatesCheck,
	// *InfoCheck, *ValCheck, *VarCheck, *EqnCheck, *FileCheck,
	// *IncludeCheck, *CompileCheck); nil when not understood (see Issue).
	Args CheckArgs
	// Extra holds the fields of a typed check that its type does not define.
	Extra map[string]json.RawMessage
	// Raw is the check exactly as it appeared in the file.
	Raw json.RawMessage
	// Issue says why the check is not (fully) understood; "" when it is.
	Issue string
}

// Known reports whether the check was typed (Args is set).
func (c Check) Known() bool { return c.Args != nil }

// MarshalJSON encodes the check in file format: typed checks from Type,
// Args and Extra; untyped checks from Raw.
func (c Check) MarshalJSON() ([]byte, error) {
	if c.Args == nil {
		if len(c.Raw) > 0 {
			return compactRaw(c.Raw)
		}
		return traj.MarshalCompact(map[string]any{"type": c.Type})
	}
	return mergeFields(c.Extra, c.Args, map[string]any{"type": c.Type})
}

// mergeFields encodes the union of extra, the fields of the typed struct
// args, and head (later sources win).
func mergeFields(extra map[string]json.RawMessage, args any, head map[string]any) ([]byte, error) {
	b, err := traj.MarshalCompact(args)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	m := make(map[string]any, len(extra)+len(fields)+len(head))
	for k, v := range extra {
		m[k] = v
	}
	for k, v := range fields {
		m[k] = v
	}
	for k, v := range head {
		m[k] = v
	}
	return traj.MarshalCompact(m)
}

func compactRaw(raw json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Command is a command line given either as one string or as an argument
// list, as in the "command" field of execute and launch items.
type Command struct {
	// Line is the command when given as a string.
	Line string
	// Argv is the command when given as a list; non-nil exactly when the
	// file used the list form.
	Argv []string
}

// IsArgv reports whether the command was given as a list.
func (c Command) IsArgv() bool { return c.Argv != nil }

// String returns Line, or Argv joined with spaces (for display only).
func (c Command) String() string {
	if c.IsArgv() {
		return strings.Join(c.Argv, " ")
	}
	return c.Line
}

// MarshalJSON encodes the command in the form it was given.
func (c Command) MarshalJSON() ([]byte, error) {
	if c.IsArgv() {
		return traj.MarshalCompact(c.Argv)
	}
	return traj.MarshalCompact(c.Line)
}

// UnmarshalJSON accepts a string or an array of strings.
func (c *Command) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var argv []string
		if err := json.Unmarshal(b, &argv); err != nil {
			return err
		}
		if argv == nil {
			argv = []string{}
		}
		*c = Command{Argv: argv}
		return nil
	}
	var line string
	if err := json.Unmarshal(b, &line); err != nil {
		return err
	}
	*c = Command{Line: line}
	return nil
}

func (c Command) validate() error {
	if c.IsArgv() {
		if len(c.Argv) == 0 {
			return fmt.Errorf("field %q: expected a non-empty command, got []", "command")
		}
		return nil
	}
	if strings.TrimSpace(c.Line) == "" {
		return fmt.Errorf("field %q: expected a non-empty command, got %q", "command", c.Line)
	}
	return nil
}

// InitArgs is the typed form of an initialisation item; the concrete types
// are listed at InitItem.Args.
type InitArgs interface{ isInitArgs() }

// CheckArgs is the typed form of an evaluation check; the concrete types are
// listed at Check.Args.
type CheckArgs interface{ isCheckArgs() }

// Field conventions for the typed argument structs: a field without
// omitzero is required; a field with omitzero is optional and is nil when
// absent from the file.

// Execute runs a command in the guest and waits for it (func "execute").
type Execute struct {
	Command Command `json:"command"`
	Shell   *bool   `json:"shell,omitzero"`
}

// Launch starts a process in the guest without waiting (func "launch"); the
// item's Wait says how long to pause afterwards.
type Launch struct {
	Command Command `json:"command"`
	Shell   *bool   `json:"shell,omitzero"`
}

// UseShell reports whether the command runs through a shell (default false).
func (e *Execute) UseShell() bool { return e.Shell != nil && *e.Shell }

// UseShell reports whether the command runs through a shell (default false).
func (l *Launch) UseShell() bool { return l.Shell != nil && *l.Shell }

// Opt is func "opt" with an integer depth (Celestia and one TeXstudio task
// in the benchmark; an app-side option, the loader does not interpret it).
type Opt struct {
	Depth int `json:"depth"`
}

// Touch writes Text to the guest file Path (func "touch").
type Touch struct {
	Path string `json:"path"`
	Text string `json:"text"`
}

// Download fetches URL into the guest file Path (func "download").
type Download struct {
	URL  string `json:"url"`
	Path string `json:"path"`
}

// Open opens a structure in ChimeraX by PDB id or path (func "open" or
// "chimerax_open").
type Open struct {
	Name string `json:"name"`
}

// Turn rotates the ChimeraX view (func "turn" or "chimerax_turn").
type Turn struct {
	Axis  string  `json:"axis"`
	Angle float64 `json:"angle"`
}

// ClearLog clears the ChimeraX log (func "clear_log" or "chimerax_clear_log").
type ClearLog struct{}

// Color applies a ChimeraX colouring style such as "bypolymer" (func "color").
type Color struct {
	Style string `json:"style"`
}

// Tab switches KAlgebra to the tab with the given index (func "tab").
type Tab struct {
	Index int `json:"index"`
}

// Func2D adds a 2D plot expression in KAlgebra (func "func_2d").
type Func2D struct {
	Expr string `json:"expr"`
}

// Func3D adds a 3D plot expression in KAlgebra (func "func_3d").
type Func3D struct {
	Expr string `json:"expr"`
}

// Append appends Content to the guest file Path (func "append": the
// harness's POST /append).
type Append struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// AlphaFoldMatch fetches the AlphaFold model matching a UniProt name in
// ChimeraX (func "alphafold_match": command "alphafold match NAME").
type AlphaFoldMatch struct {
	Name string `json:"name"`
}

// Destroy closes every ChimeraX model (func "destroy": command "destroy").
type Destroy struct{}

// Map switches the GRASS GIS data catalogue to a mapset (func "map": POST
// /init/map).
type Map struct {
	GrassDB  string `json:"grassdb"`
	Location string `json:"location"`
	Mapset   string `json:"mapset"`
}

// Layer adds the first data-catalogue node that matches Query (e.g.
// {"name": "natural_earth"}) to the GRASS GIS map display (func "layer":
// POST /init/layer).
type Layer struct {
	Query map[string]any `json:"query"`
}

// Scale sets the GRASS GIS map display's scale (func "scale": POST
// /init/scale).
type Scale struct {
	Scale int `json:"scale"`
}

// GrassCmd turns off the GRASS GIS console prompt (func "cmd": GET
// /init/cmd).
type GrassCmd struct{}

// Import lists Lean libraries to import (func "import"); Mathlib, which the
// VM's project already imports, is dropped.
type Import struct {
	Libs []string `json:"libs"`
}

// OpenLibs opens Lean namespaces (func "open" in Lean tasks).
type OpenLibs struct {
	Libs []string `json:"libs"`
}

// Def adds a Lean definition before the theorem (func "def").
type Def struct {
	Expr string `json:"expr"`
}

// LeanQuery is the Lean theorem to prove (func "query"): Expr ends with
// "by sorry"; its header (Expr without the last six characters) is what
// the check looks for.
type LeanQuery struct {
	Expr string `json:"expr"`
}

// Header returns the theorem's header: Expr without its trailing "sorry"
// (ScienceBoard cuts the last six characters, so it ends with ":= by").
func (q *LeanQuery) Header() string { return strings.TrimSuffix(q.Expr, " sorry") }

func (q *LeanQuery) validate() error {
	if !strings.HasSuffix(q.Expr, "by sorry") {
		return fmt.Errorf("field %q: expected a theorem ending with \"by sorry\", got %q", "expr", q.Expr)
	}
	return nil
}

func (*Append) isInitArgs()         {}
func (*AlphaFoldMatch) isInitArgs() {}
func (*Destroy) isInitArgs()        {}
func (*Map) isInitArgs()            {}
func (*Layer) isInitArgs()          {}
func (*Scale) isInitArgs()          {}
func (*GrassCmd) isInitArgs()       {}
func (*Import) isInitArgs()         {}
func (*OpenLibs) isInitArgs()       {}
func (*Def) isInitArgs()            {}
func (*LeanQuery) isInitArgs()      {}

func (*Execute) isInitArgs()  {}
func (*Launch) isInitArgs()   {}
func (*Opt) isInitArgs()      {}
func (*Touch) isInitArgs()    {}
func (*Download) isInitArgs() {}
func (*Open) isInitArgs()     {}
func (*Turn) isInitArgs()     {}
func (*ClearLog) isInitArgs() {}
func (*Color) isInitArgs()    {}
func (*Tab) isInitArgs()      {}
func (*Func2D) isInitArgs()   {}
func (*Func3D) isInitArgs()   {}

func (e *Execute) validate() error { return e.Command.validate() }

// validate refuses a URL that does not parse cleanly, without showing it
// (it may hold a password: redact.ParseURL).
func (d *Download) validate() error {
	u, err := redact.ParseURL(`field "url"`, d.URL)
	if err != nil {
		return err
	}
	if u.Host == "" {
		return fmt.Errorf(`field "url" %s: %w: no host`, redact.Shown(u), redact.ErrBadURL)
	}
	return nil
}
func (l *Launch) validate() error { return l.Command.validate() }

// Values of StopCheck.Value.
const (
	StopDone = "DONE"
	StopFail = "FAIL"
	StopAns  = "ANS"
)

// StopCheck requires the agent to end with the given primitive (DONE, FAIL
// or ANS) and, for ANS, the given answer tokens (type "stop").
type StopCheck struct {
	Value string   `json:"value"`
	Args  []string `json:"args,omitzero"`
}

// StatesCheck compares an entry of the ChimeraX state dump (type "states").
// Key is a dotted key path or lambda source; Find, when set, is lambda
// source selecting an entry by (key, value) whose key is then mapped by the
// Key lambda. Value (any JSON, null included) or Pattern (a regular
// expression) gives the expectation.
type StatesCheck struct {
	Key     string          `json:"key"`
	Value   json.RawMessage `json:"value,omitzero"`
	Pattern *string         `json:"pattern,omitzero"`
	Find    *string         `json:"find,omitzero"`
}

// InfoCheck compares app information (type "info"). In Celestia tasks Key is
// lambda source over the state dump and Pred optional lambda source
// comparing (key, value); in ChimeraX tasks Key is an "info" command
// argument and Value the expected output lines.
type InfoCheck struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
	Pred  *string         `json:"pred,omitzero"`
}

// ValCheck compares a KAlgebra variable with a number (type "val").
type ValCheck struct {
	Key   string  `json:"key"`
	Value float64 `json:"value"`
}

// VarCheck compares a KAlgebra variable with an expression text (type "var").
type VarCheck struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// EqnCheck checks KAlgebra plots (type "eqn"). Key is either a list of
// sample points or a special string such as "#SIZE"; Value is the expected
// result (an object mapping point text to bool, or a number).
type EqnCheck struct {
	Key   json.RawMessage `json:"key"`
	Value json.RawMessage `json:"value"`
}

// Points returns Key as a list of points when it is one.
func (e *EqnCheck) Points() ([][]float64, bool) {
	var pts [][]float64
	if k := bytes.TrimSpace(e.Key); len(k) == 0 || k[0] != '[' || json.Unmarshal(k, &pts) != nil {
		return nil, false
	}
	return pts, true
}

// Special returns Key when it is a string (e.g. "#SIZE").
func (e *EqnCheck) Special() (string, bool) {
	var s string
	if k := bytes.TrimSpace(e.Key); len(k) == 0 || k[0] != '"' || json.Unmarshal(k, &s) != nil {
		return "", false
	}
	return s, true
}

// FileCheck checks a guest file (type "file") in one of two shapes:
// Path/Source/Target (TeXstudio: the text Source in Path should have become
// Target) or Key/Value (ChimeraX: file Key should contain Value, which may be
// lambda source producing the text).
type FileCheck struct {
	Path   *string         `json:"path,omitzero"`
	Source *string         `json:"source,omitzero"`
	Target *string         `json:"target,omitzero"`
	Key    *string         `json:"key,omitzero"`
	Value  json.RawMessage `json:"value,omitzero"`
}

// Replacement reports whether the check has the Path/Source/Target shape.
func (f *FileCheck) Replacement() bool { return f.Path != nil }

// DBCheck runs a GRASS command through the app-state server (type "db",
// GRASS GIS) and compares the value at Key of its JSON output with Value,
// by equality or by the Pred lambda.
type DBCheck struct {
	Cmd    string          `json:"cmd"`
	Kwargs json.RawMessage `json:"kwargs,omitzero"`
	Key    string          `json:"key"`
	Value  json.RawMessage `json:"value"`
	Pred   *string         `json:"pred,omitzero"`
}

// IncludeCheck requires the regular expression Pattern to match the guest
// file Path (type "include").
type IncludeCheck struct {
	Path    string `json:"path"`
	Pattern string `json:"pattern"`
}

// CompileCheck requires the LaTeX document File (without extension) in
// directory Path to compile (type "compile").
type CompileCheck struct {
	Path string `json:"path"`
	File string `json:"file"`
}

// PlaceholderCheck is a Lean task's only check (type "placeholder"): the
// theorem, with the agent's proof, must build without errors and without
// "sorry" (POST /lean/check).
type PlaceholderCheck struct{}

func (*PlaceholderCheck) isCheckArgs() {}
func (*StopCheck) isCheckArgs()        {}
func (*StatesCheck) isCheckArgs()      {}
func (*InfoCheck) isCheckArgs()        {}
func (*ValCheck) isCheckArgs()         {}
func (*VarCheck) isCheckArgs()         {}
func (*EqnCheck) isCheckArgs()         {}
func (*FileCheck) isCheckArgs()        {}
func (*IncludeCheck) isCheckArgs()     {}
func (*DBCheck) isCheckArgs()          {}
func (*CompileCheck) isCheckArgs()     {}

func (s *StopCheck) validate() error {
	switch s.Value {
	case StopDone, StopFail, StopAns:
		return nil
	}
	return fmt.Errorf("field %q: expected one of DONE, FAIL, ANS, got %q", "value", s.Value)
}

func (s *StatesCheck) validate() error {
	if s.Value == nil && s.Pattern == nil {
		return fmt.Errorf("needs field %q or %q", "value", "pattern")
	}
	return nil
}

func (f *FileCheck) validate() error {
	repl := f.Path != nil && f.Source != nil && f.Target != nil && f.Key == nil && f.Value == nil
	contains := f.Key != nil && f.Value != nil && f.Path == nil && f.Source == nil && f.Target == nil
	if !repl && !contains {
		return fmt.Errorf("expected fields path/source/target or key/value")
	}
	return nil
}

// genericFuncs are the initialize funcs every VM task may use (the
// harness's VTask methods and sci/base/init.py's vm_* functions).
var genericFuncs = map[string]func() InitArgs{
	"execute":  func() InitArgs { return &Execute{} },
	"launch":   func() InitArgs { return &Launch{} },
	"opt":      func() InitArgs { return &Opt{} },
	"append":   func() InitArgs { return &Append{} },
	"touch":    func() InitArgs { return &Touch{} },
	"download": func() InitArgs { return &Download{} },
}

// appFuncs are each app's own initialize funcs (the _NAME methods of its
// task class in ScienceBoard, which win over the generic ones).
var appFuncs = map[string]map[string]func() InitArgs{
	appname.ChimeraX: {
		"open":            func() InitArgs { return &Open{} },
		"turn":            func() InitArgs { return &Turn{} },
		"clear_log":       func() InitArgs { return &ClearLog{} },
		"color":           func() InitArgs { return &Color{} },
		"alphafold_match": func() InitArgs { return &AlphaFoldMatch{} },
		"destroy":         func() InitArgs { return &Destroy{} },
	},
	appname.KAlgebra: {
		"tab":     func() InitArgs { return &Tab{} },
		"func_2d": func() InitArgs { return &Func2D{} },
		"func_3d": func() InitArgs { return &Func3D{} },
	},
	appname.GrassGIS: {
		"map":   func() InitArgs { return &Map{} },
		"layer": func() InitArgs { return &Layer{} },
		"scale": func() InitArgs { return &Scale{} },
		"cmd":   func() InitArgs { return &GrassCmd{} },
	},
	appname.Lean: {
		"import": func() InitArgs { return &Import{} },
		"open":   func() InitArgs { return &OpenLibs{} },
		"def":    func() InitArgs { return &Def{} },
		"query":  func() InitArgs { return &LeanQuery{} },
	},
	appname.TeXstudio: {
		"chimerax_open":      func() InitArgs { return &Open{} },
		"chimerax_turn":      func() InitArgs { return &Turn{} },
		"chimerax_clear_log": func() InitArgs { return &ClearLog{} },
	},
}

// appChecks are the check types each app's evaluator knows ("stop" is
// everyone's).
var appChecks = map[string]map[string]func() CheckArgs{
	appname.ChimeraX: {
		"states": func() CheckArgs { return &StatesCheck{} },
		"info":   func() CheckArgs { return &InfoCheck{} },
		"file":   func() CheckArgs { return &FileCheck{} },
	},
	appname.KAlgebra: {
		"val": func() CheckArgs { return &ValCheck{} },
		"var": func() CheckArgs { return &VarCheck{} },
		"eqn": func() CheckArgs { return &EqnCheck{} },
	},
	appname.Celestia: {
		"info": func() CheckArgs { return &InfoCheck{} },
	},
	appname.GrassGIS: {
		"info": func() CheckArgs { return &InfoCheck{} },
		"db":   func() CheckArgs { return &DBCheck{} },
	},
	appname.Lean: {
		"placeholder": func() CheckArgs { return &PlaceholderCheck{} },
	},
	appname.TeXstudio: {
		"compile": func() CheckArgs { return &CompileCheck{} },
		"file":    func() CheckArgs { return &FileCheck{} },
		"include": func() CheckArgs { return &IncludeCheck{} },
	},
}

// appOrder is the order in which an app the tables do not name looks its
// funcs and checks up (the first app that knows a name wins).
var appOrder = []string{appname.ChimeraX, appname.KAlgebra, appname.Celestia, appname.GrassGIS, appname.TeXstudio, appname.Lean}

// initCtor returns the constructor of func name for app.
func initCtor(app, name string) (func() InitArgs, bool) {
	if m, ok := appFuncs[app]; ok {
		if c, ok := m[name]; ok {
			return c, true
		}
		c, ok := genericFuncs[name]
		return c, ok
	}
	if c, ok := genericFuncs[name]; ok {
		return c, true
	}
	for _, a := range appOrder {
		if c, ok := appFuncs[a][name]; ok {
			return c, true
		}
	}
	return nil, false
}

// checkCtor returns the constructor of check type name for app.
func checkCtor(app, name string) (func() CheckArgs, bool) {
	if name == "stop" {
		return func() CheckArgs { return &StopCheck{} }, true
	}
	if m, ok := appChecks[app]; ok {
		c, ok := m[name]
		return c, ok
	}
	for _, a := range appOrder {
		if c, ok := appChecks[a][name]; ok {
			return c, true
		}
	}
	return nil, false
}

// KnownInitFuncs returns the sorted "func" names the loader types for app
// ("" for every app).
func KnownInitFuncs(app string) []string {
	set := map[string]bool{}
	for n := range genericFuncs {
		set[n] = true
	}
	for a, m := range appFuncs {
		if app == "" || a == app {
			for n := range m {
				set[n] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// KnownCheckTypes returns the sorted check "type" names the loader types
// for app ("" for every app).
func KnownCheckTypes(app string) []string {
	set := map[string]bool{"stop": true}
	for a, m := range appChecks {
		if app == "" || a == app {
			for n := range m {
				set[n] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}
