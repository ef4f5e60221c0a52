package traj

import "time"

// SchemaVersion is the version of the JSON documents this package writes.
// A document with a higher version is refused by Decode; lower versions are
// read as they are:
//
//   - 1: models carry no coordinate space; every point was parsed on the
//     0–1000 grid (ModelRef.Space returns Grid1000 for them).
//   - 2: each model records its coordinate space (ModelRef.Coords), and a
//     candidate whose output did not parse says which kind of failure it
//     was (Candidate.ParseErrorKind).
//   - 3: judgements may be NotJudged (with a Reason, and no votes), votes
//     count their Attempts; the Judged document (judgement + trajectory).
//   - 4: a trajectory records the prompt set its models were prompted with
//     (Trajectory.Prompts), so the planner's exact messages at every step
//     can be rendered again from the trajectory.
//   - 5: a candidate may record how its executor output was read
//     (Candidate.ParseNotes: actions joined by "then", Thought/Action
//     blocks dropped, actions beyond the first not executed).
//   - 6: each model records the sampling parameters every request to it
//     carried (ModelRef.Sampling, required for the planner and the
//     executor); a candidate records the planner's completion token ids
//     (Candidate.PlanTokenIDs, as long as PlanLogProbs) and its own
//     completion token count; outcome kind context_overflow.
//   - 7: a vote answered by a call that asked for several answers at once
//     (n > 1) records that call's n and its choice index (Vote.Choices,
//     Vote.Choice).
//   - 8: a step may record the planner's prompt token ids as its server
//     tokenized them (Step.PlanPromptTokenIDs, vLLM's prompt_token_ids),
//     once for the G+1 plans that share the prompt.
const SchemaVersion = 8

// TaskRef identifies the task a trajectory ran.
type TaskRef struct {
	ID          string `json:"id"`          // "<App>/<task file stem>", e.g. "ChimeraX/A-01"
	App         string `json:"app"`         // application, from the task file's "type"
	Instruction string `json:"instruction"` // what the agent was asked to do
	StepLimit   int    `json:"step_limit"`  // the task's "steps"
	Source      string `json:"source,omitempty"`
}

// ModelRef names one model endpoint and what it served.
type ModelRef struct {
	Endpoint   string `json:"endpoint"`
	Model      string `json:"model"`
	Checkpoint string `json:"checkpoint,omitempty"` // policy checkpoint tag, if known
	// Coords is the coordinate space the model's points were parsed in;
	// required from schema version 2, absent in version 1 documents (whose
	// points were all parsed on the 0–1000 grid: see Space).
	Coords *Coords `json:"coords,omitempty"`
	// Sampling are the decoding parameters every request to the model
	// carried; required for the planner and the executor from schema
	// version 6, absent before (the server's defaults decided them).
	Sampling *Sampling `json:"sampling,omitempty"`
}

// Space returns the model's coordinate space: Coords, or Grid1000 for a
// document written before spaces were recorded.
func (m ModelRef) Space() Coords {
	if m.Coords == nil {
		return Coords{Space: Grid1000}
	}
	return *m.Coords
}

// CoordSpace names how a model writes the numbers of a point.
type CoordSpace string

// The coordinate spaces. docs/actions.md says which models use which.
const (
	// Grid1000: 0–1000 on both axes, whatever the image size (UI-TARS-1.0,
	// Qwen2-VL, CODA's prompts).
	Grid1000 CoordSpace = "grid1000"
	// PixelsResized: absolute pixels of the image after Qwen2.5-VL's
	// smart resize (sides rounded to multiples of Factor within
	// [MinPixels, MaxPixels]); UI-TARS-1.5 and Qwen2.5-VL answer so.
	PixelsResized CoordSpace = "pixels-resized"
	// PixelsScreen: absolute pixels of the screenshot as taken.
	PixelsScreen CoordSpace = "pixels-screen"
	// Unit: fractions of the image, 0–1 on both axes.
	Unit CoordSpace = "unit"
)

// CoordSpaces lists every coordinate space.
var CoordSpaces = []CoordSpace{Grid1000, PixelsResized, PixelsScreen, Unit}

// Known reports whether s is one of CoordSpaces.
func (s CoordSpace) Known() bool {
	for _, k := range CoordSpaces {
		if k == s {
			return true
		}
	}
	return false
}

// Coords is a coordinate space with its parameters. Factor, MinPixels and
// MaxPixels are the smart-resize parameters of PixelsResized (all three
// set) and are zero for every other space.
type Coords struct {
	Space     CoordSpace `json:"space"`
	Factor    int        `json:"factor,omitempty"`     // side multiple, 28 for Qwen2.5-VL
	MinPixels int        `json:"min_pixels,omitempty"` // lower bound of width×height
	MaxPixels int        `json:"max_pixels,omitempty"` // upper bound of width×height
}

// Models are the two models of the agent.
type Models struct {
	Planner  ModelRef `json:"planner"`
	Executor ModelRef `json:"executor"`
}

// Trajectory is one episode of the agent on one task.
type Trajectory struct {
	SchemaVersion int     `json:"schema_version"`
	ID            string  `json:"id"`      // NewID
	Run           string  `json:"run"`     // run name (rollout --run)
	Task          TaskRef `json:"task"`    // what ran
	Sample        int     `json:"sample"`  // k: which sample of the task, 0-based
	Samples       int     `json:"samples"` // K: samples per task in the run
	Group         int     `json:"group"`   // G: each step asks for G+1 candidates
	Models        Models  `json:"models"`
	// Prompts is the SHA-256 (lower-case hex) of the prompt set document
	// the planner and the executor were prompted with; the document is
	// stored by that hash in the blob store. Required from schema version
	// 4; empty in older documents, whose prompts are unknown.
	Prompts string `json:"prompts,omitempty"`
	VM      string `json:"vm"` // id of the VM the episode ran on
	Steps   []Step `json:"steps"`
	// FinalScreenshot is the screen after the last step (the state the
	// evaluator checks and the judge must see); nil when it could not be
	// taken or the episode ended by an environment error.
	FinalScreenshot *ImageRef `json:"final_screenshot,omitempty"`
	Outcome         Outcome   `json:"outcome"`
	// Eval is the task evaluator's result; nil when the task has no
	// evaluator the backend can run, or the episode never reached it.
	Eval      *EvalResult `json:"eval,omitempty"`
	StartedAt time.Time   `json:"started_at"`
	EndedAt   time.Time   `json:"ended_at"`
}

// OutcomeKind says how an episode ended.
type OutcomeKind string

// Outcome kinds. EnvError is the environment's failure (VM, guest server,
// model endpoint, unsupported task setup), never the agent's: such an
// episode carries no reward signal and must not become reward 0.
const (
	OutcomeFinished  OutcomeKind = "finished"   // the agent called finished() (DONE)
	OutcomeAnswered  OutcomeKind = "answered"   // the agent gave an answer (ANS ...)
	OutcomeFailed    OutcomeKind = "failed"     // the agent gave up (call_user(), FAIL)
	OutcomeStepLimit OutcomeKind = "step_limit" // the step limit ran out
	OutcomeEnvError  OutcomeKind = "env_error"  // the environment failed
	// OutcomeContextOverflow: the planner's request outgrew the model's
	// context window (the server answered 400 "maximum context length").
	// It is the episode's own end, like the step limit, and is not run
	// again: the same episode would overflow again.
	OutcomeContextOverflow OutcomeKind = "context_overflow"
)

// OutcomeKinds lists every outcome kind.
var OutcomeKinds = []OutcomeKind{OutcomeFinished, OutcomeAnswered, OutcomeFailed, OutcomeStepLimit, OutcomeEnvError, OutcomeContextOverflow}

// Outcome is how an episode ended.
type Outcome struct {
	Kind   OutcomeKind `json:"kind"`
	Answer string      `json:"answer,omitempty"` // the answer, for OutcomeAnswered
	Reason string      `json:"reason,omitempty"` // what went wrong, required for OutcomeEnvError
}

// IsEnvError reports whether the episode ended by an environment failure.
func (o Outcome) IsEnvError() bool { return o.Kind == OutcomeEnvError }

// EvalResult is the result of the task's own evaluator (ScienceBoard
// "evaluate" checks) on the final state.
type EvalResult struct {
	// Passed is true when every check ran and passed.
	Passed bool          `json:"passed"`
	Checks []CheckResult `json:"checks"`
	// Unsupported lists checks the backend could not run. When it is not
	// empty, Passed is false and the result must not be read as a failure
	// of the agent.
	Unsupported []string `json:"unsupported,omitempty"`
	Error       string   `json:"error,omitempty"` // the evaluator itself failed
}

// CheckResult is one evaluator check.
type CheckResult struct {
	Type   string `json:"type"` // the check's "type" in the task file
	Passed bool   `json:"passed"`
	Detail string `json:"detail,omitempty"`
}

// ImageRef points at a screenshot in the blob store.
type ImageRef struct {
	SHA256 string `json:"sha256"` // hex SHA-256 of the PNG bytes: the blob key
	Size   int64  `json:"size"`   // bytes
	Width  int    `json:"width"`
	Height int    `json:"height"`
}

// Step is one observe → plan → ground → execute cycle.
type Step struct {
	Index      int         `json:"index"`      // 0-based position in Trajectory.Steps
	Screenshot ImageRef    `json:"screenshot"` // the observation the planner saw
	Candidates []Candidate `json:"candidates"` // G+1 candidates
	// PlanPromptTokenIDs are the token ids of the planner's prompt at this
	// step as its server tokenized it (vLLM's top-level prompt_token_ids,
	// with return_token_ids); every candidate shares the prompt. Empty when
	// the server gave none. From schema version 8.
	PlanPromptTokenIDs []int32 `json:"plan_prompt_token_ids,omitempty"`
	// Executed is the index of the candidate that ran on the VM (0 in
	// CODA's design), or -1 when none ran (the step failed first).
	Executed int `json:"executed"`
	// Code is what was sent to the VM: pyautogui code, or a special token
	// (DONE, FAIL, WAIT) for actions that are not GUI input.
	Code      string    `json:"code,omitempty"`
	Timings   Timings   `json:"timings"`
	Error     string    `json:"error,omitempty"` // what failed in this step, if anything
	StartedAt time.Time `json:"started_at"`
}

// ParseErrorKind classifies why a candidate has no action.
type ParseErrorKind string

// Parse error kinds.
const (
	// ParseSyntax: the output is not an action the grammar accepts (or
	// holds none).
	ParseSyntax ParseErrorKind = "syntax"
	// ParseOutOfRange: the action is well formed but a coordinate lies
	// outside the model's coordinate space — usually a sign that the
	// configured space is not the one the model answers in.
	ParseOutOfRange ParseErrorKind = "out_of_range"
)

// Timings are the wall-clock parts of one step, in milliseconds.
type Timings struct {
	ObserveMS int64 `json:"observe_ms"` // screenshot + blob store
	PlanMS    int64 `json:"plan_ms"`    // planner request(s)
	GroundMS  int64 `json:"ground_ms"`  // executor requests (concurrent)
	ExecMS    int64 `json:"exec_ms"`    // running the code on the VM
}

// Tokens counts the tokens of one model call.
type Tokens struct {
	Prompt     int `json:"prompt"`
	Completion int `json:"completion"`
}

// Candidate is one sampled plan and its grounding.
type Candidate struct {
	Index int `json:"index"` // position in Step.Candidates
	// Plan is the planner's raw output ("Thought: ...\nAction: ...").
	Plan    string `json:"plan"`
	Thought string `json:"thought"` // the plan's thought, as sent to the executor
	// ExecutorOutput is the executor's raw output; empty when the plan was
	// an answer, which is not grounded.
	ExecutorOutput string `json:"executor_output,omitempty"`
	// Action is the parsed action; nil when the output could not be parsed,
	// and then ParseError says why and ParseErrorKind what kind of failure
	// it was.
	Action         *Action        `json:"action,omitempty"`
	ParseError     string         `json:"parse_error,omitempty"`
	ParseErrorKind ParseErrorKind `json:"parse_error_kind,omitempty"`
	// ParseNotes say, one sentence each, how ExecutorOutput was read to
	// Action beyond the plain action grammar: what the parser accepted that
	// changes what the output means (actions joined by "then", further
	// Thought/Action blocks dropped; uitars.Parsed.Notes) and, when the
	// output held several actions, that only the first was kept as Action.
	// Empty when there is nothing to note, and always for a candidate
	// without ExecutorOutput or without Action.
	ParseNotes   []string `json:"parse_notes,omitempty"`
	FinishReason string   `json:"finish_reason,omitempty"` // the planner's finish reason ("stop", "length")
	PlanTokens   Tokens   `json:"plan_tokens"`
	ExecTokens   Tokens   `json:"exec_tokens"`
	// PlanLogProbs are the per-token log-probabilities of Plan under the
	// behaviour policy, and PlanTokenIDs the ids of those tokens, one per
	// log-probability; both empty when the server could not give them.
	// PlanTokens.Completion is this candidate's own token count.
	PlanLogProbs []float64 `json:"plan_logprobs,omitempty"`
	PlanTokenIDs []int32   `json:"plan_token_ids,omitempty"`
	PlanMS       int64     `json:"plan_ms"`
	ExecMS       int64     `json:"exec_ms"`
}
