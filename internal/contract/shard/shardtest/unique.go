package shardtest

import (
	"context"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/infra/blob"
)

// Key is what makes a row of a shard set unique: the candidate of a step
// of a trajectory.
type Key struct {
	TrajectoryID    string
	Step, Candidate int32
}

// SetRows is one shard set found by CheckNoDuplicates.
type SetRows struct {
	Dir      string // the set's folder
	Manifest shard.Manifest
	Rows     map[Key]int // rows read, by key
}

// CheckNoDuplicates reads every shard set under the local folder root —
// each folder holding a manifest.json, its files as the manifest lists
// them, with the Go reader (shard.ReadFile) — and fails the test for each
// (trajectory_id, step, candidate) a set holds more than once, and for a
// set whose rows differ from its manifest's count. It returns the sets
// found, in path order.
func CheckNoDuplicates(t testing.TB, root string) []SetRows {
	t.Helper()
	var sets []SetRows
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != shard.ManifestName {
			return err
		}
		dir := filepath.Dir(path)
		b, err := blob.OpenBucket(context.Background(), dir, blob.Config{})
		if err != nil {
			return err
		}
		m, err := shard.ReadManifest(context.Background(), b, "")
		if err != nil {
			return err
		}
		s := SetRows{Dir: dir, Manifest: m, Rows: map[Key]int{}}
		n := 0
		for _, f := range m.Files {
			err := shard.ReadFile(context.Background(), filepath.Join(dir, filepath.FromSlash(f.Path)), m.Format, func(r *shard.Row) error {
				s.Rows[Key{r.TrajectoryID, r.Step, r.Candidate}]++
				n++
				return nil
			})
			if err != nil {
				return err
			}
		}
		for k, c := range s.Rows {
			if c > 1 {
				t.Errorf("shard set %s: trajectory %s step %d candidate %d is in it %d times", dir, k.TrajectoryID, k.Step, k.Candidate, c)
			}
		}
		if n != m.Counts.Rows {
			t.Errorf("shard set %s: %d rows read, the manifest counts %d", dir, n, m.Counts.Rows)
		}
		sets = append(sets, s)
		return nil
	})
	if err != nil {
		t.Fatalf("read the shard sets under %s: %v", root, err)
	}
	return sets
}
