package sched

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/fault"
	simguest "github.com/codapipe/codapipe/internal/sim/guest"
	"github.com/codapipe/codapipe/internal/stage/agent"
	"github.com/codapipe/codapipe/internal/testkit/poll"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/guest"
	"github.com/codapipe/codapipe/pkg/vmpool/simvm"
	"github.com/prometheus/client_golang/prometheus/testutil"
	openai "github.com/sashabaranov/go-openai"
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

// dynamic is a dynamic scheduler of r on pool, with workers and
// envRetries, one sample a job, logging nowhere.
func dynamic(r Runner, pool *vmpool.Pool, workers, envRetries int) *Scheduler {
	return &Scheduler{Runner: r, Pool: VMPool(pool), Workers: workers, EnvRetries: envRetries, Samples: 1, Mode: Dynamic,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// runFor runs s on jobs (nil: its Source's) within d; an error fails the
// test, with why (what it means) when given.
func runFor(t *testing.T, s *Scheduler, jobs []Job, d time.Duration, why string) []Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	results, err := s.Run(ctx, jobs)
	switch {
	case err != nil && why != "":
		t.Fatalf("Run: %v (%s)", err, why)
	case err != nil:
		t.Fatalf("Run: %v", err)
	}
	return results
}

// finished reports whether res ended with a finished trajectory.
func finished(res Result) bool {
	return res.Err == nil && res.Trajectory != nil && res.Trajectory.Outcome.Kind == traj.OutcomeFinished
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
	results := runFor(t, dynamic(r, pool, 2, 2), jobs, time.Minute, "hung until the test's deadline")
	for _, res := range results {
		if !finished(res) {
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
			results := runFor(t, dynamic(r, pool, 2, 5), jobs, time.Minute, "")
			for _, res := range results {
				if !finished(res) {
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
				s := dynamic(r, pool, 4, 2)
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
					switch {
					case tc.quarantine == 0 && !finished(res) && !errors.Is(res.Err, vmpool.ErrNoVMs):
						t.Errorf("%s/%d: %+v: want it finished, or failed for want of a VM", res.Job.Task.ID, res.Job.Sample, res)
					case tc.quarantine > 0 && !finished(res):
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
	results := runFor(t, dynamic(r, pool, 2, 0), []Job{{Task: &scienceboard.Task{ID: "A", Steps: 5}, Sample: 0}}, 30*time.Second,
		"a worker kept waiting for a VM after the last job ended")
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
	jobs := []Job{{Task: &scienceboard.Task{ID: "A", Steps: 10}}, {Task: &scienceboard.Task{ID: "B", Steps: 5}}}
	results := runFor(t, dynamic(r, pool, 2, 1), jobs, time.Minute, "")
	if r.gaveUp {
		t.Errorf("B's retry (on %v) waited for A's VM: an error outside the VM steered it away from its own", r.bOnVM)
	}
	for _, res := range results {
		if res.Trajectory == nil || res.Trajectory.Outcome.Kind != traj.OutcomeFinished {
			t.Errorf("%s: %+v: want it finished", res.Job.Task.ID, res)
		}
	}
}

// Settings of BenchmarkScheduler, in simulated time (docs/performance.md
// explains them).
const (
	benchSchedVMs     = 32
	benchSchedTasks   = 125
	benchSchedSamples = 4 // K: 125 tasks × 4 samples = 500 episodes
	// Step latency: lognormal, median 10 s, sigma 1, capped at the model
	// client's 2-minute attempt timeout.
	benchStepMedian = 10 * time.Second
	benchStepSigma  = 1.0
	benchStepMax    = 2 * time.Minute
	// benchFullProb is the share of episodes that run to their step limit
	// (the rest end early, after 1..limit steps).
	benchFullProb = 0.6
	// benchRevert is the snapshot revert of a VM between episodes.
	benchRevert = 3 * time.Second
	// benchEpisodeFaults is the share of episode attempts whose VM dies
	// during the attempt.
	benchEpisodeFaults = 0.03
	// benchSchedScale is wall time per simulated second.
	benchSchedScale = 0.015
	benchSchedSeed  = 42
	benchEnvRetries = 2 // as rollout's --env-retries default
)

// BenchmarkScheduler runs the same 500 episodes through the real Scheduler
// twice, in Dynamic mode (shared queue) and in Static mode (CODA's
// contiguous split into one chunk per VM), each time over a fresh real
// vmpool.Pool whose "sim" backend drives 32 real simulated guest servers
// (simguest.Start) with a snapshot revert time and injected VM deaths.
//
// The runner is not the agent: each episode is a fixed list of step
// latencies drawn once from a heavy-tailed distribution (so both modes get
// identical work), and each step makes one cheap real guest call (POST
// /screen_size, where a dying VM shows) and then sleeps its latency on
// the simulated clock. Rendering and shipping 500 episodes of real
// screenshots would make the run CPU-bound on 2 cores and measure the CPU,
// not the scheduler (BenchmarkStepLatency in internal/stage/agent measures a
// step of the real agent). VM deaths are drawn once too, per episode
// attempt (3 %, at a drawn step): the runner arms the guest's fault
// injection (PUT /sim/faults die_prob 1) before that step's call, so the
// VM really dies, the call fails after the client's retries, the episode
// ends with an environment error and the pool resets the VM. Both modes
// thus meet the same deaths in the same episodes.
//
// Figures (seconds are simulated):
//   - sched.makespan_vs_bound: the dynamic makespan over
//     max(total VM-time of all attempts / VMs, longest episode's VM-time);
//   - sched.speedup_vs_static: the static makespan over the dynamic one;
//   - the makespans, the bound, env-error retries (and how many of them
//     ran on the VM that had just failed), the share of VM-time spent in
//     snapshot reverts;
//   - sched.makespan_vs_vm_time_bound: the same over the tighter bound
//     that adds the reverts any schedule of these attempts needs (one
//     before every attempt but each VM's first);
//   - replays of the dynamic run's measured attempts through a
//     zero-overhead list scheduler (sched.*_replay_vs_bound: job order as
//     the scheduler takes them, longest step limit first with and without
//     the reverts, longest measured episode first), which split the gap
//     to the bound into what the order costs, what the reverts cost and
//     what the pool's hand-offs cost;
//   - sched.model_*: 200 other workloads of the same generator through
//     the policies by arithmetic alone (benchModel), to show how much the
//     measured figures owe to the one workload's seed.
func BenchmarkScheduler(b *testing.B) {
	w := newBenchSchedWork(benchSchedSeed)
	var dyn, sta benchSchedRun
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dyn = w.run(b, Dynamic, nil)
		sta = w.run(b, Static, nil)
	}
	b.StopTimer()

	simS := func(d time.Duration) float64 { return d.Seconds() / benchSchedScale }
	bound := max(dyn.work/benchSchedVMs, dyn.longest)
	wallRevert := time.Duration(float64(benchRevert) * benchSchedScale)
	// The same bound with the snapshot reverts any schedule of these
	// attempts needs: one before every attempt but each VM's first.
	vmBound := max((dyn.work+time.Duration(dyn.attempts-benchSchedVMs)*wallRevert)/benchSchedVMs, dyn.longest)
	b.ReportMetric(dyn.makespan.Seconds()/bound.Seconds(), "sched.makespan_vs_bound")
	b.ReportMetric(dyn.makespan.Seconds()/vmBound.Seconds(), "sched.makespan_vs_vm_time_bound")
	b.ReportMetric(sta.makespan.Seconds()/dyn.makespan.Seconds(), "sched.speedup_vs_static")
	b.ReportMetric(simS(dyn.makespan), "sched.dynamic_makespan_s")
	b.ReportMetric(simS(sta.makespan), "sched.static_makespan_s")
	b.ReportMetric(simS(bound), "sched.bound_s")
	b.ReportMetric(simS(dyn.longest), "sched.longest_episode_s")
	b.ReportMetric(simS(dyn.work)/float64(len(w.jobs)), "sched.mean_episode_s")
	b.ReportMetric(float64(dyn.retries), "sched.dynamic_env_retries")
	b.ReportMetric(float64(dyn.sameVMRetries), "sched.dynamic_retries_on_same_vm")
	b.ReportMetric(float64(sta.retries), "sched.static_env_retries")
	b.ReportMetric(float64(dyn.envErrors+sta.envErrors), "sched.env_errors_kept")
	b.ReportMetric(float64(dyn.quarantined+sta.quarantined), "sched.quarantined_vms")
	b.ReportMetric(float64(dyn.failedAttempts)/float64(dyn.attempts), "sched.dynamic_attempt_fault_rate")
	b.ReportMetric(dyn.work.Seconds()/(benchSchedVMs*dyn.makespan.Seconds()), "sched.dynamic_utilisation")
	b.ReportMetric(float64(dyn.resets)*benchSchedScale*benchRevert.Seconds()/(benchSchedVMs*dyn.makespan.Seconds()), "sched.dynamic_revert_share")
	b.ReportMetric(benchReplay(w.jobs, dyn.perJob, benchSchedVMs, benchOrderFIFO, 0).Seconds()/bound.Seconds(), "sched.fifo_replay_vs_bound")
	b.ReportMetric(benchReplay(w.jobs, dyn.perJob, benchSchedVMs, benchOrderLimit, 0).Seconds()/bound.Seconds(), "sched.lpt_limit_replay_vs_bound")
	b.ReportMetric(benchReplay(w.jobs, dyn.perJob, benchSchedVMs, benchOrderOracle, 0).Seconds()/bound.Seconds(), "sched.lpt_oracle_replay_vs_bound")
	b.ReportMetric(benchReplay(w.jobs, dyn.perJob, benchSchedVMs, benchOrderLimit, wallRevert).Seconds()/bound.Seconds(), "sched.lpt_limit_replay_with_reverts_vs_bound")
	m := benchModel(benchModelSeeds, benchShape{Sigma: benchStepSigma, Full: benchFullProb})
	b.ReportMetric(m.speedupMean, "sched.model_speedup_vs_static_mean")
	b.ReportMetric(m.speedupP10, "sched.model_speedup_vs_static_p10")
	b.ReportMetric(m.boundMean, "sched.model_makespan_vs_bound_mean")
	b.ReportMetric(m.vmBoundMean, "sched.model_makespan_vs_vm_time_bound_mean")
	b.ReportMetric(m.fifoBoundMean, "sched.model_fifo_makespan_vs_bound_mean")
	b.ReportMetric(m.oracleBoundMean, "sched.model_oracle_makespan_vs_bound_mean")
	b.ReportMetric(m.stepsBoundMean, "sched.model_known_steps_makespan_vs_bound_mean")
	b.ReportMetric(m.withinBound, "sched.model_share_within_bound_target")
	b.ReportMetric(m.seed.static.Seconds()/m.seed.lpt.Seconds(), "sched.model_speedup_vs_static_this_seed")
	b.ReportMetric(m.seed.lpt.Seconds()/m.seed.bound.Seconds(), "sched.model_makespan_vs_bound_this_seed")
	b.ReportMetric(dyn.makespan.Seconds(), "sched.dynamic_makespan_wall_s")
	b.ReportMetric(sta.makespan.Seconds(), "sched.static_makespan_wall_s")
}

// benchSchedWork is the episodes of the benchmark and their step
// latencies, drawn once.
// benchKey names one episode of the benchmark's workload.
type benchKey struct {
	Task   string
	Sample int
}

type benchSchedWork struct {
	tasks []scienceboard.Task
	jobs  []Job // task-major, as Run builds them
	steps map[benchKey][]time.Duration
	// dies holds, per episode and attempt (1 + EnvRetries of them), the
	// step at whose guest call the VM dies, or -1.
	dies map[benchKey][]int
}

func newBenchSchedWork(seed uint64) *benchSchedWork {
	return newBenchSchedWorkWith(seed, benchShape{Sigma: benchStepSigma, Full: benchFullProb})
}

// benchShape is what BenchmarkSchedulerModel varies of the workload: the
// step latency's sigma and the share of episodes that run to their step
// limit.
type benchShape struct{ Sigma, Full float64 }

// newBenchSchedWorkWith draws the workload with the given shape (the
// benchmark's own is benchStepSigma, benchFullProb).
func newBenchSchedWorkWith(seed uint64, shape benchShape) *benchSchedWork {
	r := rand.New(rand.NewPCG(seed, 1))
	lat := fault.LogNormal(benchStepMedian, shape.Sigma, benchStepMax)
	w := &benchSchedWork{steps: map[benchKey][]time.Duration{}, dies: map[benchKey][]int{}}
	w.tasks = make([]scienceboard.Task, benchSchedTasks)
	for i := range w.tasks {
		w.tasks[i] = benchTask(i, r)
	}
	for i := range w.tasks {
		t := &w.tasks[i]
		for k := range benchSchedSamples {
			n := t.Steps
			if r.Float64() >= shape.Full {
				n = 1 + r.IntN(t.Steps)
			}
			w.addEpisode(t, k, n, lat, r)
		}
	}
	w.drawDeaths(seed)
	return w
}

// benchTask draws task i: its step limit in the mix of ScienceBoard's VM
// tasks, 63 % 5, 32 % 10, 5 % 15.
func benchTask(i int, r *rand.Rand) scienceboard.Task {
	limit := 5
	switch u := r.Float64(); {
	case u >= 0.95:
		limit = 15
	case u >= 0.63:
		limit = 10
	}
	return scienceboard.Task{ID: fmt.Sprintf("Bench/T%03d", i), App: "Bench", Steps: limit}
}

// addEpisode adds sample k of t, n steps of latencies drawn from lat.
func (w *benchSchedWork) addEpisode(t *scienceboard.Task, k, n int, lat fault.Dist, r *rand.Rand) {
	s := make([]time.Duration, n)
	for j := range s {
		s[j] = lat.Sample(r)
	}
	w.steps[benchKey{t.ID, k}] = s
	w.jobs = append(w.jobs, Job{Task: t, Sample: k})
}

// drawDeaths draws the VM deaths of w's episodes, from a stream of their
// own (the work does not depend on them): exactly benchEpisodeFaults of
// the first attempts, and each retry with that probability, at a
// uniformly drawn step.
func (w *benchSchedWork) drawDeaths(seed uint64) {
	fr := rand.New(rand.NewPCG(seed, 2))
	first := make(map[int]bool)
	for _, i := range fr.Perm(len(w.jobs))[:int(math.Round(benchEpisodeFaults*float64(len(w.jobs))))] {
		first[i] = true
	}
	for i, j := range w.jobs {
		key := benchKey{j.Task.ID, j.Sample}
		n := len(w.steps[key])
		die := make([]int, 1+benchEnvRetries)
		for a := range die {
			die[a] = -1
			if (a == 0 && first[i]) || (a > 0 && fr.Float64() < benchEpisodeFaults) {
				die[a] = fr.IntN(n)
			}
		}
		w.dies[key] = die
	}
}

// benchSchedRun is what one scheduler run measured (wall time).
type benchSchedRun struct {
	makespan       time.Duration
	work           time.Duration // VM-time of all attempts
	longest        time.Duration // the largest VM-time of one episode, all attempts
	retries        int
	sameVMRetries  int // retries that ran on the VM the previous attempt failed on
	envErrors      int // episodes left with an env_error trajectory
	attempts       int
	failedAttempts int
	resets         int64
	quarantined    int
	perJob         [][]benchAttempt // by job index, in attempt order
}

type benchAttempt struct {
	d      time.Duration
	failed bool
}

// run runs the jobs once in mode over fresh guests and a fresh pool.
func (w *benchSchedWork) run(b *testing.B, mode Mode, p Predictor) benchSchedRun {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	clock := fault.Clock{Scale: benchSchedScale}

	urls := make([]string, benchSchedVMs)
	for i := range urls {
		m := desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog(), Seed: int64(i)})
		g, err := simguest.Start(ctx, m, simguest.Config{
			Clock: clock, Seed: uint64(benchSchedSeed + i),
			RevertTime: fault.Fixed(benchRevert),
			// A dead VM resets connections: the client's retries (3, from
			// 5 s apart, scaled) fail too and the episode ends with an
			// environment error.
			DeathMode: simguest.DeathReset,
		})
		if err != nil {
			b.Fatal(err)
		}
		urls[i] = g.URL
	}
	sc := simvm.URLs(urls...)
	sc.PollInterval = max(clock.Real(time.Second), 5*time.Millisecond)
	backend, err := simvm.New(sc)
	if err != nil {
		b.Fatal(err)
	}
	pool, err := vmpool.NewPool(ctx, vmpool.Config{
		ID: "bench-sched-" + string(mode), IdleCheck: -1,
		LockDir: b.TempDir(), RetryWait: clock.Real(vmpool.DefaultVMRetryWait),
	}, backend, vmpool.WithLogger(quiet), vmpool.WithGuestOptions(guest.Options{
		// The guest client's retry waits in simulated time; its timeouts
		// stay as they are (a healthy loopback call never comes close).
		RetryWait:    clock.Real(guest.DefaultRetryWait),
		MaxRetryWait: clock.Real(guest.DefaultMaxRetryWait),
	}))
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close(context.Background())
	benchWaitReady(b, pool)

	index := make(map[benchKey]int, len(w.jobs))
	for i, j := range w.jobs {
		index[benchKey{j.Task.ID, j.Sample}] = i
	}
	runner := &benchRunner{clock: clock, steps: w.steps, dies: w.dies, index: index, attempts: make([][]benchAttempt, len(w.jobs)),
		client: &http.Client{Timeout: 10 * time.Second}}
	s := &Scheduler{Runner: runner, Pool: VMPool(pool), Workers: benchSchedVMs, EnvRetries: benchEnvRetries,
		Samples: benchSchedSamples, Mode: mode, Log: quiet, Predict: p}
	start := time.Now()
	results, err := s.Run(ctx, w.jobs)
	out := benchSchedRun{makespan: time.Since(start), perJob: runner.attempts}
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			b.Fatalf("%s mode: %s/%d: %v", mode, r.Job.Task.ID, r.Job.Sample, r.Err)
		}
		if r.Trajectory == nil {
			b.Fatalf("%s mode: %s/%d did not run", mode, r.Job.Task.ID, r.Job.Sample)
		}
		out.work += r.Busy
		out.longest = max(out.longest, r.Busy)
		out.retries += r.Attempts - 1
		if r.Trajectory.Outcome.IsEnvError() {
			out.envErrors++
			b.Logf("%s mode: %s/%d kept an environment error after %d attempts on %v: %s", mode, r.Job.Task.ID, r.Job.Sample, r.Attempts, r.VMs, r.Trajectory.Outcome.Reason)
		}
		for i := 1; i < len(r.VMs); i++ {
			if r.VMs[i] == r.VMs[i-1] {
				out.sameVMRetries++
			}
		}
	}
	for _, as := range runner.attempts {
		out.attempts += len(as)
		for _, a := range as {
			if a.failed {
				out.failedAttempts++
			}
		}
	}
	st := pool.Stats()
	out.resets, out.quarantined = st.Resets, len(st.QuarantinedVMs)
	return out
}

// benchWaitReady waits until every VM of the pool has started, so that
// the makespan does not include the first boot.
func benchWaitReady(b *testing.B, pool *vmpool.Pool) {
	b.Helper()
	poll.Until(b, "every VM of the pool ready", time.Minute, func() bool {
		ready := 0
		for _, v := range pool.VMs() {
			if v.State == vmpool.StateReady {
				ready++
			}
		}
		return ready == pool.Size()
	})
}

// benchRunner is the benchmark's Runner: an episode is its fixed list of
// step latencies, each step one guest call and then a sleep of the
// latency on the simulated clock.
type benchRunner struct {
	clock  fault.Clock
	steps  map[benchKey][]time.Duration
	dies   map[benchKey][]int
	index  map[benchKey]int
	client *http.Client // for the guests' /sim/faults

	mu       sync.Mutex
	attempts [][]benchAttempt
}

// benchGuest is what the runner needs of a guest (*guest.Client has it).
type benchGuest interface {
	ScreenSize(ctx context.Context) (w, h int, err error)
	BaseURL() string
}

// setDieProb sets the simulated guest's die_prob (PUT /sim/faults). A VM
// killed by it stays dead until the pool's reset (POST /sim/reset).
func (r *benchRunner) setDieProb(ctx context.Context, base string, p float64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/sim/faults", strings.NewReader(fmt.Sprintf(`{"die_prob": %g}`, p)))
	if err != nil {
		return err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT %s/sim/faults: HTTP %d", base, resp.StatusCode)
	}
	return nil
}

func (r *benchRunner) Run(ctx context.Context, ep agent.Episode) (*traj.Trajectory, error) {
	key := benchKey{ep.Task.ID, ep.Sample}
	steps, ok := r.steps[key]
	if !ok {
		return nil, fmt.Errorf("bench runner: unknown episode %v", key)
	}
	g, ok := ep.Guest.(benchGuest)
	if !ok {
		return nil, fmt.Errorf("bench runner: guest %T has no ScreenSize", ep.Guest)
	}
	r.mu.Lock()
	attempt := len(r.attempts[r.index[key]])
	r.mu.Unlock()
	dieAt := -1
	if d := r.dies[key]; attempt < len(d) {
		dieAt = d[attempt]
	}
	start := time.Now()
	t := &traj.Trajectory{SchemaVersion: traj.SchemaVersion, ID: ep.ID,
		Task:   traj.TaskRef{ID: ep.Task.ID, App: ep.Task.App, StepLimit: ep.Task.Steps},
		Sample: ep.Sample, Samples: ep.Samples, VM: ep.VM, Steps: []traj.Step{}, StartedAt: start.UTC()}
	end := func(failed bool) {
		r.mu.Lock()
		i := r.index[key]
		r.attempts[i] = append(r.attempts[i], benchAttempt{d: time.Since(start), failed: failed})
		r.mu.Unlock()
		t.EndedAt = time.Now().UTC()
	}
	for i, d := range steps {
		if i == dieAt {
			if err := r.setDieProb(ctx, g.BaseURL(), 1); err != nil {
				return nil, fmt.Errorf("bench runner: arming the VM's death: %w", err)
			}
		}
		_, _, err := g.ScreenSize(ctx)
		if i == dieAt {
			// Disarm: the VM stays dead until the pool resets it.
			if derr := r.setDieProb(ctx, g.BaseURL(), 0); derr != nil {
				return nil, fmt.Errorf("bench runner: disarming the VM's death: %w", derr)
			}
			if err == nil {
				return nil, fmt.Errorf("bench runner: %s/%d: the VM did not die", ep.Task.ID, ep.Sample)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			ee := &agent.EnvError{Op: fmt.Sprintf("step %d: observe", i), Err: err, VM: true}
			t.Outcome = traj.Outcome{Kind: traj.OutcomeEnvError, Reason: ee.Error()}
			end(true)
			return t, ee
		}
		if err := r.clock.Sleep(ctx, d); err != nil {
			return nil, err
		}
	}
	t.Outcome = traj.Outcome{Kind: traj.OutcomeFinished}
	end(false)
	return t, nil
}

// Orders of benchReplay.
const (
	benchOrderFIFO   = iota // job order, as the dynamic mode takes them
	benchOrderLimit         // longest step limit first (known before running)
	benchOrderOracle        // longest measured VM-time first (known only after)
)

// benchReplay runs the measured attempts of every job through an ideal
// list scheduler on vms machines — no resets, no hand-off time — with
// the dynamic mode's queue discipline (a failed attempt's job goes back to
// the front), taking the jobs in the given order. It returns the makespan.
func benchReplay(jobs []Job, attempts [][]benchAttempt, vms int, orderBy int, revert time.Duration) time.Duration {
	order := make([]int, len(jobs))
	for i := range order {
		order[i] = i
	}
	total := func(j int) (d time.Duration) {
		for _, a := range attempts[j] {
			d += a.d
		}
		return d
	}
	switch orderBy {
	case benchOrderLimit:
		sort.SliceStable(order, func(a, b int) bool { return jobs[order[a]].Task.Steps > jobs[order[b]].Task.Steps })
	case benchOrderOracle:
		sort.SliceStable(order, func(a, b int) bool { return total(order[a]) > total(order[b]) })
	}
	return benchReplayOrder(attempts, vms, order, revert)
}

// benchReplayOrder is benchReplay with the job order given (indices into
// attempts).
func benchReplayOrder(attempts [][]benchAttempt, vms int, order []int, revert time.Duration) time.Duration {
	queue := order
	next := make([]int, len(attempts)) // next attempt of each job
	var ev benchEvents
	idle := vms
	var now, makespan time.Duration
	start := func() {
		for idle > 0 && len(queue) > 0 {
			j := queue[0]
			queue = queue[1:]
			if next[j] >= len(attempts[j]) {
				continue // not measured (cannot happen after a full run)
			}
			a := attempts[j][next[j]]
			next[j]++
			idle--
			heap.Push(&ev, benchEvent{at: now + a.d, job: j, failed: a.failed, revert: revert})
		}
	}
	start()
	for ev.Len() > 0 {
		e := heap.Pop(&ev).(benchEvent)
		now = e.at
		if e.job < 0 { // a machine's revert ended
			idle++
			start()
			continue
		}
		makespan = max(makespan, now)
		if e.failed {
			queue = append([]int{e.job}, queue...)
		}
		if e.revert > 0 {
			heap.Push(&ev, benchEvent{at: now + e.revert, job: -1})
		} else {
			idle++
		}
		start()
	}
	return makespan
}

type benchEvent struct {
	at     time.Duration
	job    int // -1: a revert ended
	failed bool
	revert time.Duration // after the attempt
}

type benchEvents []benchEvent

func (h benchEvents) Len() int           { return len(h) }
func (h benchEvents) Less(i, j int) bool { return h[i].at < h[j].at }
func (h benchEvents) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *benchEvents) Push(x any)        { *h = append(*h, x.(benchEvent)) }
func (h *benchEvents) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// benchModelSeeds is how many workloads benchModel replays.
const benchModelSeeds = 200

// benchModelRun is one workload put through the policies by arithmetic.
type benchModelRun struct {
	static, fifo, lpt, oracle time.Duration // makespans
	steps                     time.Duration // makespan in order of the true step count
	bound                     time.Duration // max(work / VMs, longest episode)
	vmBound                   time.Duration // the same with the reverts any schedule needs
}

// benchModelWorkload puts one workload of the benchmark's generator
// through the policies by arithmetic alone — no scheduler, pool or clock:
// the dynamic mode as a list scheduler (benchReplay, in job order and in
// step-limit order, the failed attempt's job back at the front), the
// static mode as contiguous chunks, a list scheduler that knows every
// episode's step count (not its length) and a clairvoyant one that knows
// every episode's length; the revert time after every attempt, and
// for a VM death the steps before it plus the guest client's mean retry
// waits.
func benchModelWorkload(seed uint64, shape benchShape) benchModelRun {
	// The guest client's retries before it gives up on a dead VM: waits
	// drawn from the upper half of 5, 10 and 20 s.
	retryWaits := 3 * (guest.DefaultRetryWait + 2*guest.DefaultRetryWait + 4*guest.DefaultRetryWait) / 4
	w := newBenchSchedWorkWith(seed, shape)
	attempts := make([][]benchAttempt, len(w.jobs))
	var work, longest time.Duration
	n := 0
	for i, j := range w.jobs {
		key := benchKey{j.Task.ID, j.Sample}
		var total time.Duration
		for _, at := range w.dies[key] {
			var a benchAttempt
			if at < 0 {
				for _, d := range w.steps[key] {
					a.d += d
				}
			} else {
				for _, d := range w.steps[key][:at] {
					a.d += d
				}
				a.d += retryWaits
				a.failed = true
			}
			attempts[i] = append(attempts[i], a)
			n++
			total += a.d
			if !a.failed {
				break
			}
		}
		work += total
		longest = max(longest, total)
	}
	r := benchModelRun{
		fifo:    benchReplay(w.jobs, attempts, benchSchedVMs, benchOrderFIFO, benchRevert),
		lpt:     benchReplay(w.jobs, attempts, benchSchedVMs, benchOrderLimit, benchRevert),
		oracle:  benchReplay(w.jobs, attempts, benchSchedVMs, benchOrderOracle, benchRevert),
		bound:   max(work/benchSchedVMs, longest),
		vmBound: max((work+time.Duration(n-benchSchedVMs)*benchRevert)/benchSchedVMs, longest),
	}
	// Longest step count first: what an order could reach that knew how
	// many steps each episode takes, but not how long they take.
	order := indices(len(w.jobs))
	stepsOf := func(j Job) int { k := w.jobs[j.Sample]; return len(w.steps[benchKey{k.Task.ID, k.Sample}]) }
	sort.SliceStable(order, func(a, b int) bool { return stepsOf(order[a]) > stepsOf(order[b]) })
	byJobs, byAttempts := make([]Job, len(order)), make([][]benchAttempt, len(order))
	for i, j := range order {
		byJobs[i], byAttempts[i] = w.jobs[j.Sample], attempts[j.Sample]
	}
	r.steps = benchReplay(byJobs, byAttempts, benchSchedVMs, benchOrderFIFO, benchRevert)
	for _, chunk := range split(indices(len(w.jobs)), benchSchedVMs) {
		var t time.Duration
		for c, j := range chunk {
			for k, a := range attempts[j.Sample] {
				if c > 0 || k > 0 {
					t += benchRevert
				}
				t += a.d
			}
		}
		r.static = max(r.static, t)
	}
	return r
}

// benchModelResult is benchModel's answer: means over the workloads.
type benchModelResult struct {
	speedupMean, speedupP10 float64 // static over step-limit-order makespan
	boundMean               float64 // step-limit-order makespan over the bound
	vmBoundMean             float64 // the same over the bound with reverts
	fifoBoundMean           float64 // job-order makespan over the bound
	oracleBoundMean         float64 // clairvoyant makespan over the bound
	stepsBoundMean          float64 // known-step-count order's makespan over the bound
	withinBound             float64 // share of workloads whose boundMean figure is <= 1.10
	withinSpeedup           float64 // share whose speedup is >= 1.3
	seed                    benchModelRun
}

// benchModel puts workloads of the benchmark's generator with the given
// shape (seeds 1..n, and the benchmark's own) through the policies
// (benchModelWorkload). It shows how much the single measured workload's
// figures owe to its seed, and what an ideal scheduler of each kind
// reaches on such workloads.
func benchModel(n int, shape benchShape) benchModelResult {
	var r benchModelResult
	speedups := make([]float64, 0, n)
	f := float64(n)
	for seed := 1; seed <= n; seed++ {
		m := benchModelWorkload(uint64(seed), shape)
		s := m.static.Seconds() / m.lpt.Seconds()
		b := m.lpt.Seconds() / m.bound.Seconds()
		speedups = append(speedups, s)
		r.speedupMean += s / f
		r.boundMean += b / f
		r.vmBoundMean += m.lpt.Seconds() / m.vmBound.Seconds() / f
		r.fifoBoundMean += m.fifo.Seconds() / m.bound.Seconds() / f
		r.oracleBoundMean += m.oracle.Seconds() / m.bound.Seconds() / f
		r.stepsBoundMean += m.steps.Seconds() / m.bound.Seconds() / f
		if b <= 1.10 {
			r.withinBound += 1 / f
		}
		if s >= 1.3 {
			r.withinSpeedup += 1 / f
		}
	}
	sort.Float64s(speedups)
	r.speedupP10 = speedups[n/10]
	r.seed = benchModelWorkload(benchSchedSeed, shape)
	return r
}

// BenchmarkSchedulerModel shows what the acceptance targets (makespan <=
// 1.10 × the bound, >= 1.3 × faster than the static split) ask of
// workloads of other shapes than BenchmarkScheduler's (step latency sigma
// 1.0, 60 % of episodes to the step limit): for each shape, the means over
// benchModelSeeds workloads of the ideal replays (benchModel) — step-limit
// order (what the scheduler does, without its overhead), job order, and a
// clairvoyant order — over the bound, the same over the bound that counts
// the reverts, the speedup of step-limit order over the static split, and
// the share of workloads that meet each target.
func BenchmarkSchedulerModel(b *testing.B) {
	type fig struct {
		name string
		v    func(benchModelResult) float64
	}
	figs := []fig{
		{"lpt_vs_bound", func(m benchModelResult) float64 { return m.boundMean }},
		{"lpt_vs_vm_time_bound", func(m benchModelResult) float64 { return m.vmBoundMean }},
		{"fifo_vs_bound", func(m benchModelResult) float64 { return m.fifoBoundMean }},
		{"oracle_vs_bound", func(m benchModelResult) float64 { return m.oracleBoundMean }},
		{"known_steps_vs_bound", func(m benchModelResult) float64 { return m.stepsBoundMean }},
		{"speedup_vs_static", func(m benchModelResult) float64 { return m.speedupMean }},
		{"share_lpt_within_target", func(m benchModelResult) float64 { return m.withinBound }},
		{"share_speedup_within_target", func(m benchModelResult) float64 { return m.withinSpeedup }},
	}
	var results map[benchShape]benchModelResult
	shapes := []benchShape{{0.5, 0.6}, {0.5, 1}, {0.75, 0.6}, {0.75, 1}, {1, 0.6}, {1, 1}}
	for i := 0; i < b.N; i++ {
		results = map[benchShape]benchModelResult{}
		for _, sh := range shapes {
			results[sh] = benchModel(benchModelSeeds, sh)
		}
	}
	for _, sh := range shapes {
		for _, f := range figs {
			b.ReportMetric(f.v(results[sh]), fmt.Sprintf("schedmodel.sigma_%.2f_full_%.1f.%s", sh.Sigma, sh.Full, f.name))
		}
	}
}

// indices is 0..n-1 as jobs whose Sample is the index (split cuts jobs).
func indices(n int) []Job {
	out := make([]Job, n)
	for i := range out {
		out[i].Sample = i
	}
	return out
}

// losingPool is a Pool whose leases have a Lost channel, as
// *vmpool.Lease has; a test closes it to say the VM's lock was lost.
type losingPool struct {
	mu       sync.Mutex
	n        int
	leases   []*losingVM
	verdicts []string
}

type losingVM struct {
	id   string
	lost chan struct{}
}

func (v *losingVM) ID() string                    { return v.id }
func (v *losingVM) Guest() agent.Guest            { return nil }
func (v *losingVM) Lost() <-chan struct{}         { return v.lost }
func (v *losingVM) lose()                         { close(v.lost) }
func (p *losingPool) End(vm VM, v vmpool.Verdict) { p.record(vm.ID()) }

func (p *losingPool) Lease(ctx context.Context, avoid []string) (VM, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	vm := &losingVM{id: fmt.Sprintf("vm-%d", p.n), lost: make(chan struct{})}
	p.n++
	p.leases = append(p.leases, vm)
	return vm, nil
}

func (p *losingPool) record(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.verdicts = append(p.verdicts, id)
}

// loseFirst is a Runner whose first lose attempts lose their VM's lock
// midway and, like the agent when its guest calls are cancelled, return
// an env_error trajectory; later attempts finish.
type loseFirst struct {
	pool *losingPool
	lose int

	mu       sync.Mutex
	attempts int
}

func (r *loseFirst) Run(ctx context.Context, ep agent.Episode) (*traj.Trajectory, error) {
	r.mu.Lock()
	r.attempts++
	n := r.attempts
	r.mu.Unlock()
	t := &traj.Trajectory{ID: fmt.Sprintf("%s-%d-attempt-%d", ep.Task.ID, ep.Sample, n), Outcome: traj.Outcome{Kind: traj.OutcomeFinished}}
	if n > r.lose {
		return t, nil
	}
	r.pool.mu.Lock()
	vm := r.pool.leases[len(r.pool.leases)-1]
	r.pool.mu.Unlock()
	vm.lose()
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		return nil, errors.New("the attempt's context did not end when the VM's lock was lost")
	}
	if !errors.Is(context.Cause(ctx), errLockLost) {
		return nil, fmt.Errorf("the attempt's context ended with %v, want errLockLost", context.Cause(ctx))
	}
	ee := &agent.EnvError{Op: "screenshot", Err: ctx.Err(), VM: true}
	t.Outcome = traj.Outcome{Kind: traj.OutcomeEnvError, Reason: ee.Error()}
	return t, ee
}

// An attempt during which the VM's lock is lost is cancelled and its
// trajectory discarded, never published: the episode runs again within
// EnvRetries, and ends without a trajectory (ErrNoVM) after them.
func TestSchedulerLockLost(t *testing.T) {
	for _, tc := range []struct {
		name       string
		lose       int
		envRetries int
		published  []string
		wantErr    bool
	}{
		{name: "retried", lose: 1, envRetries: 2, published: []string{"A-0-attempt-2"}},
		{name: "no retries left", lose: 2, envRetries: 1, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := &losingPool{}
			var mu sync.Mutex
			var published []string
			m := NewMetrics(nil)
			s := &Scheduler{Runner: &loseFirst{pool: pool, lose: tc.lose}, Pool: pool, Workers: 1, EnvRetries: tc.envRetries,
				Samples: 1, Mode: Dynamic, Metrics: m, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Publish: func(ctx context.Context, j Job, t *traj.Trajectory) error {
					mu.Lock()
					defer mu.Unlock()
					published = append(published, t.ID)
					return nil
				}}
			jobs := []Job{{Task: &scienceboard.Task{ID: "A", Steps: 5}, Sample: 0}}
			results := runFor(t, s, jobs, time.Minute, "")
			res := results[0]
			if fmt.Sprint(published) != fmt.Sprint(tc.published) {
				t.Errorf("published %v, want %v", published, tc.published)
			}
			wantAttempts := 2
			if tc.wantErr {
				if !errors.Is(res.Err, ErrNoVM) || !errors.Is(res.Err, ErrVMLockLost) || res.Trajectory != nil {
					t.Errorf("result %+v: want no trajectory, ErrNoVM and ErrVMLockLost", res)
				}
			} else if !finished(res) {
				t.Errorf("result %+v: want it finished", res)
			}
			if res.Attempts != wantAttempts || len(res.VMs) != wantAttempts {
				t.Errorf("%d attempts on %v, want %d", res.Attempts, res.VMs, wantAttempts)
			}
			if got := testutil.ToFloat64(m.locksLost); got != float64(tc.lose) {
				t.Errorf("codapipe_rollout_vm_lock_losses_total = %v, want %d", got, tc.lose)
			}
			if len(pool.verdicts) != wantAttempts {
				t.Errorf("leases ended: %v, want every lease ended", pool.verdicts)
			}
		})
	}
}

// badScreens is a Runner whose every attempt ends by an unusable
// screenshot, a VM fault.
type badScreens struct{ attempts atomic.Int64 }

func (r *badScreens) Run(ctx context.Context, ep agent.Episode) (*traj.Trajectory, error) {
	r.attempts.Add(1)
	ee := &agent.EnvError{Op: "screenshot", Err: errors.New("not a PNG: png: invalid format: not a PNG file"), VM: true}
	return &traj.Trajectory{ID: fmt.Sprintf("%s-%d", ep.Task.ID, ep.Sample), Outcome: traj.Outcome{Kind: traj.OutcomeEnvError, Reason: ee.Error()}}, ee
}

// TestSchedulerScreenshotUnusableOnEveryVM (issue 40, runs burned by
// infrastructure): when the screenshot fails on every VM of the pool, the
// run stops with a SharedError before it burns the episodes: none is
// recorded.
func TestSchedulerScreenshotUnusableOnEveryVM(t *testing.T) {
	pool := simPool(t, 3, nil)
	task := &scienceboard.Task{ID: "A", Steps: 5}
	var jobs []Job
	for k := range 6 {
		jobs = append(jobs, Job{Task: task, Sample: k})
	}
	r := &badScreens{}
	s := dynamic(r, pool, 3, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	results, err := s.Run(ctx, jobs)
	var se *SharedError
	if !errors.As(err, &se) || !errors.Is(err, ErrShared) || !strings.Contains(err.Error(), "the screenshot is unusable on every VM (3)") {
		t.Fatalf("Run: %v; want the SharedError of an unusable screenshot on every VM", err)
	}
	for _, res := range results {
		if res.Trajectory != nil {
			t.Errorf("%s/%d: recorded with %s; want nothing recorded", res.Job.Task.ID, res.Job.Sample, res.Trajectory.Outcome.Kind)
		}
	}
	// Until the last VM has failed too, each failure is its VM's: a VM
	// may be quarantined meanwhile, as one broken VM would be.
	t.Logf("%d attempts, %d VMs quarantined before the run stopped", r.attempts.Load(), pool.Stats().Quarantined)
}

// refuseOnce is a Runner whose first attempt ends as a model endpoint
// refusing the request with a 404 (a proxy during a restart); every other
// attempt finishes.
type refuseOnce struct{ attempts atomic.Int64 }

func (r *refuseOnce) Run(ctx context.Context, ep agent.Episode) (*traj.Trajectory, error) {
	t := &traj.Trajectory{ID: fmt.Sprintf("%s-%d", ep.Task.ID, ep.Sample), Outcome: traj.Outcome{Kind: traj.OutcomeFinished}}
	if r.attempts.Add(1) == 1 {
		ee := &agent.EnvError{Op: "planner", Err: &openai.APIError{HTTPStatusCode: 404, Message: "no route"}}
		t.Outcome = traj.Outcome{Kind: traj.OutcomeEnvError, Reason: ee.Error()}
		return t, ee
	}
	return t, nil
}

// TestSchedulerOneRefusalIsNotShared: one 404 from an endpoint (as a
// proxy gives while the server restarts) does not stop the run, nor is it
// the episode's outcome: the episode runs again, uncounted, and finishes.
func TestSchedulerOneRefusalIsNotShared(t *testing.T) {
	pool := simPool(t, 2, nil)
	task := &scienceboard.Task{ID: "A", Steps: 5}
	jobs := []Job{{Task: task, Sample: 0}, {Task: task, Sample: 1}}
	r := &refuseOnce{}
	results := runFor(t, dynamic(r, pool, 1, 0), jobs, time.Minute, "one refusal stopped the run")
	for _, res := range results {
		if !finished(res) || res.Attempts != 1 {
			t.Errorf("%s/%d: %+v: want it finished in one counted attempt", res.Job.Task.ID, res.Job.Sample, res)
		}
	}
}
