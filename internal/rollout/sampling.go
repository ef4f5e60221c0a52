package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/codapipe/codapipe/internal/agent"
	"github.com/codapipe/codapipe/internal/service"
	"github.com/codapipe/codapipe/pkg/traj"
)

// SamplingFile is the JSON file --sampling names: each model kind's
// sampling parameters, in traj.Sampling's JSON form, e.g.
//
//	{"planner": {"temperature": 1, "top_p": 0.9, "top_k": -1, "max_tokens": 1500},
//	 "executor": {"temperature": 0}}
//
// Keys left out keep the defaults (agent.DefaultPlannerSampling,
// agent.DefaultExecutorSampling); flags and their environment variables
// override the file.
type SamplingFile struct {
	Planner  traj.Sampling `json:"planner"`
	Executor traj.Sampling `json:"executor"`
}

// LoadSampling reads a --sampling file over the defaults. An empty path
// gives the defaults.
func LoadSampling(path string) (SamplingFile, error) {
	f := SamplingFile{Planner: agent.DefaultPlannerSampling(), Executor: agent.DefaultExecutorSampling()}
	if path == "" {
		return f, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return f, fmt.Errorf("--sampling: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("--sampling %s: %w (want {\"planner\":{...},\"executor\":{...}} with traj.Sampling keys: temperature, top_p, top_k, min_p, repetition_penalty, presence_penalty, frequency_penalty, max_tokens, seed, stop)", path, err)
	}
	return f, nil
}

// samplingFlags are one model kind's sampling flags (--planner-top-k,
// ...), each with its CODAPIPE_PLANNER_TOP_K-style variable.
type samplingFlags struct {
	kind string // "planner" or "executor"
	v    traj.Sampling
	seed int64
}

// samplingParams are the flag name suffix, the traj.Sampling JSON key and
// the help text of each sampling flag.
var samplingParams = []struct{ flag, key, help string }{
	{"temperature", "temperature", "sampling temperature, >= 0 (0 is greedy)"},
	{"top-p", "top_p", "top_p in (0,1] (1: off)"},
	{"top-k", "top_k", "top_k: -1 or 0 off, 1 greedy, else the K likeliest tokens"},
	{"min-p", "min_p", "min_p in [0,1] (0: off)"},
	{"repetition-penalty", "repetition_penalty", "repetition_penalty, > 0 (1: off)"},
	{"presence-penalty", "presence_penalty", "presence_penalty in [-2,2] (0: off)"},
	{"frequency-penalty", "frequency_penalty", "frequency_penalty in [-2,2] (0: off)"},
	{"max-tokens", "max_tokens", "most tokens of one answer, > 0"},
	{"seed", "seed", "seed when --seed is not set (0: none)"},
	{"stop", "stop", "stop string"},
}

func (sf *samplingFlags) register(fs *service.Flags, def traj.Sampling) {
	name := func(p string) string { return sf.kind + "-" + p }
	env := func(p string) string {
		return "CODAPIPE_" + strings.ToUpper(strings.ReplaceAll(sf.kind+"_"+p, "-", "_"))
	}
	help := func(i int) string {
		return sf.kind + " " + samplingParams[i].help + "; sent with every request (overrides --sampling)"
	}
	fs.Float64(&sf.v.Temperature, name("temperature"), env("temperature"), def.Temperature, help(0))
	fs.Float64(&sf.v.TopP, name("top-p"), env("top-p"), def.TopP, help(1))
	fs.Int(&sf.v.TopK, name("top-k"), env("top-k"), def.TopK, help(2))
	fs.Float64(&sf.v.MinP, name("min-p"), env("min-p"), def.MinP, help(3))
	fs.Float64(&sf.v.RepetitionPenalty, name("repetition-penalty"), env("repetition-penalty"), def.RepetitionPenalty, help(4))
	fs.Float64(&sf.v.PresencePenalty, name("presence-penalty"), env("presence-penalty"), def.PresencePenalty, help(5))
	fs.Float64(&sf.v.FrequencyPenalty, name("frequency-penalty"), env("frequency-penalty"), def.FrequencyPenalty, help(6))
	fs.Int(&sf.v.MaxTokens, name("max-tokens"), env("max-tokens"), def.MaxTokens, help(7))
	fs.Int64(&sf.seed, name("seed"), env("seed"), 0, help(8))
	fs.Strings(&sf.v.Stop, name("stop"), env("stop"), help(9))
}

// over returns base with every flag that was given (on the command line
// or by its variable) applied, checked: an invalid value is an error
// naming the flag, the file key and the expected range.
func (sf *samplingFlags) over(fs *service.Flags, base traj.Sampling) (traj.Sampling, error) {
	s := base
	given := func(p string) bool { return fs.Given(sf.kind + "-" + p) }
	if given("temperature") {
		s.Temperature = sf.v.Temperature
	}
	if given("top-p") {
		s.TopP = sf.v.TopP
	}
	if given("top-k") {
		s.TopK = sf.v.TopK
	}
	if given("min-p") {
		s.MinP = sf.v.MinP
	}
	if given("repetition-penalty") {
		s.RepetitionPenalty = sf.v.RepetitionPenalty
	}
	if given("presence-penalty") {
		s.PresencePenalty = sf.v.PresencePenalty
	}
	if given("frequency-penalty") {
		s.FrequencyPenalty = sf.v.FrequencyPenalty
	}
	if given("max-tokens") {
		s.MaxTokens = sf.v.MaxTokens
	}
	if given("seed") {
		s.Seed = nil
		if sf.seed != 0 {
			v := sf.seed
			s.Seed = &v
		}
	}
	if given("stop") {
		s.Stop = append([]string(nil), sf.v.Stop...)
	}
	if err := s.Check(); err != nil {
		return s, service.Usage(fmt.Errorf("%s: %w", sf.where(err), err))
	}
	return s, nil
}

// where names the flag and the --sampling key of the parameter a
// traj.Sampling.Check error is about.
func (sf *samplingFlags) where(err error) string {
	key, _, _ := strings.Cut(strings.TrimPrefix(err.Error(), "sampling: "), " ")
	key, _, _ = strings.Cut(key, "[")
	for _, p := range samplingParams {
		if p.key == key {
			return fmt.Sprintf("--%s-%s (or %s.%s in --sampling)", sf.kind, p.flag, sf.kind, p.key)
		}
	}
	return "--" + sf.kind + "-*"
}
