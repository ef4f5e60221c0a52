package models

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/codapipe/codapipe/internal/scienceboard"
	"github.com/codapipe/codapipe/internal/sim/apps/grass"
	"github.com/codapipe/codapipe/internal/sim/apps/kalgebra"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/tasks"
)

// StateTruth is the simulated judge's default truth: it runs the task's
// own evaluator (scienceboard.Evaluate) against the app state carried by
// the last screenshot's state chunk, which answers the read-only app
// requests whose reply is that state exactly as the machine did when the
// screenshot was taken (KAlgebra GET /vars, GRASS GIS GET /dump; see
// chunkSource).
//
// Limitations, by design of a screenshot-only judge:
//   - checks that need any other request (ChimeraX's states dump and
//     "info" commands, Celestia's POST /dump, KAlgebra "eqn" point
//     queries, GRASS "db" queries, /read, /lean/check, /tex/check) cannot
//     be answered from a screenshot; for such tasks the truth falls back
//     to DefaultTruth (the oracle's answer for question tasks, failure
//     otherwise);
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

// chunkSource is a scienceboard.Caller that answers, from a screenshot's
// state, the read-only requests whose reply is the app state the chunk
// carries: GET /vars of KAlgebra's app server (the "vars" of its state)
// and GET /dump of GRASS GIS's (its whole state). Every other request is
// an error without an HTTP status, so the evaluation reports an error and
// the truth falls back to DefaultTruth: requests that change the app or
// the guest (POST /chimerax/run, /tab, /gcmd, ...), the reads whose reply
// depends on their body (Celestia's POST /dump with the task's query,
// KAlgebra's POST /func/2d), and the guest server's /read, /lean/check
// and /tex/check, whose files a screenshot does not carry.
type chunkSource struct{ st desktop.State }

// Call implements scienceboard.Caller.
func (c chunkSource) Call(_ context.Context, r scienceboard.Request) ([]byte, error) {
	var v any
	switch {
	case r.Server != scienceboard.AppServer || r.Method != "GET" || len(r.Query) > 0:
	case c.st.App == kalgebra.Name && r.Path == "/vars":
		v = c.st.AppState["vars"]
	case c.st.App == grass.Name && r.Path == "/dump":
		v = c.st.AppState
	}
	if v == nil {
		return nil, fmt.Errorf("%s cannot be answered from a %q screenshot", r, c.st.App)
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
