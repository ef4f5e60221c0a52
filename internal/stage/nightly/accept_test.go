package nightly

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/contract/shard/shardtest"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/service"
	simtasks "github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/internal/stage/sft"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/pkg/traj"
)

// TestAcceptNightlyTwice runs a two-app night on the simulator, with the
// workers beside the rollouts, and then the same night again: the second
// invocation does no new work, and the counts agree across the stages —
// every trajectory judged once, every judged trajectory's rows in the one
// shard set of its run (a clean success's steps, G rows each; nothing of
// the others), every clean success in the SFT set once with its steps.
// A third invocation with other judge arguments (another judge version)
// judges each app's own run again, and only it, writes no row (no set
// holds a trajectory, step and candidate twice), and its summary names
// the skipped judgements and why.
func TestAcceptNightlyTwice(t *testing.T) {
	const group, samples, perApp = 2, 2, 2 // perApp: the tasks of each app below
	apps := []string{"ChimeraX", "KAlgebra"}
	dir := t.TempDir()
	tasks := filepath.Join(t.TempDir(), "tasks")
	// Tasks with clean successes in the simulator's defaults (seed 1).
	names := []string{"ChimeraX/S03", "ChimeraX/S12", "KAlgebra/S01", "KAlgebra/S02"}
	if raceEnabled {
		apps, names = apps[:1], names[:perApp]
	}
	if err := simtasks.Write(tasks, names...); err != nil {
		t.Fatal(err)
	}
	o := Options{Apps: apps, Night: "2026-11-26", Group: group, Samples: samples, Sim: true, VMs: 4, Seed: 1,
		TimeScale: 0.0005, Workers: true, RolloutArgs: "--tasks " + tasks,
		// A majority of votes: the simulated judge then finds clean
		// successes in this small night, so the sets have rows.
		JudgeArgs: "--max-frames 4 --rule majority"}
	var stderr lockedBuffer // the first night's log, at info
	night := func() *Summary {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		common := &service.Common{DataDir: dir, LogLevel: "warn", LogFormat: "text"}
		common.NATS.Timeout = 10 * time.Second
		var errOut io.Writer = io.Discard
		if stderr.Len() == 0 {
			common.LogLevel, errOut = "info", &stderr
		}
		env := service.NewEnv("nightly", common, slog.New(slog.DiscardHandler), io.Discard, errOut)
		defer env.Close()
		s, err := Execute(ctx, env, o)
		if err != nil {
			t.Fatalf("night: %v", err)
		}
		return s
	}

	first := night()
	// Issue 36, acceptance 3: a clean night logs no WARN or ERROR line
	// and no line per episode at info.
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, "WARN") || strings.Contains(l, "ERROR") || strings.Contains(l, "episode taken") || strings.Contains(l, "episode done") {
			t.Errorf("first night logged: %s", l)
		}
	}
	if !strings.Contains(stderr.String(), " planned ") {
		t.Errorf("the first night's log at info has no \"planned\" line of rollout:\n%s", stderr.String())
	}
	checkVersionRecorded(t, dir, o.Night, first)
	want := perApp * samples
	for _, a := range first.Apps {
		if a.New.Episodes != want || a.New.Judgements != want {
			t.Errorf("%s: first night: %d episodes, %d judgements, want %d each", a.App, a.New.Episodes, a.New.Judgements, want)
		}
	}
	if first.SFT == nil || !first.SFT.Changed {
		t.Fatalf("first night: SFT set %+v, want one built", first.SFT)
	}

	second := night()
	if second.New != (Work{}) {
		t.Errorf("second night did new work: %+v", second.New)
	}
	if second.SFT == nil || second.SFT.Changed {
		t.Errorf("second night: SFT set %+v, want the same manifest as the first", second.SFT)
	}
	for i, a := range second.Apps {
		if a.Shards == nil || first.Apps[i].Shards == nil || *a.Shards != *first.Apps[i].Shards {
			t.Errorf("%s: shard set %+v after the second night, %+v after the first", a.App, a.Shards, first.Apps[i].Shards)
		}
	}

	raw, clean, cleanSteps, samplesN := checkCounts(t, dir, second, group, len(apps)*want)
	t.Logf("%d trajectories, %d clean successes (%d steps), %d SFT samples, rows %d+%d", raw, clean, cleanSteps, samplesN, first.New.Rows, second.New.Rows)
	if first.New.Rows == 0 {
		t.Fatal("the night wrote no rows: the re-judged night below needs them")
	}

	// The night again with other judge arguments: another judge version.
	o.JudgeArgs = "--max-frames 4 --rule majority --votes 3"
	third := night()
	for i, a := range third.Apps {
		// Its own run only, whatever the other apps' runs on the stream.
		if a.New.Judgements != want || a.New.Rows != 0 || a.New.Episodes != 0 {
			t.Errorf("%s: night with other judge arguments: %+v, want %d judgements of its run and nothing else new", a.App, a.New, want)
		}
		if a.Shards == nil || a.Shards.JudgeVersion == "" || a.Shards.JudgeVersion != first.Apps[i].Shards.JudgeVersion || a.Shards.Rows != first.Apps[i].Shards.Rows {
			t.Errorf("%s: shard set %+v after the re-judged night, %+v before", a.App, a.Shards, first.Apps[i].Shards)
			continue
		}
		note := fmt.Sprintf("%d judgements of judge version ", want)
		bound := "the set is bound to judge version " + a.Shards.JudgeVersion
		if len(a.Skipped) != 1 || !strings.HasPrefix(a.Skipped[0], note) || !strings.Contains(a.Skipped[0], bound) {
			t.Errorf("%s: the summary says skipped %q, want one note %q… %q", a.App, a.Skipped, note, bound)
		}
	}
	var printed bytes.Buffer
	third.Print(&printed)
	if !strings.Contains(printed.String(), "skipped: ") || !strings.Contains(printed.String(), "judgements of judge version") {
		t.Errorf("the night's printed summary names no skipped judgements:\n%s", printed.String())
	}
	written := shardtest.CheckNoDuplicates(t, filepath.Join(dir, "shards"))
	if len(written) != len(apps) {
		t.Errorf("%d shard sets after the re-judged night, want %d", len(written), len(apps))
	}
	// The SFT set keeps the judge version the shards have (the first).
	if m, err := sft.ReadManifest(third.SFT.Dir); err != nil {
		t.Error(err)
	} else if v := first.Apps[0].Shards.JudgeVersion; len(m.JudgeVersions) > 1 || m.JudgeVersion != v || third.SFT.JudgeVersion != v || len(third.SFT.OtherJudgeVersions) != 1 {
		t.Errorf("the SFT set: judge version %q (summary %q), versions kept %v, others %v; want %s only", m.JudgeVersion, third.SFT.JudgeVersion, m.JudgeVersions, third.SFT.OtherJudgeVersions, v)
	}
}

// checkCounts checks that the stages' counts of a finished night agree,
// read back from the streams and the files in dir: n trajectories of the
// night's runs on the stream, each judged once; every judged
// trajectory's rows in its run's shard set (a clean success's steps × G,
// nothing of the others); the SFT set holds the night's runs only, every
// clean success once with its steps. It returns the trajectories, the
// clean successes, their steps and the SFT samples.
func checkCounts(t *testing.T, dir string, second *Summary, group, n int) (trajectories, clean, cleanSteps, samplesN int) {
	t.Helper()
	// The stages' counts agree, read back from the streams and the files.
	raw, judged := readStreams(t, dir)
	runs := map[string]string{} // run → shard set folder
	for _, a := range second.Apps {
		runs[a.Run] = a.Shards.Dir
	}
	ids := map[string]*traj.Trajectory{}
	for _, tr := range raw {
		if _, ok := runs[tr.Run]; !ok {
			t.Errorf("raw trajectory of run %q, not the night's", tr.Run)
		}
		ids[tr.ID] = tr
	}
	if len(raw) != n || len(ids) != len(raw) {
		t.Errorf("%d raw trajectories (%d ids), want %d", len(raw), len(ids), n)
	}
	judgedOnce := map[string]*traj.Judged{}
	for _, jd := range judged {
		if judgedOnce[jd.Trajectory.ID] != nil {
			t.Errorf("trajectory %s judged twice", jd.Trajectory.ID)
		}
		judgedOnce[jd.Trajectory.ID] = jd
	}
	for id := range ids {
		if judgedOnce[id] == nil {
			t.Errorf("trajectory %s not judged", id)
		}
	}

	// Rows: every row in its run's set, a clean success's steps × G.
	rows := map[string]int{} // trajectory → rows
	sets, err := filepath.Glob(filepath.Join(dir, "shards", "*", shard.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != len(second.Apps) {
		t.Errorf("%d shard sets, want one per app (%d)", len(sets), len(second.Apps))
	}
	for _, mf := range sets {
		setDir := filepath.Dir(mf)
		var m shard.Manifest
		if err := service.ReadJSON(mf, &m); err != nil {
			t.Fatal(err)
		}
		for _, f := range m.Files {
			err := shard.ReadFile(context.Background(), filepath.Join(setDir, f.Path), m.Format, func(r *shard.Row) error {
				if runs[r.Run] != setDir {
					t.Errorf("row of run %s in set %s, want its run's set %s", r.Run, setDir, runs[r.Run])
				}
				rows[r.TrajectoryID]++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	for id, jd := range judgedOnce {
		want := 0
		if jd.Judgement.Decision == traj.CleanSuccess {
			clean++
			cleanSteps += len(jd.Trajectory.Steps)
			want = len(jd.Trajectory.Steps) * group
		}
		if rows[id] != want {
			t.Errorf("trajectory %s (%s, %d steps): %d rows, want %d", id, jd.Judgement.Decision, len(jd.Trajectory.Steps), rows[id], want)
		}
	}

	// SFT: the night's runs only, every clean success once with its steps.
	m, err := sft.ReadManifest(second.SFT.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for run := range m.Runs {
		if _, ok := runs[run]; !ok {
			t.Errorf("SFT set holds run %q, not the night's", run)
		}
	}
	for _, sp := range m.Splits {
		samplesN += sp.Samples
	}
	if got := m.Counts.Decisions[string(traj.CleanSuccess)]; got != clean {
		t.Errorf("SFT set saw %d clean successes, the judged stream has %d", got, clean)
	}
	if m.Counts.Duplicates == 0 && m.Counts.Skipped == 0 && samplesN != cleanSteps {
		t.Errorf("SFT set: %d samples, the clean successes have %d steps", samplesN, cleanSteps)
	}
	if samplesN > cleanSteps {
		t.Errorf("SFT set: %d samples, more than the clean successes' %d steps", samplesN, cleanSteps)
	}
	return len(raw), clean, cleanSteps, samplesN
}

// checkVersionRecorded: the night's summary and its rollouts' summaries
// (rollout, judge, advantage, sftpack: <data>/nightly/<night>/*.json), its
// shard sets' manifests and its SFT set's manifest record the build that
// wrote them (service.Version).
func checkVersionRecorded(t *testing.T, dir, night string, s *Summary) {
	t.Helper()
	ver := service.Version().String()
	var doc map[string]any
	if err := service.ReadJSON(s.SummaryFile, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["codapipe_version"] != ver {
		t.Errorf("%s: codapipe_version %v, want %q", s.SummaryFile, doc["codapipe_version"], ver)
	}
	for _, a := range s.Apps {
		if a.Rollout == nil || a.Rollout.CodapipeVersion != ver {
			t.Errorf("%s: the rollout summary's codapipe_version is not %q: %+v", a.App, ver, a.Rollout)
		}
	}
	for _, a := range s.Apps {
		var m shard.Manifest
		if err := service.ReadJSON(filepath.Join(a.Shards.Dir, shard.ManifestName), &m); err != nil {
			t.Fatal(err)
		}
		if m.Meta.Version != ver {
			t.Errorf("%s: shard manifest codapipe_version %q, want %q", a.App, m.Meta.Version, ver)
		}
	}
	if m, err := sft.ReadManifest(s.SFT.Dir); err != nil {
		t.Error(err)
	} else if m.Producer != "codapipe sftpack "+ver {
		t.Errorf("SFT manifest producer %q, want codapipe sftpack %s", m.Producer, ver)
	}
}

// readStream reads every message of the stream of kind k and decodes it.
func readStream[T any](ctx context.Context, t *testing.T, b *bus.Bus, k bus.Kind, decode func([]byte) (T, error)) []T {
	t.Helper()
	msgs, err := pipetest.ReadStream(ctx, b, k, bus.AllSubjects(k))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]T, 0, len(msgs))
	for _, m := range msgs {
		v, err := decode(m.Body)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// readStreams reads the raw and judged trajectories back.
func readStreams(t *testing.T, dir string) ([]*traj.Trajectory, []*traj.Judged) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := service.NewEnv("test", &service.Common{DataDir: dir}, slog.New(slog.DiscardHandler), nil, nil)
	defer env.Close()
	b, err := env.Bus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw := readStream(ctx, t, b, bus.Raw, traj.DecodeTrajectory)
	judged := readStream(ctx, t, b, bus.Judged, traj.DecodeJudged)
	slices.SortFunc(judged, func(a, b *traj.Judged) int { return strings.Compare(a.Trajectory.ID, b.Trajectory.ID) })
	return raw, judged
}

// lockedBuffer is a bytes.Buffer the stages of a night write to from
// several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
