package advantage

import (
	"context"
	"fmt"
	"os"

	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/service"
	"github.com/codapipe/codapipe/internal/trainexport"
)

// ExportOptions are the settings of advantage export.
type ExportOptions struct {
	Set        string // the shard set's folder (holding manifest.json): a folder or s3://bucket/prefix
	Out        string // the folder written
	Format     string // verl | openrlhf
	DataSource string
}

const exportUsage = `advantage export — write a shard set as a trainer's input

Usage:
  advantage export --set DIR|s3://bucket/prefix --format verl|openrlhf --out DIR [--store URL]

Reads the shard set through its manifest (the folder holding manifest.json) and writes
<out>/train.parquet (verl: prompt, images, data_source, reward_model, extra_info, as verl's
RLHFDataset reads them) or <out>/train.jsonl (OpenRLHF: input, label, images, datasource), and
<out>/manifest.json. One trainer row per shard row; the ids, reward, advantage, group, token ids,
log-probabilities, sampling and provenance go along (verl: extra_info; OpenRLHF: "codapipe").
Screenshots not embedded in the shards are read from the blob store (--store). See docs/shards.md
for the trainer command lines.`

// exportCommand is advantage export.
func exportCommand() service.Command {
	var o ExportOptions
	return service.Command{
		Name: "advantage export", Summary: "write a shard set as verl's Parquet or OpenRLHF's JSON Lines",
		Usage: exportUsage, Common: true,
		Flags: func(fs *service.Flags) {
			fs.String(&o.Set, "set", "", "", "the shard set: the folder holding its manifest.json (a folder or s3://bucket/prefix)")
			fs.String(&o.Out, "out", "", "", "the folder to write (created)")
			fs.String(&o.Format, "format", "", string(trainexport.FormatVerl), "verl (Parquet) or openrlhf (JSON Lines)")
			fs.String(&o.DataSource, "data-source", "", trainexport.DefaultDataSource, "data source of the rows (\"/<app>\" is appended)")
		},
		Run: func(ctx context.Context, env *service.Env) error {
			if o.Set == "" || o.Out == "" {
				return service.Usage(fmt.Errorf("--set and --out are required"))
			}
			f := trainexport.Format(o.Format)
			if f != trainexport.FormatVerl && f != trainexport.FormatOpenRLHF {
				return service.Usage(fmt.Errorf("--format %q, want verl or openrlhf", o.Format))
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
				DataSource: o.DataSource, TempDir: tmp, Log: env.Log})
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "advantage export: %d rows of %s written to %s/%s\n", m.Rows, m.Source.Set, o.Out, trainexport.DataFile(f))
			return nil
		},
	}
}
