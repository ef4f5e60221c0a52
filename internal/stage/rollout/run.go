package rollout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/codapipe/codapipe/internal/contract/archive"
	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/contract/prompt"
	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/redact"
	"github.com/codapipe/codapipe/internal/stage/agent"
	"github.com/codapipe/codapipe/internal/stage/sched"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/poolfile"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// Config is a rollout run as the library takes it: everything resolved
// (tasks loaded, endpoints and the VM pool named, the bus and the blob
// store open). The command layer (Execute) builds it from the flags, and
// starts the simulator when asked.
type Config struct {
	App     string
	Group   int    // G: each step samples G+1 plans
	Samples int    // K: episodes per task
	Run     string // run name; re-running a name finishes its missing episodes
	// Tasks are the app's tasks.
	Tasks []scienceboard.Task
	// Pool describes the VMs (a pool file, or its like built in code);
	// PoolOptions adjust the pool (guest client options, events).
	Pool        poolfile.Config
	PoolOptions []vmpool.Option
	// Planner and Executor are the model endpoints, PlannerCoords and
	// ExecutorCoords the coordinate spaces they write points in.
	Planner, Executor             model.Config
	PlannerCoords, ExecutorCoords traj.Coords
	// PlannerSampling and ExecutorSampling are sent with every request
	// to the two models; zero means the agent's defaults. The planner
	// always asks for log-probabilities and token ids.
	PlannerSampling, ExecutorSampling traj.Sampling
	Prompts                           string // prompt template folder; empty: ours
	// Sleep and RequestSeed go to the agent (agent.Config).
	Sleep       func(ctx context.Context, d time.Duration) error
	RequestSeed *int64
	// DownloadInGuest has the guest fetch download items, MaxImagePixels
	// bounds a screenshot (agent.Config).
	DownloadInGuest bool
	MaxImagePixels  int64
	// EnvRetries bounds re-runs of an episode ended by an environment error.
	EnvRetries int
	// OutageBudget is how long the run waits for a model endpoint that is
	// down for every VM before it stops (model.DefaultOutageBudget when
	// 0); OutageProbe is the first wait between probes of such an
	// endpoint (1 s when 0).
	OutageBudget, OutageProbe time.Duration
	Schedule                  sched.Mode
	// Bus and Store are open; Topology says how to create the ledger
	// bucket when it is missing.
	Bus      *bus.Bus
	Store    *blob.Store
	Topology bus.Topology
	// Metrics is where the agent's, the scheduler's and the pool's metrics
	// are registered (nil: nowhere).
	Metrics prometheus.Registerer
	// Progress is where the progress display goes (a terminal gets a bar).
	Progress io.Writer
	Log      *slog.Logger
	// LocalQueue runs the episodes from this process's own queue instead
	// of the run's shared work queue on JetStream (bus.WorkStream), which
	// any number of hosts on the same run take episodes from. The static
	// schedule, and a run on the embedded NATS server (which no other host
	// can reach), always run locally.
	LocalQueue bool
	// Lease is how long a host holds an episode of the shared queue
	// without renewing it before another host may take it (DefaultLease
	// when 0).
	Lease time.Duration
	// PublishRetry is how long each publish and ledger write is retried
	// through transient errors (bus.DefaultRetryBudget when 0).
	PublishRetry time.Duration
	// Spool is the directory where trajectories that cannot be published
	// wait for the next start ("": none; the command uses <data>/spool).
	Spool string
	// LengthFamily is the checkpoint family of the episode-length history
	// (CODA_LENGTHS) the run's episodes are ordered by and recorded into:
	// "" the planner checkpoint's (sched.Family), LengthsOff none.
	LengthFamily string
	// Verify (rollout --verify) reconciles the run's ledger with the
	// stream both ways before the run: episodes the ledger lists as
	// published whose trajectory is not on the stream (store damage, a
	// purge) are forgotten and run again by this invocation.
	Verify bool
}

// Run runs the episodes of cfg's run that are not published yet and
// returns the run's summary, in four parts: planRun (the ledger: what is
// published, what is left; the spool of an earlier start), openRun (the
// agent and its endpoints' outage breaker, the prompt set, the length
// history, the shared work queue, the VM pool and its events), executeRun
// (the scheduler over the pool, publishing each trajectory) and finishRun
// (the summary; the end of the run in the ledger).
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if err := checkNames(cfg); err != nil {
		return nil, err
	}
	pl, err := planRun(ctx, cfg)
	if err != nil {
		return nil, err
	}
	op, err := openRun(ctx, cfg, pl)
	if err != nil {
		return nil, err
	}
	defer op.close(ctx)
	ex := executeRun(ctx, cfg, pl, op)
	return finishRun(ctx, cfg, pl, op, ex)
}

// planned is a run's plan: its ledger, the publisher of its trajectories
// (the spool of an earlier start published first: those episodes are in
// the ledger then, and not run again) and the jobs left.
type planned struct {
	runs    *ledger.Ledger
	pub     *Publisher
	jobs    jobPlan
	flushed int // trajectories of the spool published
}

func planRun(ctx context.Context, cfg Config) (*planned, error) {
	log := cfg.Log
	runs, err := ledger.Open(ctx, cfg.Bus, cfg.Topology)
	if err != nil {
		return nil, err
	}
	runs.SetRetryBudget(cfg.PublishRetry)
	subject := bus.Subject(bus.Raw, cfg.App)
	pub := &Publisher{Bus: cfg.Bus, Ledger: runs, Subject: subject, Run: cfg.Run, Retry: cfg.PublishRetry, Spool: cfg.Spool, Log: log}
	flushed, _, ferr := flushSpool(ctx, pub, cfg.Spool, log)
	if ferr != nil {
		log.Warn("rollout: some spooled trajectories could not be published yet", "spool", cfg.Spool, "err", ferr)
	}
	jobs, err := planJobs(ctx, cfg, runs, subject, log)
	if err != nil {
		return nil, err
	}
	pub.Redo = jobs.redo
	return &planned{runs: runs, pub: pub, jobs: jobs, flushed: flushed}, nil
}

// opened is what a run opens to execute its plan; close releases it, in
// the reverse order, whatever was opened.
type opened struct {
	agent    *agent.Agent
	outages  *model.Outages
	lengths  *lengthTracker
	queue    *workQueue // nil: the run's own queue
	pool     *vmpool.Pool
	rec      *vmRecorder // nil without a blob store
	stopKeep func()      // stops rec's periodic writes
	log      *slog.Logger
}

func openRun(ctx context.Context, cfg Config, pl *planned) (_ *opened, err error) {
	log := cfg.Log
	op := &opened{log: log}
	defer func() { // the returns say nil: op is what was opened
		if err != nil {
			op.close(ctx)
		}
	}()
	ag, prompts, probes, err := newAgent(cfg, log)
	if err != nil {
		return nil, err
	}
	op.agent = ag
	op.outages = model.NewOutages(model.OutageConfig{Probes: probes, Budget: cfg.OutageBudget, ProbeEvery: cfg.OutageProbe, Log: log, Registerer: cfg.Metrics})
	// Every trajectory records its prompt set's hash; the set itself is
	// stored once per run so the planner's messages can be rendered again.
	if err := prompt.Store(ctx, cfg.Store, prompts); err != nil {
		return nil, err
	}
	// The episodes go longest predicted first: from their tasks' length
	// history, or their step limits.
	op.lengths = openLengths(ctx, cfg, log)
	pl.pub.Predict = op.lengths.predictor()
	// The embedded server (no --nats) serves this process alone: no other
	// host can join the run, and the run's own queue does without leases
	// (a restart would wait out the lease of what the last one held).
	if !cfg.LocalQueue && cfg.Schedule != sched.Static && cfg.Bus.URL() == "" {
		if op.queue, err = openWorkQueue(ctx, cfg, pl.runs, pl.jobs.start, pl.jobs.jobs, pl.jobs.redo, op.lengths.predictor(), log); err != nil {
			return nil, err
		}
	}
	// The pool's VM events of this invocation go to the blob store
	// (ledger.VMEvents): every vmEventsEvery while it runs, and once more
	// after the pool has closed, also when the run is stopped.
	poolOpts := cfg.PoolOptions
	var rec *vmRecorder
	if cfg.Store != nil {
		rec = newVMRecorder(cfg.Store, cfg.Run, time.Now(), log)
		poolOpts = append(slices.Clone(poolOpts), vmpool.WithEvents(rec.event))
	}
	if op.pool, err = poolfile.NewPool(ctx, cfg.Pool, log, poolOpts...); err != nil {
		return nil, err
	}
	if rec != nil {
		op.rec, op.stopKeep = rec, rec.keep(ctx, vmEventsEvery)
	}
	log.Info("rollout: planned", "episodes", len(cfg.Tasks)*cfg.Samples, "to_run", len(pl.jobs.jobs), "vms", op.pool.Size(),
		"tasks", len(cfg.Tasks), "samples", cfg.Samples, "group", cfg.Group, "already_published", len(pl.jobs.done),
		"planner_checkpoint", cfg.Planner.Checkpoint, "shared_queue", op.queue != nil, "spool_published", pl.flushed)
	if cfg.Metrics != nil {
		// The pool's figures stay readable after the run (a final scrape);
		// a later run in the same process replaces them.
		cfg.Metrics.Unregister(poolCollector{})
		if err := cfg.Metrics.Register(poolCollector{op.pool}); err != nil {
			return nil, fmt.Errorf("rollout: pool metrics: %w", err)
		}
	}
	return op, nil
}

// close closes the pool (its VMs released), then writes the VM events a
// last time, then stops the outage breaker.
func (op *opened) close(ctx context.Context) {
	if op.pool != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		if err := op.pool.Close(cctx); err != nil {
			op.log.Warn("closing the VM pool", "err", err)
		}
		cancel()
	}
	if op.rec != nil {
		op.stopKeep()
		op.rec.finish(ctx)
	}
	if op.outages != nil {
		op.outages.Close()
	}
}

// executed is what the scheduler did.
type executed struct {
	results []sched.Result
	err     error // why the scheduler stopped early (nil: it ran every job)
	took    time.Duration
}

func executeRun(ctx context.Context, cfg Config, pl *planned, op *opened) executed {
	log := cfg.Log
	prog := newProgress(cfg.Progress, len(pl.jobs.jobs), log)
	s := &sched.Scheduler{
		Runner: op.agent, Pool: sched.VMPool(op.pool), Workers: op.pool.Size(), EnvRetries: cfg.EnvRetries,
		Samples: cfg.Samples, Mode: cfg.Schedule, Log: log, Metrics: sched.NewMetrics(cfg.Metrics), Outages: op.outages,
		ID:      func(j sched.Job) string { return traj.EpisodeID(pl.jobs.start, cfg.Run, j.Task.ID, j.Sample) },
		Publish: pl.pub.Publish,
		Predict: op.lengths.predictor(),
		Done: func(r sched.Result) {
			op.lengths.done(ctx, r)
			prog.done(r)
		},
	}
	if op.queue != nil {
		s.Source = op.queue
	}
	start := time.Now()
	results, err := s.Run(ctx, pl.jobs.jobs)
	prog.finish()
	log.Debug("rollout: scheduler ended", "err", err)
	// Trajectories spooled during the run go out now if NATS is back.
	if spoolLeft(cfg.Spool) > 0 && err == nil {
		if n, _, ferr := flushSpool(context.WithoutCancel(ctx), pl.pub, cfg.Spool, log); n > 0 || ferr != nil {
			log.Info("rollout: spool flushed at the end of the run", "published", n, "err", ferr)
		}
	}
	return executed{results: results, err: err, took: time.Since(start)}
}

// finish summarises the run and, when it is over, records its end in the
// ledger; the error says what is left or which episodes failed.
func finishRun(ctx context.Context, cfg Config, pl *planned, op *opened, ex executed) (*Summary, error) {
	log := cfg.Log
	results, runErr := ex.results, ex.err
	done := pl.jobs.done
	var others map[ledger.EpisodeKey]ledger.Record
	if op.queue != nil && runErr == nil {
		// The run's other hosts ran the rest: the outcome figures cover
		// the whole run.
		others = byOtherHosts(ctx, cfg, pl.runs, pl.jobs.done, results, log)
		done = maps.Clone(pl.jobs.done)
		maps.Copy(done, others)
	}
	sum := summarize(cfg, results, done, ex.took, op.pool.Stats())
	sum.Skipped, sum.ByOtherHosts = len(pl.jobs.done), len(others)
	sum.Verified, sum.LostRerun = cfg.Verify, len(pl.jobs.redo)
	sum.SharedQueue = op.queue != nil
	sum.Lengths = op.lengths.summary()
	sum.SpoolLeft = spoolLeft(cfg.Spool)
	// The run's trajectories on the stream, as its ledger records them
	// (the subject holds every run of the app): read also after Ctrl-C.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	names := make([]string, len(cfg.Tasks))
	for i := range cfg.Tasks {
		names[i] = cfg.Tasks[i].ID
	}
	if recs, err := pl.runs.Done(cctx, cfg.Run, names); err == nil {
		sum.OnStream = uint64(len(recs))
	} else {
		log.Warn("rollout: could not count the run's published trajectories", "err", err)
	}
	cancel()
	sum.Outages, sum.OutageRequeued = op.outages.Stats()
	log.Debug("rollout: summarised")
	if runErr != nil {
		published := 0
		for _, r := range results {
			if r.Trajectory != nil && (r.Err == nil || errors.Is(r.Err, sched.ErrKept)) {
				published++
			}
		}
		sum.Left = max(len(pl.jobs.jobs)-published, 0)
		sum.Stopped = "interrupted"
		var se *sched.SharedError
		if oe := (*model.OutageError)(nil); errors.As(runErr, &oe) {
			sum.Stopped = oe.Error()
		} else if errors.As(runErr, &se) {
			sum.Stopped = redact.Text(se.Error())
		} else if errors.Is(runErr, context.Canceled) {
			runErr = fmt.Errorf("interrupted (%w): %d episodes of run %s are left; run the same command again (same --run) to do them",
				runErr, sum.Left, traj.PrintName(cfg.Run))
		}
		return sum, runErr
	}
	if sum.SpoolLeft > 0 {
		// The run is not over while trajectories of it wait on disk.
		log.Warn("rollout: trajectories wait in the spool; the end of the run is not recorded (the next start publishes them)",
			"spool", cfg.Spool, "files", sum.SpoolLeft)
	} else if err := pl.runs.Finish(context.WithoutCancel(ctx), cfg.Run, time.Now()); err != nil {
		log.Warn("could not record the end of the run", "err", err)
	}
	var errs []error
	for _, r := range results {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("%s/%d: %w", r.Job.Task.ID, r.Job.Sample, r.Err))
		}
	}
	return sum, errors.Join(errs...)
}

// byOtherHosts reads the episodes of the run that other hosts published
// during this invocation: in the ledger now, but neither published before
// it started (done) nor run by it.
func byOtherHosts(ctx context.Context, cfg Config, runs *ledger.Ledger, done map[ledger.EpisodeKey]ledger.Record, results []sched.Result, log *slog.Logger) map[ledger.EpisodeKey]ledger.Record {
	names := make([]string, len(cfg.Tasks))
	for i := range cfg.Tasks {
		names[i] = cfg.Tasks[i].ID
	}
	now, err := runs.Done(ctx, cfg.Run, names)
	if err != nil {
		log.Warn("rollout: could not read the episodes of the run's other hosts; the summary covers this host's", "err", err)
		return nil
	}
	for k := range done {
		delete(now, k)
	}
	for _, r := range results {
		delete(now, ledger.EpisodeKey{Task: r.Job.Task.ID, Sample: r.Job.Sample})
	}
	return now
}

// jobPlan is what a run still has to do.
type jobPlan struct {
	start time.Time                           // the run's start (first invocation)
	done  map[ledger.EpisodeKey]ledger.Record // published by an earlier invocation
	jobs  []sched.Job                         // every (task, sample) not published yet
	// redo holds the episodes --verify found lost, each with the tag that
	// makes its new message ids (msgIDFor).
	redo map[ledger.EpisodeKey]string
}

// msgIDFor is the message id of an episode's message whose natural id is
// id: id itself, or with the tag of a re-run of a lost episode.
func msgIDFor(redo map[ledger.EpisodeKey]string, k ledger.EpisodeKey, id string) string {
	if tag, ok := redo[k]; ok {
		return id + "~" + tag
	}
	return id
}

// planJobs records the run's start in the ledger (or reads it), reconciles
// the ledger with the stream, and lists the episodes not published yet.
func planJobs(ctx context.Context, cfg Config, runs *ledger.Ledger, subject string, log *slog.Logger) (jobPlan, error) {
	var p jobPlan
	var err error
	// A run is one planner checkpoint: another one under the same name is
	// refused before the run is touched.
	if err := runs.Bind(ctx, cfg.Run, cfg.Planner.Checkpoint); err != nil {
		return p, err
	}
	if err := runs.Reopen(ctx, cfg.Run); err != nil {
		return p, err
	}
	if p.start, err = runs.Start(ctx, cfg.Run, time.Now()); err != nil {
		return p, err
	}
	names := make([]string, len(cfg.Tasks))
	for i := range cfg.Tasks {
		names[i] = cfg.Tasks[i].ID
	}
	if p.done, err = runs.Done(ctx, cfg.Run, names); err != nil {
		return p, err
	}
	want := make(map[ledger.EpisodeKey]bool, len(cfg.Tasks)*cfg.Samples)
	for i := range cfg.Tasks {
		for k := range cfg.Samples {
			want[ledger.EpisodeKey{Task: cfg.Tasks[i].ID, Sample: k}] = true
		}
	}
	var judged func(context.Context, ledger.Record) (bool, error)
	if cfg.Store != nil {
		judged = func(ctx context.Context, rec ledger.Record) (bool, error) {
			return archive.Judged(ctx, cfg.Store.Bucket(), cfg.Run, cfg.App, rec.ID)
		}
	}
	_, lost, err := reconcile(ctx, cfg.Bus, runs, subject, cfg.Run, cfg.Planner.Checkpoint, p.start, want, p.done, cfg.Verify, judged, log)
	if err != nil {
		return p, err
	}
	if len(lost) > 0 {
		// The lost episodes' message ids (work queue, stream) may still be
		// in the streams' de-duplication window: their new messages get
		// ids of this invocation, or the server would drop them as
		// duplicates of what it lost.
		tag := "verify-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		p.redo = make(map[ledger.EpisodeKey]string, len(lost))
		for _, k := range lost {
			p.redo[k] = tag
		}
	}
	for i := range cfg.Tasks {
		for k := range cfg.Samples {
			if _, ok := p.done[ledger.EpisodeKey{Task: cfg.Tasks[i].ID, Sample: k}]; !ok {
				p.jobs = append(p.jobs, sched.Job{Task: &cfg.Tasks[i], Sample: k})
			}
		}
	}
	return p, nil
}

// newAgent builds the agent of a run, and the probes of its two model
// endpoints for the outage breaker (by endpoint, as their errors name it).
func newAgent(cfg Config, log *slog.Logger) (*agent.Agent, *prompt.Set, map[string]func(context.Context) error, error) {
	planner, err := model.New(cfg.Planner, log)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("planner: %w", err)
	}
	executor, err := model.New(cfg.Executor, log)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("executor: %w", err)
	}
	prompts, err := prompt.Load(cfg.Prompts)
	if err != nil {
		return nil, nil, nil, err
	}
	probes := map[string]func(context.Context) error{planner.Endpoint(): planner.Ping, executor.Endpoint(): executor.Ping}
	ag, err := agent.New(agent.Config{
		Planner: planner, Executor: executor, Prompts: prompts, Store: cfg.Store, Group: cfg.Group, Run: cfg.Run, Log: log,
		PlannerCoords: cfg.PlannerCoords, ExecutorCoords: cfg.ExecutorCoords,
		PlannerParams: plannerParams(cfg.PlannerSampling), ExecutorParams: model.Params{Sampling: cfg.ExecutorSampling},
		Sleep: cfg.Sleep, RequestSeed: cfg.RequestSeed, DownloadInGuest: cfg.DownloadInGuest, MaxImagePixels: cfg.MaxImagePixels, Metrics: agent.NewMetrics(cfg.Metrics),
	})
	return ag, prompts, probes, err
}

// Publisher publishes a run's trajectories and records them in the ledger.
type Publisher struct {
	Bus     *bus.Bus
	Ledger  *ledger.Ledger
	Subject string // coda.traj.<app>
	Run     string
	// Retry is how long a publish is retried through transient errors
	// (bus.DefaultRetryBudget when 0).
	Retry time.Duration
	// Spool, when set, is the directory where a trajectory that still
	// cannot be published (or recorded) is kept, to be published on the
	// next start (flushSpool).
	Spool string
	// Redo gives the episodes that --verify found lost the tag of their
	// new message id (msgIDFor).
	Redo map[ledger.EpisodeKey]string
	// Predict, when set, is the run's length prediction, recorded with
	// each episode in the ledger (ledger.Record.PredictedS).
	Predict sched.Predictor
	Log     *slog.Logger
}

// publish publishes one message. Bus.Publish retries transient errors
// itself (the message id makes a retry of a publish that was stored a
// duplicate no-op); p.Retry bounds the whole of it, retries included.
func (p *Publisher) publish(ctx context.Context, subject, id string, body []byte, hdr nats.Header) (bus.PubAck, error) {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(p.Retry, bus.DefaultRetryBudget))
	defer cancel()
	return p.Bus.Publish(ctx, subject, id, body, hdr)
}

// Publish validates and publishes a trajectory, then records it in the
// ledger. A trajectory that fails validation is a bug of ours: it goes to
// the dead-letter subject with the problems, never silently away. A
// finished episode is published and recorded even when the run is being
// stopped (each call has its own deadline): a stop between the two would
// leave it on the stream but unknown to the ledger, and a resumed run
// would run it again for nothing.
func (p *Publisher) Publish(ctx context.Context, j sched.Job, t *traj.Trajectory) error {
	ctx = context.WithoutCancel(ctx)
	body, err := traj.MarshalCompact(t)
	if err != nil {
		return err
	}
	hdr := nats.Header{}
	hdr.Set(HeaderRun, p.Run)
	hdr.Set(HeaderTask, j.Task.ID)
	hdr.Set(HeaderSample, strconv.Itoa(j.Sample))
	hdr.Set(HeaderOutcome, string(t.Outcome.Kind))
	if verr := t.Validate(); verr != nil {
		hdr.Set(bus.HeaderDeadReason, verr.Error())
		if _, err := p.publish(ctx, bus.DeadSubject(p.Subject), t.ID, body, hdr); err != nil {
			return fmt.Errorf("publish invalid trajectory %s to dead letters: %w", t.ID, err)
		}
		return fmt.Errorf("trajectory %s is invalid (%w as a dead letter): %w", t.ID, sched.ErrKept, verr)
	}
	key := ledger.EpisodeKey{Task: j.Task.ID, Sample: j.Sample}
	rec := ledger.RecordOf(t)
	if p.Predict != nil {
		d, fromHistory := p.Predict.Predict(j.Task)
		rec.PredictedS, rec.PredictedFromHistory = d.Seconds(), fromHistory
	}
	ack, err := p.publish(ctx, p.Subject, msgIDFor(p.Redo, key, t.ID), body, hdr)
	if err == nil {
		// A duplicate means the stream already holds a trajectory with
		// this id (an earlier invocation published it): its ledger record,
		// if there is one, describes the stored trajectory and stays.
		err = p.Ledger.MarkDone(ctx, p.Run, key, rec, ack.Duplicate)
	}
	if err == nil || p.Spool == "" {
		return err
	}
	// Hours of VM time are not dropped: the trajectory waits on disk.
	path, serr := spoolPut(p.Spool, spooled{Subject: p.Subject, ID: msgIDFor(p.Redo, key, t.ID), Run: p.Run, Task: j.Task.ID, Sample: j.Sample,
		Header: hdr, Body: body, Record: rec, Time: time.Now().UTC(), Reason: err.Error()})
	if serr != nil {
		return errors.Join(err, serr)
	}
	if p.Log != nil {
		p.Log.Error("rollout: trajectory could not be published; kept in the spool, published on the next start",
			"task", j.Task.ID, "sample", j.Sample, "trajectory", t.ID, "path", path, "err", err)
	}
	return fmt.Errorf("%w: %s: %w", errSpooled, path, err)
}

// plannerParams are the planner's request parameters: s (zero: the
// agent's defaults) with log-probabilities and token ids.
func plannerParams(s traj.Sampling) model.Params {
	if (model.Params{Sampling: s}).IsZero() {
		s = agent.DefaultPlannerSampling()
	}
	return model.Params{Sampling: s, LogProbs: true}
}

// checkNames refuses a run whose run name, app name or a task id breaks the
// name rule (traj.CheckName) before anything is touched: the command's
// options are checked already, this covers callers of Run.
func checkNames(cfg Config) error {
	if err := traj.CheckName(traj.RunName, cfg.Run); err != nil {
		return fmt.Errorf("%w: run: %w", ErrInvalidConfig, err)
	}
	if err := traj.CheckName(traj.AppName, cfg.App); err != nil {
		return fmt.Errorf("%w: app: %w", ErrInvalidConfig, err)
	}
	for _, t := range cfg.Tasks {
		if err := traj.CheckName(traj.TaskName, t.ID); err != nil {
			return fmt.Errorf("%w: task file %s: %w", ErrInvalidConfig, traj.PrintName(t.Path), err)
		}
	}
	return nil
}
