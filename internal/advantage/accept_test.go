package advantage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/bus"
	"github.com/codapipe/codapipe/internal/judge"
	"github.com/codapipe/codapipe/internal/rollout"
	"github.com/codapipe/codapipe/internal/sched"
	"github.com/codapipe/codapipe/internal/service"
	simtasks "github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/pkg/traj"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// corpus is the judged output of one simulated rollout and judge shared
// by the tests that only read it: each gets a copy of its data directory
// (blob store and embedded NATS server), so one pipeline runs per package
// run instead of one per test (each takes half a minute under -race).
var corpus struct {
	once   sync.Once
	dir    string
	judged []*traj.Judged
	err    error
}

// removeCorpus removes the shared corpus; TestMain calls it at the end.
func removeCorpus() {
	if corpus.dir != "" {
		os.RemoveAll(corpus.dir)
	}
}

// pipeline gives dir (an empty test directory) a copy of the data
// directory of a small simulated rollout (4 tasks × 3 samples, planner
// skill high enough for clean successes) judged by judge --drain, both as
// the commands do; it returns the judged trajectories on the stream.
func pipeline(t *testing.T, dir string) []*traj.Judged {
	t.Helper()
	corpus.once.Do(func() {
		corpus.dir, corpus.err = os.MkdirTemp("", "codapipe-advantage-corpus-*")
		if corpus.err != nil {
			return
		}
		ok := false
		defer func() {
			if !ok && corpus.err == nil {
				corpus.err = errors.New("the shared pipeline failed (see the first test that ran it)")
			}
		}()
		corpus.judged = pipelineOn(t, corpus.dir, "", []string{"S01", "S02", "S03", "S04"}, 3)
		ok = true
	})
	if corpus.err != nil {
		t.Fatal(corpus.err)
	}
	if err := os.CopyFS(dir, os.DirFS(corpus.dir)); err != nil {
		t.Fatalf("copy the shared corpus: %v", err)
	}
	return corpus.judged
}

// pipelineOn is pipeline on the NATS server at natsURL ("" : embedded).
func pipelineOn(t *testing.T, dir, natsURL string, tasks []string, samples int) []*traj.Judged {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tdir := t.TempDir()
	names := make([]string, len(tasks))
	for i, id := range tasks {
		names[i] = "ChimeraX/" + id
	}
	if err := simtasks.Write(tdir, names...); err != nil {
		t.Fatal(err)
	}
	// A good planner (the default's skill is low for ChimeraX), so the run
	// has clean successes whatever order the VMs take the episodes in.
	simCfg := filepath.Join(t.TempDir(), "sim.json")
	if err := os.WriteFile(simCfg, []byte(`{"models": {"planner": {"default_skill": 0.85, "skill": {}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	common := &service.Common{DataDir: dir}
	common.NATS.URL = natsURL
	// The simulated VMs take the episodes in any order, so how many clean
	// successes a run gives varies (with 6 trajectories, none about one
	// time in six): run again, under another run name, until there are
	// two clean successes of two steps or more for the tests to use.
	var judged []*traj.Judged
	for attempt := range 4 {
		seed := int64(3 + attempt)
		run := "adv"
		if attempt > 0 {
			run = fmt.Sprintf("adv%d", attempt+1)
		}
		env := service.NewEnv("rollout", common, quietLog(), nil, nil)
		if _, err := rollout.Execute(ctx, env, rollout.Options{
			App: "ChimeraX", Tasks: tdir, Group: 3, Samples: samples, Run: run, VMs: 4, Sim: true, Seed: &seed,
			TimeScale: 0.0005, Schedule: sched.Dynamic, SimConfig: simCfg,
		}); err != nil {
			env.Close()
			t.Fatalf("rollout: %v", err)
		}
		env.Close()
		var out, errb bytes.Buffer
		if code := service.MainContext(ctx, judge.Command(), []string{"--data", dir, "--nats", natsURL, "--log-level", "warn", "--sim", "--drain", "--max-frames", "4"}, &out, &errb); code != 0 {
			t.Fatalf("judge: exit %d\n%s", code, errb.String())
		}
		judged = judgedOn(t, ctx, common)
		clean := 0
		for _, jd := range judged {
			if jd.Judgement.Decision == traj.CleanSuccess && len(jd.Trajectory.Steps) >= 2 {
				clean++
			}
		}
		if clean >= 2 {
			break
		}
	}
	return judged
}

// judgedOn reads every judged trajectory on the stream of the data
// directory's bus.
func judgedOn(t *testing.T, ctx context.Context, common *service.Common) []*traj.Judged {
	t.Helper()
	env := service.NewEnv("check", common, quietLog(), nil, nil)
	defer env.Close()
	b, err := env.Bus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var judged []*traj.Judged
	err = b.Scan(ctx, bus.Judged, bus.AllSubjects(bus.Judged), time.Time{}, func(s bus.Stored) error {
		body, _, err := b.Get(ctx, bus.Judged, s.Seq)
		if err != nil {
			return err
		}
		jd, err := traj.DecodeJudged(body)
		if err != nil {
			return err
		}
		judged = append(judged, jd)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return judged
}

// advantageCLI runs the advantage command on dir and returns its output.
func advantageCLI(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	full := append([]string{"--data", dir, "--log-level", "warn", "--drain"}, args...)
	if code := service.MainContext(ctx, Command(), full, &out, &errb); code != 0 {
		t.Fatalf("advantage %v: exit %d\n%s", args, code, errb.String())
	}
	return out.String()
}

// expectedRows is what pkg/grpo says the judged trajectories give in step
// mode under the default configuration: rows, groups, kept groups.
func expectedRows(t *testing.T, judged []*traj.Judged) (rows, groups, kept int) {
	t.Helper()
	_, sum := stepExpectation(t, judged)
	return sum.KeptCandidates, sum.Groups, sum.KeptGroups
}

// Acceptance 1 (Go side): after a simulated rollout and judge --drain,
// advantage --drain writes shards and a manifest whose counts agree with
// what pkg/grpo says the judged trajectories produce; every file's
// SHA-256 matches; a second drain writes nothing again.
func TestAcceptAdvantageAfterJudge(t *testing.T) {
	dir := t.TempDir()
	judged := pipeline(t, dir)
	wantRows, wantGroups, _ := expectedRows(t, judged)
	if wantRows == 0 {
		t.Fatal("the run gave no rows: the test needs clean successes")
	}
	out := advantageCLI(t, dir)
	if !strings.Contains(out, fmt.Sprintf("holds %d rows", wantRows)) {
		t.Fatalf("advantage output:\n%s\nwant %d rows", out, wantRows)
	}
	ctx := context.Background()
	bucket, err := blob.OpenBucket(ctx, dir+"/shards", blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := onlyManifest(t, bucket)
	if m.Counts.Rows != wantRows || m.Counts.Groups != wantGroups || m.Counts.Trajectories != len(judged) {
		t.Fatalf("manifest counts %+v; want %d rows, %d groups, %d trajectories", m.Counts, wantRows, wantGroups, len(judged))
	}
	total := 0
	for _, f := range m.Files {
		info, err := bucket.Stat(ctx, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		rc, _, err := bucket.Get(ctx, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if blob.SumSHA256(body) != f.SHA256 || info.Size != f.Bytes {
			t.Errorf("%s: size or SHA-256 differ from the manifest", f.Key)
		}
		total += int(f.Rows)
	}
	if total != wantRows {
		t.Fatalf("files hold %d rows, want %d", total, wantRows)
	}
	t.Logf("first drain:\n%s", out)
	again := advantageCLI(t, dir)
	if !strings.Contains(again, "this run wrote 0 rows") || !strings.Contains(again, fmt.Sprintf("holds %d rows", wantRows)) {
		t.Fatalf("a second drain:\n%s", again)
	}
}
