package models

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/codapipe/codapipe/internal/scienceboard"
	"github.com/codapipe/codapipe/internal/sim/apps/celestia"
	"github.com/codapipe/codapipe/internal/sim/apps/chimerax"
	"github.com/codapipe/codapipe/internal/sim/apps/grass"
	"github.com/codapipe/codapipe/internal/sim/apps/kalgebra"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/tasks"
)

// StateTruth is the simulated judge's default truth: it runs the task's
// own evaluator (scienceboard.Evaluate) against the app state carried by
// the last screenshot's state chunk, which answers the app-state GET
// endpoints exactly as the machine did when the screenshot was taken
// (ChimeraX /chimerax/state, Celestia and GRASS /dump, KAlgebra /vars).
//
// Limitations, by design of a screenshot-only judge:
//   - checks that need a POST endpoint (ChimeraX "info" commands, KAlgebra
//     "eqn" point queries, GRASS "db" queries) cannot be answered from a
//     screenshot; for such tasks the truth falls back to DefaultTruth (the
//     oracle's answer for question tasks, failure otherwise);
//   - the judge sees the agent's answer (an "ANS" line) but not whether it
//     ended with DONE or FAIL: tasks whose success is giving up (a "stop"
//     check for FAIL) fall back to DefaultTruth too, and other "stop"
//     checks see DONE when there is no answer.
//
// Redundant steps are the steps after which the app state did not change
// (a successful trajectory only; the last step, which ends the episode,
// never counts); the first error step is not computed (0).
func StateTruth(task *tasks.Task, states []desktop.State, answer string) (bool, int, []int, error) {
	if task == nil || len(states) == 0 || expectsFail(&task.Task) {
		return DefaultTruth(task, states, answer)
	}
	last := states[len(states)-1]
	final := scienceboard.FinalAction{Kind: scienceboard.FinalDone}
	if answer != "" {
		final = scienceboard.FinalAction{Kind: scienceboard.FinalAns, Answer: answer}
	}
	res := scienceboard.Evaluate(context.Background(), &task.Task, chunkSource{last}, final)
	if len(res.Unsupported) > 0 || res.Error != "" {
		return DefaultTruth(task, states, answer)
	}
	if !res.Passed {
		return false, 0, nil, nil
	}
	// The last transition (the last step's screen → the final screen) is
	// the step that ended the episode (DONE or the answer), which changes
	// nothing by nature: it is never redundant.
	var redundant []int
	for i := 1; i < len(states)-1; i++ {
		// Step i (1-based) turned frame i into frame i+1.
		a, b := states[i-1], states[i]
		if a.App == b.App && a.Focus == b.Focus && a.SelectAll == b.SelectAll && reflect.DeepEqual(a.AppState, b.AppState) && reflect.DeepEqual(a.Fields, b.Fields) {
			redundant = append(redundant, i)
		}
	}
	return true, 0, redundant, nil
}

// chunkSource answers the app-state GET endpoints from a screenshot's state.
type chunkSource struct{ st desktop.State }

func (c chunkSource) AppState(_ context.Context, path string, body []byte) ([]byte, error) {
	if body != nil {
		return nil, fmt.Errorf("POST %s cannot be answered from a screenshot", path)
	}
	var v any
	switch {
	case c.st.App == kalgebra.Name && path == scienceboard.PathKAlgebraVars:
		v = c.st.AppState["vars"]
	case c.st.App == chimerax.Name && path == scienceboard.PathChimeraXState,
		c.st.App == celestia.Name && path == scienceboard.PathCelestiaDump,
		c.st.App == grass.Name && path == scienceboard.PathGRASSDump:
		v = c.st.AppState
	default:
		return nil, fmt.Errorf("GET %s cannot be answered from a %q screenshot", path, c.st.App)
	}
	return json.Marshal(v)
}

// expectsFail reports whether the task succeeds by giving up.
func expectsFail(t *scienceboard.Task) bool {
	for _, c := range t.Evaluate {
		if sc, ok := c.Args.(*scienceboard.StopCheck); ok && sc.Value == scienceboard.StopFail {
			return true
		}
	}
	return false
}
