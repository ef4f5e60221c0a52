package apps

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/scienceboard"
	"github.com/codapipe/codapipe/internal/sim/guest"
)

// TestRealTaskSetups runs the setup of every real ScienceBoard task file of
// the simulated apps (testdata/scienceboard/tasks/VM) against the
// simulated app servers, with the requests the harness sends: every reply
// must be accepted (downloads, which the host does, are skipped). Then
// the task's checks run against the untouched state: they may fail (the
// agent did nothing) but never for want of an answer, and the ones the
// evaluator can run (no lambdas while pylambda is a placeholder) must
// not be unsupported.
func TestRealTaskSetups(t *testing.T) {
	for _, app := range All() {
		dir := filepath.Join("..", "..", "..", "testdata", "scienceboard", "tasks", "VM", app.Name)
		set, err := scienceboard.LoadDir(dir)
		if err != nil {
			t.Fatalf("%s: %v", app.Name, err)
		}
		for i := range set.Tasks {
			task := &set.Tasks[i]
			t.Run(task.ID, func(t *testing.T) {
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
				res := scienceboard.Evaluator{Now: func() time.Time { return time.Unix(1767323045, 0) }}.
					Evaluate(context.Background(), task, c, scienceboard.FinalAction{Kind: scienceboard.FinalDone})
				if res.Error != "" {
					t.Errorf("evaluation error: %s", res.Error)
				}
				for _, u := range res.Unsupported {
					if !strings.Contains(u, "pylambda") {
						t.Errorf("unsupported: %s", u)
					}
				}
			})
		}
	}
}
