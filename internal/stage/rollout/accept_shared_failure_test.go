package rollout

import (
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/stage/sched"
	"github.com/codapipe/codapipe/internal/testkit/tmpfs"
)

// Runs burned by infrastructure (issue 40): a failure every VM shares is
// not an episode's outcome. A planner URL that is wrong (every request
// answers 404) and a blob store that is full (a 64 KB tmpfs) each stop
// the run at the first episode that meets it: no episode is recorded as
// an environment error or published, the error and the summary say what
// to fix, and the same run started again once it is fixed runs every
// episode.
func TestAcceptSharedFailuresStopTheRun(t *testing.T) {
	t.Parallel()
	const K = 2
	taskIDs := []string{"S01", "S02"}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string, cfg *acceptCfg) (fix func())
		want  string
	}{
		{"a planner URL that answers 404", func(t *testing.T, dir string, cfg *acceptCfg) func() {
			// With the checkpoint given, nothing asks the endpoint before
			// the episodes do (its /v1/models would fail at start).
			cfg.Planner.Checkpoint = "sim-step-0"
			cfg.simPlanner = func(u string) string { return u + "/wrong" }
			return func() { cfg.simPlanner = nil }
		}, "a model endpoint refuses every request"},
		{"a full blob store", func(t *testing.T, dir string, cfg *acceptCfg) func() {
			return tmpfs.Mount(t, filepath.Join(dir, "blobs"), "64k")
		}, "the blob store refuses writes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			log, logs := newLogCapture(slog.LevelInfo)
			cfg := acceptConfig(dir, simTaskDir(t, acceptApp, taskIDs...), "shared-"+strings.Fields(tc.name)[1], log)
			cfg.Samples, cfg.VMs = K, 2
			fix := tc.setup(t, dir, &cfg)
			sum, err := runWithin(t, 2*time.Minute, cfg)
			var se *sched.SharedError
			if !errors.As(err, &se) || !errors.Is(err, sched.ErrShared) || !strings.Contains(err.Error(), tc.want) {
				logs.dump(t, slog.LevelWarn)
				t.Fatalf("Run: %v; want a SharedError saying %q", err, tc.want)
			}
			if sum == nil || sum.EnvErrors != 0 || sum.Left != len(taskIDs)*K || !strings.Contains(sum.Stopped, tc.want) {
				t.Fatalf("summary of the stopped run: %+v", sum)
			}
			var out strings.Builder
			sum.Print(&out)
			if !strings.Contains(out.String(), "run the same command again") {
				t.Errorf("the summary does not say how to finish the run:\n%s", out.String())
			}
			fix()
			sum2 := runOK(t, cfg, logs)
			if sum2.Episodes != len(taskIDs)*K || sum2.EnvErrors != 0 {
				t.Errorf("the run started again after the fix ran %d episodes (%d env errors), want %d (0)", sum2.Episodes, sum2.EnvErrors, len(taskIDs)*K)
			}
			publishedEachOnce(t, dir, len(taskIDs)*K)
		})
	}
}
