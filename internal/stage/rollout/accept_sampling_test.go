package rollout

import (
	"encoding/json"
	"log/slog"
	"sync"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/stage/agent"
	"github.com/codapipe/codapipe/pkg/traj"
)

// TestAcceptSamplingSentRecordedAndVaried is issue 22's acceptance on the
// simulator, whose planner fills what a request leaves out from a
// Qwen2.5-VL-like generation config (top_k 1): at default settings every
// planner and executor request carries every sampling parameter (the test
// fails if one is left to the server), every trajectory records exactly
// what its requests sent, at least 90 % of the groups have two or more
// different plans, and every candidate has token ids and log-probabilities
// of equal, non-zero length, a finish reason and its own completion token
// count. With --planner-top-k 1 the groups collapse and the summary warns.
func TestAcceptSamplingSentRecordedAndVaried(t *testing.T) {
	t.Parallel() // beside the outage tests, which mostly wait
	for _, tc := range []struct {
		name      string
		topK      int // 0: default
		minVaried float64
		maxVaried float64
		warn      bool
	}{
		{"defaults", 0, 0.9, 1, false},
		{"planner top_k 1", 1, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			log, logs := newLogCapture(slog.LevelInfo)
			cfg := acceptConfig(dir, simTaskDir(t, acceptApp, "S01", "S05"), "accept-sampling", log)
			cfg.Group = 8
			if tc.topK != 0 {
				cfg.PlannerSampling = agent.DefaultPlannerSampling()
				cfg.PlannerSampling.TopK = tc.topK
			}
			var mu sync.Mutex
			sent := map[string][]map[string]json.RawMessage{}
			cfg.simRequests = func(kind string, body []byte) {
				var m map[string]json.RawMessage
				if err := json.Unmarshal(body, &m); err != nil {
					t.Errorf("%s request body: %v", kind, err)
					return
				}
				delete(m, "messages")
				mu.Lock()
				sent[kind] = append(sent[kind], m)
				mu.Unlock()
			}
			sum := runOK(t, cfg, logs)
			b := openTestBus(t, dir)
			defer b.Close()
			ps := readPublished(t, b, openStore(t, dir), acceptApp)
			if len(ps) != 2 {
				t.Fatalf("%d trajectories", len(ps))
			}
			mu.Lock()
			defer mu.Unlock()
			for _, kind := range []string{"planner", "executor"} {
				if len(sent[kind]) == 0 {
					t.Fatalf("no %s requests", kind)
				}
				for i, m := range sent[kind] {
					for _, k := range append([]string{"seed"}, model.SamplingKeys...) {
						if _, ok := m[k]; !ok {
							t.Fatalf("%s request %d leaves %q to the server", kind, i, k)
						}
					}
					b, _ := json.Marshal(m)
					var got traj.Sampling
					if err := json.Unmarshal(b, &got); err != nil {
						t.Fatal(err)
					}
					for _, p := range ps {
						rec := p.Traj.Models.Planner.Sampling
						if kind == "executor" {
							rec = p.Traj.Models.Executor.Sampling
						}
						if rec == nil || !sameSampling(withoutSeed(got), withoutSeed(*rec)) {
							t.Fatalf("%s request %d sent %s; trajectory %s records %+v", kind, i, b, p.Traj.ID, rec)
						}
					}
				}
			}
			for _, p := range ps {
				for _, s := range p.Traj.Steps {
					for _, c := range s.Candidates {
						if len(c.PlanTokenIDs) == 0 || len(c.PlanTokenIDs) != len(c.PlanLogProbs) || c.FinishReason == "" || c.PlanTokens.Completion != len(c.PlanTokenIDs) {
							t.Fatalf("%s step %d candidate %d: %d ids, %d logprobs, finish %q, %d tokens", p.Traj.ID, s.Index, c.Index,
								len(c.PlanTokenIDs), len(c.PlanLogProbs), c.FinishReason, c.PlanTokens.Completion)
						}
					}
				}
			}
			t.Logf("plans: %+v; identical share %.2f, varied groups share %.2f", sum.Plans, sum.IdenticalPlansShare, sum.VariedGroupsShare)
			if sum.Plans.Groups == 0 || sum.VariedGroupsShare < tc.minVaried || sum.VariedGroupsShare > tc.maxVaried {
				t.Fatalf("varied groups share %.2f over %d groups, want [%.2f, %.2f]", sum.VariedGroupsShare, sum.Plans.Groups, tc.minVaried, tc.maxVaried)
			}
			warned := len(planWarnings(sum.Plans, sum.IdenticalPlansShare)) > 0
			inSummary := false
			for _, w := range sum.Warnings {
				if len(planWarnings(sum.Plans, sum.IdenticalPlansShare)) > 0 && w == planWarnings(sum.Plans, sum.IdenticalPlansShare)[0] {
					inSummary = true
				}
			}
			if warned != tc.warn || inSummary != tc.warn {
				t.Fatalf("warned %v (in the summary %v), want %v: %q", warned, inSummary, tc.warn, sum.Warnings)
			}
			if tc.warn && len(logs.records("planner plans look wrong")) == 0 {
				t.Error("no WARN log for identical plans")
			}
		})
	}
}

func withoutSeed(s traj.Sampling) traj.Sampling {
	s.Seed = nil
	return s
}
