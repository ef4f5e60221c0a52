package rollout

import (
	"errors"
	"fmt"
	"testing"

	"github.com/codapipe/codapipe/internal/ledger"
	"github.com/codapipe/codapipe/internal/sched"
	"github.com/codapipe/codapipe/internal/scienceboard"
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
