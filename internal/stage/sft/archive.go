package sft

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/contract/archive"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/pkg/traj"
)

// matchAny reports whether s matches one of the glob patterns (path.Match;
// a plain name matches itself); no patterns match everything.
func matchAny(patterns []string, s string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, s); ok {
			return true
		}
	}
	return false
}

// record is what the first pass keeps of one archive record: enough to
// choose a trajectory's judgement and to filter it, not the trajectory.
type record struct {
	archive.Name
	// Err says why the record cannot be used (it does not decode, or does
	// not match its key); the fields below are then zero.
	Err       string
	Task      string
	JudgedAt  time.Time
	StartedAt time.Time
	Decision  traj.Decision
	Judge     traj.JudgeVersion
	// EvalRan: the task's evaluator ran every check (no unsupported
	// check, no evaluator error); EvalPassed: and they passed.
	EvalRan, EvalPassed bool
}

// readJudged reads and decodes the judged trajectory archived under key.
// A record that does not decode or does not match its key is an
// *inputError; a store failure is returned as is.
func readJudged(ctx context.Context, store *blob.Store, k archive.Name) (*traj.Judged, error) {
	jd, _, err := archive.Read(ctx, store.Bucket(), k.Key)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return nil, inputErr("the record is no longer in the archive")
	case blob.Damaged(err):
		return nil, inputErr("the record does not match its recorded checksum: %v", err)
	case errors.Is(err, archive.ErrDamaged):
		return nil, inputErr("%v", err)
	case err != nil:
		return nil, fmt.Errorf("sft: read %s: %w", k.Key, err)
	}
	t, j := &jd.Trajectory, &jd.Judgement
	switch {
	case t.ID != k.ID || j.TrajectoryID != k.ID:
		return nil, inputErr("the record is of trajectory %q (judgement of %q), its key names %q", t.ID, j.TrajectoryID, k.ID)
	case t.Run != k.Run || t.Task.App != k.App:
		return nil, inputErr("the record is of run %q app %q, its key names run %q app %q", t.Run, t.Task.App, k.Run, k.App)
	case j.Judge.ID() != k.Version:
		return nil, inputErr("the record is judged by judge version %s, its key names %s", j.Judge.ID(), k.Version)
	}
	return jd, nil
}

// summarize keeps what the first pass needs of a judged trajectory.
func summarize(k archive.Name, jd *traj.Judged) record {
	r := record{Name: k, Task: jd.Trajectory.Task.ID, JudgedAt: jd.Judgement.JudgedAt,
		StartedAt: jd.Trajectory.StartedAt, Decision: jd.Judgement.Decision, Judge: jd.Judgement.Judge}
	if e := jd.Trajectory.Eval; e != nil && len(e.Unsupported) == 0 && e.Error == "" {
		r.EvalRan, r.EvalPassed = true, e.Passed
	}
	return r
}

// listArchive lists the archive records of the selected runs and apps, in
// key order, and the keys under judged/ that are not archive records.
func listArchive(ctx context.Context, store *blob.Store, runs, apps []string) (keys []archive.Name, strays []string, err error) {
	for info, err := range store.Bucket().List(ctx, archive.Prefix) {
		if err != nil {
			return nil, nil, fmt.Errorf("sft: list %s in %s: %w", archive.Prefix, store, err)
		}
		k, ok := archive.Parse(info.Key)
		if !ok {
			strays = append(strays, info.Key)
			continue
		}
		if matchAny(runs, k.Run) && matchAny(apps, k.App) {
			keys = append(keys, k)
		}
	}
	return keys, strays, nil
}

// readRecords reads every listed record with workers goroutines and
// returns their summaries in the order of keys. Only store failures are
// errors; a record that cannot be used has Err set.
func readRecords(ctx context.Context, store *blob.Store, keys []archive.Name, workers int, done func()) ([]record, error) {
	out := make([]record, len(keys))
	err := parallel(ctx, len(keys), workers, func(ctx context.Context, i int) error {
		defer done()
		jd, err := readJudged(ctx, store, keys[i])
		var ie *inputError
		if errors.As(err, &ie) {
			out[i] = record{Name: keys[i], Err: ie.Reason}
			return nil
		}
		if err != nil {
			return err
		}
		out[i] = summarize(keys[i], jd)
		return nil
	})
	return out, err
}

// chooseJudgement picks the judgement of one trajectory among its records
// (all of one trajectory id, in key order): the record of version want
// when want is given, else the one judged last (the greater version id on
// equal times). It returns nil and a reason when the trajectory has no
// usable judgement: none of version want, or a record it could not read
// among the candidates (a newer judgement might be the unreadable one).
func chooseJudgement(recs []record, want string) (*record, string) {
	if want != "" {
		for i := range recs {
			if recs[i].Version == want {
				if recs[i].Err != "" {
					return nil, "its judgement by version " + want + " does not decode"
				}
				return &recs[i], ""
			}
		}
		return nil, "no judgement by judge version " + want
	}
	var best *record
	for i := range recs {
		r := &recs[i]
		if r.Err != "" {
			return nil, "a judgement record of it does not decode (" + r.Key + ")"
		}
		if best == nil || r.JudgedAt.After(best.JudgedAt) || (r.JudgedAt.Equal(best.JudgedAt) && r.Version > best.Version) {
			best = r
		}
	}
	return best, ""
}

// setJudgeVersion is the judge version a build without --judge-version
// takes, one for the whole set: the version whose readable records judged
// the most distinct trajectories; on a tie the one that judged first (the
// earliest judged_at of its records: the judgement a set would have been
// made from then, as a shard set is bound to the first version it takes),
// then the smaller id. "" when no record is readable.
func setJudgeVersion(recs []record) string {
	type tally struct {
		ids   map[string]bool
		first time.Time
	}
	by := map[string]*tally{}
	for _, r := range recs {
		if r.Err != "" {
			continue
		}
		t := by[r.Version]
		if t == nil {
			t = &tally{ids: map[string]bool{}, first: r.JudgedAt}
			by[r.Version] = t
		}
		t.ids[r.ID] = true
		if r.JudgedAt.Before(t.first) {
			t.first = r.JudgedAt
		}
	}
	best := ""
	for _, v := range slices.Sorted(maps.Keys(by)) {
		if best == "" {
			best = v
			continue
		}
		a, b := by[v], by[best]
		if len(a.ids) > len(b.ids) || len(a.ids) == len(b.ids) && a.first.Before(b.first) {
			best = v
		}
	}
	return best
}

// groupByTrajectory groups records by trajectory id, ids in sorted order,
// each group in key order.
func groupByTrajectory(recs []record) (ids []string, groups map[string][]record) {
	groups = map[string][]record{}
	for _, r := range recs {
		if _, ok := groups[r.ID]; !ok {
			ids = append(ids, r.ID)
		}
		groups[r.ID] = append(groups[r.ID], r)
	}
	slices.Sort(ids)
	return ids, groups
}

// parallel runs fn(ctx, i) for i in [0, n) on at most workers goroutines
// and returns the first error (the others are cancelled).
func parallel(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	if n == 0 {
		return nil
	}
	workers = max(1, min(workers, n))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range workers {
		wg.Go(func() {
			for i := range next {
				if ctx.Err() != nil {
					continue
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel(err) })
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// inputError is input that cannot become samples: the trajectory (or
// record) is skipped with Reason.
type inputError struct{ Reason string }

func (e *inputError) Error() string { return e.Reason }

func inputErr(format string, args ...any) error {
	return &inputError{Reason: fmt.Sprintf(format, args...)}
}
