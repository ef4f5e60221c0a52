// Package ledger is the run ledger: a JetStream key-value bucket that
// records, per rollout run, its start and end and which episodes (task,
// sample) have been published, with a summary record of each. Rollout
// writes it to resume a run without duplicates; advantage reads whether a
// run has finished to complete its outcome groups.
package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
	"github.com/nats-io/nats.go/jetstream"
)

// Bucket is the JetStream key-value bucket that records runs and
// their published episodes.
const Bucket = "CODA_RUNS"

// Ledger records, per run, its start time and which episodes (task,
// sample) have been published, so that re-running a run after a crash
// finishes only the missing episodes.
//
// Keys: "<run>.start" → RFC 3339 start time; "<run>.end" → RFC 3339 time
// the last invocation of the run went through all its episodes (absent
// while one runs); "<run>.ep.<task>.<sample>" → a Record (JSON). Names are escaped into key tokens (see bus.KeyToken).
type Ledger struct {
	kv      jetstream.KeyValue
	timeout time.Duration
	budget  time.Duration // retry budget of each write (bus.RetryTransient)
}

// Open creates (with t's replicas) or opens the ledger bucket; an
// existing bucket is used as the operator configured it unless t.Update.
func Open(ctx context.Context, b *bus.Bus, t bus.Topology) (*Ledger, error) {
	kv, err := b.EnsureKeyValue(ctx, t, bus.KeyValueConfig(Bucket, "codapipe rollout runs and their published episodes", 0))
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return &Ledger{kv: kv, timeout: 10 * time.Second, budget: bus.DefaultRetryBudget}, nil
}

// SetRetryBudget sets how long each ledger write and read is retried
// through transient errors (a leader election, a short outage) before it
// fails; d <= 0 restores bus.DefaultRetryBudget.
func (l *Ledger) SetRetryBudget(d time.Duration) {
	if d <= 0 {
		d = bus.DefaultRetryBudget
	}
	l.budget = d
}

// retry runs op, each attempt under the ledger's timeout, retrying
// transient errors (bus.RetryTransient). Every op given is idempotent: a
// Create whose first attempt was stored answers ErrKeyExists, which the
// callers take as success; Put and Delete set the same state again.
func (l *Ledger) retry(ctx context.Context, op func(ctx context.Context) error) error {
	return bus.RetryTransient(ctx, l.budget, func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, l.timeout)
		defer cancel()
		return op(cctx)
	}, nil)
}

// Start returns the run's start time, recording now as the start when the
// run is new. Concurrent starters of one run agree on one time.
func (l *Ledger) Start(ctx context.Context, run string, now time.Time) (time.Time, error) {
	key := bus.KeyToken(run) + ".start"
	v := now.UTC().Truncate(time.Millisecond).Format(time.RFC3339Nano)
	stored, err := l.createOnce(ctx, run, key, []byte(v), "start")
	if err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, string(stored))
	if err != nil {
		return time.Time{}, fmt.Errorf("ledger: start of run %q: %w", run, err)
	}
	return t, nil
}

// Started returns the run's recorded start time, without recording one:
// ok is false for a run no rollout has started.
func (l *Ledger) Started(ctx context.Context, run string) (start time.Time, ok bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	e, err := l.kv.Get(cctx, bus.KeyToken(run)+".start")
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return time.Time{}, false, nil
	case err != nil:
		return time.Time{}, false, fmt.Errorf("ledger: start of run %q: %w", run, err)
	}
	t, err := time.Parse(time.RFC3339Nano, string(e.Value()))
	if err != nil {
		return time.Time{}, false, fmt.Errorf("ledger: start of run %q: %w", run, err)
	}
	return t, true, nil
}

// createOnce stores val under key unless the key holds a value, and
// returns the value the key holds then: the first writer's, which every
// writer of the run agrees on. A retried Create whose first attempt was
// stored finds the key: the value read back is then ours. what names the
// value in errors ("start" of run ...).
func (l *Ledger) createOnce(ctx context.Context, run, key string, val []byte, what string) ([]byte, error) {
	err := l.retry(ctx, func(ctx context.Context) error {
		_, err := l.kv.Create(ctx, key, val)
		if errors.Is(err, jetstream.ErrKeyExists) {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: record %s of run %q: %w", what, run, err)
	}
	var e jetstream.KeyValueEntry
	err = l.retry(ctx, func(ctx context.Context) error {
		var err error
		e, err = l.kv.Get(ctx, key)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: read %s of run %q: %w", what, run, err)
	}
	return e.Value(), nil
}

// Finish records that an invocation of the run went through every episode
// it had to run (each published or given up on): no more trajectories of
// it are coming unless the run is started again.
func (l *Ledger) Finish(ctx context.Context, run string, now time.Time) error {
	err := l.retry(ctx, func(ctx context.Context) error {
		_, err := l.kv.Put(ctx, bus.KeyToken(run)+".end", []byte(now.UTC().Format(time.RFC3339Nano)))
		return err
	})
	if err != nil {
		return fmt.Errorf("ledger: record end of run %q: %w", run, err)
	}
	return nil
}

// Reopen forgets that the run was finished: an invocation is running it.
func (l *Ledger) Reopen(ctx context.Context, run string) error {
	err := l.retry(ctx, func(ctx context.Context) error {
		err := l.kv.Delete(ctx, bus.KeyToken(run)+".end")
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("ledger: reopen run %q: %w", run, err)
	}
	return nil
}

// Finished reports whether the run's last invocation went through all its
// episodes and none is running now (see Finish).
func (l *Ledger) Finished(ctx context.Context, run string) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	_, err := l.kv.Get(cctx, bus.KeyToken(run)+".end")
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("ledger: end of run %q: %w", run, err)
	}
	return true, nil
}

// EpisodeKey names one episode: a task and a sample index.
type EpisodeKey struct {
	Task   string
	Sample int
}

// Record is what the ledger keeps of a published episode: enough for the
// summary of a resumed run.
type Record struct {
	ID      string           `json:"id"` // trajectory id
	Outcome traj.OutcomeKind `json:"outcome"`
	Passed  bool             `json:"passed"` // the evaluator passed
	// Unscored: the evaluator could not score the episode (it failed, a
	// check is unsupported, or there is none), so it is neither a success
	// nor a failure of the agent.
	Unscored bool `json:"unscored,omitempty"`
	Steps    int  `json:"steps"`
	// Grounding counts the executor's answers (absent in records written
	// before it was kept).
	Grounding Grounding `json:"grounding,omitzero"`
	// Plans counts how varied the planner's plans were (absent in records
	// written before it was kept).
	Plans PlanVariety `json:"plans,omitzero"`
	// PredictedS is the episode's VM time in seconds as predicted before
	// it ran (rollout's length history; absent without one), and
	// PredictedFromHistory whether that came from its task's history
	// rather than its step limit.
	PredictedS           float64 `json:"predicted_s,omitempty"`
	PredictedFromHistory bool    `json:"predicted_from_history,omitempty"`
}

// PlanVariety counts the steps of trajectories by how varied their plans
// are: a step whose plans are all the same text has a group without
// variance, whose advantages are all 0.
type PlanVariety struct {
	// Sampled steps have two or more plans; Identical of them have all
	// their G+1 plans textually identical.
	Sampled   int `json:"sampled_steps"`
	Identical int `json:"identical_steps"`
	// Groups are the steps with a group of two or more plans (plans
	// 1..G, G >= 2); Varied of them have at least two different plans in
	// the group.
	Groups int `json:"groups"`
	Varied int `json:"varied_groups"`
}

// Add adds o's counts to v.
func (v *PlanVariety) Add(o PlanVariety) {
	v.Sampled += o.Sampled
	v.Identical += o.Identical
	v.Groups += o.Groups
	v.Varied += o.Varied
}

// PlanVarietyOf counts a trajectory's steps by how varied their plans are.
func PlanVarietyOf(t *traj.Trajectory) PlanVariety {
	var v PlanVariety
	for _, s := range t.Steps {
		c := s.Candidates
		if len(c) < 2 {
			continue
		}
		v.Sampled++
		if allSame(c) {
			v.Identical++
		}
		if len(c) >= 3 {
			v.Groups++
			if !allSame(c[1:]) {
				v.Varied++
			}
		}
	}
	return v
}

func allSame(c []traj.Candidate) bool {
	for _, x := range c[1:] {
		if x.Plan != c[0].Plan {
			return false
		}
	}
	return true
}

// RecordOf summarises a trajectory for the ledger.
func RecordOf(t *traj.Trajectory) Record {
	r := Record{ID: t.ID, Outcome: t.Outcome.Kind, Passed: t.Eval != nil && t.Eval.Passed, Steps: len(t.Steps),
		Grounding: GroundingOf(t), Plans: PlanVarietyOf(t)}
	if t.Outcome.Kind != traj.OutcomeEnvError {
		r.Unscored = t.Eval == nil || t.Eval.Error != "" || len(t.Eval.Unsupported) > 0
	}
	return r
}

// MarkDone records that an episode's trajectory was published. With
// keepExisting, a record already there is left as it is.
func (l *Ledger) MarkDone(ctx context.Context, run string, ep EpisodeKey, rec Record, keepExisting bool) error {
	key := episodeKey(run, ep)
	val, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	// Create is idempotent here: a retried Create whose first attempt was
	// stored finds the key (ErrKeyExists), which is success; Put stores
	// the same value again.
	err = l.retry(ctx, func(ctx context.Context) error {
		if keepExisting {
			_, err := l.kv.Create(ctx, key, val)
			if errors.Is(err, jetstream.ErrKeyExists) {
				return nil
			}
			return err
		}
		_, err := l.kv.Put(ctx, key, val)
		return err
	})
	if err != nil {
		return fmt.Errorf("ledger: mark %s/%d of run %q: %w", ep.Task, ep.Sample, run, err)
	}
	return nil
}

// Forget removes the record of one episode of run: its trajectory is not
// on the stream after all (lost to store damage, purged), and the episode
// is to run again (rollout --verify). Forgetting an episode without a
// record is not an error.
func (l *Ledger) Forget(ctx context.Context, run string, ep EpisodeKey) error {
	err := l.retry(ctx, func(ctx context.Context) error {
		return l.kv.Delete(ctx, episodeKey(run, ep))
	})
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("ledger: forget %s/%d of run %q: %w", ep.Task, ep.Sample, run, err)
	}
	return nil
}

func episodeKey(run string, ep EpisodeKey) string {
	return fmt.Sprintf("%s.ep.%s.%d", bus.KeyToken(run), bus.KeyToken(ep.Task), ep.Sample)
}

// Published returns the ledger record of one episode of run and whether
// there is one (its trajectory was published).
func (l *Ledger) Published(ctx context.Context, run string, ep EpisodeKey) (Record, bool, error) {
	var rec Record
	var e jetstream.KeyValueEntry
	err := l.retry(ctx, func(ctx context.Context) error {
		var err error
		e, err = l.kv.Get(ctx, episodeKey(run, ep))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			e, err = nil, nil
		}
		return err
	})
	if err != nil {
		return rec, false, fmt.Errorf("ledger: read %s/%d of run %q: %w", ep.Task, ep.Sample, run, err)
	}
	if e == nil {
		return rec, false, nil
	}
	rec, err = decodeRecord(e.Key(), e.Value())
	if err != nil {
		return rec, false, err
	}
	return rec, true, nil
}

// Done returns the run's published episodes of the given tasks. It reads
// the records with one watcher (the server streams them; no request per
// key), and fails when the server sends nothing for the ledger's timeout.
func (l *Ledger) Done(ctx context.Context, run string, tasks []string) (map[EpisodeKey]Record, error) {
	byToken := make(map[string]string, len(tasks))
	for _, t := range tasks {
		byToken[bus.KeyToken(t)] = t
	}
	done := map[EpisodeKey]Record{}
	err := l.scan(ctx, run, func(taskToken string, sample int, decode func() (Record, error)) error {
		task, ok := byToken[taskToken]
		if !ok {
			return nil // an episode of a task not in this invocation
		}
		rec, err := decode()
		if err != nil {
			return err
		}
		done[EpisodeKey{Task: task, Sample: sample}] = rec
		return nil
	})
	if err != nil {
		return nil, err
	}
	return done, nil
}

// Records returns every published episode's record of run, by trajectory
// id: what a consumer of the run's trajectories compares with what it
// received (a trajectory the stream lost to damage is listed here).
func (l *Ledger) Records(ctx context.Context, run string) (map[string]Record, error) {
	out := map[string]Record{}
	err := l.scan(ctx, run, func(_ string, _ int, decode func() (Record, error)) error {
		rec, err := decode()
		if err == nil {
			out[rec.ID] = rec
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Unreceived compares a finished run's ledger with what a consumer took
// in: it returns the trajectories the ledger lists as published that have
// does not know, sorted, and how many it lists. While the run is not over
// (finished false) nothing is compared: its ledger is ahead of the
// streams, and have is not called.
func (l *Ledger) Unreceived(ctx context.Context, run string, have func(id string) bool) (missing []string, listed int, finished bool, err error) {
	if finished, err = l.Finished(ctx, run); err != nil || !finished {
		return nil, 0, finished, err
	}
	recs, err := l.Records(ctx, run)
	if err != nil {
		return nil, 0, true, err
	}
	for id := range recs {
		if !have(id) {
			missing = append(missing, id)
		}
	}
	slices.Sort(missing)
	return missing, len(recs), true, nil
}

// scan calls f with each published episode of run (its task as a key
// token, its sample, and the decoding of its record), read with one
// watcher; an error of f ends it.
func (l *Ledger) scan(ctx context.Context, run string, f func(taskToken string, sample int, decode func() (Record, error)) error) error {
	prefix := bus.KeyToken(run) + ".ep."
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := l.kv.WatchFiltered(wctx, []string{prefix + ">"}, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("ledger: read run %q: %w", run, err)
	}
	defer w.Stop()
	idle := time.NewTimer(l.timeout)
	defer idle.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("ledger: read run %q: %w", run, ctx.Err())
		case <-idle.C:
			return fmt.Errorf("ledger: read run %q: nothing from the server for %v after %d records", run, l.timeout, n)
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("ledger: read run %q: the watcher stopped after %d records", run, n)
			}
			if e == nil {
				return nil // every current record has been delivered
			}
			idle.Reset(l.timeout)
			rest := strings.TrimPrefix(e.Key(), prefix)
			i := strings.LastIndexByte(rest, '.')
			if i < 0 {
				continue
			}
			k, err := strconv.Atoi(rest[i+1:])
			if err != nil {
				continue
			}
			n++
			if err := f(rest[:i], k, func() (Record, error) { return decodeRecord(e.Key(), e.Value()) }); err != nil {
				return err
			}
		}
	}
}

// Grounding counts what the executor answered in one episode (or a run):
// how many candidates it grounded, how many answers did not parse, how
// many were well formed but outside its coordinate space, and the largest
// numbers it wrote, in the units of its space.
type Grounding struct {
	Grounded   int `json:"grounded"`               // candidates sent to the executor
	Unparsed   int `json:"unparsed,omitempty"`     // answers that are not an action (syntax)
	OutOfRange int `json:"out_of_range,omitempty"` // well-formed points outside the space
	Points     int `json:"points,omitempty"`       // points parsed
	// MaxX and MaxY are the largest x and y written (normalised point ×
	// the space's extent); ExtW and ExtH the extents of the space on the
	// screenshots (e.g. 1288 and 812 for pixels-resized on 1280×800).
	MaxX float64 `json:"max_x,omitempty"`
	MaxY float64 `json:"max_y,omitempty"`
	ExtW float64 `json:"ext_w,omitempty"`
	ExtH float64 `json:"ext_h,omitempty"`
}

// GroundingOf counts the executor's answers in a trajectory, in the
// executor's recorded coordinate space.
func GroundingOf(t *traj.Trajectory) Grounding {
	var g Grounding
	space := t.Models.Executor.Space()
	for _, s := range t.Steps {
		w, h, err := uitars.Extent(space, uitars.Screen{W: s.Screenshot.Width, H: s.Screenshot.Height})
		if err == nil {
			g.ExtW, g.ExtH = max(g.ExtW, w), max(g.ExtH, h)
		}
		for _, c := range s.Candidates {
			if c.ExecutorOutput == "" && c.ParseError == "" {
				continue // an answer: not grounded
			}
			g.Grounded++
			switch {
			case c.ParseErrorKind == traj.ParseOutOfRange:
				g.OutOfRange++
			case c.Action == nil:
				g.Unparsed++
			case err == nil:
				for _, p := range []*traj.Point{c.Action.Point, c.Action.Start, c.Action.End} {
					if p != nil {
						g.Points++
						g.MaxX, g.MaxY = max(g.MaxX, p.X*w), max(g.MaxY, p.Y*h)
					}
				}
			}
		}
	}
	return g
}

// Add accumulates o into g.
func (g *Grounding) Add(o Grounding) {
	g.Grounded += o.Grounded
	g.Unparsed += o.Unparsed
	g.OutOfRange += o.OutOfRange
	g.Points += o.Points
	g.MaxX, g.MaxY = max(g.MaxX, o.MaxX), max(g.MaxY, o.MaxY)
	g.ExtW, g.ExtH = max(g.ExtW, o.ExtW), max(g.ExtH, o.ExtH)
}

// Scores are a run's outcome figures computed from its episode records by
// Tally: the one place the success rate, Average@K and Pass@K are defined.
type Scores struct {
	// Episodes counts every record; EnvErrors those ended by an environment
	// error, Unscored those the evaluator could not score. Neither counts
	// in Rate, AverageAtK or PassAtK; env errors do not count in MeanSteps.
	Episodes  int `json:"episodes"`
	EnvErrors int `json:"env_errors"`
	Unscored  int `json:"unscored"`
	// Successes are the scored episodes the evaluator passed; Rate divides
	// them by the scored episodes.
	Successes int     `json:"successes"`
	Rate      float64 `json:"success_rate"`
	// AverageAtK is the mean over tasks of the success fraction of their
	// scored samples; PassAtK the fraction of those tasks with at least
	// one success. ScoredTasks is the number of tasks averaged over.
	AverageAtK  float64 `json:"average_at_k"`
	PassAtK     float64 `json:"pass_at_k"`
	ScoredTasks int     `json:"scored_tasks"`
	// MeanSteps is the mean step count of the episodes that did not end
	// by an environment error.
	MeanSteps float64 `json:"mean_steps"`
	// Outcomes counts the records by outcome kind.
	Outcomes map[string]int `json:"outcomes"`
}

// Tally accumulates episode records into Scores. The zero value is ready.
type Tally struct {
	s       Scores
	perTask map[string]*taskTally
	steps   int
	valid   int
}

type taskTally struct{ ok, n int }

// Add counts one episode record of task.
func (t *Tally) Add(task string, r Record) {
	if t.perTask == nil {
		t.perTask = map[string]*taskTally{}
		t.s.Outcomes = map[string]int{}
	}
	t.s.Episodes++
	t.s.Outcomes[string(r.Outcome)]++
	a := t.perTask[task]
	if a == nil {
		a = &taskTally{}
		t.perTask[task] = a
	}
	if r.Outcome == traj.OutcomeEnvError {
		t.s.EnvErrors++
		return
	}
	t.valid++
	t.steps += r.Steps
	if r.Unscored {
		t.s.Unscored++
		return
	}
	a.n++
	if r.Passed {
		a.ok++
		t.s.Successes++
	}
}

// Scores returns the figures of the records added so far.
func (t *Tally) Scores() Scores {
	s := t.s
	s.Outcomes = make(map[string]int, len(t.s.Outcomes))
	for k, v := range t.s.Outcomes {
		s.Outcomes[k] = v
	}
	if t.valid > 0 {
		s.MeanSteps = float64(t.steps) / float64(t.valid)
	}
	if n := t.valid - s.Unscored; n > 0 {
		s.Rate = float64(s.Successes) / float64(n)
	}
	for _, a := range t.perTask {
		if a.n == 0 {
			continue
		}
		s.ScoredTasks++
		s.AverageAtK += float64(a.ok) / float64(a.n)
		if a.ok > 0 {
			s.PassAtK++
		}
	}
	if s.ScoredTasks > 0 {
		s.AverageAtK /= float64(s.ScoredTasks)
		s.PassAtK /= float64(s.ScoredTasks)
	}
	return s
}
