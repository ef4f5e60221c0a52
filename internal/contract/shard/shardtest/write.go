package shardtest

import (
	"context"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/shard"
)

// WriteFiles writes each part of rows as one shard file of the set cfg
// describes (cfg.Bucket, Prefix, Format, Meta, Images), as advantage does:
// a part's images stored first (unless embedded), then its rows, then the
// commit. It returns the files, for the caller's manifest.
func WriteFiles(t testing.TB, cfg shard.Config, parts ...[]shard.Row) []shard.File {
	t.Helper()
	ctx := context.Background()
	if cfg.TempDir == "" {
		cfg.TempDir = t.TempDir()
	}
	w, err := shard.NewWriter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var files []shard.File
	for _, rows := range parts {
		if cfg.Images != shard.ImagesEmbed {
			if err := w.PutImages(ctx, rows); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Add(rows); err != nil {
			t.Fatal(err)
		}
		f, err := w.Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// WriteSet is WriteFiles followed by the set's manifest (shard.NewManifest
// of the files), and returns the manifest.
func WriteSet(t testing.TB, cfg shard.Config, parts ...[]shard.Row) shard.Manifest {
	t.Helper()
	m := shard.NewManifest(cfg.Prefix, cfg.Format, cfg.Meta, WriteFiles(t, cfg, parts...))
	if err := shard.WriteManifest(context.Background(), cfg.Bucket, cfg.Prefix, m); err != nil {
		t.Fatal(err)
	}
	return m
}
