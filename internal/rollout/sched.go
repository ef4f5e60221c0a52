package rollout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
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
	// Workers is how many episodes run at once (the pool size).
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

// queue is the shared job queue of the dynamic mode: jobs that end by an
// environment error go back to its front.
type queue struct {
	mu       sync.Mutex
	cond     *sync.Cond
	pending  []*item
	inflight int
	waiting  int // workers holding a VM while they wait for a job it can run
	// parked holds the VMs of those workers.
	parked map[string]bool
	// usable lists the VMs in rotation (Pool.Usable).
	usable func() []string
}

type item struct {
	job Job
	res Result
	// failedOn holds the VMs on which the job ended by an environment
	// error; a retry prefers any other VM. Written by the worker that runs
	// the job, read by others only while it is pending.
	failedOn map[string]bool
}

func newQueue(jobs []Job, usable func() []string) *queue {
	q := &queue{usable: usable, parked: map[string]bool{}}
	q.cond = sync.NewCond(&q.mu)
	for _, j := range jobs {
		q.pending = append(q.pending, &item{job: j, res: Result{Job: j}})
	}
	return q
}

// pop returns the next job, blocking while others are in flight (they may
// come back); ok is false when everything is done.
func (q *queue) pop() (*item, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.pending) == 0 && q.inflight > 0 {
		q.cond.Wait()
	}
	if len(q.pending) == 0 {
		return nil, false
	}
	it := q.pending[0]
	q.pending = q.pending[1:]
	q.inflight++
	q.cond.Broadcast() // a worker in exchange may be waiting to see it taken
	return it, true
}

// wantsOtherVM reports whether it, leased vm, should be exchanged: it
// failed on vm and another VM could take it (see elsewhere).
func (q *queue) wantsOtherVM(it *item, vm string) bool {
	if !it.failedOn[vm] {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.elsewhereLocked(it.failedOn)
}

// elsewhereLocked reports whether a VM in rotation that a job did not fail
// on may still take it: one that is not parked by a worker in exchange
// (which would keep it for another job).
func (q *queue) elsewhereLocked(failed map[string]bool) bool {
	return q.elsewhereIn(q.usable(), failed)
}

// elsewhereIn is elsewhereLocked over a list of the VMs in rotation.
func (q *queue) elsewhereIn(usable []string, failed map[string]bool) bool {
	for _, id := range usable {
		if !failed[id] && !q.parked[id] {
			return true
		}
	}
	return false
}

// exchangeRecheck is how often a worker waiting in exchange looks at the
// pool again: a quarantine can leave it holding the one VM the job it gave
// back can still run on, and the pool does not signal the queue.
const exchangeRecheck = time.Second

// exchange is called by a worker that leased vm for it, a job that already
// failed on vm. It puts it back at the front and waits, keeping the VM, for
// a pending job that did not fail on vm — meanwhile a worker whose VM frees
// up takes it. It returns the job to run on vm; that is it itself (or
// another job that failed there) when every other worker waits too or
// maxWait passed. It returns nil when the caller should hand vm back
// unused and pop again: the queue is done, or another worker took it and
// no VM but vm can take it any more — every other one in rotation failed
// it or is parked in an exchange (that worker may be waiting in Lease for
// this very VM) — or it has waited maxWait for a job since.
//
// While another worker holds it and other VMs can still run it, the
// caller keeps vm: handing vm back at once would give it to that worker,
// which would pass it back again, and the two would trade the job and
// the VM until another VM freed up.
func (q *queue) exchange(ctx context.Context, it *item, vm string, workers int, maxWait time.Duration) *item {
	q.mu.Lock()
	defer q.mu.Unlock()
	failed := maps.Clone(it.failedOn) // it is ours only until another worker takes it
	q.pending = append([]*item{it}, q.pending...)
	q.inflight--
	q.waiting++
	q.parked[vm] = true
	defer func() {
		q.waiting--
		delete(q.parked, vm)
	}()
	deadline := time.Now().Add(maxWait)
	q.cond.Broadcast()
	for {
		// A job that did not fail on vm, or one no other VM can take.
		usable := q.usable()
		for i, other := range q.pending {
			if !other.failedOn[vm] || !q.elsewhereIn(usable, other.failedOn) {
				return q.takeLocked(i)
			}
		}
		taken := !slices.Contains(q.pending, it)
		expired := !time.Now().Before(deadline)
		switch {
		case len(q.pending) == 0 && q.inflight == 0, ctx.Err() != nil:
			return nil
		case len(q.pending) > 0 && (q.waiting >= workers || expired):
			return q.takeLocked(0) // nothing better will come
		case taken && (expired || !q.elsewhereIn(usable, failed)):
			return nil
		}
		wake := time.AfterFunc(min(exchangeRecheck, time.Until(deadline)), q.cond.Broadcast)
		q.cond.Wait()
		wake.Stop()
	}
}

func (q *queue) takeLocked(i int) *item {
	it := q.pending[i]
	q.pending = append(q.pending[:i], q.pending[i+1:]...)
	q.inflight++
	return it
}

// finish ends an item's flight; a retried item goes to the front.
func (q *queue) finish(it *item, retry bool) {
	q.mu.Lock()
	q.inflight--
	if retry {
		q.pending = append([]*item{it}, q.pending...)
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
		q := newQueue(order, s.Pool.Usable)
		stop := context.AfterFunc(ctx, q.drain)
		defer stop()
		for range s.Workers {
			wg.Add(1)
			go func() { // owned: waited for below
				defer wg.Done()
				for {
					it, ok := q.pop()
					if !ok || ctx.Err() != nil {
						if ok {
							q.finish(it, false)
						}
						return
					}
					vm, ok := s.lease(ctx, it)
					if ok && q.wantsOtherVM(it, vm.ID()) {
						// A retry goes to another VM: run another job here
						// while a worker whose VM frees up takes this one.
						if it = q.exchange(ctx, it, vm.ID(), s.Workers, retryWait); it == nil {
							// Unused: a healthy verdict here would wipe
							// the failures that should quarantine it.
							s.Pool.Return(vm)
							continue // pop again: it ends when the queue is done
						}
					}
					retry := ok && s.attempt(ctx, it, vm)
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
	if t.Outcome.IsEnvError() {
		if it.failedOn == nil {
			it.failedOn = map[string]bool{}
		}
		it.failedOn[vm.ID()] = true
	}
	if t.Outcome.IsEnvError() && (ee == nil || !ee.Permanent) && it.res.Attempts <= s.EnvRetries {
		s.Log.Info("environment error; the episode goes to another VM", "task", j.Task.ID, "sample", j.Sample, "vm", vm.ID(), "reason", t.Outcome.Reason, "attempt", it.res.Attempts)
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
