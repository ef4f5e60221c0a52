package grpo_test

import (
	"errors"
	"fmt"
	"log"
	"math"

	"github.com/codapipe/codapipe/pkg/grpo"
	"github.com/codapipe/codapipe/pkg/traj"
)

func click(x, y float64) *traj.Action {
	return &traj.Action{Type: traj.Click, Point: &traj.Point{X: x, Y: y}}
}

func typed(s string) *traj.Action { return &traj.Action{Type: traj.TypeText, Text: s} }

func drag(x0, y0, x1, y1 float64) *traj.Action {
	return &traj.Action{Type: traj.Drag, Start: &traj.Point{X: x0, Y: y0}, End: &traj.Point{X: x1, Y: y1}}
}

// episode returns trajectory id of task ChimeraX/A-01 whose step i offered
// the candidate actions steps[i] (nil: the executor output did not parse);
// candidate 0 ran on the VM, as in CODA.
func episode(id string, steps ...[]*traj.Action) *traj.Trajectory {
	t := &traj.Trajectory{ID: id, Run: "nightly", Task: traj.TaskRef{ID: "ChimeraX/A-01", App: "ChimeraX"}}
	for i, actions := range steps {
		t.Steps = append(t.Steps, traj.Step{Index: i})
		for c, a := range actions {
			t.Steps[i].Candidates = append(t.Steps[i].Candidates, traj.Candidate{Index: c, Action: a})
		}
	}
	return t
}

// judge returns a judgement of t with verdict v and the decision it implies.
func judge(t *traj.Trajectory, v traj.Verdict) *traj.Judgement {
	return &traj.Judgement{TrajectoryID: t.ID, Verdict: &v, Decision: v.Decide()}
}

func ExampleScoreAction() {
	ref := click(0.42, 0.31) // what the executed candidate did
	for _, c := range []struct {
		name string
		a    *traj.Action
	}{
		{"click near", click(0.45, 0.38)}, // L1 = 0.1
		{"click far", click(0.95, 0.90)},  // L1 = 1.12: clipped to 0
		{"wrong type", typed("2OLX")},     // no distance term
		{"did not parse", nil},            // no action at all
	} {
		r := grpo.ScoreAction(c.a, ref)
		fmt.Printf("%-13s r = %.0f + %.2f = %.2f unparsed=%t\n", c.name, r.TypeMatch, r.Dist, r.Total, r.Unparsed)
	}
	// Output:
	// click near    r = 1 + 0.90 = 1.90 unparsed=false
	// click far     r = 1 + 0.00 = 1.00 unparsed=false
	// wrong type    r = 0 + 0.00 = 0.00 unparsed=false
	// did not parse r = 0 + 0.00 = 0.00 unparsed=true
}

func ExampleRewardConfig_Score() {
	// Typed text is compared character for character by default: case and
	// the final newline (Enter) change what lands in the application.
	exact := grpo.DefaultRewardConfig()
	loose := grpo.DefaultRewardConfig()
	loose.NormalizeTyped = true
	ref := typed("open 2olx\n")
	for _, a := range []*traj.Action{typed("open 2olx"), typed("Open 2OLX\n")} {
		fmt.Printf("%-13q exact %.2f  normalised %.2f\n", a.Text, exact.Score(a, ref).Total, loose.Score(a, ref).Total)
	}
	// Output:
	// "open 2olx"   exact 1.90  normalised 2.00
	// "Open 2OLX\n" exact 1.60  normalised 2.00
}

func ExampleRewardConfig_Score_drag() {
	c := grpo.DefaultRewardConfig()
	// IoU of the boxes the drags span: overlap 0.04 of a union 0.28.
	fmt.Printf("%.6f\n", c.Score(drag(0.3, 0.3, 0.7, 0.7), drag(0.1, 0.1, 0.5, 0.5)).Total)
	// Direction is ignored.
	fmt.Printf("%.6f\n", c.Score(drag(0.5, 0.5, 0.1, 0.1), drag(0.1, 0.1, 0.5, 0.5)).Total)
	// A slider drag has no height; it is given DragMinExtent (0.01), so an
	// overlap of 0.3 of the 0.5 the two span scores 0.6.
	slider, ref := drag(0.3, 0.5, 0.7, 0.5), drag(0.2, 0.5, 0.6, 0.5)
	fmt.Printf("%.6f\n", c.Score(slider, ref).Total)
	c.DragMinExtent = 0
	fmt.Printf("%.6f\n", c.Score(slider, ref).Total)
	// Output:
	// 1.142857
	// 2.000000
	// 1.600000
	// 1.000000
}

func ExampleRewardConfig_Validate() {
	c := grpo.DefaultRewardConfig()
	c.ScrollDirectionWeight = 1.5
	fmt.Println(c.Validate())
	// Score clamps the weight to 1: only the direction counts.
	up := &traj.Action{Type: traj.Scroll, Direction: traj.DirUp, Point: &traj.Point{X: 0.5, Y: 0.5}}
	down := &traj.Action{Type: traj.Scroll, Direction: traj.DirDown, Point: &traj.Point{X: 0.5, Y: 0.5}}
	fmt.Println(c.Score(up, down).Total, grpo.ScoreAction(up, down).Total)
	// Output:
	// grpo: reward config: scroll_direction_weight = 1.5, want a number in [0,1]
	// 1 1.5
}

func ExampleUsable() {
	fmt.Println(grpo.Usable(nil), grpo.Usable(&traj.Action{Type: "tap"}), grpo.Usable(click(0.5, 0.5)))
	// Output: false false true
}

func ExampleTextSimilarity() {
	// 1 − lev(a, b)/max(|a|, |b|) over code points.
	fmt.Printf("%.6f\n", grpo.TextSimilarity("hallo", "hello"))
	fmt.Printf("%.6f\n", grpo.TextSimilarity("héllo", "hello"))
	fmt.Printf("%.6f\n", grpo.TextSimilarity("kitten", "sitting"))
	fmt.Printf("%.6f\n", grpo.TextSimilarity("", ""))
	// Output:
	// 0.800000
	// 0.800000
	// 0.571429
	// 1.000000
}

func ExampleEditDistance() {
	fmt.Println(grpo.EditDistance("kitten", "sitting"), grpo.EditDistance("日本語", "日本"), grpo.EditDistance("flaw", "lawn"))
	// Output: 3 1 2
}

func ExampleDefaultEstimator() {
	// The step-mode group of 8 of docs/grpo.md §6: A = (r − μ)/(σ + 1e-6),
	// σ with divisor n−1.
	e := grpo.DefaultEstimator()
	adv, st, err := e.Group([]float64{2, 1.7, 1.2, 1, 0, 1.9, 0, 1.2})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(e)
	fmt.Printf("mean %.6f std %.6f\n", st.Mean, st.Std)
	fmt.Printf("%.6f\n", adv)
	// Output:
	// grpo(std=unbiased,eps=1e-06,zero_variance=keep,tol=1e-09)
	// mean 1.125000 std 0.779652
	// [1.122294 0.737508 0.096197 -0.160328 -1.442950 0.994032 -1.442950 0.096197]
}

func ExamplePreset() {
	for _, name := range []string{"codapipe", "drgrpo", "rloo"} {
		e, err := grpo.Preset(name)
		if err != nil {
			log.Fatal(err)
		}
		// μ = 1, σ = √(2/3); rloo: 2 − (1+0+1)/3 = 4/3.
		adv, _, _ := e.Group([]float64{2, 1, 0, 1})
		// All rewards equal: no signal, every advantage is 0.
		flat, st, _ := e.Group([]float64{1, 1, 1})
		fmt.Printf("%-6s %.4f %v %s\n", e.Method, adv, flat, st.Reason)
	}
	// Output:
	// grpo   [1.2247 0.0000 -1.2247 0.0000] [0 0 0] zero_variance
	// drgrpo [1.0000 0.0000 -1.0000 0.0000] [0 0 0] zero_variance
	// rloo   [1.3333 0.0000 -1.3333 0.0000] [0 0 0] zero_variance
}

func ExamplePresetNames() {
	fmt.Println(grpo.PresetNames())
	// Output: [codapipe drgrpo openrlhf rllm rloo trl verl verl-drgrpo]
}

func ExampleEstimator_String() {
	// The configuration as recorded in shard metadata.
	rllm, _ := grpo.Preset("rllm")
	fmt.Println(rllm.String())
	// Output: grpo(std=population,eps=0,zero_variance=keep,tol=0,std_floor=1e-08)
}

func ExampleEstimator_Validate() {
	fmt.Println(grpo.Estimator{}.Validate())
	e := grpo.DefaultEstimator()
	e.Eps = -1
	fmt.Println(e.Validate())
	// Output:
	// grpo: estimator method "", want one of [grpo drgrpo rloo]
	// grpo: eps = -1, want a finite number >= 0
}

func ExampleEstimator_Advantages() {
	// Three groups laid out flat: [2 1 0] [1.5] [1 1].
	rewards := []float64{2, 1, 0, 1.5, 1, 1}
	offsets := grpo.OffsetsFromSizes([]int{3, 1, 2})
	e := grpo.DefaultEstimator()
	e.ZeroVariance = grpo.ZeroVarianceDrop // the singleton and [1 1] give no rows

	adv := make([]float64, len(rewards))
	stats := make([]grpo.GroupStats, len(offsets)-1)
	sum, err := e.Advantages(rewards, offsets, adv, stats)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%.6f\n", adv)
	for _, st := range stats {
		fmt.Printf("offset %d size %d dropped=%t reason=%q\n", st.Offset, st.Size, st.Dropped, st.Reason)
	}
	fmt.Printf("%+v\n", sum)
	// Output:
	// [0.999999 0.000000 -0.999999 0.000000 0.000000 0.000000]
	// offset 0 size 3 dropped=false reason=""
	// offset 3 size 1 dropped=true reason="singleton"
	// offset 4 size 2 dropped=true reason="zero_variance"
	// {Groups:3 Candidates:6 KeptGroups:1 KeptCandidates:3 ZeroVariance:2 DroppedGroups:2 DroppedCandidates:3 DroppedEmpty:0 DroppedSingleton:1 DroppedZeroVar:1}
}

func ExampleEstimator_Group() {
	// A group of one never divides by n−1 = 0: advantage 0, or dropped.
	keep := grpo.DefaultEstimator()
	drop := keep
	drop.ZeroVariance = grpo.ZeroVarianceDrop
	for _, e := range []grpo.Estimator{keep, drop} {
		adv, st, _ := e.Group([]float64{1.7})
		fmt.Println(e.ZeroVariance, adv, st.Dropped, st.Reason)
	}
	_, st, _ := keep.Group(nil)
	fmt.Println("empty:", st.Dropped, st.Reason)
	// Output:
	// keep [0] false singleton
	// drop [0] true singleton
	// empty: true empty
}

func ExampleSummary_Add() {
	var total grpo.Summary
	e := grpo.DefaultEstimator()
	for _, batch := range [][]float64{{1, 0, 0, 1}, {1, 1, 1, 1}} {
		sum, err := e.Advantages(batch, grpo.UniformOffsets(2, 2), make([]float64, 4), nil)
		if err != nil {
			log.Fatal(err)
		}
		total.Add(sum)
	}
	fmt.Println(total.Groups, total.Candidates, total.ZeroVariance, total.KeptGroups)
	// Output: 4 8 2 4
}

func ExampleRewardError() {
	rewards := []float64{1, 0, math.NaN(), 1}
	_, err := grpo.DefaultEstimator().Advantages(rewards, grpo.UniformOffsets(2, 2), make([]float64, 4), nil)
	fmt.Println(err)
	var re *grpo.RewardError
	if errors.As(err, &re) {
		fmt.Println(re.Group, re.Index, re.Flat)
	}
	// Output:
	// grpo: group 1: reward 0 (flat index 2) is NaN: NaN
	// 1 0 2
}

func ExampleUniformOffsets() {
	fmt.Println(grpo.UniformOffsets(3, 8))
	// Offsets must end at len(rewards).
	_, err := grpo.DefaultEstimator().Advantages(make([]float64, 20), grpo.UniformOffsets(3, 8), make([]float64, 20), nil)
	fmt.Println(errors.Is(err, grpo.ErrShape))
	// Output:
	// [0 8 16 24]
	// true
}

func ExampleOffsetsFromSizes() {
	fmt.Println(grpo.OffsetsFromSizes([]int{3, 1, 2}))
	// Output: [0 3 4 6]
}

func ExampleLabelSteps() {
	// A clean success: every step is positive, except one whose executed
	// action did not parse (it has no reference action).
	t := episode("T1",
		[]*traj.Action{click(0.5, 0.5), click(0.6, 0.5)},
		[]*traj.Action{nil, click(0.6, 0.5)},
		[]*traj.Action{typed("2olx"), typed("2OLX")},
	)
	labels, err := grpo.LabelSteps(t, judge(t, traj.Verdict{Correctness: true}), grpo.LabelModeClean)
	fmt.Println(labels, err)
	// A failure gives nothing in CODA's clean mode.
	labels, err = grpo.LabelSteps(t, judge(t, traj.Verdict{Correctness: false}), grpo.LabelModeClean)
	fmt.Println(labels, err)
	// Output:
	// [positive none positive] <nil>
	// [none none none] <nil>
}

func ExampleLabelSteps_prefix() {
	var steps [][]*traj.Action
	for range 6 {
		steps = append(steps, []*traj.Action{click(0.5, 0.5), click(0.2, 0.2)})
	}
	t := episode("T2", steps...)
	// The judge numbers steps from 1: first error at judge step 5 makes
	// judge steps 1–3 (indices 0–2) positive and judge step 4 negative.
	e := 5
	labels, err := grpo.LabelSteps(t, judge(t, traj.Verdict{FirstErrorStep: &e}), grpo.LabelModePrefix)
	fmt.Println(labels, err)
	e = 2 // e ≤ 2 gives no labels
	labels, err = grpo.LabelSteps(t, judge(t, traj.Verdict{FirstErrorStep: &e}), grpo.LabelModePrefix)
	fmt.Println(labels, err)
	// Output:
	// [positive positive positive negative none none] <nil>
	// [none none none none none none] <nil>
}

func ExampleExecutedAction() {
	t := episode("T3", []*traj.Action{click(0.5, 0.5), typed("x")}, []*traj.Action{nil, typed("x")})
	fmt.Println(grpo.ExecutedAction(&t.Steps[0]).Type)
	fmt.Println(grpo.ExecutedAction(&t.Steps[1])) // did not parse
	t.Steps[0].Executed = -1                      // nothing ran
	fmt.Println(grpo.ExecutedAction(&t.Steps[0]))
	// Output:
	// click
	// <nil>
	// <nil>
}

func ExampleStepBatch() {
	// A clean success with G = 3: at each step candidate 0 ran and the
	// other three form the step's group, scored against it.
	t := episode("01KAKQ3J0G7ZR4X2M5T8V9W6YB",
		[]*traj.Action{click(0.5, 0.5), click(0.5, 0.5), click(0, 0), typed("x")},
		[]*traj.Action{typed("open 2olx\n"), typed("open 2olx\n"), typed("open 2olx"), nil},
	)
	labels, err := grpo.LabelSteps(t, judge(t, traj.Verdict{Correctness: true}), grpo.LabelModeClean)
	if err != nil {
		log.Fatal(err)
	}
	var b grpo.StepBatch
	if _, err := b.Add(t, labels, grpo.DefaultStepOptions()); err != nil {
		log.Fatal(err)
	}
	adv, _, _, err := b.Advantages(grpo.DefaultEstimator())
	if err != nil {
		log.Fatal(err)
	}
	for _, g := range b.Groups {
		rows := b.Rewards[g.Offset : g.Offset+g.Size]
		fmt.Printf("%s %s %.2f %.6f\n", g.ID, g.Reference.Type, rows, adv[g.Offset:g.Offset+g.Size])
	}
	fmt.Println("unparsed:", b.Counts.Unparsed)
	// Output:
	// 01KAKQ3J0G7ZR4X2M5T8V9W6YB/0 click [2.00 1.00 0.00] [0.999999 0.000000 -0.999999]
	// 01KAKQ3J0G7ZR4X2M5T8V9W6YB/1 type [2.00 1.90 0.00] [0.621149 0.532413 -1.153562]
	// unparsed: 1
}

func ExampleDefaultStepOptions() {
	t := episode("T4", []*traj.Action{click(0.5, 0.5), click(0.5, 0.5), nil})
	labels := []grpo.Label{grpo.LabelPositive}
	// By default an unparsed candidate stays in its group with reward 0;
	// SkipUnparsed leaves it out.
	skip := grpo.DefaultStepOptions()
	skip.SkipUnparsed = true
	var b grpo.StepBatch
	for _, opt := range []grpo.StepOptions{grpo.DefaultStepOptions(), skip} {
		b.Reset() // reuse the batch's memory
		if _, err := b.Add(t, labels, opt); err != nil {
			log.Fatal(err)
		}
		fmt.Println(b.Rewards, b.Candidates, b.Counts.Skipped)
	}
	// Output:
	// [2 0] [1 2] 0
	// [2] [1] 1
}

// task returns the judged samples of one task, sample k judged decisions[k];
// an empty decision is an environment error, which the judge does not judge.
func task(decisions ...traj.Decision) []grpo.Judged {
	verdicts := map[traj.Decision]traj.Verdict{
		traj.CleanSuccess:     {Correctness: true},
		traj.RedundantSuccess: {Correctness: true, Redundant: []int{2}},
		traj.Failure:          {Correctness: false},
	}
	var items []grpo.Judged
	for k, d := range decisions {
		t := episode(fmt.Sprintf("S%d", k), []*traj.Action{click(0.5, 0.5)}, []*traj.Action{typed("2olx")})
		t.Sample, t.Samples = k, len(decisions)
		if d == "" {
			t.Outcome = traj.Outcome{Kind: traj.OutcomeEnvError, Reason: "vm: guest server 500"}
			items = append(items, grpo.Judged{Trajectory: t, Judgement: &traj.Judgement{TrajectoryID: t.ID, Decision: traj.NotJudged}})
			continue
		}
		items = append(items, grpo.Judged{Trajectory: t, Judgement: judge(t, verdicts[d])})
	}
	return items
}

func ExampleOutcomeReward() {
	items := task(traj.CleanSuccess, traj.RedundantSuccess, traj.Failure, "")
	partial := grpo.DefaultOutcomeConfig()
	partial.RedundantReward = 0.5
	for _, it := range items {
		r, excluded, err := grpo.OutcomeReward(it.Trajectory, it.Judgement, grpo.DefaultOutcomeConfig())
		r2, _, _ := grpo.OutcomeReward(it.Trajectory, it.Judgement, partial)
		fmt.Printf("%-17s %v %v %q %v\n", it.Judgement.Decision, r, r2, excluded, err)
	}
	// Output:
	// clean_success     1 1 "" <nil>
	// success_redundant 0 0.5 "" <nil>
	// failure           0 0 "" <nil>
	// not_judged        0 0 "env_error" <nil>
}

func ExampleOutcomeConfig_Validate() {
	c := grpo.DefaultOutcomeConfig()
	fmt.Printf("%+v\n", c)
	c.Eval = "vote"
	fmt.Println(c.Validate())
	// Output:
	// {CleanReward:1 RedundantReward:0 FailureReward:0 Eval:ignore}
	// grpo: outcome config: eval policy "vote", want "ignore", "require" or "mean"
}

func ExampleBuildOutcomeGroups() {
	// K = 8 samples of one task (docs/grpo.md §6): 3 clean successes,
	// 3 failures, a success with redundancy and an environment error.
	c, f := traj.CleanSuccess, traj.Failure
	b, err := grpo.BuildOutcomeGroups(task(c, f, c, traj.RedundantSuccess, f, "", c, f), grpo.DefaultOutcomeConfig())
	if err != nil {
		log.Fatal(err)
	}
	adv, _, _, err := b.Advantages(grpo.DefaultEstimator())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(b.Groups[0].ID, b.Groups[0].Size)
	fmt.Println(b.Rewards)
	fmt.Printf("%.6f\n", adv)
	fmt.Printf("%+v\n", b.Excluded)
	// Output:
	// outcome/nightly/ChimeraX/A-01 7
	// [1 0 1 0 0 1 0]
	// [1.069043 -0.801782 1.069043 -0.801782 -0.801782 1.069043 -0.801782]
	// [{ID:S5 Run:nightly TaskID:ChimeraX/A-01 Reason:env_error}]
}

func ExampleOutcomeBatch_Broadcast() {
	b, err := grpo.BuildOutcomeGroups(task(traj.CleanSuccess, traj.Failure), grpo.DefaultOutcomeConfig())
	if err != nil {
		log.Fatal(err)
	}
	adv, stats, _, err := b.Advantages(grpo.DefaultEstimator())
	if err != nil {
		log.Fatal(err)
	}
	// Every executed step of a trajectory gets its trajectory's advantage.
	rows, err := b.Broadcast(adv, stats)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range rows {
		fmt.Printf("%s step %d candidate %d: %.6f\n", r.TrajectoryID, r.Step, r.Candidate, r.Advantage)
	}
	// Output:
	// S0 step 0 candidate 0: 0.707106
	// S0 step 1 candidate 0: 0.707106
	// S1 step 0 candidate 0: -0.707106
	// S1 step 1 candidate 0: -0.707106
}

func ExampleOutcomeGroupID() {
	fmt.Println(grpo.OutcomeGroupID("nightly", "ChimeraX/A-01"))
	// Output: outcome/nightly/ChimeraX/A-01
}
