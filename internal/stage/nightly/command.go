package nightly

import (
	"context"

	"github.com/codapipe/codapipe/internal/infra/codasim"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/rollout"
)

const usage = `nightly — the nightly specialization job: every app's run, judged and made shards, then the SFT set.

Usage:
  nightly --apps APP[,APP] [--night NAME] [--group G] [--samples K] [--sim]
          [--shards DIR|s3://bucket/prefix] [--sft-out DIR] [--export s3://bucket/prefix]
          [--rollout-args ARGS] [--judge-args ARGS] [--advantage-args ARGS] [--sftpack-args ARGS]
          [--nats URL] [--store URL] [--summary FILE]

For each app of --apps, in turn: rollout --run <night>-<app> against the planner checkpoint, with a
judge worker and an advantage worker beside it (both --runs <night>-<app>: the judge judges only
that run, one shard set per app); then judge --drain and advantage --drain finish what the workers
left. After every app: sftpack build
--runs with the night's runs (and --sft-runs) into --sft-out, and sftpack export to --export when
given. The stages run in this process, on one NATS server (the embedded one in --data, or --nats);
the stages' own flags come from the environment (CODAPIPE_POOL, CODAPIPE_PLANNER_URL,
CODAPIPE_JUDGE, ...) or from --rollout-args, --judge-args, --advantage-args and --sftpack-args
(split on spaces, checked at start; the flags the night sets itself, such as --run, --runs,
--group, --out or --sim, are refused there). --night defaults to today's UTC date.

Re-running a night finishes only what is missing: the rollout resumes from the run ledger, judge and
advantage drain their durable consumers, and the SFT build of the same runs writes the same
dataset. With other --judge-args (another judge version) the run is judged again, but no shard
row is written twice: a set keeps the judge version it took first, and the summary names the
judgements skipped. A night takes only its own runs unless --sft-runs adds others. The summary goes to stdout
and as JSON to --summary (default <data>/nightly/<night>/summary.json).
Exit status: 0 done, 1 a stage failed (the summary names it; re-run the night), 2 bad flags.`

// Command is the nightly command.
func Command() service.Command {
	var o Options
	return service.Command{
		Name: "nightly", Summary: "the nightly specialization job: runs, judgements and shards per app, then the SFT set",
		Usage: usage, Common: true,
		Flags: func(fs *service.Flags) {
			fs.Group(service.GroupRun)
			fs.List(&o.Apps, "apps", "CODAPIPE_NIGHTLY_APPS", "applications, one rollout run and one shard set each (e.g. ChimeraX,KAlgebra)")
			fs.String(&o.Night, "night", "CODAPIPE_NIGHT", "", "the night's name, prefix of its run names <night>-<app> (default today's UTC date, YYYY-MM-DD)")
			fs.Int(&o.Group, "group", "CODAPIPE_GROUP", rollout.DefaultGroup, "G: plans per step besides the executed one")
			fs.Int(&o.Samples, "samples", "CODAPIPE_SAMPLES", rollout.DefaultSamples, "K: episodes per task")
			fs.Bool(&o.Workers, "workers", "CODAPIPE_NIGHTLY_WORKERS", true, "run a judge and an advantage worker beside each rollout (false: they only drain after it)")
			fs.List(&o.SFTRuns, "sft-runs", "CODAPIPE_NIGHTLY_SFT_RUNS", "more runs for the SFT set, names or globs (default none: only the night's runs)")
			fs.Group("Stages")
			fs.String(&o.RolloutArgs, "rollout-args", "CODAPIPE_NIGHTLY_ROLLOUT_ARGS", "", "more rollout flags, split on spaces (e.g. '--pool pool.yaml --planner-checkpoint global_step_400')")
			fs.String(&o.JudgeArgs, "judge-args", "CODAPIPE_NIGHTLY_JUDGE_ARGS", "", "more judge flags, split on spaces (e.g. '--lowres 640x400')")
			fs.String(&o.AdvantageArgs, "advantage-args", "CODAPIPE_NIGHTLY_ADVANTAGE_ARGS", "", "more advantage flags, split on spaces (e.g. '--format parquet')")
			fs.String(&o.SFTArgs, "sftpack-args", "CODAPIPE_NIGHTLY_SFTPACK_ARGS", "", "more sftpack build flags, split on spaces (e.g. '--require-eval --max-per-task 8')")
			fs.Group(service.GroupSim)
			fs.Bool(&o.Sim, "sim", "CODAPIPE_SIM", false, "run every stage on the built-in SIMULATOR (simulated VMs and models)")
			codasim.Flags(fs, &o.SimConfig, &o.TimeScale, &o.VMs, "with --sim: ")
			fs.Int64(&o.Seed, "seed", "CODAPIPE_SEED", 0, "with --sim: seed of the simulator and the rollout's model requests (0: the --sim-config's seed, else 1)")
			fs.Group(service.GroupOutput)
			fs.String(&o.Shards, "shards", "CODAPIPE_SHARDS", "", "where the shard sets go: a folder or s3://bucket/prefix (default <data>/shards)")
			fs.String(&o.SFTOut, "sft-out", "CODAPIPE_NIGHTLY_SFT_OUT", "", "folder of the night's SFT set (default <data>/sft/<night>)")
			fs.String(&o.Export, "export", "CODAPIPE_NIGHTLY_EXPORT", "", "export the SFT set to this s3://bucket/prefix (S3 endpoint and credentials from AWS_* / MINIO_*; empty: no export)")
			fs.String(&o.ReportSince, "report-since", "CODAPIPE_NIGHTLY_REPORT_SINCE", DefaultReportSince, "how far back the night's report page (<data>/nightly/<night>/report.html) goes: a duration back from the night's start, a date or an RFC 3339 time")
			fs.String(&o.Summary, "summary", "CODAPIPE_NIGHTLY_SUMMARY", "", "write the night's summary as JSON here (default <data>/nightly/<night>/summary.json)")
		},
		Run: func(ctx context.Context, env *service.Env) error {
			s, err := Execute(ctx, env, o)
			if s != nil {
				s.Print(env.Stdout)
			}
			return err
		},
	}
}
