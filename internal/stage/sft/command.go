package sft

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/codapipe/codapipe/internal/contract/scienceboard/appname"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/redact"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Options are the build command's settings as the command line gives
// them.
type Options struct {
	Out   string // DIR or s3://bucket/prefix
	Runs  []string
	Apps  []string
	Since string
	Until string
	Rules
	Workers int
	Summary string
}

// Result is what Execute did.
type Result struct {
	// Dir is the local folder of the dataset (the staging folder when
	// --out is a bucket; removed after a successful export).
	Dir      string    `json:"dir"`
	Out      string    `json:"out"`
	Manifest *Manifest `json:"-"`
	// Exported is set when the dataset was uploaded to a bucket.
	Exported bool `json:"exported"`
}

// parseTime reads an RFC 3339 time or a UTC date (2006-01-02).
func parseTime(flag, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--%s %q: want an RFC 3339 time (2026-03-01T12:00:00Z) or a date (2026-03-01)", flag, s)
}

// config checks the options and turns them into a Build configuration
// (without Store and Dir).
func (o *Options) config() (Config, error) {
	cfg := Config{
		Runs: o.Runs, Apps: o.Apps, Rules: o.Rules, Workers: o.Workers,
		Producer: "codapipe sftpack " + service.Version().String(),
	}
	if o.Out == "" {
		return cfg, errors.New("--out is required: a folder or s3://bucket/prefix")
	}
	if err := service.CheckNames("--runs", traj.RunName, cfg.Runs...); err != nil {
		return cfg, err
	}
	apps, err := appname.Check("--apps", cfg.Apps)
	if err != nil {
		return cfg, err
	}
	cfg.Apps = apps
	for _, p := range append(append([]string{}, cfg.Runs...), cfg.Apps...) {
		if _, err := path.Match(p, ""); err != nil {
			return cfg, fmt.Errorf("pattern %q: %w", p, err)
		}
	}
	if cfg.Since, err = parseTime("since", o.Since); err != nil {
		return cfg, err
	}
	if cfg.Until, err = parseTime("until", o.Until); err != nil {
		return cfg, err
	}
	if !cfg.Since.IsZero() && !cfg.Until.IsZero() && !cfg.Since.Before(cfg.Until) {
		return cfg, fmt.Errorf("--since %s is not before --until %s", o.Since, o.Until)
	}
	switch {
	case o.ValFraction < 0 || o.ValFraction > 1:
		return cfg, fmt.Errorf("--val-fraction %v: want 0..1", o.ValFraction)
	case o.MaxPerTask < 0:
		return cfg, fmt.Errorf("--max-per-task %d: want 0 (no limit) or more", o.MaxPerTask)
	case o.ShardBytes < 0:
		return cfg, fmt.Errorf("--shard-bytes %d: want 0 (one shard per split) or more", o.ShardBytes)
	case o.Workers < 1:
		return cfg, fmt.Errorf("--concurrency %d: want 1 or more", o.Workers)
	}
	return cfg, nil
}

// Execute runs sftpack build: it builds the dataset into --out (a folder,
// replaced whole once the new dataset is complete), or into a staging
// folder under the data directory that is then exported to the bucket.
func Execute(ctx context.Context, env *service.Env, o Options) (Result, error) {
	cfg, err := o.config()
	if err != nil {
		return Result{}, service.Usage(err)
	}
	loc, err := blob.ParseURL(o.Out, "") // a folder (path or file://) or a bucket
	if err != nil {
		return Result{}, service.Usage(fmt.Errorf("--out: %w", err))
	}
	store, err := env.Store(ctx)
	if err != nil {
		return Result{}, err
	}
	cfg.Store, cfg.Log, cfg.Progress, cfg.Report = store, env.Log, env.Stderr, env.Stdout
	res := Result{Out: redact.URL(o.Out)}
	if loc.Scheme != "file" {
		sum := sha256.Sum256([]byte(o.Out))
		res.Dir = filepath.Join(env.Common.DataDir, "sftpack", "staging-"+hex.EncodeToString(sum[:8]))
		if err := os.RemoveAll(res.Dir); err != nil {
			return res, err
		}
		cfg.Dir = res.Dir
		if res.Manifest, err = Build(ctx, cfg); err != nil {
			os.RemoveAll(res.Dir)
			return res, err
		}
		printBuilt(env.Stdout, res.Dir, res.Manifest)
		if err := ExportDir(ctx, res.Dir, o.Out, env.Log, env.Stderr); err != nil {
			out := redact.URL(o.Out)
			return res, fmt.Errorf("sftpack: export to %s: %w (the dataset stays in %s; `sftpack export %s %s` resumes the upload)", out, err, res.Dir, res.Dir, out)
		}
		res.Exported = true
		fmt.Fprintf(env.Stdout, "sftpack: exported to %s\n", redact.URL(o.Out))
		return res, os.RemoveAll(res.Dir)
	}
	res.Dir = loc.Dir
	res.Manifest, err = buildInto(ctx, cfg, res.Dir)
	if err != nil {
		return res, err
	}
	printBuilt(env.Stdout, res.Dir, res.Manifest)
	return res, nil
}

// buildInto builds into a fresh folder beside dir and then puts it in
// dir's place, so dir is never half-written. An existing dir is replaced
// only when it is empty or an sftpack dataset.
func buildInto(ctx context.Context, cfg Config, dir string) (*Manifest, error) {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		if _, err := ReadManifest(dir); err != nil {
			return nil, service.Usage(fmt.Errorf("--out %s exists and is not an sftpack dataset (no readable %s): not replacing it", dir, ManifestName))
		}
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	parent, base := filepath.Dir(dir), filepath.Base(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	stage := filepath.Join(parent, "."+base+".sftpack-partial")
	old := filepath.Join(parent, "."+base+".sftpack-old")
	for _, p := range []string{stage, old} {
		if err := os.RemoveAll(p); err != nil {
			return nil, err
		}
	}
	cfg.Dir = stage
	m, err := Build(ctx, cfg)
	if err != nil {
		os.RemoveAll(stage)
		return nil, err
	}
	if err := os.Rename(dir, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := os.Rename(stage, dir); err != nil {
		return nil, err
	}
	return m, os.RemoveAll(old)
}

// printBuilt prints what the build wrote.
func printBuilt(w io.Writer, dir string, m *Manifest) {
	var bytes int64
	for _, f := range m.Files {
		bytes += f.Bytes
	}
	tr, va := m.Splits[SplitTrain], m.Splits[SplitVal]
	fmt.Fprintf(w, "sftpack: wrote %d samples (train %d, val %d) of %d trajectories, %d images, in %d files (%d bytes) to %s; %d skipped (manifest.json says why)\n",
		m.Counts.Samples, tr.Samples, va.Samples, m.Counts.Kept, m.Counts.Images, len(m.Files)+1, bytes, dir, len(m.Skipped))
}

const usage = `sftpack — build the generalization SFT dataset and export it

Usage:
  sftpack build --out DIR|s3://bucket/prefix [--runs NAME|GLOB,...] [--apps APP,...]
                [--since T] [--until T] [--judge-version ID] [--require-eval]
                [--max-per-task N] [--val-fraction F] [--store URL]
  sftpack export DIR s3://bucket/prefix

A batch job over the judge's archive of judged trajectories (judged/ in the blob store).
See docs/sft.md.`

const buildUsage = `sftpack build — select clean successes and write the SFT dataset

Usage:
  sftpack build --out DIR|s3://bucket/prefix [--runs NAME|GLOB,...] [--apps APP,...]
                [--since T] [--until T] [--judge-version ID] [--require-eval]
                [--max-per-task N] [--val-fraction F] [--seed N] [--store URL]

Reads the judge's archive in --store. A set takes one judge version: --judge-version, else
the version that judged the most of the selected trajectories (on a tie the one that judged
first, then the smaller id); other versions' judgements are counted, not taken. Clean
successes are kept (--require-eval: only those whose task evaluator passed, when it ran);
a trajectory with a missing screenshot or prompt set, an executed action that did not
parse, or a record that does not decode is skipped whole and listed in the manifest.
Trajectories of one task with the same executed actions count once (the smallest id is
kept); --max-per-task keeps the shortest. Tasks go to train or val by a hash of --seed
and the task id. Every step of a kept trajectory is one sample: the planner's prompt at
that step exactly as the agent sends it (system, one user turn showing the earlier plans)
and the executed plan as the target. Counts per app and task are printed before anything is written.

Writes train.jsonl / val.jsonl with images/<sha256>.png (LLaMA-Factory sharegpt and
ms-swift messages layout; a split without samples has no file), dataset_info.json,
Parquet shards with embedded images (parquet/, Hugging Face datasets' Image layout),
README.md with the training commands for the splits written, and manifest.json, last. A folder --out
is replaced whole when the build is done; an s3:// --out is built under
<data>/sftpack/ and then exported (as sftpack export). Same archive and flags: the same
bytes. See docs/sft.md.`

const exportUsage = `sftpack export — upload a built dataset folder to a bucket

Usage:
  sftpack export DIR s3://bucket/prefix

Uploads the files manifest.json lists that the bucket lacks or holds with another
SHA-256, then manifest.json last, so a reader that finds the manifest finds the whole
dataset. Re-run it after an interruption: only what is missing is sent. The S3 endpoint
and credentials come from the usual variables (docs/storage.md).`

// Command is the sftpack command: build and export.
func Command() service.Command {
	return service.Command{
		Name: "sftpack", Summary: "merge the clean successes of expert runs into the generalization SFT dataset",
		Usage: usage,
		Run: func(context.Context, *service.Env) error {
			return service.Usage(errors.New("give a subcommand: build or export (see sftpack --help)"))
		},
		Sub: []service.Command{buildCommand(), exportCommand()},
	}
}

func buildCommand() service.Command { return service.Stage[Options](build).Command() }

// ParseOptions reads sftpack build's own flags (not the common ones) from
// args and the environment as the command does, for a job that builds a
// set in its own process (nightly): the Options Execute takes, and the
// secrets the flags carry.
func ParseOptions(args []string) (Options, *redact.Secrets, error) {
	return service.Stage[Options](build).Parse(args)
}

// build is the sftpack build command and its Options once its flags are
// parsed.
func build() (service.Command, func() (Options, error)) {
	var o Options
	return service.Command{
		Name: "sftpack build", Summary: "select clean successes and write the SFT dataset (JSONL + images, Parquet, manifest)",
		Usage: buildUsage, Common: true,
		Flags: func(fs *service.Flags) {
			fs.Group("Selection")
			fs.List(&o.Runs, "runs", "CODAPIPE_SFT_RUNS", "runs to take, names or globs (e.g. 'nightly-2026-03-*') (default all)")
			fs.List(&o.Apps, "apps", "CODAPIPE_SFT_APPS", "applications to take, names or globs (default all)")
			fs.String(&o.Since, "since", "CODAPIPE_SFT_SINCE", "", "only trajectories started at or after this time (RFC 3339 or YYYY-MM-DD, UTC)")
			fs.String(&o.Until, "until", "CODAPIPE_SFT_UNTIL", "", "only trajectories started before this time (RFC 3339 or YYYY-MM-DD, UTC)")
			fs.String(&o.JudgeVersion, "judge-version", "CODAPIPE_SFT_JUDGE_VERSION", "", "the set's one judge version: take the judgements of this judge version id (default: the version that judged the most selected trajectories)")
			fs.Bool(&o.RequireEval, "require-eval", "CODAPIPE_SFT_REQUIRE_EVAL", false, "keep only clean successes whose task evaluator also passed (when it ran)")
			fs.Int(&o.MaxPerTask, "max-per-task", "CODAPIPE_SFT_MAX_PER_TASK", 0, "keep at most this many trajectories per task, the shortest first (0: no limit)")
			fs.Group(service.GroupOutput)
			fs.String(&o.Out, "out", "CODAPIPE_SFT_OUT", "", "where the dataset goes: a folder (replaced whole) or s3://bucket/prefix")
			fs.Float64(&o.ValFraction, "val-fraction", "CODAPIPE_SFT_VAL_FRACTION", 0.05, "share of the tasks that go to val (whole tasks; by a hash of --seed and the task id)")
			fs.Int64(&o.Seed, "seed", "CODAPIPE_SFT_SEED", 0, "seed of the train/val split")
			fs.Int64(&o.ShardBytes, "shard-bytes", "CODAPIPE_SFT_SHARD_BYTES", DefaultShardBytes, "start a new Parquet shard after about this many bytes (0: one per split)")
			fs.String(&o.Summary, "summary", "CODAPIPE_SUMMARY", "", "write the manifest's counts as JSON to this file")
			fs.Group(service.GroupRun)
			fs.Int(&o.Workers, "concurrency", "CODAPIPE_SFT_CONCURRENCY", 8, "archive records read and screenshots copied at once")
		},
		Run: func(ctx context.Context, env *service.Env) error {
			res, err := Execute(ctx, env, o)
			if o.Summary != "" && res.Manifest != nil {
				err = errors.Join(err, writeSummary(o.Summary, res))
			}
			return err
		},
	}, func() (Options, error) { return o, nil }
}

// writeSummary writes the build's counts as JSON.
func writeSummary(path string, res Result) error {
	m := res.Manifest
	return service.WriteSummary(path, struct {
		CodapipeVersion string `json:"codapipe_version"`
		Result
		Counts Counts               `json:"counts"`
		Splits map[string]SplitInfo `json:"splits"`
		Files  int                  `json:"files"`
	}{service.Version().String(), res, m.Counts, m.Splits, len(m.Files) + 1})
}

func exportCommand() service.Command {
	return service.Command{
		Name: "sftpack export", Summary: "upload a built dataset folder to a bucket, resumably, manifest last",
		Usage: exportUsage, Args: 2,
		Run: func(ctx context.Context, env *service.Env) error {
			if len(env.Args) != 2 {
				return service.Usage(errors.New("want DIR and s3://bucket/prefix"))
			}
			return Export(ctx, env, env.Args[0], env.Args[1])
		},
	}
}

// Export uploads the built set in dir to dst (s3://bucket/prefix) as
// sftpack export does: resumably, the manifest last; a folder that holds
// no set is a usage error.
func Export(ctx context.Context, env *service.Env, dir, dst string) error {
	if _, err := ReadManifest(dir); err != nil {
		return service.Usage(fmt.Errorf("%s is not an sftpack dataset: %w", dir, err))
	}
	if err := ExportDir(ctx, dir, dst, env.Log, env.Stderr); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "sftpack: exported %s to %s\n", dir, redact.URL(dst))
	return nil
}

// logger returns log or a discarding logger.
func logger(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}
