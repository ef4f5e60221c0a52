package apps

import (
	"context"
	"path"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/desktop/desktoptest"
	"github.com/codapipe/codapipe/internal/sim/guest"
	"github.com/codapipe/codapipe/internal/sim/tasks/taskgen"
)

// startMachine returns a machine that runs app (not started yet) and the
// app it starts, filled in by the launch.
func startMachine(t *testing.T, app desktop.AppSpec) (*desktoptest.Machine, *desktoptest.Running[desktop.App]) {
	t.Helper()
	app, r := desktoptest.Watch[desktop.App](app)
	return desktoptest.New(t, 1, app), r
}

// setUp starts a machine that runs app and plays task's setup on it as
// ScienceBoard's harness does, with PORTLIKE 8000: the items' requests
// (scienceboard.SetupSteps; downloads, which the host does, have none)
// through the guest servers, every reply judged by CheckReply. It returns
// the task as played, the machine and its guest servers.
func setUp(t *testing.T, app desktop.AppSpec, task *scienceboard.Task) (*scienceboard.Task, *desktoptest.Machine, scienceboard.Caller) {
	t.Helper()
	task, err := task.ExpandPlaceholders(map[string]string{"PORTLIKE": "8000"})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := startMachine(t, app)
	c := guest.Local(m.Machine, guest.Config{})
	steps, err := scienceboard.SetupSteps(task)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		if st.Request == nil {
			continue
		}
		body, err := c.Call(context.Background(), *st.Request)
		if err == nil {
			err = st.CheckReply(body)
		}
		if err != nil {
			t.Fatalf("setup %s: %s: %v", st.Func, st.Request, err)
		}
	}
	return task, m, c
}

// TestOraclePlansPass plays every task's spec on a machine: its setup
// items as ScienceBoard's harness sends them (scienceboard.SetupSteps, the
// replies judged by CheckReply), its oracle plan, then its checks
// (scienceboard.Evaluate), which must fail before the plan and pass after
// it. A task whose checks need lambdas is skipped
// while package pylambda is a placeholder. The acceptance tests of package
// sim play the task files end to end on the real guest server.
func TestOraclePlansPass(t *testing.T) {
	sets, err := TaskSets()
	if err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	for _, set := range sets {
		files, err := taskgen.Files(set)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range set.Tasks {
			t.Run(set.App.Name+"/"+spec.ID, func(t *testing.T) {
				name := path.Join("VM", taskgen.Folder(set.App), spec.ID+".json")
				task, err := scienceboard.ParseTask(name, files[spec.ID+".json"])
				if err != nil {
					t.Fatal(err)
				}
				task, m, c := setUp(t, set.App, task)
				// Before the plan, the task is not done yet.
				final := scienceboard.FinalAction{Kind: scienceboard.FinalNone}
				if res := (scienceboard.Evaluator{Now: clock}).Evaluate(context.Background(), task, c, final); res.Passed {
					t.Errorf("passes without the oracle plan: %+v", res)
				}
				for _, s := range spec.Oracle {
					kind, label, text, keys := s.Parts()
					switch kind {
					case "click":
						m.Click(label)
					case "type":
						m.Write(text)
					case "hotkey":
						m.Key(keys...)
					case "done":
						final.Kind = scienceboard.FinalDone
					case "fail":
						final.Kind = scienceboard.FinalFail
					case "answer":
						final = scienceboard.FinalAction{Kind: scienceboard.FinalAns, Answer: text}
					}
				}
				res := scienceboard.Evaluator{Now: clock}.Evaluate(context.Background(), task, c, final)
				if len(res.Unsupported) > 0 {
					t.Skipf("not evaluable yet: %v", res.Unsupported)
				}
				if !res.Passed || res.Error != "" {
					t.Errorf("oracle does not pass: %+v", res)
				}
			})
		}
	}
}
