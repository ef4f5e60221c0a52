package advantage

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/archive"
	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/bus"
	"github.com/codapipe/codapipe/internal/pipetest"
	"github.com/codapipe/codapipe/internal/service"
	"github.com/codapipe/codapipe/pkg/traj"
)

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
	env := service.NewEnv("check", &service.Common{DataDir: dir}, quietLog(), nil, nil)
	b, err := env.Bus(ctx)
	if err != nil {
		t.Fatal(err)
	}
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
	env = service.NewEnv("check", &service.Common{DataDir: dir}, quietLog(), nil, nil)
	defer env.Close()
	if b, err = env.Bus(ctx); err != nil {
		t.Fatal(err)
	}
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
