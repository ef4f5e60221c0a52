package rollout

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/agent"
	"github.com/codapipe/codapipe/pkg/traj"
)

// TestSamplingFlags: the planner's and executor's sampling come from the
// defaults, then the --sampling file, then the environment, then the
// flags; an invalid value is refused naming the flag, the file key and
// the expected range.
func TestSamplingFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "sampling.json")
	if err := os.WriteFile(file, []byte(`{"planner":{"top_k":50,"temperature":0.7,"stop":["\nObs"]},"executor":{"max_tokens":128}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	defP, defE := agent.DefaultPlannerSampling(), agent.DefaultExecutorSampling()
	seed := int64(9)
	for _, tc := range []struct {
		name    string
		file    string
		env     map[string]string
		args    []string
		planner func(*traj.Sampling)
		exec    func(*traj.Sampling)
		err     string
	}{
		{name: "defaults"},
		{name: "file", file: file,
			planner: func(s *traj.Sampling) { s.TopK, s.Temperature, s.Stop = 50, 0.7, []string{"\nObs"} },
			exec:    func(s *traj.Sampling) { s.MaxTokens = 128 }},
		{name: "env over file", file: file, env: map[string]string{"CODAPIPE_PLANNER_TOP_K": "20", "CODAPIPE_EXECUTOR_TEMPERATURE": "0.5"},
			planner: func(s *traj.Sampling) { s.TopK, s.Temperature, s.Stop = 20, 0.7, []string{"\nObs"} },
			exec:    func(s *traj.Sampling) { s.MaxTokens, s.Temperature = 128, 0.5 }},
		{name: "flags over env and file", file: file, env: map[string]string{"CODAPIPE_PLANNER_TOP_K": "20"},
			args: []string{"--planner-top-k", "1", "--planner-temperature", "0", "--planner-min-p", "0.05", "--planner-repetition-penalty", "1.1",
				"--planner-presence-penalty", "0.5", "--planner-frequency-penalty", "-0.5", "--planner-max-tokens", "900", "--planner-seed", "9",
				"--planner-stop", "A", "--planner-stop", "B", "--planner-top-p", "0.8"},
			planner: func(s *traj.Sampling) {
				*s = traj.Sampling{Temperature: 0, TopP: 0.8, TopK: 1, MinP: 0.05, RepetitionPenalty: 1.1, PresencePenalty: 0.5, FrequencyPenalty: -0.5,
					MaxTokens: 900, Seed: &seed, Stop: []string{"A", "B"}}
			},
			exec: func(s *traj.Sampling) { s.MaxTokens = 128 }},
		{name: "invalid flag", args: []string{"--planner-top-k", "-5"}, err: "--planner-top-k (or planner.top_k in --sampling): sampling: top_k = -5, want -1"},
		{name: "invalid executor flag", args: []string{"--executor-top-p", "1.5"}, err: "--executor-top-p"},
		{name: "invalid max tokens", args: []string{"--planner-max-tokens", "0"}, err: "--planner-max-tokens (or planner.max_tokens in --sampling): sampling: max_tokens = 0, want > 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := service.NewFlags("rollout")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			p, e := &samplingFlags{kind: "planner"}, &samplingFlags{kind: "executor"}
			p.register(fs, defP)
			e.register(fs, defE)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			f, err := LoadSampling(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			gotP, errP := p.over(fs, f.Planner)
			gotE, errE := e.over(fs, f.Executor)
			if tc.err != "" {
				err := errP
				if err == nil {
					err = errE
				}
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if errP != nil || errE != nil {
				t.Fatal(errP, errE)
			}
			wantP, wantE := defP, defE
			if tc.planner != nil {
				tc.planner(&wantP)
			}
			if tc.exec != nil {
				tc.exec(&wantE)
			}
			if !sameSampling(gotP, wantP) || !sameSampling(gotE, wantE) {
				t.Fatalf("planner %+v, want %+v\nexecutor %+v, want %+v", gotP, wantP, gotE, wantE)
			}
		})
	}
	t.Run("unknown key in the file", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.json")
		if err := os.WriteFile(bad, []byte(`{"planner":{"topk":1}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadSampling(bad); err == nil || !strings.Contains(err.Error(), "topk") {
			t.Fatalf("err %v", err)
		}
	})
}

func sameSampling(a, b traj.Sampling) bool {
	if (a.Seed == nil) != (b.Seed == nil) || (a.Seed != nil && *a.Seed != *b.Seed) || strings.Join(a.Stop, "\x00") != strings.Join(b.Stop, "\x00") {
		return false
	}
	a.Seed, b.Seed, a.Stop, b.Stop = nil, nil, nil, nil
	return a.Temperature == b.Temperature && a.TopP == b.TopP && a.TopK == b.TopK && a.MinP == b.MinP &&
		a.RepetitionPenalty == b.RepetitionPenalty && a.PresencePenalty == b.PresencePenalty && a.FrequencyPenalty == b.FrequencyPenalty && a.MaxTokens == b.MaxTokens
}
