// Package rewardserver is codapipe's reward as a service for online
// trainers (advantage reward-server, docs/shards.md "Reward service"):
// given the label of an exported group (trainexport.Label) and a plan a
// trainer generated for that group's step, the frozen executor grounds the
// plan on the step's screenshot exactly as rollout grounds its candidates
// (ground.Step.Plan) and pkg/grpo scores the action against the step's
// reference action with the shard set's reward configuration: the reward
// advantage wrote for a stored candidate with the same plan.
//
// It speaks OpenRLHF's remote reward protocol (POST /get_reward) and a
// one-plan JSON route (POST /v1/reward) that the verl module
// (trainer/codapipe_reward) calls.
package rewardserver

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/contract/archive"
	"github.com/codapipe/codapipe/internal/contract/ground"
	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/contract/prompt"
	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/contract/trainexport"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/pkg/grpo"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
)

// Config configures a Server.
type Config struct {
	// Bucket holds the shard set; Prefix is the folder of its manifest.
	Bucket blob.Bucket
	Prefix string
	// Store is the blob store of the judged archive, the prompt sets and
	// the screenshots.
	Store *blob.Store
	// Executor is the frozen executor endpoint.
	Executor *model.Client
	// ExecutorCoords is the space the executor writes points in; nil: the
	// space each trajectory recorded for its executor.
	ExecutorCoords *traj.Coords
	// Concurrency bounds the plans grounded at once (default 16).
	Concurrency int
	// Timeout bounds one request (default 120 s); a plan still waiting for
	// a grounding slot or the executor then fails with 503.
	Timeout time.Duration
	// Steps is how many steps' contexts (trajectory, prompt set,
	// screenshot) are kept in memory (default 256).
	Steps int
	// TempDir is where shard files of a remote set are downloaded to be
	// indexed (default os.TempDir()).
	TempDir string
	// Metrics (nil: unregistered).
	Metrics *Metrics
	Log     *slog.Logger
}

// Server scores plans against the groups of one shard set. It is safe for
// concurrent use.
type Server struct {
	cfg    Config
	set    string
	reward grpo.RewardConfig
	groups map[string]group
	slots  chan struct{}

	prompts *prompt.Cache

	mu     sync.Mutex
	steps  map[string]*list.Element // of *stepEntry, by group id
	lru    *list.List
	warned map[string]bool
}

// group is what the set says of one group.
type group struct {
	run, app, trajectory, judge string
	step                        int
	reference                   string // the reference action's canonical text
	// shot and shotPath are the step's screenshot (the row's last image):
	// its SHA-256 and, in a set with image files, its file.
	shot, shotPath string
}

// Open reads the shard set's manifest and indexes its groups.
func Open(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Bucket == nil || cfg.Store == nil || cfg.Executor == nil {
		return nil, errors.New("rewardserver: a shard set, a blob store and an executor are required")
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 120 * time.Second
	}
	if cfg.Steps <= 0 {
		cfg.Steps = 256
	}
	if cfg.TempDir == "" {
		cfg.TempDir = os.TempDir()
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	m, err := shard.ReadManifest(ctx, cfg.Bucket, cfg.Prefix)
	if err != nil {
		return nil, fmt.Errorf("rewardserver: %w", err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("rewardserver: shard set %s: %w", shard.ManifestKey(cfg.Prefix), err)
	}
	if m.Meta.Mode != shard.ModeStep {
		return nil, fmt.Errorf("rewardserver: shard set %s is in %s mode: the reward service scores step-mode groups (a plan against a step's reference action)", m.Set, m.Meta.Mode)
	}
	rc, err := stepReward(m.Meta)
	if err != nil {
		return nil, fmt.Errorf("rewardserver: shard set %s: %w", m.Set, err)
	}
	s := &Server{cfg: cfg, set: m.Set, reward: rc, groups: map[string]group{}, slots: make(chan struct{}, cfg.Concurrency),
		prompts: prompt.NewCache(cfg.Store), steps: map[string]*list.Element{}, lru: list.New(), warned: map[string]bool{}}
	for _, f := range m.Files {
		if err := s.index(ctx, f); err != nil {
			return nil, err
		}
	}
	cfg.Metrics.groups.Set(float64(len(s.groups)))
	cfg.Log.Info("rewardserver: set indexed", "set", m.Set, "groups", len(s.groups), "files", len(m.Files))
	return s, nil
}

// stepReward is the reward configuration of a step-mode set's rows: the
// action reward of the step options advantage wrote into the schema
// metadata (grpo.StepOptions as JSON; its absent fields are the
// defaults).
func stepReward(m shard.Meta) (grpo.RewardConfig, error) {
	opt := grpo.DefaultStepOptions()
	if m.RewardConfig != "" {
		d := json.NewDecoder(strings.NewReader(m.RewardConfig))
		d.DisallowUnknownFields() // a document of another shape is not silently the defaults
		if err := d.Decode(&opt); err != nil {
			return grpo.RewardConfig{}, fmt.Errorf("meta %s: %w", shard.MetaRewardConfig, err)
		}
	}
	if err := opt.Reward.Validate(); err != nil {
		return grpo.RewardConfig{}, err
	}
	return opt.Reward, nil
}

// Set is the name of the shard set the server scores against.
func (s *Server) Set() string { return s.set }

// Groups is the number of groups of the set.
func (s *Server) Groups() int { return len(s.groups) }

// index reads the rows of one shard file (checked against the manifest's
// size and SHA-256) into the group index.
func (s *Server) index(ctx context.Context, f shard.File) error {
	path, remove, err := shard.Fetch(ctx, s.cfg.Bucket, f, s.cfg.TempDir)
	if err != nil {
		return fmt.Errorf("rewardserver: %w", err)
	}
	defer remove()
	return shard.ReadFile(ctx, path, f.Format, func(r *shard.Row) error {
		g := group{run: r.Run, app: r.App, trajectory: r.TrajectoryID, judge: r.JudgeVersion, step: int(r.Step), reference: r.ReferenceText}
		if n := len(r.Images); n > 0 {
			g.shot, g.shotPath = r.Images[n-1].SHA256, r.Images[n-1].Path
		}
		if old, ok := s.groups[r.GroupID]; ok && old != g {
			return fmt.Errorf("rewardserver: shard file %s: group %s: rows disagree on its trajectory, step or reference", f.Key, r.GroupID)
		}
		s.groups[r.GroupID] = g
		return nil
	})
}

// Result is the reward of one plan.
type Result struct {
	// Reward is r = TypeMatch + Dist in [0,2], as pkg/grpo scores it.
	Reward    float64 `json:"reward"`
	TypeMatch float64 `json:"type_match"`
	Dist      float64 `json:"dist"`
	// Unparsed is true when the grounding gave no usable action (reward 0).
	Unparsed bool `json:"unparsed"`
	// Action is the grounded action's canonical text ("" for none).
	Action string `json:"action"`
	// ParseError says why the executor's answer gave no action.
	ParseError string `json:"parse_error,omitempty"`
	// GroupID is the group scored against.
	GroupID string `json:"group_id"`
}

// BadRequestError is a request the server cannot score: a label that does
// not parse, names another set or an unknown group, or a reference that
// differs from the set's. Field names the request's field.
type BadRequestError struct {
	Field, Reason string
}

func (e *BadRequestError) Error() string { return e.Field + ": " + e.Reason }

func badRequest(field, format string, args ...any) error {
	return &BadRequestError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// ErrBusy is returned when no grounding slot freed up before the request's
// deadline.
var ErrBusy = errors.New("rewardserver: every grounding slot stayed busy until the request's deadline")

// Score grounds plan at the step of the group label names and scores it.
// field names the label in the request (for errors). Its errors are a
// *BadRequestError for the request's fault, a *ground.Error for the
// executor's, ErrBusy, or the store's.
func (s *Server) Score(ctx context.Context, field, label, plan string) (Result, error) {
	l, err := trainexport.ParseLabel(label)
	if err != nil {
		return Result{}, badRequest(field, "%v", err)
	}
	if l.Set != s.set {
		return Result{}, badRequest(field, "set %q: this server scores the groups of set %q", l.Set, s.set)
	}
	g, ok := s.groups[l.GroupID]
	if !ok {
		return Result{}, badRequest(field, "group %q is not a group of set %q", l.GroupID, s.set)
	}
	if l.Reference != "" && l.Reference != g.reference {
		return Result{}, badRequest(field, "reference %q differs from the set's %q for group %s", l.Reference, g.reference, l.GroupID)
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return Result{}, ErrBusy
	}
	defer func() { <-s.slots }()
	st, err := s.step(ctx, l.GroupID, g)
	if err != nil {
		return Result{}, err
	}
	c := traj.Candidate{Plan: plan}
	if err := st.ground.Plan(ctx, &c, st.seed(plan)); err != nil {
		return Result{}, err
	}
	r := s.reward.Score(c.Action, st.reference)
	res := Result{Reward: r.Total, TypeMatch: r.TypeMatch, Dist: r.Dist, Unparsed: r.Unparsed, ParseError: c.ParseError, GroupID: l.GroupID}
	if c.Action != nil {
		res.Action = uitars.Format(*c.Action, uitars.DefaultOptions())
	}
	return res, nil
}

// stepCtx is what scoring a plan at one step needs, loaded once.
type stepCtx struct {
	ground    *ground.Step
	reference *traj.Action
	seedBase  *int64
	task      string
	sample    int
	index     int
	plans     []string // the stored candidates' plans
}

// seed is the executor request's seed for plan: the seed rollout's
// request for the first stored candidate with the same plan had (so a
// stored plan is grounded by the same request), else that of the call
// after the step's last candidate, one rollout never made. Nil when the
// run sent no seed.
func (st *stepCtx) seed(plan string) *int64 {
	call := ground.CandidateCall(len(st.plans))
	for j, p := range st.plans {
		if p == plan {
			call = ground.CandidateCall(j)
			break
		}
	}
	return ground.Seed(st.seedBase, st.task, st.sample, st.index, call)
}

// stepEntry is a cache entry, ready once loaded.
type stepEntry struct {
	key   string
	ready chan struct{}
	st    *stepCtx
	err   error
}

// step returns the cached context of g's step, loading it on a miss.
func (s *Server) step(ctx context.Context, id string, g group) (*stepCtx, error) {
	s.mu.Lock()
	if el, ok := s.steps[id]; ok {
		s.lru.MoveToFront(el)
		e := el.Value.(*stepEntry)
		s.mu.Unlock()
		select {
		case <-e.ready:
			return e.st, e.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	e := &stepEntry{key: id, ready: make(chan struct{})}
	s.steps[id] = s.lru.PushFront(e)
	for s.lru.Len() > s.cfg.Steps {
		old := s.lru.Back()
		s.lru.Remove(old)
		delete(s.steps, old.Value.(*stepEntry).key)
	}
	s.mu.Unlock()
	// Loaded for every request that waits for it: not under this one's
	// context, which ends when its client goes away.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Timeout)
	e.st, e.err = s.load(lctx, g)
	cancel()
	close(e.ready)
	if e.err != nil {
		s.mu.Lock()
		if el, ok := s.steps[id]; ok && el.Value == e {
			s.lru.Remove(el)
			delete(s.steps, id)
		}
		s.mu.Unlock()
	}
	return e.st, e.err
}

// screenshot returns the bytes of the step's screenshot: the set's own
// image file when it has one (a portable set), the blob store's otherwise.
func (s *Server) screenshot(ctx context.Context, g group, ref traj.ImageRef) ([]byte, error) {
	if g.shotPath != "" && g.shot == ref.SHA256 {
		return shard.ReadImage(ctx, s.cfg.Bucket, s.cfg.Prefix, shard.Image{SHA256: g.shot, Path: g.shotPath})
	}
	return s.cfg.Store.GetBytes(ctx, ref.SHA256)
}

// load reads g's trajectory from the judged archive and its prompt set
// from the blob store, the step's screenshot from the set (or the store),
// and prepares the grounding.
func (s *Server) load(ctx context.Context, g group) (*stepCtx, error) {
	key := archive.Key(g.run, g.app, g.trajectory, g.judge)
	jd, _, err := archive.Read(ctx, s.cfg.Store.Bucket(), key)
	if err != nil {
		return nil, fmt.Errorf("rewardserver: judged trajectory %s: %w", key, err)
	}
	t := &jd.Trajectory
	if g.step < 0 || g.step >= len(t.Steps) {
		return nil, fmt.Errorf("rewardserver: trajectory %s has no step %d", t.ID, g.step)
	}
	ref := grpo.ExecutedAction(&t.Steps[g.step])
	if ref == nil || uitars.Format(*ref, uitars.DefaultOptions()) != g.reference {
		return nil, fmt.Errorf("rewardserver: trajectory %s step %d: the executed action is not the set's reference %q", t.ID, g.step, g.reference)
	}
	sampling := t.Models.Executor.Sampling
	if sampling == nil {
		return nil, fmt.Errorf("rewardserver: trajectory %s records no executor sampling parameters", t.ID)
	}
	params := model.Params{Sampling: *sampling}
	params.Seed = nil // per call, from the recorded request seed
	ps, err := s.prompts.Of(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("rewardserver: trajectory %s: prompt set: %w", t.ID, err)
	}
	shotRef := t.Steps[g.step].Screenshot
	shot, err := s.screenshot(ctx, g, shotRef)
	if err != nil {
		return nil, fmt.Errorf("rewardserver: trajectory %s step %d: screenshot %s: %w", t.ID, g.step, shotRef.SHA256, err)
	}
	turn, err := prompt.PlannerTurnAt(t, g.step, shotRef)
	if err != nil {
		return nil, fmt.Errorf("rewardserver: %w", err)
	}
	ec := t.Models.Executor.Space()
	if s.cfg.ExecutorCoords != nil {
		ec = *s.cfg.ExecutorCoords
	}
	s.warnOnce(t, ec)
	gs, err := ground.NewStep(ground.StepConfig{
		Executor: s.cfg.Executor, Params: params, Prompts: ps, Data: turn.Data,
		PlannerCoords: uitars.WithDefaults(t.Models.Planner.Space()), ExecutorCoords: uitars.WithDefaults(ec),
		Screen: uitars.Screen{W: shotRef.Width, H: shotRef.Height}, Screenshot: shot,
		Observe: s.cfg.Metrics.executorCall,
	})
	if err != nil {
		return nil, fmt.Errorf("rewardserver: trajectory %s step %d: %w", t.ID, g.step, err)
	}
	st := &stepCtx{ground: gs, reference: ref, seedBase: sampling.Seed, task: t.Task.ID, sample: t.Sample, index: g.step}
	for _, c := range t.Steps[g.step].Candidates {
		st.plans = append(st.plans, c.Plan)
	}
	return st, nil
}

// warnOnce logs, once per executor model and space, that the configured
// executor differs from the one a trajectory recorded: its rewards then
// differ from those advantage wrote.
func (s *Server) warnOnce(t *traj.Trajectory, ec traj.Coords) {
	rec := t.Models.Executor
	if uitars.WithDefaults(rec.Space()) == uitars.WithDefaults(ec) && rec.Model == s.cfg.Executor.Config().Model {
		return
	}
	k := rec.Model + "\x00" + uitars.CoordsString(rec.Space())
	s.mu.Lock()
	seen := s.warned[k]
	s.warned[k] = true
	s.mu.Unlock()
	if !seen {
		s.cfg.Log.Warn("rewardserver: the executor differs from the one the run recorded; rewards will differ from the set's",
			"recorded_model", rec.Model, "recorded_coords", uitars.CoordsString(rec.Space()),
			"model", s.cfg.Executor.Config().Model, "coords", uitars.CoordsString(ec))
	}
}
