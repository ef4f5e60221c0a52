// Package agent runs one episode of the planner→executor agent on a task:
// the task's setup, then observe → G+1 plans → ground each → execute plan 0
// → repeat, then the task's evaluator, producing a traj.Trajectory.
package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ground"
	"github.com/codapipe/codapipe/internal/contract/imaging"
	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/contract/prompt"
	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/clock"
	"github.com/codapipe/codapipe/internal/infra/redact"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
	"github.com/codapipe/codapipe/pkg/vmpool/guest"
)

// Guest is what an episode needs of a VM: *guest.Client implements it.
type Guest interface {
	Screenshot(ctx context.Context) ([]byte, error)
	ExecPyAutoGUI(ctx context.Context, code string) (guest.ExecResult, error)
	// Call sends one request of the ScienceBoard contract (task setup and
	// evaluation) to the guest server or the application's server.
	Call(ctx context.Context, r guest.Request) ([]byte, error)
	// Upload writes a file into the guest (downloads copied from the host).
	Upload(ctx context.Context, path string, data []byte) error
}

// caller adapts a Guest to scienceboard.Caller.
type caller struct{ g Guest }

// Call implements scienceboard.Caller.
func (c caller) Call(ctx context.Context, r scienceboard.Request) ([]byte, error) {
	return c.g.Call(ctx, guest.Request(r))
}

// Store keeps screenshots; *blob.Store implements it.
type Store interface {
	PutBytes(ctx context.Context, b []byte) (blob.Ref, error)
}

// Config configures the agent.
type Config struct {
	Planner  *model.Client
	Executor *model.Client
	Prompts  *prompt.Set
	Store    Store
	// Group is G: each step asks for G+1 plans; plan 0 is executed.
	Group int
	// PlannerParams default to CODA's decoding (DefaultPlannerSampling)
	// with log-probabilities and token ids; ExecutorParams to greedy
	// grounding (DefaultExecutorSampling). Every parameter is sent with
	// every request. A Seed in them is sent when RequestSeed is nil.
	PlannerParams, ExecutorParams model.Params
	// PlannerCoords and ExecutorCoords are the coordinate spaces the two
	// models write points in; they are recorded in every trajectory. Zero
	// means grid1000 for the planner (CODA's planner prompts) and
	// pixels-resized for the executor (UI-TARS-1.5); zero smart-resize
	// parameters mean Qwen2.5-VL's.
	PlannerCoords, ExecutorCoords traj.Coords
	// Placeholders fill «NAME» in the task's setup commands; default
	// PORTLIKE=8000, the port of ScienceBoard's app-state servers.
	Placeholders map[string]string
	// Download fetches a task's download item on the host (nil: an HTTP
	// GET with DownloadTimeout, at most 1 GiB); the agent then copies the
	// file into the guest, as ScienceBoard's harness does.
	Download func(ctx context.Context, url string) ([]byte, error)
	// DownloadInGuest has the guest fetch download items itself (curl
	// through /setup/execute) instead; the guest then needs the network.
	DownloadInGuest bool
	// MaxImagePixels bounds a screenshot, read from its PNG header
	// (imaging.DefaultMaxPixels when 0): a larger one is the VM's fault.
	MaxImagePixels int64
	// Sleep pauses for the task's setup waits and the wait() action (nil:
	// a real timer; a simulated world passes one on its own clock). It
	// returns ctx's error when ctx ends first.
	Sleep func(ctx context.Context, d time.Duration) error
	// WaitAction is how long wait() pauses (default 2 s).
	WaitAction time.Duration
	// RequestSeed, when set, makes every model request carry a seed
	// derived from it, the task, the sample, the step and the call:
	// sampling is then reproducible on servers that honour seeds (vLLM
	// does). Nil sends no seed.
	RequestSeed *int64
	// Metrics (nil: unregistered metrics).
	Metrics *Metrics
	Run     string
	Log     *slog.Logger
}

// DefaultPlannerSampling is CODA's planner decoding: temperature 1.0,
// top_p 0.9, up to 1500 tokens, and every other filter off (top_k -1,
// min_p 0, no penalties), so the G+1 plans of a step differ.
func DefaultPlannerSampling() traj.Sampling {
	return traj.Sampling{Temperature: 1, TopP: 0.9, TopK: -1, RepetitionPenalty: 1, MaxTokens: 1500}
}

// DefaultExecutorSampling is greedy grounding: temperature 0, up to 256
// tokens.
func DefaultExecutorSampling() traj.Sampling {
	return traj.Sampling{Temperature: 0, TopP: 1, TopK: -1, RepetitionPenalty: 1, MaxTokens: 256}
}

// Agent runs episodes. It is safe for concurrent use.
type Agent struct{ cfg Config }

// New validates cfg and returns an Agent.
func New(cfg Config) (*Agent, error) {
	if cfg.Planner == nil || cfg.Executor == nil || cfg.Prompts == nil || cfg.Store == nil {
		return nil, errors.New("agent: planner, executor, prompts and store are required")
	}
	if cfg.Group < 0 {
		return nil, fmt.Errorf("agent: group %d: want G >= 0", cfg.Group)
	}
	if cfg.PlannerParams.IsZero() {
		cfg.PlannerParams = model.Params{Sampling: DefaultPlannerSampling(), LogProbs: true}
	}
	if cfg.ExecutorParams.IsZero() {
		cfg.ExecutorParams = model.Params{Sampling: DefaultExecutorSampling()}
	}
	if err := cfg.PlannerParams.Check(); err != nil {
		return nil, fmt.Errorf("agent: planner %w", err)
	}
	if err := cfg.ExecutorParams.Check(); err != nil {
		return nil, fmt.Errorf("agent: executor %w", err)
	}
	if cfg.PlannerCoords == (traj.Coords{}) {
		cfg.PlannerCoords = uitars.Grid()
	}
	if cfg.ExecutorCoords == (traj.Coords{}) {
		cfg.ExecutorCoords = uitars.Resized()
	}
	cfg.PlannerCoords = uitars.WithDefaults(cfg.PlannerCoords)
	cfg.ExecutorCoords = uitars.WithDefaults(cfg.ExecutorCoords)
	if err := cfg.PlannerCoords.Check(); err != nil {
		return nil, fmt.Errorf("agent: planner coordinates: %w", err)
	}
	if err := cfg.ExecutorCoords.Check(); err != nil {
		return nil, fmt.Errorf("agent: executor coordinates: %w", err)
	}
	if cfg.Download == nil {
		cfg.Download = httpDownload
	}
	if cfg.Placeholders == nil {
		cfg.Placeholders = map[string]string{"PORTLIKE": "8000"}
	}
	if cfg.Sleep == nil {
		cfg.Sleep = clock.Sleep
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.WaitAction <= 0 {
		cfg.WaitAction = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Agent{cfg: cfg}, nil
}

// Episode is one (task, sample) on one VM.
type Episode struct {
	ID      string // trajectory id; NewID when empty
	Task    *scienceboard.Task
	Sample  int // k, 0-based
	Samples int // K
	VM      string
	Guest   Guest
}

// EnvError is an environment failure: the VM, its guest server, a model
// endpoint or an unsupported setup item. It ends an episode with outcome
// env_error; it is never the agent's failure.
type EnvError struct {
	Op  string
	Err error
	// VM is true when the VM or its guest server failed (the pool should
	// count it against the VM); false for model endpoints, the blob store
	// and unsupported setup items.
	VM bool
	// Permanent is true when running the episode again cannot help (a
	// setup item this agent does not support).
	Permanent bool
}

func (e *EnvError) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *EnvError) Unwrap() error { return e.Err }

func envErr(op string, err error) error { return &EnvError{Op: op, Err: err} }
func vmErr(op string, err error) error  { return &EnvError{Op: op, Err: err, VM: true} }

// Run runs one episode and returns its trajectory, whose outcome tells how
// it ended. An environment failure gives outcome env_error with the reason
// and, as the error, the *EnvError (the trajectory is returned too). When
// ctx ends the trajectory is nil and the error is ctx's: the episode did
// not finish and must not be published.
func (a *Agent) Run(ctx context.Context, ep Episode) (*traj.Trajectory, error) {
	pc, ec := a.cfg.PlannerCoords, a.cfg.ExecutorCoords
	t := &traj.Trajectory{
		SchemaVersion: traj.SchemaVersion,
		ID:            ep.ID,
		Run:           a.cfg.Run,
		Task: traj.TaskRef{
			ID: ep.Task.ID, App: ep.Task.App, Instruction: ep.Task.Instruction,
			StepLimit: ep.Task.Steps, Source: ep.Task.Path,
		},
		Sample: ep.Sample, Samples: ep.Samples, Group: a.cfg.Group,
		Models: traj.Models{
			Planner: traj.ModelRef{Endpoint: a.cfg.Planner.Config().BaseURL, Model: a.cfg.Planner.Config().Model, Checkpoint: a.cfg.Planner.Config().Checkpoint,
				Coords: &pc, Sampling: recorded(a.cfg.PlannerParams.Sampling, a.cfg.RequestSeed)},
			Executor: traj.ModelRef{Endpoint: a.cfg.Executor.Config().BaseURL, Model: a.cfg.Executor.Config().Model, Checkpoint: a.cfg.Executor.Config().Checkpoint,
				Coords: &ec, Sampling: recorded(a.cfg.ExecutorParams.Sampling, a.cfg.RequestSeed)},
		},
		Prompts:   a.cfg.Prompts.Hash(),
		VM:        ep.VM,
		Steps:     []traj.Step{},
		StartedAt: time.Now().UTC(),
	}
	if t.ID == "" {
		t.ID = traj.NewID()
	}
	log := a.cfg.Log.With("trajectory", t.ID, "task", ep.Task.ID, "sample", ep.Sample, "vm", ep.VM)

	err := a.episode(ctx, ep, t, log)
	t.EndedAt = time.Now().UTC()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var ee *EnvError
	if errors.As(err, &ee) {
		t.Outcome = envErrorOutcome(ee)
		lvl := slog.LevelWarn
		if errors.Is(ee, model.ErrUnavailable) {
			// An endpoint that did not answer: the scheduler's outage
			// breaker tells whether it is down for everyone, and says so.
			lvl = slog.LevelDebug
		}
		log.Log(ctx, lvl, "episode ended by an environment error", "err", ee, "vm_fault", ee.VM)
		return t, ee
	}
	if err != nil { // a bug of ours: report it as an environment failure, never as the agent's
		ee := &EnvError{Op: "internal", Err: err}
		t.Outcome = envErrorOutcome(ee)
		return t, ee
	}
	// The screen after the last step: what the evaluator checks and the
	// judge must see. Without it the trajectory is still complete.
	if png, err := ep.Guest.Screenshot(ctx); err == nil {
		if ref, err := a.observe(ctx, png); err == nil {
			t.FinalScreenshot = &ref
		}
	} else if ctx.Err() == nil {
		log.Warn("final screenshot failed; the trajectory has none", "err", err)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if len(ep.Task.Evaluate) > 0 {
		res := scienceboard.Evaluate(ctx, ep.Task, caller{ep.Guest}, scienceboard.FinalActionOf(t.Outcome))
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		t.Eval = &res
	}
	return t, nil
}

// episode runs setup and the step loop, filling t.Steps and t.Outcome.
func (a *Agent) episode(ctx context.Context, ep Episode, t *traj.Trajectory, log *slog.Logger) error {
	if err := a.setup(ctx, ep); err != nil {
		return err
	}
	var prev []byte   // the previous step's screenshot, sent again with the next
	var held []string // keys pressed and held (keydown) and not released yet
	defer func() { a.releaseHeld(ctx, ep, held, log) }()
	for i := 0; i < ep.Task.Steps; i++ {
		start := time.Now()
		step, cur, end, err := a.step(ctx, ep, t, i, prev)
		if step != nil {
			t.Steps = append(t.Steps, *step)
			held = trackHeld(held, step)
			a.cfg.Metrics.step(step, time.Since(start))
		}
		if err != nil {
			return err
		}
		if end != nil {
			if end.Kind == traj.OutcomeContextOverflow {
				log.Warn("episode ended: the planner's request exceeds its context length", "step", i, "reason", end.Reason)
			}
			t.Outcome = *end
			return nil
		}
		prev = cur
	}
	t.Outcome = traj.Outcome{Kind: traj.OutcomeStepLimit}
	log.Debug("step limit reached", "steps", len(t.Steps))
	return nil
}

// trackHeld updates the keys held down after a step: an executed keydown
// adds its keys, a keyup removes them.
func trackHeld(held []string, s *traj.Step) []string {
	if s.Executed < 0 || s.Candidates[s.Executed].Action == nil || s.Error != "" {
		return held
	}
	a := s.Candidates[s.Executed].Action
	switch a.Type {
	case traj.KeyDown:
		for _, k := range a.Keys {
			if !slices.Contains(held, k) {
				held = append(held, k)
			}
		}
	case traj.KeyUp:
		held = slices.DeleteFunc(held, func(k string) bool { return slices.Contains(a.Keys, k) })
	}
	return held
}

// releaseHeld releases the keys the episode left held down (press /
// keydown without a release), so the final screenshot and the evaluator see
// the application as the agent left it, not with a key stuck. A failure is
// logged: the VM is reset after the episode anyway.
func (a *Agent) releaseHeld(ctx context.Context, ep Episode, held []string, log *slog.Logger) {
	if len(held) == 0 || ctx.Err() != nil {
		return
	}
	code, err := uitars.Render(traj.Action{Type: traj.KeyUp, Keys: held}, uitars.Screen{})
	if err == nil {
		_, err = ep.Guest.ExecPyAutoGUI(ctx, code)
	}
	if err != nil {
		log.Warn("releasing keys left held down failed", "keys", held, "err", err)
	}
}

// setup runs the task's initialize items as ScienceBoard's harness does
// (scienceboard.SetupSteps): each a request to the guest server or the
// application's server, or a download. A VM that does not answer is a VM
// fault; a deterministic refusal of the task's own request (setupError) ends
// the episode as a task error: not the VM's fault, not worth retrying.
func (a *Agent) setup(ctx context.Context, ep Episode) error {
	task, err := ep.Task.ExpandPlaceholders(a.cfg.Placeholders)
	if err != nil {
		return &EnvError{Op: "setup", Err: err, Permanent: true}
	}
	steps, err := scienceboard.SetupSteps(task)
	if err != nil {
		return &EnvError{Op: "setup", Err: err, Permanent: true}
	}
	g := caller{ep.Guest}
	for _, st := range steps {
		op := fmt.Sprintf("setup: initialize[%d] %s", st.Item, st.Func)
		switch {
		case st.Download != nil:
			if err := a.download(ctx, ep, op, st.Download); err != nil {
				return err
			}
		case st.Request != nil:
			body, err := g.Call(ctx, *st.Request)
			if err != nil {
				return setupError(op, *st.Request, err)
			}
			if err := st.CheckReply(body); err != nil {
				return taskErr(op, *st.Request, err.Error())
			}
		}
		if st.Wait > 0 {
			if err := a.cfg.Sleep(ctx, st.Wait); err != nil {
				return err
			}
		}
	}
	return nil
}

// setupError classifies a failed setup request. No answer, or a guest
// server that failed (5xx other than its own "could not run" reply), is
// the VM's fault. The application refusing the request (any error status
// from the app server), a 4xx from the guest server, or the guest server
// reporting that the task's command could not run ({"status": "error"}
// with 500 from /setup/execute or /setup/launch) is a task error.
func setupError(op string, r scienceboard.Request, err error) error {
	st := scienceboard.StatusOf(err)
	switch {
	case st == 0:
		return vmErr(op, err)
	case r.Server == scienceboard.AppServer, st < 500:
		return taskErr(op, r, err.Error())
	case (r.Path == "/setup/execute" || r.Path == "/setup/launch") && couldNotRun(err):
		return taskErr(op, r, err.Error())
	}
	return vmErr(op, err)
}

// couldNotRun reports whether err is the guest server's own answer for a
// command it could not run (as opposed to a crash of the server).
func couldNotRun(err error) bool {
	var he *guest.HTTPError
	return errors.As(err, &he) && he.Status == 500 && he.JSONStatus == "error"
}

// taskErr is a task error: permanent, not the VM's fault.
func taskErr(op string, r scienceboard.Request, reason string) error {
	return &EnvError{Op: "task error", Err: &scienceboard.TaskError{Op: op, Req: r.String(), Reason: reason}, Permanent: true}
}

// download fetches a task's file on the host and copies it into the guest
// (ScienceBoard's vm_download), or with Config.DownloadInGuest has the
// guest fetch it itself.
func (a *Agent) download(ctx context.Context, ep Episode, op string, d *scienceboard.Download) error {
	if a.cfg.DownloadInGuest {
		r := scienceboard.Request{Server: scienceboard.GuestServer, Method: "POST", Path: "/setup/execute", ContentType: "application/json"}
		r.Body, _ = json.Marshal(map[string]any{"command": []string{"curl", "-fsSL", "-o", d.Path, d.URL}, "shell": false})
		body, err := caller{ep.Guest}.Call(ctx, r)
		if err != nil {
			return setupError(op, r, err)
		}
		var res guest.ExecResult
		if json.Unmarshal(body, &res) != nil || res.ReturnCode != 0 {
			return taskErr(op, r, fmt.Sprintf("curl %s in the guest failed: %s", d.URL, strings.TrimSpace(res.Error)))
		}
		return nil
	}
	data, err := a.cfg.Download(ctx, d.URL)
	if err != nil {
		return &EnvError{Op: op, Err: err}
	}
	if err := ep.Guest.Upload(ctx, d.Path, data); err != nil {
		r := scienceboard.Request{Server: scienceboard.GuestServer, Method: "POST", Path: "/setup/upload"}
		return setupError(op, r, err)
	}
	return nil
}

// step runs one observe → plan → ground → execute cycle. It returns the
// recorded step (also when it failed), the screenshot, and the outcome when
// the executed action ends the episode.
func (a *Agent) step(ctx context.Context, ep Episode, t *traj.Trajectory, i int, prev []byte) (*traj.Step, []byte, *traj.Outcome, error) {
	s := &traj.Step{Index: i, Executed: -1, StartedAt: time.Now().UTC()}
	t0 := time.Now()
	cur, err := ep.Guest.Screenshot(ctx)
	if err != nil {
		return nil, nil, nil, vmErr("screenshot", err)
	}
	ref, err := a.observe(ctx, cur)
	if err != nil {
		return nil, nil, nil, err
	}
	s.Screenshot = ref
	s.Timings.ObserveMS = time.Since(t0).Milliseconds()

	// The planner's input comes from the trajectory so far (t.Steps holds
	// the steps before this one), through the one renderer that every
	// consumer of the trajectory calls again later.
	turn, err := prompt.PlannerTurnAt(t, i, ref)
	if err != nil {
		return nil, nil, nil, vmErr("screenshot", err) // a size no coordinate space can map
	}
	d, screen := turn.Data, uitars.Screen{W: ref.Width, H: ref.Height}
	msgs, err := a.cfg.Prompts.RenderPlanner(turn, func(r traj.ImageRef) (string, error) {
		switch {
		case r.SHA256 == ref.SHA256:
			return model.DataURI(cur), nil
		case prev != nil && i > 0 && r.SHA256 == t.Steps[i-1].Screenshot.SHA256:
			return model.DataURI(prev), nil
		}
		return "", fmt.Errorf("no image %s at step %d", r.SHA256, i)
	})
	if err != nil {
		return nil, nil, nil, envErr("planner prompt", err)
	}
	pp := a.cfg.PlannerParams
	if s := a.seed(ep, i, 0); s != nil {
		pp.Seed = s
	}
	t1 := time.Now()
	plans, err := a.cfg.Planner.Sample(ctx, msgs, a.cfg.Group+1, pp)
	a.cfg.Metrics.call("planner", time.Since(t1), err)
	var co *model.ContextOverflowError
	if errors.As(err, &co) {
		// The history outgrew the planner's context: asking again cannot
		// help, and it is the agent's episode that ends, not the VM's.
		return nil, nil, &traj.Outcome{Kind: traj.OutcomeContextOverflow, Reason: co.Message}, nil
	}
	if err != nil {
		return nil, nil, nil, envErr("planner", err)
	}
	s.Timings.PlanMS = time.Since(t1).Milliseconds()
	// The G+1 plans share one prompt: its token ids are recorded once.
	for _, p := range plans {
		if len(p.PromptTokenIDs) > 0 {
			s.PlanPromptTokenIDs = p.PromptTokenIDs
			break
		}
	}

	t2 := time.Now()
	s.Candidates, err = a.ground(ctx, ep, i, d, screen, plans, cur)
	if err != nil {
		return nil, nil, nil, err
	}
	s.Timings.GroundMS = time.Since(t2).Milliseconds()

	// Execute candidate 0.
	c0 := &s.Candidates[0]
	if c0.Action == nil {
		s.Error = "candidate 0 has no action: " + c0.ParseError
		return s, cur, nil, nil // the step is spent; the agent goes on
	}
	t3 := time.Now()
	defer func() { s.Timings.ExecMS = time.Since(t3).Milliseconds() }()
	switch c0.Action.Type {
	case traj.Finished:
		s.Executed, s.Code = 0, uitars.TokenDone
		return s, cur, &traj.Outcome{Kind: traj.OutcomeFinished}, nil
	case traj.CallUser:
		s.Executed, s.Code = 0, uitars.TokenFail
		return s, cur, &traj.Outcome{Kind: traj.OutcomeFailed}, nil
	case traj.Answer:
		s.Executed, s.Code = 0, uitars.TokenAns+" "+c0.Action.Text
		return s, cur, &traj.Outcome{Kind: traj.OutcomeAnswered, Answer: c0.Action.Text}, nil
	case traj.Wait:
		s.Executed, s.Code = 0, uitars.TokenWait
		if err := a.cfg.Sleep(ctx, a.cfg.WaitAction); err != nil {
			return nil, nil, nil, err
		}
		return s, cur, nil, nil
	}
	code, err := uitars.Render(*c0.Action, screen)
	if err != nil {
		s.Error = "candidate 0 cannot be rendered: " + err.Error()
		return s, cur, nil, nil
	}
	s.Code = code
	s.Executed = 0
	if _, err := ep.Guest.ExecPyAutoGUI(ctx, code); err != nil {
		var xe *guest.ExecError
		if !errors.As(err, &xe) {
			return nil, nil, nil, vmErr(fmt.Sprintf("step %d: execute", i), err)
		}
		// The guest ran the code and it failed (the action raised, or ran
		// past the guest's limit): the agent's step went wrong, not the VM.
		// The step records it and the episode goes on, as in the benchmark.
		s.Error = "candidate 0 failed on the guest: " + err.Error()
	}
	return s, cur, nil, nil
}

// observe checks a screenshot and stores it.
func (a *Agent) observe(ctx context.Context, shot []byte) (traj.ImageRef, error) {
	cfg, err := png.DecodeConfig(bytes.NewReader(shot))
	if err != nil {
		return traj.ImageRef{}, vmErr("screenshot", fmt.Errorf("not a PNG: %w", err))
	}
	if err := imaging.CheckPixels("screenshot", cfg.Width, cfg.Height, a.cfg.MaxImagePixels, "--max-image-pixels"); err != nil {
		return traj.ImageRef{}, vmErr("screenshot", err)
	}
	ref, err := a.cfg.Store.PutBytes(ctx, shot)
	if err != nil {
		return traj.ImageRef{}, envErr("blob store", err)
	}
	return traj.ImageRef{SHA256: ref.SHA256, Size: ref.Size, Width: cfg.Width, Height: cfg.Height}, nil
}

// ground turns every plan into a candidate: answers are kept as they are,
// every other plan's thought goes to the executor (ground.Step.Plan, the
// one grounding the reward service calls too); all executor calls run
// concurrently.
func (a *Agent) ground(ctx context.Context, ep Episode, step int, d prompt.Data, screen uitars.Screen, plans []model.Choice, cur []byte) ([]traj.Candidate, error) {
	gs, err := ground.NewStep(ground.StepConfig{
		Executor: a.cfg.Executor, Params: a.cfg.ExecutorParams, Prompts: a.cfg.Prompts, Data: d,
		PlannerCoords: a.cfg.PlannerCoords, ExecutorCoords: a.cfg.ExecutorCoords, Screen: screen, Screenshot: cur,
		Observe: func(d time.Duration, err error) { a.cfg.Metrics.call("executor", d, err) },
	})
	if err != nil {
		return nil, vmErr("screenshot", err)
	}
	cands := make([]traj.Candidate, len(plans))
	errs := make([]error, len(plans))
	var wg sync.WaitGroup
	for j, p := range plans {
		c := &cands[j]
		c.Index, c.Plan, c.FinishReason = j, p.Content, p.FinishReason
		c.PlanTokens = traj.Tokens{Prompt: p.PromptTokens, Completion: p.CompletionTokens}
		c.PlanLogProbs, c.PlanTokenIDs, c.PlanMS = p.LogProbs, p.TokenIDs, p.Latency.Milliseconds()
		if len(c.PlanTokenIDs) != len(c.PlanLogProbs) {
			// The contract pairs them one to one; a server that gave one
			// without the other gave neither usable.
			c.PlanLogProbs, c.PlanTokenIDs = nil, nil
		}
		wg.Add(1)
		go func() { // owned: waited for below
			defer wg.Done()
			err := gs.Plan(ctx, c, a.seed(ep, step, ground.CandidateCall(j)))
			var ge *ground.Error
			switch {
			case errors.As(err, &ge) && ge.Op == "executor":
				errs[j] = envErr(fmt.Sprintf("executor (candidate %d)", j), ge.Err)
			case errors.As(err, &ge):
				errs[j] = envErr(ge.Op, ge.Err)
			case err != nil:
				errs[j] = err
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cands, nil
}

// recorded is the sampling a trajectory records for a model: the
// configured parameters, with the run's request seed (each request's seed
// is derived from it) when one is set.
func recorded(s traj.Sampling, seed *int64) *traj.Sampling {
	s.Stop = append([]string(nil), s.Stop...)
	if seed != nil {
		v := *seed
		s.Seed = &v
	}
	return &s
}

// seed derives a request seed from RequestSeed, the episode, the step and
// the call (ground.Seed), or nil when no seed is configured.
func (a *Agent) seed(ep Episode, step, call int) *int64 {
	return ground.Seed(a.cfg.RequestSeed, ep.Task.ID, ep.Sample, step, call)
}

// envErrorOutcome is the outcome an environment error ends an episode
// with. Its reason is stored with the trajectory, so a URL in it (a task's
// download URL, an endpoint's) is written without its credentials.
func envErrorOutcome(ee *EnvError) traj.Outcome {
	return traj.Outcome{Kind: traj.OutcomeEnvError, Reason: redact.Text(ee.Error())}
}
