package traj

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// FieldError is one problem found by Validate, at a JSON field path such as
// "steps[3].candidates[2].action.point".
type FieldError struct {
	Path string
	Msg  string
}

func (e FieldError) Error() string { return e.Path + ": " + e.Msg }

// ValidationError lists every problem Validate found.
type ValidationError struct {
	What   string // "trajectory <id>" or "judgement <id>"
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "traj: invalid %s: %d problem(s)", e.What, len(e.Fields))
	for _, f := range e.Fields {
		b.WriteString("\n  ")
		b.WriteString(f.Error())
	}
	return b.String()
}

// Has reports whether the error holds a problem at exactly this path.
func (e *ValidationError) Has(path string) bool {
	for _, f := range e.Fields {
		if f.Path == path {
			return true
		}
	}
	return false
}

// checker collects FieldErrors.
type checker struct{ errs []FieldError }

func (c *checker) add(path, format string, args ...any) {
	c.errs = append(c.errs, FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (c *checker) nonEmpty(path, v string) {
	if strings.TrimSpace(v) == "" {
		c.add(path, "required, empty")
	}
}

// name checks a name field with CheckName; an empty one is "required,
// empty" as before.
func (c *checker) name(path string, k NameKind, v string) {
	if err := CheckName(k, v); errors.Is(err, ErrNameEmpty) {
		c.add(path, "required, empty")
	} else if err != nil {
		c.add(path, "%v", err)
	}
}

func (c *checker) nonNeg(path string, v int64) {
	if v < 0 {
		c.add(path, "negative (%d)", v)
	}
}

func (c *checker) result(what string) error {
	if len(c.errs) == 0 {
		return nil
	}
	return &ValidationError{What: what, Fields: c.errs}
}

// Validate checks a trajectory against the contract and returns a
// *ValidationError listing every problem with its field path, or nil.
func (t *Trajectory) Validate() error {
	c := &checker{}
	if t.SchemaVersion < 1 || t.SchemaVersion > SchemaVersion {
		c.add("schema_version", "want 1..%d, got %d", SchemaVersion, t.SchemaVersion)
	}
	if err := checkID(t.ID); err != nil {
		c.add("id", "%v", err)
	}
	c.name("run", RunName, t.Run)
	c.name("task.id", TaskName, t.Task.ID)
	c.name("task.app", AppName, t.Task.App)
	if t.Task.ID != "" && t.Task.App != "" && !strings.HasPrefix(t.Task.ID, t.Task.App+"/") {
		c.add("task.id", "want %s prefix for app %s, got %s", QuoteName(t.Task.App+"/"), QuoteName(t.Task.App), QuoteName(t.Task.ID))
	}
	c.nonEmpty("task.instruction", t.Task.Instruction)
	if t.Task.StepLimit <= 0 {
		c.add("task.step_limit", "must be positive, got %d", t.Task.StepLimit)
	}
	if t.Samples < 1 {
		c.add("samples", "must be at least 1, got %d", t.Samples)
	} else if t.Sample < 0 || t.Sample >= t.Samples {
		c.add("sample", "want 0..%d, got %d", t.Samples-1, t.Sample)
	}
	if t.Group < 0 {
		c.add("group", "negative (%d)", t.Group)
	}
	c.nonEmpty("models.planner.model", t.Models.Planner.Model)
	c.nonEmpty("models.executor.model", t.Models.Executor.Model)
	checkSince(c, "models.planner.coords", t.Models.Planner.Coords, t.SchemaVersion, 2)
	checkSince(c, "models.executor.coords", t.Models.Executor.Coords, t.SchemaVersion, 2)
	checkSince(c, "models.planner.sampling", t.Models.Planner.Sampling, t.SchemaVersion, 6)
	checkSince(c, "models.executor.sampling", t.Models.Executor.Sampling, t.SchemaVersion, 6)
	switch {
	case t.Prompts == "" && t.SchemaVersion >= 4:
		c.add("prompts", "required from schema_version 4")
	case t.Prompts != "" && !isSHA256(t.Prompts):
		c.add("prompts", "want 64 lower-case hex digits, got %q", t.Prompts)
	}
	c.nonEmpty("vm", t.VM)
	if t.Task.StepLimit > 0 && len(t.Steps) > t.Task.StepLimit {
		c.add("steps", "%d steps exceed the step limit %d", len(t.Steps), t.Task.StepLimit)
	}
	for i := range t.Steps {
		t.Steps[i].validate(c, fmt.Sprintf("steps[%d]", i), i, t.Group, t.SchemaVersion)
	}
	if t.FinalScreenshot != nil {
		t.FinalScreenshot.validate(c, "final_screenshot")
	}
	t.Outcome.validate(c, "outcome")
	if t.Eval != nil {
		for i, ch := range t.Eval.Checks {
			c.nonEmpty(fmt.Sprintf("eval.checks[%d].type", i), ch.Type)
		}
		if t.Eval.Passed && (len(t.Eval.Unsupported) > 0 || t.Eval.Error != "") {
			c.add("eval.passed", "true although checks were unsupported or the evaluator failed")
		}
		for i, ch := range t.Eval.Checks {
			if t.Eval.Passed && !ch.Passed {
				c.add(fmt.Sprintf("eval.checks[%d].passed", i), "false although eval.passed is true")
			}
		}
	}
	if t.StartedAt.IsZero() {
		c.add("started_at", "required, zero time")
	}
	if !t.EndedAt.IsZero() && t.EndedAt.Before(t.StartedAt) {
		c.add("ended_at", "before started_at")
	}
	return c.result("trajectory " + PrintName(t.ID))
}

func (s *Step) validate(c *checker, p string, i, group, version int) {
	if s.Index != i {
		c.add(p+".index", "want %d (its position), got %d", i, s.Index)
	}
	s.Screenshot.validate(c, p+".screenshot")
	// A step that failed before planning may hold fewer candidates; every
	// other step holds exactly G+1.
	if s.Error == "" && len(s.Candidates) != group+1 {
		c.add(p+".candidates", "want %d (group+1) candidates, got %d", group+1, len(s.Candidates))
	}
	if s.Executed < -1 || s.Executed >= len(s.Candidates) {
		c.add(p+".executed", "want -1..%d, got %d", len(s.Candidates)-1, s.Executed)
	} else if s.Executed == -1 && s.Error == "" {
		c.add(p+".executed", "no candidate executed and no error given")
	}
	for j := range s.Candidates {
		s.Candidates[j].validate(c, fmt.Sprintf("%s.candidates[%d]", p, j), j, version)
	}
	if len(s.PlanPromptTokenIDs) > 0 && version < 8 {
		c.add(p+".plan_prompt_token_ids", "not part of schema version %d (from version 8)", version)
	}
	for k, id := range s.PlanPromptTokenIDs {
		if id < 0 {
			c.add(fmt.Sprintf("%s.plan_prompt_token_ids[%d]", p, k), "negative token id %d", id)
			break
		}
	}
	c.nonNeg(p+".timings.observe_ms", s.Timings.ObserveMS)
	c.nonNeg(p+".timings.plan_ms", s.Timings.PlanMS)
	c.nonNeg(p+".timings.ground_ms", s.Timings.GroundMS)
	c.nonNeg(p+".timings.exec_ms", s.Timings.ExecMS)
}

// checkSince checks a field that schema version since added: required
// from that version on, and checked by its Check when it is there.
func checkSince[T interface{ Check() error }](c *checker, p string, v *T, version, since int) {
	if v == nil {
		if version >= since {
			c.add(p, "required from schema_version %d", since)
		}
		return
	}
	if err := (*v).Check(); err != nil {
		c.add(p, "%v", err)
	}
}

// Check reports a coordinate space that is unknown or whose parameters do
// not fit it: PixelsResized needs Factor >= 1 and 1 <= MinPixels <=
// MaxPixels; the other spaces take no parameters.
func (cs Coords) Check() error {
	if !cs.Space.Known() {
		return fmt.Errorf("unknown coordinate space %q (want one of %v)", cs.Space, CoordSpaces)
	}
	if cs.Space == PixelsResized {
		if cs.Factor < 1 || cs.MinPixels < 1 || cs.MaxPixels < cs.MinPixels {
			return fmt.Errorf("%s needs factor >= 1 and 1 <= min_pixels <= max_pixels, got factor %d, min_pixels %d, max_pixels %d",
				cs.Space, cs.Factor, cs.MinPixels, cs.MaxPixels)
		}
		return nil
	}
	if cs.Factor != 0 || cs.MinPixels != 0 || cs.MaxPixels != 0 {
		return fmt.Errorf("%s takes no factor, min_pixels or max_pixels", cs.Space)
	}
	return nil
}

// isSHA256 reports whether s is 64 lower-case hex digits.
func isSHA256(s string) bool {
	return len(s) == 64 && strings.Trim(s, "0123456789abcdef") == ""
}

func (r *ImageRef) validate(c *checker, p string) {
	if !isSHA256(r.SHA256) {
		c.add(p+".sha256", "want 64 lower-case hex digits, got %q", r.SHA256)
	}
	if r.Size <= 0 {
		c.add(p+".size", "must be positive, got %d", r.Size)
	}
	if r.Width <= 0 || r.Height <= 0 {
		c.add(p, "width and height must be positive, got %dx%d", r.Width, r.Height)
	}
}

func (cd *Candidate) validate(c *checker, p string, j, version int) {
	if cd.Index != j {
		c.add(p+".index", "want %d (its position), got %d", j, cd.Index)
	}
	switch {
	case cd.Action == nil && cd.ParseError == "":
		c.add(p+".action", "missing, and no parse_error says why")
	case cd.Action != nil && cd.ParseError != "":
		c.add(p+".parse_error", "set although an action was parsed")
	case cd.Action != nil:
		cd.Action.validate(c, p+".action")
	}
	switch {
	case len(cd.ParseNotes) > 0 && version < 5:
		c.add(p+".parse_notes", "not part of schema version %d (from version 5)", version)
	case len(cd.ParseNotes) > 0 && cd.ExecutorOutput == "":
		c.add(p+".parse_notes", "set although there is no executor_output")
	case len(cd.ParseNotes) > 0 && cd.Action == nil:
		c.add(p+".parse_notes", "set although no action was parsed")
	}
	for k, n := range cd.ParseNotes {
		if strings.TrimSpace(n) == "" {
			c.add(fmt.Sprintf("%s.parse_notes[%d]", p, k), "empty note")
		}
	}
	switch {
	case cd.ParseError == "" && cd.ParseErrorKind != "":
		c.add(p+".parse_error_kind", "set although there is no parse_error")
	case cd.ParseError != "" && cd.ParseErrorKind == "" && version >= 2:
		c.add(p+".parse_error_kind", "required with parse_error (want %q or %q)", ParseSyntax, ParseOutOfRange)
	case cd.ParseErrorKind != "" && cd.ParseErrorKind != ParseSyntax && cd.ParseErrorKind != ParseOutOfRange:
		c.add(p+".parse_error_kind", "want %q or %q, got %q", ParseSyntax, ParseOutOfRange, cd.ParseErrorKind)
	}
	c.nonNeg(p+".plan_tokens.prompt", int64(cd.PlanTokens.Prompt))
	c.nonNeg(p+".plan_tokens.completion", int64(cd.PlanTokens.Completion))
	c.nonNeg(p+".exec_tokens.prompt", int64(cd.ExecTokens.Prompt))
	c.nonNeg(p+".exec_tokens.completion", int64(cd.ExecTokens.Completion))
	c.nonNeg(p+".plan_ms", cd.PlanMS)
	c.nonNeg(p+".exec_ms", cd.ExecMS)
	switch {
	case len(cd.PlanTokenIDs) > 0 && version < 6:
		c.add(p+".plan_token_ids", "not part of schema version %d (from version 6)", version)
	case len(cd.PlanTokenIDs) > 0 && len(cd.PlanTokenIDs) != len(cd.PlanLogProbs):
		c.add(p+".plan_token_ids", "%d token ids for %d log-probabilities, want one per token", len(cd.PlanTokenIDs), len(cd.PlanLogProbs))
	}
	for k, id := range cd.PlanTokenIDs {
		if id < 0 {
			c.add(fmt.Sprintf("%s.plan_token_ids[%d]", p, k), "negative token id %d", id)
			break
		}
	}
	for k, lp := range cd.PlanLogProbs {
		if math.IsNaN(lp) || lp > 0 {
			c.add(fmt.Sprintf("%s.plan_logprobs[%d]", p, k), "want a log-probability <= 0, got %v", lp)
		}
	}
}

// Validate checks one action: a known type and the fields that type needs,
// with every point inside [0,1]. It returns a *ValidationError or nil.
func (a *Action) Validate() error {
	c := &checker{}
	a.validate(c, "action")
	return c.result("action")
}

func (a *Action) validate(c *checker, p string) {
	if !a.Type.Known() {
		c.add(p+".type", "unknown action type %q", a.Type)
		return
	}
	point := func(name string, pt *Point, required bool) {
		switch {
		case pt == nil && required:
			c.add(p+"."+name, "required for %s", a.Type)
		case pt == nil:
		case !(pt.X >= 0 && pt.X <= 1 && pt.Y >= 0 && pt.Y <= 1): // catches NaN
			c.add(p+"."+name, "outside [0,1]: (%v, %v)", pt.X, pt.Y)
		}
	}
	forbid := func(name string, set bool) {
		if set {
			c.add(p+"."+name, "not allowed for %s", a.Type)
		}
	}
	switch a.Type {
	case Click, LeftDouble, RightSingle, Hover:
		point("point", a.Point, true)
	case TypeText:
		point("point", a.Point, false)
	case Scroll:
		point("point", a.Point, false)
		if !slices.Contains([]string{DirUp, DirDown, DirLeft, DirRight}, a.Direction) {
			c.add(p+".direction", "want up, down, left or right, got %q", a.Direction)
		}
	case Drag:
		point("start", a.Start, true)
		point("end", a.End, true)
	case Hotkey, KeyDown, KeyUp:
		if len(a.Keys) == 0 {
			c.add(p+".keys", "required for %s", a.Type)
		}
		for i, k := range a.Keys {
			if k == "" || strings.ContainsAny(k, " \t\n") {
				c.add(fmt.Sprintf("%s.keys[%d]", p, i), "want a key name without spaces, got %q", k)
			}
		}
	}
	if !a.Type.Pointed() {
		forbid("point", a.Point != nil)
	}
	if a.Type != Drag {
		forbid("start", a.Start != nil)
		forbid("end", a.End != nil)
	}
	if !a.Type.Keyed() {
		forbid("keys", len(a.Keys) > 0)
	}
	if a.Type != Scroll {
		forbid("direction", a.Direction != "")
	}
	switch a.Type {
	case TypeText, Finished, Answer:
	default:
		forbid("text", a.Text != "")
	}
}

func (o *Outcome) validate(c *checker, p string) {
	if !slices.Contains(OutcomeKinds, o.Kind) {
		c.add(p+".kind", "want one of %v, got %q", OutcomeKinds, o.Kind)
	}
	if (o.Kind == OutcomeEnvError || o.Kind == OutcomeContextOverflow) && strings.TrimSpace(o.Reason) == "" {
		c.add(p+".reason", "required for %s", o.Kind)
	}
	if o.Kind != OutcomeAnswered && o.Answer != "" {
		c.add(p+".answer", "set although kind is %q", o.Kind)
	}
}

// Validate checks a judgement against the contract and returns a
// *ValidationError listing every problem with its field path, or nil.
func (j *Judgement) Validate() error {
	c := &checker{}
	j.validate(c, "")
	return c.result("judgement of " + PrintName(j.TrajectoryID))
}

func (j *Judgement) validate(c *checker, p string) {
	if j.SchemaVersion < 1 || j.SchemaVersion > SchemaVersion {
		c.add(p+"schema_version", "want 1..%d, got %d", SchemaVersion, j.SchemaVersion)
	}
	if err := checkID(j.TrajectoryID); err != nil {
		c.add(p+"trajectory_id", "%v", err)
	}
	c.name(p+"run", RunName, j.Run)
	c.name(p+"task_id", TaskName, j.TaskID)
	c.name(p+"app", AppName, j.App)
	if !slices.Contains(Decisions, j.Decision) {
		c.add(p+"decision", "want one of %v, got %q", Decisions, j.Decision)
	}
	switch {
	case j.Verdict == nil && j.Decision != Undecided && j.Decision != NotJudged && j.Decision != "":
		c.add(p+"verdict", "required for decision %q", j.Decision)
	case j.Verdict != nil && (j.Decision == Undecided || j.Decision == NotJudged):
		c.add(p+"verdict", "set although the decision is %s", j.Decision)
	case j.Verdict != nil:
		j.Verdict.validate(c, p+"verdict")
		if d := j.Verdict.Decide(); d != j.Decision && slices.Contains(Decisions, j.Decision) {
			c.add(p+"decision", "verdict says %q, decision is %q", d, j.Decision)
		}
	}
	switch {
	case j.Decision == NotJudged:
		c.nonEmpty(p+"reason", j.Reason)
		if len(j.Votes) > 0 {
			c.add(p+"votes", "%d votes although the trajectory was not judged", len(j.Votes))
		}
	case len(j.Votes) == 0:
		c.add(p+"votes", "at least one vote required")
	}
	for i := range j.Votes {
		v := &j.Votes[i]
		vp := fmt.Sprintf("%svotes[%d]", p, i)
		c.nonEmpty(vp+".model", v.Model)
		if v.Verdict == nil && v.Error == "" {
			c.add(vp+".verdict", "missing, and no error says why")
		}
		if v.Verdict != nil {
			v.Verdict.validate(c, vp+".verdict")
		}
		c.nonNeg(vp+".latency_ms", v.LatencyMS)
		c.nonNeg(vp+".attempts", int64(v.Attempts))
		switch {
		case (v.Choices != 0 || v.Choice != 0) && j.SchemaVersion < 7:
			c.add(vp+".choices", "set at schema version %d (recorded from version 7)", j.SchemaVersion)
		case v.Choices == 1 || v.Choices < 0 || v.Choice < 0 || (v.Choice > 0 && v.Choice >= v.Choices):
			c.add(vp+".choice", "choice %d of a call with n = %d: want n ≥ 2 and 0 ≤ choice < n (or both 0)", v.Choice, v.Choices)
		}
	}
	c.nonEmpty(p+"judge.prompt_sha256", j.Judge.PromptSHA256)
	if j.JudgedAt.IsZero() {
		c.add(p+"judged_at", "required, zero time")
	}
}

// Validate checks a judged trajectory: the judgement, the trajectory, and
// that they are about the same trajectory.
func (j *Judged) Validate() error {
	c := &checker{}
	if j.SchemaVersion < 1 || j.SchemaVersion > SchemaVersion {
		c.add("schema_version", "want 1..%d, got %d", SchemaVersion, j.SchemaVersion)
	}
	j.Judgement.validate(c, "judgement.")
	if err := j.Trajectory.Validate(); err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			for _, f := range ve.Fields {
				c.add("trajectory."+f.Path, "%s", f.Msg)
			}
		}
	}
	if j.Judgement.TrajectoryID != j.Trajectory.ID {
		c.add("judgement.trajectory_id", "%s, but the trajectory is %s", QuoteName(j.Judgement.TrajectoryID), QuoteName(j.Trajectory.ID))
	}
	return c.result("judged trajectory " + PrintName(j.Trajectory.ID))
}

func (v *Verdict) validate(c *checker, p string) {
	for i, s := range v.Redundant {
		if s < 1 {
			c.add(fmt.Sprintf("%s.redundant[%d]", p, i), "step numbers start at 1, got %d", s)
		}
	}
	if v.FirstErrorStep != nil && *v.FirstErrorStep < 1 {
		c.add(p+".first_error_step", "step numbers start at 1, got %d", *v.FirstErrorStep)
	}
}
