package rollout

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/stage/sched"
)

// LengthsOff as --length-family turns the episode-length history off:
// nothing is read or recorded, the episodes go longest step limit first.
const LengthsOff = "off"

// lengthRecordBudget bounds the retries of one history write: a worker
// records its episode before it takes the next, and a lost length only
// makes one prediction staler. After a write has failed, the invocation
// records no more (lengthTracker.broken), so that an unreachable bucket
// costs one budget, not one per episode.
var lengthRecordBudget = 10 * time.Second // a variable for the tests

// LengthSummary is how the run's episode lengths were predicted (the
// summary's "lengths"): per this invocation's episodes, how many were
// predicted from their task's history and how many fell back to the step
// limit, and the error of the history's predictions against the VM time
// the episodes took (environment errors left out).
type LengthSummary struct {
	Family      string `json:"family"`
	FromHistory int    `json:"from_history"`
	Fallback    int    `json:"fallback"`
	// Compared counts the history-predicted episodes the errors cover.
	Compared      int     `json:"compared"`
	MeanAbsErrorS float64 `json:"mean_abs_error_s"`
	MeanRelError  float64 `json:"mean_rel_error"`
	// Recorded counts the episodes recorded into the history,
	// RecordFailures those not recorded because a write failed (logged;
	// after the first failure the invocation records no more; the run
	// goes on).
	Recorded       int `json:"recorded"`
	RecordFailures int `json:"record_failures"`
	// ReadError is why the history could not be read ("": it was), in
	// which case every episode fell back to the step limit.
	ReadError string `json:"read_error,omitempty"`
}

// errLengthsBroken stands for the history writes skipped after one failed.
var errLengthsBroken = errors.New("an earlier history write failed")

// lengthTracker reads the history before a run (its predictions order the
// episodes), records every finished episode into it, and keeps the
// figures of LengthSummary.
type lengthTracker struct {
	hist   *sched.History // nil: nothing recorded
	pred   *sched.Lengths // nil: step limit order
	app    string
	family string
	log    *slog.Logger

	mu       sync.Mutex
	sum      LengthSummary
	abs, rel float64
	broken   bool // a history write failed: no more are tried
}

// lengthFamily is the run's checkpoint family: --length-family, or the
// planner checkpoint's (sched.Family); "" when the history is off.
func lengthFamily(cfg Config) string {
	switch cfg.LengthFamily {
	case LengthsOff:
		return ""
	case "":
		return sched.Family(cfg.Planner.Checkpoint)
	}
	return cfg.LengthFamily
}

// openLengths opens the history and reads the predictions of cfg's tasks.
// It never fails the run: without the history the episodes keep the step
// limit order and nothing is recorded. A nil tracker means the history is
// off.
func openLengths(ctx context.Context, cfg Config, log *slog.Logger) *lengthTracker {
	family := lengthFamily(cfg)
	if family == "" || cfg.Bus == nil {
		return nil
	}
	t := &lengthTracker{app: cfg.App, family: family, log: log, sum: LengthSummary{Family: family}}
	h, err := sched.OpenHistory(ctx, cfg.Bus, cfg.Topology, lengthRecordBudget)
	if err != nil {
		log.Warn("rollout: no episode-length history; episodes go longest step limit first", "family", family, "err", err)
		t.sum.ReadError = err.Error()
		return t
	}
	t.hist = h
	if t.pred, err = h.Load(ctx, cfg.App, family, cfg.Tasks); err != nil {
		log.Warn("rollout: could not read the episode-length history; episodes go longest step limit first", "family", family, "err", err)
		t.sum.ReadError = err.Error()
		return t
	}
	log.Info("rollout: episode-length history", "family", family, "tasks_known", t.pred.Known(), "tasks", len(cfg.Tasks))
	return t
}

// predictor is what orders the run's episodes (nil: step limit).
func (t *lengthTracker) predictor() sched.Predictor {
	if t == nil || t.pred == nil {
		return nil
	}
	return t.pred
}

// done records a finished episode into the history and its prediction's
// error into the summary.
func (t *lengthTracker) done(ctx context.Context, r sched.Result) {
	if t == nil || r.Trajectory == nil {
		return
	}
	if r.Err != nil && !errors.Is(r.Err, sched.ErrKept) {
		return // not published: the episode runs again (here or on another host), and is recorded then
	}
	censored, ok := sched.Censored(r.Trajectory.Outcome)
	if !ok {
		return // an environment error is no length
	}
	// The VM time of the attempt that made the trajectory.
	d := r.Trajectory.EndedAt.Sub(r.Trajectory.StartedAt)
	if d <= 0 {
		return
	}
	var recErr error
	t.mu.Lock()
	broken := t.broken
	t.mu.Unlock()
	switch {
	case t.hist != nil && broken:
		recErr = errLengthsBroken
	case t.hist != nil:
		recErr = t.hist.Record(ctx, t.app, t.family, r.Job.Task.ID, d, len(r.Trajectory.Steps), censored)
		if recErr != nil {
			t.log.Warn("rollout: could not record the episode's length; this invocation records no more", "task", r.Job.Task.ID, "sample", r.Job.Sample, "err", recErr)
		}
	}
	p, fromHistory := t.pred.Predict(r.Job.Task) // a nil *Lengths: the step limit
	t.mu.Lock()
	defer t.mu.Unlock()
	if recErr != nil {
		t.sum.RecordFailures++
		t.broken = true
	} else if t.hist != nil {
		t.sum.Recorded++
	}
	if !fromHistory {
		t.sum.Fallback++
		return
	}
	t.sum.FromHistory++
	t.sum.Compared++
	e := math.Abs(p.Seconds() - d.Seconds())
	t.abs += e
	t.rel += e / d.Seconds()
}

// summary returns the figures so far (nil for a nil tracker).
func (t *lengthTracker) summary() *LengthSummary {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.sum
	if s.Compared > 0 {
		s.MeanAbsErrorS = t.abs / float64(s.Compared)
		s.MeanRelError = t.rel / float64(s.Compared)
	}
	return &s
}
