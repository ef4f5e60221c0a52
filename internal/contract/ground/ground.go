// Package ground is the frozen executor's grounding of one plan: the one
// function that turns a planner's plan at a step into a candidate's action,
// called by rollout's agent for the G+1 plans of every step and by the
// reward service (advantage reward-server) for a plan an online trainer
// generated. Answers are kept as they are; every other plan's thought goes
// to the executor with the prompt set's executor messages, the executor's
// sampling parameters and a per-call seed, and the executor's first action
// counts.
package ground

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/contract/prompt"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
)

// Step is what grounding needs of one step. Build it with NewStep.
type Step struct {
	executor *model.Client
	params   model.Params
	prompts  *prompt.Set
	data     prompt.Data
	popt     uitars.Options
	eopt     uitars.Options
	shot     []byte
	observe  func(time.Duration, error)
}

// StepConfig configures NewStep.
type StepConfig struct {
	// Executor is the executor endpoint; Params its sampling parameters
	// (the per-call seed is given to Plan).
	Executor *model.Client
	Params   model.Params
	// Prompts is the prompt set whose executor messages are sent.
	Prompts *prompt.Set
	// Data is the step's prompt data (prompt.PlannerTurnAt); NewStep sets
	// its coordinate description to the executor's space.
	Data prompt.Data
	// PlannerCoords and ExecutorCoords are the spaces the planner's and
	// the executor's points are written in.
	PlannerCoords, ExecutorCoords traj.Coords
	// Screen is the screenshot's size; Screenshot its PNG bytes.
	Screen     uitars.Screen
	Screenshot []byte
	// Observe, when set, is called after every executor call with its
	// latency and error (metrics).
	Observe func(time.Duration, error)
}

// ErrScreen wraps the error of a screenshot whose size the executor's
// coordinate space cannot map.
var ErrScreen = errors.New("ground: screenshot size")

// NewStep prepares the grounding of plans at one step.
func NewStep(c StepConfig) (*Step, error) {
	d := c.Data
	if err := d.SetCoords(c.ExecutorCoords, c.Screen); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrScreen, err)
	}
	return &Step{executor: c.Executor, params: c.Params, prompts: c.Prompts, data: d,
		popt:    uitars.Options{Coords: c.PlannerCoords, Image: c.Screen},
		eopt:    uitars.Options{Coords: c.ExecutorCoords, Image: c.Screen},
		shot:    c.Screenshot,
		observe: c.Observe}, nil
}

// Error is a failure to ground a plan that is not the plan's: the executor
// prompt could not be rendered (Op "executor prompt") or the executor
// endpoint failed (Op "executor"). It is never a reward of 0.
type Error struct {
	Op  string
	Err error
}

func (e *Error) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// thought sets c.Thought from c.Plan and returns the plan's answer when
// it is one (kept as it is, not grounded), else nil.
func (s *Step) thought(c *traj.Candidate) (answer *traj.Action) {
	parsed, perr := uitars.Parse(c.Plan, s.popt)
	c.Thought = strings.TrimSpace(parsed.Thought)
	if c.Thought == "" {
		c.Thought = strings.TrimSpace(c.Plan)
	}
	// The planner's own action is dropped unless it is an answer.
	if perr == nil && len(parsed.Actions) == 1 && parsed.Actions[0].Type == traj.Answer {
		act := parsed.Actions[0]
		return &act
	}
	return nil
}

// Plan grounds the plan c.Plan: it sets c.Thought and either c.Action (an
// answer, kept as it is) or what the executor answered (c.ExecutorOutput,
// c.ExecTokens, c.ExecMS and c.Action with c.ParseNotes, or c.ParseError
// and c.ParseErrorKind when the answer holds no usable action). seed, when
// not nil, is the executor request's seed (Seed). The error is an *Error.
func (s *Step) Plan(ctx context.Context, c *traj.Candidate, seed *int64) error {
	if a := s.thought(c); a != nil {
		c.Action = a
		return nil
	}
	msgs, err := s.prompts.ExecutorMessages(s.data, c.Thought, s.shot)
	if err != nil {
		return &Error{Op: "executor prompt", Err: err}
	}
	p := s.params
	if seed != nil {
		p.Seed = seed
	}
	t0 := time.Now()
	out, err := s.executor.Sample(ctx, msgs, 1, p)
	if s.observe != nil {
		s.observe(time.Since(t0), err)
	}
	if err != nil {
		return &Error{Op: "executor", Err: err}
	}
	c.ExecMS = time.Since(t0).Milliseconds()
	c.ExecutorOutput = out[0].Content
	c.ExecTokens = traj.Tokens{Prompt: out[0].PromptTokens, Completion: out[0].CompletionTokens}
	ex, err := uitars.Parse(out[0].Content, s.eopt)
	switch {
	case errors.Is(err, uitars.ErrOutOfRange):
		c.ParseError, c.ParseErrorKind = err.Error(), traj.ParseOutOfRange
	case err != nil:
		c.ParseError, c.ParseErrorKind = err.Error(), traj.ParseSyntax
	case len(ex.Actions) == 0:
		c.ParseError, c.ParseErrorKind = "executor output holds no action", traj.ParseSyntax
	default:
		// One action per step: the first one counts.
		act := ex.Actions[0]
		c.Action = &act
		c.ParseNotes = notes(ex)
	}
	return nil
}

// notes returns the notes a candidate records about the parse of its
// executor output: the parser's own (Parsed.Notes), then, when the output
// held more than one action, that only the first is executed. Nil when
// there is nothing to note.
func notes(ex uitars.Parsed) []string {
	out := slices.Clone(ex.Notes)
	if len(ex.Actions) > 1 {
		types := make([]string, len(ex.Actions))
		for i, a := range ex.Actions {
			types[i] = string(a.Type)
		}
		out = append(out, fmt.Sprintf("the executor output holds %d actions (%s); only the first is executed, one action per step",
			len(ex.Actions), strings.Join(types, ", ")))
	}
	return out
}

// Seed is the seed of one model request of an episode: derived from the
// run's request seed base, the task, the sample, the step and the call
// (0: the planner's request; j+1: the grounding of candidate j). Nil when
// base is nil (no seed is sent).
func Seed(base *int64, task string, sample, step, call int) *int64 {
	if base == nil {
		return nil
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s\x00%d\x00%d\x00%d", *base, task, sample, step, call)
	s := int64(h.Sum64() & 0x7fffffff)
	return &s
}

// CandidateCall is the call index of the grounding of candidate j in Seed.
func CandidateCall(j int) int { return j + 1 }

// ExecutorFlags defines the executor endpoint's flags on fs, for every
// command that calls the executor (rollout, advantage reward-server):
// --executor-url, --executor-model, --executor-key and --executor-coords
// (default defCoords).
func ExecutorFlags(fs *service.Flags, c *model.Config, coords *string, defCoords, coordsUsage string) {
	fs.String(&c.BaseURL, "executor-url", "CODAPIPE_EXECUTOR_URL", "", "executor endpoint (OpenAI-compatible base URL)")
	fs.String(&c.Model, "executor-model", "CODAPIPE_EXECUTOR_MODEL", "", "executor model name")
	fs.Secret(&c.APIKey, "executor-key", "CODAPIPE_EXECUTOR_KEY", "executor API key, sent as a bearer token (a user:password@ in --executor-url is sent as basic authentication instead)")
	fs.String(coords, "executor-coords", "CODAPIPE_EXECUTOR_COORDS", defCoords, coordsUsage)
}
