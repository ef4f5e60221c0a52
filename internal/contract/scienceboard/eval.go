package scienceboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/codapipe/codapipe/internal/contract/scienceboard/appname"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/codapipe/codapipe/pkg/traj"
)

// Final action kinds (FinalAction.Kind).
const (
	FinalDone = StopDone // the agent called finished()
	FinalFail = StopFail // the agent gave up (call_user())
	FinalAns  = StopAns  // the agent answered
	FinalNone = ""       // no final action (step limit)
)

// FinalAction is how the agent ended the episode: "DONE", "FAIL", "ANS"
// (with Answer) or "" when it ran out of steps.
type FinalAction struct {
	Kind   string // FinalDone, FinalFail, FinalAns or FinalNone
	Answer string // the answer, for FinalAns
}

// FinalActionOf maps a trajectory outcome onto the final action the stop
// checks compare with.
func FinalActionOf(o traj.Outcome) FinalAction {
	switch o.Kind {
	case traj.OutcomeFinished:
		return FinalAction{Kind: FinalDone}
	case traj.OutcomeAnswered:
		return FinalAction{Kind: FinalAns, Answer: o.Answer}
	case traj.OutcomeFailed:
		return FinalAction{Kind: FinalFail}
	}
	return FinalAction{}
}

// Paths and values of the real contract that the checks use.
const (
	// ChimeraXDumpDir is where the states dump is written in the guest.
	ChimeraXDumpDir = "/home/user/Downloads"
	// UndefinedVar is the "var" check value meaning "not defined".
	UndefinedVar = "#UNDEF"
	// SizeKey is the "eqn" check key that counts the 2-D plots.
	SizeKey = "#SIZE"
	// kalTolerance is ScienceBoard's tolerance for KAlgebra "val" checks.
	kalTolerance = 1e-6
	// checkTimeout is the harness's timeout for every request
	// (Manager.HOMO_TIMEOUT); /lean/check and /tex/check build documents
	// and use all of it.
	checkTimeout = 240 * time.Second
)

// Evaluator runs task checks against a VM. The zero value is ready to use.
type Evaluator struct {
	// Now is the clock of the ChimeraX states dump's file name and of
	// lambdas that read the date; nil means time.Now.
	Now func() time.Time
}

// Evaluate is Evaluator{}.Evaluate.
func Evaluate(ctx context.Context, t *Task, c Caller, final FinalAction) traj.EvalResult {
	return Evaluator{}.Evaluate(ctx, t, c, final)
}

// Evaluate runs the task's checks the way ScienceBoard does
// (sci/base/task.py Task.eval, then the app's evaluator):
//
//   - the "stop" checks first: the final action must be each one's value
//     (for ANS, the answer must equal the args; see AnswersEqual); a
//     mismatch fails the task before the VM is asked anything;
//   - when other checks remain, the app's reads that precede them
//     (ChimeraX's states dump, Celestia's POST /dump with the task's query,
//     GRASS GIS's GET /dump), then each check in file order until the
//     first that fails.
//
// docs/tasks.md maps every check type to its requests. A check the
// evaluator cannot run (an untyped item, a lambda that does not compile)
// is listed in EvalResult.Unsupported and nothing is run. A request
// that gets no answer sets EvalResult.Error (the VM failed, not the
// agent); an answer with an error status, or one that does not have the
// expected shape, fails the check with the reason, as ScienceBoard's
// error_factory(False) does.
func (ev Evaluator) Evaluate(ctx context.Context, t *Task, c Caller, final FinalAction) traj.EvalResult {
	res := traj.EvalResult{Checks: []traj.CheckResult{}}
	if len(t.Evaluate) == 0 {
		res.Unsupported = append(res.Unsupported, "task has no evaluate checks")
		return res
	}
	if u := Unsupported(t); len(u) > 0 {
		res.Unsupported = u
		return res
	}
	e := &evaluator{ctx: ctx, t: t, c: c, final: final, now: ev.Now, lambdas: map[string]*lambda{}}
	if e.now == nil {
		e.now = time.Now
	}
	var rest []int
	for i, ck := range t.Evaluate {
		s, ok := ck.Args.(*StopCheck)
		if !ok {
			rest = append(rest, i)
			continue
		}
		passed, detail := e.stop(s)
		res.Checks = append(res.Checks, traj.CheckResult{Type: ck.Type, Passed: passed, Detail: detail})
		if !passed {
			return res
		}
	}
	if len(rest) == 0 {
		res.Passed = true
		return res
	}
	if err := e.prepare(); err != nil {
		return e.finish(res, rest[0], err)
	}
	for _, i := range rest {
		ck := t.Evaluate[i]
		passed, detail, err := e.check(ck)
		if err != nil {
			return e.finish(res, i, err)
		}
		res.Checks = append(res.Checks, traj.CheckResult{Type: ck.Type, Passed: passed, Detail: detail})
		if !passed {
			return res
		}
	}
	res.Passed = true
	return res
}

// finish records err met at check i: no answer is an evaluator error,
// anything else fails the check.
func (e *evaluator) finish(res traj.EvalResult, i int, err error) traj.EvalResult {
	if _, lost := err.(*noAnswer); lost {
		res.Error = fmt.Sprintf("evaluate[%d] (%s): %v", i, e.t.Evaluate[i].Type, err)
		return res
	}
	res.Checks = append(res.Checks, traj.CheckResult{Type: e.t.Evaluate[i].Type, Detail: clip(err.Error())})
	return res
}

type evaluator struct {
	ctx      context.Context
	t        *Task
	c        Caller
	final    FinalAction
	now      func() time.Time
	dump     any      // the app's dump read by prepare (ChimeraX, Celestia, GRASS GIS)
	dumpKeys []string // the ChimeraX states dump's keys in file order
	lambdas  map[string]*lambda
}

// noAnswer is a request that got no answer (the VM's fault).
type noAnswer struct{ err error }

func (e *noAnswer) Error() string { return e.err.Error() }
func (e *noAnswer) Unwrap() error { return e.err }

// call sends r; an error without an HTTP status becomes *noAnswer.
func (e *evaluator) call(r *Request) ([]byte, error) {
	if e.c == nil {
		return nil, &noAnswer{fmt.Errorf("%s: no VM to ask", r)}
	}
	b, err := e.c.Call(e.ctx, *r)
	if err != nil {
		if StatusOf(err) == 0 {
			return nil, &noAnswer{fmt.Errorf("%s: %w", r, err)}
		}
		return nil, fmt.Errorf("%s: %w", r, err)
	}
	return b, nil
}

// callJSON sends r and decodes a JSON reply.
func (e *evaluator) callJSON(r *Request) (any, error) {
	b, err := e.call(r)
	if err != nil {
		return nil, err
	}
	return replyJSON(r, b, "JSON")
}

// replyJSON decodes the JSON reply b to r; an error says what was
// expected (what) and quotes the start of the reply.
func replyJSON(r *Request, b []byte, what string) (any, error) {
	v, err := decodeJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%s: expected %s, got %q", r, what, truncate(string(b), 120))
	}
	return v, nil
}

// prepare makes the app's reads that come before its checks.
func (e *evaluator) prepare() error {
	var err error
	switch e.t.App {
	case appname.ChimeraX:
		e.dump, err = e.statesDump()
	case appname.Celestia:
		e.dump, err = e.callJSON(CelestiaDump(e.t.Query))
	case appname.GrassGIS:
		e.dump, err = e.callJSON(&Request{Server: AppServer, Method: "GET", Path: "/dump"})
	}
	return err
}

// CelestiaDump is Celestia's state request: POST /dump with the task's
// "query" list (or []) as the body, encoded as Python's json.dumps does
// and sent without a content type, as the harness does.
func CelestiaDump(query json.RawMessage) *Request {
	body := []byte("[]")
	if len(bytes.TrimSpace(query)) > 0 {
		if v, err := decodeJSON(query); err == nil {
			body = []byte(PyJSON(v))
		}
	}
	return &Request{Server: AppServer, Method: "POST", Path: "/dump", Body: body}
}

// ChimeraXStates returns the two requests of ChimeraX's states dump for
// the file name stamp (milliseconds since the epoch): the "states"
// command of the chimerax-states bundle, which writes DIR/STAMP.json, and
// the read of that file.
func ChimeraXStates(stamp int64) (run, read *Request) {
	ts := strconv.FormatInt(stamp, 10)
	return ChimeraXRun("states " + ChimeraXDumpDir + " " + ts), ReadFile(ChimeraXDumpDir + "/" + ts + ".json")
}

// ReadFile is the guest server's GET /read?path=.
func ReadFile(path string) *Request {
	return &Request{Server: GuestServer, Method: "GET", Path: "/read", Query: url.Values{"path": {path}}}
}

func (e *evaluator) statesDump() (any, error) {
	run, read := ChimeraXStates(e.now().UnixMilli())
	b, err := e.call(run)
	if err != nil {
		return nil, err
	}
	if _, err := ChimeraXReply(b); err != nil {
		return nil, fmt.Errorf("%s: %w", run, err)
	}
	body, err := e.call(read)
	if err != nil {
		return nil, err
	}
	v, err := replyJSON(read, body, "the JSON states dump")
	if err != nil {
		return nil, err
	}
	if e.dumpKeys, err = objectKeys(body); err != nil {
		return nil, fmt.Errorf("%s: the states dump is not a JSON object", read)
	}
	return v, nil
}

// check runs one non-stop check.
func (e *evaluator) check(c Check) (bool, string, error) {
	switch a := c.Args.(type) {
	case *StatesCheck:
		return e.states(a)
	case *InfoCheck:
		if e.t.App == appname.ChimeraX {
			return e.chimeraxInfo(a)
		}
		return e.keyPred(e.dump, a.Key, a.Pred, a.Value)
	case *DBCheck:
		return e.db(a)
	case *ValCheck:
		return e.val(a)
	case *VarCheck:
		return e.variable(a)
	case *EqnCheck:
		return e.eqn(a)
	case *FileCheck:
		if a.Replacement() {
			return e.texFile(a)
		}
		return e.chimeraxFile(a)
	case *IncludeCheck:
		return e.include(a)
	case *CompileCheck:
		return e.compile(a)
	case *PlaceholderCheck:
		return e.lean()
	}
	return false, "", fmt.Errorf("check type %q has no evaluator", c.Type)
}

func (e *evaluator) stop(s *StopCheck) (bool, string) {
	got := strings.ToUpper(strings.TrimSpace(e.final.Kind))
	if got != s.Value {
		if got == "" {
			got = "no final action"
		}
		return false, fmt.Sprintf("final action %s, want %s", got, s.Value)
	}
	if s.Value != StopAns {
		return true, "final action " + got
	}
	want := strings.Join(s.Args, " ")
	if AnswersEqual(e.final.Answer, want) {
		return true, fmt.Sprintf("answer %q", strings.TrimSpace(e.final.Answer))
	}
	return false, fmt.Sprintf("answer %q, want %q", strings.TrimSpace(e.final.Answer), want)
}

// AnswersEqual compares an agent's answer with the expected one: trimmed,
// runs of white space collapsed, case-insensitive; when both parse as
// numbers they are equal within 1e-9 relative (so "9.390" equals "9.39").
// A leading "ANS" in the answer is ignored. (ScienceBoard compares the
// argument lists exactly; our agents answer with one string, so the
// comparison is on the joined text and a little more lenient.)
func AnswersEqual(got, want string) bool {
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	g, w := norm(got), norm(want)
	if rest, ok := strings.CutPrefix(g, "ANS "); ok && !strings.HasPrefix(w, "ANS ") {
		g = rest
	}
	if strings.EqualFold(g, w) {
		return true
	}
	gf, err1 := strconv.ParseFloat(g, 64)
	wf, err2 := strconv.ParseFloat(w, 64)
	if err1 == nil && err2 == nil {
		return math.Abs(gf-wf) <= 1e-9*math.Max(1, math.Abs(wf))
	}
	return false
}

// states is ChimeraX's _eval_states over the flat states dump, in its
// three key modes: a literal key; a key lambda (str → bool) selecting the
// first matching key; a find lambda ((key, value) → bool) selecting the
// first matching entry whose key the key lambda (str → str) maps to the
// key to read. A null value checks that nothing matches.
func (e *evaluator) states(s *StatesCheck) (bool, string, error) {
	dump, ok := e.dump.(map[string]any)
	if !ok {
		return false, "", fmt.Errorf("the states dump is not a JSON object")
	}
	checkNull := s.Value != nil && string(bytes.TrimSpace(s.Value)) == "null"
	var raw string
	switch {
	case s.Find != nil:
		if checkNull {
			// ScienceBoard reads an undefined name here and fails.
			return false, "a find lambda with value null always fails in ScienceBoard", nil
		}
		var meta []string
		for _, k := range e.dumpKeys {
			v, err := e.apply(*s.Find, k, dump[k])
			if err != nil {
				return false, "", err
			}
			if Truthy(v) {
				meta = append(meta, k)
			}
		}
		if len(meta) == 0 {
			return false, "no entry matches " + clip(*s.Find), nil
		}
		v, err := e.apply(s.Key, meta[0])
		if err != nil {
			return false, "", err
		}
		str, isStr := v.(string)
		if !isStr {
			return false, "", fmt.Errorf("key lambda gave %s, expected a string", pyRepr(v))
		}
		raw = str
	case IsLambda(s.Key):
		var keys []string
		for _, k := range e.dumpKeys {
			v, err := e.apply(s.Key, k)
			if err != nil {
				return false, "", err
			}
			if Truthy(v) {
				keys = append(keys, k)
			}
		}
		if checkNull {
			if len(keys) == 0 {
				return true, "no key matches " + clip(s.Key), nil
			}
			return false, fmt.Sprintf("key %s matches %s", clip(keys[0]), clip(s.Key)), nil
		}
		if len(keys) == 0 {
			return false, "no key matches " + clip(s.Key), nil
		}
		raw = keys[0]
	default:
		if checkNull {
			// ScienceBoard tests its still-unset variable here, so this
			// passes whatever the dump holds.
			return true, "literal key with value null (always passes in ScienceBoard)", nil
		}
		raw = s.Key
	}
	got, found := dump[raw]
	if !found {
		return false, fmt.Sprintf("key %s not in the states dump", clip(raw)), nil
	}
	if s.Pattern != nil {
		text, isStr := got.(string)
		if !isStr {
			text = PyJSON(got)
		}
		re, err := regexp.Compile(*s.Pattern)
		if err != nil {
			return false, "", fmt.Errorf("pattern %q: %w", *s.Pattern, err)
		}
		if re.MatchString(text) {
			return true, fmt.Sprintf("%s = %s matches %q", clip(raw), clip(text), *s.Pattern), nil
		}
		return false, fmt.Sprintf("%s = %s does not match %q", clip(raw), clip(text), *s.Pattern), nil
	}
	want, err := decodeJSON(s.Value)
	if err != nil || want == nil {
		return false, "no expected value", nil
	}
	if pyEqual(want, got) {
		return true, fmt.Sprintf("%s = %s", clip(raw), clip(pyRepr(got))), nil
	}
	return false, fmt.Sprintf("%s = %s, want %s", clip(raw), clip(pyRepr(got)), clip(pyRepr(want))), nil
}

// chimeraxInfo runs "info KEY" and compares the set of its note lines.
func (e *evaluator) chimeraxInfo(c *InfoCheck) (bool, string, error) {
	var want []string
	if err := json.Unmarshal(c.Value, &want); err != nil {
		return false, "", fmt.Errorf("expected value must be a list of lines: %w", err)
	}
	r := ChimeraXRun("info " + c.Key)
	b, err := e.call(r)
	if err != nil {
		return false, "", err
	}
	var reply struct {
		Log map[string][]string `json:"log messages"`
	}
	if err := json.Unmarshal(b, &reply); err != nil {
		return false, "", fmt.Errorf("%s: expected a ChimeraX REST reply, got %q", r, truncate(string(b), 120))
	}
	// Lines are kept in reply order and the expected ones in file order,
	// so the detail names the same line on every run.
	var gotLines []string
	got := map[string]bool{}
	for _, m := range reply.Log["note"] {
		for _, l := range strings.Split(strings.TrimSpace(m), "\n") {
			if l != "" && !got[l] {
				got[l] = true
				gotLines = append(gotLines, l)
			}
		}
	}
	wantSet := map[string]bool{}
	for _, l := range want {
		wantSet[l] = true
	}
	for _, l := range want {
		if !got[l] {
			return false, fmt.Sprintf("info %s: missing line %q", c.Key, l), nil
		}
	}
	for _, l := range gotLines {
		if !wantSet[l] {
			return false, fmt.Sprintf("info %s: unexpected line %q", c.Key, l), nil
		}
	}
	return true, fmt.Sprintf("info %s: %d lines match", c.Key, len(wantSet)), nil
}

// keyPred applies a key (lambda, or a plain top-level key) to v and
// compares the result with the expected value by pred (lambda) or ==.
func (e *evaluator) keyPred(v any, key string, pred *string, value json.RawMessage) (bool, string, error) {
	var got any
	if IsLambda(key) {
		var err error
		if got, err = e.apply(key, v); err != nil {
			return false, "", err
		}
	} else {
		m, isMap := v.(map[string]any)
		x, found := m[key]
		if !isMap || !found {
			return false, fmt.Sprintf("key %q not in the reply", key), nil
		}
		got = x
	}
	want, err := decodeJSON(value)
	if err != nil {
		return false, "", fmt.Errorf("expected value: %w", err)
	}
	if pred == nil {
		if pyEqual(got, want) {
			return true, fmt.Sprintf("key = %s", clip(pyRepr(got))), nil
		}
		return false, fmt.Sprintf("key = %s, want %s", clip(pyRepr(got)), clip(pyRepr(want))), nil
	}
	r, err := e.apply(*pred, got, want)
	if err != nil {
		return false, "", err
	}
	verdict := "holds"
	if !Truthy(r) {
		verdict = "fails"
	}
	return Truthy(r), fmt.Sprintf("key = %s, value = %s: pred %s", clip(pyRepr(got)), clip(pyRepr(want)), verdict), nil
}

// db runs a GRASS module through POST /gcmd and applies key and pred to
// its "stdout".
func (e *evaluator) db(c *DBCheck) (bool, string, error) {
	kwargs := any(map[string]any{})
	if len(c.Kwargs) > 0 {
		var err error
		if kwargs, err = decodeJSON(c.Kwargs); err != nil {
			return false, "", fmt.Errorf("kwargs: %w", err)
		}
	}
	reply, err := e.callJSON(GrassCommand(c.Cmd, kwargs))
	if err != nil {
		return false, "", err
	}
	m, ok := reply.(map[string]any)
	if !ok {
		return false, "", fmt.Errorf("POST /gcmd: expected an object with \"stdout\", got %s", clip(pyRepr(reply)))
	}
	out, ok := m["stdout"]
	if !ok {
		return false, "", fmt.Errorf("POST /gcmd: reply has no \"stdout\"")
	}
	return e.keyPred(out, c.Key, c.Pred, c.Value)
}

// GrassCommand is GRASS GIS's POST /gcmd {"cmd", "kwargs"}.
func GrassCommand(cmd string, kwargs any) *Request {
	return postJSON(AppServer, "/gcmd", map[string]any{"cmd": cmd, "kwargs": kwargs})
}

// KAlgebraVars is KAlgebra's GET /vars.
var KAlgebraVars = Request{Server: AppServer, Method: "GET", Path: "/vars"}

func (e *evaluator) vars() (map[string]any, error) {
	r := KAlgebraVars
	v, err := e.callJSON(&r)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("GET /vars: expected an object, got %s", clip(pyRepr(v)))
	}
	return m, nil
}

// val compares float(vars[key]) with the value within 1e-6.
func (e *evaluator) val(c *ValCheck) (bool, string, error) {
	vars, err := e.vars()
	if err != nil {
		return false, "", err
	}
	raw, ok := vars[c.Key]
	if !ok {
		return false, fmt.Sprintf("%s is not defined", c.Key), nil
	}
	f, ok := pyFloat(raw)
	if !ok {
		return false, fmt.Sprintf("%s = %s is not a number", c.Key, clip(pyRepr(raw))), nil
	}
	if math.Abs(f-c.Value) <= kalTolerance {
		return true, fmt.Sprintf("%s = %s", c.Key, pyRepr(raw)), nil
	}
	return false, fmt.Sprintf("%s = %s, want %v", c.Key, pyRepr(raw), c.Value), nil
}

// variable compares vars[key] with the value exactly ("#UNDEF": absent).
func (e *evaluator) variable(c *VarCheck) (bool, string, error) {
	vars, err := e.vars()
	if err != nil {
		return false, "", err
	}
	raw, ok := vars[c.Key]
	if c.Value == UndefinedVar {
		if ok {
			return false, fmt.Sprintf("%s = %s, want it undefined", c.Key, clip(pyRepr(raw))), nil
		}
		return true, c.Key + " is undefined", nil
	}
	if !ok {
		return false, fmt.Sprintf("%s is not defined", c.Key), nil
	}
	if s, isStr := raw.(string); isStr && s == c.Value {
		return true, fmt.Sprintf("%s = %q", c.Key, s), nil
	}
	return false, fmt.Sprintf("%s = %s, want %q", c.Key, clip(pyRepr(raw)), c.Value), nil
}

// KAlgebraFunc is KAlgebra's POST /func/{dim}d with the point list as the
// JSON body (dim 2 or 3).
func KAlgebraFunc(dim int, points any) *Request {
	return &Request{Server: AppServer, Method: "POST", Path: fmt.Sprintf("/func/%dd", dim),
		Body: []byte(PyJSON(points)), ContentType: "application/json"}
}

// eqn: "#SIZE" counts the 2-D plots; a point list asks KAlgebra which
// plots hold which points, and some plot must have every key of the value
// (point texts, "color", "style") equal to it.
func (e *evaluator) eqn(c *EqnCheck) (bool, string, error) {
	want, err := decodeJSON(c.Value)
	if err != nil {
		return false, "", fmt.Errorf("expected value: %w", err)
	}
	if special, isStr := c.Special(); isStr {
		if special != SizeKey {
			return false, "", fmt.Errorf("key %q: expected %q or a list of points", special, SizeKey)
		}
		plots, err := e.plots(KAlgebraFunc(2, []any{}))
		if err != nil {
			return false, "", err
		}
		if pyEqual(int64(len(plots)), want) {
			return true, fmt.Sprintf("%d plots", len(plots)), nil
		}
		return false, fmt.Sprintf("%d plots, want %s", len(plots), pyRepr(want)), nil
	}
	pts, err := decodeJSON(c.Key)
	if err != nil {
		return false, "", fmt.Errorf("key: %w", err)
	}
	list, _ := pts.([]any)
	var first []any
	if len(list) > 0 {
		first, _ = list[0].([]any)
	}
	if len(first) == 0 {
		return false, "", fmt.Errorf("key: expected a list of points")
	}
	expect, ok := want.(map[string]any)
	if !ok {
		return false, "", fmt.Errorf("value: expected an object of point texts, \"color\" or \"style\"")
	}
	keys, err := objectKeys(c.Value) // file order, so the detail is the same on every run
	if err != nil {
		return false, "", fmt.Errorf("expected value: %w", err)
	}
	plots, err := e.plots(KAlgebraFunc(len(first), list))
	if err != nil {
		return false, "", err
	}
	matched := -1
	for i, p := range plots {
		obj, ok := p.(map[string]any)
		if !ok {
			return false, fmt.Sprintf("plot %d is not an object", i), nil
		}
		all := true
		for _, k := range keys {
			v := expect[k]
			got, ok := obj[k]
			if !ok {
				return false, fmt.Sprintf("plot %d has no %q", i, k), nil
			}
			if !pyEqual(v, got) {
				all = false
			}
		}
		if all && matched < 0 {
			matched = i
		}
	}
	if matched >= 0 {
		obj := plots[matched].(map[string]any)
		return true, fmt.Sprintf("plot %s matches %d keys", pyRepr(obj["expr"]), len(expect)), nil
	}
	return false, fmt.Sprintf("none of %d plots matches %d keys", len(plots), len(expect)), nil
}

// plots sends a /func request; a single object is a one-element list.
func (e *evaluator) plots(r *Request) ([]any, error) {
	v, err := e.callJSON(r)
	if err != nil {
		return nil, err
	}
	switch p := v.(type) {
	case []any:
		return p, nil
	case map[string]any:
		return []any{p}, nil
	}
	return nil, fmt.Errorf("%s: expected a list of plots, got %s", r, clip(pyRepr(v)))
}

// chimeraxFile: the guest file Key must contain Value (or what the Value
// lambda returns).
func (e *evaluator) chimeraxFile(c *FileCheck) (bool, string, error) {
	content, err := e.call(ReadFile(*c.Key))
	if err != nil {
		return false, "", err
	}
	want, err := decodeJSON(c.Value)
	if err != nil {
		return false, "", fmt.Errorf("value: %w", err)
	}
	if s, ok := want.(string); ok && IsLambda(s) {
		if want, err = e.apply(s); err != nil {
			return false, "", err
		}
	}
	s, ok := want.(string)
	if !ok {
		return false, "", fmt.Errorf("value: expected a string, got %s", pyRepr(want))
	}
	if strings.Contains(string(content), s) {
		return true, fmt.Sprintf("%s contains %q", *c.Key, clip(s)), nil
	}
	return false, fmt.Sprintf("%s does not contain %q", *c.Key, clip(s)), nil
}

// texFile: the guest file must be the text the task's touch item wrote
// there, with Source replaced by Target everywhere.
func (e *evaluator) texFile(c *FileCheck) (bool, string, error) {
	before, ok := e.touched(*c.Path)
	if !ok {
		return false, "", fmt.Errorf("no touch item writes %s", *c.Path)
	}
	if c.Source != nil && c.Target != nil {
		before = strings.ReplaceAll(before, *c.Source, *c.Target)
	}
	after, err := e.call(ReadFile(*c.Path))
	if err != nil {
		return false, "", err
	}
	if string(after) == before {
		return true, *c.Path + " is as expected", nil
	}
	return false, fmt.Sprintf("%s differs from the expected text (%d bytes, want %d)", *c.Path, len(after), len(before)), nil
}

// touched returns the text of the first touch item that writes path.
func (e *evaluator) touched(path string) (string, bool) {
	for _, it := range e.t.Initialize {
		if t, ok := it.Args.(*Touch); ok && t.Path == path {
			return t.Text, true
		}
	}
	return "", false
}

func (e *evaluator) include(c *IncludeCheck) (bool, string, error) {
	re, err := regexp.Compile(c.Pattern)
	if err != nil {
		return false, "", fmt.Errorf("pattern %q: %w", c.Pattern, err)
	}
	after, err := e.call(ReadFile(c.Path))
	if err != nil {
		return false, "", err
	}
	if re.Match(after) {
		return true, fmt.Sprintf("%s matches %q", c.Path, c.Pattern), nil
	}
	return false, fmt.Sprintf("%s does not match %q", c.Path, c.Pattern), nil
}

// TeXCheck is the guest server's POST /tex/check: compile FILE.tex in
// PATH with pdflatex (and bibtex plus two more runs when bibtex is set).
func TeXCheck(path, file string, bibtex bool) *Request {
	r := postJSON(GuestServer, "/tex/check", map[string]any{"path": path, "file": file, "bibtex": bibtex})
	r.Timeout = checkTimeout
	return r
}

// compile asks the guest to compile the document; bibtex is on when the
// task writes a .bib file.
func (e *evaluator) compile(c *CompileCheck) (bool, string, error) {
	bib := false
	for _, it := range e.t.Initialize {
		if t, ok := it.Args.(*Touch); ok && strings.HasSuffix(t.Path, ".bib") {
			bib = true
		}
	}
	return e.pass(TeXCheck(c.Path, c.File, bib), c.Path+"/"+c.File+".tex compiles")
}

// LeanCheck is the guest server's POST /lean/check: the header must be a
// line of the Lean file, and the project must build without errors and
// without "sorry".
func LeanCheck(header string) *Request {
	r := postJSON(GuestServer, "/lean/check", map[string]string{"header": header})
	r.Timeout = checkTimeout
	return r
}

func (e *evaluator) lean() (bool, string, error) {
	for _, it := range e.t.Initialize {
		if q, ok := it.Args.(*LeanQuery); ok {
			return e.pass(LeanCheck(q.Header()), "the theorem builds without sorry")
		}
	}
	return false, "", fmt.Errorf("the task has no query item")
}

// pass sends a check whose reply is {"pass": bool}.
func (e *evaluator) pass(r *Request, what string) (bool, string, error) {
	v, err := e.callJSON(r)
	if err != nil {
		return false, "", err
	}
	m, _ := v.(map[string]any)
	p, ok := m["pass"].(bool)
	if !ok {
		return false, "", fmt.Errorf("%s: expected {\"pass\": bool}, got %s", r, clip(pyRepr(v)))
	}
	if p {
		return true, what, nil
	}
	return false, "not: " + what, nil
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:117] + "..."
	}
	return s
}
