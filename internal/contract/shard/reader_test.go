package shard_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/contract/shard/shardtest"
)

// TestReadFile writes rows in both formats and reads them back with the Go
// reader (ReadFile), value by value.
func TestReadFile(t *testing.T) {
	for _, format := range []shard.Format{shard.FormatArrow, shard.FormatParquet} {
		t.Run(string(format), func(t *testing.T) {
			b, dir := localBucket(t)
			w := newWriter(t, shard.Config{Bucket: b, Prefix: "s", Format: format, BatchRows: 16,
				TempDir: t.TempDir(), Meta: testMeta()})
			rows := append(edgeRows(), manyRows(50, 4)...)
			rows = append(rows, imageRows(3, 1000, 5)...)
			files := writeRolling(t, w, rows)
			var got []shard.Row
			for _, f := range files {
				err := shard.ReadFile(context.Background(), filepath.Join(dir, filepath.FromSlash(f.Key)), format, func(r *shard.Row) error {
					got = append(got, *r)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			for i, d := range shardtest.Diff(rows, got) {
				if i == 20 {
					break
				}
				t.Error(d)
			}
		})
	}
}
