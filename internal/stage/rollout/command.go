// Package rollout is the rollout command and its library: the agent's
// episodes of an app's tasks over a VM pool, scheduled dynamically
// (internal/stage/sched), published on the bus and recorded in a ledger for
// resuming, with a summary. Run is the library (everything resolved);
// Execute and Command are the command layer, which also starts the
// SIMULATOR's process for --sim (internal/infra/codasim). The "tasks"
// subcommand lists ScienceBoard tasks and "report" reports on a run
// (internal/stage/runreport).
package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ground"
	"github.com/codapipe/codapipe/internal/contract/imaging"
	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/codasim"
	"github.com/codapipe/codapipe/internal/infra/redact"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/infra/vmlock"
	"github.com/codapipe/codapipe/internal/stage/agent"
	"github.com/codapipe/codapipe/internal/stage/sched"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/guest"
	"github.com/codapipe/codapipe/pkg/vmpool/poolfile"
	"github.com/codapipe/codapipe/pkg/vmpool/simvm"
)

// Options are a rollout as the command line gives it.
type Options struct {
	App     string
	Group   int    // G
	Samples int    // K
	Tasks   string // task folder; with Sim, empty means the simulator's tasks
	Run     string // run name; re-running a name finishes its missing episodes
	// Pool file, or Sim with VMs simulated machines.
	Pool string
	VMs  int
	Sim  bool
	// SimConfig is a JSON file with a sim.WorldConfig (optional).
	SimConfig string
	// Seed seeds the model requests (nil: none; with Sim, 1) and, with
	// Sim, the simulator.
	Seed      *int64
	TimeScale float64 // with Sim: wall time per simulated second
	Planner   model.Config
	Executor  model.Config
	// PlannerSampling and ExecutorSampling are sent with every request
	// to the two models (zero: the agent's defaults).
	PlannerSampling, ExecutorSampling traj.Sampling
	// PlannerCoords and ExecutorCoords are the coordinate spaces the two
	// models write points in (uitars.ParseCoords; empty: grid1000 for the
	// planner, pixels-resized for the executor). With Sim, the simulated
	// models answer in them unless the sim config sets its own.
	PlannerCoords, ExecutorCoords string
	Prompts                       string // prompt template folder; empty: ours
	// DownloadInGuest has the guest fetch a task's download items itself
	// (default: the host fetches and copies them in, as ScienceBoard does).
	DownloadInGuest bool
	// MaxImagePixels bounds a screenshot (agent.Config).
	MaxImagePixels int64
	// TaskLimits bound the task files (--max-task-bytes, --max-steps).
	TaskLimits scienceboard.Limits
	// EnvRetries bounds re-runs of an episode ended by an environment error.
	EnvRetries int
	// OutageBudget: see Config.
	OutageBudget time.Duration
	Schedule     sched.Mode
	Summary      string // write the summary as JSON here
	// LocalQueue, Lease and PublishRetry: see Config.
	LocalQueue   bool
	Lease        time.Duration
	PublishRetry time.Duration
	Verify       bool   // see Config.Verify
	LengthFamily string // see Config.LengthFamily
	// VMLocks says where the VM locks are: "file" (flock on this host,
	// the default) or "nats" (a key-value bucket, for VMs shared by hosts).
	VMLocks string
	// Progress is where the progress display goes (a terminal gets a bar).
	Progress io.Writer

	// Guest overrides the options of the guest clients the pool gives its
	// VMs (per-call timeouts, retries); zero fields keep vmpool's defaults.
	Guest guest.Options
	// SimTimeouts are the deadlines of the simulator's VM pool (start,
	// reset, health check, stop); zero fields keep vmpool's defaults. A
	// --pool file sets its own timeouts.
	SimTimeouts vmpool.Timeouts

	// simRequests, with Sim, sees the body of every request to the
	// simulated models (tests check what was sent).
	simRequests func(kind string, body []byte)
	// simPlanner, with Sim, is given the simulated planner's URL and
	// returns the URL the run calls instead (a test's switchable proxy).
	simPlanner func(url string) string
	// outageProbe: see Config.OutageProbe (tests).
	outageProbe time.Duration
}

// Where the VM locks are (--vm-locks).
const (
	VMLocksFile = "file" // lock files (flock) in the pool's lock_dir: VMs of one host
	VMLocksNATS = "nats" // the CODA_VMLOCKS key-value bucket with a TTL: VMs shared by hosts
)

// The defaults of --group (G) and --samples (K), rollout's and nightly's.
const (
	DefaultGroup   = 8
	DefaultSamples = 1
)

// DefaultTimeScale is the simulator's default wall time per simulated
// second (codasim.DefaultTimeScale): 100× faster than real time.
const DefaultTimeScale = codasim.DefaultTimeScale

// ErrNotConfigured is returned when neither the simulator nor a VM pool
// and model endpoints are configured.
var ErrNotConfigured = service.Usage(errors.New("nothing to run on"))

// ErrInvalidConfig is returned for a configuration value out of range.
var ErrInvalidConfig = service.Usage(errors.New("invalid configuration"))

// DefaultRunName is the run name of a rollout without --run:
// "<app>-<UTC time>", the app lower-cased as a subject token and cut so that
// the name fits traj.MaxRunNameBytes.
func DefaultRunName(app string, now time.Time) string {
	suffix := "-" + now.UTC().Format("20060102-150405")
	tok := strings.ToLower(bus.AppToken(app))
	if n := traj.MaxRunNameBytes - len(suffix); len(tok) > n {
		tok = tok[:n]
	}
	return tok + suffix
}

func (o *Options) check() error {
	var miss []string
	if o.App == "" {
		miss = append(miss, "--app APP (e.g. ChimeraX)")
	}
	if !o.Sim {
		if o.Pool == "" {
			miss = append(miss, "--pool FILE (a VM pool, see docs/vmpool.md)")
		}
		if o.Planner.BaseURL == "" || o.Planner.Model == "" {
			miss = append(miss, "--planner-url and --planner-model")
		}
		if o.Executor.BaseURL == "" || o.Executor.Model == "" {
			miss = append(miss, "--executor-url and --executor-model")
		}
		if o.Tasks == "" {
			miss = append(miss, "--tasks DIR (ScienceBoard tasks)")
		}
	}
	if len(miss) > 0 {
		msg := "configure " + strings.Join(miss, ", ")
		if !o.Sim {
			msg += "; or pass --sim to run on the built-in SIMULATOR (simulated VMs and models)"
		}
		return fmt.Errorf("%w: %s", ErrNotConfigured, msg)
	}
	if err := traj.CheckName(traj.AppName, o.App); err != nil {
		return fmt.Errorf("%w: --app: %w", ErrInvalidConfig, err)
	}
	for _, f := range []struct{ name, url string }{{"--planner-url", o.Planner.BaseURL}, {"--executor-url", o.Executor.BaseURL}} {
		if f.url == "" {
			continue // --sim: the simulator's
		}
		if _, err := model.CheckBaseURL(f.name, f.url); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	if o.Run != "" {
		if err := traj.CheckName(traj.RunName, o.Run); err != nil {
			return fmt.Errorf("%w: --run: %w", ErrInvalidConfig, err)
		}
	}
	if o.Group < 0 {
		return fmt.Errorf("%w: --group %d: want G >= 0", ErrInvalidConfig, o.Group)
	}
	if o.Samples < 1 {
		return fmt.Errorf("%w: --samples %d: want K >= 1", ErrInvalidConfig, o.Samples)
	}
	switch o.VMLocks {
	case "", VMLocksFile, VMLocksNATS:
	default:
		return fmt.Errorf("%w: --vm-locks %q: want file or nats", ErrInvalidConfig, o.VMLocks)
	}
	if o.Schedule != sched.Dynamic && o.Schedule != sched.Static {
		return fmt.Errorf("%w: --schedule %q: want dynamic or static", ErrInvalidConfig, o.Schedule)
	}
	if _, _, err := o.coords(); err != nil {
		return err
	}
	return nil
}

// coords parses the two models' coordinate spaces, with their defaults.
func (o *Options) coords() (planner, executor traj.Coords, err error) {
	parse := func(flag, s string, def traj.Coords) (traj.Coords, error) {
		if strings.TrimSpace(s) == "" {
			return def, nil
		}
		cs, err := uitars.ParseCoords(s)
		if err != nil {
			return traj.Coords{}, fmt.Errorf("%w: %s: %w", ErrInvalidConfig, flag, err)
		}
		return cs, nil
	}
	pc, err := parse("--planner-coords", o.PlannerCoords, uitars.Grid())
	if err != nil {
		return traj.Coords{}, traj.Coords{}, err
	}
	ec, err := parse("--executor-coords", o.ExecutorCoords, uitars.Resized())
	if err != nil {
		return traj.Coords{}, traj.Coords{}, err
	}
	return pc, ec, nil
}

// Execute runs a rollout as the command does: it checks the options,
// starts the SIMULATOR for --sim (and stops it at the end), loads the
// tasks, opens the bus and the blob store through env, and calls Run.
func Execute(ctx context.Context, env *service.Env, o Options) (*Summary, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	log := env.Log
	// The simulated world provides the VMs and the models (and, without
	// --tasks, the tasks): codasim, started here and stopped at the end.
	var world *codasim.World
	if o.Sim {
		pc, ec, _ := o.coords()
		r := codasim.Request{VMs: max(o.VMs, 1), Seed: o.Seed, TimeScale: o.TimeScale, Config: o.SimConfig,
			PlannerCoords: uitars.CoordsString(pc), ExecutorCoords: uitars.CoordsString(ec),
			Tasks: o.Tasks == "", OnRequest: o.simRequests, Stderr: env.Stderr}
		var err error
		if world, err = codasim.Start(ctx, r); err != nil {
			return nil, err
		}
		defer world.Close() // every guest and model server has stopped
		log.Info("SIMULATOR started: simulated VMs and models stand in for real ones", "vms", len(world.Guests), "planner", world.Planner.URL, "process", world.Process)
		if o.Tasks == "" {
			o.Tasks = world.Tasks
		}
	}
	// The tasks first: --app is matched to the spelling of the app's task
	// files (ignoring case), which names its subject, run and history.
	tasks, err := loadTasks(o)
	if err != nil {
		return nil, err
	}
	if world != nil && o.Tasks == world.Tasks {
		for i := range tasks { // the source a trajectory records: VM/<app>/<id>.json, not a passing folder
			if rel, err := filepath.Rel(world.Tasks, tasks[i].Path); err == nil {
				tasks[i].Path = filepath.ToSlash(rel)
			}
		}
	}
	o.App = tasks[0].App
	if o.Run == "" {
		o.Run = DefaultRunName(o.App, time.Now())
	}
	log = log.With("run", o.Run, "app", o.App)
	pc, ec, err := o.coords()
	if err != nil {
		return nil, err
	}
	cfg := Config{
		App: o.App, Group: o.Group, Samples: o.Samples, Run: o.Run,
		Planner: o.Planner, Executor: o.Executor, PlannerSampling: o.PlannerSampling, ExecutorSampling: o.ExecutorSampling, PlannerCoords: pc, ExecutorCoords: ec, Prompts: o.Prompts,
		RequestSeed: o.Seed, EnvRetries: o.EnvRetries, OutageBudget: o.OutageBudget, OutageProbe: o.outageProbe, Schedule: o.Schedule, DownloadInGuest: o.DownloadInGuest, MaxImagePixels: o.MaxImagePixels,
		Topology: env.Common.Topology(), Metrics: env.Metrics, Progress: o.Progress, Log: log,
		PoolOptions: []vmpool.Option{vmpool.WithGuestOptions(o.Guest)},
		LocalQueue:  o.LocalQueue, Lease: o.Lease, PublishRetry: o.PublishRetry,
		Spool: filepath.Join(env.Common.DataDir, "spool"), Verify: o.Verify, LengthFamily: o.LengthFamily,
	}

	if world != nil {
		sc := simvm.URLs(world.Guests...)
		cfg.Pool = poolfile.Config{Backend: simvm.Name, Sim: &sc, Pool: vmpool.Config{ID: "sim-" + bus.AppToken(o.Run),
			IdleCheck: -1, LockDir: filepath.Join(env.Common.DataDir, "vmlocks"), Timeouts: o.SimTimeouts}}
		if cfg.Planner.BaseURL == "" {
			cfg.Planner.BaseURL, cfg.Planner.Model = world.Planner.URL, world.Planner.Model
			if o.simPlanner != nil {
				cfg.Planner.BaseURL = o.simPlanner(cfg.Planner.BaseURL)
			}
		}
		if cfg.Executor.BaseURL == "" {
			cfg.Executor.BaseURL, cfg.Executor.Model = world.Executor.URL, world.Executor.Model
		}
		cfg.RequestSeed = &world.Seed // the simulator's, by its one seed rule
		cfg.Sleep = world.Sleep
	} else if cfg.Pool, err = poolfile.Load(o.Pool); err != nil {
		return nil, err
	}
	// The checkpoint is part of the run: known before any data is touched.
	if err := resolveCheckpoints(ctx, &cfg.Planner, &cfg.Executor, log); err != nil {
		return nil, err
	}
	cfg.Tasks = tasks
	if cfg.Store, err = env.Store(ctx); err != nil {
		return nil, err
	}
	if cfg.Bus, err = env.Bus(ctx); err != nil {
		return nil, err
	}
	if o.VMLocks == VMLocksNATS {
		locks, err := vmlock.Open(ctx, cfg.Bus, cfg.Topology, 0, log)
		if err != nil {
			return nil, err
		}
		cfg.PoolOptions = append(cfg.PoolOptions, vmpool.WithLocker(locks))
		log.Info("rollout: VM locks in NATS", "bucket", vmlock.Bucket, "ttl", locks.TTL())
	}
	sum, err := Run(ctx, cfg)
	if sum != nil && o.Summary != "" {
		if werr := service.WriteSummary(o.Summary, sum); werr != nil {
			return sum, errors.Join(err, werr)
		}
	}
	for _, w := range warningsOf(sum) {
		msg := "executor answers look wrong"
		if strings.Contains(w, "identical plans") {
			msg = "planner plans look wrong"
		}
		log.Warn(msg, "warning", w)
	}
	return sum, err
}

func warningsOf(s *Summary) []string {
	if s == nil {
		return nil
	}
	return s.Warnings
}

func (o *Options) timeScale() float64 {
	if o.TimeScale > 0 {
		return o.TimeScale
	}
	return DefaultTimeScale
}

func loadTasks(o Options) ([]scienceboard.Task, error) {
	var set *scienceboard.Set
	var err error
	switch {
	case o.Tasks != "":
		set, err = scienceboard.LoadDirLimits(o.Tasks, o.TaskLimits)
		if set == nil {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("--tasks %s: %w", o.Tasks, err)
		}
	}
	set, err = set.Filter(o.App)
	if err != nil {
		return nil, err
	}
	if set.Len() == 0 {
		return nil, fmt.Errorf("no tasks for app %q", o.App)
	}
	return set.Tasks, nil
}

const usage = `rollout — run the planner→executor agent on an app's tasks and publish trajectories.

Usage:
  rollout --app APP --group G [--samples K] [--tasks DIR] [--vms N | --pool FILE]
          [--planner-url U --planner-model M] [--executor-url U --executor-model M]
          [--nats URL] [--store URL] [--run NAME] [--verify] [--sim] [--summary FILE]
  rollout tasks --tasks DIR [--app APP] [--json]   list the tasks of a ScienceBoard task folder
  rollout report --run NAME [--baseline RUN] [--json] [--out FILE.html]
                                                   a run's figures and plots (JSON or an HTML page)

Runs K samples of every task of APP over the VM pool with a dynamic queue, longest step limit
first: every free VM takes the next episode. Each step asks the planner for G+1 plans; plan 0 is
executed, plans 1..G are grounded too and form that step's GRPO group. Trajectories go to NATS
JetStream (coda.traj.<app>), screenshots to the blob store. An episode ended by an environment
error (VM, guest, model endpoint) runs again, on another VM when the VM failed, up to
--env-retries times, and never counts as an agent failure. Re-running with the same --run
finishes only the episodes not yet published. Any number of hosts started on the same --run share
its episodes through a work queue on JetStream (coda.work.<run>); a killed host's episodes go to
another after --lease. A trajectory that cannot be published is kept in <data>/spool and published
on the next start. A run is one planner checkpoint: --planner-checkpoint,
or else the "root" the planner endpoint's GET /v1/models reports (required outside --sim); it is
recorded in every trajectory, and re-running a --run name with another checkpoint is refused. --sim runs everything on the built-in SIMULATOR
(simulated VMs and models: codasim, started for the run and stopped after it).`

// Command is the rollout command with its subcommands, for service.Main.
func Command() service.Command { return service.Stage[Options](command).Command() }

// ParseOptions reads rollout's own flags (not the common ones) from args
// and the environment as the command does, for a job that runs a rollout
// in its own process (nightly): the Options Execute takes, and the
// secrets the flags carry.
func ParseOptions(args []string) (Options, *redact.Secrets, error) {
	return service.Stage[Options](command).Parse(args)
}

// command is the rollout command and its Options once its flags are
// parsed (all but Progress, the command's standard error).
func command() (service.Command, func() (Options, error)) {
	var o Options
	var schedule, samplingFile string
	var seed int64
	var flags *service.Flags
	planner, executor := &samplingFlags{kind: "planner"}, &samplingFlags{kind: "executor"}
	resolve := func() (Options, error) {
		file, err := LoadSampling(samplingFile)
		if err != nil {
			return o, service.Usage(err)
		}
		if o.PlannerSampling, err = planner.over(flags, file.Planner); err != nil {
			return o, err
		}
		if o.ExecutorSampling, err = executor.over(flags, file.Executor); err != nil {
			return o, err
		}
		o.Schedule = sched.Mode(schedule)
		o.Executor.MaxAnswerBytes = o.Planner.MaxAnswerBytes
		o.Planner.MaxAnswerFlag, o.Executor.MaxAnswerFlag = "--max-answer-bytes", "--max-answer-bytes"
		if seed != 0 {
			o.Seed = &seed
		}
		return o, nil
	}
	return service.Command{
		Name: "rollout", Summary: "run the agent on an app's tasks and publish trajectories", Usage: usage,
		Common: true,
		Flags: func(fs *service.Flags) {
			flags = fs
			fs.Group(service.GroupRun)
			fs.String(&o.App, "app", "CODAPIPE_APP", "", "application whose tasks to run (e.g. ChimeraX)")
			fs.Int(&o.Group, "group", "CODAPIPE_GROUP", DefaultGroup, "G: plans per step besides the executed one (each step samples G+1)")
			fs.Int(&o.Samples, "samples", "CODAPIPE_SAMPLES", DefaultSamples, "K: episodes per task")
			fs.String(&o.Tasks, "tasks", "CODAPIPE_TASKS", "", "ScienceBoard tasks folder (with --sim: default the simulator's tasks)")
			taskLimitFlags(fs, &o.TaskLimits)
			fs.String(&o.Run, "run", "CODAPIPE_RUN", "", "run name; re-running a name finishes its missing episodes (default <app>-<UTC time>)")
			fs.Int64(&seed, "seed", "CODAPIPE_SEED", 0, "seed of the model requests, for reproducible sampling where the server honours it (vLLM does; 0: none), and with --sim of the simulator (0: the --sim-config's seed, else 1, for both)")
			fs.Int(&o.EnvRetries, "env-retries", "CODAPIPE_ENV_RETRIES", 2, "re-runs of an episode ended by an environment error")
			service.OutageBudgetFlag(fs, &o.OutageBudget, model.DefaultOutageBudget, "the episodes left run when the same --run is started again")
			fs.String(&schedule, "schedule", "CODAPIPE_SCHEDULE", string(sched.Dynamic), "dynamic (shared queue) or static (contiguous split per VM, for comparison)")
			fs.Bool(&o.Verify, "verify", "CODAPIPE_VERIFY", false, "compare the run's ledger with the stream before running: episodes the ledger lists as published whose trajectory is not on the stream (lost to store damage, purged) are forgotten and run again now")
			fs.String(&o.LengthFamily, "length-family", "CODAPIPE_LENGTH_FAMILY", "", "checkpoint family of the episode-length history (KV CODA_LENGTHS) that orders the episodes, longest predicted first, and records their VM time (default: the planner checkpoint with a trailing step/iteration number stripped; off: no history, longest step limit first)")
			fs.Bool(&o.LocalQueue, "local-queue", "CODAPIPE_LOCAL_QUEUE", false, "run the episodes from this process's own queue instead of the run's shared work queue on JetStream (coda.work.<run>, which every host on the same --run takes episodes from)")
			fs.Duration(&o.Lease, "lease", "CODAPIPE_LEASE", DefaultLease, "how long a host holds an episode of the shared queue without renewing it (it renews every third of it) before another host takes it over")
			fs.Duration(&o.PublishRetry, "publish-retry", "CODAPIPE_PUBLISH_RETRY", bus.DefaultRetryBudget, "how long each publish and ledger write is retried through transient NATS errors before the trajectory goes to the spool (<data>/spool)")
			fs.Group(service.GroupEndpoints)
			fs.String(&o.Planner.BaseURL, "planner-url", "CODAPIPE_PLANNER_URL", "", "planner endpoint (OpenAI-compatible base URL, e.g. http://host:8000/v1)")
			fs.String(&o.Planner.Model, "planner-model", "CODAPIPE_PLANNER_MODEL", "", "planner model name")
			fs.Secret(&o.Planner.APIKey, "planner-key", "CODAPIPE_PLANNER_KEY", "planner API key, sent as a bearer token (a user:password@ in --planner-url is sent as basic authentication instead)")
			fs.String(&o.Planner.Checkpoint, "planner-checkpoint", "CODAPIPE_PLANNER_CHECKPOINT", "", "planner checkpoint tag recorded in every trajectory and shard row, part of the run's identity (default: the root the planner endpoint's /v1/models reports; required when it reports none; --sim: sim-step-0)")
			ground.ExecutorFlags(fs, &o.Executor, &o.ExecutorCoords, "pixels-resized", "coordinate space of the executor's points (UI-TARS-1.5: pixels-resized; UI-TARS-1.0: grid1000; docs/actions.md)")
			fs.String(&o.Executor.Checkpoint, "executor-checkpoint", "CODAPIPE_EXECUTOR_CHECKPOINT", "", "executor checkpoint tag recorded in trajectories (default: the root the executor endpoint's /v1/models reports, if any)")
			fs.String(&o.PlannerCoords, "planner-coords", "CODAPIPE_PLANNER_COORDS", "grid1000", "coordinate space of the planner's points: grid1000, pixels-resized[:factor=28,min_pixels=3136,max_pixels=12845056], pixels-screen or unit (docs/actions.md)")
			fs.String(&o.Prompts, "prompts", "CODAPIPE_PROMPTS", "", "folder with prompt templates overriding ours (planner.tmpl, planner_user.tmpl, executor.tmpl)")
			fs.Int64(&o.Planner.MaxAnswerBytes, "max-answer-bytes", "CODAPIPE_MAX_ANSWER_BYTES", model.DefaultMaxAnswerBytes, "the longest answer body read from the planner or the executor endpoint; a longer one fails the call, unretried")
			fs.Group(service.GroupSampling)
			fs.String(&samplingFile, "sampling", "CODAPIPE_SAMPLING", "", "JSON file with the planner's and executor's sampling parameters, {\"planner\":{...},\"executor\":{...}} (docs/operations.md); the --planner-* and --executor-* sampling flags override it")
			planner.register(fs, agent.DefaultPlannerSampling())
			executor.register(fs, agent.DefaultExecutorSampling())
			fs.Group(service.GroupPool)
			fs.String(&o.Pool, "pool", "CODAPIPE_POOL", "", "VM pool file (YAML or JSON, see docs/vmpool.md)")
			fs.String(&o.VMLocks, "vm-locks", "CODAPIPE_VM_LOCKS", VMLocksFile, "where the VM locks are: file (lock files in the pool's lock_dir, for VMs only this host drives) or nats (the CODA_VMLOCKS key-value bucket, 30 s TTL renewed by the holder, for VMs shared by several hosts)")
			fs.Int64(&o.MaxImagePixels, "max-image-pixels", "CODAPIPE_MAX_IMAGE_PIXELS", imaging.DefaultMaxPixels, "the most pixels of a guest's screenshot, read from its header: a larger one is the VM's fault (an environment error), not stored")
			fs.Bool(&o.DownloadInGuest, "download-in-guest", "CODAPIPE_DOWNLOAD_IN_GUEST", false, "have the guest fetch task files itself (curl in the VM) instead of the host fetching and copying them in, as ScienceBoard does")
			fs.Group(service.GroupSim)
			fs.Bool(&o.Sim, "sim", "CODAPIPE_SIM", false, "run on the SIMULATOR: simulated VMs and models (for checking a pipeline, not for training data)")
			codasim.Flags(fs, &o.SimConfig, &o.TimeScale, &o.VMs, "with --sim: ")
			fs.Group(service.GroupOutput)
			fs.String(&o.Summary, "summary", "CODAPIPE_SUMMARY", "", "write the summary as JSON to this file")
		},
		Run: func(ctx context.Context, env *service.Env) error {
			o, err := resolve()
			if err != nil {
				return err
			}
			o.Progress = env.Stderr
			sum, err := Execute(ctx, env, o)
			if sum != nil {
				sum.Print(env.Stdout)
			}
			return err
		},
		Sub: []service.Command{tasksCommand(), reportCommand()},
	}, resolve
}

// Main runs the rollout command with its arguments (without the program
// name) and returns the process exit status.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return service.MainContext(ctx, Command(), args, stdout, stderr)
}

// taskLimitFlags defines --max-task-bytes and --max-steps, the limits
// of a task file, for rollout and rollout tasks.
func taskLimitFlags(fs *service.Flags, l *scienceboard.Limits) {
	fs.Int64(&l.Bytes, "max-task-bytes", "CODAPIPE_MAX_TASK_BYTES", scienceboard.DefaultMaxTaskBytes, "the largest task file read; a larger one is reported and skipped like any bad task file")
	fs.Int(&l.Steps, "max-steps", "CODAPIPE_MAX_STEPS", scienceboard.DefaultMaxSteps, "the largest step limit (\"steps\") a task file may ask for; a larger one is reported and skipped like any bad task file")
}

// TasksConfig configures the tasks subcommand.
type TasksConfig struct {
	Dir    string // task folder or file
	App    string // only this app, if set
	JSON   bool   // one JSON document instead of a table
	Limits scienceboard.Limits
}

func tasksCommand() service.Command {
	var cfg TasksConfig
	return service.Command{
		Name: "rollout tasks", Summary: "list the tasks of a ScienceBoard task folder",
		Usage: "Usage: rollout tasks --tasks DIR [--app APP] [--json]\n\nLists ScienceBoard tasks with their unsupported items and counts per app.",
		Flags: func(fs *service.Flags) {
			fs.String(&cfg.Dir, "tasks", "CODAPIPE_TASKS", "", "ScienceBoard tasks folder (the `tasks` root or any folder beneath it) or one task file")
			fs.String(&cfg.App, "app", "CODAPIPE_APP", "", "only list this application's tasks")
			fs.Bool(&cfg.JSON, "json", "", false, "print one JSON document instead of a table")
			taskLimitFlags(fs, &cfg.Limits)
		},
		Run: func(ctx context.Context, env *service.Env) error { return Tasks(ctx, cfg, env.Stdout) },
	}
}

// Tasks loads the task folder and writes the listing to w.
func Tasks(_ context.Context, cfg TasksConfig, w io.Writer) error {
	if strings.TrimSpace(cfg.Dir) == "" {
		return service.Usage(errors.New("no task folder: give --tasks DIR (or CODAPIPE_TASKS), e.g. the ScienceBoard benchmark's tasks folder"))
	}
	// LoadDir returns the tasks that loaded together with every file error:
	// list the good ones, then report the bad ones (exit status 1).
	set, loadErr := scienceboard.LoadDirLimits(cfg.Dir, cfg.Limits)
	if set == nil {
		return loadErr
	}
	if cfg.App != "" {
		var err error
		if set, err = set.Filter(cfg.App); err != nil {
			return errors.Join(err, loadErr)
		}
	}
	if err := scienceboard.WriteList(w, set, cfg.JSON); err != nil {
		return err
	}
	return loadErr
}
