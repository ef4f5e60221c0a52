package scienceboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/codapipe/codapipe/pkg/traj"
)

// StateSource serves the app-state endpoints that ScienceBoard's
// evaluators read (the port-8000 servers in the VMs): a request with a nil
// body is a GET, one with a body a POST. A non-2xx answer is an error. The
// guest client implements it for real VMs, tasks.AppStateSource for the
// simulator.
type StateSource interface {
	AppState(ctx context.Context, path string, body []byte) ([]byte, error)
}

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

// App-state endpoints read by the checks. See docs/simulator.md for the
// response shapes.
const (
	PathChimeraXState = "/chimerax/state" // GET: flat key -> value map
	PathChimeraXRun   = "/chimerax/run"   // POST: body = command; ChimeraX REST JSON reply
	PathCelestiaDump  = "/dump"           // GET (Celestia)
	PathKAlgebraVars  = "/vars"           // GET: name -> value text
	PathKAlgebraEqns  = "/eqns"           // GET: {"size"}; POST {"points"}: per-plot membership
	PathGRASSDump     = "/dump"           // GET (GRASS GIS)
	PathGRASSCmd      = "/gcmd"           // POST {"cmd","kwargs"}: {"stdout","stderr","returncode"}
)

// kalTolerance is ScienceBoard's tolerance for KAlgebra "val" checks.
const kalTolerance = 1e-6

// Evaluate runs the task's evaluate checks against the final state read
// from src and the agent's final action, the way ScienceBoard's evaluators
// do (with the differences documented in docs/simulator.md):
//
//   - stop: the final action must be Value; for ANS the answer must equal
//     the args joined by spaces (trimmed, case- and space-insensitive,
//     numerically within 1e-9 relative when both parse as numbers).
//   - states (ChimeraX): Key is a flat key or a dotted path into
//     GET /chimerax/state; Value is compared literally (JSON equality;
//     a string expectation also matches the JSON text of a non-string
//     value), Pattern is a Go regular expression searched in the value's
//     text. Lambda keys and "find" are unsupported.
//   - info: ChimeraX with a plain key runs "info <key>" through
//     POST /chimerax/run and compares the set of output lines; Celestia
//     and GRASS GIS read GET /dump with a key that is a plain top-level
//     key or `lambda d: d['a'][0]...`, compared with `pred` when given
//     (see ParsePredLambda) or by equality.
//   - val, var, eqn (KAlgebra): GET /vars, POST /eqns (GET for "#SIZE").
//   - db (GRASS GIS, kept raw by the loader): POST /gcmd with cmd and
//     kwargs, key/pred applied to the reply's "stdout".
//
// Anything else is listed in EvalResult.Unsupported, and then Passed is
// false. A failing state source sets EvalResult.Error.
func Evaluate(ctx context.Context, t *Task, src StateSource, final FinalAction) traj.EvalResult {
	res := traj.EvalResult{Checks: []traj.CheckResult{}}
	e := &evaluator{ctx: ctx, t: t, src: src, final: final, cache: map[string]any{}}
	if len(t.Evaluate) == 0 {
		res.Unsupported = append(res.Unsupported, "task has no evaluate checks")
		return res
	}
	// Fetch the dumps first: POST checks (ChimeraX info, GRASS db) may
	// change the app's state, as in ScienceBoard, which dumps once up front.
	for i, c := range t.Evaluate {
		if p := e.dumpPath(c); p != "" {
			if _, err := e.get(p); err != nil {
				res.Error = fmt.Sprintf("evaluate[%d]: %v", i, err)
				return res
			}
		}
	}
	for i, c := range t.Evaluate {
		cr, unsupported, err := e.check(c)
		if err != nil {
			res.Error = fmt.Sprintf("evaluate[%d] (%s): %v", i, c.Type, err)
			res.Passed = false
			return res
		}
		if unsupported != "" {
			res.Unsupported = append(res.Unsupported, fmt.Sprintf("evaluate[%d]: type %q: %s", i, c.Type, unsupported))
			continue
		}
		res.Checks = append(res.Checks, cr)
	}
	res.Passed = len(res.Unsupported) == 0
	for _, c := range res.Checks {
		if !c.Passed {
			res.Passed = false
		}
	}
	return res
}

type evaluator struct {
	ctx   context.Context
	t     *Task
	src   StateSource
	final FinalAction
	cache map[string]any // GET path -> decoded JSON
}

// sourceError marks a failure of the state source (an environment
// problem, not a failed check).
type sourceError struct{ err error }

// Error implements error.
func (e *sourceError) Error() string { return e.err.Error() }

// Unwrap returns the underlying error.
func (e *sourceError) Unwrap() error { return e.err }

func (e *evaluator) request(path string, body []byte) ([]byte, error) {
	if e.src == nil {
		return nil, &sourceError{errors.New("no state source")}
	}
	b, err := e.src.AppState(e.ctx, path, body)
	if err != nil {
		method := "GET"
		if body != nil {
			method = "POST"
		}
		return nil, &sourceError{fmt.Errorf("%s %s: %w", method, path, err)}
	}
	return b, nil
}

func (e *evaluator) get(path string) (any, error) {
	if v, ok := e.cache[path]; ok {
		return v, nil
	}
	b, err := e.request(path, nil)
	if err != nil {
		return nil, err
	}
	v, err := decodeJSON(b)
	if err != nil {
		return nil, &sourceError{fmt.Errorf("GET %s: invalid JSON: %w", path, err)}
	}
	e.cache[path] = v
	return v, nil
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return normalizeJSON(v), nil
}

// normalizeJSON turns json.Number into float64 (ints stay exact up to 2^53).
func normalizeJSON(v any) any {
	switch v := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return string(v)
		}
		return f
	case map[string]any:
		for k, x := range v {
			v[k] = normalizeJSON(x)
		}
	case []any:
		for i, x := range v {
			v[i] = normalizeJSON(x)
		}
	}
	return v
}

// dumpPath returns the GET dump a check reads, or "".
func (e *evaluator) dumpPath(c Check) string {
	switch {
	case c.Type == "states" && e.t.App == "ChimeraX":
		return PathChimeraXState
	case c.Type == "info" && e.t.App == "Celestia":
		return PathCelestiaDump
	case c.Type == "info" && isGRASS(e.t.App):
		return PathGRASSDump
	case (c.Type == "val" || c.Type == "var") && e.t.App == "KAlgebra":
		return PathKAlgebraVars
	}
	return ""
}

func isGRASS(app string) bool {
	a := strings.ToLower(strings.ReplaceAll(app, " ", ""))
	return a == "grassgis" || a == "grass"
}

// check runs one check. It returns the result, or a reason why it is
// unsupported, or a state-source error.
func (e *evaluator) check(c Check) (traj.CheckResult, string, error) {
	cr := traj.CheckResult{Type: c.Type}
	var (
		ok     bool
		detail string
		err    error
	)
	switch args := c.Args.(type) {
	case *StopCheck:
		ok, detail = e.stop(args)
	case *StatesCheck:
		if e.t.App != "ChimeraX" {
			return cr, "states checks are defined for ChimeraX only", nil
		}
		if args.Find != nil || IsLambda(args.Key) {
			return cr, "lambda keys and \"find\" are not supported: " + quoteLambda(args.Key, args.Find), nil
		}
		ok, detail, err = e.states(args)
	case *InfoCheck:
		switch {
		case e.t.App == "ChimeraX" && !IsLambda(args.Key):
			ok, detail, err = e.chimeraxInfo(args)
		case e.t.App == "Celestia" || isGRASS(e.t.App):
			path := PathCelestiaDump
			if isGRASS(e.t.App) {
				path = PathGRASSDump
			}
			var dump any
			if dump, err = e.get(path); err == nil {
				var why string
				ok, detail, why = applyKeyPred(dump, args.Key, args.Pred, args.Value)
				if why != "" {
					return cr, why, nil
				}
			}
		default:
			return cr, fmt.Sprintf("info checks with key %q are not defined for %s", args.Key, e.t.App), nil
		}
	case *ValCheck:
		if e.t.App != "KAlgebra" {
			return cr, "val checks are defined for KAlgebra only", nil
		}
		ok, detail, err = e.val(args)
	case *VarCheck:
		if e.t.App != "KAlgebra" {
			return cr, "var checks are defined for KAlgebra only", nil
		}
		ok, detail, err = e.variable(args)
	case *EqnCheck:
		if e.t.App != "KAlgebra" {
			return cr, "eqn checks are defined for KAlgebra only", nil
		}
		var why string
		ok, detail, why, err = e.eqn(args)
		if why != "" {
			return cr, why, nil
		}
	case *DBCheck:
		if !isGRASS(e.t.App) {
			return cr, "db checks are defined for GRASS GIS only", nil
		}
		var why string
		ok, detail, why, err = e.db(c.Raw)
		if why != "" {
			return cr, why, nil
		}
	case nil:
		reason := "not supported"
		if c.Issue != "" {
			reason = c.Issue
		}
		return cr, reason, nil
	default:
		return cr, "not supported by this evaluator", nil
	}
	if err != nil {
		var se *sourceError
		if errors.As(err, &se) {
			return cr, "", err
		}
		ok, detail = false, err.Error()
	}
	cr.Passed, cr.Detail = ok, detail
	return cr, "", nil
}

func quoteLambda(key string, find *string) string {
	s := strconv.Quote(key)
	if find != nil {
		s += " find " + strconv.Quote(*find)
	}
	return s
}

// stop compares the final action with a stop check.
func (e *evaluator) stop(s *StopCheck) (bool, string) {
	got := strings.ToUpper(strings.TrimSpace(e.final.Kind))
	if got != s.Value {
		if got == "" {
			got = "no final action"
		}
		return false, fmt.Sprintf("final action %s, want %s", got, s.Value)
	}
	if s.Value != StopAns || len(s.Args) == 0 {
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
// A leading "ANS" in the answer is ignored.
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

// lookupKey finds key in a state dump: an exact top-level key first, then
// a dotted path through nested objects (and arrays by index).
func lookupKey(dump any, key string) (any, bool) {
	m, isMap := dump.(map[string]any)
	if isMap {
		if v, ok := m[key]; ok {
			return v, true
		}
	}
	cur := dump
	for _, part := range strings.Split(key, ".") {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[part]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// jsonText is the text a value is matched against: strings as they are,
// other values as compact JSON.
func jsonText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// valuesEqual compares a dump value with an expected JSON value: deep
// equality with numbers compared as float64; a string expectation also
// matches the JSON text of a non-string value.
func valuesEqual(got, want any) bool {
	if ws, ok := want.(string); ok {
		if _, gs := got.(string); !gs {
			return jsonText(got) == ws
		}
	}
	return deepEqualJSON(got, want)
}

func deepEqualJSON(a, b any) bool {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for k, x := range av {
			y, ok := bv[k]
			if !ok || !deepEqualJSON(x, y) {
				return false
			}
		}
		return true
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !deepEqualJSON(av[i], bv[i]) {
				return false
			}
		}
		return true
	case float64:
		bv, ok := b.(float64)
		return ok && av == bv
	}
	return a == b
}

func (e *evaluator) states(s *StatesCheck) (bool, string, error) {
	dump, err := e.get(PathChimeraXState)
	if err != nil {
		return false, "", err
	}
	got, found := lookupKey(dump, s.Key)
	if !found {
		return false, fmt.Sprintf("key %q not in the state dump", s.Key), nil
	}
	if s.Pattern != nil {
		re, err := regexp.Compile(*s.Pattern)
		if err != nil {
			return false, fmt.Sprintf("invalid pattern %q: %v", *s.Pattern, err), nil
		}
		text := jsonText(got)
		if !re.MatchString(text) {
			return false, fmt.Sprintf("%s = %s does not match /%s/", s.Key, clip(text), *s.Pattern), nil
		}
		if s.Value == nil {
			return true, fmt.Sprintf("%s = %s matches /%s/", s.Key, clip(text), *s.Pattern), nil
		}
	}
	want, err := decodeJSON(s.Value)
	if err != nil {
		return false, fmt.Sprintf("invalid expected value: %v", err), nil
	}
	if !valuesEqual(got, want) {
		return false, fmt.Sprintf("%s = %s, want %s", s.Key, clip(jsonText(got)), clip(jsonText(want))), nil
	}
	return true, fmt.Sprintf("%s = %s", s.Key, clip(jsonText(got))), nil
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:117] + "..."
	}
	return s
}

// chimeraxInfo runs "info <key>" and compares the set of output lines.
func (e *evaluator) chimeraxInfo(c *InfoCheck) (bool, string, error) {
	var want []string
	if err := json.Unmarshal(c.Value, &want); err != nil {
		return false, "expected value must be a list of lines: " + err.Error(), nil
	}
	b, err := e.request(PathChimeraXRun, []byte("info "+c.Key))
	if err != nil {
		return false, "", err
	}
	var reply struct {
		Log   map[string][]string `json:"log messages"`
		Error any                 `json:"error"`
	}
	if err := json.Unmarshal(b, &reply); err != nil {
		return false, "", &sourceError{fmt.Errorf("POST %s: invalid reply: %w", PathChimeraXRun, err)}
	}
	if reply.Error != nil {
		return false, fmt.Sprintf("info %s failed: %v", c.Key, reply.Error), nil
	}
	got := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(strings.Join(reply.Log["info"], "\n")), "\n") {
		got[l] = true
	}
	wantSet := map[string]bool{}
	for _, l := range want {
		wantSet[l] = true
	}
	if len(got) != len(wantSet) {
		return false, fmt.Sprintf("info %s: %d distinct lines, want %d", c.Key, len(got), len(wantSet)), nil
	}
	for l := range wantSet {
		if !got[l] {
			return false, fmt.Sprintf("info %s: missing line %q", c.Key, l), nil
		}
	}
	return true, fmt.Sprintf("info %s: %d lines match", c.Key, len(wantSet)), nil
}

// applyKeyPred evaluates key (plain or lambda) on a dump and compares the
// result with the expected value using pred (lambda source, or equality
// when nil). unsupported is set for lambdas outside the recognised shapes.
func applyKeyPred(dump any, key string, pred *string, value json.RawMessage) (ok bool, detail, unsupported string) {
	var got any
	var desc string
	if IsLambda(key) {
		kl, err := ParseKeyLambda(key)
		if err != nil {
			return false, "", fmt.Sprintf("key lambda not recognised (%v): %q", err, key)
		}
		v, err := kl.Apply(dump)
		if err != nil {
			return false, fmt.Sprintf("%s: %v", kl, err), ""
		}
		got, desc = v, kl.String()
	} else {
		m, isMap := dump.(map[string]any)
		v, found := m[key]
		if !isMap || !found {
			return false, fmt.Sprintf("key %q not in the dump", key), ""
		}
		got, desc = v, key
	}
	want, err := decodeJSON(value)
	if err != nil {
		return false, fmt.Sprintf("invalid expected value: %v", err), ""
	}
	if pred == nil {
		if valuesEqual(got, want) {
			return true, fmt.Sprintf("%s = %s", desc, clip(jsonText(got))), ""
		}
		return false, fmt.Sprintf("%s = %s, want %s", desc, clip(jsonText(got)), clip(jsonText(want))), ""
	}
	p, err := ParsePredLambda(*pred)
	if err != nil {
		return false, "", fmt.Sprintf("pred lambda not recognised (%v): %q", err, *pred)
	}
	res, err := p.Apply(got, want)
	if err != nil {
		return false, fmt.Sprintf("%s = %s: %v", desc, clip(jsonText(got)), err), ""
	}
	verdict := "holds"
	if !res {
		verdict = "fails"
	}
	return res, fmt.Sprintf("%s = %s; %s with value %s %s", desc, clip(jsonText(got)), p, clip(jsonText(want)), verdict), ""
}

func (e *evaluator) kalVar(key string) (any, bool, error) {
	vars, err := e.get(PathKAlgebraVars)
	if err != nil {
		return nil, false, err
	}
	m, _ := vars.(map[string]any)
	v, ok := m[key]
	return v, ok, nil
}

func (e *evaluator) val(c *ValCheck) (bool, string, error) {
	v, ok, err := e.kalVar(c.Key)
	if err != nil {
		return false, "", err
	}
	if !ok {
		return false, fmt.Sprintf("variable %s is not defined", c.Key), nil
	}
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case string:
		f, err = strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return false, fmt.Sprintf("%s = %q is not a number", c.Key, x), nil
		}
	default:
		return false, fmt.Sprintf("%s = %s is not a number", c.Key, jsonText(v)), nil
	}
	if math.Abs(f-c.Value) <= kalTolerance {
		return true, fmt.Sprintf("%s = %s", c.Key, jsonText(v)), nil
	}
	return false, fmt.Sprintf("%s = %s, want %v (±%g)", c.Key, jsonText(v), c.Value, kalTolerance), nil
}

// UndefinedVar is the "var" check value meaning "not defined".
const UndefinedVar = "#UNDEF"

func (e *evaluator) variable(c *VarCheck) (bool, string, error) {
	v, ok, err := e.kalVar(c.Key)
	if err != nil {
		return false, "", err
	}
	if c.Value == UndefinedVar {
		if ok {
			return false, fmt.Sprintf("%s = %s, want it undefined", c.Key, jsonText(v)), nil
		}
		return true, c.Key + " is undefined", nil
	}
	if !ok {
		return false, fmt.Sprintf("variable %s is not defined", c.Key), nil
	}
	strip := func(s string) string {
		return strings.Map(func(r rune) rune {
			if unicode.IsSpace(r) {
				return -1
			}
			return r
		}, s)
	}
	if strip(jsonText(v)) == strip(c.Value) {
		return true, fmt.Sprintf("%s = %s", c.Key, jsonText(v)), nil
	}
	return false, fmt.Sprintf("%s = %s, want %s", c.Key, jsonText(v), c.Value), nil
}

// eqn checks plots: "#SIZE" against the number of plots, or point lists
// against per-point expectations (some plot must match every point).
func (e *evaluator) eqn(c *EqnCheck) (ok bool, detail, unsupported string, err error) {
	if special, isStr := c.Special(); isStr {
		if special != "#SIZE" {
			return false, "", fmt.Sprintf("special key %q not supported", special), nil
		}
		var want float64
		if err := json.Unmarshal(c.Value, &want); err != nil {
			return false, "", "#SIZE needs a number value", nil
		}
		b, err := e.request(PathKAlgebraEqns, nil)
		if err != nil {
			return false, "", "", err
		}
		var reply struct {
			Size *float64 `json:"size"`
		}
		if err := json.Unmarshal(b, &reply); err != nil || reply.Size == nil {
			return false, "", "", &sourceError{fmt.Errorf("GET %s: reply without size", PathKAlgebraEqns)}
		}
		if *reply.Size == want {
			return true, fmt.Sprintf("%v plots", want), "", nil
		}
		return false, fmt.Sprintf("%v plots, want %v", *reply.Size, want), "", nil
	}
	pts, isPts := c.Points()
	if !isPts || len(pts) == 0 {
		return false, "", "key must be a list of points or \"#SIZE\"", nil
	}
	var expect map[string]bool
	if err := json.Unmarshal(c.Value, &expect); err != nil {
		return false, "", "value must map point text to true/false", nil
	}
	want := make([]bool, len(pts))
	for i, p := range pts {
		found := false
		for k, v := range expect {
			if kp, ok := parsePointKey(k); ok && floatsEqual(kp, p) {
				want[i], found = v, true
				break
			}
		}
		if !found {
			return false, "", fmt.Sprintf("no expectation for point %v", p), nil
		}
	}
	body, _ := json.Marshal(map[string]any{"points": pts})
	b, err := e.request(PathKAlgebraEqns, body)
	if err != nil {
		return false, "", "", err
	}
	var reply struct {
		Plots []struct {
			Expr   string `json:"expr"`
			Points []bool `json:"points"`
		} `json:"plots"`
	}
	if err := json.Unmarshal(b, &reply); err != nil {
		return false, "", "", &sourceError{fmt.Errorf("POST %s: invalid reply: %w", PathKAlgebraEqns, err)}
	}
	best, bestExpr := -1, ""
	for _, pl := range reply.Plots {
		if len(pl.Points) != len(want) {
			continue
		}
		match := 0
		for i := range want {
			if pl.Points[i] == want[i] {
				match++
			}
		}
		if match == len(want) {
			return true, fmt.Sprintf("plot %s matches all %d points", pl.Expr, len(want)), "", nil
		}
		if match > best {
			best, bestExpr = match, pl.Expr
		}
	}
	if best < 0 {
		return false, fmt.Sprintf("no %dD plot", len(pts[0])), "", nil
	}
	return false, fmt.Sprintf("best plot %s matches %d of %d points", bestExpr, best, len(want)), "", nil
}

// parsePointKey parses "(1, -2.5)" into numbers.
func parsePointKey(s string) ([]float64, bool) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "(") || !strings.HasSuffix(s, ")") {
		return nil, false
	}
	var out []float64
	for _, part := range strings.Split(s[1:len(s)-1], ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil {
			return nil, false
		}
		out = append(out, f)
	}
	return out, true
}

func floatsEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// db runs a GRASS module through /gcmd and checks its stdout.
func (e *evaluator) db(raw json.RawMessage) (ok bool, detail, unsupported string, err error) {
	var c struct {
		Cmd    string          `json:"cmd"`
		Kwargs map[string]any  `json:"kwargs"`
		Key    *string         `json:"key"`
		Value  json.RawMessage `json:"value"`
		Pred   *string         `json:"pred"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || c.Cmd == "" || c.Key == nil || c.Value == nil {
		return false, "", "db checks need cmd, kwargs, key and value", nil
	}
	body, _ := json.Marshal(map[string]any{"cmd": c.Cmd, "kwargs": c.Kwargs})
	b, err := e.request(PathGRASSCmd, body)
	if err != nil {
		return false, "", "", err
	}
	reply, err := decodeJSON(b)
	if err != nil {
		return false, "", "", &sourceError{fmt.Errorf("POST %s: invalid reply: %w", PathGRASSCmd, err)}
	}
	m, _ := reply.(map[string]any)
	stdout, found := m["stdout"]
	if !found {
		return false, "", "", &sourceError{fmt.Errorf("POST %s: reply without stdout", PathGRASSCmd)}
	}
	ok, detail, unsupported = applyKeyPred(stdout, *c.Key, c.Pred, c.Value)
	if unsupported == "" {
		detail = c.Cmd + ": " + detail
	}
	return ok, detail, unsupported, nil
}

// KeyLambda is a recognised key lambda: `lambda d: d['a'][0]['b']`, an
// index chain on the lambda's parameter with string or integer keys.
type KeyLambda struct {
	Param string // the lambda's parameter name
	Path  []any  // the indexes: string or int elements
}

// String returns the lambda in canonical form.
func (k KeyLambda) String() string {
	var b strings.Builder
	b.WriteString("lambda " + k.Param + ": " + k.Param)
	for _, p := range k.Path {
		switch p := p.(type) {
		case string:
			b.WriteString("[" + pyQuote(p) + "]")
		case int:
			b.WriteString("[" + strconv.Itoa(p) + "]")
		}
	}
	return b.String()
}

func pyQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`).Replace(s) + "'"
}

// Apply follows the index chain through a decoded JSON value. Negative
// integers index from the end, as in Python.
func (k KeyLambda) Apply(v any) (any, error) {
	cur := v
	for i, p := range k.Path {
		switch key := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("step %d: [%s] on a %s", i, pyQuote(key), jsonKind(cur))
			}
			next, ok := m[key]
			if !ok {
				return nil, fmt.Errorf("step %d: key %s not found", i, pyQuote(key))
			}
			cur = next
		case int:
			a, ok := cur.([]any)
			if !ok {
				return nil, fmt.Errorf("step %d: [%d] on a %s", i, key, jsonKind(cur))
			}
			idx := key
			if idx < 0 {
				idx += len(a)
			}
			if idx < 0 || idx >= len(a) {
				return nil, fmt.Errorf("step %d: index %d out of range (length %d)", i, key, len(a))
			}
			cur = a[idx]
		}
	}
	return cur, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "list"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// lambdaScanner reads Python lambda source token by token.
type lambdaScanner struct {
	s   string
	pos int
}

func (l *lambdaScanner) ws() {
	for l.pos < len(l.s) && (l.s[l.pos] == ' ' || l.s[l.pos] == '\t' || l.s[l.pos] == '\n' || l.s[l.pos] == '\r') {
		l.pos++
	}
}

func (l *lambdaScanner) lit(t string) bool {
	l.ws()
	if strings.HasPrefix(l.s[l.pos:], t) {
		l.pos += len(t)
		return true
	}
	return false
}

func (l *lambdaScanner) ident() (string, bool) {
	l.ws()
	start := l.pos
	for l.pos < len(l.s) {
		c := l.s[l.pos]
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || l.pos > start && '0' <= c && c <= '9' {
			l.pos++
			continue
		}
		break
	}
	if l.pos == start {
		return "", false
	}
	return l.s[start:l.pos], true
}

func (l *lambdaScanner) done() bool {
	l.ws()
	return l.pos == len(l.s)
}

// str reads a single- or double-quoted Python string with simple escapes.
func (l *lambdaScanner) str() (string, error) {
	l.ws()
	if l.pos >= len(l.s) || (l.s[l.pos] != '\'' && l.s[l.pos] != '"') {
		return "", errors.New("expected a string key")
	}
	q := l.s[l.pos]
	l.pos++
	var b strings.Builder
	for l.pos < len(l.s) {
		c := l.s[l.pos]
		switch {
		case c == q:
			l.pos++
			return b.String(), nil
		case c == '\\' && l.pos+1 < len(l.s):
			e := l.s[l.pos+1]
			switch e {
			case '\\', '\'', '"':
				b.WriteByte(e)
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				return "", fmt.Errorf("unsupported escape \\%c", e)
			}
			l.pos += 2
		case c == '\n':
			return "", errors.New("newline in string")
		default:
			b.WriteByte(c)
			l.pos++
		}
	}
	return "", errors.New("unterminated string")
}

// number reads a Python int or float literal with an optional sign.
func (l *lambdaScanner) number() (float64, string, error) {
	l.ws()
	start := l.pos
	if l.pos < len(l.s) && (l.s[l.pos] == '-' || l.s[l.pos] == '+') {
		l.pos++
	}
	for l.pos < len(l.s) {
		c := l.s[l.pos]
		exponentSign := (c == '-' || c == '+') && l.pos > start && (l.s[l.pos-1] == 'e' || l.s[l.pos-1] == 'E')
		if strings.IndexByte("0123456789._eE", c) < 0 && !exponentSign {
			break
		}
		l.pos++
	}
	text := l.s[start:l.pos]
	if strings.Contains(text, "__") || strings.HasPrefix(strings.TrimLeft(text, "+-"), "_") || strings.HasSuffix(text, "_") {
		return 0, text, fmt.Errorf("invalid number %q", text)
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(text, "_", ""), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, text, fmt.Errorf("invalid number %q", text)
	}
	return f, text, nil
}

func (l *lambdaScanner) header(nparams int) ([]string, error) {
	if !l.lit("lambda") {
		return nil, errors.New(`expected "lambda"`)
	}
	if l.pos < len(l.s) && l.s[l.pos] != ' ' && l.s[l.pos] != '\t' {
		return nil, errors.New(`expected a space after "lambda"`)
	}
	var params []string
	for i := 0; i < nparams; i++ {
		if i > 0 && !l.lit(",") {
			return nil, fmt.Errorf("expected %d parameters", nparams)
		}
		p, ok := l.ident()
		if !ok || p == "lambda" {
			return nil, errors.New("expected a parameter name")
		}
		params = append(params, p)
	}
	if !l.lit(":") {
		return nil, fmt.Errorf("expected ':' after %d parameter(s)", nparams)
	}
	return params, nil
}

// ParseKeyLambda recognises `lambda d: d['a']["b"][0]...` (any parameter
// name, string or integer indexes, an empty chain allowed). Any other
// lambda is an error.
func ParseKeyLambda(src string) (KeyLambda, error) {
	l := &lambdaScanner{s: src}
	params, err := l.header(1)
	if err != nil {
		return KeyLambda{}, err
	}
	k := KeyLambda{Param: params[0], Path: []any{}}
	body, ok := l.ident()
	if !ok || body != k.Param {
		return KeyLambda{}, fmt.Errorf("body must index the parameter %q", k.Param)
	}
	for !l.done() {
		if !l.lit("[") {
			return KeyLambda{}, fmt.Errorf("unexpected %q at offset %d (only [...] indexing is recognised)", l.s[l.pos:min(len(l.s), l.pos+12)], l.pos)
		}
		l.ws()
		if l.pos < len(l.s) && (l.s[l.pos] == '\'' || l.s[l.pos] == '"') {
			s, err := l.str()
			if err != nil {
				return KeyLambda{}, err
			}
			k.Path = append(k.Path, s)
		} else {
			f, text, err := l.number()
			if err != nil || f != math.Trunc(f) || strings.ContainsAny(text, ".eE") || math.Abs(f) > 1e9 {
				return KeyLambda{}, fmt.Errorf("index %q is neither a string nor an integer", text)
			}
			k.Path = append(k.Path, int(f))
		}
		if !l.lit("]") {
			return KeyLambda{}, errors.New("expected ']'")
		}
	}
	return k, nil
}

// PredLambda is a recognised predicate lambda over (key, value): the
// actual value from the dump and the check's expected value.
type PredLambda struct {
	// Kind is "absdiff" (abs(key - value) < Tol, or <=) or "cmp"
	// (key Op value).
	Kind string
	// Op is the comparison: "<", "<=" for absdiff; "==", "!=", "<", "<=",
	// ">", ">=" for cmp (already turned around when written value Op key).
	Op string
	// Tol is the absdiff bound.
	Tol float64
	// Params are the lambda's parameter names (key, value order).
	Params [2]string
}

// String returns the predicate in canonical form.
func (p PredLambda) String() string {
	k, v := p.Params[0], p.Params[1]
	if p.Kind == "absdiff" {
		return fmt.Sprintf("lambda %s, %s: abs(%s - %s) %s %s", k, v, k, v, p.Op, strconv.FormatFloat(p.Tol, 'g', -1, 64))
	}
	return fmt.Sprintf("lambda %s, %s: %s %s %s", k, v, k, p.Op, v)
}

var flipOp = map[string]string{"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}

// ParsePredLambda recognises two predicate shapes (any parameter names):
//
//	lambda key, value: abs(key - value) < NUM     (or <=; value - key too)
//	lambda key, value: key OP value               (OP: == != < <= > >=; either order)
//
// Any other lambda is an error.
func ParsePredLambda(src string) (PredLambda, error) {
	l := &lambdaScanner{s: src}
	params, err := l.header(2)
	if err != nil {
		return PredLambda{}, err
	}
	if params[0] == params[1] {
		return PredLambda{}, errors.New("duplicate parameter name")
	}
	p := PredLambda{Params: [2]string{params[0], params[1]}}
	save := l.pos
	if id, ok := l.ident(); ok && id == "abs" && l.lit("(") {
		a, ok1 := l.ident()
		minus := l.lit("-")
		b, ok2 := l.ident()
		if !ok1 || !minus || !ok2 || !l.lit(")") || a == b || !isParam(a, params) || !isParam(b, params) {
			return PredLambda{}, errors.New("abs(...) must be abs(key - value) or abs(value - key)")
		}
		var op string
		switch {
		case l.lit("<="):
			op = "<="
		case l.lit("<"):
			op = "<"
		default:
			return PredLambda{}, errors.New("abs(key - value) must be compared with < or <=")
		}
		tol, _, err := l.number()
		if err != nil {
			return PredLambda{}, err
		}
		if !l.done() {
			return PredLambda{}, fmt.Errorf("unexpected text after the bound at offset %d", l.pos)
		}
		p.Kind, p.Op, p.Tol = "absdiff", op, tol
		return p, nil
	}
	l.pos = save
	a, ok := l.ident()
	if !ok || !isParam(a, params) {
		return PredLambda{}, errors.New("body must be abs(key - value) < NUM or key OP value")
	}
	var op string
	for _, o := range []string{"==", "!=", "<=", ">=", "<", ">"} {
		if l.lit(o) {
			op = o
			break
		}
	}
	if op == "" {
		return PredLambda{}, errors.New("expected a comparison operator")
	}
	b, ok := l.ident()
	if !ok || !isParam(b, params) || a == b || !l.done() {
		return PredLambda{}, errors.New("body must compare the two parameters")
	}
	if a != params[0] {
		op = flipOp[op]
	}
	p.Kind, p.Op = "cmp", op
	return p, nil
}

func isParam(s string, params []string) bool {
	for _, p := range params {
		if p == s {
			return true
		}
	}
	return false
}

// Apply evaluates the predicate with the actual (key) and expected (value)
// values. Order comparisons need numbers (booleans count as 0/1, as in
// Python); == and != compare JSON values.
func (p PredLambda) Apply(key, value any) (bool, error) {
	if p.Kind == "cmp" && (p.Op == "==" || p.Op == "!=") {
		eq := deepEqualJSON(boolToNum(key), boolToNum(value))
		return eq == (p.Op == "=="), nil
	}
	k, ok1 := boolToNum(key).(float64)
	v, ok2 := boolToNum(value).(float64)
	if !ok1 || !ok2 {
		return false, fmt.Errorf("%s needs numbers, got %s and %s", p.Op, jsonKind(key), jsonKind(value))
	}
	if p.Kind == "absdiff" {
		d := math.Abs(k - v)
		if p.Op == "<" {
			return d < p.Tol, nil
		}
		return d <= p.Tol, nil
	}
	switch p.Op {
	case "<":
		return k < v, nil
	case "<=":
		return k <= v, nil
	case ">":
		return k > v, nil
	}
	return k >= v, nil
}

func boolToNum(v any) any {
	if b, ok := v.(bool); ok {
		if b {
			return 1.0
		}
		return 0.0
	}
	return v
}

// CheckEndpoints lists, per app, which endpoint each check type reads.
// docs/simulator.md renders the same table.
func CheckEndpoints() map[string]map[string]string {
	return map[string]map[string]string{
		"ChimeraX":  {"states": "GET " + PathChimeraXState, "info": "POST " + PathChimeraXRun + ` ("info <key>")`},
		"Celestia":  {"info": "GET " + PathCelestiaDump},
		"KAlgebra":  {"val": "GET " + PathKAlgebraVars, "var": "GET " + PathKAlgebraVars, "eqn": "POST " + PathKAlgebraEqns + " (GET for #SIZE)"},
		"GRASS GIS": {"info": "GET " + PathGRASSDump, "db": "POST " + PathGRASSCmd},
	}
}
