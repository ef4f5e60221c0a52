package advantage

import (
	"context"
	"errors"
	"fmt"
	"github.com/codapipe/codapipe/internal/contract/scienceboard/appname"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/redact"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/pkg/grpo"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Options are the advantage command's settings as the command line gives
// them.
type Options struct {
	Out           string // DIR or s3://bucket/prefix
	Mode          string
	Label         string
	Preset        string // estimator preset; replaces Method, Eps, Std, ZeroVar
	Method        string
	Eps           float64
	Std           string // unbiased | population
	ZeroVar       string // keep | drop
	Reward        grpo.RewardConfig
	SkipUnparsed  bool
	Outcome       grpo.OutcomeConfig
	Format        string
	RowsPerShard  int64
	BytesPerShard int64
	EmbedImages   bool
	Images        string // --images
	Apps          []string
	Runs          []string // --runs
	Checkpoints   []string // --checkpoints
	Since         string   // --since
	JudgeVersion  string   // --judge-version
	Workers       int
	Durable       string
	AckWait       time.Duration
	MaxDelay      time.Duration
	// DiskFullBudget: --disk-full-budget (Config.DiskFullBudget).
	DiskFullBudget time.Duration
	Summary        string
}

// estimator builds the estimator: the preset when one is named, else
// the method, eps, std and zero-variance flags.
func (o *Options) estimator() (grpo.Estimator, error) {
	if o.Preset != "" {
		return grpo.Preset(o.Preset)
	}
	e := grpo.DefaultEstimator()
	e.Method, e.Eps, e.ZeroVariance = grpo.Method(o.Method), o.Eps, grpo.ZeroVariancePolicy(o.ZeroVar)
	switch o.Std {
	case "unbiased":
	case "population":
		e.PopulationStd = true
	default:
		return e, fmt.Errorf("--std %q, want unbiased or population", o.Std)
	}
	return e, e.Validate()
}

// DefaultOut is where the shard sets go without --out: <data>/shards. The
// string is part of every set's identity (Config.OutURL), so it is kept
// as it has always been written (not cleaned).
func DefaultOut(dataDir string) string { return dataDir + "/shards" }

// check checks the options that name things (--images, --app, --runs,
// --judge-version) and spells the apps as the benchmark does
// (appname.Check). Its errors are usage errors.
func (o *Options) check() error {
	if o.EmbedImages && o.Images != "" && o.Images != string(shard.ImagesEmbed) {
		return service.Usage(fmt.Errorf("--embed-images is --images embed; --images %q says otherwise", o.Images))
	}
	apps, err := appname.Check("--app", o.Apps)
	if err != nil {
		return service.Usage(err)
	}
	o.Apps = apps
	if err := service.CheckNames("--runs", traj.RunName, o.Runs...); err != nil {
		return service.Usage(err)
	}
	if v := strings.TrimSpace(o.JudgeVersion); v != "" && !traj.ValidJudgeVersionID(v) {
		return service.Usage(fmt.Errorf("--judge-version %q: want a judge version id, 16 lower-case hex digits (judge report prints them)", v))
	}
	return nil
}

// Execute runs the advantage service as the command does.
func Execute(ctx context.Context, env *service.Env, o Options) (Stats, error) {
	est, err := o.estimator()
	if err != nil {
		return Stats{}, service.Usage(err)
	}
	if err := o.check(); err != nil {
		return Stats{}, err
	}
	if o.Out == "" {
		o.Out = DefaultOut(env.Common.DataDir)
	}
	store, err := env.Store(ctx)
	if err != nil {
		return Stats{}, err
	}
	out, err := blob.OpenBucket(ctx, o.Out, blob.Config{Logger: env.Log})
	if err != nil {
		return Stats{}, fmt.Errorf("advantage: --out %s: %w", redact.URL(o.Out), err)
	}
	b, err := env.Bus(ctx)
	if err != nil {
		return Stats{}, err
	}
	runs, err := ledger.Open(ctx, b, env.Common.Topology())
	if err != nil {
		return Stats{}, err
	}
	step := grpo.StepOptions{Reward: o.Reward, SkipUnparsed: o.SkipUnparsed}
	cfg := Config{
		Bus: b, Store: store, Out: out, OutURL: o.Out,
		Mode: o.Mode, Label: grpo.LabelMode(o.Label), Estimator: est, Step: step, Outcome: o.Outcome,
		Format: shard.Format(o.Format), RowsPerShard: o.RowsPerShard, BytesPerShard: o.BytesPerShard, EmbedImages: o.EmbedImages, Images: shard.ImageMode(o.Images),
		TempDir: env.Common.DataDir + "/tmp",
		Apps:    o.Apps, Select: Selection{Runs: o.Runs, Checkpoints: o.Checkpoints, Since: o.Since}, JudgeVersion: strings.TrimSpace(o.JudgeVersion), Durable: o.Durable, Workers: o.Workers, AckWait: o.AckWait, MaxDelay: o.MaxDelay, DiskFullBudget: o.DiskFullBudget,
		Drain: env.Common.Drain, Topology: env.Common.Topology(), Version: service.Version().String(), Log: env.Log,
		RunFinished: runs.Finished, Metrics: NewMetrics(env.Metrics),
		RunUnreceived: runs.Unreceived,
	}
	if err := os.MkdirAll(cfg.TempDir, 0o755); err != nil {
		return Stats{}, err
	}
	cfg.ProgressEvery = env.Common.ProgressEvery()
	st, err := Serve(ctx, cfg)
	if o.Summary != "" {
		err = errors.Join(err, service.WriteSummary(o.Summary, versioned{service.Version().String(), st}))
	}
	return st, err
}

// versioned is the --summary document: the build, then the Stats.
type versioned struct {
	CodapipeVersion string `json:"codapipe_version"`
	Stats
}

// PrintStats writes what a run did in one paragraph.
func PrintStats(w io.Writer, st Stats) {
	fmt.Fprintf(w, "advantage: %d judged trajectories taken in, %d already written before, %d outside the selection (not written), %d dead-lettered, %d retried\n",
		st.Messages, st.Skipped, st.Unselected, st.DeadLettered, st.Retried)
	if len(st.Missing) > 0 {
		fmt.Fprintf(w, "advantage: WARNING: the stream %s is missing %d messages (sequences %s), never taken in: lost to store damage or removed; judge the runs again (docs/operations.md, Damage and repair)\n",
			bus.StreamName(bus.Judged), st.Missing.Messages(), st.Missing)
	}
	for _, run := range slices.Sorted(maps.Keys(st.Unreceived)) {
		fmt.Fprintf(w, "advantage: WARNING: run %s: %d trajectories its ledger lists as published are not in the set and were not dead-lettered: not judged (judge --drain), or lost from a stream (rollout --verify --run %s, then judge --drain)\n",
			traj.PrintName(run), st.Unreceived[run], traj.PrintName(run))
	}
	if st.Selection != nil {
		fmt.Fprintf(w, "advantage: selection: %s\n", selectionText(*st.Selection))
	}
	if st.JudgeVersion != "" {
		fmt.Fprintf(w, "advantage: judge version: %s (the one version of the set's judgements)\n", st.JudgeVersion)
	}
	for _, n := range st.Notes {
		fmt.Fprintf(w, "advantage: %s\n", n)
	}
	c := st.Counts
	fmt.Fprintf(w, "advantage: this run wrote %d rows in %d files (%d commits): %d groups, %d kept, %d zero-variance, %d dropped\n",
		c.Rows, st.Files, st.Commits, c.Groups, c.KeptGroups, c.ZeroVariance, c.Dropped)
	if m := st.Manifest; m != nil {
		fmt.Fprintf(w, "advantage: the shard set %s holds %d rows in %d files of %d trajectories\n", m.Set, m.Counts.Rows, len(m.Files), m.Counts.Trajectories)
		for _, src := range m.Sources {
			fmt.Fprintf(w, "advantage:   run %s, checkpoint %q: %d rows of %d trajectories\n", traj.PrintName(src.Run), src.Checkpoint, src.Rows, src.Trajectories)
		}
	}
}

const usage = `advantage — compute group-relative advantages and write training shards

Usage:
  advantage (--runs NAME[,NAME] | --checkpoints TAG[,TAG] | --since TIME|DURATION|all) [--out DIR|s3://bucket/prefix]
            [--mode step|outcome] [--estimator grpo|drgrpo|rloo]
            [--format arrow|parquet] [--images files|embed|store] [--drain] [--nats URL] [--store URL]

A durable consumer of the judged trajectories on NATS JetStream (coda.judged.>); many advantage
processes with the same settings share the work. Step mode (CODA's decoupled GRPO): each positive
step of a judged trajectory (a clean success's steps, --label clean; or also the steps before a
failure's first error, --label prefix) is a group of its non-executed candidates scored against
the executed action. Outcome mode: the K samples of a task in a run are a group with the
trajectory's outcome as reward. Rows go to Arrow IPC or Parquet shards under
<out>/<set>/ (the set names the configuration); a message is acknowledged only once its rows are
in a committed shard, so a crash neither loses nor repeats a row. The manifest
(<out>/<set>/manifest.json, also published on coda.manifest.<set>) lists the committed files and
the runs and planner checkpoints their rows come from.

What a set takes: --runs (rollout --run names), --checkpoints (planner checkpoint tags) and
--since (episodes started at or after a time); a trajectory must match every one given, and one
outside is acknowledged and counted, never written. A NEW set must be given at least one of them:
its new consumer would otherwise deliver every judged trajectory the stream retains (90 days by
default) of every run and checkpoint; --since all asks for exactly that. The selection is part
of the set's identity: the same flags continue the same set.

A set is bound to one judge version: --judge-version ID (the id judge report prints; part of the
set's identity, so another version is another set), or else the first version the set takes.
Judgements of other versions (a trajectory judged again with another policy, prompt or model) are
acknowledged and counted, never written, so no (trajectory, step, candidate) is in a set twice.
See docs/advantage.md, docs/shards.md.`

// Command is the advantage command.
func Command() service.Command { return service.Stage[Options](command).Command() }

// ParseOptions reads advantage's own flags (not the common ones) from
// args and the environment as the command does, for a job that runs
// advantage in its own process (nightly): the Options Execute takes, and
// the secrets the flags carry.
func ParseOptions(args []string) (Options, *redact.Secrets, error) {
	return service.Stage[Options](command).Parse(args)
}

// command is the advantage command and its Options once its flags are
// parsed.
func command() (service.Command, func() (Options, error)) {
	var o Options
	return service.Command{
		Name: "advantage", Summary: "compute group-relative advantages (GRPO) and write Arrow/Parquet shards for the trainer",
		Usage: usage, Common: true, Consumer: true,
		Sub: []service.Command{exportCommand(), verifyCommand(), rewardServerCommand()},
		Flags: func(fs *service.Flags) {
			fs.Group(service.GroupRun)
			fs.List(&o.Apps, "app", "CODAPIPE_APP", "only these applications' judged trajectories (default all)")
			fs.List(&o.Runs, "runs", "CODAPIPE_ADVANTAGE_RUNS", "only these runs' judged trajectories (rollout --run names); a new set needs --runs, --checkpoints or --since")
			fs.List(&o.Checkpoints, "checkpoints", "CODAPIPE_ADVANTAGE_CHECKPOINTS", "only trajectories sampled from these planner checkpoints (the tags rollout recorded)")
			fs.String(&o.Since, "since", "CODAPIPE_ADVANTAGE_SINCE", "", "only episodes started at or after this time: RFC 3339 (2026-11-25T02:00:00Z) or a duration back from the set's start (36h); all: every judged trajectory the stream retains")
			fs.String(&o.JudgeVersion, "judge-version", "CODAPIPE_ADVANTAGE_JUDGE_VERSION", "", "bind the set to this judge version id (judge report prints it; another set, in its own folder); default: the first version the set takes")
			fs.Int(&o.Workers, "concurrency", "CODAPIPE_ADVANTAGE_CONCURRENCY", 64, "judged trajectories handled at once; a commit holds at most this many")
			fs.String(&o.Durable, "durable", "CODAPIPE_ADVANTAGE_DURABLE", "", "consumer name shared by the processes (default advantage_<set>)")
			fs.Duration(&o.AckWait, "ack-wait", "CODAPIPE_ADVANTAGE_ACK_WAIT", time.Minute, "a message whose process died is handled again this long after its last heartbeat; an outcome group's or the manifest's lease passes to another process this long after it was taken or last renewed")
			fs.Duration(&o.MaxDelay, "max-delay", "CODAPIPE_ADVANTAGE_MAX_DELAY", 10*time.Second, "rows wait at most this long for their shard to be committed")
			fs.Duration(&o.DiskFullBudget, "disk-full-budget", "CODAPIPE_ADVANTAGE_DISK_FULL_BUDGET", 2*time.Minute, "how long writes may keep failing for want of space before the command stops (exit 1); nothing is lost: what failed is not acknowledged")
			fs.Group("Estimator")
			fs.String(&o.Mode, "mode", "CODAPIPE_ADVANTAGE_MODE", ModeStep, "step (a group per positive step) or outcome (a group per task and run)")
			fs.String(&o.Label, "label", "CODAPIPE_ADVANTAGE_LABEL", string(grpo.LabelModeClean), "step labels: clean (clean successes' steps) or prefix (also a failure's steps before its first error)")
			fs.String(&o.Preset, "preset", "CODAPIPE_ADVANTAGE_PRESET", "", "estimator preset replacing --estimator, --eps, --std and --zero-var ("+strings.Join(grpo.PresetNames(), ", ")+")")
			fs.String(&o.Method, "estimator", "CODAPIPE_ADVANTAGE_ESTIMATOR", string(grpo.MethodGRPO), "grpo, drgrpo or rloo")
			fs.Float64(&o.Eps, "eps", "CODAPIPE_ADVANTAGE_EPS", grpo.DefaultEps, "ε of grpo's (r−μ)/(σ+ε)")
			fs.String(&o.Std, "std", "CODAPIPE_ADVANTAGE_STD", "unbiased", "σ's divisor: unbiased (n−1) or population (n)")
			fs.String(&o.ZeroVar, "zero-var", "CODAPIPE_ADVANTAGE_ZERO_VAR", string(grpo.ZeroVarianceKeep), "zero-variance groups: keep (advantages 0) or drop (no rows)")
			fs.Group("Reward")
			fs.Float64(&o.Reward.ScrollDirectionWeight, "scroll-direction-weight", "", grpo.DefaultScrollDirectionWeight, "reward: weight of the scroll direction in a scroll's distance")
			fs.Float64(&o.Reward.DragMinExtent, "drag-min-extent", "", grpo.DefaultDragMinExtent, "reward: smallest side of a drag's box")
			fs.Float64(&o.Reward.TypeOnlyDist, "type-only-dist", "", grpo.DefaultTypeOnlyDist, "reward: distance part of actions with only a type")
			fs.Bool(&o.Reward.NormalizeTyped, "normalize-typed", "", false, "reward: compare typed text case- and space-folded")
			fs.Bool(&o.Reward.NormalizeAnswer, "normalize-answer", "", true, "reward: compare answers case- and space-folded")
			fs.Bool(&o.SkipUnparsed, "skip-unparsed", "", false, "leave candidates without a usable action out of their group (default: reward 0)")
			fs.Float64(&o.Outcome.CleanReward, "clean-reward", "", 1, "outcome mode: reward of a clean success")
			fs.Float64(&o.Outcome.RedundantReward, "redundant-reward", "", 0, "outcome mode: reward of a success with redundancy")
			fs.Float64(&o.Outcome.FailureReward, "failure-reward", "", 0, "outcome mode: reward of a failure")
			fs.String((*string)(&o.Outcome.Eval), "eval", "", string(grpo.EvalIgnore), "outcome mode: the task evaluator's part (ignore, require, mean)")
			fs.Group(service.GroupOutput)
			fs.String(&o.Out, "out", "CODAPIPE_SHARDS", "", "where shard sets go: a folder or s3://bucket/prefix (default <data>/shards)")
			fs.String(&o.Format, "format", "CODAPIPE_SHARD_FORMAT", string(shard.FormatArrow), "arrow (Arrow IPC file) or parquet (zstd)")
			fs.Int64(&o.RowsPerShard, "rows-per-shard", "CODAPIPE_ROWS_PER_SHARD", 100000, "start a new shard after this many rows (0: no limit)")
			fs.Int64(&o.BytesPerShard, "bytes-per-shard", "CODAPIPE_BYTES_PER_SHARD", 512<<20, "start a new shard after about this many bytes (0: no limit)")
			fs.String(&o.Images, "images", "CODAPIPE_IMAGES", "", "where the set carries the prompt's images: files (once each, beside the shards; the default), embed (PNG bytes in every row) or store (references to the blob store only)")
			fs.Bool(&o.EmbedImages, "embed-images", "CODAPIPE_EMBED_IMAGES", false, "the same as --images embed")
			fs.String(&o.Summary, "summary", "CODAPIPE_SUMMARY", "", "write the run's counts as JSON to this file")
		},
		Run: func(ctx context.Context, env *service.Env) error {
			st, err := Execute(ctx, env, o)
			err = service.WorkerStopped(ctx, env.Common.Drain, err)
			if err == nil || st.Messages > 0 {
				PrintStats(env.Stdout, st)
			}
			return err
		},
	}, func() (Options, error) { return o, nil }
}
