package rollout

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/clock"
	"github.com/codapipe/codapipe/internal/stage/sched"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultLease is how long a host may hold an episode of the shared work
// queue without a sign of life before the queue hands it to another host
// (--lease). The holder renews it every third of that while the episode
// runs.
const DefaultLease = 60 * time.Second

// ErrForeignEpisode is returned when the run's work queue holds an episode
// this invocation does not know (a task or sample it was not given): the
// hosts sharing a run must be given the same tasks and samples.
var ErrForeignEpisode = errors.New("the run's work queue holds an episode this invocation does not have")

// workItem is the body of a work-queue message: one planned episode.
type workItem struct {
	Run    string `json:"run"`
	Task   string `json:"task"`
	Sample int    `json:"sample"`
}

// workQueue is a run's share of the work-queue stream (bus.WorkStream):
// the episodes not published yet, one message each, taken by the hosts of
// the run through one durable pull consumer. It implements sched.Source.
type workQueue struct {
	b       *bus.Bus
	stream  jetstream.Stream
	cons    jetstream.Consumer
	subject string
	run     string
	tasks   map[string]*scienceboard.Task
	samples int
	ledger  *ledger.Ledger
	lease   time.Duration
	poll    time.Duration // how long one fetch waits for a message
	budget  time.Duration // retry budget of queue requests
	log     *slog.Logger

	// mine are the episodes this process took before: taking one again
	// (after it gave it back, or its own lease ran out) is not taking it
	// over from another host.
	mu   sync.Mutex
	mine map[ledger.EpisodeKey]bool
}

// workConsumer is the durable consumer of a run's work queue, shared by
// every host of the run.
func workConsumer(run string) string { return "rollout-" + bus.KeyToken(run) }

// openWorkQueue creates the work-queue stream and the run's consumer where
// missing, and enqueues the planned jobs in the scheduler's order
// (sched.Order: longest predicted first). Every host of a run enqueues its plan; the message id of an
// episode is derived from the run, its start, the task and the sample, so
// the stream stores each episode once (within its de-duplication window),
// and an episode a host has already finished (its message acknowledged)
// is not stored again.
func openWorkQueue(ctx context.Context, cfg Config, runs *ledger.Ledger, start time.Time, jobs []sched.Job, redo map[ledger.EpisodeKey]string, pred sched.Predictor, log *slog.Logger) (*workQueue, error) {
	q := &workQueue{
		b: cfg.Bus, subject: bus.WorkSubject(cfg.Run), run: cfg.Run, samples: cfg.Samples, ledger: runs,
		lease: cfg.Lease, poll: time.Second, budget: cfg.PublishRetry, tasks: map[string]*scienceboard.Task{}, log: log,
	}
	if q.lease <= 0 {
		q.lease = DefaultLease
	}
	q.poll = min(q.poll, q.lease/2)
	for i := range cfg.Tasks {
		q.tasks[cfg.Tasks[i].ID] = &cfg.Tasks[i]
	}
	err := bus.RetryTransient(ctx, q.budget, func(ctx context.Context) error {
		var err error
		q.stream, err = cfg.Bus.EnsureWorkStream(ctx, cfg.Topology)
		return err
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("rollout: work queue: %w", err)
	}
	ccfg := jetstream.ConsumerConfig{
		Durable:       workConsumer(cfg.Run),
		Description:   "rollout hosts of run " + cfg.Run,
		FilterSubject: q.subject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       q.lease,
		MaxDeliver:    -1,
		MaxAckPending: -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		// A run nobody works on for a day loses its consumer; its
		// messages stay, and the next host creates it again.
		InactiveThreshold: 24 * time.Hour,
		Replicas:          max(cfg.Topology.Replicas, 1),
	}
	err = bus.RetryTransient(ctx, q.budget, func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var err error
		q.cons, err = q.stream.CreateOrUpdateConsumer(cctx, ccfg)
		return err
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("rollout: work queue consumer %s: %w", ccfg.Durable, err)
	}
	stored := 0
	for _, j := range sched.Order(jobs, pred) {
		body, _ := json.Marshal(workItem{Run: cfg.Run, Task: j.Task.ID, Sample: j.Sample})
		hdr := nats.Header{}
		hdr.Set(HeaderRun, cfg.Run)
		hdr.Set(HeaderTask, j.Task.ID)
		hdr.Set(HeaderSample, strconv.Itoa(j.Sample))
		id := msgIDFor(redo, ledger.EpisodeKey{Task: j.Task.ID, Sample: j.Sample}, traj.EpisodeID(start, cfg.Run, j.Task.ID, j.Sample))
		// Bus.Publish retries transient errors; the budget bounds it.
		pctx, cancel := context.WithTimeout(ctx, cmp.Or(q.budget, bus.DefaultRetryBudget))
		ack, err := cfg.Bus.Publish(pctx, q.subject, id, body, hdr)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("rollout: enqueue %s/%d of run %q: %w", j.Task.ID, j.Sample, cfg.Run, err)
		}
		if !ack.Duplicate {
			stored++
		}
	}
	log.Info("rollout: work queue", "subject", q.subject, "consumer", ccfg.Durable, "planned", len(jobs), "enqueued_now", stored, "lease", q.lease)
	return q, nil
}

// remaining is the number of the run's episodes on the queue: pending or
// held by a host.
func (q *workQueue) remaining(ctx context.Context) (uint64, error) {
	cctx, cancel := context.WithTimeout(ctx, min(10*time.Second, cmp.Or(q.budget, bus.DefaultRetryBudget)))
	defer cancel()
	info, err := q.stream.Info(cctx, jetstream.WithSubjectFilter(q.subject))
	if err != nil {
		return 0, err
	}
	return info.State.Subjects[q.subject], nil
}

// Take returns the next episode of the run, waiting one poll for it; it
// returns sched.ErrWait when the queue has none to hand out but hosts
// still hold some (a dead host's come back when their lease ends). An episode the ledger lists as published is
// acknowledged and skipped. It returns sched.ErrDrained once the run has
// no episode on the queue.
func (q *workQueue) Take(ctx context.Context) (sched.Claim, error) {
	failures, since := 0, time.Time{}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m, err := q.fetch(ctx)
		if err == nil && m == nil {
			var n uint64
			if n, err = q.remaining(ctx); err == nil && n == 0 {
				return nil, sched.ErrDrained
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// The server is away (an election, a restart): keep trying
			// within the retry budget's worth of polls.
			if failures++; failures == 1 {
				since = time.Now()
			}
			if !bus.IsTransient(err) || time.Since(since) > cmp.Or(q.budget, bus.DefaultRetryBudget) {
				return nil, fmt.Errorf("rollout: work queue %s: %w", q.subject, err)
			}
			q.log.Warn("rollout: work queue unavailable; retrying", "subject", q.subject, "err", err)
			if err := clock.Sleep(ctx, q.poll); err != nil {
				return nil, err
			}
			continue
		}
		failures = 0
		if m == nil {
			// Held by hosts (this one included): the caller hands its VM
			// back and asks again.
			return nil, sched.ErrWait
		}
		c, err := q.claim(ctx, m)
		if err != nil || c != nil {
			return c, err
		}
	}
}

// fetch waits up to q.poll for one message; nil when none came. The pull
// request is not cut short when ctx ends: a message the server sends just
// then would be lost to this host and held until its lease ran out, so
// the fetch runs its course and a message that comes is given back.
func (q *workQueue) fetch(ctx context.Context) (jetstream.Msg, error) {
	batch, err := q.cons.Fetch(1, jetstream.FetchMaxWait(q.poll))
	if err != nil {
		return nil, err
	}
	var m jetstream.Msg
	for x := range batch.Messages() {
		m = x
	}
	if err := batch.Error(); err != nil && m == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
		return nil, err
	}
	if m != nil && ctx.Err() != nil {
		_ = m.Nak()
		return nil, ctx.Err()
	}
	return m, nil
}

// claim turns a fetched message into a claim; nil (and no error) when the
// episode is published already (the message is acknowledged).
func (q *workQueue) claim(ctx context.Context, m jetstream.Msg) (*workClaim, error) {
	var it workItem
	if err := json.Unmarshal(m.Data(), &it); err != nil || it.Run != q.run {
		// Not a work item of ours: it would block the run's queue forever.
		q.log.Error("rollout: a message on the run's work queue is not an episode of the run; removed", "subject", q.subject, "body", string(m.Data()), "err", err)
		_ = m.Term()
		return nil, nil
	}
	task, ok := q.tasks[it.Task]
	if !ok || it.Sample < 0 || it.Sample >= q.samples {
		_ = m.Nak()
		return nil, fmt.Errorf("%w: %s/%d (this one has %d tasks and %d samples); give every host of run %q the same tasks and --samples",
			ErrForeignEpisode, it.Task, it.Sample, len(q.tasks), q.samples, q.run)
	}
	job := sched.Job{Task: task, Sample: it.Sample}
	var delivered uint64
	if md, err := m.Metadata(); err == nil {
		delivered = md.NumDelivered
	}
	key := ledger.EpisodeKey{Task: it.Task, Sample: it.Sample}
	q.mu.Lock()
	before := q.mine[key]
	if q.mine == nil {
		q.mine = map[ledger.EpisodeKey]bool{}
	}
	q.mine[key] = true
	q.mu.Unlock()
	c := &workClaim{m: m, job: job, retaken: delivered > 1 && !before, budget: min(cmp.Or(q.budget, bus.DefaultRetryBudget), q.lease), log: q.log}
	c.end = bus.KeepInProgress(context.WithoutCancel(ctx), m, q.lease/3, q.log, "rollout: could not renew the lease of an episode", "task", task.ID, "sample", it.Sample)
	// Another host may have published it and lost its acknowledgement
	// (a crash between the two, or the server away): not run twice.
	if _, done, err := q.ledger.Published(ctx, q.run, ledger.EpisodeKey{Task: it.Task, Sample: it.Sample}); err != nil {
		_ = c.Release(context.WithoutCancel(ctx))
		return nil, err
	} else if done {
		q.log.Info("rollout: episode on the work queue is published already; removed", "task", it.Task, "sample", it.Sample)
		if err := c.Done(context.WithoutCancel(ctx)); err != nil {
			q.log.Warn("rollout: could not remove a published episode from the work queue", "task", it.Task, "sample", it.Sample, "err", err)
		}
		return nil, nil
	}
	q.log.Debug(msgEpisodeTaken, "task", it.Task, "sample", it.Sample, "delivery", delivered)
	return c, nil
}

// Log messages of the shared queue, one per episode taken and done (tests
// count them).
const (
	msgEpisodeTaken = "rollout: episode taken from the shared queue"
	msgEpisodeDone  = "rollout: episode done on the shared queue"
)

// workClaim is an episode a host holds: its lease is renewed (in-progress
// acknowledgements) until Done or Release.
type workClaim struct {
	m       jetstream.Msg
	job     sched.Job
	retaken bool
	budget  time.Duration
	log     *slog.Logger
	// end stops the in-progress acknowledgements (and waits for them);
	// again, it does nothing.
	end func()
}

// Job is the claimed episode.
func (c *workClaim) Job() sched.Job { return c.job }

// Retaken reports whether another host had the episode before (it was
// delivered before, not to this process).
func (c *workClaim) Retaken() bool { return c.retaken }

// Done acknowledges the episode (confirmed by the server): it leaves the
// queue.
func (c *workClaim) Done(ctx context.Context) error {
	c.end()
	err := bus.RetryTransient(ctx, c.budget, func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, min(10*time.Second, c.budget))
		defer cancel()
		return c.m.DoubleAck(cctx)
	}, nil)
	if err == nil {
		c.log.Debug(msgEpisodeDone, "task", c.job.Task.ID, "sample", c.job.Sample)
	}
	return err
}

// Release gives the episode back at once, for any host.
func (c *workClaim) Release(context.Context) error {
	c.end()
	return c.m.Nak()
}
