package nightly

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/infra/service"
)

// TestUsageErrors: a night without apps, with a bad name, a bad export
// URL, a stage flag the stage does not have or one the night sets itself,
// or a missing simulator configuration is refused with exit status 2
// before anything starts.
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no apps"},
		{[]string{"--apps", "ChimeraX", "--night", "../x"}, "--night"},
		{[]string{"--apps", "ChimeraX", "--export", "/tmp/x"}, "--export"},
		{[]string{"--apps", "ChimeraX", "--samples", "0"}, "--samples"},
		{[]string{"--apps", "ChimeraX", "--judge-args", "--no-such-flag"}, "--judge-args: judge: unknown flag --no-such-flag"},
		{[]string{"--apps", "ChimeraX", "--rollout-args", "--run x"}, "--rollout-args: --run is the night's own"},
		{[]string{"--apps", "ChimeraX", "--advantage-args", "-out=/tmp/x"}, "--advantage-args: --out is the night's own"},
		{[]string{"--apps", "ChimeraX", "--sim", "--judge-args", "--seed 3"}, "--judge-args: --seed is the night's own"},
		{[]string{"--apps", "ChimeraX", "--rollout-args", "--group x"}, "--rollout-args: --group is the night's own"},
		{[]string{"--apps", "ChimeraX", "--sim", "--sim-config", "/no/such/sim.json"}, "--sim-config"},
	} {
		var stderr bytes.Buffer
		args := append([]string{"--data", t.TempDir()}, c.args...)
		if code := service.MainContext(context.Background(), Command(), args, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("nightly %v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
}

func TestRunName(t *testing.T) {
	if got := RunName("2026-11-26", "ChimeraX"); got != "2026-11-26-chimerax" {
		t.Errorf("RunName = %q", got)
	}
}

// TestAppsSpelledAsTheBenchmark: --apps names ScienceBoard apps in any
// case as the benchmark spells them, once each (a night is one run per
// app); another name is an app of the user's task folders, kept.
func TestAppsSpelledAsTheBenchmark(t *testing.T) {
	o := Options{Apps: []string{"chimerax", "ChimeraX", "GRASSGIS", "Lab"}, Night: "n", Samples: 1}
	if err := o.check(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"ChimeraX", "GrassGIS", "Lab"}; !slices.Equal(o.Apps, want) {
		t.Errorf("apps %q, want %q", o.Apps, want)
	}
}

// TestStageOptions: the stages' options come from their --*-args and the
// environment, with the night's own set by the night: without --sim a
// rollout's --seed is its request seed; CODAPIPE_SUMMARY, one file for
// every command, reaches no stage.
func TestStageOptions(t *testing.T) {
	t.Setenv("CODAPIPE_SUMMARY", "/tmp/every-stage.json")
	o := Options{Apps: []string{"ChimeraX"}, Night: "n", Samples: 1, RolloutArgs: "--seed 7 --env-retries 5", JudgeArgs: "--votes 3 --stages none"}
	st, err := o.parseStages()
	if err != nil {
		t.Fatal(err)
	}
	if st.rollout.Seed == nil || *st.rollout.Seed != 7 || st.rollout.EnvRetries != 5 || st.rollout.Sim {
		t.Errorf("rollout options %+v: want seed 7, 5 env retries, no simulator", st.rollout)
	}
	if st.judge.Policy.Votes != 3 {
		t.Errorf("judge votes %d, want 3", st.judge.Policy.Votes)
	}
	for stage, s := range map[string]string{"rollout": st.rollout.Summary, "judge": st.judge.Summary, "advantage": st.advantage.Summary, "sftpack": st.sft.Summary} {
		if s != "" {
			t.Errorf("%s writes a summary to %q, the environment's", stage, s)
		}
	}
	o.Sim, o.Seed, o.VMs, o.TimeScale, o.RolloutArgs = true, 2, 3, 0.5, ""
	if st, err = o.parseStages(); err != nil {
		t.Fatal(err)
	}
	if !st.rollout.Sim || !st.judge.Sim || st.rollout.VMs != 3 || st.rollout.Seed == nil || *st.rollout.Seed != 2 || st.judge.Seed != 2 || st.judge.TimeScale != 0.5 {
		t.Errorf("with --sim: rollout %+v, judge sim %v seed %d", st.rollout, st.judge.Sim, st.judge.Seed)
	}
}
