package judge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/archive"
	"github.com/codapipe/codapipe/internal/bus"
	"github.com/codapipe/codapipe/internal/pipetest"
	"github.com/codapipe/codapipe/internal/service"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Acceptance 1: on a demo-like run's trajectories (rollout --sim, then
// judge --sim --drain on the same data directory), every trajectory gets
// exactly one judged message and one archive entry, environment-error
// ones are recorded as not judged with 0 calls, a second drain judges
// nothing again, and judge report prints the table and the JSON document.
func TestAcceptDemoJudged(t *testing.T) {
	dir := t.TempDir()
	// VM 1 fails every call and episodes are not retried: some
	// trajectories end by an environment error.
	raw := pipetest.Run(t, dir, pipetest.Spec{
		App: acceptApp, Tasks: []string{"S01", "S02", "S03", "S04", "S05"}, Samples: 2, Group: 1, Run: "demo",
		Sim: `{"per_vm": {"1": {"faults": {"error_prob": 1}}}}`, RolloutArgs: []string{"--env-retries", "0"},
	}).Trajectories
	envErrs := 0
	for _, tr := range raw {
		if tr.Outcome.IsEnvError() {
			envErrs++
		}
	}
	if envErrs == 0 || envErrs == len(raw) {
		t.Fatalf("the run needs both kinds of trajectories: %d env errors of %d", envErrs, len(raw))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	judgeCLI := func(args ...string) (string, string) {
		var out, errb bytes.Buffer
		common := []string{"--data", dir, "--log-level", "warn"}
		full := append(common, args...)
		if len(args) > 0 && args[0] == "report" { // a subcommand comes first
			full = append(append([]string{"report"}, common...), args[1:]...)
		}
		if code := service.MainContext(ctx, Command(), full, &out, &errb); code != 0 {
			t.Fatalf("judge %v: exit %d\n%s", args, code, errb.String())
		}
		return out.String(), errb.String()
	}
	frames := fmt.Sprint(testFrames)
	out, logs := judgeCLI("--sim", "--drain", "--lowres", "640x400", "--max-frames", frames, "--log-level", "info")
	if !strings.Contains(out, fmt.Sprintf("judge: %d trajectories", len(raw))) || !strings.Contains(logs, `"msg":"judge: drained"`) || !strings.Contains(logs, fmt.Sprintf(`"judged":%d,`, len(raw))) {
		t.Errorf("judge output:\n%s\nlog:\n%s", out, logs)
	}

	env := service.NewEnv("check", &service.Common{DataDir: dir}, quietLog(), nil, nil)
	defer env.Close()
	b, err := env.Bus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	store, err := env.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	docs, msgs := judgedOn(t, b)
	arch := archived(t, store)
	byID := map[string]*traj.Judged{}
	for i, d := range docs {
		id := d.Trajectory.ID
		if byID[id] != nil {
			t.Errorf("trajectory %s has two judged messages", id)
		}
		byID[id] = d
		if got, want := msgs[i].Header.Get("Nats-Msg-Id"), archive.MessageID(id, d.Judgement.Judge.ID()); got != want {
			t.Errorf("message id %q, want %q", got, want)
		}
		key := archive.Key(d.Trajectory.Run, d.Trajectory.Task.App, id, d.Judgement.Judge.ID())
		if a := arch[key]; a == nil || a.Judgement.JudgedAt != d.Judgement.JudgedAt || a.Judgement.Decision != d.Judgement.Decision {
			t.Errorf("trajectory %s: archive entry %s missing or different from the message", id, key)
		}
	}
	if len(arch) != len(raw) {
		t.Errorf("%d archive entries for %d trajectories", len(arch), len(raw))
	}
	for _, tr := range raw {
		d := byID[tr.ID]
		if d == nil {
			t.Errorf("trajectory %s (%s) was not judged", tr.ID, tr.Outcome.Kind)
			continue
		}
		j := d.Judgement
		switch {
		case tr.Outcome.IsEnvError():
			if j.Decision != traj.NotJudged || len(j.Votes) != 0 || !strings.Contains(j.Reason, tr.Outcome.Reason) {
				t.Errorf("env-error trajectory %s: decision %s, %d votes, reason %q", tr.ID, j.Decision, len(j.Votes), j.Reason)
			}
		case j.Decision == traj.NotJudged || len(j.Votes) == 0:
			t.Errorf("trajectory %s was not shown to the judge: %+v", tr.ID, j)
		case j.Votes[0].Resolution != "640x400":
			t.Errorf("trajectory %s: the first vote was at %s, want the low resolution", tr.ID, j.Votes[0].Resolution)
		}
	}
	if t.Failed() {
		return
	}
	env.Close()

	// Everything is acknowledged: a second drain judges nothing.
	out, _ = judgeCLI("--sim", "--drain", "--lowres", "640x400", "--max-frames", frames)
	if !strings.Contains(out, "judge: 0 trajectories") {
		t.Errorf("second drain:\n%s", out)
	}

	table, _ := judgeCLI("report")
	for _, want := range []string{"calls/traj", "precision", acceptApp, "overall", "not judged"} {
		if !strings.Contains(table, want) {
			t.Errorf("report table lacks %q:\n%s", want, table)
		}
	}
	js, _ := judgeCLI("report", "--json", "--run", "demo")
	var rep struct {
		Overall map[string]any            `json:"overall"`
		Apps    map[string]map[string]any `json:"apps"`
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("report --json: %v\n%s", err, js)
	}
	for _, part := range []map[string]any{rep.Overall, rep.Apps[acceptApp]} {
		for _, k := range []string{"trajectories", "decisions", "calls_per_trajectory", "precision", "recall", "f1"} {
			if _, ok := part[k]; !ok {
				t.Errorf("report JSON lacks %q: %v", k, part)
			}
		}
	}
	if n := rep.Overall["trajectories"].(float64); int(n) != len(raw) {
		t.Errorf("report: %v trajectories, want %d", n, len(raw))
	}
	if n := rep.Overall["decisions"].(map[string]any)[string(traj.NotJudged)].(float64); int(n) != envErrs {
		t.Errorf("report: %v not judged, want %d", n, envErrs)
	}
}

// TestArchiveAndMessageIDsPerVersion: a trajectory judged by two judge
// versions has two distinct archive keys and message ids; by one, the
// same.
func TestArchiveAndMessageIDsPerVersion(t *testing.T) {
	a, b := traj.JudgeVersion{PromptSHA256: "p", Models: []string{"m"}, Policy: "unanimous@4"}, traj.JudgeVersion{PromptSHA256: "p", Models: []string{"m"}, Policy: "majority@4"}
	id := traj.NewID()
	if archive.Key("r", "ChimeraX", id, a.ID()) == archive.Key("r", "ChimeraX", id, b.ID()) || archive.MessageID(id, a.ID()) == archive.MessageID(id, b.ID()) {
		t.Fatal("two judge versions share a key")
	}
	if got := archive.Key("night/1", "GRASS GIS", id, a.ID()); got != "judged/night=2F1/GRASS=20GIS/"+id+"."+a.ID()+".json" {
		t.Fatalf("archive key %q", got)
	}
	if filepath.Base(archive.Key("..", "..", id, a.ID())) == ".." || strings.Contains(archive.Key("..", "x", id, "v"), "/../") {
		t.Fatal("a run name escapes the archive")
	}
	if !slices.Equal([]string{DurableName("v", nil), DurableName("v", []string{"GRASS GIS"})}, []string{"judge_v", "judge_v_GRASS_GIS"}) {
		t.Fatalf("durable names %q %q", DurableName("v", nil), DurableName("v", []string{"GRASS GIS"}))
	}
	if bus.KeyToken("x") != "x" {
		t.Fatal("key token")
	}
}
