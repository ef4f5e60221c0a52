package rollout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/agent"
	"github.com/codapipe/codapipe/internal/scienceboard"
	"github.com/codapipe/codapipe/pkg/traj"
)

// VM is a leased VM as the scheduler sees it.
type VM interface {
	ID() string
	Guest() agent.Guest
}

// Pool hands out VMs. Lease blocks until a VM is ready; Release returns it
// after an episode, with the VM's failure as cause (nil: healthy), which
// the pool counts towards quarantine (see pkg/vmpool); Return hands back a
// VM that was not used, with no verdict on its health. Usable lists the
// VMs still in rotation (not quarantined), busy or not.
type Pool interface {
	Lease(ctx context.Context) (VM, error)
	Release(vm VM, cause error)
	Return(vm VM)
	Usable() []string
}

// Runner runs one episode (*agent.Agent implements it): it returns the
// trajectory and, for an environment failure, an *agent.EnvError; a nil
// trajectory means ctx ended.
type Runner interface {
	Run(ctx context.Context, ep agent.Episode) (*traj.Trajectory, error)
}

// Job is one episode to run: a task and a sample index.
type Job struct {
	Task   *scienceboard.Task
	Sample int
}

// Result is what became of one job.
type Result struct {
	Job        Job
	Trajectory *traj.Trajectory // nil when the run was stopped first
	Attempts   int              // 1 + environment-error retries
	VMs        []string         // the VMs it ran on, in order
	Busy       time.Duration    // VM time spent on it, all attempts
	Err        error            // publishing failed, or the pool gave out
}

// Mode is the scheduling policy.
type Mode string

// Scheduling modes.
const (
	// Dynamic: one shared queue, longest step limit first; every free VM
	// takes the next episode (what codapipe does).
	Dynamic Mode = "dynamic"
	// Static: the episodes are split into contiguous chunks, one per VM,
	// run one after another (CODA's SPLITE scheme); kept for comparison.
	Static Mode = "static"
)

// Scheduler runs jobs over a pool.
type Scheduler struct {
	Runner Runner
	Pool   Pool
	// Workers is how many episodes run at once: the pool size (with fewer
	// workers than VMs, a retry parked on a VM it failed on may wait for a
	// busy VM while another sits idle).
	Workers int
	// EnvRetries bounds how often an episode that ended by an environment
	// error is run again — in Dynamic mode on another VM when one frees up,
	// in Static mode by its chunk's worker on the next VM it leases — before
	// its env_error trajectory is kept (0: never; rollout's flag defaults
	// to 2).
	EnvRetries int
	// ID gives an episode its trajectory id (deterministic ids make
	// re-publishing after a crash a no-op); nil uses traj.NewID.
	ID func(Job) string
	// Publish stores a finished trajectory (bus + ledger). It is called
	// once per job, from the worker goroutines.
	Publish func(ctx context.Context, j Job, t *traj.Trajectory) error
	// Done is called after each job, for progress reporting.
	Done func(Result)
	// Samples is K, recorded in each trajectory.
	Samples int
	Mode    Mode
	Log     *slog.Logger
}

// queue is the shared job queue of the dynamic mode. A worker leases a VM
// first and then takes the job to run on it (next), so that no job waits
// inside a Lease call while a VM that could run it sits with another
// worker. Jobs that end by an environment error go back to the front.
type queue struct {
	mu       sync.Mutex
	cond     *sync.Cond
	pending  []*item
	inflight int
	workers  int
	// parked holds the VMs of workers waiting in next for a job their VM
	// can run.
	parked map[string]bool
	// usable lists the VMs in rotation (Pool.Usable).
	usable func() []string
	// maxWait bounds how long a retry waits for a VM it did not fail on.
	maxWait time.Duration
	// allDone is called once nothing is pending or in flight any more.
	allDone func()
}

type item struct {
	job Job
	res Result
	// failedOn holds the VMs on which the job ended by an environment
	// error; a retry prefers any other VM. Written by the worker that runs
	// the job, read by others only while it is pending.
	failedOn map[string]bool
	// since is when the job last went back to the queue as a retry.
	since time.Time
}

func newQueue(jobs []Job, workers int, usable func() []string, maxWait time.Duration, allDone func()) *queue {
	q := &queue{workers: workers, usable: usable, maxWait: maxWait, allDone: allDone, parked: map[string]bool{}}
	q.cond = sync.NewCond(&q.mu)
	for _, j := range jobs {
		q.pending = append(q.pending, &item{job: j, res: Result{Job: j}})
	}
	return q
}

// await blocks while nothing is pending and jobs are in flight (they may
// come back); it reports whether a job is pending (false: all done, or
// drained).
func (q *queue) await() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.pending) == 0 && q.inflight > 0 {
		q.cond.Wait()
	}
	return len(q.pending) > 0
}

// take removes the first pending job without waiting (nil: none).
func (q *queue) take() *item {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 {
		return nil
	}
	return q.takeLocked(0)
}

// recheck is how often a worker parked in next looks at the pool again: a
// quarantine can leave its VM the only one a pending job can still run on,
// and the pool does not signal the queue.
const recheck = time.Second

// next returns the job to run on vm, a VM the caller has leased: the first
// pending job that did not fail on vm; else the first that no other VM in
// rotation can take, or that has waited maxWait as a retry, or any when
// every worker is parked. Otherwise — every pending job failed on vm and
// can go elsewhere — the caller stays parked with vm, waiting for a job
// vm can run. It returns nil when nothing is pending (or ctx ended): the
// caller hands vm back unused.
func (q *queue) next(ctx context.Context, vm string) *item {
	q.mu.Lock()
	defer q.mu.Unlock()
	defer delete(q.parked, vm)
	for {
		if len(q.pending) == 0 || ctx.Err() != nil {
			return nil
		}
		for i, it := range q.pending {
			if !it.failedOn[vm] {
				return q.takeLocked(i)
			}
		}
		usable, now := q.usable(), time.Now()
		for i, it := range q.pending {
			if !elsewhere(usable, it.failedOn) || now.Sub(it.since) >= q.maxWait {
				return q.takeLocked(i)
			}
		}
		q.parked[vm] = true
		if len(q.parked) >= q.workers {
			return q.takeLocked(0) // nobody else can take a job
		}
		wake := time.AfterFunc(recheck, func() {
			q.mu.Lock() // so that the wake-up cannot come before Wait
			q.cond.Broadcast()
			q.mu.Unlock()
		})
		q.cond.Wait()
		wake.Stop()
	}
}

// elsewhere reports whether a VM in usable is not in failed.
func elsewhere(usable []string, failed map[string]bool) bool {
	for _, id := range usable {
		if !failed[id] {
			return true
		}
	}
	return false
}

func (q *queue) takeLocked(i int) *item {
	it := q.pending[i]
	q.pending = append(q.pending[:i], q.pending[i+1:]...)
	q.inflight++
	q.cond.Broadcast() // a parked worker may be waiting for the queue to change
	return it
}

// finish ends an item's flight; a retried item goes to the front.
func (q *queue) finish(it *item, retry bool) {
	q.mu.Lock()
	q.inflight--
	if retry {
		it.since = time.Now()
		q.pending = append([]*item{it}, q.pending...)
	}
	if len(q.pending) == 0 && q.inflight == 0 && q.allDone != nil {
		q.allDone()
	}
	q.mu.Unlock()
	q.cond.Broadcast()
}

// drain empties the queue (on cancellation) and wakes the waiters.
func (q *queue) drain() {
	q.mu.Lock()
	q.pending = nil
	q.mu.Unlock()
	q.cond.Broadcast()
}

// Run runs every job and returns one result per job, in job order. It
// returns early with ctx's error when ctx ends; episodes in flight then are
// abandoned unpublished (a re-run finishes them).
func (s *Scheduler) Run(ctx context.Context, jobs []Job) ([]Result, error) {
	if s.Workers < 1 {
		return nil, errors.New("rollout: scheduler needs at least one worker")
	}
	if s.EnvRetries < 0 {
		s.EnvRetries = 0
	}
	if s.Log == nil {
		s.Log = slog.Default()
	}
	results := make([]Result, len(jobs))
	index := make(map[Job]int, len(jobs))
	for i, j := range jobs {
		index[j] = i
	}
	var mu sync.Mutex
	record := func(r Result) {
		mu.Lock()
		results[index[r.Job]] = r
		mu.Unlock()
		if s.Done != nil {
			s.Done(r)
		}
	}
	var wg sync.WaitGroup
	switch s.Mode {
	case Static:
		chunks := split(jobs, s.Workers)
		for _, chunk := range chunks {
			wg.Add(1)
			go func() { // owned: waited for below
				defer wg.Done()
				for _, j := range chunk {
					if ctx.Err() != nil {
						return
					}
					it := &item{job: j, res: Result{Job: j}}
					for {
						vm, ok := s.lease(ctx, it)
						if !ok || !s.attempt(ctx, it, vm) {
							break
						}
					}
					if it.res.Trajectory != nil || it.res.Err != nil {
						record(it.res) // not when abandoned as ctx ended
					}
				}
			}()
		}
	default:
		// Longest first: a job's step limit is known before it runs and
		// bounds its length, so the long episodes start early and the short
		// ones fill the tail (LPT). Stable, so K samples of a task and the
		// task order are kept among equals.
		order := slices.Clone(jobs)
		slices.SortStableFunc(order, func(a, b Job) int { return cmp.Compare(b.Task.Steps, a.Task.Steps) })
		// Workers waiting in Lease when the last job ends stop waiting:
		// the VMs they wait for may never come (quarantined, or held by
		// another process).
		lctx, allDone := context.WithCancel(ctx)
		defer allDone()
		q := newQueue(order, s.Workers, s.Pool.Usable, retryWait, allDone)
		stop := context.AfterFunc(ctx, q.drain)
		defer stop()
		for range s.Workers {
			wg.Add(1)
			go func() { // owned: waited for below
				defer wg.Done()
				for q.await() && ctx.Err() == nil {
					vm, err := s.Pool.Lease(lctx)
					if err != nil {
						if lctx.Err() != nil {
							continue // ctx ended or the queue is done: await says which
						}
						// No VM can be had (every VM quarantined): the
						// next job ends with the pool's error.
						if it := q.take(); it != nil {
							it.res.Err = fmt.Errorf("lease a VM for %s/%d: %w", it.job.Task.ID, it.job.Sample, err)
							record(it.res)
							q.finish(it, false)
						}
						continue
					}
					it := q.next(ctx, vm.ID())
					if it == nil {
						// Unused: a healthy verdict here would wipe the
						// failures that should quarantine it.
						s.Pool.Return(vm)
						continue
					}
					retry := s.attempt(ctx, it, vm)
					if !retry && (it.res.Trajectory != nil || it.res.Err != nil) {
						// Also as ctx ends: a trajectory published just
						// then is on the stream and in the ledger.
						record(it.res)
					}
					q.finish(it, retry && ctx.Err() == nil)
				}
			}()
		}
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return results, err
	}
	return results, nil
}

// retryWait bounds how long a retried job waits for a VM it did not fail
// on before it runs on one it did (the pool quarantines a VM that keeps
// failing).
const retryWait = 10 * time.Minute

// lease leases a VM for a job; ok is false (with the job's error set
// unless ctx ended) when none can be had.
func (s *Scheduler) lease(ctx context.Context, it *item) (VM, bool) {
	vm, err := s.Pool.Lease(ctx)
	if err != nil {
		if ctx.Err() == nil {
			it.res.Err = fmt.Errorf("lease a VM for %s/%d: %w", it.job.Task.ID, it.job.Sample, err)
		}
		return nil, false
	}
	return vm, true
}

// attempt runs one attempt of a job on a leased VM, releases the VM, and
// reports whether the job should be retried (it ended by an environment
// error and has retries left).
func (s *Scheduler) attempt(ctx context.Context, it *item, vm VM) (retry bool) {
	j := it.job
	it.res.Attempts++
	it.res.VMs = append(it.res.VMs, vm.ID())
	id := ""
	if s.ID != nil {
		id = s.ID(j)
	}
	start := time.Now()
	t, err := s.Runner.Run(ctx, agent.Episode{ID: id, Task: j.Task, Sample: j.Sample, Samples: s.Samples, VM: vm.ID(), Guest: vm.Guest()})
	it.res.Busy += time.Since(start)
	if t == nil { // ctx ended: abandon, unpublished
		s.Pool.Release(vm, nil)
		return false
	}
	var ee *agent.EnvError
	var cause error
	if errors.As(err, &ee) && ee.VM {
		cause = ee
	}
	s.Pool.Release(vm, cause)
	if cause != nil {
		// Only the VM's own failures steer the retry away from it: after a
		// model endpoint or the blob store failed, any VM will do.
		if it.failedOn == nil {
			it.failedOn = map[string]bool{}
		}
		it.failedOn[vm.ID()] = true
	}
	if t.Outcome.IsEnvError() && (ee == nil || !ee.Permanent) && it.res.Attempts <= s.EnvRetries {
		if cause != nil {
			s.Log.Info("environment error; the episode goes to another VM", "task", j.Task.ID, "sample", j.Sample, "vm", vm.ID(), "reason", t.Outcome.Reason, "attempt", it.res.Attempts)
		} else {
			s.Log.Info("environment error outside the VM; the episode runs again", "task", j.Task.ID, "sample", j.Sample, "vm", vm.ID(), "reason", t.Outcome.Reason, "attempt", it.res.Attempts)
		}
		return true
	}
	it.res.Trajectory = t
	if s.Publish != nil {
		if err := s.Publish(ctx, j, t); err != nil {
			it.res.Err = err
		}
	}
	return false
}

// split cuts jobs into n contiguous chunks of near-equal length.
func split(jobs []Job, n int) [][]Job {
	if n > len(jobs) {
		n = len(jobs)
	}
	out := make([][]Job, 0, n)
	for i := range n {
		lo, hi := i*len(jobs)/n, (i+1)*len(jobs)/n
		out = append(out, jobs[lo:hi])
	}
	return out
}
