package sched

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/nats-io/nats.go/jetstream"
)

// LengthBucket is the key-value bucket of the episode-length history: one
// entry per (app, checkpoint family, task), updated by every finished
// episode (docs/contracts.md).
const LengthBucket = "CODA_LENGTHS"

// DefaultSecondsPerStep is the seconds per step of a task without history
// when no task of its app and family has any either: only the ratio
// between unseen tasks' predictions matters then (step limit order).
const DefaultSecondsPerStep = 10.0

// lengthAlpha is the weight of a new episode in a task's estimate once
// it has 1/lengthAlpha episodes: before that the estimate is their mean,
// after it an exponentially weighted mean, which follows a checkpoint's
// drift within a few nights.
const lengthAlpha = 0.25

// LengthEntry is the value of one history key (JSON).
type LengthEntry struct {
	// Seconds is the estimated VM time of an episode of the task (mean,
	// then exponentially weighted mean; censored episodes only raise it).
	Seconds float64 `json:"seconds"`
	// Steps is the estimated step count, weighted like Seconds.
	Steps float64 `json:"steps"`
	// N counts the episodes that changed the estimate; Censored those
	// that ended at the step limit or by a timeout (lower bounds).
	N        int       `json:"n"`
	Censored int       `json:"censored"`
	Updated  time.Time `json:"updated"`
}

// add folds one episode into the entry: d its VM time, steps its step
// count; a censored episode (its length is a lower bound) only raises
// the estimate.
func (e *LengthEntry) add(d time.Duration, steps int, censored bool, now time.Time) {
	s := d.Seconds()
	e.Updated = now
	if censored {
		e.Censored++
		if e.N > 0 && s <= e.Seconds {
			return
		}
	}
	e.N++
	a := max(1/float64(e.N), lengthAlpha)
	e.Seconds += a * (s - e.Seconds)
	e.Steps += a * (float64(steps) - e.Steps)
}

// checkpointSuffix is a trailing step or iteration number of a checkpoint
// id: "-step1200", "_iter_3", "/global_step_40", ":1200", "@7".
// A number right after a letter or a dot ("llama3", "qwen2.5") is part of
// the name.
var checkpointSuffix = regexp.MustCompile(`(?i)(?:[-_/:@]+(?:global_step|step|iteration|iter|ckpt|checkpoint|epoch)?[-_]?|(?:global_step|step|iteration|iter|ckpt|checkpoint|epoch)[-_]?)[0-9]+$`)

// Family is the checkpoint family of a planner checkpoint id: the id with
// a trailing step or iteration suffix stripped ("ui-tars-7b-step1200" →
// "ui-tars-7b"), so that the checkpoints one training produces share
// their history. An empty id, or one that is nothing but a number, is
// its own family.
func Family(checkpoint string) string {
	f := checkpointSuffix.ReplaceAllString(checkpoint, "")
	if f == "" {
		return checkpoint
	}
	return f
}

// LengthKey is the history key of a task: app, family and task id, each
// escaped by bus.KeyToken (names may hold any byte).
func LengthKey(app, family, task string) string {
	return bus.KeyToken(app) + "." + bus.KeyToken(family) + "." + bus.KeyToken(task)
}

// History is the episode-length history on the CODA_LENGTHS bucket.
type History struct {
	kv      jetstream.KeyValue
	budget  time.Duration // retry budget of a write
	timeout time.Duration // one request
}

// OpenHistory creates (with t's replicas) or opens the history bucket;
// budget bounds each write's retries (bus.DefaultRetryBudget when 0).
func OpenHistory(ctx context.Context, b *bus.Bus, t bus.Topology, budget time.Duration) (*History, error) {
	kv, err := b.EnsureKeyValue(ctx, t, bus.KeyValueConfig(LengthBucket, "codapipe rollout: episode-length history, by app.family.task", 0))
	if err != nil {
		return nil, fmt.Errorf("sched: length history: %w", err)
	}
	h := &History{kv: kv, budget: budget, timeout: 10 * time.Second}
	if budget > 0 {
		h.timeout = min(h.timeout, budget)
	}
	return h, nil
}

// Censored reports whether an episode's length is only a lower bound of
// its task's (it ran out of steps or time), and ok whether it is a length
// at all (an environment error is not).
func Censored(o traj.Outcome) (censored, ok bool) {
	switch {
	case o.IsEnvError():
		return false, false
	case o.Kind == traj.OutcomeStepLimit, o.Kind == traj.OutcomeContextOverflow:
		return true, true
	}
	return false, true
}

// Record folds a finished episode of task into the history: d is its
// time on the VM, steps its step count. An update races with other hosts
// through the entry's revision; transient errors are retried within the
// history's budget.
func (h *History) Record(ctx context.Context, app, family, task string, d time.Duration, steps int, censored bool) error {
	key := LengthKey(app, family, task)
	err := bus.RetryTransient(ctx, h.budget, func(ctx context.Context) error {
		for range 10 { // lost races with other hosts
			cctx, cancel := context.WithTimeout(ctx, h.timeout)
			e, rev, err := h.get(cctx, key)
			if err != nil {
				cancel()
				return err
			}
			e.add(d, steps, censored, time.Now().UTC())
			body, _ := json.Marshal(e)
			if rev == 0 {
				_, err = h.kv.Create(cctx, key, body)
			} else {
				_, err = h.kv.Update(cctx, key, body, rev)
			}
			cancel()
			if err == nil || !(errors.Is(err, jetstream.ErrKeyExists) || isWrongSequence(err)) {
				return err
			}
		}
		return errors.New("lost ten races for the entry")
	}, nil)
	if err != nil {
		return fmt.Errorf("sched: length history: record %s: %w", key, err)
	}
	return nil
}

// isWrongSequence reports a lost compare-and-set of KeyValue.Update.
func isWrongSequence(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// get reads one entry; a missing or damaged entry is empty (revision 0
// for a missing one).
func (h *History) get(ctx context.Context, key string) (LengthEntry, uint64, error) {
	kve, err := h.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return LengthEntry{}, 0, nil
	}
	if err != nil {
		return LengthEntry{}, 0, err
	}
	var e LengthEntry
	if json.Unmarshal(kve.Value(), &e) != nil || e.Seconds < 0 {
		e = LengthEntry{} // damaged: start over (revision kept for the update)
	}
	return e, kve.Revision(), nil
}

// Load reads the history of tasks under app and family and returns their
// Lengths. Any read failure fails the load: the caller falls back to the
// step limit order (nil Lengths).
func (h *History) Load(ctx context.Context, app, family string, tasks []scienceboard.Task) (*Lengths, error) {
	l := &Lengths{known: map[string]LengthEntry{}}
	for i := range tasks {
		key := LengthKey(app, family, tasks[i].ID)
		var e LengthEntry
		err := bus.RetryTransient(ctx, h.budget, func(ctx context.Context) error {
			cctx, cancel := context.WithTimeout(ctx, h.timeout)
			defer cancel()
			var err error
			e, _, err = h.get(cctx, key)
			return err
		}, nil)
		if err != nil {
			return nil, fmt.Errorf("sched: length history: read %s: %w", key, err)
		}
		if e.N > 0 {
			l.known[tasks[i].ID] = e
		}
	}
	var secs, steps float64
	for _, e := range l.known {
		secs += e.Seconds
		steps += e.Steps
	}
	l.perStep = DefaultSecondsPerStep
	if secs > 0 && steps > 0 {
		l.perStep = secs / steps
	}
	return l, nil
}

// Lengths predicts episode lengths from the history of one app and
// checkpoint family: the task's estimate, or for a task without history
// its step limit × the seconds per step of the tasks with history (or
// DefaultSecondsPerStep). A nil *Lengths predicts from the step limit
// alone.
type Lengths struct {
	known   map[string]LengthEntry
	perStep float64
}

// Predict returns the predicted VM time of an episode of t and whether
// it came from t's own history.
func (l *Lengths) Predict(t *scienceboard.Task) (time.Duration, bool) {
	if l != nil {
		if e, ok := l.known[t.ID]; ok {
			return time.Duration(e.Seconds * float64(time.Second)), true
		}
	}
	ps := DefaultSecondsPerStep
	if l != nil {
		ps = l.perStep
	}
	return time.Duration(float64(t.Steps) * ps * float64(time.Second)), false
}

// Known is the number of tasks with history.
func (l *Lengths) Known() int {
	if l == nil {
		return 0
	}
	return len(l.known)
}

// Predictor predicts an episode's length before it runs (*Lengths).
type Predictor interface {
	Predict(t *scienceboard.Task) (d time.Duration, fromHistory bool)
}

// Order returns the jobs in the dynamic mode's order, longest predicted
// length first, stable among equals (a copy; jobs is left as it is). A
// nil p orders by step limit. The scheduler's own queue and rollout's
// shared work queue both order by it.
func Order(jobs []Job, p Predictor) []Job {
	order := slices.Clone(jobs)
	if p == nil {
		slices.SortStableFunc(order, func(a, b Job) int { return cmp.Compare(b.Task.Steps, a.Task.Steps) })
		return order
	}
	pred := make(map[*scienceboard.Task]time.Duration, len(order))
	for _, j := range order {
		if _, ok := pred[j.Task]; !ok {
			pred[j.Task], _ = p.Predict(j.Task)
		}
	}
	slices.SortStableFunc(order, func(a, b Job) int { return cmp.Compare(pred[b.Task], pred[a.Task]) })
	return order
}
