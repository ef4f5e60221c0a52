package sched

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
	"github.com/codapipe/codapipe/internal/poll"
	"github.com/codapipe/codapipe/internal/scienceboard"
	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/fault"
	simguest "github.com/codapipe/codapipe/internal/sim/guest"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/simvm"
)

// failFirst is a Runner whose first attempt of each listed episode ends by
// a VM fault; every other attempt finishes at once.
type failFirst struct {
	fail map[benchKey]bool

	mu   sync.Mutex
	runs map[benchKey][]string // VMs, per episode, in attempt order
}

func (r *failFirst) Run(ctx context.Context, ep agent.Episode) (*traj.Trajectory, error) {
	key := benchKey{ep.Task.ID, ep.Sample}
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
func simPool(t *testing.T, n int, hung map[int]bool, opts ...vmpool.Option) *vmpool.Pool {
	t.Helper()
	return simPoolWith(t, n, hung, nil, opts...)
}

// simPoolWith is simPool with a change to the pool's configuration.
func simPoolWith(t *testing.T, n int, hung map[int]bool, edit func(*vmpool.Config), opts ...vmpool.Option) *vmpool.Pool {
	t.Helper()
	return poolOver(t, startGuests(t, n, hung), edit, opts...)
}

// startGuests starts n simulated guests (those in hung with a snapshot
// revert that never ends) and returns their URLs.
func startGuests(t *testing.T, n int, hung map[int]bool) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	urls := make([]string, n)
	for i := range urls {
		gc := simguest.Config{Seed: uint64(i), Clock: fault.Clock{Scale: 1}}
		if hung[i] {
			gc.RevertTime = fault.Fixed(time.Hour)
		}
		g, err := simguest.Start(ctx, desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog(), Seed: int64(i)}), gc)
		if err != nil {
			t.Fatal(err)
		}
		urls[i] = g.URL
	}
	return urls
}

// poolOver is a real vmpool.Pool over simulated guests at urls, closed at
// the test's end; edit changes its configuration.
func poolOver(t *testing.T, urls []string, edit func(*vmpool.Config), opts ...vmpool.Option) *vmpool.Pool {
	t.Helper()
	sc := simvm.URLs(urls...)
	sc.PollInterval = 5 * time.Millisecond
	b, err := simvm.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := vmpool.Config{
		ID: "sched-test", IdleCheck: -1, LockDir: t.TempDir(),
		RetryWait: 10 * time.Millisecond, Timeouts: vmpool.Timeouts{Start: 2 * time.Second, Reset: 2 * time.Second},
	}
	if edit != nil {
		edit(&cfg)
	}
	pool, err := vmpool.NewPool(context.Background(), cfg, b, append([]vmpool.Option{vmpool.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)...)
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
	r := &failFirst{fail: map[benchKey]bool{{"A", 0}: true}, runs: map[benchKey][]string{}}
	s := &Scheduler{Runner: r, Pool: VMPool(pool), Workers: 2, EnvRetries: 2, Samples: 1, Mode: Dynamic,
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
	if got := r.runs[benchKey{"A", 0}]; len(got) != 2 {
		t.Errorf("A/0 ran on %v: want the failed attempt and one retry", got)
	}
}

// failOn is a Runner whose attempts on one VM always end by a VM fault;
// attempts elsewhere finish after took.
type failOn struct {
	vm   string
	took time.Duration

	mu   sync.Mutex
	runs map[string]int // attempts per VM
}

func (r *failOn) Run(ctx context.Context, ep agent.Episode) (*traj.Trajectory, error) {
	r.mu.Lock()
	r.runs[ep.VM]++
	r.mu.Unlock()
	t := &traj.Trajectory{ID: fmt.Sprintf("%s-%d", ep.Task.ID, ep.Sample), Outcome: traj.Outcome{Kind: traj.OutcomeFinished}}
	if ep.VM == r.vm {
		ee := &agent.EnvError{Op: "screenshot", Err: errors.New("guest gone"), VM: true}
		t.Outcome = traj.Outcome{Kind: traj.OutcomeEnvError, Reason: ee.Error()}
		return t, ee
	}
	select {
	case <-time.After(r.took):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return t, nil
}

// Regression: a VM that fails every episode is never reported healthy and
// its failures in a row are all its attempts. (An earlier scheduler handed
// a VM back unused with a healthy verdict, which wiped the count and kept
// such a VM out of quarantine in the faulty-VMs acceptance run.)
func TestSchedulerUnusedVMKeepsItsFailures(t *testing.T) {
	for round := range 4 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			var mu sync.Mutex
			var healthy []string
			pool := simPool(t, 2, nil, vmpool.WithEvents(func(e vmpool.Event) {
				if e.VM == "sim-0" && e.Kind == vmpool.EventReleased && e.Healthy {
					mu.Lock()
					healthy = append(healthy, e.Time.String())
					mu.Unlock()
				}
			}))
			jobs := []Job{
				{Task: &scienceboard.Task{ID: "X", Steps: 10}, Sample: 0},
				{Task: &scienceboard.Task{ID: "Y", Steps: 5}, Sample: 0},
			}
			r := &failOn{vm: "sim-0", took: 200 * time.Millisecond, runs: map[string]int{}}
			s := &Scheduler{Runner: r, Pool: VMPool(pool), Workers: 2, EnvRetries: 5, Samples: 1, Mode: Dynamic,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			results, err := s.Run(ctx, jobs)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			for _, res := range results {
				if res.Err != nil || res.Trajectory == nil || res.Trajectory.Outcome.Kind != traj.OutcomeFinished {
					t.Errorf("%s/%d: %+v: want it finished on sim-1", res.Job.Task.ID, res.Job.Sample, res)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			// Every episode on sim-0 failed: nothing may have reported it
			// healthy, and its failures in a row are all its attempts.
			if len(healthy) > 0 {
				t.Errorf("sim-0 released healthy %d times, yet every episode on it failed", len(healthy))
			}
			var failures int
			for _, v := range pool.VMs() {
				if v.Spec.ID == "sim-0" {
					failures = v.Failures
					if v.Quarantine != nil {
						failures = v.Quarantine.Failures
					}
				}
			}
			if n := r.runs["sim-0"]; failures != n {
				t.Errorf("sim-0: %d failures in a row after %d failed attempts", failures, n)
			}
			if n := r.runs["sim-0"]; n == 0 {
				t.Error("no episode ran on sim-0: the test proved nothing")
			}
			t.Logf("attempts per VM %v", r.runs)
		})
	}
}

// More workers than usable VMs (half the pool hangs at start and is
// quarantined), and every episode fails its first attempt. Seen stalling
// for the 10-minute retry wait: a worker parked the last usable VM to wait
// for a job that had not failed there, while every pending job had, and
// the other workers waited in Lease for that very VM. A job that no other
// VM in rotation can take now runs on the parked one.
func TestSchedulerRetriesWithFewUsableVMsNeverStall(t *testing.T) {
	for _, tc := range []struct {
		name       string
		quarantine int // failures in a row (0: the default, 3)
	}{
		// The usable VMs fail fresh episodes often enough to be
		// quarantined too: the run must end anyway, with the jobs left
		// over failing for want of a VM.
		{"default-quarantine", 0},
		// The failures belong to the episodes, not the VMs: every job
		// finishes on its retry.
		{"no-quarantine", 100},
	} {
		for round := range 4 {
			t.Run(fmt.Sprintf("%s/%d", tc.name, round), func(t *testing.T) {
				pool := simPoolWith(t, 4, map[int]bool{2: true, 3: true}, func(c *vmpool.Config) { c.QuarantineAfter = tc.quarantine })
				var jobs []Job
				fail := map[benchKey]bool{}
				for i := range 6 {
					id := fmt.Sprintf("T%d", i)
					jobs = append(jobs, Job{Task: &scienceboard.Task{ID: id, Steps: 10 - i}, Sample: 0})
					fail[benchKey{id, 0}] = true
				}
				r := &failFirst{fail: fail, runs: map[benchKey][]string{}}
				s := &Scheduler{Runner: r, Pool: VMPool(pool), Workers: 4, EnvRetries: 2, Samples: 1, Mode: Dynamic,
					Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				start := time.Now()
				results, err := s.Run(ctx, jobs)
				if err != nil {
					for _, v := range pool.VMs() {
						t.Logf("%s %s failures %d q %v", v.Spec.ID, v.State, v.Failures, v.Quarantine)
					}
					t.Logf("usable %v runs %v", pool.Usable(), r.runs)
					t.Fatalf("Run after %v: %v (stalled)", time.Since(start).Round(time.Millisecond), err)
				}
				for _, res := range results {
					finished := res.Err == nil && res.Trajectory != nil && res.Trajectory.Outcome.Kind == traj.OutcomeFinished
					switch {
					case tc.quarantine == 0 && !finished && !errors.Is(res.Err, vmpool.ErrNoVMs):
						t.Errorf("%s/%d: %+v: want it finished, or failed for want of a VM", res.Job.Task.ID, res.Job.Sample, res)
					case tc.quarantine > 0 && !finished:
						t.Errorf("%s/%d: %+v: want it finished", res.Job.Task.ID, res.Job.Sample, res)
					case tc.quarantine > 0 && len(res.VMs) != 2:
						t.Errorf("%s/%d ran on %v: want the failed attempt and one retry", res.Job.Task.ID, res.Job.Sample, res.VMs)
					}
				}
			})
		}
	}
}

// When the last job ends, a worker still waiting in Lease stops waiting:
// here the only VM it could get is held by another process, and the VM of
// the last job has just been quarantined (so the pool is not empty of
// usable VMs either, and Lease would not fail on its own).
func TestSchedulerEndsWhileAWorkerWaitsForAVM(t *testing.T) {
	urls := startGuests(t, 2, nil)
	lockDir := t.TempDir()
	other := poolOver(t, urls[1:], func(c *vmpool.Config) { c.ID, c.LockDir = "other-process", lockDir })
	poll.Until(t, "the other pool holds its VM", 30*time.Second, func() bool { return other.Stats().Ready == 1 })
	pool := poolOver(t, urls, func(c *vmpool.Config) { c.LockDir, c.QuarantineAfter = lockDir, 1 })
	if st := pool.Stats(); st.LockedElsewhere != 1 {
		t.Fatalf("pool stats %+v: want one VM held by the other pool", st)
	}

	r := &failOn{vm: "sim-0", runs: map[string]int{}}
	s := &Scheduler{Runner: r, Pool: VMPool(pool), Workers: 2, EnvRetries: 0, Samples: 1, Mode: Dynamic,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	results, err := s.Run(rctx, []Job{{Task: &scienceboard.Task{ID: "A", Steps: 5}, Sample: 0}})
	if err != nil {
		t.Fatalf("Run: %v (a worker kept waiting for a VM after the last job ended)", err)
	}
	if res := results[0]; res.Trajectory == nil || !res.Trajectory.Outcome.IsEnvError() {
		t.Errorf("A/0: %+v: want its env_error trajectory kept (no retries)", res)
	}
	if q := pool.Quarantined(); len(q) != 1 || q[0].VM != "sim-0" {
		t.Errorf("quarantined %+v, want sim-0", q)
	}
}

// blockUntilRetry is a Runner for two jobs: "B" fails its first attempt
// by an error outside the VM (a model endpoint), and "A" holds its VM
// until B's retry has run, or gives up after a while and says so.
type blockUntilRetry struct {
	retried chan struct{}
	once    sync.Once

	mu      sync.Mutex
	gaveUp  bool
	bOnVM   []string
	attempt int
}

func (r *blockUntilRetry) Run(ctx context.Context, ep agent.Episode) (*traj.Trajectory, error) {
	t := &traj.Trajectory{ID: ep.Task.ID, Outcome: traj.Outcome{Kind: traj.OutcomeFinished}}
	if ep.Task.ID == "A" {
		select {
		case <-r.retried:
		case <-time.After(20 * time.Second):
			r.mu.Lock()
			r.gaveUp = true
			r.mu.Unlock()
		}
		return t, nil
	}
	r.mu.Lock()
	r.attempt++
	first := r.attempt == 1
	r.bOnVM = append(r.bOnVM, ep.VM)
	r.mu.Unlock()
	if first {
		ee := &agent.EnvError{Op: "planner", Err: errors.New("model endpoint: 503")}
		t.Outcome = traj.Outcome{Kind: traj.OutcomeEnvError, Reason: ee.Error()}
		return t, ee
	}
	r.once.Do(func() { close(r.retried) })
	return t, nil
}

// An environment error outside the VM (a model endpoint failed) says
// nothing against the VM: the retry may run on it at once, instead of
// waiting for another VM that is busy with a long episode.
func TestSchedulerRetryAfterAModelErrorMayUseTheSameVM(t *testing.T) {
	pool := simPool(t, 2, nil)
	r := &blockUntilRetry{retried: make(chan struct{})}
	s := &Scheduler{Runner: r, Pool: VMPool(pool), Workers: 2, EnvRetries: 1, Samples: 1, Mode: Dynamic,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jobs := []Job{{Task: &scienceboard.Task{ID: "A", Steps: 10}}, {Task: &scienceboard.Task{ID: "B", Steps: 5}}}
	results, err := s.Run(ctx, jobs)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.gaveUp {
		t.Errorf("B's retry (on %v) waited for A's VM: an error outside the VM steered it away from its own", r.bOnVM)
	}
	for _, res := range results {
		if res.Trajectory == nil || res.Trajectory.Outcome.Kind != traj.OutcomeFinished {
			t.Errorf("%s: %+v: want it finished", res.Job.Task.ID, res)
		}
	}
}
