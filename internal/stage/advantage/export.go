package advantage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/codapipe/codapipe/internal/contract/trainexport"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/service"
)

// ExportOptions are the settings of advantage export.
type ExportOptions struct {
	Set        string // the shard set's folder (holding manifest.json): a folder or s3://bucket/prefix
	Out        string // the folder written
	Format     string // jsonl | verl | openrlhf
	DataSource string
	// ValFraction is the share of trajectories in the val split (verl,
	// openrlhf); ImageRoot the folder their rows name the images in.
	ValFraction float64
	ImageRoot   string
}

const exportUsage = `advantage export — write a shard set as a trainer's input

Usage:
  advantage export --set DIR|s3://bucket/prefix --format jsonl|verl|openrlhf --out DIR
                   [--val-fraction F] [--image-root DIR] [--store URL]

Reads the shard set through its manifest (the folder holding manifest.json) and writes to --out:

  jsonl     candidates.jsonl: one line per candidate (shard row) with the token ids, behaviour
            log-probabilities, advantage, loss weight and group: what the offline decoupled-GRPO
            trainer trains on (the reference trainer in trainer/ reads it).
  verl      train.parquet and val.parquet (RLHFDataset: prompt, images, data_source,
            reward_model, extra_info), one row per group.
  openrlhf  train.jsonl and val.jsonl (PromptDataset: input, label, images, datasource), one row
            per group.

Each distinct screenshot is written once, as images/<sha256>.png; verl and OpenRLHF rows name it
by absolute path (--image-root DIR: another folder, where the images will be read), jsonl rows by
a path relative to --out. The val split takes the groups of about --val-fraction of the
trajectories (by a hash of the trajectory id; 0: no val file). The label (reward_model.ground_truth)
names the set and group for the reward service. <out>/manifest.json lists every file with its
SHA-256. Screenshots come from the set itself (embedded, or its image files); only a set written
with --images store reads them from the blob store (--store). See docs/shards.md for the trainer
command lines.`

// exportCommand is advantage export.
func exportCommand() service.Command {
	var o ExportOptions
	return service.Command{
		Name: "advantage export", Summary: "write a shard set as candidate rows (jsonl), verl's Parquet or OpenRLHF's JSON Lines",
		Usage: exportUsage, Common: true,
		Flags: func(fs *service.Flags) {
			fs.String(&o.Set, "set", "", "", "the shard set: the folder holding its manifest.json (a folder or s3://bucket/prefix)")
			fs.String(&o.Out, "out", "", "", "the folder to write (created)")
			fs.String(&o.Format, "format", "", string(trainexport.FormatVerl), "jsonl (candidate rows), verl (Parquet) or openrlhf (JSON Lines)")
			fs.String(&o.DataSource, "data-source", "", trainexport.DefaultDataSource, "data source of the rows (\"/<app>\" is appended)")
			fs.Float64(&o.ValFraction, "val-fraction", "", trainexport.DefaultValFraction, "share of the trajectories whose groups form the val split (verl, openrlhf; 0: none)")
			fs.String(&o.ImageRoot, "image-root", "", "", "the folder verl and openrlhf rows name their images in (default: the absolute path of <out>/images)")
		},
		Run: func(ctx context.Context, env *service.Env) error {
			if o.Set == "" || o.Out == "" {
				return service.Usage(fmt.Errorf("--set and --out are required"))
			}
			f := trainexport.Format(o.Format)
			if !slices.Contains(trainexport.Formats, f) {
				return service.Usage(fmt.Errorf("--format %q, want jsonl, verl or openrlhf", o.Format))
			}
			if o.ValFraction < 0 || o.ValFraction >= 1 {
				return service.Usage(fmt.Errorf("--val-fraction %g, want 0 <= f < 1", o.ValFraction))
			}
			set, err := blob.OpenBucket(ctx, o.Set, blob.Config{Logger: env.Log})
			if err != nil {
				return fmt.Errorf("advantage export: --set %s: %w", o.Set, err)
			}
			tmp := env.Common.DataDir + "/tmp"
			if err := os.MkdirAll(tmp, blob.DirPerm); err != nil {
				return err
			}
			store, err := env.Store(ctx)
			if err != nil {
				return err
			}
			m, err := trainexport.Export(ctx, trainexport.Config{Bucket: set, Store: store, Out: o.Out, Format: f,
				DataSource: o.DataSource, ValFraction: o.ValFraction, ImageRoot: o.ImageRoot, TempDir: tmp,
				Version: service.Version().String(), Log: env.Log})
			if err != nil {
				return err
			}
			for _, df := range m.DataFiles() {
				fmt.Fprintf(env.Stdout, "advantage export: %d rows of %s written to %s\n", df.Rows, m.Source.Set, filepath.Join(o.Out, df.Path))
			}
			fmt.Fprintf(env.Stdout, "advantage export: %d images in %s\n", len(m.Files)-len(m.DataFiles()), filepath.Join(o.Out, trainexport.ImageDir))
			return nil
		},
	}
}
