package sft

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
)

// BenchmarkBuild builds the dataset of the simulated corpus (JSONL,
// images, Parquet, manifest) from a local blob store, and reports
// sft.samples_per_s: samples written per second of the whole build.
func BenchmarkBuild(b *testing.B) {
	c := sharedCorpus(b)
	ctx := context.Background()
	store, err := blob.Open(ctx, c.StoreDir(), blob.Config{})
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	samples, n := 0, 0
	start := time.Now()
	for b.Loop() {
		m, err := Build(ctx, Config{Store: store, Dir: filepath.Join(dir, fmt.Sprint(n)), Rules: Rules{ValFraction: 0.2, ShardBytes: DefaultShardBytes}})
		if err != nil {
			b.Fatal(err)
		}
		samples += m.Counts.Samples
		n++
	}
	if samples == 0 {
		b.Fatal("no samples")
	}
	b.ReportMetric(float64(samples)/time.Since(start).Seconds(), "sft.samples_per_s")
}
