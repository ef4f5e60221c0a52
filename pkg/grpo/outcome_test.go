package grpo

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/pkg/traj"
)

var (
	vClean     = &traj.Verdict{Correctness: true}
	vRedundant = &traj.Verdict{Correctness: true, Redundant: []int{1}}
	vFail      = &traj.Verdict{Correctness: false, FirstErrorStep: intp(2)}
)

func outcomeTraj(id, run, task string, sample, steps int) *traj.Trajectory {
	t := mkTraj(id, stepsOf(steps)...)
	t.Run, t.Task.ID, t.Sample, t.Samples = run, task, sample, 8
	return t
}

func TestOutcomeReward(t *testing.T) {
	def := DefaultOutcomeConfig()
	half := def
	half.RedundantReward = 0.5
	req := def
	req.Eval = EvalRequire
	mean := def
	mean.Eval = EvalMean
	passed := &traj.EvalResult{Passed: true}
	failed := &traj.EvalResult{Passed: false}
	unsupported := &traj.EvalResult{Passed: false, Unsupported: []string{"states"}}
	broken := &traj.EvalResult{Passed: false, Error: "bridge down"}

	cases := []struct {
		name string
		cfg  OutcomeConfig
		v    *traj.Verdict // nil = undecided
		eval *traj.EvalResult
		env  bool
		noJ  bool
		want float64
		why  Exclusion
	}{
		{"clean", def, vClean, nil, false, false, 1, ExcludedNone},
		{"redundant default 0", def, vRedundant, nil, false, false, 0, ExcludedNone},
		{"redundant 0.5", half, vRedundant, nil, false, false, 0.5, ExcludedNone},
		{"failure", def, vFail, nil, false, false, 0, ExcludedNone},
		{"undecided excluded", def, nil, nil, false, false, 0, ExcludedUndecided},
		{"env error excluded", def, vClean, nil, true, false, 0, ExcludedEnvError},
		{"env error excluded even when failed", def, vFail, nil, true, false, 0, ExcludedEnvError},
		{"no judgement excluded", def, nil, nil, false, true, 0, ExcludedNoJudge},
		{"ignore: eval failed", def, vClean, failed, false, false, 1, ExcludedNone},
		{"require: eval failed", req, vClean, failed, false, false, 0, ExcludedNone},
		{"require: eval passed", req, vClean, passed, false, false, 1, ExcludedNone},
		{"require: eval unsupported is ignored", req, vClean, unsupported, false, false, 1, ExcludedNone},
		{"require: evaluator error is ignored", req, vClean, broken, false, false, 1, ExcludedNone},
		{"require: failure stays failure", req, vFail, passed, false, false, 0, ExcludedNone},
		{"mean: clean + failed eval", mean, vClean, failed, false, false, 0.5, ExcludedNone},
		{"mean: failure + passed eval", mean, vFail, passed, false, false, 0.5, ExcludedNone},
		{"mean: clean + passed eval", mean, vClean, passed, false, false, 1, ExcludedNone},
		{"mean: no eval", mean, vFail, nil, false, false, 0, ExcludedNone},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := outcomeTraj("T1", "r", "A/1", 0, 2)
			tr.Eval = c.eval
			if c.env {
				tr.Outcome = traj.Outcome{Kind: traj.OutcomeEnvError, Reason: "guest server 500"}
			}
			j := judgement("T1", c.v)
			if c.noJ {
				j = nil
			}
			r, why, err := OutcomeReward(tr, j, c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r != c.want || why != c.why {
				t.Fatalf("OutcomeReward = %v, %q; want %v, %q", r, why, c.want, c.why)
			}
		})
	}
	// Errors.
	tr := outcomeTraj("T1", "r", "A/1", 0, 2)
	bad := judgement("T1", vClean)
	bad.Decision = traj.Failure
	for _, j := range []*traj.Judgement{judgement("T9", vClean), bad, {TrajectoryID: "T1", Decision: "maybe"}, {TrajectoryID: "T1", Decision: traj.CleanSuccess}} {
		if _, _, err := OutcomeReward(tr, j, def); err == nil {
			t.Errorf("%+v: no error", j)
		}
	}
	for _, c := range []OutcomeConfig{{Eval: "vote"}, {CleanReward: math.NaN(), Eval: EvalIgnore}} {
		if _, _, err := OutcomeReward(tr, judgement("T1", vClean), c); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}

func TestOutcomeGroups(t *testing.T) {
	env := outcomeTraj("E1", "run", "App/t1", 3, 2)
	env.Outcome = traj.Outcome{Kind: traj.OutcomeEnvError, Reason: "vm wedged"}
	items := []Judged{
		{outcomeTraj("B2", "run", "App/t2", 1, 1), judgement("B2", vFail)},
		{outcomeTraj("A1", "run", "App/t1", 1, 3), judgement("A1", vClean)},
		{outcomeTraj("A0", "run", "App/t1", 0, 2), judgement("A0", vFail)},
		{env, judgement("E1", vFail)},
		{outcomeTraj("U1", "run", "App/t1", 4, 2), judgement("U1", nil)},
		{outcomeTraj("A2", "run", "App/t1", 2, 1), judgement("A2", vRedundant)},
		{outcomeTraj("B0", "run", "App/t2", 0, 1), judgement("B0", vFail)},
		{outcomeTraj("C0", "run", "App/t3", 0, 1), nil},
	}
	b, err := BuildOutcomeGroups(items, DefaultOutcomeConfig())
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Groups) != 2 || b.Groups[0].ID != "outcome/run/App/t1" || b.Groups[1].ID != "outcome/run/App/t2" {
		t.Fatalf("groups %+v", b.Groups)
	}
	var ids []string
	for _, m := range b.Members {
		ids = append(ids, m.ID)
	}
	if !slices.Equal(ids, []string{"A0", "A1", "A2", "B0", "B2"}) || !slices.Equal(b.Offsets, []int{0, 3, 5}) {
		t.Fatalf("members %v offsets %v", ids, b.Offsets)
	}
	if !slices.Equal(b.Rewards, []float64{0, 1, 0, 0, 0}) {
		t.Errorf("rewards %v", b.Rewards)
	}
	var excl []string
	for _, e := range b.Excluded {
		excl = append(excl, e.ID+":"+string(e.Reason))
	}
	if !slices.Equal(excl, []string{"E1:env_error", "U1:undecided", "C0:no_judgement"}) {
		t.Errorf("excluded %v", excl)
	}

	for _, zv := range []ZeroVariancePolicy{ZeroVarianceKeep, ZeroVarianceDrop} {
		e := est(MethodGRPO, false, 0, zv, 0)
		adv, stats, sum, err := b.Advantages(e)
		if err != nil {
			t.Fatal(err)
		}
		// t1: [0, 1, 0] → μ = 1/3, σ = √(1/3): A = (−1/√3·… ) computed below; t2: [0, 0] zero variance.
		m, s := 1.0/3, math.Sqrt(1.0/3)
		want := []float64{-m / s, (1 - m) / s, -m / s, 0, 0}
		for i := range want {
			if !near(adv[i], want[i], 1e-12) {
				t.Fatalf("%s: adv %v, want %v", zv, adv, want)
			}
		}
		if sum.ZeroVariance != 1 || stats[1].Dropped != (zv == ZeroVarianceDrop) {
			t.Errorf("%s: %+v %+v", zv, sum, stats)
		}
		rows, err := b.Broadcast(adv, stats)
		if err != nil {
			t.Fatal(err)
		}
		// t1 members have 2 + 3 + 1 = 6 steps; t2 has 1 + 1 unless dropped.
		wantRows := 6
		if zv == ZeroVarianceKeep {
			wantRows = 8
		}
		if len(rows) != wantRows {
			t.Fatalf("%s: %d rows, want %d", zv, len(rows), wantRows)
		}
		for _, r := range rows[:2] {
			if r.TrajectoryID != "A0" || r.Advantage != adv[0] || r.GroupID != "outcome/run/App/t1" || r.Candidate != 0 {
				t.Errorf("row %+v", r)
			}
		}
		if rows[2].TrajectoryID != "A1" || rows[2].Step != 0 || rows[4].Step != 2 || rows[4].Reward != 1 {
			t.Errorf("rows %+v", rows[2:5])
		}
	}
	if _, err := b.Broadcast(nil, nil); err == nil {
		t.Error("Broadcast accepted mismatched slices")
	}
}

func TestOutcomeGroupsErrorsAndOrder(t *testing.T) {
	a := outcomeTraj("A", "r", "X/1", 0, 1)
	if _, err := BuildOutcomeGroups([]Judged{{a, judgement("A", vClean)}, {a, judgement("A", vClean)}}, DefaultOutcomeConfig()); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := BuildOutcomeGroups([]Judged{{nil, nil}}, DefaultOutcomeConfig()); err == nil {
		t.Error("nil trajectory accepted")
	}
	if _, err := BuildOutcomeGroups([]Judged{{a, judgement("B", vClean)}}, DefaultOutcomeConfig()); err == nil {
		t.Error("mismatched judgement accepted")
	}
	b, err := BuildOutcomeGroups(nil, DefaultOutcomeConfig())
	if err != nil || len(b.Groups) != 0 || !slices.Equal(b.Offsets, []int{0}) {
		t.Fatalf("empty: %+v %v", b, err)
	}
	if adv, stats, _, err := b.Advantages(DefaultEstimator()); err != nil || len(adv) != 0 || len(stats) != 0 {
		t.Errorf("empty advantages: %v %v %v", adv, stats, err)
	}
	// Order of items does not matter.
	mk := func() []Judged {
		var out []Judged
		for _, id := range []string{"Q", "P", "S", "R"} {
			tr := outcomeTraj(id, "r"+id[:0], "X/"+map[string]string{"P": "1", "Q": "2", "R": "1", "S": "2"}[id], int(id[0]-'P'), 1)
			out = append(out, Judged{tr, judgement(id, vClean)})
		}
		return out
	}
	x, _ := BuildOutcomeGroups(mk(), DefaultOutcomeConfig())
	items := mk()
	slices.Reverse(items)
	y, _ := BuildOutcomeGroups(items, DefaultOutcomeConfig())
	for i := range x.Members {
		if x.Members[i].ID != y.Members[i].ID {
			t.Fatalf("order depends on input: %v vs %v", x.Members, y.Members)
		}
	}
}

// TestNotJudgedIsExcluded: a judgement the judge recorded as not judged
// (no model saw the trajectory) labels nothing and is excluded from
// outcome groups, like an undecided one, instead of failing the group.
func TestNotJudgedIsExcluded(t *testing.T) {
	nj := func(tr *traj.Trajectory) *traj.Judgement {
		j := judgement(tr.ID, nil)
		j.Decision, j.Reason = traj.NotJudged, "no frames to show"
		return j
	}
	tr := outcomeTraj("T1", "r", "A/1", 0, 3)
	labels, err := LabelSteps(tr, nj(tr), LabelModePrefix)
	if err != nil || !slices.Equal(labels, []Label{LabelNone, LabelNone, LabelNone}) {
		t.Errorf("LabelSteps = %v, %v; want no labels", labels, err)
	}
	if r, why, err := OutcomeReward(tr, nj(tr), DefaultOutcomeConfig()); err != nil || why != ExcludedNoJudge || r != 0 {
		t.Errorf("OutcomeReward = %v, %q, %v; want excluded as %q", r, why, err, ExcludedNoJudge)
	}
	a, b := outcomeTraj("T2", "r", "A/1", 1, 2), outcomeTraj("T3", "r", "A/1", 2, 2)
	batch, err := BuildOutcomeGroups([]Judged{{tr, nj(tr)}, {a, judgement(a.ID, vClean)}, {b, judgement(b.ID, vFail)}}, DefaultOutcomeConfig())
	if err != nil {
		t.Fatalf("a not-judged member fails its group: %v", err)
	}
	if len(batch.Excluded) != 1 || batch.Excluded[0].ID != "T1" || batch.Excluded[0].Reason != ExcludedNoJudge {
		t.Errorf("excluded %+v, want T1 as %q", batch.Excluded, ExcludedNoJudge)
	}
}
