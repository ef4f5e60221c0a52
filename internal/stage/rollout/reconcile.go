package rollout

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Headers of a published trajectory (see docs/contracts.md).
const (
	HeaderRun     = "Coda-Run"
	HeaderTask    = "Coda-Task"
	HeaderSample  = "Coda-Sample"
	HeaderOutcome = "Coda-Outcome"
)

// reconcileMargin widens the stream scan of reconcile before the run's
// start, for clocks that disagree between the ledger's writer and the
// server that stamps messages.
const reconcileMargin = 10 * time.Minute

// reconcile makes the ledger agree with the stream before a run resumes:
// an episode of run whose trajectory is on subject but which the ledger
// does not list (the process stopped between the publish and the ledger
// write) is recorded from the stored trajectory and added to done, so it
// is not run again — a re-run could come back with another outcome than
// the trajectory the stream keeps, or, once the de-duplication window has
// passed, be stored twice. Only episodes in want are looked at; it returns
// how many it recorded. A stored trajectory of the run sampled from
// another planner checkpoint than checkpoint (the ledger lost the run's
// binding) is refused with ledger.ErrCheckpointChanged: the run must not
// mix two policies.
//
// With verify (rollout --verify) the same scan also goes the other way:
// an episode in done whose trajectory is not on subject (lost to damage of
// the stream's store, or purged) is forgotten by the ledger, taken out of
// done and returned in lost, so that it runs again.
//
// judged, when not nil, says whether an episode's trajectory was judged
// (its judgement archived) before the stream lost it: such an episode is
// kept, not run again — its judgement and archived trajectory stand, and a
// second trajectory would give its group one member too many. --verify
// refuses a run that started longer ago than the stream's age limit: its
// trajectories may have expired, not been lost.
func reconcile(ctx context.Context, b *bus.Bus, l *ledger.Ledger, subject, run, checkpoint string, since time.Time, want map[ledger.EpisodeKey]bool, done map[ledger.EpisodeKey]ledger.Record, verify bool, judged func(context.Context, ledger.Record) (bool, error), log *slog.Logger) (recorded int, lost []ledger.EpisodeKey, err error) {
	missing := 0
	for k := range want {
		if _, ok := done[k]; !ok {
			missing++
		}
	}
	if missing == 0 && !verify {
		return 0, nil, nil
	}
	type found struct {
		key ledger.EpisodeKey
		seq uint64
	}
	var todo []found
	seen := map[ledger.EpisodeKey]bool{}
	onStream := map[ledger.EpisodeKey]bool{}
	err = b.Scan(ctx, bus.Raw, subject, since.Add(-reconcileMargin), func(m bus.Stored) error {
		if m.Header.Get(HeaderRun) != run {
			return nil
		}
		k, err := strconv.Atoi(m.Header.Get(HeaderSample))
		if err != nil {
			log.Warn("rollout: a trajectory of this run on the stream has a bad sample header; ignored",
				"seq", m.Seq, "header", HeaderSample, "value", m.Header.Get(HeaderSample))
			return nil
		}
		key := ledger.EpisodeKey{Task: m.Header.Get(HeaderTask), Sample: k}
		onStream[key] = true
		if !want[key] || seen[key] {
			return nil
		}
		if _, ok := done[key]; ok {
			return nil
		}
		seen[key] = true // the first stored trajectory of an episode is the one that counts
		todo = append(todo, found{key, m.Seq})
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("rollout: compare the ledger of run %q with %s: %w", run, subject, err)
	}
	if verify {
		if err := checkAgeLimit(ctx, b, run, since); err != nil {
			return 0, nil, err
		}
		for k := range done {
			if !want[k] || onStream[k] {
				continue
			}
			if judged != nil {
				ok, err := judged(ctx, done[k])
				if err != nil {
					return 0, nil, fmt.Errorf("rollout: --verify: is trajectory %s of %s/%d judged: %w", done[k].ID, k.Task, k.Sample, err)
				}
				if ok {
					log.Warn("rollout: --verify: the trajectory is not on the stream but was judged before it was lost; its judgement stands, it does not run again",
						"run", run, "task", k.Task, "sample", k.Sample, "trajectory", done[k].ID)
					continue
				}
			}
			lost = append(lost, k)
		}
		slices.SortFunc(lost, func(a, b ledger.EpisodeKey) int {
			return cmp.Or(cmp.Compare(a.Task, b.Task), cmp.Compare(a.Sample, b.Sample))
		})
		for _, k := range lost {
			if err := l.Forget(ctx, run, k); err != nil {
				return 0, nil, err
			}
			delete(done, k)
			log.Warn("rollout: --verify: the ledger lists the episode as published, its trajectory is not on the stream (lost to store damage or purged); it runs again",
				"run", run, "task", k.Task, "sample", k.Sample, "subject", subject)
		}
	}
	n := 0
	for _, f := range todo {
		body, _, err := b.Get(ctx, bus.Raw, f.seq)
		if err != nil {
			return n, lost, fmt.Errorf("rollout: read %s/%d (seq %d) of run %q: %w", f.key.Task, f.key.Sample, f.seq, run, err)
		}
		t, err := traj.DecodeTrajectory(body)
		if err != nil {
			// Not ours to fix here: the consumers dead-letter it. The
			// episode runs again, and the new trajectory's id is the same.
			log.Warn("rollout: a trajectory of this run on the stream does not decode; the episode runs again",
				"task", f.key.Task, "sample", f.key.Sample, "seq", f.seq, "err", err)
			continue
		}
		if c := t.Models.Planner.Checkpoint; c != "" && c != checkpoint {
			return n, lost, fmt.Errorf("%w: trajectory %s of run %q on the stream was sampled from planner checkpoint %q, this invocation has %q; give this one a new --run name",
				ledger.ErrCheckpointChanged, t.ID, run, c, checkpoint)
		}
		rec := ledger.RecordOf(t)
		if err := l.MarkDone(ctx, run, f.key, rec, true); err != nil {
			return n, lost, err
		}
		done[f.key] = rec
		n++
		log.Warn("rollout: episode on the stream but not in the ledger (the last invocation stopped between the two); recorded, not run again",
			"task", f.key.Task, "sample", f.key.Sample, "trajectory", t.ID, "seq", f.seq, "outcome", rec.Outcome)
	}
	return n, lost, nil
}

// checkAgeLimit refuses --verify for a run that started before the oldest
// message the raw stream may keep (its MaxAge): the run's trajectories may
// have expired, and running them again would not repair anything.
func checkAgeLimit(ctx context.Context, b *bus.Bus, run string, since time.Time) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var maxAge time.Duration
	if err := bus.RetryTransient(cctx, 0, func(ctx context.Context) error {
		s, err := b.JetStream().Stream(ctx, bus.StreamName(bus.Raw))
		if err != nil {
			return err
		}
		maxAge = s.CachedInfo().Config.MaxAge
		return nil
	}, nil); err != nil {
		return fmt.Errorf("rollout: --verify: stream %s: %w", bus.StreamName(bus.Raw), err)
	}
	if maxAge > 0 && since.Before(time.Now().Add(-maxAge)) {
		return fmt.Errorf("rollout: --verify: run %q started %s, longer ago than %s keeps trajectories (max age %v): what is missing may have expired, not been lost; --verify is for runs younger than that",
			run, since.UTC().Format(time.RFC3339), bus.StreamName(bus.Raw), maxAge)
	}
	return nil
}
