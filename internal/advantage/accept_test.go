package advantage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/archive"
	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/bus"
	"github.com/codapipe/codapipe/internal/judge"
	"github.com/codapipe/codapipe/internal/pipetest"
	"github.com/codapipe/codapipe/internal/service"
	"github.com/codapipe/codapipe/pkg/traj"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// judgeCommand judges the simulated corpora of the tests.
var judgeCommand = judge.Command()

// corpusSpec is the judged simulated run the tests read: four ChimeraX
// tasks three times each, G = 3, a good planner (the default's skill is
// low for ChimeraX). Seeded, so always the same corpus; it holds the clean
// successes of two steps or more the tests need (corpus checks).
var corpusSpec = pipetest.Spec{
	Tasks: []string{"S01", "S02", "S03", "S04"}, Samples: 3, Group: 3, Seed: 3, Run: "adv",
	Sim: `{"models": {"planner": {"default_skill": 0.85, "skill": {}}}}`, Judge: &judgeCommand,
}

// smallSpec is a judged corpus small enough for the tests that run under
// the race detector (make test runs TestAccept* without it): two tasks
// twice, a very good planner and an accurate judge, so it still holds
// clean successes.
var smallSpec = pipetest.Spec{
	Tasks: []string{"S01", "S02"}, Samples: 2, Group: 2, Seed: 3, Run: "adv-small", Judge: &judgeCommand,
	Sim: `{"models": {"planner": {"default_skill": 0.95, "skill": {}},
		"judge": {"recall": 0.97, "false_positive_rate": 0.03, "low_res": {"recall": 0.97, "false_positive_rate": 0.03}, "vote_correlation": 0.9}}}`,
}

// corpus returns the test's own copy of the shared judged corpus: its
// data directory (blob store and embedded NATS server) and the judged
// trajectories on the stream.
func corpus(t *testing.T) (dir string, judged []*traj.Judged) {
	t.Helper()
	p := pipetest.Shared(t, corpusSpec)
	p.RequireCleanSuccesses(t, 2, 2)
	return p.Dir, p.Judged
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
	dir, judged := corpus(t)
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
		body, err := blob.ReadAll(ctx, bucket, f.Key)
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

// Bad input: a message that is not a judged trajectory, a judged
// trajectory whose screenshot is missing from the blob store, one whose
// prompt set cannot be found, and one whose groups cannot be formed (its
// decision contradicts its verdict) are each dead-lettered with a
// reason naming the problem; every good trajectory's rows are written.
func TestAcceptBadInputDeadLettered(t *testing.T) {
	dir, judged := corpus(t)
	var good *traj.Judged
	for _, jd := range judged {
		if jd.Judgement.Decision == traj.CleanSuccess && len(jd.Trajectory.Steps) >= 2 {
			good = jd
			break
		}
	}
	if good == nil {
		t.Fatal("the run gave no clean success of two steps or more: the test needs one")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, b, _ := pipetest.Open(t, &service.Common{DataDir: dir})
	subject := bus.Subject(bus.Judged, good.Trajectory.Task.App)
	publish := func(id string, body []byte) {
		t.Helper()
		if _, err := b.Publish(ctx, subject, id, body, nil); err != nil {
			t.Fatal(err)
		}
	}
	variant := func(change func(*traj.Judged)) (string, *traj.Judged) {
		cp := *good
		cp.Trajectory.ID = traj.NewID()
		cp.Judgement.TrajectoryID = cp.Trajectory.ID
		cp.Trajectory.Steps = append([]traj.Step(nil), good.Trajectory.Steps...)
		for i := range cp.Trajectory.Steps {
			cp.Trajectory.Steps[i].Candidates = append([]traj.Candidate(nil), good.Trajectory.Steps[i].Candidates...)
		}
		change(&cp)
		body, err := traj.MarshalCompact(cp)
		if err != nil {
			t.Fatal(err)
		}
		id := archive.MessageID(cp.Trajectory.ID, cp.Judgement.Judge.ID())
		publish(id, body)
		return id, &cp
	}
	gone := strings.Repeat("ab", 32)
	noPrompts := strings.Repeat("cd", 32)
	publish("corrupt-1", []byte(`{"schema_version": 4, "judgement": `))
	shotID, _ := variant(func(jd *traj.Judged) { jd.Trajectory.Steps[1].Screenshot.SHA256 = gone })
	promptID, _ := variant(func(jd *traj.Judged) { jd.Trajectory.Prompts = noPrompts })
	// A judgement whose decision (clean success) contradicts its verdict.
	malformedID, _ := variant(func(jd *traj.Judged) {
		v := *jd.Judgement.Verdict
		v.Correctness = false
		jd.Judgement.Verdict = &v
	})
	_, okCopy := variant(func(*traj.Judged) {})

	env.Close() // the embedded server's data directory is the service's next
	out := advantageCLI(t, dir)
	_, b, _ = pipetest.Open(t, &service.Common{DataDir: dir})
	t.Logf("%s", out)
	if !strings.Contains(out, "4 dead-lettered") {
		t.Errorf("advantage output does not report 4 dead letters:\n%s", out)
	}
	pipetest.CheckDeadLetters(t, b, map[string][]string{
		"corrupt-1": {"not a valid judged trajectory"},
		shotID:      {"screenshot", gone, "missing"},
		promptID:    {"prompt set", noPrompts},
		malformedID: {"judgement.decision", "verdict says"},
	})

	// Every good trajectory's rows are written, the bad ones' are not.
	bucket, err := blob.OpenBucket(ctx, filepath.Join(dir, "shards"), blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := onlyManifest(t, bucket)
	want := expectedKeys(t, append(append([]*traj.Judged(nil), judged...), okCopy))
	got := readKeys(t, bucket, m)
	for k := range want {
		if got[k] != 1 {
			t.Errorf("row %v written %d times, want once", k, got[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d distinct rows written, want %d", len(got), len(want))
	}
}
