package tasks

import (
	"image"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
)

// The acceptance tests that play every task on a simulated machine are
// in the top package (internal/sim/acceptance_test.go).

func mustTasks(t testing.TB) []Task {
	t.Helper()
	ts, err := All()
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestTasksLoad(t *testing.T) {
	ts := mustTasks(t)
	perApp := map[string]int{}
	for _, task := range ts {
		perApp[task.App]++
		if len(task.Unsupported) > 0 {
			// GRASS "db" checks are kept raw by the loader; Evaluate reads them.
			for _, u := range task.Unsupported {
				if !strings.Contains(u, `type "db" not supported`) {
					t.Errorf("%s: loader reports %s", task.ID, u)
				}
			}
		}
		if task.Sort != "VM" || task.Steps != 5 && task.Steps != 10 && task.Steps != 15 {
			t.Errorf("%s: sort %q steps %d", task.ID, task.Sort, task.Steps)
		}
		if len(task.Oracle) > task.Steps-1 {
			t.Errorf("%s: oracle of %d steps leaves no slack in %d", task.ID, len(task.Oracle), task.Steps)
		}
		if got, ok := ByInstruction(task.Instruction); !ok || got.ID != task.ID {
			t.Errorf("%s: ByInstruction does not find it", task.ID)
		}
		if ps := task.Placeholders(); !reflect.DeepEqual(ps, []string{"PORTLIKE"}) {
			t.Errorf("%s: placeholders %v", task.ID, ps)
		}
	}
	for _, app := range apps.Catalog().Names() {
		if perApp[app] < 10 {
			t.Errorf("%s: %d tasks, want at least 10", app, perApp[app])
		}
	}
	t.Logf("tasks per app: %v", perApp)

	// The files load with the ScienceBoard loader from a directory too.
	dir := t.TempDir()
	if err := Write(dir); err != nil {
		t.Fatal(err)
	}
	set, err := scienceboard.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if set.Len() != len(ts) {
		t.Fatalf("LoadDir: %d tasks, want %d", set.Len(), len(ts))
	}
}

// quoted extracts the single-quoted parts of a thought.
var quotedRE = regexp.MustCompile(`'([^']*)'`)

func TestOracleConventions(t *testing.T) {
	for _, task := range mustTasks(t) {
		for i, s := range task.Oracle {
			parsed, err := uitars.Parse(s.Action, uitars.DefaultOptions())
			if err != nil || len(parsed.Actions) != 1 {
				t.Fatalf("%s step %d: %q: %v", task.ID, i, s.Action, err)
			}
			a := parsed.Actions[0]
			if canon := uitars.Format(a, uitars.DefaultOptions()); canon != s.Action {
				t.Errorf("%s step %d: action %q is not canonical (%q)", task.ID, i, s.Action, canon)
			}
			switch a.Type {
			case traj.Click:
				e, ok := apps.Catalog().FindElement(s.Target)
				if !ok || e.App != task.App {
					t.Fatalf("%s step %d: target %q is not an element of %s", task.ID, i, s.Target, task.App)
				}
				if !strings.Contains(s.Thought, "'"+e.Label+"'") {
					t.Errorf("%s step %d: thought %q does not quote %q", task.ID, i, s.Thought, e.Label)
				}
				code, _ := uitars.Render(a, uitars.DefaultScreen)
				evs, _ := desktop.ParsePyAutoGUI(code)
				if pt := image.Pt(evs[0].X, evs[0].Y); !pt.In(e.Box) {
					t.Errorf("%s step %d: click %v outside %q %v", task.ID, i, pt, e.Label, e.Box)
				}
				if c := e.Center(); abs(c.X-evs[0].X) > 1 || abs(c.Y-evs[0].Y) > 1 {
					t.Errorf("%s step %d: click %v is not at the centre %v of %q", task.ID, i, evs[0], c, e.Label)
				}
			case traj.TypeText:
				q := quotedRE.FindStringSubmatch(s.Thought)
				if q == nil || q[1] != strings.TrimSuffix(a.Text, "\n") {
					t.Errorf("%s step %d: thought %q does not quote the text %q", task.ID, i, s.Thought, a.Text)
				}
			}
			last := i == len(task.Oracle)-1
			ends := a.Type == traj.Finished || a.Type == traj.CallUser || a.Type == traj.Answer
			if ends != last {
				t.Errorf("%s step %d: a final action must be exactly the last step", task.ID, i)
			}
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
