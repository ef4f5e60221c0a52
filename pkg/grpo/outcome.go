package grpo

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/codapipe/codapipe/pkg/traj"
)

// EvalPolicy says how outcome mode combines the task evaluator's result
// with the judge's decision. An evaluator result is usable when it exists,
// reports no unsupported check and no evaluator error; an unusable one is
// ignored under every policy (it is no verdict on the agent).
type EvalPolicy string

// Evaluator policies.
const (
	// EvalIgnore: the reward is the judge reward alone.
	EvalIgnore EvalPolicy = "ignore"
	// EvalRequire: a usable evaluator that failed turns any judge success
	// into FailureReward; otherwise the judge reward stands.
	EvalRequire EvalPolicy = "require"
	// EvalMean: with a usable evaluator, the reward is the mean of the
	// judge reward and the evaluator reward (CleanReward if it passed,
	// FailureReward if not).
	EvalMean EvalPolicy = "mean"
)

// OutcomeConfig maps a judged trajectory to its outcome-mode reward.
type OutcomeConfig struct {
	// CleanReward is the reward of a clean success. Default 1.
	CleanReward float64 `json:"clean_reward"`
	// RedundantReward is the reward of a success with redundant steps or
	// a first error step. Default 0 (CODA keeps only clean successes);
	// 0.5 is a common partial-credit choice.
	RedundantReward float64 `json:"redundant_reward"`
	// FailureReward is the reward of a failure. Default 0.
	FailureReward float64 `json:"failure_reward"`
	// Eval combines the task evaluator's result. Default EvalIgnore.
	Eval EvalPolicy `json:"eval"`
}

// DefaultOutcomeConfig returns clean success 1, success with redundancy 0,
// failure 0, evaluator ignored.
func DefaultOutcomeConfig() OutcomeConfig {
	return OutcomeConfig{CleanReward: 1, RedundantReward: 0, FailureReward: 0, Eval: EvalIgnore}
}

// Validate reports an unknown evaluator policy or a reward that is not a
// finite number within ±MaxAbsReward.
func (c OutcomeConfig) Validate() error {
	names := [...]string{"clean_reward", "redundant_reward", "failure_reward"}
	for i, v := range [...]float64{c.CleanReward, c.RedundantReward, c.FailureReward} {
		if !(v >= -MaxAbsReward && v <= MaxAbsReward) {
			return fmt.Errorf("grpo: outcome config: %s = %v, want a finite number within ±1e100", names[i], v)
		}
	}
	switch c.Eval {
	case EvalIgnore, EvalRequire, EvalMean:
		return nil
	}
	return fmt.Errorf("grpo: outcome config: eval policy %q, want %q, %q or %q", c.Eval, EvalIgnore, EvalRequire, EvalMean)
}

// Exclusion says why a trajectory has no outcome reward.
type Exclusion string

// Exclusions. An excluded trajectory is left out of its group; it is never
// scored 0.
const (
	ExcludedNone      Exclusion = ""
	ExcludedEnvError  Exclusion = "env_error"    // the environment failed (traj.OutcomeEnvError)
	ExcludedUndecided Exclusion = "undecided"    // the judge reached no decision
	ExcludedNoJudge   Exclusion = "no_judgement" // no judgement was given
)

// usableEval reports whether the evaluator result says something about the
// agent, and whether it passed.
func usableEval(e *traj.EvalResult) (usable, passed bool) {
	if e == nil || len(e.Unsupported) > 0 || e.Error != "" {
		return false, false
	}
	return true, e.Passed
}

// OutcomeReward returns the outcome-mode reward of trajectory t judged by j,
// or the reason it has none. Environment errors, undecided, not judged
// and missing judgements are excluded (never reward 0). The error reports a judgement
// of another trajectory, a decision that contradicts its verdict, an
// unknown decision, or an invalid config.
func OutcomeReward(t *traj.Trajectory, j *traj.Judgement, c OutcomeConfig) (float64, Exclusion, error) {
	if err := c.Validate(); err != nil {
		return 0, ExcludedNone, err
	}
	if t == nil {
		return 0, ExcludedNone, fmt.Errorf("grpo: OutcomeReward: nil trajectory")
	}
	if t.Outcome.IsEnvError() {
		return 0, ExcludedEnvError, nil
	}
	if j == nil {
		return 0, ExcludedNoJudge, nil
	}
	if j.TrajectoryID != t.ID {
		return 0, ExcludedNone, fmt.Errorf("grpo: judgement of trajectory %q given for trajectory %q", j.TrajectoryID, t.ID)
	}
	var r float64
	switch j.Decision {
	case traj.Undecided:
		return 0, ExcludedUndecided, nil
	case traj.NotJudged:
		return 0, ExcludedNoJudge, nil // no model saw it: as if there were no judgement
	case traj.CleanSuccess:
		r = c.CleanReward
	case traj.RedundantSuccess:
		r = c.RedundantReward
	case traj.Failure:
		r = c.FailureReward
	default:
		return 0, ExcludedNone, fmt.Errorf("grpo: judgement of %s: unknown decision %q", t.ID, j.Decision)
	}
	if j.Verdict == nil {
		return 0, ExcludedNone, fmt.Errorf("grpo: judgement of %s: decision %q without a verdict", t.ID, j.Decision)
	}
	if d := j.Verdict.Decide(); d != j.Decision {
		return 0, ExcludedNone, fmt.Errorf("grpo: judgement of %s: decision %q contradicts its verdict (%q)", t.ID, j.Decision, d)
	}
	usable, passed := usableEval(t.Eval)
	if !usable {
		return r, ExcludedNone, nil
	}
	switch c.Eval {
	case EvalRequire:
		if !passed && j.Decision != traj.Failure {
			r = c.FailureReward
		}
	case EvalMean:
		re := c.FailureReward
		if passed {
			re = c.CleanReward
		}
		r = (r + re) / 2
	}
	return r, ExcludedNone, nil
}

// Judged is a trajectory with its judgement (nil when none was made).
type Judged struct {
	Trajectory *traj.Trajectory // required
	Judgement  *traj.Judgement  // nil: excluded as no_judgement
}

// OutcomeGroupID is the id of the outcome-mode group of one task in one run:
// "outcome/<run>/<task id>". It is not a traj.GroupID (those name steps).
func OutcomeGroupID(run, taskID string) string { return "outcome/" + run + "/" + taskID }

// OutcomeMember is one trajectory of an outcome-mode group.
type OutcomeMember struct {
	Trajectory *traj.Trajectory `json:"-"`             // the trajectory (not copied)
	ID         string           `json:"trajectory_id"` // its id
	Sample     int              `json:"sample"`        // k of K
	Reward     float64          `json:"reward"`        // OutcomeReward
}

// OutcomeGroup is the K trajectories of one task in one run.
type OutcomeGroup struct {
	ID     string `json:"id"` // OutcomeGroupID(Run, TaskID)
	Run    string `json:"run"`
	TaskID string `json:"task_id"`
	// Offset and Size locate the members in OutcomeBatch.Members/Rewards.
	Offset int `json:"offset"`
	Size   int `json:"size"`
}

// ExcludedTrajectory is a trajectory left out of outcome mode.
type ExcludedTrajectory struct {
	ID     string    `json:"trajectory_id"`
	Run    string    `json:"run"`
	TaskID string    `json:"task_id"`
	Reason Exclusion `json:"reason"`
}

// OutcomeBatch holds outcome-mode groups in flat slices for
// Estimator.Advantages: group g's members are
// Members[Offsets[g]:Offsets[g+1]] with rewards at the same positions of
// Rewards.
type OutcomeBatch struct {
	Groups   []OutcomeGroup       // ordered by run, then task id
	Members  []OutcomeMember      // grouped, ordered by sample then id
	Rewards  []float64            // Members[i].Reward
	Offsets  []int                // len(Groups)+1 offsets into Members
	Excluded []ExcludedTrajectory // left out, with the reason
}

// BuildOutcomeGroups groups judged trajectories by (run, task id): each
// group is the K samples of one task. Groups are ordered by run then task
// id, members by sample then trajectory id, so the result does not depend
// on the order of items. Excluded trajectories (environment error,
// undecided, no judgement) are listed in Excluded and left out of their
// group; a group whose members are all excluded does not appear. A
// trajectory id given twice is an error, as is any OutcomeReward error.
func BuildOutcomeGroups(items []Judged, c OutcomeConfig) (*OutcomeBatch, error) {
	type entry struct {
		m        OutcomeMember
		run, tsk string
	}
	seen := make(map[string]bool, len(items))
	var kept []entry
	b := &OutcomeBatch{}
	for _, it := range items {
		t := it.Trajectory
		if t == nil {
			return nil, fmt.Errorf("grpo: BuildOutcomeGroups: nil trajectory")
		}
		if seen[t.ID] {
			return nil, fmt.Errorf("grpo: BuildOutcomeGroups: trajectory %s given twice", t.ID)
		}
		seen[t.ID] = true
		r, why, err := OutcomeReward(t, it.Judgement, c)
		if err != nil {
			return nil, err
		}
		if why != ExcludedNone {
			b.Excluded = append(b.Excluded, ExcludedTrajectory{ID: t.ID, Run: t.Run, TaskID: t.Task.ID, Reason: why})
			continue
		}
		kept = append(kept, entry{m: OutcomeMember{Trajectory: t, ID: t.ID, Sample: t.Sample, Reward: r}, run: t.Run, tsk: t.Task.ID})
	}
	slices.SortFunc(kept, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.run, b.run), cmp.Compare(a.tsk, b.tsk),
			cmp.Compare(a.m.Sample, b.m.Sample), cmp.Compare(a.m.ID, b.m.ID))
	})
	slices.SortFunc(b.Excluded, func(a, b ExcludedTrajectory) int {
		return cmp.Or(cmp.Compare(a.Run, b.Run), cmp.Compare(a.TaskID, b.TaskID), cmp.Compare(a.ID, b.ID))
	})
	b.Offsets = []int{0}
	for i, e := range kept {
		if i == 0 || e.run != kept[i-1].run || e.tsk != kept[i-1].tsk {
			b.Groups = append(b.Groups, OutcomeGroup{ID: OutcomeGroupID(e.run, e.tsk), Run: e.run, TaskID: e.tsk, Offset: i})
			if i > 0 {
				b.Offsets = append(b.Offsets, i)
			}
		}
		b.Groups[len(b.Groups)-1].Size++
		b.Members = append(b.Members, e.m)
		b.Rewards = append(b.Rewards, e.m.Reward)
	}
	if len(kept) > 0 {
		b.Offsets = append(b.Offsets, len(kept))
	}
	return b, nil
}

// Advantages runs e over the batch and returns one advantage per member
// (trajectory) and one GroupStats per group.
func (b *OutcomeBatch) Advantages(e Estimator) ([]float64, []GroupStats, Summary, error) {
	adv := make([]float64, len(b.Rewards))
	stats := make([]GroupStats, len(b.Groups))
	sum, err := e.Advantages(b.Rewards, b.Offsets, adv, stats)
	if err != nil {
		return nil, nil, sum, err
	}
	return adv, stats, sum, nil
}

// OutcomeStepRow is one training row of outcome mode: a step's executed
// plan with its trajectory's advantage.
type OutcomeStepRow struct {
	GroupID      string  `json:"group_id"` // the OutcomeGroup id
	TrajectoryID string  `json:"trajectory_id"`
	Step         int     `json:"step"`      // 0-based step index
	Candidate    int     `json:"candidate"` // the executed candidate
	Advantage    float64 `json:"advantage"`
	Reward       float64 `json:"reward"` // the trajectory's outcome reward
}

// Broadcast gives every step of every kept trajectory its trajectory's
// advantage. adv and stats are what Advantages returned; members of
// dropped groups and steps where no candidate was executed give no row.
func (b *OutcomeBatch) Broadcast(adv []float64, stats []GroupStats) ([]OutcomeStepRow, error) {
	if len(adv) != len(b.Members) || len(stats) != len(b.Groups) {
		return nil, fmt.Errorf("%w: %d advantages and %d stats for %d members in %d groups", ErrShape, len(adv), len(stats), len(b.Members), len(b.Groups))
	}
	var rows []OutcomeStepRow
	for g, grp := range b.Groups {
		if stats[g].Dropped {
			continue
		}
		for i := grp.Offset; i < grp.Offset+grp.Size; i++ {
			m := b.Members[i]
			for k := range m.Trajectory.Steps {
				s := &m.Trajectory.Steps[k]
				if s.Executed < 0 || s.Executed >= len(s.Candidates) {
					continue
				}
				rows = append(rows, OutcomeStepRow{GroupID: grp.ID, TrajectoryID: m.ID, Step: s.Index, Candidate: s.Executed, Advantage: adv[i], Reward: m.Reward})
			}
		}
	}
	return rows, nil
}
