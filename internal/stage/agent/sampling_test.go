package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/sim"
	simtasks "github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/internal/stage/agent"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/vmpool"
)

// sentSampling is what a request body says about sampling: each key
// present or not, and the values.
type sentSampling struct {
	keys           map[string]bool
	s              traj.Sampling
	logprobs       bool
	returnTokenIDs bool
}

// bodies records the sampling part of every planner and executor request.
type bodies struct {
	mu   sync.Mutex
	sent map[string][]sentSampling
	errs []string
}

func (b *bodies) record(kind string, body []byte) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		b.mu.Lock()
		b.errs = append(b.errs, err.Error())
		b.mu.Unlock()
		return
	}
	got := sentSampling{keys: map[string]bool{}}
	for k := range raw {
		got.keys[k] = true
	}
	delete(raw, "messages")
	rest, _ := json.Marshal(raw)
	_ = json.Unmarshal(rest, &got.s)
	var extra struct {
		LogProbs       bool `json:"logprobs"`
		ReturnTokenIDs bool `json:"return_token_ids"`
	}
	_ = json.Unmarshal(rest, &extra)
	got.logprobs, got.returnTokenIDs = extra.LogProbs, extra.ReturnTokenIDs
	b.mu.Lock()
	if b.sent == nil {
		b.sent = map[string][]sentSampling{}
	}
	b.sent[kind] = append(b.sent[kind], got)
	b.mu.Unlock()
}

func sameSampling(a, b traj.Sampling) bool {
	a.Seed, b.Seed = nil, nil // each request's seed is derived from the recorded one
	if len(a.Stop) == 0 && len(b.Stop) == 0 {
		a.Stop, b.Stop = nil, nil // none sent ([]) and none recorded
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// TestAcceptSamplingSentRecordedAndTokenLevel runs simulated episodes against
// the simulator's vLLM-like planner, whose generation config has top_k 1:
// every planner and executor request carries every sampling parameter
// (the test fails if one is left to the server), the trajectory records
// exactly what was sent, the planner's groups are not collapsed (at least
// 90 % of the steps have two different plans) and every candidate has
// token ids and log-probabilities of equal, non-zero length, a finish
// reason and its own completion token count. With top_k 1 sent
// explicitly the groups collapse: the simulator's greedy path bites.
func TestAcceptSamplingSentRecordedAndTokenLevel(t *testing.T) {
	for _, tc := range []struct {
		name        string
		group       int
		planner     func(*agent.Config)
		minDistinct float64 // share of steps with at least two different plans
		maxDistinct float64
	}{
		{"defaults", 8, nil, 0.9, 1},
		{"top_k 1", 2, func(c *agent.Config) {
			c.PlannerParams = model.Params{Sampling: agent.DefaultPlannerSampling(), LogProbs: true}
			c.PlannerParams.TopK = 1
		}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &bodies{}
			w := startWorldWith(t, 2, tc.group, func(wc *sim.WorldConfig) { wc.Models.OnRequest = rec.record }, tc.planner)
			trs := w.runSome(t, func(i int) bool { return i%12 == 0 })
			rec.mu.Lock()
			sent := rec.sent
			errs := rec.errs
			rec.mu.Unlock()
			if len(errs) > 0 {
				t.Fatalf("request bodies that are not JSON: %v", errs)
			}
			var one *traj.Trajectory
			for _, tr := range trs {
				one = tr
				break
			}
			for _, kind := range []string{"planner", "executor"} {
				if len(sent[kind]) == 0 {
					t.Fatalf("no %s requests", kind)
				}
				rec := one.Models.Planner.Sampling
				if kind == "executor" {
					rec = one.Models.Executor.Sampling
				}
				if rec == nil {
					t.Fatalf("the trajectory records no %s sampling", kind)
				}
				for i, s := range sent[kind] {
					for _, k := range append([]string{"seed"}, model.SamplingKeys...) {
						if !s.keys[k] {
							t.Fatalf("%s request %d leaves %q to the server", kind, i, k)
						}
					}
					if !sameSampling(s.s, *rec) {
						t.Fatalf("%s request %d sent %+v, the trajectory records %+v", kind, i, s.s, *rec)
					}
					if want := kind == "planner"; s.logprobs != want || s.returnTokenIDs != want {
						t.Fatalf("%s request %d: logprobs %v, return_token_ids %v", kind, i, s.logprobs, s.returnTokenIDs)
					}
				}
			}
			steps, distinct := 0, 0
			for id, tr := range trs {
				if err := tr.Validate(); err != nil {
					t.Fatalf("%s: %v", id, err)
				}
				for _, s := range tr.Steps {
					steps++
					if !agent.IdenticalPlans(&s) {
						distinct++
					}
					for _, c := range s.Candidates {
						if len(c.PlanTokenIDs) == 0 || len(c.PlanTokenIDs) != len(c.PlanLogProbs) ||
							c.FinishReason == "" || c.PlanTokens.Completion != len(c.PlanTokenIDs) {
							t.Fatalf("%s step %d candidate %d: %d ids, %d logprobs, finish %q, %d completion tokens",
								id, s.Index, c.Index, len(c.PlanTokenIDs), len(c.PlanLogProbs), c.FinishReason, c.PlanTokens.Completion)
						}
					}
				}
			}
			share := float64(distinct) / float64(max(steps, 1))
			t.Logf("%d/%d steps (%.0f %%) with at least two different plans", distinct, steps, 100*share)
			if steps == 0 || share < tc.minDistinct || share > tc.maxDistinct {
				t.Fatalf("share of steps with two different plans %.2f, want [%.2f, %.2f]", share, tc.minDistinct, tc.maxDistinct)
			}
		})
	}
}

// TestContextOverflowEndsTheEpisode: a planner request that outgrows the
// model's context (the simulator's max_model_len) ends the episode with
// outcome context_overflow and the server's message, as an ordinary
// failed episode (no environment error), after one request.
func TestContextOverflowEndsTheEpisode(t *testing.T) {
	rec := &bodies{}
	w := startWorldWith(t, 1, 2, func(wc *sim.WorldConfig) {
		wc.Models.Planner.MaxModelLen = 4000 // the first steps fit, a longer history does not
		wc.Models.OnRequest = rec.record
	}, nil)
	all, err := simtasks.All()
	if err != nil {
		t.Fatal(err)
	}
	task := &all[0].Task
	l, err := w.pool.Lease(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer l.End(vmpool.Healthy)
	tr, err := w.ag.Run(context.Background(), agent.Episode{Task: task, Samples: 1, VM: l.ID(), Guest: l.Guest()})
	if err != nil || tr == nil {
		t.Fatalf("err %v (a context overflow is not an environment error), trajectory %v", err, tr != nil)
	}
	if tr.Outcome.Kind != traj.OutcomeContextOverflow || !strings.Contains(tr.Outcome.Reason, "maximum context length") || tr.Outcome.IsEnvError() {
		t.Fatalf("outcome %+v", tr.Outcome)
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	planner := len(rec.sent["planner"])
	rec.mu.Unlock()
	if planner != len(tr.Steps)+1 {
		t.Errorf("%d planner requests for %d steps: the overflowing request was retried", planner, len(tr.Steps))
	}
}
