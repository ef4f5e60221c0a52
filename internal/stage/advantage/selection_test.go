package advantage

import (
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/pkg/traj"
)

// TestSelectorAppsShareASubject (issue 40): "K.A" and "K_A" map to one
// subject token, so a set of app K.A receives K_A's judged trajectories on
// its subject; they are outside its selection, not rows of its set.
func TestSelectorAppsShareASubject(t *testing.T) {
	x := selector{sel: shard.Selection{Runs: []string{"r1"}}, apps: []string{"K.A"}}
	own := &traj.Trajectory{Run: "r1", Task: traj.TaskRef{App: "K.A"}}
	other := &traj.Trajectory{Run: "r1", Task: traj.TaskRef{App: "K_A"}}
	if ok, why := x.match(own); !ok {
		t.Errorf("the set's own app is outside its selection: %s", why)
	}
	if ok, why := x.match(other); ok || !strings.Contains(why, `app "K_A"`) {
		t.Errorf("another app on the same subject: selected %v (%s), want outside the selection", ok, why)
	}
	if ok, _ := (selector{sel: x.sel}).match(other); !ok {
		t.Error("without --app every app is selected")
	}
}
