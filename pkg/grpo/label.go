package grpo

import (
	"fmt"

	"github.com/codapipe/codapipe/pkg/traj"
)

// LabelMode selects which steps of a judged trajectory get a reference
// action.
type LabelMode string

// Labeling modes.
const (
	// LabelModeClean is CODA's: only a clean success (Correctness true, no
	// redundant step, no first error step) gives labels, and then every
	// step whose executed action is usable is positive.
	LabelModeClean LabelMode = "clean"
	// LabelModePrefix is SEAgent's partial credit on top of LabelModeClean:
	// a failure (Correctness false) with first error step e > 2 (judge
	// numbering, 1-based) makes judge steps 1..e−2 (0-based indices
	// 0..e−3) positive and judge step e−1 (index e−2) negative.
	LabelModePrefix LabelMode = "prefix"
)

// Label is one step's label.
type Label string

// Labels.
const (
	// LabelNone: the step gives no reference action.
	LabelNone Label = "none"
	// LabelPositive: the step's executed action is a reference action aT;
	// its non-executed candidates form a step-mode group.
	LabelPositive Label = "positive"
	// LabelNegative: the step's executed action is a known mistake
	// (LabelModePrefix). It forms no GRPO group; it is reported for a
	// separate negative-sample loss (SEAgent's adversarial imitation).
	LabelNegative Label = "negative"
)

// ExecutedAction returns the action of the candidate s executed, or nil when
// no candidate ran (Executed −1 or out of range) or its action is not Usable
// (did not parse, or has an unknown type).
func ExecutedAction(s *traj.Step) *traj.Action {
	if s == nil || s.Executed < 0 || s.Executed >= len(s.Candidates) {
		return nil
	}
	a := s.Candidates[s.Executed].Action
	if !Usable(a) {
		return nil
	}
	return a
}

// LabelSteps labels every step of t from its judgement j. The result has
// one label per step, indexed by the 0-based Step.Index (= position in
// t.Steps); the judge's step number n is index n−1.
//
// Rules, in order:
//   - t ended in an environment error, or j is Undecided: every step
//     LabelNone (no signal either way).
//   - a clean success (decision clean_success and a clean verdict): every
//     step positive.
//   - LabelModePrefix and a failure (Correctness false) whose first error
//     step e satisfies e > 2: indices 0..e−3 positive, index e−2 negative;
//     e ≤ 2 gives no labels.
//   - anything else (success with redundancy, failure under
//     LabelModeClean): no labels.
//
// A step whose executed action is missing or not Usable (see
// ExecutedAction) is LabelNone whatever the rule says.
//
// Errors: nil arguments, an unknown mode, a judgement of another
// trajectory, a decision that contradicts its verdict, a missing verdict
// on a decided judgement, and (prefix mode) a first error step e with
// e−1 > len(t.Steps).
func LabelSteps(t *traj.Trajectory, j *traj.Judgement, mode LabelMode) ([]Label, error) {
	if t == nil || j == nil {
		return nil, fmt.Errorf("grpo: LabelSteps: nil trajectory or judgement")
	}
	if mode != LabelModeClean && mode != LabelModePrefix {
		return nil, fmt.Errorf("grpo: label mode %q, want %q or %q", mode, LabelModeClean, LabelModePrefix)
	}
	if j.TrajectoryID != t.ID {
		return nil, fmt.Errorf("grpo: judgement of trajectory %q given for trajectory %q", j.TrajectoryID, t.ID)
	}
	labels := make([]Label, len(t.Steps))
	for i := range labels {
		labels[i] = LabelNone
	}
	if t.Outcome.IsEnvError() || j.Decision == traj.Undecided || j.Decision == traj.NotJudged {
		return labels, nil
	}
	v := j.Verdict
	if v == nil {
		return nil, fmt.Errorf("grpo: judgement of %s: decision %q without a verdict", t.ID, j.Decision)
	}
	if d := v.Decide(); d != j.Decision {
		return nil, fmt.Errorf("grpo: judgement of %s: decision %q contradicts its verdict (%q)", t.ID, j.Decision, d)
	}
	set := func(i int, l Label) {
		if ExecutedAction(&t.Steps[i]) != nil {
			labels[i] = l
		}
	}
	switch {
	case j.Decision == traj.CleanSuccess:
		for i := range t.Steps {
			set(i, LabelPositive)
		}
	case mode == LabelModePrefix && !v.Correctness && v.FirstErrorStep != nil:
		e := *v.FirstErrorStep
		if e <= 2 {
			return labels, nil
		}
		neg := e - 2 // 0-based index of judge step e−1
		if neg >= len(t.Steps) {
			return nil, fmt.Errorf("grpo: judgement of %s: first error step %d, but the trajectory has %d steps", t.ID, e, len(t.Steps))
		}
		for i := 0; i < neg; i++ {
			set(i, LabelPositive)
		}
		set(neg, LabelNegative)
	}
	return labels, nil
}
