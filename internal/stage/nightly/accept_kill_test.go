package nightly

import (
	"bufio"
	"encoding/json"
	"io"
	"path/filepath"
	"testing"

	"github.com/codapipe/codapipe/internal/infra/service"
	simtasks "github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/internal/testkit/proctest"
)

// TestAcceptNightlyKilledBetweenStages kills a night (SIGKILL) as each
// stage after the rollout is about to start — judge, advantage, the SFT
// build — and runs it again each time: the last invocation finishes the
// night, and the counts agree across the stages as for a night never
// killed (every trajectory once, judged once, its rows once, the SFT set
// whole).
func TestAcceptNightlyKilledBetweenStages(t *testing.T) {
	const group, samples = 2, 2
	dir := t.TempDir()
	tasks := filepath.Join(t.TempDir(), "tasks")
	names := []string{"KAlgebra/S01", "KAlgebra/S02"} // with clean successes at seed 1
	if err := simtasks.Write(tasks, names...); err != nil {
		t.Fatal(err)
	}
	summary := filepath.Join(dir, "night.json")
	args := []string{"--data", dir, "--apps", "KAlgebra", "--night", "2026-11-27", "--group", "2", "--samples", "2",
		"--sim", "--vms", "2", "--seed", "1", "--time-scale", "0.0005", "--workers=false", "--summary", summary,
		"--log-format", "json", "--log-level", "info",
		"--rollout-args", "--tasks " + tasks, "--judge-args", "--max-frames 4 --rule majority"}
	for _, stage := range []string{"judge --drain", "advantage --drain", "sftpack build"} {
		cmd := proctest.Command(t, "", args...)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killed := false
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line struct{ Msg, Stage string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "stage" && line.Stage == stage {
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				killed = true
				break
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		err = cmd.Wait()
		if !killed {
			t.Fatalf("the night ended (%v) before stage %q started", err, stage)
		}
		t.Logf("killed as %q started", stage)
	}
	cmd := proctest.Command(t, "", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the night after the kills: %v\n%s", err, out)
	}
	var s Summary
	if err := service.ReadJSON(summary, &s); err != nil {
		t.Fatal(err)
	}
	if !s.OK || len(s.Apps) != 1 || s.SFT == nil {
		t.Fatalf("the night after the kills: %+v", s)
	}
	if s.New.Episodes != 0 {
		t.Errorf("the last invocation ran %d episodes; the first ran them all", s.New.Episodes)
	}
	n, clean, cleanSteps, samplesN := checkCounts(t, dir, &s, group, len(names)*samples)
	if clean == 0 {
		t.Error("no clean success: the test needs rows and SFT samples")
	}
	t.Logf("%d trajectories, %d clean successes (%d steps), %d SFT samples", n, clean, cleanSteps, samplesN)
}
