package judge

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
)

// judge --runs judges only those runs' trajectories, on a consumer of its
// own: another run's trajectories are passed over there and stay for the
// other judge consumers of the same version — the one of the other run,
// and the one without --runs, which judges nothing twice (the archive has
// every judgement) and leaves one judged message per trajectory.
func TestAcceptRunsJudgesOnlyThoseRuns(t *testing.T) {
	dir := t.TempDir()
	a := pipetest.Run(t, dir, pipetest.Spec{App: acceptApp, Tasks: []string{"S01", "S02"}, Samples: 2, Group: -1, Run: "night-a"}).Trajectories
	func() {
		env, b, _ := pipetest.Open(t, &service.Common{DataDir: dir})
		defer env.Close() // the embedded server's data directory is the next command's
		republish(t, b, a, "night-b", len(a))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	judgeDrain := func(args ...string) Stats {
		t.Helper()
		summary := filepath.Join(t.TempDir(), "judge.json")
		var out, errb bytes.Buffer
		full := append([]string{"--data", dir, "--log-level", "warn", "--sim", "--drain", "--max-frames", fmt.Sprint(testFrames), "--summary", summary}, args...)
		if code := service.MainContext(ctx, Command(), full, &out, &errb); code != 0 {
			t.Fatalf("judge %v: exit %d\n%s", args, code, errb.String())
		}
		var st Stats
		pipetest.ReadJSON(t, summary, &st)
		return st
	}
	n := len(a)
	for _, c := range []struct {
		name                           string
		args                           []string
		judged, republished, otherRuns int
	}{
		{"first run", []string{"--runs", "night-a"}, n, 0, n},
		{"first run again", []string{"--runs", "night-a"}, 0, 0, 0},
		{"second run", []string{"--runs", "night-b,night-b"}, n, 0, n},
		// Every run: judged before, so republished from the archive.
		{"every run", nil, 2 * n, 2 * n, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := judgeDrain(c.args...)
			if st.Trajectories() != c.judged || st.Republished != c.republished || st.OtherRuns != c.otherRuns || st.DeadLettered != 0 {
				t.Errorf("judge %v: %d judgements, %d republished, %d of other runs, %d dead-lettered; want %d, %d, %d",
					c.args, st.Trajectories(), st.Republished, st.OtherRuns, st.DeadLettered, c.judged, c.republished, c.otherRuns)
			}
		})
	}
	env, b, _ := pipetest.Open(t, &service.Common{DataDir: dir})
	defer env.Close()
	docs, _ := judgedOn(t, b)
	seen := map[string]bool{}
	for _, d := range docs {
		if seen[d.Trajectory.ID] {
			t.Errorf("trajectory %s has two judged messages", d.Trajectory.ID)
		}
		seen[d.Trajectory.ID] = true
	}
	if len(seen) != 2*n {
		t.Errorf("%d trajectories judged, want %d", len(seen), 2*n)
	}
	if DurableName("v", nil, "night-a") == DurableName("v", nil) || DurableName("v", nil, "night-a") == DurableName("v", nil, "night-b") {
		t.Error("a run selection shares a consumer name")
	}
}
