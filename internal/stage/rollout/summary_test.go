package rollout

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/stage/sched"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/vmpool"
)

// Episodes the evaluator could not score are neither successes nor
// failures: the rates are over scored episodes only, in this invocation's
// results and in the ledger's records of an earlier one alike.
func TestSummaryLeavesUnscoredEpisodesOut(t *testing.T) {
	a := &scienceboard.Task{ID: "A", Steps: 5}
	b := &scienceboard.Task{ID: "B", Steps: 5}
	finished := func(id string, eval *traj.EvalResult) *traj.Trajectory {
		return &traj.Trajectory{ID: id, Outcome: traj.Outcome{Kind: traj.OutcomeFinished}, Eval: eval, Steps: make([]traj.Step, 2)}
	}
	results := []sched.Result{
		{Job: sched.Job{Task: a, Sample: 0}, Attempts: 1, Trajectory: finished("1", &traj.EvalResult{Passed: true})},
		{Job: sched.Job{Task: a, Sample: 1}, Attempts: 1, Trajectory: finished("2", &traj.EvalResult{Error: "evaluate[0]: state server: no answer within 30s"})},
		{Job: sched.Job{Task: a, Sample: 2}, Attempts: 1, Trajectory: finished("3", &traj.EvalResult{Unsupported: []string{"alphafold_match"}})},
		{Job: sched.Job{Task: b, Sample: 0}, Attempts: 3, Trajectory: &traj.Trajectory{ID: "4", Outcome: traj.Outcome{Kind: traj.OutcomeEnvError}}},
		{Job: sched.Job{Task: b, Sample: 1}, Attempts: 1, Trajectory: finished("5", &traj.EvalResult{Checks: []traj.CheckResult{{Type: "x"}}})},
	}
	done := map[ledger.EpisodeKey]ledger.Record{
		{Task: "B", Sample: 2}: ledger.RecordOf(finished("6", nil)),                              // no evaluator
		{Task: "A", Sample: 3}: {ID: "7", Outcome: traj.OutcomeFinished, Passed: true, Steps: 2}, // a record written before "unscored" existed
	}
	s := summarize(Config{App: "X", Samples: 4, Tasks: make([]scienceboard.Task, 2)}, results, done, 0, vmpool.Stats{})
	if s.Success != 2 || s.Unscored != 3 || s.EnvErrors != 1 || s.Retries != 2 {
		t.Fatalf("summary %+v: want 2 successes, 3 unscored, 1 environment error, 2 retries", s)
	}
	if s.Rate != 2.0/3 {
		t.Errorf("success rate %v, want 2/3 (A/0, A/3 passed; B/1 failed)", s.Rate)
	}
	if s.AverageAtK != 0.5 || s.PassAtK != 0.5 {
		t.Errorf("Average@K %v, Pass@K %v: want 0.5 (A: 2 of 2 scored, B: 0 of 1)", s.AverageAtK, s.PassAtK)
	}
	if s.MeanSteps != 2 {
		t.Errorf("mean steps %v, want 2 over every episode without an environment error", s.MeanSteps)
	}
}

// An episode that got no VM is not a publish failure: the summary counts
// the two apart (publish_failures, lease_failures).
func TestSummarySplitsLeaseAndPublishFailures(t *testing.T) {
	a := &scienceboard.Task{ID: "A", Steps: 5}
	results := []sched.Result{
		{Job: sched.Job{Task: a, Sample: 0}, Err: fmt.Errorf("%w A/0: %w", sched.ErrNoVM, errors.New("vmpool: no usable VM left"))},
		{Job: sched.Job{Task: a, Sample: 1}, Err: errors.New("bus: publish: timeout")},
		{Job: sched.Job{Task: a, Sample: 2}, Err: fmt.Errorf("%w A/2: %w", sched.ErrNoVM, errors.New("vmpool: pool is closed"))},
	}
	s := summarize(Config{App: "X", Samples: 3, Tasks: []scienceboard.Task{*a}}, results, nil, 0, vmpool.Stats{})
	if s.PublishFailures != 1 || s.LeaseFailures != 2 {
		t.Fatalf("publish failures %d, lease failures %d; want 1 and 2", s.PublishFailures, s.LeaseFailures)
	}
}

// The summary reports the share of steps whose G+1 plans are all the same
// text and of groups with two or more different plans, and warns, naming
// greedy sampling, when most steps sampled identical plans. A
// context_overflow episode is an ordinary failed episode: scored, not an
// environment error.
func TestSummaryPlanVariety(t *testing.T) {
	step := func(plans ...string) traj.Step {
		s := traj.Step{}
		for i, p := range plans {
			s.Candidates = append(s.Candidates, traj.Candidate{Index: i, Plan: p})
		}
		return s
	}
	task := &scienceboard.Task{ID: "A", Steps: 5}
	for _, tc := range []struct {
		name                     string
		steps                    []traj.Step
		identical, varied, warn  bool
		identicalShare, varShare float64
	}{
		{"varied", []traj.Step{step("a", "b", "c"), step("a", "a", "b"), step("x", "x", "x")}, false, false, false, 1.0 / 3, 2.0 / 3},
		{"collapsed", []traj.Step{step("a", "a", "a"), step("b", "b", "b"), step("c", "d", "d")}, false, false, true, 2.0 / 3, 0},
		{"G = 0 samples nothing", []traj.Step{step("a"), step("b")}, false, false, false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &traj.Trajectory{ID: "1", Outcome: traj.Outcome{Kind: traj.OutcomeContextOverflow, Reason: "This model's maximum context length is 10 tokens."},
				Eval: &traj.EvalResult{Checks: []traj.CheckResult{{Type: "x"}}}, Steps: tc.steps}
			s := summarize(Config{App: "X", Samples: 1, Tasks: []scienceboard.Task{*task}}, []sched.Result{{Job: sched.Job{Task: task}, Attempts: 1, Trajectory: tr}}, nil, 0, vmpool.Stats{})
			if s.IdenticalPlansShare != tc.identicalShare || s.VariedGroupsShare != tc.varShare {
				t.Errorf("identical share %v, varied groups share %v; want %v, %v", s.IdenticalPlansShare, s.VariedGroupsShare, tc.identicalShare, tc.varShare)
			}
			warned := false
			for _, w := range s.Warnings {
				if strings.Contains(w, "identical plans") && strings.Contains(w, "top-k 1") {
					warned = true
				}
			}
			if warned != tc.warn {
				t.Errorf("warned %v, want %v: %q", warned, tc.warn, s.Warnings)
			}
			if s.EnvErrors != 0 || s.Outcomes[string(traj.OutcomeContextOverflow)] != 1 || s.Rate != 0 || s.Unscored != 0 {
				t.Errorf("a context overflow must count as a scored failure: %+v", s)
			}
		})
	}
}
