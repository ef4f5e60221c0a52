package nightly

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/infra/service"
)

// The night's shard set is reported where --shards names it: a path as
// given (relative stays relative, as the SFT folder), a file: or file://
// URL as its folder; the counts come from the set's manifest (read from a
// bucket too: TestAcceptNightlyExport).
func TestShardsDir(t *testing.T) {
	abs := t.TempDir()
	if err := os.MkdirAll(filepath.Join(abs, "s1"), 0o755); err != nil {
		t.Fatal(err)
	}
	body := `{"files": [{"path": "a.arrow"}], "counts": {"rows": 7, "trajectories": 3}}`
	if err := os.WriteFile(filepath.Join(abs, "s1", shard.ManifestName), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(mustGetwd(t), abs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		shards, dir string
		rows        int
	}{
		{abs, filepath.Join(abs, "s1"), 7},
		{rel, filepath.Join(rel, "s1"), 7},
		{"file://" + abs, filepath.Join(abs, "s1"), 7},
		{"file:" + abs, filepath.Join(abs, "s1"), 7},
	} {
		j := &job{o: Options{Shards: tc.shards}, env: &service.Env{Common: &service.Common{}}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		sh := j.shards(context.Background(), "s1")
		if sh.Dir != tc.dir || sh.Rows != tc.rows || sh.Set != "s1" {
			t.Errorf("--shards %s: set %q in %q with %d rows, want s1 in %q with %d", tc.shards, sh.Set, sh.Dir, sh.Rows, tc.dir, tc.rows)
		}
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
