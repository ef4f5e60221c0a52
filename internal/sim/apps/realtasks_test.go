package apps

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
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
				task, _, c := setUp(t, app, task)
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
