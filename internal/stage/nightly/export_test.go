package nightly

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/service"
	simtasks "github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/internal/stage/sft"
	"github.com/codapipe/codapipe/internal/testkit/miniotest"
)

// TestAcceptNightlyExport: with --export, the night's SFT set ends up in
// the bucket (every file with its SHA-256, the manifest too), and the
// summary says where; with the shard sets in the bucket too (--shards
// s3://…), the nightly summary, rollout's and the run report agree on the
// run's figures.
func TestAcceptNightlyExport(t *testing.T) {
	srv := miniotest.Start(t)
	srv.Setenv(t)
	dir := t.TempDir()
	tasks := filepath.Join(t.TempDir(), "tasks")
	if err := simtasks.Write(tasks, "ChimeraX/S03", "ChimeraX/S12"); err != nil {
		t.Fatal(err)
	}
	dst := srv.URL("sft/night")
	shards := srv.URL("shards")
	o := Options{Apps: []string{"ChimeraX"}, Night: "export", Group: 1, Samples: 2, Sim: true, VMs: 2, Seed: 1,
		TimeScale: 0.0005, Workers: true, RolloutArgs: "--tasks " + tasks, Export: dst, Shards: shards,
		JudgeArgs: "--max-frames 4 --rule majority"} // clean successes, so the set has rows
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	common := &service.Common{DataDir: dir, LogLevel: "warn", LogFormat: "text"}
	env := service.NewEnv("nightly", common, slog.New(slog.DiscardHandler), io.Discard, io.Discard)
	defer env.Close()
	s, err := Execute(ctx, env, o)
	if err != nil {
		t.Fatalf("night: %v", err)
	}
	if s.Exported != dst || s.SFT == nil {
		t.Fatalf("summary: exported %q, SFT %+v; want %q and a set", s.Exported, s.SFT, dst)
	}
	// Issue 36, acceptance 5, with the shard set in the bucket.
	env.Close() // the report opens the data folder's NATS server again
	checkFiguresAgree(t, dir, shards, s.Apps[0])
	m, err := sft.ReadManifest(s.SFT.Dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := blob.OpenBucket(ctx, dst, srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(slices.Clone(m.Files), sft.File{Path: sft.ManifestName}) {
		info, err := b.Stat(ctx, f.Path)
		if err != nil {
			t.Errorf("%s: %v", f.Path, err)
			continue
		}
		if f.SHA256 != "" && (info.Size != f.Bytes || info.SHA256 != f.SHA256) {
			t.Errorf("%s: %d bytes, SHA-256 %s; want %d, %s", f.Path, info.Size, info.SHA256, f.Bytes, f.SHA256)
		}
	}
}
