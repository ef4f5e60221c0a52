// Package sched runs a rollout's episodes over a VM pool: a shared queue,
// longest step limit first, where each worker takes an episode, leases a VM
// for it (avoiding the VMs it failed on), runs it and ends the lease; an
// episode ended by an environment error runs again, up to a bound. A static
// split (CODA's) is kept for comparison.
package sched

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/stage/agent"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/prometheus/client_golang/prometheus"
)

// VM is a leased VM as the scheduler sees it.
type VM interface {
	ID() string
	Guest() agent.Guest
}

// Pool hands out VMs (*vmpool.Pool through VMPool). Lease blocks
// until a VM is ready that is not in avoid — unless no other VM is left in
// the pool's hands, when an avoided one is better than none. End ends a
// lease with the caller's verdict on the VM: vmpool.Healthy,
// vmpool.Fault(err) (counted toward quarantine) or vmpool.Unused.
type Pool interface {
	Lease(ctx context.Context, avoid []string) (VM, error)
	End(vm VM, v vmpool.Verdict)
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
	// Retaken: the job came from a shared Source that had handed it to
	// another process before (whose lease expired, or which gave it back).
	Retaken bool
}

// Source is a queue of jobs shared with other processes (rollout's work
// queue on JetStream): each job is handed to one taker at a time, under a
// lease the Claim keeps alive while the job runs.
type Source interface {
	// Take waits a little (one poll) for the next job. It returns
	// ErrWait when none came but jobs are still held (by this process or
	// others, whose leases may end), ErrDrained when no job is left for
	// anyone (none pending, none held by any process), or ctx's error, or
	// the error that keeps it from taking work.
	Take(ctx context.Context) (Claim, error)
}

// Claim is a job taken from a Source.
type Claim interface {
	Job() Job
	// Retaken reports whether the job was handed out before.
	Retaken() bool
	// Done says the job's result is stored (its trajectory published and
	// recorded): the job leaves the queue.
	Done(ctx context.Context) error
	// Release gives the job back undone, for any taker.
	Release(ctx context.Context) error
}

// ErrWait is returned by Source.Take when no job could be handed out now
// but some are held and may come back: the taker hands its VM back (a job
// of this process that is retried may need it) and asks again.
var ErrWait = errors.New("no job to hand out now; jobs are held")

// ErrDrained is returned by Source.Take when the queue has no job left.
var ErrDrained = errors.New("the work queue is drained")

// ErrPoolGaveOut is returned by Run with a Source when this process's
// VM pool can give no VM (every VM quarantined) while the queue still
// held jobs: the jobs it held went back to the queue.
var ErrPoolGaveOut = errors.New("the VM pool gave out; jobs left to other processes")

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
	// Workers is how many episodes run at once: the pool size.
	Workers int
	// EnvRetries bounds how often an episode that ended by an environment
	// error is run again — on another VM when the VM was at fault (see
	// Pool.Lease's avoid) — before its env_error trajectory is kept (0:
	// never; rollout's flag defaults to 2).
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
	// Outages, when set, is the breaker of the model endpoints: an
	// episode interrupted by an endpoint that is down for every VM runs
	// again once it answers (it is not an environment error), no episode
	// starts while one is down, and the run stops when an outage outlasts
	// its budget (Run returns the *OutageError).
	Outages *model.Outages
	// Metrics (nil: unregistered metrics).
	Metrics *Metrics
	Log     *slog.Logger
	// Predict orders the dynamic mode's jobs, longest predicted first
	// (Order); nil orders by step limit.
	Predict Predictor
	// Source, in the dynamic mode, is a queue shared with other
	// processes that Run takes its jobs from instead of its jobs argument
	// (see runShared).
	Source Source

	// stop ends the run with a cause (an outage beyond its budget, a
	// *SharedError).
	stop context.CancelCauseFunc
	// badShots are the VMs whose attempts failed on their screenshot
	// since the last attempt anywhere that did not, refusals the attempts
	// in a row refused by a model endpoint (sharedFailure).
	shotMu   sync.Mutex
	badShots map[string]bool
	refusals int
}

// ErrNoVM is wrapped by the error of a job that got no VM (the pool's
// Lease failed: every VM quarantined, or the pool closed).
var ErrNoVM = errors.New("no VM for the episode")

// queue is the shared job queue of the dynamic mode: each worker takes a
// job, leases a VM for it, runs it and ends the lease. A job that ends by
// an environment error with retries left goes back to the front.
type queue struct {
	mu       sync.Mutex
	cond     *sync.Cond
	pending  []*item
	inflight int
	stopped  bool             // ctx ended: take returns nil
	gauge    prometheus.Gauge // pending jobs
}

type item struct {
	job Job
	res Result
	// failedOn lists the VMs on which the job ended by an environment
	// error of the VM; a retry asks the pool to avoid them.
	failedOn []string
}

func newQueue(jobs []Job, pending prometheus.Gauge) *queue {
	q := &queue{gauge: pending}
	q.cond = sync.NewCond(&q.mu)
	for _, j := range jobs {
		q.pending = append(q.pending, &item{job: j, res: Result{Job: j}})
	}
	return q
}

// take returns the next job, waiting while nothing is pending but jobs are
// in flight (they may come back as retries). It returns nil when every job
// has ended, or when the run was stopped.
func (q *queue) take() *item {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.pending) == 0 && q.inflight > 0 && !q.stopped {
		q.cond.Wait()
	}
	if len(q.pending) == 0 || q.stopped {
		return nil
	}
	it := q.pending[0]
	q.pending = q.pending[1:]
	q.inflight++
	q.gauge.Set(float64(len(q.pending)))
	return it
}

// finish ends a job's flight; a retried job goes to the front.
func (q *queue) finish(it *item, retry bool) {
	q.mu.Lock()
	q.inflight--
	if retry {
		q.pending = append([]*item{it}, q.pending...)
		q.gauge.Set(float64(len(q.pending)))
	}
	q.mu.Unlock()
	q.cond.Broadcast()
}

// stop makes take return nil (the run's ctx ended).
func (q *queue) stop() {
	q.mu.Lock()
	q.stopped = true
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
	if s.Metrics == nil {
		s.Metrics = NewMetrics(nil)
	}
	ctx, s.stop = context.WithCancelCause(ctx)
	defer s.stop(nil)
	s.Metrics.pending.Set(float64(len(jobs)))
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
		s.Metrics.ended(r)
		if s.Done != nil {
			s.Done(r)
		}
	}
	var wg sync.WaitGroup
	switch {
	case s.Source != nil && s.Mode != Static:
		return s.runShared(ctx)
	case s.Mode == Static:
		chunks := split(jobs, s.Workers)
		for _, chunk := range chunks {
			wg.Add(1)
			go func() { // owned: waited for below
				defer wg.Done()
				for _, j := range chunk {
					if ctx.Err() != nil {
						return
					}
					s.Metrics.pending.Dec()
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
		// Longest first: a job's predicted length (its task's history, or
		// its step limit, which bounds it) is known before it runs, so the
		// long episodes start early and the short ones fill the tail
		// (LPT). Stable, so K samples of a task and the task order are
		// kept among equals.
		q := newQueue(Order(jobs, s.Predict), s.Metrics.pending)
		stop := context.AfterFunc(ctx, q.stop)
		defer stop()
		for range s.Workers {
			wg.Add(1)
			go func() { // owned: waited for below
				defer wg.Done()
				for it := q.take(); it != nil; it = q.take() {
					retry := false
					if vm, ok := s.lease(ctx, it); ok {
						retry = s.attempt(ctx, it, vm)
					}
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
	if ctx.Err() != nil {
		return results, context.Cause(ctx)
	}
	return results, nil
}

// pause waits while a model endpoint is down (Outages.Wait) and reports
// whether to go on; an outage beyond its budget stops the run.
func (s *Scheduler) pause(ctx context.Context) bool {
	err := s.Outages.Wait(ctx)
	if err != nil && ctx.Err() == nil {
		s.stop(err)
	}
	return err == nil
}

// lease leases a VM for a job, avoiding the VMs it failed on; ok is false
// (with the job's error set unless ctx ended) when none can be had.
func (s *Scheduler) lease(ctx context.Context, it *item) (VM, bool) {
	if !s.pause(ctx) {
		return nil, false
	}
	vm, err := s.Pool.Lease(ctx, it.failedOn)
	if err != nil {
		if ctx.Err() == nil {
			it.res.Err = fmt.Errorf("%w %s/%d: %w", ErrNoVM, it.job.Task.ID, it.job.Sample, err)
			s.Metrics.leaseFailures.Inc()
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
	s.Metrics.running.Inc()
	ectx, lost := watchLoss(ctx, vm)
	t, err := s.Runner.Run(ectx, agent.Episode{ID: id, Task: j.Task, Sample: j.Sample, Samples: s.Samples, VM: vm.ID(), Guest: vm.Guest()})
	wasLost := lost()
	s.Metrics.running.Dec()
	it.res.Busy += time.Since(start)
	s.Metrics.attemptSeconds.Observe(time.Since(start).Seconds())
	if wasLost {
		return s.lockLost(ctx, it, vm)
	}
	if t == nil { // ctx ended: abandon, unpublished (the VM was used: reset it)
		s.Pool.End(vm, vmpool.Healthy)
		return false
	}
	var ee *agent.EnvError
	vmFault := errors.As(err, &ee) && ee.VM
	se, again := s.sharedFailure(vm, ee, err)
	if again {
		// Maybe every VM's, maybe this request's: not counted, and run
		// again; a second in a row stops the run.
		s.Pool.End(vm, vmpool.Healthy)
		it.res.Attempts--
		s.Log.Warn("sched: a model endpoint refused the request as it would refuse every request; the episode runs again, and a second refusal in a row stops the run", "task", j.Task.ID, "sample", j.Sample, "err", err)
		return true
	}
	if se != nil {
		// Every VM would end the same way: not this episode's outcome.
		// The run stops; the episode is not published and runs when the
		// same run is started again.
		s.Pool.End(vm, vmpool.Healthy)
		it.res.Attempts--
		s.Log.Error("sched: a failure every VM shares; the run stops without burning its episodes", "cause", se.Cause, "err", err)
		s.stop(se)
		return false
	}
	ep, down := "", false
	if !vmFault {
		ep, down = s.Outages.Down(ctx, err)
	}
	if down {
		// The endpoint is down for every VM: not this episode's outcome.
		// Its trajectory is dropped and it runs again once the endpoint
		// answers; the attempt does not count.
		s.Pool.End(vm, vmpool.Healthy)
		it.res.Attempts--
		s.Log.Debug("an endpoint outage interrupted the episode; it runs again when the endpoint answers", "task", j.Task.ID, "sample", j.Sample, "vm", vm.ID(), "endpoint", ep)
		return true
	}
	if vmFault {
		s.Pool.End(vm, vmpool.Fault(ee))
		// Only the VM's own failures steer the retry away from it: after a
		// model endpoint or the blob store failed, any VM will do.
		if !slices.Contains(it.failedOn, vm.ID()) {
			it.failedOn = append(it.failedOn, vm.ID())
		}
	} else {
		s.Pool.End(vm, vmpool.Healthy)
	}
	if t.Outcome.IsEnvError() && (ee == nil || !ee.Permanent) && it.res.Attempts <= s.EnvRetries {
		s.Metrics.retries.Inc()
		if vmFault {
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
			s.Metrics.publishFailures.Inc()
		}
	}
	return false
}

// ErrShared is wrapped by a *SharedError.
var ErrShared = errors.New("a failure every VM shares")

// SharedError stops a run when an episode ended by a failure that every
// VM shares, which another attempt would meet again: the blob store
// refuses writes, a model endpoint refuses every request (a wrong URL,
// route or key), or the screenshot is unusable on every VM. Its episode is
// not published: the same run started again runs it.
type SharedError struct {
	Cause string
	Err   error
}

func (e *SharedError) Error() string {
	return fmt.Sprintf("%s: the run stops without recording the episodes it could not run (run the same command again once it is fixed): %v", e.Cause, e.Err)
}

func (e *SharedError) Unwrap() []error { return []error{ErrShared, e.Err} }

// sharedFailure tells whether the attempt on vm ended by a failure every
// VM shares (se), or by one that may be (again: run the episode again,
// uncounted). The blob store refusing writes (blob.Refused) is shared at
// once. A model endpoint refusing the request as it would every request
// (model.RefusesEveryRequest: a wrong URL, route or key) is shared when it
// happens twice in a row: a proxy's 404 during a restart passes. The
// screenshot is unusable on every VM when the attempts on every VM
// (Workers) have failed on it with no other outcome anywhere in between.
func (s *Scheduler) sharedFailure(vm VM, ee *agent.EnvError, err error) (se *SharedError, again bool) {
	shot := ee != nil && ee.VM && ee.Op == "screenshot"
	refused := model.RefusesEveryRequest(err)
	s.shotMu.Lock()
	if shot {
		if s.badShots == nil {
			s.badShots = map[string]bool{}
		}
		s.badShots[vm.ID()] = true
	} else {
		clear(s.badShots)
	}
	if refused {
		s.refusals++
	} else {
		s.refusals = 0
	}
	bad, refusals := len(s.badShots), s.refusals
	s.shotMu.Unlock()
	switch {
	case ee != nil && !ee.VM && ee.Op == "blob store" && blob.Refused(err):
		return &SharedError{Cause: "the blob store refuses writes", Err: err}, false
	case refused && refusals < 2:
		return nil, true
	case refused:
		return &SharedError{Cause: "a model endpoint refuses every request (a wrong URL, route or key?)", Err: err}, false
	case shot && s.Workers > 0 && bad >= s.Workers:
		return &SharedError{Cause: fmt.Sprintf("the screenshot is unusable on every VM (%d)", bad), Err: err}, false
	}
	return nil, false
}

// lockLost ends an attempt during which the VM's lock was lost: another
// process may have driven the VM, so whatever the attempt made is
// discarded, not published. The job runs again within EnvRetries, like an
// environment error; after that it ends without a trajectory (ErrNoVM and
// ErrVMLockLost).
func (s *Scheduler) lockLost(ctx context.Context, it *item, vm VM) (retry bool) {
	s.Pool.End(vm, vmpool.Healthy) // the pool lets the VM go whatever the verdict
	s.Metrics.locksLost.Inc()
	j := it.job
	if ctx.Err() != nil {
		return false
	}
	if it.res.Attempts <= s.EnvRetries {
		s.Log.Warn("sched: the VM's lock was lost during the episode; its trajectory is discarded and the episode runs again",
			"task", j.Task.ID, "sample", j.Sample, "vm", vm.ID(), "attempt", it.res.Attempts)
		return true
	}
	it.res.Err = fmt.Errorf("%w %s/%d: %w (VM %s, attempt %d of %d)", ErrNoVM, j.Task.ID, j.Sample, ErrVMLockLost, vm.ID(), it.res.Attempts, s.EnvRetries+1)
	return false
}

// watchLoss returns a context for an attempt on vm that ends when ctx
// ends or the VM's lock is lost (a VM with a Lost channel, as
// *vmpool.Lease has), and lost, which ends the watch and reports whether
// the lock was lost.
func watchLoss(ctx context.Context, vm VM) (context.Context, func() (lost bool)) {
	ln, ok := vm.(interface{ Lost() <-chan struct{} })
	if !ok {
		return ctx, func() bool { return false }
	}
	ch := ln.Lost()
	ectx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // owned: waited for by lost
		select {
		case <-ch:
			cancel(errLockLost)
		case <-done:
		}
	})
	return ectx, func() bool {
		close(done)
		wg.Wait()
		cancel(nil)
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
}

// errLockLost is the cause of an attempt's context cancelled because the
// VM's lock was lost.
var errLockLost = errors.New("the VM's lock was lost")

// ErrVMLockLost is wrapped, with ErrNoVM, by the error of a job whose VM's
// lock was lost during each of its attempts (see vmpool.LossNotifier).
// On a shared queue the job goes back for another process, and this one
// goes on.
var ErrVMLockLost = errors.New("the VM's lock was lost during each attempt")

// LongestFirst returns the jobs in the dynamic mode's order without
// history: longest step limit first, stable among equals (Order with a nil
// Predictor).
func LongestFirst(jobs []Job) []Job { return Order(jobs, nil) }

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

// VMPool makes a *vmpool.Pool a Pool.
func VMPool(p *vmpool.Pool) Pool { return vmPool{p} }

type vmPool struct{ p *vmpool.Pool }

type leased struct{ *vmpool.Lease }

// A lease tells its attempt when the VM's lock is lost (watchLoss).
var _ interface{ Lost() <-chan struct{} } = leased{}

func (l leased) Guest() agent.Guest { return l.Lease.Guest() }

func (a vmPool) Lease(ctx context.Context, avoid []string) (VM, error) {
	l, err := a.p.Lease(ctx, vmpool.Avoid(avoid...))
	if err != nil {
		return nil, err
	}
	return leased{l}, nil
}

func (a vmPool) End(vm VM, v vmpool.Verdict) { _ = vm.(leased).Lease.End(v) }
