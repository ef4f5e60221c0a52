package pipetest_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/stage/judge"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/pkg/traj"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pipetest.Cleanup()
	os.Exit(code)
}

// content is what a trajectory says about the episode, without what
// differs between two runs of it by design: the VM it ran on, the times,
// the model endpoints' URLs (random ports) and the task file's path. The ids are the same: the
// fixture starts both runs at Spec.Start.
func content(t *testing.T, tr *traj.Trajectory) string {
	t.Helper()
	cp := *tr
	cp.ID, cp.VM = "", ""
	cp.Models.Planner.Endpoint, cp.Models.Executor.Endpoint = "", "" // random ports
	cp.Task.Source = ""                                              // the task file, in a temporary folder
	cp.StartedAt, cp.EndedAt = time.Time{}, time.Time{}
	cp.Steps = append([]traj.Step(nil), tr.Steps...)
	for i := range cp.Steps {
		s := &cp.Steps[i]
		s.Timings, s.StartedAt = traj.Timings{}, time.Time{}
		s.Candidates = append([]traj.Candidate(nil), s.Candidates...)
		for j := range s.Candidates {
			s.Candidates[j].PlanMS, s.Candidates[j].ExecMS = 0, 0
		}
	}
	b, err := json.MarshalIndent(&cp, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAcceptSameSpecSameCorpus: one Spec run twice — the second time on half
// the VMs, so other VMs take other episodes in another order — gives the
// same trajectories and the same judge decisions.
func TestAcceptSameSpecSameCorpus(t *testing.T) {
	jc := judge.Command()
	spec := pipetest.Spec{Tasks: []string{"S01", "S02", "S03"}, Samples: 2, Seed: 7, Judge: &jc,
		Sim: `{"models": {"planner": {"default_skill": 0.8, "skill": {}}}}`}
	a := pipetest.Run(t, t.TempDir(), spec)
	spec.VMs = 2
	b := pipetest.Run(t, t.TempDir(), spec)
	if len(a.Trajectories) != 6 || len(b.Trajectories) != 6 {
		t.Fatalf("%d and %d trajectories, want 6 each", len(a.Trajectories), len(b.Trajectories))
	}
	steps := 0
	for i := range a.Trajectories {
		ca, cb := content(t, a.Trajectories[i]), content(t, b.Trajectories[i])
		if ca != cb {
			t.Errorf("episode %s/%d differs between the runs:\n%s", a.Trajectories[i].Task.ID, a.Trajectories[i].Sample, diffLines(ca, cb))
		}
		steps += len(a.Trajectories[i].Steps)
	}
	if len(a.Judged) != len(a.Trajectories) || len(b.Judged) != len(b.Trajectories) {
		t.Fatalf("%d and %d judged, want every trajectory judged", len(a.Judged), len(b.Judged))
	}
	var decisions []string
	for i := range a.Judged {
		da, db := a.Judged[i].Judgement.Decision, b.Judged[i].Judgement.Decision
		if da != db {
			t.Errorf("episode %s/%d: decision %s, then %s", a.Judged[i].Trajectory.Task.ID, a.Judged[i].Trajectory.Sample, da, db)
		}
		decisions = append(decisions, string(da))
	}
	t.Logf("%d trajectories, %d steps, decisions %v", len(a.Trajectories), steps, decisions)
}

// TestSharedGivesEachTestItsOwnCopy: two tests' copies of one shared run
// are distinct folders whose streams read back the same trajectories, as
// values of their own: changing one copy changes nothing in the other.
func TestSharedGivesEachTestItsOwnCopy(t *testing.T) {
	spec := pipetest.Spec{Tasks: []string{"S01"}, Samples: 1, Group: -1}
	a := pipetest.Shared(t, spec)
	b := pipetest.Shared(t, spec)
	if a.Dir == b.Dir {
		t.Fatal("two calls share one data directory")
	}
	if len(a.Trajectories) != 1 || len(b.Trajectories) != 1 || content(t, a.Trajectories[0]) != content(t, b.Trajectories[0]) {
		t.Fatalf("the copies hold %d and %d trajectories, or different ones", len(a.Trajectories), len(b.Trajectories))
	}
	id := b.Trajectories[0].ID
	a.Trajectories[0].ID = "changed"
	if err := os.RemoveAll(filepath.Join(a.Dir, "blobs")); err != nil {
		t.Fatal(err)
	}
	if b.Trajectories[0].ID != id {
		t.Fatal("changing one copy's trajectory changed the other's")
	}
	if _, err := os.Stat(filepath.Join(b.Dir, "blobs")); err != nil {
		t.Fatalf("removing one copy's store touched the other: %v", err)
	}
}

// diffLines shows the first lines where a and b differ.
func diffLines(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := 0; i < max(len(la), len(lb)) && len(out) < 10; i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			out = append(out, fmt.Sprintf("line %d:\n  - %s\n  + %s", i+1, x, y))
		}
	}
	return strings.Join(out, "\n")
}
