package traj_test

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/codapipe/codapipe/pkg/traj"
)

// document reads one of the golden documents of testdata/, as a consumer
// reads a message body from the bus or the archive.
func document(name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		log.Fatal(err)
	}
	return b
}

// trajectory decodes the golden trajectory: two steps of a ChimeraX task.
func trajectory() *traj.Trajectory {
	t, err := traj.DecodeTrajectory(document("trajectory.golden.json"))
	if err != nil {
		log.Fatal(err)
	}
	return t
}

// judgement decodes the golden judgement of it (a clean success).
func judgement() *traj.Judgement {
	j, err := traj.DecodeJudgement(document("judgement.golden.json"))
	if err != nil {
		log.Fatal(err)
	}
	return j
}

func ExampleNewID() {
	before := time.Now().Truncate(time.Millisecond)
	a, b := traj.NewID(), traj.NewID()
	created, err := traj.IDTime(a)
	if err != nil {
		log.Fatal(err)
	}
	// 26 characters; ids of one process sort in creation order.
	fmt.Println(len(a), a < b, !created.Before(before))
	// Output: 26 true true
}

func ExampleIDTime() {
	// The first 10 characters are the creation time in Unix milliseconds.
	t, err := traj.IDTime("01KAKQ3J0G7ZR4X2M5T8V9W6YB")
	fmt.Println(t, err)
	_, err = traj.IDTime("01KAKQ3J0G7ZR4X2M5T8V9W6Y")
	fmt.Println(err)
	// Output:
	// 2025-11-21 17:24:03.216 +0000 UTC <nil>
	// id "01KAKQ3J0G7ZR4X2M5T8V9W6Y": want 26 characters, got 25
}

func ExampleEpisodeID() {
	start := time.Date(2026, 11, 21, 2, 0, 0, 0, time.UTC)
	// Sample k of a task in a run always gets the same id, so a re-run
	// after a crash publishes a duplicate the bus drops.
	for k := range 3 {
		fmt.Println(k, traj.EpisodeID(start, "nightly-2026-11-21-chimerax", "ChimeraX/A-01", k))
	}
	t, _ := traj.IDTime(traj.EpisodeID(start, "nightly-2026-11-21-chimerax", "ChimeraX/A-01", 2))
	fmt.Println(t.Equal(start))
	// Output:
	// 0 01M7XX9X8034H0RBGCJY9DJ0B8
	// 1 01M7XX9X80YKR2DNTTJT4MJTHC
	// 2 01M7XX9X8006KQEXVZF0KW3JDR
	// true
}

func ExampleGroupID() {
	// The step-mode GRPO group of step 3 (0-based) of a trajectory.
	fmt.Println(traj.GroupID("01KAKQ3J0G7ZR4X2M5T8V9W6YB", 3))
	// Output: 01KAKQ3J0G7ZR4X2M5T8V9W6YB/3
}

func ExampleParseGroupID() {
	id, step, err := traj.ParseGroupID("01KAKQ3J0G7ZR4X2M5T8V9W6YB/3")
	fmt.Println(id, step, err)
	_, _, err = traj.ParseGroupID("01KAKQ3J0G7ZR4X2M5T8V9W6YB/-1")
	fmt.Println(err)
	// Output:
	// 01KAKQ3J0G7ZR4X2M5T8V9W6YB 3 <nil>
	// group id "01KAKQ3J0G7ZR4X2M5T8V9W6YB/-1": step "-1" is not a non-negative integer
}

func ExampleMarshal() {
	// Decode a trajectory and encode it again: the bytes are the same.
	in := document("trajectory.golden.json")
	t, err := traj.DecodeTrajectory(in)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.ID, len(t.Steps), "steps")
	fmt.Printf("%q\n", t.Steps[1].Candidates[0].Action.Text)
	out, err := traj.Marshal(t)
	fmt.Println(bytes.Equal(in, out), err)
	// Output:
	// 01KAKQ3J0G7ZR4X2M5T8V9W6YB 2 steps
	// "open 2olx\n"
	// true <nil>
}

func ExampleMarshalCompact() {
	// One line, no final newline, no HTML escaping: the form sent on the bus.
	b, _ := traj.MarshalCompact(&traj.Action{Type: traj.TypeText, Text: "x < y\n"})
	fmt.Println(string(b))
	b, _ = traj.MarshalCompact(&traj.Action{Type: traj.Click, Point: &traj.Point{X: 0.5, Y: 0.25}})
	fmt.Println(string(b))
	// Output:
	// {"type":"type","text":"x < y\n"}
	// {"type":"click","point":{"x":0.5,"y":0.25}}
}

func ExampleDecodeTrajectory() {
	// Decoding is strict: an unknown field or a newer schema_version is an
	// error, so a producer with a newer contract is noticed.
	_, err := traj.DecodeTrajectory([]byte(`{"schema_version":8,"colour":"red"}`))
	fmt.Println(err)
	_, err = traj.DecodeTrajectory([]byte(`{"schema_version":9}`))
	fmt.Println(errors.Is(err, traj.ErrSchemaVersion))
	// Output:
	// traj: decode trajectory: json: unknown field "colour"
	// true
}

func ExampleTrajectory_Validate() {
	t := trajectory()
	t.Steps[0].Executed = 5 // there are three candidates
	t.Steps[1].Candidates[2].Action.End = &traj.Point{X: 1.5, Y: 0.45}

	err := t.Validate()
	fmt.Println(err)
	var ve *traj.ValidationError
	if errors.As(err, &ve) {
		fmt.Println(len(ve.Fields), ve.Has("steps[0].executed"))
	}
	// Output:
	// traj: invalid trajectory 01KAKQ3J0G7ZR4X2M5T8V9W6YB: 2 problem(s)
	//   steps[0].executed: want -1..2, got 5
	//   steps[1].candidates[2].action.end: outside [0,1]: (1.5, 0.45)
	// 2 true
}

func ExampleAction_Validate() {
	drag := &traj.Action{Type: traj.Drag, Start: &traj.Point{X: 0.1, Y: 0.2}}
	fmt.Println(drag.Validate())
	click := &traj.Action{Type: traj.Click, Point: &traj.Point{X: 0.1, Y: 0.2}}
	fmt.Println(click.Validate())
	// Output:
	// traj: invalid action: 1 problem(s)
	//   action.end: required for drag
	// <nil>
}

func ExampleActionType_Known() {
	for _, t := range []traj.ActionType{traj.Click, traj.Scroll, traj.TypeText, traj.Hotkey, "swipe"} {
		fmt.Printf("%-7s known=%t pointed=%t keyed=%t\n", t, t.Known(), t.Pointed(), t.Keyed())
	}
	// Output:
	// click   known=true pointed=true keyed=false
	// scroll  known=true pointed=true keyed=false
	// type    known=true pointed=true keyed=false
	// hotkey  known=true pointed=false keyed=true
	// swipe   known=false pointed=false keyed=false
}

func ExampleModelRef_Space() {
	// A version 1 document records no coordinate space: its points were
	// parsed on the 0–1000 grid.
	v1 := traj.ModelRef{Model: "UI-TARS-7B-DPO"}
	fmt.Println(v1.Space().Space)
	v4 := traj.ModelRef{Model: "UI-TARS-1.5-7B", Coords: &traj.Coords{Space: traj.PixelsResized, Factor: 28, MinPixels: 3136, MaxPixels: 12845056}}
	fmt.Printf("%+v\n", v4.Space())
	// Output:
	// grid1000
	// {Space:pixels-resized Factor:28 MinPixels:3136 MaxPixels:12845056}
}

func ExampleCoords_Check() {
	fmt.Println(traj.Coords{Space: traj.Grid1000}.Check())
	fmt.Println(traj.Coords{Space: traj.PixelsResized, Factor: 28}.Check())
	fmt.Println(traj.Coords{Space: "pixels"}.Check())
	// Output:
	// <nil>
	// pixels-resized needs factor >= 1 and 1 <= min_pixels <= max_pixels, got factor 28, min_pixels 0, max_pixels 0
	// unknown coordinate space "pixels" (want one of [grid1000 pixels-resized pixels-screen unit])
}

func ExampleOutcome_IsEnvError() {
	// An environment error is no verdict on the agent: never reward 0.
	fmt.Println(traj.Outcome{Kind: traj.OutcomeEnvError, Reason: "vm: screenshot timed out"}.IsEnvError())
	fmt.Println(traj.Outcome{Kind: traj.OutcomeStepLimit}.IsEnvError())
	// Output:
	// true
	// false
}

func ExampleVerdict_Decide() {
	// Step numbers in a verdict are 1-based, as the judge sees them.
	two := 2
	for _, v := range []traj.Verdict{
		{Correctness: true},
		{Correctness: true, Redundant: []int{3}},
		{Correctness: true, FirstErrorStep: &two},
		{Correctness: false, FirstErrorStep: &two},
	} {
		fmt.Println(v.Clean(), v.Decide())
	}
	// Output:
	// true clean_success
	// false success_redundant
	// false success_redundant
	// false failure
}

func ExampleDecodeJudgement() {
	j, err := traj.DecodeJudgement(document("judgement.golden.json"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(j.TrajectoryID, j.Decision)
	for i, v := range j.Votes {
		// A vote without a verdict says why.
		fmt.Printf("vote %d: %s verdict=%t error=%q\n", i, v.Resolution, v.Verdict != nil, v.Error)
	}
	// Output:
	// 01KAKQ3J0G7ZR4X2M5T8V9W6YB clean_success
	// vote 0: 640x400 verdict=true error=""
	// vote 1: 1280x800 verdict=false error="no result dict in the answer"
}

func ExampleJudgement_Validate() {
	j := judgement()
	fmt.Println(j.Decision, j.Verdict.Decide(), j.Validate())

	// A decision must be the one its verdict implies.
	j.Decision = traj.Failure
	fmt.Println(j.Validate())
	// Output:
	// clean_success clean_success <nil>
	// traj: invalid judgement of 01KAKQ3J0G7ZR4X2M5T8V9W6YB: 1 problem(s)
	//   decision: verdict says "clean_success", decision is "failure"
}

func ExampleJudgement_Calls() {
	// Two votes: one answered at once, one asked three times.
	j := judgement()
	fmt.Println(len(j.Votes), j.Calls())
	// Output: 2 4
}

func ExampleJudgeVersion_ID() {
	v := judgement().Judge
	fmt.Println(v.Policy, v.ID())
	// Another voting policy is another judge version.
	v.Policy = "majority@4"
	fmt.Println(v.Policy, v.ID())
	// Output:
	// unanimous@4+lowres f2f34d7c3631de70
	// majority@4 6bc020b9a6ddc806
}

func ExampleDecodeJudged() {
	// The document the judge publishes: judgement and trajectory together.
	msg, err := traj.MarshalCompact(&traj.Judged{SchemaVersion: traj.SchemaVersion, Judgement: *judgement(), Trajectory: *trajectory()})
	if err != nil {
		log.Fatal(err)
	}
	j, err := traj.DecodeJudged(msg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(j.Trajectory.ID, j.Judgement.Decision, j.Validate())

	// Each part's schema_version is checked.
	_, err = traj.DecodeJudged([]byte(`{"schema_version":4,"judgement":{"schema_version":9},"trajectory":{"schema_version":4}}`))
	fmt.Println(err)
	// Output:
	// 01KAKQ3J0G7ZR4X2M5T8V9W6YB clean_success <nil>
	// traj: decode judgement: schema_version 9, this build reads 1..8: unsupported schema_version
}

func ExampleJudged_Validate() {
	j := traj.Judged{SchemaVersion: traj.SchemaVersion, Judgement: *judgement(), Trajectory: *trajectory()}
	j.Judgement.TrajectoryID = "01KAKQ3J0G7ZR4X2M5T8V9W6YC"
	fmt.Println(j.Validate())
	// Output:
	// traj: invalid judged trajectory 01KAKQ3J0G7ZR4X2M5T8V9W6YB: 1 problem(s)
	//   judgement.trajectory_id: "01KAKQ3J0G7ZR4X2M5T8V9W6YC", but the trajectory is "01KAKQ3J0G7ZR4X2M5T8V9W6YB"
}
