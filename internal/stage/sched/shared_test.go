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

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/stage/agent"
	"github.com/codapipe/codapipe/pkg/traj"
)

// memSource is a Source in memory with the shared queue's rules: a job is
// held by one taker until Done or Release; Take waits one poll while jobs
// are held (then ErrWait) and returns ErrDrained once none is pending or
// held.
type memSource struct {
	mu       sync.Mutex
	cond     *sync.Cond
	pending  []Job
	held     int
	done     map[benchKey]int
	released map[benchKey]int
	// waited, when not nil, is closed the first time a Take finds
	// nothing pending while jobs are held.
	waited chan struct{}
}

func newMemSource(jobs []Job) *memSource {
	s := &memSource{pending: jobs, done: map[benchKey]int{}, released: map[benchKey]int{}}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *memSource) Take(ctx context.Context) (Claim, error) {
	// Wait one poll at most, as the JetStream queue's fetch does.
	poll, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	stop := context.AfterFunc(poll, func() { s.mu.Lock(); s.cond.Broadcast(); s.mu.Unlock() })
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.pending) == 0 && s.held > 0 && poll.Err() == nil {
		s.cond.Wait()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(s.pending) == 0 && s.held > 0 {
		if s.waited != nil {
			close(s.waited)
			s.waited = nil
		}
		return nil, ErrWait
	}
	if len(s.pending) == 0 {
		return nil, ErrDrained
	}
	j := s.pending[0]
	s.pending = s.pending[1:]
	s.held++
	return &memClaim{s: s, job: j}, nil
}

type memClaim struct {
	s   *memSource
	job Job
}

func (c *memClaim) Job() Job      { return c.job }
func (c *memClaim) Retaken() bool { return false }
func (c *memClaim) Done(context.Context) error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.s.held--
	c.s.done[benchKey{c.job.Task.ID, c.job.Sample}]++
	c.s.cond.Broadcast()
	return nil
}
func (c *memClaim) Release(context.Context) error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.s.held--
	c.s.pending = append([]Job{c.job}, c.s.pending...)
	c.s.released[benchKey{c.job.Task.ID, c.job.Sample}]++
	c.s.cond.Broadcast()
	return nil
}

func sharedJobs(n int) []Job {
	var jobs []Job
	for i := range n {
		jobs = append(jobs, Job{Task: &scienceboard.Task{ID: fmt.Sprintf("T%d", i), Steps: 5}, Sample: 0})
	}
	return jobs
}

// With a shared Source, every job is run and marked done once; a job's
// environment-error retry stays with this process (it is not given back).
func TestSharedRunsEachJobOnceAndKeepsRetries(t *testing.T) {
	pool := simPool(t, 2, nil)
	jobs := sharedJobs(4)
	src := newMemSource(jobs)
	r := &failFirst{fail: map[benchKey]bool{{"T0", 0}: true}, runs: map[benchKey][]string{}}
	s := dynamic(r, pool, 2, 2)
	s.Source = src
	results := runFor(t, s, nil, time.Minute, "")
	if len(results) != len(jobs) {
		t.Fatalf("%d results, want %d", len(results), len(jobs))
	}
	for _, j := range jobs {
		k := benchKey{j.Task.ID, j.Sample}
		if src.done[k] != 1 || src.released[k] != 0 {
			t.Errorf("%v: done %d, released %d; want done once, never released", k, src.done[k], src.released[k])
		}
	}
	if got := r.runs[benchKey{"T0", 0}]; len(got) != 2 {
		t.Errorf("T0 ran %d times (%v), want the failed attempt and its retry", len(got), got)
	}
}

// blockRunner runs until its context ends (a run being stopped).
type blockRunner struct{ started chan struct{} }

func (r *blockRunner) Run(ctx context.Context, ep agent.Episode) (*traj.Trajectory, error) {
	r.started <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// A stopped run gives back the jobs it holds, at once.
func TestSharedStopGivesJobsBack(t *testing.T) {
	pool := simPool(t, 2, nil)
	jobs := sharedJobs(5)
	src := newMemSource(jobs)
	r := &blockRunner{started: make(chan struct{}, 5)}
	s := dynamic(r, pool, 2, 0)
	s.Source = src
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // owned: ends once two episodes run
		<-r.started
		<-r.started
		cancel()
	}()
	_, err := s.Run(ctx, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	released := 0
	for _, n := range src.released {
		released += n
	}
	if released != 2 || len(src.pending) != len(jobs) || src.held != 0 || len(src.done) != 0 {
		t.Errorf("released %d, pending %d, held %d, done %d; want the 2 running jobs given back and all 5 pending",
			released, len(src.pending), src.held, len(src.done))
	}
}

// A process whose VMs are all quarantined takes no job and says so: the
// jobs stay on the queue for other processes.
func TestSharedPoolGaveOut(t *testing.T) {
	pool := simPool(t, 2, map[int]bool{0: true, 1: true})
	jobs := sharedJobs(3)
	src := newMemSource(jobs)
	s := dynamic(&failFirst{runs: map[benchKey][]string{}}, pool, 2, 0)
	s.Source = src
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := s.Run(ctx, nil)
	if !errors.Is(err, ErrPoolGaveOut) {
		t.Fatalf("Run: %v, want ErrPoolGaveOut", err)
	}
	if len(src.pending) != len(jobs) || src.held != 0 {
		t.Errorf("pending %d, held %d; want every job left on the queue", len(src.pending), src.held)
	}
}

// The last job's retry after a VM fault gets a VM although every other
// worker is waiting for the queue: a waiting worker hands its VM back
// instead of holding it until the queue drains, which would wait for that
// very job (the rollout that hung in the chaos test).
func TestSharedRetryOfTheLastJobGetsAVM(t *testing.T) {
	pool := simPool(t, 2, nil)
	jobs := sharedJobs(1)
	src := newMemSource(jobs)
	waited := make(chan struct{})
	src.waited = waited
	r := &failFirst{fail: map[benchKey]bool{{"T0", 0}: true}, runs: map[benchKey][]string{}}
	// The failing attempt ends once the other worker waits on the queue.
	run := runnerFunc(func(ctx context.Context, ep agent.Episode) (*traj.Trajectory, error) {
		select {
		case <-waited:
		case <-ctx.Done():
		}
		return r.Run(ctx, ep)
	})
	s := dynamic(run, pool, 2, 2)
	s.Source = src
	results := runFor(t, s, nil, 20*time.Second, "the retry waited for a VM held by a worker waiting for the queue")
	if len(results) != 1 || src.done[benchKey{"T0", 0}] != 1 {
		t.Fatalf("%d results, T0 done %d times; want 1 and 1", len(results), src.done[benchKey{"T0", 0}])
	}
	got := r.runs[benchKey{"T0", 0}]
	if len(got) != 2 || got[0] == got[1] {
		t.Errorf("T0 ran on %v; want a failed attempt and its retry on the other VM", got)
	}
}

// runnerFunc makes a function a Runner.
type runnerFunc func(ctx context.Context, ep agent.Episode) (*traj.Trajectory, error)

func (f runnerFunc) Run(ctx context.Context, ep agent.Episode) (*traj.Trajectory, error) {
	return f(ctx, ep)
}

// On a shared queue, a job whose VM's lock was lost in every attempt goes
// back to the queue, and the process goes on taking jobs (a lost lock is
// not a pool that gave out).
func TestSharedLockLostGivesTheJobBack(t *testing.T) {
	pool := &losingPool{}
	jobs := sharedJobs(1)
	src := newMemSource(jobs)
	var published []string
	s := &Scheduler{Runner: &loseFirst{pool: pool, lose: 2}, Pool: pool, Workers: 1, EnvRetries: 1, Samples: 1, Mode: Dynamic,
		Source: src, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Publish: func(ctx context.Context, j Job, t *traj.Trajectory) error {
			published = append(published, t.ID)
			return nil
		}}
	results := runFor(t, s, nil, time.Minute, "a lost lock must not stop the process")
	key := benchKey{jobs[0].Task.ID, 0}
	if src.released[key] != 1 || src.done[key] != 1 {
		t.Errorf("job released %d times, done %d; want given back once, then done", src.released[key], src.done[key])
	}
	if fmt.Sprint(published) != "[T0-0-attempt-3]" {
		t.Errorf("published %v; want only the attempt that kept its VM", published)
	}
	if len(results) != 1 || !finished(results[0]) {
		t.Errorf("results %+v; want the job finished", results)
	}
}
