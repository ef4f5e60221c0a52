package judge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/pkg/traj"
)

// testTime is the fixed "now" of the tests that need one.
var testTime = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

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
// success: every task of acceptApp 8 times, or under -race 6 tasks twice
// (12 episodes still give batched votes and successes).
func sharedCorpus(t testing.TB) *corpus {
	if raceEnabled {
		return skillCorpus(t, 0.3, 2, "S01", "S02", "S03", "S04", "S05", "S06")
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
// name run ("": each one's own) so that their judgements are new, and
// returns the copies.
func republish(t testing.TB, b *bus.Bus, trajs []*traj.Trajectory, run string, n int) []*traj.Trajectory {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []*traj.Trajectory
	for _, tr := range trajs[:min(n, len(trajs))] {
		cp := *tr
		cp.ID = traj.NewID()
		if run != "" {
			cp.Run = run
		}
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

const acceptApp = "ChimeraX"

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// readStream reads every message on subject of stream k with its body.
func readStream(t testing.TB, b *bus.Bus, k bus.Kind, subject string) []pipetest.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	msgs, err := pipetest.ReadStream(ctx, b, k, subject)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// judgedOn reads the judged trajectories of coda.judged.> and fails on
// any that does not decode and validate.
func judgedOn(t testing.TB, b *bus.Bus) ([]*traj.Judged, []pipetest.Message) {
	t.Helper()
	msgs := readStream(t, b, bus.Judged, bus.AllSubjects(bus.Judged))
	var out []*traj.Judged
	for _, m := range msgs {
		doc, err := traj.DecodeJudged(m.Body)
		if err == nil {
			err = doc.Validate()
		}
		if err != nil {
			t.Fatalf("judged message %d: %v", m.Seq, err)
		}
		out = append(out, doc)
	}
	return out, msgs
}

// archived reads the judged archive of store: key → document.
func archived(t testing.TB, store *blob.Store) map[string]*traj.Judged {
	t.Helper()
	docs, damaged := pipetest.Archived(t, store.Bucket())
	if len(damaged) > 0 {
		t.Fatalf("archive entries that do not decode: %q", damaged)
	}
	return docs
}

// cachedJudge is the acceptance tests' judge of ep with the default
// policy at testFrames, its vote cache on b and limits.
func cachedJudge(t testing.TB, b *bus.Bus, topo bus.Topology, store *blob.Store, ep EndpointSpec, limits Limits) *Judge {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cache, err := OpenCache(ctx, b, topo, 0)
	if err != nil {
		t.Fatal(err)
	}
	pol := CODAPolicy()
	pol.MaxFrames = testFrames
	j, err := New(Config{Endpoints: []EndpointSpec{ep}, Policy: pol, Store: store, Cache: cache, Log: quietLog(), Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// drainEnv is the environment of a `judge --drain` run by a test: a fresh
// NATS server, the corpus's blob store, the bus opened.
func drainEnv(t testing.TB, c *corpus) (*service.Env, *bus.Bus) {
	t.Helper()
	srv := natstest.Start(t)
	common := &service.Common{DataDir: t.TempDir(), Store: filepath.Join(c.dir, "blobs"), Drain: true}
	common.NATS.URL = srv.URL()
	env := service.NewEnv("judge", common, quietLog(), nil, nil)
	t.Cleanup(env.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := env.Bus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return env, b
}
