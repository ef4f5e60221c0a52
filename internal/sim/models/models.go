// Package models is part of codapipe's SIMULATOR (see package sim):
// OpenAI-compatible planner, executor and judge endpoints whose models are
// named "sim-*".
//
// The three endpoints speak the chat-completions wire format of vLLM's
// OpenAI-compatible server (POST /v1/chat/completions, GET /v1/models) so
// that codapipe's real model clients talk to them unchanged. What they
// answer is drawn from the simulated world (tasks with hidden oracle plans,
// UI elements, the state chunk of each screenshot) with tunable skill,
// grounding noise and judge rates. docs/simulator.md ("Model endpoints")
// describes the behaviour and the prompt expectations.
package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/sim/fault"
	"github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
)

// Default model ids and settings of the simulated endpoints.
const (
	DefaultPlannerModel  = "sim-planner"
	DefaultExecutorModel = "sim-executor"
	DefaultJudgeModel    = "sim-judge"

	// DefaultPlannerCheckpoint is the simulated planner's checkpoint tag:
	// the "root" its GET /v1/models reports, which sim runs record.
	DefaultPlannerCheckpoint = "sim-step-0"

	// DefaultCreated is the "created" time (Unix seconds) every
	// response reports unless Config.Created is set: the simulated
	// clock of the endpoints is fixed so that responses are byte-identical
	// across runs. 2025-01-01T00:00:00Z.
	DefaultCreated int64 = 1735689600

	// DefaultMaxRequestBytes bounds a request body (a judge request with
	// 30 full-size screenshots is about 10 MB).
	DefaultMaxRequestBytes int64 = 128 << 20

	// GreedyTemperature: a request temperature at or below this value is
	// greedy decoding (see docs/simulator.md).
	GreedyTemperature = 1e-3

	// MaxChoices is the largest n a request may ask for.
	MaxChoices = 128
)

// Config configures the three simulated model endpoints. Start from
// DefaultConfig (or decode a JSON file over it): zero values are
// taken literally (a DefaultSkill of 0 is a planner that is always wrong),
// except empty model ids, Created 0 and MaxRequestBytes 0, which mean the
// defaults.
type Config struct {
	// Seed makes every draw reproducible: same seed, configuration and
	// requests ⇒ byte-identical responses.
	Seed int64 `json:"seed"`
	// Clock scales the simulated latencies (and HangFor) to wall time.
	Clock fault.Clock `json:"clock"`
	// Created is the Unix time reported as "created" (0: DefaultCreated).
	Created int64 `json:"created,omitempty"`
	// MaxRequestBytes bounds request bodies (0: DefaultMaxRequestBytes).
	MaxRequestBytes int64 `json:"max_request_bytes,omitempty"`

	Planner  PlannerConfig  `json:"planner"`
	Executor ExecutorConfig `json:"executor"`
	Judge    JudgeConfig    `json:"judge"`

	// OnRequest, when set, is called with the endpoint kind ("planner",
	// "executor" or "judge") and the raw body of every chat request
	// before it is answered (tests check what clients send). The body is
	// only valid during the call: copy what is kept. Not part of the JSON
	// form.
	OnRequest func(kind string, body []byte) `json:"-"`
}

// EndpointConfig is what every simulated endpoint has.
type EndpointConfig struct {
	// Model is the model id the endpoint serves and reports.
	Model string `json:"model,omitempty"`
	// Root is what GET /v1/models reports as the model's "root" — for
	// vLLM the folder the weights were loaded from, which rollout records
	// as the planner's checkpoint tag (empty: the model id; the planner's
	// default is DefaultPlannerCheckpoint).
	Root string `json:"root,omitempty"`
	// Faults: latency per call, hangs, HTTP 500s and malformed answers.
	Faults fault.Faults `json:"faults"`
	// IgnoreN makes the endpoint answer one choice whatever "n" asks, as
	// some OpenAI-compatible servers do (clients must fall back to n
	// requests).
	IgnoreN bool `json:"ignore_n,omitempty"`
	// Generation is the model's generation config: the values of the
	// sampling parameters a request leaves out, as vLLM takes them from
	// the model's generation_config.json (its default --generation-config
	// auto). Nil (or JSON null) leaves nothing to fill: an omitted
	// parameter is then neutral (temperature 1, top_k off).
	Generation *GenerationConfig `json:"generation_config,omitempty"`
	// MaxModelLen, when > 0, is the model's context length: a request
	// whose prompt tokens plus max_tokens exceed it is answered 400 with
	// vLLM's context-length message. 0 (the default) is unlimited.
	MaxModelLen int `json:"max_model_len,omitempty"`
	// Replay, when set, makes the endpoint answer with recorded texts
	// instead of its model: each answer is the Answer of the first entry
	// whose Match occurs in the request's user text (an empty Match
	// matches every request; a request no entry matches is answered by
	// the model). The texts go through the protocol as generated ones do:
	// tokens, stop sequences, max_tokens truncation (finish_reason
	// "length"). For replaying what real judges wrote for other prompt
	// sets through an OpenAI-compatible endpoint.
	Replay []Replay `json:"replay,omitempty"`
}

// Replay is one recorded answer (EndpointConfig.Replay).
type Replay struct {
	Match  string `json:"match"`
	Answer string `json:"answer"`
}

// GenerationConfig are a model's default sampling parameters (the
// sampling keys of a Hugging Face generation_config.json); nil fields are
// not set.
type GenerationConfig struct {
	Temperature       *float64 `json:"temperature,omitempty"`
	TopP              *float64 `json:"top_p,omitempty"`
	TopK              *int     `json:"top_k,omitempty"`
	MinP              *float64 `json:"min_p,omitempty"`
	RepetitionPenalty *float64 `json:"repetition_penalty,omitempty"`
}

// QwenVLGenerationConfig is the simulated planner's generation config,
// the sampling keys of Qwen2.5-VL-7B-Instruct's generation_config.json:
// top_k 1 (greedy whatever the temperature), temperature 1e-06,
// repetition_penalty 1.05. A planner request that leaves top_k out
// therefore gets G+1 identical plans, as from vLLM.
func QwenVLGenerationConfig() *GenerationConfig {
	k, t, rp := 1, 1e-6, 1.05
	return &GenerationConfig{TopK: &k, Temperature: &t, RepetitionPenalty: &rp}
}

// PlannerConfig configures the simulated planner.
type PlannerConfig struct {
	EndpointConfig
	// Skill is, per app, the probability (at temperature 1) that a plan is
	// the next step of the task's oracle plan. Apps not listed use
	// DefaultSkill.
	Skill map[string]float64 `json:"skill,omitempty"`
	// DefaultSkill is the skill for apps not in Skill and for unknown tasks.
	DefaultSkill float64 `json:"default_skill"`
	// Coords is the coordinate space the planner writes its actions in;
	// zero means grid1000 (CODA's planner prompts).
	Coords traj.Coords `json:"coords,omitzero"`
}

// ExecutorConfig configures the simulated executor (grounding model).
type ExecutorConfig struct {
	EndpointConfig
	// GroundingNoise is the standard deviation, in screen pixels, of the
	// Gaussian noise added to an element's centre on each axis. The point
	// may leave the element's box: that is what makes grounding imperfect.
	GroundingNoise float64 `json:"grounding_noise"`
	// MisgroundRate is the probability (at temperature 1) that a thought
	// naming an element is grounded on another element of the same app.
	MisgroundRate float64 `json:"misground_rate"`
	// Coords is the coordinate space the executor answers in; zero means
	// pixels-resized (UI-TARS-1.5, the executor codapipe's docs
	// recommend). Setting it to another space than the client parses in
	// simulates a misconfigured executor.
	Coords traj.Coords `json:"coords,omitzero"`
}

// JudgeRates are the judge's verdict rates.
type JudgeRates struct {
	// Recall is P(Correctness = true | the trajectory truly succeeded).
	Recall float64 `json:"recall"`
	// FalsePositiveRate is P(Correctness = true | it truly failed).
	FalsePositiveRate float64 `json:"false_positive_rate"`
}

// Precision returns the precision of one vote at the given base rate
// (the fraction of trajectories that truly succeed):
//
//	precision = Recall·b / (Recall·b + FalsePositiveRate·(1−b))
//
// It returns NaN when no vote can be positive.
func (r JudgeRates) Precision(baseRate float64) float64 {
	tp := r.Recall * baseRate
	fp := r.FalsePositiveRate * (1 - baseRate)
	if tp+fp == 0 {
		return math.NaN()
	}
	return tp / (tp + fp)
}

// VoteModel is the error model of one simulated judge model: how its
// votes on one trajectory come out (docs/judge.md, "The simulated
// judge's calibration").
type VoteModel struct {
	// Rates at full resolution (temperature 1).
	JudgeRates
	// LowRes, when set, replaces the rates for requests whose images are
	// all narrower than the simulated screen (a low-resolution pass). A
	// low-resolution vote draws on its own, never from the trajectory's
	// shared draw: it sees other pixels than the full-resolution votes.
	LowRes *JudgeRates `json:"low_res,omitempty"`
	// VoteCorrelation in [0,1]: the probability that this model judges a
	// trajectory that truly succeeded consistently: every
	// full-resolution vote of it on the same trajectory (same
	// instruction, states and answer) then takes one shared draw, so all
	// say the same; otherwise its votes there are independent. The same
	// for failures unless FailureVoteCorrelation is set. 0 makes votes
	// independent; the marginal rates are Recall and FalsePositiveRate
	// either way.
	VoteCorrelation float64 `json:"vote_correlation,omitempty"`
	// FailureVoteCorrelation, when set, is VoteCorrelation for
	// trajectories that truly failed.
	FailureVoteCorrelation *float64 `json:"failure_vote_correlation,omitempty"`
}

// Correlation is the vote correlation for a trajectory whose truth is
// success.
func (v VoteModel) Correlation(success bool) float64 {
	if !success && v.FailureVoteCorrelation != nil {
		return *v.FailureVoteCorrelation
	}
	return v.VoteCorrelation
}

// SharedDraw are the uniform draws a judge model shares between its
// votes on one trajectory: whether it judges the trajectory consistently
// (Consistent < VoteModel.Correlation) and then the one verdict draw all
// its full-resolution votes take.
type SharedDraw struct{ Consistent, Verdict float64 }

// Yes decides one vote: whether it says Correctness. success is the
// truth, lowRes whether the vote sees low-resolution frames, shared the
// model's shared draws on the trajectory, u the vote's own uniform draw,
// temp the sampling temperature. The simulated endpoint and the
// calibration benchmark decide votes with it.
func (v VoteModel) Yes(success, lowRes bool, shared SharedDraw, u, temp float64) bool {
	rates := v.JudgeRates
	switch {
	case lowRes: // never the shared draw
		if v.LowRes != nil {
			rates = *v.LowRes
		}
	case shared.Consistent < v.Correlation(success):
		u = shared.Verdict
	}
	p := rates.FalsePositiveRate
	if success {
		p = rates.Recall
	}
	return u < temper(p, temp)
}

func (v VoteModel) check(name string, add func(error)) {
	add(checkProb(name+".recall", v.Recall))
	add(checkProb(name+".false_positive_rate", v.FalsePositiveRate))
	if v.LowRes != nil {
		add(checkProb(name+".low_res.recall", v.LowRes.Recall))
		add(checkProb(name+".low_res.false_positive_rate", v.LowRes.FalsePositiveRate))
	}
	add(checkProb(name+".vote_correlation", v.VoteCorrelation))
	if v.FailureVoteCorrelation != nil {
		add(checkProb(name+".failure_vote_correlation", *v.FailureVoteCorrelation))
	}
}

// unsetFailureCorrelation clears v's FailureVoteCorrelation when the JSON
// object b sets vote_correlation but not failure_vote_correlation: a
// configuration that gives one correlation means it for both classes,
// whatever the defaults it is decoded over had.
func unsetFailureCorrelation(b []byte, v *VoteModel) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	_, vc := keys["vote_correlation"]
	_, fc := keys["failure_vote_correlation"]
	if vc && !fc {
		v.FailureVoteCorrelation = nil
	}
	return nil
}

// UnmarshalJSON decodes s over its current value, with
// unsetFailureCorrelation's rule.
func (s *SecondJudge) UnmarshalJSON(b []byte) error {
	type plain SecondJudge
	if err := json.Unmarshal(b, (*plain)(s)); err != nil {
		return err
	}
	return unsetFailureCorrelation(b, &s.VoteModel)
}

// UnmarshalJSON decodes c over its current value, with
// unsetFailureCorrelation's rule.
func (c *JudgeConfig) UnmarshalJSON(b []byte) error {
	type plain JudgeConfig
	if err := json.Unmarshal(b, (*plain)(c)); err != nil {
		return err
	}
	return unsetFailureCorrelation(b, &c.VoteModel)
}

// SecondJudge is a second judge model served by the simulated judge
// endpoint beside the first (an ensemble's other model): its own error
// model, its votes independent of the first model's.
type SecondJudge struct {
	// Model is its model id (not the first model's).
	Model string `json:"model"`
	VoteModel
}

// JudgeConfig configures the simulated judge.
type JudgeConfig struct {
	EndpointConfig
	// The first model's error model (its id is EndpointConfig.Model).
	VoteModel
	// Second, when set, is a second model the endpoint serves (a request
	// names it in "model"); nil serves one model.
	Second *SecondJudge `json:"second,omitempty"`
	// Truth decides what truly happened in a trajectory. Nil uses
	// StateTruth (see truth.go). Not part of the JSON form.
	Truth TruthFunc `json:"-"`
}

// The calibrated simulated judge (docs/judge.md, "The simulated judge's
// calibration"): fitted to CODA's Table 2 (377 ScienceBoard trajectories
// judged by Qwen2.5-VL-72B, precision/recall single 41.5/80.1, voting@4
// 58.6/75.3, voting@4 + multi-resolution 65.7/77.9, voting@4 ensemble
// 69.5/74.2) at a true success rate of CalibrationBaseRate.
const (
	// CalibrationBaseRate is the true success rate the fit assumes: CODA's
	// stage-1 specialists' Average@8 on ScienceBoard, 14.39 %, rounded.
	CalibrationBaseRate = 0.15
	// DefaultSecondJudgeModel is the id of the calibrated second model.
	DefaultSecondJudgeModel = "sim-judge-b"
)

// CalibratedJudge returns the calibrated error models of the first and
// the second judge model.
func CalibratedJudge() (first VoteModel, second SecondJudge) {
	fA, fB := 0.467, 0.467
	first = VoteModel{
		JudgeRates:             JudgeRates{Recall: 0.801, FalsePositiveRate: 0.1993},
		LowRes:                 &JudgeRates{Recall: 1, FalsePositiveRate: 0.726},
		VoteCorrelation:        0.877,
		FailureVoteCorrelation: &fA,
	}
	second = SecondJudge{Model: DefaultSecondJudgeModel, VoteModel: VoteModel{
		JudgeRates:             JudgeRates{Recall: 0.955, FalsePositiveRate: 0.625},
		VoteCorrelation:        0.877,
		FailureVoteCorrelation: &fB,
	}}
	return first, second
}

// DefaultConfig returns the default configuration: planner skill
// 0.6 on every app, grounding noise 8 px with 5 % misgrounding, the
// calibrated judge (CalibratedJudge: one vote's recall 0.80 and
// false-positive rate 0.20, precision 41.5 % at a 15 % base rate as
// CODA's single 72B judge, with its second model), no faults and real
// time.
func DefaultConfig() Config {
	first, second := CalibratedJudge()
	return Config{
		Seed:            1,
		Clock:           fault.Clock{Scale: 1},
		Created:         DefaultCreated,
		MaxRequestBytes: DefaultMaxRequestBytes,
		Planner: PlannerConfig{
			EndpointConfig: EndpointConfig{Model: DefaultPlannerModel, Root: DefaultPlannerCheckpoint, Generation: QwenVLGenerationConfig()},
			DefaultSkill:   0.6,
		},
		Executor: ExecutorConfig{
			EndpointConfig: EndpointConfig{Model: DefaultExecutorModel},
			GroundingNoise: 8,
			MisgroundRate:  0.05,
		},
		Judge: JudgeConfig{
			EndpointConfig: EndpointConfig{Model: DefaultJudgeModel},
			VoteModel:      first,
			Second:         &second,
		},
	}
}

func checkProb(name string, p float64) error {
	if !(p >= 0 && p <= 1) {
		return fmt.Errorf("%s = %v, want a probability in [0,1]", name, p)
	}
	return nil
}

// Validate reports every setting that cannot be used, naming it as in the
// JSON form.
func (c Config) Validate() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if c.Clock.Scale < 0 || math.IsNaN(c.Clock.Scale) || math.IsInf(c.Clock.Scale, 0) {
		add(fmt.Errorf("clock.scale = %v, want a finite number >= 0", c.Clock.Scale))
	}
	if c.MaxRequestBytes < 0 {
		add(fmt.Errorf("max_request_bytes = %d, want >= 0 (0: default)", c.MaxRequestBytes))
	}
	models := map[string]string{}
	for _, e := range []struct {
		name string
		ep   EndpointConfig
	}{{"planner", c.Planner.EndpointConfig}, {"executor", c.Executor.EndpointConfig}, {"judge", c.Judge.EndpointConfig}} {
		if err := e.ep.Faults.Validate(); err != nil {
			add(fmt.Errorf("%s.%w", e.name, err))
		}
		if e.ep.Faults.HangFor < 0 {
			add(fmt.Errorf("%s.faults.hang_for = %v, want >= 0", e.name, e.ep.Faults.HangFor))
		}
		if p := e.ep.Faults.HangProb + e.ep.Faults.ErrorProb; p > 1 {
			add(fmt.Errorf("%s.faults: hang_prob + error_prob = %v, want <= 1", e.name, p))
		}
		if e.ep.MaxModelLen < 0 {
			add(fmt.Errorf("%s.max_model_len = %d, want >= 0 (0: unlimited)", e.name, e.ep.MaxModelLen))
		}
		if g := e.ep.Generation; g != nil {
			if g.Temperature != nil && !(*g.Temperature >= 0 && *g.Temperature <= 2) {
				add(fmt.Errorf("%s.generation_config.temperature = %v, want [0,2]", e.name, *g.Temperature))
			}
			if g.TopP != nil && !(*g.TopP > 0 && *g.TopP <= 1) {
				add(fmt.Errorf("%s.generation_config.top_p = %v, want (0,1]", e.name, *g.TopP))
			}
			if g.TopK != nil && *g.TopK < -1 {
				add(fmt.Errorf("%s.generation_config.top_k = %d, want -1, 0 or a positive count", e.name, *g.TopK))
			}
		}
		if e.ep.Model != "" {
			if other, dup := models[e.ep.Model]; dup {
				add(fmt.Errorf("%s.model %q is also %s.model; the three endpoints need distinct model ids", e.name, e.ep.Model, other))
			}
			models[e.ep.Model] = e.name
		}
	}
	add(checkProb("planner.default_skill", c.Planner.DefaultSkill))
	apps := make([]string, 0, len(c.Planner.Skill))
	for app := range c.Planner.Skill {
		apps = append(apps, app)
	}
	sort.Strings(apps)
	for _, app := range apps {
		add(checkProb(fmt.Sprintf("planner.skill[%q]", app), c.Planner.Skill[app]))
	}
	if g := c.Executor.GroundingNoise; !(g >= 0) || math.IsInf(g, 0) {
		add(fmt.Errorf("executor.grounding_noise = %v, want a finite number of pixels >= 0", g))
	}
	add(checkProb("executor.misground_rate", c.Executor.MisgroundRate))
	for _, e := range []struct {
		name string
		c    traj.Coords
	}{{"planner.coords", c.Planner.Coords}, {"executor.coords", c.Executor.Coords}} {
		if e.c != (traj.Coords{}) {
			if _, err := newSpace(e.c); err != nil {
				add(fmt.Errorf("%s: %w", e.name, err))
			}
		}
	}
	c.Judge.VoteModel.check("judge", add)
	if s := c.Judge.Second; s != nil {
		s.VoteModel.check("judge.second", add)
		if m := s.Model; m == "" || m == c.Judge.Model || (c.Judge.Model == "" && m == DefaultJudgeModel) {
			add(fmt.Errorf("judge.second.model = %q, want a model id other than the first model's", m))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("sim: invalid models config: %w", errors.Join(errs...))
}

// withDefaults fills the settings whose zero value means "default".
func (c Config) withDefaults() Config {
	if c.Created == 0 {
		c.Created = DefaultCreated
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.Planner.Model == "" {
		c.Planner.Model = DefaultPlannerModel
	}
	if c.Planner.Root == "" {
		c.Planner.Root = DefaultPlannerCheckpoint
	}
	if c.Executor.Model == "" {
		c.Executor.Model = DefaultExecutorModel
	}
	if c.Judge.Model == "" {
		c.Judge.Model = DefaultJudgeModel
	}
	if s := c.Judge.Second; s != nil { // a copy: the endpoint keeps reading it
		cp := *s
		c.Judge.Second = &cp
	}
	if c.Judge.Truth == nil {
		c.Judge.Truth = StateTruth
	}
	if c.Planner.Coords == (traj.Coords{}) {
		c.Planner.Coords = uitars.Grid()
	}
	if c.Executor.Coords == (traj.Coords{}) {
		c.Executor.Coords = uitars.Resized()
	}
	c.Planner.Coords = uitars.WithDefaults(c.Planner.Coords)
	c.Executor.Coords = uitars.WithDefaults(c.Executor.Coords)
	// Copy the map so later changes by the caller do not race with serving.
	if c.Planner.Skill != nil {
		m := make(map[string]float64, len(c.Planner.Skill))
		for k, v := range c.Planner.Skill {
			m[k] = v
		}
		c.Planner.Skill = m
	}
	return c
}

// Endpoints are the simulated planner, executor and judge endpoints.
// Their handlers are safe for concurrent use.
type Endpoints struct {
	cfg   Config
	world modelWorld
	// planSpace and execSpace are the coordinate spaces the planner and
	// the executor write points in.
	planSpace, execSpace space
	planner              *endpoint
	executor             *endpoint
	judge                *endpoint
}

// New validates cfg and builds the three endpoints on the simulated
// world (the simulator's tasks and apps: packages tasks and desktop).
func New(cfg Config) (*Endpoints, error) {
	if _, err := tasks.All(); err != nil {
		return nil, fmt.Errorf("sim: models: %w", err)
	}
	return newEndpoints(cfg, packageWorld{})
}

func newEndpoints(cfg Config, w modelWorld) (*Endpoints, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m := &Endpoints{cfg: cfg, world: w}
	var err error
	if m.planSpace, err = newSpace(cfg.Planner.Coords); err != nil {
		return nil, fmt.Errorf("sim: models: planner.coords: %w", err)
	}
	if m.execSpace, err = newSpace(cfg.Executor.Coords); err != nil {
		return nil, fmt.Errorf("sim: models: executor.coords: %w", err)
	}
	m.planner = newEndpoint(m, "planner", cfg.Planner.EndpointConfig, m.plan)
	m.executor = newEndpoint(m, "executor", cfg.Executor.EndpointConfig, m.ground)
	m.judge = newEndpoint(m, "judge", cfg.Judge.EndpointConfig, m.judgeAnswer)
	if s := cfg.Judge.Second; s != nil {
		m.judge.others = []string{s.Model}
	}
	return m, nil
}

// Config returns the effective configuration (defaults filled in).
func (m *Endpoints) Config() Config {
	c := m.cfg
	if c.Planner.Skill != nil { // a copy: the endpoints keep reading theirs
		c.Planner.Skill = make(map[string]float64, len(m.cfg.Planner.Skill))
		for k, v := range m.cfg.Planner.Skill {
			c.Planner.Skill[k] = v
		}
	}
	return c
}

// Planner returns the planner endpoint's handler. It serves
// POST /v1/chat/completions, GET /v1/models and GET /health.
func (m *Endpoints) Planner() http.Handler { return m.planner }

// Executor returns the executor endpoint's handler.
func (m *Endpoints) Executor() http.Handler { return m.executor }

// Answered returns, for the endpoint of kind "planner", "executor" or
// "judge", the OpenAI "user" field of every call it has answered so far,
// in order (a client tags its calls there to count them: a test that kills
// a client checks no answered call is made again). Calls that failed by an
// injected fault or whose client left are not listed.
func (m *Endpoints) Answered(kind string) []string {
	switch kind {
	case "planner":
		return m.planner.calls()
	case "executor":
		return m.executor.calls()
	case "judge":
		return m.judge.calls()
	}
	return nil
}

// Judge returns the judge endpoint's handler.
func (m *Endpoints) Judge() http.Handler { return m.judge }

// Servers are the three endpoints served on loopback by Start.
type Servers struct {
	// Base URLs for OpenAI clients, e.g. "http://127.0.0.1:41234/v1".
	PlannerURL  string
	ExecutorURL string
	JudgeURL    string

	done chan struct{}
}

// Done is closed when all three servers have stopped (after Start's
// context ended).
func (s *Servers) Done() <-chan struct{} { return s.done }

// Wait blocks until all three servers have stopped.
func (s *Servers) Wait() { <-s.done }

// freshConns are a server's connections that have not sent a request
// yet: an HTTP client dials connections ahead of its requests, and
// http.Server.Shutdown counts such a connection as busy for its first 5
// seconds, so that every stop of a simulated endpoint took 5 s. Shutdown
// closes them first, as it closes idle ones.
type freshConns struct {
	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool // close ran: a connection accepted since is closed at once
}

func (f *freshConns) track(c net.Conn, st http.ConnState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		f.conns = map[net.Conn]bool{}
	}
	switch {
	case st == http.StateNew && f.closed:
		_ = c.Close()
	case st == http.StateNew:
		f.conns[c] = true
	default:
		delete(f.conns, c)
	}
}

func (f *freshConns) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for c := range f.conns {
		_ = c.Close()
	}
}

// ShutdownGrace is how long Start's servers wait for calls in flight
// after the context ends before closing their connections.
const ShutdownGrace = 5 * time.Second

// Start serves the three endpoints, each on its own listener on
// 127.0.0.1 with an ephemeral port, until ctx ends. Calls in flight when
// ctx ends (including hung ones) see their request context cancelled.
// Every goroutine Start creates has ended when Done is closed.
func (m *Endpoints) Start(ctx context.Context) (*Servers, error) {
	handlers := []http.Handler{m.planner, m.executor, m.judge}
	lns := make([]net.Listener, 0, len(handlers))
	for range handlers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("sim: models: listen: %w", err)
		}
		lns = append(lns, ln)
	}
	s := &Servers{done: make(chan struct{})}
	urls := make([]string, len(lns))
	var wg sync.WaitGroup
	for i, ln := range lns {
		urls[i] = "http://" + ln.Addr().String() + "/v1"
		srv := &http.Server{
			Handler:           handlers[i],
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       2 * time.Minute,
			WriteTimeout:      30 * time.Minute, // simulated latencies may be long at Clock.Scale 1
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    1 << 20,
			BaseContext:       func(net.Listener) context.Context { return ctx },
		}
		fresh := freshConns{}
		srv.ConnState = fresh.track
		wg.Add(2)
		go func() {
			defer wg.Done()
			_ = srv.Serve(ln) // returns http.ErrServerClosed after Shutdown
		}()
		go func() {
			defer wg.Done()
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
			defer cancel()
			fresh.close()
			if err := srv.Shutdown(sctx); err != nil {
				_ = srv.Close()
			}
		}()
	}
	s.PlannerURL, s.ExecutorURL, s.JudgeURL = urls[0], urls[1], urls[2]
	go func() {
		wg.Wait()
		close(s.done)
	}()
	return s, nil
}
