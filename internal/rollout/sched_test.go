package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/agent"
	"github.com/codapipe/codapipe/internal/scienceboard"
	"github.com/codapipe/codapipe/internal/sim"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/vmpool"
)

// failFirst is a Runner whose first attempt of each listed episode ends by
// a VM fault; every other attempt finishes at once.
type failFirst struct {
	fail map[EpisodeKey]bool

	mu   sync.Mutex
	runs map[EpisodeKey][]string // VMs, per episode, in attempt order
}

func (r *failFirst) Run(ctx context.Context, ep agent.Episode) (*traj.Trajectory, error) {
	key := EpisodeKey{ep.Task.ID, ep.Sample}
	r.mu.Lock()
	r.runs[key] = append(r.runs[key], ep.VM)
	first := len(r.runs[key]) == 1
	r.mu.Unlock()
	t := &traj.Trajectory{ID: fmt.Sprintf("%s-%d", ep.Task.ID, ep.Sample), Outcome: traj.Outcome{Kind: traj.OutcomeFinished}}
	if first && r.fail[key] {
		ee := &agent.EnvError{Op: "screenshot", Err: errors.New("guest gone"), VM: true}
		t.Outcome = traj.Outcome{Kind: traj.OutcomeEnvError, Reason: ee.Error()}
		return t, ee
	}
	return t, nil
}

// simPool starts n simulated guests — those in hung with a snapshot
// revert that never ends, so the pool quarantines them at start — and a
// real vmpool.Pool over them.
func simPool(t *testing.T, n int, hung map[int]bool) *vmpool.Pool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	urls := make([]string, n)
	for i := range urls {
		gc := sim.GuestConfig{Seed: uint64(i), Clock: sim.Clock{Scale: 1}}
		if hung[i] {
			gc.RevertTime = sim.Fixed(time.Hour)
		}
		u, err := sim.StartGuest(ctx, sim.NewMachine(sim.MachineConfig{Seed: int64(i), ID: fmt.Sprintf("vm-%d", i)}), gc)
		if err != nil {
			t.Fatal(err)
		}
		urls[i] = u
	}
	sc := vmpool.SimURLs(urls...)
	sc.PollInterval = 5 * time.Millisecond
	pool, err := vmpool.NewPool(ctx, vmpool.PoolConfig{
		ID: "sched-test", Backend: vmpool.BackendSim, Sim: &sc, IdleCheck: -1, LockDir: t.TempDir(),
		RetryWait: 10 * time.Millisecond, Timeouts: vmpool.Timeouts{Start: 2 * time.Second, Reset: 2 * time.Second},
	}, vmpool.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close(context.Background()) })
	return pool
}

// Regression: with one usable VM and two workers, a retried episode must
// not leave one worker holding the VM for it (waiting for a job it can run
// there) while the other worker holds the episode and waits in Lease for
// that VM.
func TestSchedulerRetryWithOneUsableVM(t *testing.T) {
	pool := simPool(t, 2, map[int]bool{1: true})
	task := &scienceboard.Task{ID: "A", Steps: 5}
	jobs := []Job{{Task: task, Sample: 0}}
	r := &failFirst{fail: map[EpisodeKey]bool{{"A", 0}: true}, runs: map[EpisodeKey][]string{}}
	s := &Scheduler{Runner: r, Pool: poolAdapter{pool}, Workers: 2, EnvRetries: 2, Samples: 1, Mode: Dynamic,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	results, err := s.Run(ctx, jobs)
	if err != nil {
		t.Fatalf("Run: %v (hung until the test's deadline)", err)
	}
	for _, res := range results {
		if res.Err != nil || res.Trajectory == nil || res.Trajectory.Outcome.Kind != traj.OutcomeFinished {
			t.Errorf("%s/%d: %+v: want it finished", res.Job.Task.ID, res.Job.Sample, res)
		}
	}
	if got := r.runs[EpisodeKey{"A", 0}]; len(got) != 2 {
		t.Errorf("A/0 ran on %v: want the failed attempt and one retry", got)
	}
}
