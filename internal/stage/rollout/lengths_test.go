package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/stage/sched"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/codapipe/codapipe/pkg/traj"
)

// A run records its episodes' VM time into the length history (not its
// environment errors); the next run of the family predicts from it, and
// its summary counts the predictions from history and from the step
// limit, and their error.
func TestLengthsRecordedPredictedAndSummarised(t *testing.T) {
	ctx := context.Background()
	srv := natstest.Start(t)
	b, log := lengthsBus(t, srv.URL())
	tasks := []scienceboard.Task{{ID: "A.1", Steps: 10}, {ID: "B", Steps: 5}, {ID: "C", Steps: 15}}
	cfg := Config{App: "ChimeraX", Tasks: tasks, Bus: b, Topology: bus.DefaultTopology(), Planner: model.Config{Checkpoint: "ui-tars-step100"}}
	start := time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)
	result := func(task *scienceboard.Task, d time.Duration, kind traj.OutcomeKind) sched.Result {
		return sched.Result{Job: sched.Job{Task: task}, Attempts: 1, Trajectory: &traj.Trajectory{
			StartedAt: start, EndedAt: start.Add(d), Outcome: traj.Outcome{Kind: kind}, Steps: make([]traj.Step, 4)}}
	}

	first := openLengths(ctx, cfg, log)
	if first.predictor() == nil {
		t.Fatal("no predictor with the history readable")
	}
	first.done(ctx, result(&tasks[0], 100*time.Second, traj.OutcomeFinished))
	first.done(ctx, result(&tasks[1], 40*time.Second, traj.OutcomeStepLimit))
	first.done(ctx, result(&tasks[2], time.Hour, traj.OutcomeEnvError)) // no length
	s1 := first.summary()
	if s1.Family != "ui-tars" || s1.Recorded != 2 || s1.FromHistory != 0 || s1.Fallback != 2 {
		t.Errorf("first run: %+v", s1)
	}

	// The next checkpoint of the family.
	cfg.Planner.Checkpoint = "ui-tars-step200"
	second := openLengths(ctx, cfg, log)
	order := sched.Order([]sched.Job{{Task: &tasks[0]}, {Task: &tasks[1]}, {Task: &tasks[2]}}, second.predictor())
	// C has no history: 15 steps × (100+40)/(4+4) s per step = 262.5 s.
	if order[0].Task.ID != "C" || order[1].Task.ID != "A.1" || order[2].Task.ID != "B" {
		t.Errorf("order: %s %s %s, want C A.1 B", order[0].Task.ID, order[1].Task.ID, order[2].Task.ID)
	}
	second.done(ctx, result(&tasks[0], 80*time.Second, traj.OutcomeFinished))
	second.done(ctx, result(&tasks[2], 200*time.Second, traj.OutcomeFinished))
	s2 := second.summary()
	if s2.FromHistory != 1 || s2.Fallback != 1 || s2.Compared != 1 || math.Abs(s2.MeanAbsErrorS-20) > 1e-6 || math.Abs(s2.MeanRelError-0.25) > 1e-6 {
		t.Errorf("second run: %+v", s2)
	}
	sum := &Summary{Lengths: s2, Outcomes: map[string]int{}}
	var out bytes.Buffer
	sum.Print(&out)
	if !strings.Contains(out.String(), "1 predicted from history (mean error 20.0s, 25.0%), 1 from the step limit") {
		t.Errorf("printed summary:\n%s", out.String())
	}
	js, _ := json.Marshal(sum)
	if !strings.Contains(string(js), `"lengths":{"family":"ui-tars","from_history":1,"fallback":1,"compared":1,"mean_abs_error_s":20,"mean_rel_error":0.25`) {
		t.Errorf("summary.json: %s", js)
	}

	// Off: no history at all.
	cfg.LengthFamily = LengthsOff
	if off := openLengths(ctx, cfg, log); off != nil || off.predictor() != nil || off.summary() != nil {
		t.Error("--length-family off still has a history")
	}

	// An episode whose trajectory was not published runs again: it is
	// recorded then, not now.
	cfg.LengthFamily = ""
	third := openLengths(ctx, cfg, log)
	unpublished := result(&tasks[1], 500*time.Second, traj.OutcomeFinished)
	unpublished.Err = errors.New("publish: nats: timeout")
	third.done(ctx, unpublished)
	if s := third.summary(); s.Recorded != 0 || s.FromHistory+s.Fallback != 0 {
		t.Errorf("an unpublished episode was counted: %+v", s)
	}

	// The server gone after the history was read: the first write fails
	// after its budget, the later ones are not tried (one budget per
	// invocation, not one per episode), and the run goes on.
	defer func(b time.Duration) { lengthRecordBudget = b }(lengthRecordBudget)
	lengthRecordBudget = 300 * time.Millisecond
	fourth := openLengths(ctx, cfg, log)
	srv.Shutdown()
	fourth.done(ctx, result(&tasks[0], 90*time.Second, traj.OutcomeFinished))
	for range 3 {
		fourth.done(ctx, result(&tasks[1], 30*time.Second, traj.OutcomeFinished))
	}
	if s := fourth.summary(); s.Recorded != 0 || s.RecordFailures != 4 || s.FromHistory != 4 {
		t.Errorf("writes with the server gone: %+v, want 4 failures, none recorded", s)
	}
	if !fourth.broken {
		t.Error("after a failed write the tracker still tries the next ones")
	}

	// The server gone: the run goes on in step limit order.
	cfg.LengthFamily = ""
	down := openLengths(ctx, cfg, log)
	if down.predictor() != nil || down.summary().ReadError == "" {
		t.Errorf("server down: predictor %v, summary %+v", down.predictor(), down.summary())
	}
}

// tablePredictor predicts from a table (step limit × 1 s for the rest).
type tablePredictor map[string]time.Duration

func (p tablePredictor) Predict(t *scienceboard.Task) (time.Duration, bool) {
	if d, ok := p[t.ID]; ok {
		return d, true
	}
	return time.Duration(t.Steps) * time.Second, false
}

// The shared work queue hands the episodes out in the scheduler's order:
// longest predicted first.
func TestWorkQueueOrdersByPrediction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := natstest.Start(t)
	b, log := lengthsBus(t, srv.URL())
	tasks := []scienceboard.Task{{ID: "short", Steps: 15}, {ID: "long", Steps: 5}, {ID: "unseen", Steps: 10}}
	cfg := Config{App: "ChimeraX", Run: "r", Tasks: tasks, Samples: 1, Bus: b, Topology: bus.DefaultTopology(), Lease: 10 * time.Second, PublishRetry: 2 * time.Second}
	runs, err := ledger.Open(ctx, b, cfg.Topology)
	if err != nil {
		t.Fatal(err)
	}
	jobs := []sched.Job{{Task: &tasks[0]}, {Task: &tasks[1]}, {Task: &tasks[2]}}
	pred := tablePredictor{"short": 2 * time.Second, "long": time.Minute}
	q, err := openWorkQueue(ctx, cfg, runs, time.Now(), jobs, nil, pred, log)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for range jobs {
		c, err := q.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c.Job().Task.ID)
		if err := c.Done(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"long", "unseen", "short"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("taken %v, want %v (sched.Order)", got, want)
	}
}

// lengthsBus opens a bus on the test's NATS server with short retries, and
// a quiet logger; the bus is closed at the end of the test.
func lengthsBus(t *testing.T, url string) (*bus.Bus, *slog.Logger) {
	t.Helper()
	b, err := bus.Open(context.Background(), bus.Config{URL: url, Timeout: 2 * time.Second, RetryBudget: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, slog.New(slog.NewTextHandler(io.Discard, nil))
}
