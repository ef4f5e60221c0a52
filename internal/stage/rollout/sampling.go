package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/agent"
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

// samplingParams are the flag name suffix, the traj.Sampling JSON key, the
// help text and the traj.Sampling field of each sampling flag (a pointer to
// it in s; nil for the seed, which the flags keep apart: 0 is none).
var samplingParams = []struct {
	flag, key, help string
	field           func(s *traj.Sampling) any
}{
	{"temperature", "temperature", "sampling temperature, >= 0 (0 is greedy)", func(s *traj.Sampling) any { return &s.Temperature }},
	{"top-p", "top_p", "top_p in (0,1] (1: off)", func(s *traj.Sampling) any { return &s.TopP }},
	{"top-k", "top_k", "top_k: -1 or 0 off, 1 greedy, else the K likeliest tokens", func(s *traj.Sampling) any { return &s.TopK }},
	{"min-p", "min_p", "min_p in [0,1] (0: off)", func(s *traj.Sampling) any { return &s.MinP }},
	{"repetition-penalty", "repetition_penalty", "repetition_penalty, > 0 (1: off)", func(s *traj.Sampling) any { return &s.RepetitionPenalty }},
	{"presence-penalty", "presence_penalty", "presence_penalty in [-2,2] (0: off)", func(s *traj.Sampling) any { return &s.PresencePenalty }},
	{"frequency-penalty", "frequency_penalty", "frequency_penalty in [-2,2] (0: off)", func(s *traj.Sampling) any { return &s.FrequencyPenalty }},
	{"max-tokens", "max_tokens", "most tokens of one answer, > 0", func(s *traj.Sampling) any { return &s.MaxTokens }},
	{"seed", "seed", "seed when --seed is not set (0: none)", nil},
	{"stop", "stop", "stop string", func(s *traj.Sampling) any { return &s.Stop }},
}

func (sf *samplingFlags) register(fs *service.Flags, def traj.Sampling) {
	for _, p := range samplingParams {
		name := sf.kind + "-" + p.flag
		env := "CODAPIPE_" + strings.ToUpper(strings.ReplaceAll(sf.kind+"_"+p.flag, "-", "_"))
		help := sf.kind + " " + p.help + "; sent with every request (overrides --sampling)"
		if p.field == nil {
			fs.Int64(&sf.seed, name, env, 0, help)
			continue
		}
		switch v := p.field(&sf.v).(type) {
		case *float64:
			fs.Float64(v, name, env, *p.field(&def).(*float64), help)
		case *int:
			fs.Int(v, name, env, *p.field(&def).(*int), help)
		case *[]string:
			fs.Strings(v, name, env, help)
		default:
			panic(fmt.Sprintf("rollout: sampling parameter %s has a field of type %T, which has no flag kind", p.flag, v))
		}
	}
}

// over returns base with every flag that was given (on the command line
// or by its variable) applied, checked: an invalid value is an error
// naming the flag, the file key and the expected range.
func (sf *samplingFlags) over(fs *service.Flags, base traj.Sampling) (traj.Sampling, error) {
	s := base
	for _, p := range samplingParams {
		if !fs.Given(sf.kind + "-" + p.flag) {
			continue
		}
		if p.field == nil {
			s.Seed = nil
			if sf.seed != 0 {
				v := sf.seed
				s.Seed = &v
			}
			continue
		}
		switch dst := p.field(&s).(type) {
		case *float64:
			*dst = *p.field(&sf.v).(*float64)
		case *int:
			*dst = *p.field(&sf.v).(*int)
		case *[]string:
			*dst = append([]string(nil), *p.field(&sf.v).(*[]string)...)
		default:
			panic(fmt.Sprintf("rollout: sampling parameter %s has a field of type %T, which has no flag kind", p.flag, dst))
		}
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
