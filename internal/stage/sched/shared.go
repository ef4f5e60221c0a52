package sched

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/codapipe/codapipe/pkg/vmpool"
)

// runShared runs the jobs of s.Source: each of the Workers leases a VM
// first and only then takes a job, so a process takes no more jobs than it
// has VMs to run them on and the rest stay on the queue for other
// processes. A job's environment-error retries stay with this process (it
// holds the job's lease meanwhile); the job is Done once its trajectory is
// published — or kept locally by Publish, which then returns an error
// wrapping ErrKept — and released when the run is stopped or the pool
// gives out. Results list the jobs this process ran, in the order they
// ended. Run returns ctx's error when it was stopped, ErrPoolGaveOut when
// the pool gave out before the queue was drained, or the Source's error.
func (s *Scheduler) runShared(ctx context.Context) ([]Result, error) {
	var (
		mu       sync.Mutex
		results  []Result
		firstErr error
	)
	// takeCtx ends when a worker must stop taking jobs (the pool gave
	// out, the Source failed): the others finish what they run and stop.
	takeCtx, stopTaking := context.WithCancel(ctx)
	defer stopTaking()
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		stopTaking()
	}
	record := func(r Result) {
		mu.Lock()
		results = append(results, r)
		mu.Unlock()
		s.Metrics.ended(r)
		if s.Done != nil {
			s.Done(r)
		}
	}
	s.Metrics.pending.Set(0)
	var wg sync.WaitGroup
	for range s.Workers {
		wg.Add(1)
		go func() { // owned: waited for below
			defer wg.Done()
			for takeCtx.Err() == nil {
				if err := s.sharedOne(ctx, takeCtx, record); err != nil {
					if !errors.Is(err, ErrDrained) && ctx.Err() == nil {
						fail(err)
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return results, context.Cause(ctx)
	}
	return results, firstErr
}

// sharedOne leases a VM, takes a job and runs it to its end on this
// process (under ctx; takeCtx bounds the lease and the take). It returns
// ErrDrained when the queue is drained, and an error when this process
// must stop taking jobs.
func (s *Scheduler) sharedOne(ctx, takeCtx context.Context, record func(Result)) error {
	if !s.pause(takeCtx) {
		return context.Cause(takeCtx)
	}
	vm, err := s.Pool.Lease(takeCtx, nil)
	if err != nil {
		if takeCtx.Err() != nil {
			return takeCtx.Err()
		}
		s.Metrics.leaseFailures.Inc()
		return fmt.Errorf("%w: %w", ErrPoolGaveOut, err)
	}
	c, err := s.Source.Take(takeCtx)
	if errors.Is(err, ErrWait) {
		// Hand the VM back while nothing is there to take: a job of this
		// process retried after an environment error may need it, and a
		// worker that held it while waiting for the queue to drain would
		// wait for that very job.
		s.Pool.End(vm, vmpool.Unused)
		return nil
	}
	if err != nil {
		s.Pool.End(vm, vmpool.Unused)
		return err
	}
	it := &item{job: c.Job(), res: Result{Job: c.Job(), Retaken: c.Retaken()}}
	retry := s.attempt(ctx, it, vm)
	for retry && ctx.Err() == nil {
		vm, ok := s.lease(ctx, it)
		if !ok {
			break
		}
		retry = s.attempt(ctx, it, vm)
	}
	// Done and Release must reach the queue also as the run stops.
	qctx := context.WithoutCancel(ctx)
	switch {
	case it.res.Trajectory != nil && (it.res.Err == nil || errors.Is(it.res.Err, ErrKept)):
		if err := c.Done(qctx); err != nil {
			// The queue hands the job out again after its lease; the
			// taker finds it published and leaves it.
			s.Log.Warn("sched: could not mark the job done on the shared queue; it will be found published when handed out again",
				"task", it.job.Task.ID, "sample", it.job.Sample, "err", err)
		}
		record(it.res)
	case it.res.Trajectory != nil:
		// Not published and not kept: another process runs it again.
		if err := c.Release(qctx); err != nil {
			s.Log.Warn("sched: could not give the job back to the shared queue; it returns after its lease", "task", it.job.Task.ID, "sample", it.job.Sample, "err", err)
		}
		record(it.res)
	default: // stopped, or no VM for a retry
		if err := c.Release(qctx); err != nil {
			s.Log.Warn("sched: could not give the job back to the shared queue; it returns after its lease", "task", it.job.Task.ID, "sample", it.job.Sample, "err", err)
		}
		if errors.Is(it.res.Err, ErrNoVM) && !errors.Is(it.res.Err, ErrVMLockLost) {
			record(it.res)
			return fmt.Errorf("%w: %w", ErrPoolGaveOut, it.res.Err)
		}
	}
	return nil
}

// ErrKept is wrapped by the error of a Publish that could not publish a
// trajectory as usual but kept it where it is not lost — rollout's local
// spool, published later, or the dead letters for an invalid one: the job
// is done as far as the shared queue is concerned.
var ErrKept = errors.New("trajectory kept locally for a later publish")
