package rollout

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/codapipe/codapipe/internal/runreport"
	"github.com/codapipe/codapipe/internal/service"
	"github.com/codapipe/codapipe/pkg/traj"
)

// ReportConfig configures the report subcommand.
type ReportConfig struct {
	runreport.Config
	JSON   bool   // print the figures as JSON
	Out    string // write the HTML page here
	Shards string // local folder of shard sets (default <data>/shards)
}

func reportCommand() service.Command {
	var cfg ReportConfig
	return service.Command{
		Name: "rollout report", Summary: "a run's figures and plots: JSON or one self-contained HTML page",
		Usage: `Usage: rollout report --run NAME [--baseline RUN] [--json] [--out FILE.html] [--shards DIR]

Reads the run's trajectories from the trajectories stream, its episodes from the run ledger, its
judgements from the judged archive, its VM starts, resets, failures and quarantines from the
VM-event documents rollout writes to the blob store (runs/<run>/vm-events/), and its rows from the
shard sets that list it, and reports: success by app with Average@K and Pass@K (the rollout
summary's formula), steps per episode, outcomes, VM use over time with resets and faults, plan variety, per-stage latency, the judge's decisions and its
precision/recall against the evaluator, reward and advantage histograms and the zero-variance
share. --baseline RUN puts per-app success and Average@K of an earlier run beside the run's.
--out writes one HTML page with the plots inline (no external assets); --json prints the figures
as JSON; without either, a few lines of text.`,
		Common: true,
		Flags: func(fs *service.Flags) {
			fs.String(&cfg.Run, "run", "CODAPIPE_RUN", "", "the run to report on (a rollout --run name)")
			fs.String(&cfg.Baseline, "baseline", "", "", "an earlier run to compare with: per-app success and Average@K side by side, with deltas")
			fs.Bool(&cfg.JSON, "json", "", false, "print the figures as one JSON document")
			fs.String(&cfg.Out, "out", "", "", "write the report as a self-contained HTML page to this file")
			fs.String(&cfg.Shards, "shards", "CODAPIPE_SHARDS", "", "local folder of shard sets to read the run's rows from (default <data>/shards; an s3:// URL is not read)")
		},
		Run: func(ctx context.Context, env *service.Env) error { return Report(ctx, env, cfg) },
	}
}

// Report builds the report of cfg.Run through env's bus and blob store and
// writes it as the flags ask: the HTML page to cfg.Out, JSON or text to
// env.Stdout.
func Report(ctx context.Context, env *service.Env, cfg ReportConfig) error {
	if cfg.Run == "" {
		return service.Usage(errors.New("no run: give --run NAME (a rollout --run name)"))
	}
	if err := traj.CheckNames("--run", traj.RunName, cfg.Run); err != nil {
		return service.Usage(err)
	}
	if cfg.Baseline != "" {
		if err := traj.CheckNames("--baseline", traj.RunName, cfg.Baseline); err != nil {
			return service.Usage(err)
		}
	}
	shards := cfg.Shards
	if shards == "" {
		shards = filepath.Join(env.Common.DataDir, "shards")
	}
	b, err := env.Bus(ctx)
	if err != nil {
		return err
	}
	store, err := env.Store(ctx)
	if err != nil {
		return err
	}
	r, err := runreport.Build(ctx, runreport.Sources{Bus: b, Topology: env.Common.Topology(), Store: store, ShardsDir: shards}, cfg.Config)
	if err != nil {
		return err
	}
	if cfg.Out != "" {
		if err := r.WriteHTMLFile(cfg.Out, time.Now()); err != nil {
			return err
		}
		env.Log.Info("rollout report: page written", "run", cfg.Run, "file", cfg.Out)
	}
	if cfg.JSON {
		return r.WriteJSON(env.Stdout)
	}
	r.Print(env.Stdout)
	if cfg.Out != "" {
		fmt.Fprintf(env.Stdout, "report page: %s\n", cfg.Out)
	}
	return nil
}
