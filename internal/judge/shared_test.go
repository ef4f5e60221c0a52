package judge

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/bus"
	"github.com/codapipe/codapipe/internal/pipetest"
	"github.com/codapipe/codapipe/pkg/traj"
)

// corpus is a simulated run's trajectories with the blob store that holds
// their screenshots, shared by the tests and benchmarks of one binary
// (pipetest.Once): tests add to its store under run names of their own.
type corpus struct {
	dir   string // data directory (embedded NATS store, blobs)
	trajs []*traj.Trajectory
}

// testFrames is --max-frames of the acceptance tests: fewer under -race,
// where encoding the images of a call costs ~10× more.
var testFrames = map[bool]int{false: DefaultMaxFrames, true: 6}[raceEnabled]

// sharedCorpus is the acceptance tests' simulated run at about 20 % true
// success: every task of acceptApp 8 times, or under -race 6 tasks 3 times.
func sharedCorpus(t testing.TB) *corpus {
	if raceEnabled {
		return skillCorpus(t, 0.3, 3, "S01", "S02", "S03", "S04", "S05", "S06")
	}
	return skillCorpus(t, 0.3, 8)
}

// skillCorpus is a simulated rollout of acceptApp with planner skill
// skill (0.3 gives about 20 % true success), samples per task, no
// environment errors; tasks are the ids of the simulator's tasks to run
// (none: all).
func skillCorpus(t testing.TB, skill float64, samples int, tasks ...string) *corpus {
	t.Helper()
	p := pipetest.Once(t, pipetest.Spec{
		App: acceptApp, Tasks: tasks, Samples: samples, Group: -1, TimeScale: 0.0002,
		Run: fmt.Sprintf("skill%v-k%d", skill, samples), Sim: fmt.Sprintf(`{"models": {"planner": {"default_skill": %v}}}`, skill),
	})
	return &corpus{dir: p.Dir, trajs: p.Trajectories}
}

// republish publishes up to n of trajs again under new ids and the run
// name run (so that their judgements are new) and returns the copies.
func republish(t testing.TB, b *bus.Bus, trajs []*traj.Trajectory, run string, n int) []*traj.Trajectory {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []*traj.Trajectory
	for _, tr := range trajs[:min(n, len(trajs))] {
		cp := *tr
		cp.ID, cp.Run = traj.NewID(), run
		body, err := traj.MarshalCompact(&cp)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Publish(ctx, bus.Subject(bus.Raw, cp.Task.App), cp.ID, body, nil); err != nil {
			t.Fatal(err)
		}
		out = append(out, &cp)
	}
	return out
}

// store opens the corpus's blob store.
func (c *corpus) store(t testing.TB) *blob.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := blob.Open(ctx, filepath.Join(c.dir, "blobs"), blob.Config{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
