package rollout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/runreport"
	"github.com/codapipe/codapipe/pkg/traj"
)

// ReportConfig configures the report subcommand.
type ReportConfig struct {
	runreport.Config
	// Runs, Since and App select a range of runs (nights, checkpoints)
	// instead of one run.
	Runs  []string
	Since string
	JSON  bool   // print the figures as JSON
	Out   string // write the HTML page here
	// Shards and SFT are local folders of shard sets and SFT sets
	// (default <data>/shards and <data>/sft).
	Shards string
	SFT    string
}

func reportCommand() service.Command {
	var cfg ReportConfig
	return service.Command{
		Name: "rollout report", Summary: "a run's figures and plots, or a range of nights and checkpoints: JSON or one self-contained HTML page",
		Usage: `Usage: rollout report (--run NAME [--baseline RUN] | --runs PATTERN[,PATTERN] | --since WHEN) [--app APP]
                      [--json] [--out FILE.html] [--shards DIR] [--sft DIR]

Reads the runs' trajectories from the trajectories stream, their episodes from the run ledger, their
judgements from the judged archive, their VM starts, resets, failures and quarantines from the
VM-event documents rollout writes to the blob store (runs/<run>/vm-events/), their rows from the
shard sets that list them and their samples from the SFT sets, and reports per run: success by app
with Average@K and Pass@K (the rollout summary's formula), per-task success with K/K and 0/K
marked, steps per episode, outcomes, VM use over time with resets and faults, plan variety, plan
tokens and finish reasons, per-stage latency, the judge's decisions, its precision/recall against
the evaluator and the agreement of its votes, reward, advantage and per-group spread histograms and
the zero-variance share; and a gallery of trajectories of each judge decision with their
screenshots, plans, actions and the judge's reasons. --baseline RUN puts per-app success and
Average@K of an earlier run beside the run's.

--runs (run names or patterns such as '2026-11-*') or --since (a date, a time, or a duration back
from now: 2026-11-20, 2026-11-20T06:00:00Z, 72h) report a range of runs, oldest first: the trend of
each headline figure over the nights and planner checkpoints, the task × night heat map, and the
full figures of the runs of the latest three nights and checkpoints (older runs are in the trend
and the heat map). --app keeps one application's trajectories.

--out writes one HTML page (no external assets: plots inline, thumbnails as data: URIs, the figures
as JSON in <script id="report-data">); --json prints the figures as JSON (one run's report, or the
range's overview); without either, a few lines of text per run (one per app for older runs).`,
		Common: true,
		Flags: func(fs *service.Flags) {
			fs.String(&cfg.Run, "run", "CODAPIPE_RUN", "", "the run to report on (a rollout --run name)")
			fs.String(&cfg.Baseline, "baseline", "", "", "an earlier run to compare with: per-app success and Average@K side by side, with deltas")
			fs.List(&cfg.Runs, "runs", "", "report a range: these runs (names or patterns, e.g. '2026-11-*')")
			fs.String(&cfg.Since, "since", "", "", "report a range: the runs started at or after this date, time (RFC 3339) or duration back from now (72h)")
			fs.String(&cfg.App, "app", "", "", "only this application's trajectories (of the run or of the range)")
			fs.Bool(&cfg.JSON, "json", "", false, "print the figures as one JSON document")
			fs.String(&cfg.Out, "out", "", "", "write the report as a self-contained HTML page to this file")
			fs.String(&cfg.Shards, "shards", "CODAPIPE_SHARDS", "", "shard sets to read the runs' rows from: a folder or an s3:// URL (default <data>/shards)")
			fs.String(&cfg.SFT, "sft", "", "", "local folder of SFT sets (sftpack --out) to count the runs' samples in (default <data>/sft)")
		},
		Run: func(ctx context.Context, env *service.Env) error { return Report(ctx, env, cfg) },
	}
}

// ParseSince reads --since: a date (2006-01-02, UTC), an RFC 3339 time,
// or a duration back from now.
func ParseSince(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q: want a date (2026-11-20), an RFC 3339 time (2026-11-20T06:00:00Z) or a positive duration back from now (72h)", v)
}

// Report builds the report of cfg.Run (or of the range cfg.Runs,
// cfg.Since select) through env's bus and blob store and writes it as the
// flags ask: the HTML page to cfg.Out, JSON or text to env.Stdout.
func Report(ctx context.Context, env *service.Env, cfg ReportConfig) error {
	ranged := len(cfg.Runs) > 0 || cfg.Since != ""
	switch {
	case cfg.Run == "" && !ranged:
		return service.Usage(errors.New("no run: give --run NAME (a rollout --run name), or a range: --runs PATTERN or --since WHEN"))
	case cfg.Run != "" && ranged:
		return service.Usage(errors.New("--run reports one run, --runs and --since a range: give one or the other"))
	case cfg.Baseline != "" && ranged:
		return service.Usage(errors.New("--baseline compares one run (--run); a range shows its trend instead"))
	}
	if cfg.Run != "" {
		if err := service.CheckNames("--run", traj.RunName, cfg.Run); err != nil {
			return service.Usage(err)
		}
	}
	if cfg.Baseline != "" {
		if err := service.CheckNames("--baseline", traj.RunName, cfg.Baseline); err != nil {
			return service.Usage(err)
		}
	}
	var since time.Time
	if cfg.Since != "" {
		var err error
		if since, err = ParseSince(cfg.Since, time.Now()); err != nil {
			return service.Usage(fmt.Errorf("--since %w", err))
		}
	}
	if cfg.App != "" {
		if err := service.CheckNames("--app", traj.AppName, cfg.App); err != nil {
			return service.Usage(err)
		}
	}
	src := runreport.Sources{Topology: env.Common.Topology(),
		ShardsDir: cmp.Or(cfg.Shards, filepath.Join(env.Common.DataDir, "shards")),
		SFTDir:    cmp.Or(cfg.SFT, filepath.Join(env.Common.DataDir, "sft"))}
	var err error
	if src.Bus, err = env.Bus(ctx); err != nil {
		return err
	}
	if src.Store, err = env.Store(ctx); err != nil {
		return err
	}
	var o *runreport.Overview
	if ranged {
		if o, err = runreport.BuildRange(ctx, src, runreport.RangeConfig{Runs: cfg.Runs, Since: since, App: cfg.App}); err != nil {
			return err
		}
	} else {
		r, err := runreport.Build(ctx, src, cfg.Config)
		if err != nil {
			return err
		}
		o = runreport.OverviewOf([]*runreport.Report{r})
	}
	if cfg.Out != "" {
		if err := o.LoadImages(ctx, src.Store); err != nil {
			return err
		}
		if err := o.WriteHTMLFile(cfg.Out, time.Now()); err != nil {
			return err
		}
		env.Log.Info("rollout report: page written", "runs", len(o.Runs), "file", cfg.Out)
	}
	switch {
	case cfg.JSON && ranged:
		return o.WriteJSON(env.Stdout)
	case cfg.JSON:
		return o.Reports[0].WriteJSON(env.Stdout)
	}
	if ranged {
		o.Print(env.Stdout)
	} else {
		o.Reports[0].Print(env.Stdout)
	}
	if cfg.Out != "" {
		fmt.Fprintf(env.Stdout, "report page: %s\n", cfg.Out)
	}
	return nil
}
