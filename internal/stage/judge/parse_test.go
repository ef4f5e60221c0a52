package judge

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/pkg/traj"
)

func ip(n int) *int { return &n }

func TestParseAnswer(t *testing.T) {
	clean := traj.Verdict{Correctness: true, Redundant: []int{}, Optimized: true}
	cases := []struct {
		name     string
		in       string
		want     traj.Verdict
		captions []string
	}{
		{"json in a fence (the simulator's form)",
			"Frame 1: ChimeraX is open.\nFrame 2: 2olx is loaded.\nResult:\n```json\n" +
				`{"Correctness":true,"Redundant":[],"Optimized":true,"First_Error_Step":null,"Error_Type":"","Correct_Action":""}` + "\n```",
			clean, []string{"ChimeraX is open.", "2olx is loaded."}},
		{"python literal in res_dict tags",
			"Step 1: the desktop.\nStep 2 - KAlgebra shows x=3.\n<res_dict>\n{'Correctness': False, 'Redundant': [], 'Optimized': False, 'First_Error_Step': 2, 'Error_Type': \"wrong value, it's 3\", 'Correct_Action': 'Type x=4',}\n</res_dict>",
			traj.Verdict{Correctness: false, Redundant: []int{}, FirstErrorStep: ip(2), ErrorType: "wrong value, it's 3", CorrectAction: "Type x=4"},
			[]string{"the desktop.", "KAlgebra shows x=3."}},
		{"prose around a bare dict",
			"Looking at the frames, the agent opened the file and saved it. My verdict: {\"Correctness\": true, \"Redundant\": [3, 4], \"Optimized\": false, \"First_Error_Step\": None} — that is all.",
			traj.Verdict{Correctness: true, Redundant: []int{3, 4}}, nil},
		{"last dict counts", "Draft: {'Correctness': True}\nOn reflection: {'Correctness': False, 'First_Error_Step': 1}",
			traj.Verdict{Redundant: []int{}, FirstErrorStep: ip(1)}, nil},
		{"wrapped", `{"analysis": "fine", "result": {"correctness": "yes", "redundant": "2, 5"}}`,
			traj.Verdict{Correctness: true, Redundant: []int{2, 5}}, nil},
		{"spaced keys, strings for numbers", "{'correctness': 'False', 'first error step': 'Step 3', 'error type': None}",
			traj.Verdict{Redundant: []int{}, FirstErrorStep: ip(3)}, nil},
		{"tuple and single number", "{'Correctness': True, 'Redundant': (2,), 'Optimized': True}",
			traj.Verdict{Correctness: true, Redundant: []int{2}, Optimized: true}, nil},
		{"none-like first error", `{"Correctness": false, "First_Error_Step": -1, "Redundant": null}`,
			traj.Verdict{Redundant: []int{}}, nil},
		{"bare keys", "{Correctness: True, Redundant: [], Optimized: True}", clean, nil},
		{"full-width caption colon", "Frame 1：the desktop\n{'Correctness': True, 'Optimized': True}", clean, []string{"the desktop"}},
		{"unicode escape", `{"Correctness": true, "Optimized": true, "Error_Type": "\u00e9"}`,
			traj.Verdict{Correctness: true, Redundant: []int{}, Optimized: true, ErrorType: "é"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := ParseAnswer(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a.Verdict, c.want) {
				t.Errorf("verdict %+v, want %+v", a.Verdict, c.want)
			}
			if c.captions != nil && !reflect.DeepEqual(a.Captions, c.captions) {
				t.Errorf("captions %q, want %q", a.Captions, c.captions)
			}
		})
	}
}

func TestParseAnswerRejects(t *testing.T) {
	cases := []struct{ name, in, reason string }{
		{"empty", "  ", "empty answer"},
		{"prose only", "Overall, the agent completed the task.", "no result dict with a Correctness key"},
		{"wrong keys (the simulator's malformed form)", `Result: {"Success": true, "Error_Step": 2}`, "a dict without one was found"},
		{"cut off", "Result:\n```json\n{\"Correctness\":true,\"Redundant\":[", "does not parse"},
		{"correctness not a bool", `{"Correctness": "maybe"}`, "Correctness: want True or False"},
		{"correctness None", `{"Correctness": None}`, "Correctness: missing"},
		{"bad step", `{"Correctness": false, "First_Error_Step": 2.5}`, "First_Error_Step: want a whole step number"},
		{"bad redundant", `{"Correctness": true, "Redundant": {"a": 1}}`, "Redundant: want a list"},
		{"unknown word", `{"Correctness": maybe}`, "does not parse"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseAnswer(c.in)
			var pe *ParseError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("err = %v, want a *ParseError containing %q", err, c.reason)
			}
		})
	}
}

// FuzzParseAnswer: ParseAnswer never panics, fails only with a
// *ParseError, and a verdict it returns is valid by the contract.
func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{
		"Frame 1: x\n```json\n{\"Correctness\":true,\"Redundant\":[],\"Optimized\":true,\"First_Error_Step\":null}\n```",
		"<res_dict>{'Correctness': False, 'First_Error_Step': 2, 'Redundant': (1, 2,),}</res_dict>",
		`{"result": {"correctness": "yes", "redundant": "2, 5"}}`, "{{{{[[[('", `{"Correctness": "\u00e9\`,
		"{Correctness: True, Redundant: [], Optimized: True}", "{'Correctness': 1e999}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAnswer(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Reason == "" {
				t.Fatalf("error %v is not a *ParseError with a reason", err)
			}
			return
		}
		j := traj.Judgement{SchemaVersion: traj.SchemaVersion, TrajectoryID: "01KAKQ3J0G7ZR4X2M5T8V9W6YB", Run: "r", TaskID: "A/1", App: "A",
			Verdict: &a.Verdict, Decision: a.Verdict.Decide(), Votes: []traj.Vote{{Model: "m", Verdict: &a.Verdict}},
			Judge: traj.JudgeVersion{PromptSHA256: "x"}, JudgedAt: testTime}
		if err := j.Validate(); err != nil {
			t.Fatalf("ParseAnswer(%q) gave an invalid verdict %+v: %v", s, a.Verdict, err)
		}
	})
}
