package advantage

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/archive"
	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/service"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/pkg/traj"
)

// secondRun publishes, on the judged stream of dir, a copy of every judged
// trajectory of the corpus as another run sampled from another planner
// checkpoint, its episodes started shift later; it returns the copies.
func secondRun(t *testing.T, dir string, judged []*traj.Judged, run, checkpoint string, shift time.Duration) []*traj.Judged {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env, b, _ := pipetest.Open(t, &service.Common{DataDir: dir})
	defer env.Close() // the embedded server's data directory is the next command's
	var out []*traj.Judged
	for _, jd := range judged {
		cp := *jd
		tr := &cp.Trajectory
		tr.ID = traj.NewID()
		tr.Run = run
		tr.Models.Planner.Checkpoint = checkpoint
		tr.StartedAt, tr.EndedAt = tr.StartedAt.Add(shift), tr.EndedAt.Add(shift)
		tr.Steps = slices.Clone(tr.Steps)
		for i := range tr.Steps {
			tr.Steps[i].StartedAt = tr.Steps[i].StartedAt.Add(shift)
		}
		cp.Judgement.TrajectoryID = tr.ID
		cp.Judgement.JudgedAt = cp.Judgement.JudgedAt.Add(shift)
		if err := cp.Validate(); err != nil {
			t.Fatalf("copy of %s: %v", jd.Trajectory.ID, err)
		}
		body, err := traj.MarshalCompact(cp)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Publish(ctx, bus.Subject(bus.Judged, tr.Task.App), archive.MessageID(tr.ID, cp.Judgement.Judge.ID()), body, nil); err != nil {
			t.Fatal(err)
		}
		out = append(out, &cp)
	}
	return out
}

// Acceptance 3 (advantage): two runs sampled from different planner
// checkpoints share one judged stream. An output asked for one run, one
// checkpoint or one time holds only that run's rows (read back from its
// shards), its manifest names that run and checkpoint with their row
// counts and the selection, and the other run's trajectories are counted
// as outside the selection, not dead-lettered. A new output without a
// selection is refused with a message that says how to choose, and
// writes nothing.
func TestAcceptSelectsRunsAndCheckpoints(t *testing.T) {
	p := pipetest.Shared(t, smallSpec)
	p.RequireCleanSuccesses(t, 1, 1)
	dir, first := p.Dir, p.Judged
	runA := first[0].Trajectory.Run
	for _, jd := range first {
		// A sim run records the simulated planner's checkpoint.
		if c := jd.Trajectory.Models.Planner.Checkpoint; c != simmodels.DefaultPlannerCheckpoint || jd.Trajectory.Run != runA {
			t.Fatalf("corpus trajectory %s: run %q, checkpoint %q; want %q, %q", jd.Trajectory.ID, jd.Trajectory.Run, c, runA, simmodels.DefaultPlannerCheckpoint)
		}
	}
	const runB, ckptB = "adv-small-b", "/ckpt/grpo/global_step_2/actor/huggingface"
	// The second run's episodes start after the first's last one (and
	// after sinceT, which lies between them).
	var earliest, latest time.Time
	for i, jd := range first {
		if st := jd.Trajectory.StartedAt; i == 0 || st.Before(earliest) {
			earliest = st
		}
		if st := jd.Trajectory.StartedAt; st.After(latest) {
			latest = st
		}
	}
	sinceT := latest.Add(time.Millisecond).UTC()
	second := secondRun(t, dir, first, runB, ckptB, time.Since(earliest)+time.Second)
	since := sinceT.Format(time.RFC3339Nano)

	cases := []struct {
		name      string
		args      []string
		run, ckpt string
		judged    []*traj.Judged
		outside   int
		sel       shard.Selection // the manifest's
	}{
		{"second run", []string{"--runs", runB}, runB, ckptB, second, len(first), shard.Selection{Runs: []string{runB}}},
		{"second checkpoint", []string{"--checkpoints", ckptB}, runB, ckptB, second, len(first), shard.Selection{Checkpoints: []string{ckptB}}},
		{"first run and checkpoint", []string{"--runs", "no-such-run," + runA, "--checkpoints", simmodels.DefaultPlannerCheckpoint}, runA, simmodels.DefaultPlannerCheckpoint, first, len(second),
			shard.Selection{Runs: []string{runA, "no-such-run"}, Checkpoints: []string{simmodels.DefaultPlannerCheckpoint}}},
		{"since", []string{"--since", since}, runB, ckptB, second, len(first), shard.Selection{Since: &sinceT}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "shards")
			printed := advantageCLI(t, dir, append([]string{"--out", out}, tc.args...)...)
			ctx := context.Background()
			bucket, err := blob.OpenBucket(ctx, out, blob.Config{})
			if err != nil {
				t.Fatal(err)
			}
			m := onlyManifest(t, bucket)
			rows := readSet(t, bucket, m, shard.FormatArrow)
			want := expectedKeys(t, tc.judged)
			if len(rows) != len(want) || len(rows) == 0 {
				t.Fatalf("%d rows read back, want %d (and more than 0)", len(rows), len(want))
			}
			for _, r := range rows {
				if r.Run != tc.run || r.PolicyCheckpoint != tc.ckpt {
					t.Fatalf("row of run %q, checkpoint %q in a set asked for %v", r.Run, r.PolicyCheckpoint, tc.args)
				}
			}
			if !slices.Equal(m.Runs, []string{tc.run}) || !slices.Equal(m.Checkpoints, []string{tc.ckpt}) || len(m.Sources) != 1 ||
				m.Sources[0] != (shard.Source{Run: tc.run, Checkpoint: tc.ckpt, Trajectories: len(tc.judged), Rows: len(rows)}) {
				t.Errorf("manifest provenance: runs %q, checkpoints %q, sources %+v; want %s, %s with %d rows of %d trajectories",
					m.Runs, m.Checkpoints, m.Sources, tc.run, tc.ckpt, len(rows), len(tc.judged))
			}
			if got := m.Selection; got == nil || !reflect.DeepEqual(*got, tc.sel) && !(got.Since != nil && tc.sel.Since != nil && got.Since.Equal(*tc.sel.Since)) {
				t.Errorf("manifest selection %+v, want %+v", got, tc.sel)
			}
			for _, w := range []string{"0 dead-lettered", strconv.Itoa(tc.outside) + " outside the selection", "run " + tc.run + ", checkpoint"} {
				if !strings.Contains(printed, w) {
					t.Errorf("advantage printed\n%s\nwithout %q", printed, w)
				}
			}
		})
	}

	t.Run("a new output without a selection", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "shards")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var stdout, stderr bytes.Buffer
		code := service.MainContext(ctx, Command(), []string{"--data", dir, "--log-level", "warn", "--drain", "--out", out}, &stdout, &stderr)
		if code != 2 {
			t.Fatalf("exit %d, want 2 (usage); stderr:\n%s", code, stderr.String())
		}
		for _, w := range []string{"needs a selection", "--runs", "--checkpoints", "--since", "--since all"} {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("stderr %q does not say %q", stderr.String(), w)
			}
		}
		var written []string
		_ = filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				written = append(written, path)
			}
			return nil
		})
		if len(written) > 0 {
			t.Errorf("the refused output holds %q", written)
		}
	})
}
