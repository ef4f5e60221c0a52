package rollout

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/codapipe/codapipe/pkg/traj"
)

// A seeded simulated rollout is reproducible whatever VM takes which
// episode: the same seeded world run with four VMs and then with two over
// the same episodes publishes trajectories of the same content —
// screenshots, plans, groundings, executed code, outcomes and evaluations
// (ids, VMs and timings aside). The simulated machines of a world look the
// same, as real VMs reverted to one snapshot do, and the seeded model
// answers depend only on what a request holds.
func TestAcceptSeededRunDoesNotDependOnTheVMs(t *testing.T) {
	tasks := simTaskDir(t, "ChimeraX", "S01", "S02", "S03", "S04")
	// A good planner, so that episodes take several steps and differ.
	simCfg := writeSimConfig(t, `{"models": {"planner": {"default_skill": 0.85, "skill": {}}}}`)
	var runs []map[string]string
	for _, vms := range []int{4, 2} {
		dir := t.TempDir()
		log, logs := newLogCapture(slog.LevelInfo)
		cfg := acceptConfig(dir, tasks, fmt.Sprintf("determinism-%d", vms), log)
		seed := int64(3)
		cfg.App, cfg.Group, cfg.Samples, cfg.VMs, cfg.Seed, cfg.SimConfig = "ChimeraX", 3, 3, vms, &seed, simCfg
		cfg.TimeScale = 0.0005
		if _, err := runWithin(t, 3*time.Minute, cfg); err != nil {
			logs.dump(t, slog.LevelWarn)
			t.Fatalf("%d VMs: Run: %v", vms, err)
		}
		b := openTestBus(t, dir)
		ps := readPublished(t, b, openStore(t, dir), "ChimeraX")
		b.Close()
		content := map[string]string{}
		vmsUsed := map[string]bool{}
		for _, p := range ps {
			key := fmt.Sprintf("%s/%d", p.Traj.Task.ID, p.Traj.Sample)
			if _, dup := content[key]; dup {
				t.Fatalf("%d VMs: %s published twice", vms, key)
			}
			content[key] = trajectoryContent(t, p.Traj)
			vmsUsed[p.Traj.VM] = true
		}
		if len(content) != 4*3 {
			t.Fatalf("%d VMs: %d trajectories, want %d", vms, len(content), 4*3)
		}
		if len(vmsUsed) < 2 {
			t.Fatalf("%d VMs: every episode ran on one VM (%v): the test proves nothing", vms, vmsUsed)
		}
		runs = append(runs, content)
	}
	for _, k := range slices.Sorted(maps.Keys(runs[0])) {
		a, b := runs[0][k], runs[1][k]
		if a != b {
			t.Errorf("%s differs between 4 and 2 VMs:\n4 VMs: %s\n2 VMs: %s", k, a, b)
		}
	}
}

// trajectoryContent is what a trajectory says, without ids, the VM and
// timings: its outcome, evaluation and, per step, the screenshot's
// SHA-256, every candidate's plan and grounding and what ran on the VM.
func trajectoryContent(t *testing.T, tr *traj.Trajectory) string {
	t.Helper()
	type candidate struct {
		Plan, Thought, ExecutorOutput, ParseError string
		Action                                    *traj.Action
	}
	type step struct {
		Screenshot  string
		Candidates  []candidate
		Executed    int
		Code, Error string
	}
	c := struct {
		Task    string
		Sample  int
		Outcome traj.Outcome
		Eval    *traj.EvalResult
		Steps   []step
	}{Task: tr.Task.ID, Sample: tr.Sample, Outcome: tr.Outcome, Eval: tr.Eval}
	for _, s := range tr.Steps {
		st := step{Screenshot: s.Screenshot.SHA256, Executed: s.Executed, Code: s.Code, Error: s.Error}
		for _, cd := range s.Candidates {
			st.Candidates = append(st.Candidates, candidate{Plan: cd.Plan, Thought: cd.Thought, ExecutorOutput: cd.ExecutorOutput, ParseError: cd.ParseError, Action: cd.Action})
		}
		c.Steps = append(c.Steps, st)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
