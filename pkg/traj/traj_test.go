package traj

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func ptr[T any](v T) *T { return &v }

const shot = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// exampleTrajectory is a small but complete trajectory: two steps of a
// ChimeraX task with G=2 (three candidates per step), one candidate that
// did not parse, one whose executor output held two actions (with its
// parse notes), and an evaluator result.
func exampleTrajectory() *Trajectory {
	t0 := time.Date(2026, 11, 21, 2, 0, 0, 0, time.UTC)
	return &Trajectory{
		SchemaVersion: SchemaVersion,
		ID:            "01KAKQ3J0G7ZR4X2M5T8V9W6YB",
		Run:           "nightly-2026-11-21-chimerax",
		Task: TaskRef{
			ID: "ChimeraX/A-01", App: "ChimeraX",
			Instruction: "Fetch 2OLX from PDB in ChimeraX.", StepLimit: 5,
			Source: "tasks/VM/ChimeraX/A-01.json",
		},
		Sample: 2, Samples: 8, Group: 2,
		Models: Models{
			Planner: ModelRef{Endpoint: "http://planner:8000/v1", Model: "Qwen2.5-VL-32B-Instruct", Checkpoint: "step-0400",
				Coords: &Coords{Space: Grid1000}, Sampling: &Sampling{Temperature: 1, TopP: 1, TopK: -1, RepetitionPenalty: 1, MaxTokens: 512}},
			Executor: ModelRef{Endpoint: "http://executor:8001/v1", Model: "UI-TARS-1.5-7B",
				Coords:   &Coords{Space: PixelsResized, Factor: 28, MinPixels: 3136, MaxPixels: 12845056},
				Sampling: &Sampling{Temperature: 0, TopP: 1, TopK: -1, RepetitionPenalty: 1, MaxTokens: 256, Stop: []string{"<|im_end|>"}}},
		},
		Prompts: "5d41402abc4b2a76b9719d911017c592ae6f4e5b1c7d2f2e0a3b8c9d1e2f3a4b",
		VM:      "sim-03",
		Steps: []Step{
			{
				Index:      0,
				Screenshot: ImageRef{SHA256: shot, Size: 143512, Width: 1280, Height: 800},
				// vLLM's prompt_token_ids (return_token_ids), abridged.
				PlanPromptTokenIDs: []int32{151644, 8948, 198},
				Candidates: []Candidate{
					{
						Index: 0, Plan: "Thought: The command line is at the bottom; I will click it.\nAction: click(start_box='(500,960)')",
						Thought:        "The command line is at the bottom; I will click it.",
						ExecutorOutput: "Thought: click the command line\nAction: click(start_box='(641,781)') then type(content='open 2olx')",
						Action:         &Action{Type: Click, Point: &Point{X: 641.0 / 1288, Y: 781.0 / 812}},
						ParseNotes: []string{
							`"then" joined 1 of the 2 actions to the action before it; all are kept, in order`,
							"the executor output holds 2 actions (click, type); only the first is executed, one action per step",
						},
						FinishReason: "stop", PlanTokens: Tokens{Prompt: 2210, Completion: 31}, ExecTokens: Tokens{Prompt: 1630, Completion: 18},
						PlanLogProbs: []float64{-0.125, -2.5}, PlanTokenIDs: []int32{14582, 25}, PlanMS: 812, ExecMS: 240,
					},
					{
						Index: 1, Plan: "Thought: Open the File menu to fetch from the PDB.\nAction: click(start_box='(20,12)')",
						Thought:        "Open the File menu to fetch from the PDB.",
						ExecutorOutput: "Action: click(start_box='(27,11)')",
						Action:         &Action{Type: Click, Point: &Point{X: 27.0 / 1288, Y: 11.0 / 812}},
						FinishReason:   "stop", PlanTokens: Tokens{Prompt: 2210, Completion: 22}, ExecTokens: Tokens{Prompt: 1630, Completion: 12},
						PlanMS: 812, ExecMS: 233,
					},
					{
						Index: 2, Plan: "Thought: Type the open command.\nAction: type(content='open 2olx')",
						Thought:        "Type the open command.",
						ExecutorOutput: "Action: tpye(content='open 2olx')",
						ParseError:     "uitars: offset 8: unknown action \"tpye\"",
						ParseErrorKind: ParseSyntax,
						FinishReason:   "stop", PlanTokens: Tokens{Prompt: 2210, Completion: 19}, ExecTokens: Tokens{Prompt: 1630, Completion: 11},
						PlanMS: 812, ExecMS: 251,
					},
				},
				Executed:  0,
				Code:      "pyautogui.click(637, 769)",
				Timings:   Timings{ObserveMS: 95, PlanMS: 812, GroundMS: 251, ExecMS: 120},
				StartedAt: t0,
			},
			{
				Index:      1,
				Screenshot: ImageRef{SHA256: strings.Repeat("ab", 32), Size: 151001, Width: 1280, Height: 800},
				Candidates: []Candidate{
					{
						Index: 0, Plan: "Thought: Now type the command \"open 2olx\" and press enter.\nAction: type(content='open 2olx\\n')",
						Thought:        "Now type the command \"open 2olx\" and press enter.",
						ExecutorOutput: "Action: type(content='open 2olx\\n')",
						Action:         &Action{Type: TypeText, Text: "open 2olx\n"},
						FinishReason:   "stop", PlanTokens: Tokens{Prompt: 2400, Completion: 30}, ExecTokens: Tokens{Prompt: 1700, Completion: 14},
						PlanMS: 790, ExecMS: 210,
					},
					{
						Index: 1, Plan: "Thought: Use the keyboard shortcut.\nAction: hotkey(key='ctrl o')",
						Thought: "Use the keyboard shortcut.", ExecutorOutput: "Action: hotkey(key='ctrl o')",
						Action:       &Action{Type: Hotkey, Keys: []string{"ctrl", "o"}},
						FinishReason: "stop", PlanTokens: Tokens{Prompt: 2400, Completion: 17}, ExecTokens: Tokens{Prompt: 1700, Completion: 10},
						PlanMS: 790, ExecMS: 190,
					},
					{
						Index: 2, Plan: "Thought: Drag the structure to look at it.\nAction: drag(start_box='(600,400)', end_box='(700,450)')",
						Thought: "Drag the structure to look at it.", ExecutorOutput: "Action: drag(start_box='(773,325)', end_box='(902,365)')",
						Action:       &Action{Type: Drag, Start: &Point{X: 773.0 / 1288, Y: 325.0 / 812}, End: &Point{X: 902.0 / 1288, Y: 365.0 / 812}},
						FinishReason: "stop", PlanTokens: Tokens{Prompt: 2400, Completion: 28}, ExecTokens: Tokens{Prompt: 1700, Completion: 20},
						PlanMS: 790, ExecMS: 205,
					},
				},
				Executed:  0,
				Code:      "pyautogui.write('open 2olx')\npyautogui.press('enter')",
				Timings:   Timings{ObserveMS: 90, PlanMS: 790, GroundMS: 210, ExecMS: 300},
				StartedAt: t0.Add(1400 * time.Millisecond),
			},
		},
		Outcome: Outcome{Kind: OutcomeStepLimit},
		Eval: &EvalResult{
			Passed: true,
			Checks: []CheckResult{{Type: "states", Passed: true, Detail: "_state_containers.models._models.(1,)._name == \"2olx\""}},
		},
		StartedAt: t0,
		EndedAt:   t0.Add(3 * time.Second),
	}
}

func exampleJudgement() *Judgement {
	v := Verdict{Correctness: true, Redundant: []int{}, Optimized: true}
	return &Judgement{
		SchemaVersion: SchemaVersion,
		TrajectoryID:  "01KAKQ3J0G7ZR4X2M5T8V9W6YB",
		Run:           "nightly-2026-11-21-chimerax",
		TaskID:        "ChimeraX/A-01", App: "ChimeraX",
		Verdict:  &v,
		Decision: CleanSuccess,
		Votes: []Vote{
			{Model: "Qwen2.5-VL-72B-Instruct", Endpoint: "http://judge:8002/v1", Resolution: "640x400", Temperature: 1, TopP: 0.6, Verdict: &v, Captions: []string{"ChimeraX with an empty view", "2olx loaded"}, LatencyMS: 3100, Attempts: 1},
			{Model: "Qwen2.5-VL-72B-Instruct", Endpoint: "http://judge:8002/v1", Resolution: "1280x800", Temperature: 1, TopP: 0.6, Error: "no result dict in the answer", Raw: "I think it worked.", LatencyMS: 2900, Attempts: 3},
		},
		Judge:     JudgeVersion{PromptSHA256: strings.Repeat("0f", 32), Models: []string{"Qwen2.5-VL-72B-Instruct"}, Policy: "unanimous@4+lowres"},
		JudgedAt:  time.Date(2026, 11, 21, 2, 5, 0, 0, time.UTC),
		LatencyMS: 6000,
	}
}

// testdata returns the content of testdata/name.
func testdata(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) []byte {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the encoding of the example (run with -update if the change is intended)\n got: %s", path, got)
	}
	return want
}

func TestGoldenRoundTrip(t *testing.T) {
	t.Run("trajectory", func(t *testing.T) {
		goldenRoundTrip(t, "trajectory.golden.json", exampleTrajectory(), DecodeTrajectory)
	})
	t.Run("judgement", func(t *testing.T) {
		goldenRoundTrip(t, "judgement.golden.json", exampleJudgement(), DecodeJudgement)
	})
}

// goldenRoundTrip checks that the valid example v encodes to the golden file
// name, and that the file decodes to a valid document that encodes to the
// same bytes.
func goldenRoundTrip[T interface{ Validate() error }](t *testing.T, name string, v T, decode func([]byte) (T, error)) {
	t.Helper()
	if err := v.Validate(); err != nil {
		t.Fatalf("example must be valid: %v", err)
	}
	enc, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := golden(t, name, enc)
	dec, err := decode(want)
	if err != nil {
		t.Fatal(err)
	}
	if err := dec.Validate(); err != nil {
		t.Fatalf("decoded golden is invalid: %v", err)
	}
	again, err := Marshal(dec)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, want) {
		t.Fatalf("decode+encode of the golden file is not byte-identical:\n%s", again)
	}
}

// TestDocsShowGolden keeps docs/contracts.md's full example true.
func TestDocsShowGolden(t *testing.T) {
	doc, err := os.ReadFile("../../docs/contracts.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"trajectory.golden.json", "judgement.golden.json"} {
		if !bytes.Contains(doc, testdata(t, name)) {
			t.Errorf("docs/contracts.md does not contain pkg/traj/testdata/%s verbatim; paste it in", name)
		}
	}
}

func TestValidateReportsEveryPlantedProblem(t *testing.T) {
	tr := exampleTrajectory()
	tr.Steps[1].Candidates[2].Action.End.X = 1.5                    // outside the screen
	tr.Steps[0].Candidates[1].Action = &Action{Type: "tripleclick"} // unknown type
	tr.Steps[1].Candidates[1].Action.Keys = nil                     // hotkey without keys
	tr.Steps[0].Screenshot.SHA256 = "XYZ"                           // not a hash
	tr.Steps[1].Index = 7                                           // wrong index
	tr.Steps[1].Candidates = tr.Steps[1].Candidates[:2]             // G+1 = 3 expected
	tr.Sample = 8                                                   // K = 8 → 0..7
	tr.Outcome = Outcome{Kind: OutcomeEnvError}                     // no reason
	tr.Run = ""
	tr.ID = "not-an-id"

	err := tr.Validate()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want *ValidationError, got %v", err)
	}
	want := map[string]string{
		"steps[1].candidates[2]":             "", // removed candidate: no path of its own
		"steps[0].candidates[1].action.type": "unknown action type",
		"steps[1].candidates[1].action.keys": "required for hotkey",
		"steps[0].screenshot.sha256":         "64 lower-case hex",
		"steps[1].index":                     "want 1",
		"steps[1].candidates":                "want 3 (group+1) candidates, got 2",
		"sample":                             "want 0..7, got 8",
		"outcome.reason":                     "required for env_error",
		"run":                                "required",
		"id":                                 "want 26 characters",
	}
	for path, msg := range want {
		if msg == "" {
			continue
		}
		t.Run(path, func(t *testing.T) {
			found := false
			for _, f := range ve.Fields {
				if f.Path == path && strings.Contains(f.Msg, msg) {
					found = true
				}
			}
			if !found {
				t.Errorf("no problem %q at %s in:\n%v", msg, path, err)
			}
		})
	}
	// The drag point was removed with the candidate; plant it again on a kept one.
	tr2 := exampleTrajectory()
	tr2.Steps[1].Candidates[2].Action.End.X = 1.5
	tr2.Steps[1].Candidates[2].Action.End.Y = 0.45
	err = tr2.Validate()
	if !errors.As(err, &ve) || !ve.Has("steps[1].candidates[2].action.end") {
		t.Fatalf("want a problem at steps[1].candidates[2].action.end, got %v", err)
	}
	if !strings.Contains(err.Error(), "steps[1].candidates[2].action.end: outside [0,1]: (1.5, 0.45)") {
		t.Errorf("message should name the path and the values: %v", err)
	}
}

func TestValidateActions(t *testing.T) {
	cases := []struct {
		name string
		a    Action
		bad  string // path with a problem, "" when valid
	}{
		{"click", Action{Type: Click, Point: &Point{0.5, 0.5}}, ""},
		{"click edge", Action{Type: Click, Point: &Point{0, 1}}, ""},
		{"click no point", Action{Type: Click}, "action.point"},
		{"click nan", Action{Type: Click, Point: &Point{X: nan(), Y: 0}}, "action.point"},
		{"double negative", Action{Type: LeftDouble, Point: &Point{-0.1, 0.5}}, "action.point"},
		{"right", Action{Type: RightSingle, Point: &Point{0.1, 0.2}}, ""},
		{"hover", Action{Type: Hover, Point: &Point{0.1, 0.2}}, ""},
		{"drag", Action{Type: Drag, Start: &Point{0.1, 0.2}, End: &Point{0.3, 0.4}}, ""},
		{"drag no end", Action{Type: Drag, Start: &Point{0.1, 0.2}}, "action.end"},
		{"drag with point", Action{Type: Drag, Point: &Point{0.1, 0.2}, Start: &Point{0.1, 0.2}, End: &Point{0.3, 0.4}}, "action.point"},
		{"hotkey", Action{Type: Hotkey, Keys: []string{"ctrl", "c"}}, ""},
		{"keydown", Action{Type: KeyDown, Keys: []string{"shift"}}, ""},
		{"keyup", Action{Type: KeyUp, Keys: []string{"shift"}}, ""},
		{"keydown no keys", Action{Type: KeyDown}, "action.keys"},
		{"keyup with text", Action{Type: KeyUp, Keys: []string{"a"}, Text: "a"}, "action.text"},
		{"hotkey spaced key", Action{Type: Hotkey, Keys: []string{"ctrl c"}}, "action.keys[0]"},
		{"type", Action{Type: TypeText, Text: "a\nb"}, ""},
		{"type empty", Action{Type: TypeText}, ""},
		{"type at a point", Action{Type: TypeText, Text: "a", Point: &Point{0.3, 0.4}}, ""},
		{"type point outside", Action{Type: TypeText, Text: "a", Point: &Point{0.3, 1.4}}, "action.point"},
		{"type with start", Action{Type: TypeText, Text: "a", Start: &Point{0.3, 0.4}}, "action.start"},
		{"scroll", Action{Type: Scroll, Point: &Point{0.5, 0.5}, Direction: DirDown}, ""},
		{"scroll no point", Action{Type: Scroll, Direction: DirUp}, ""},
		{"scroll bad dir", Action{Type: Scroll, Direction: "sideways"}, "action.direction"},
		{"wait", Action{Type: Wait}, ""},
		{"wait with text", Action{Type: Wait, Text: "x"}, "action.text"},
		{"finished", Action{Type: Finished, Text: "done"}, ""},
		{"call_user", Action{Type: CallUser}, ""},
		{"answer", Action{Type: Answer, Text: "5"}, ""},
		{"unknown", Action{Type: "swipe"}, "action.type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantProblemAt(t, tc.a.Validate(), tc.bad) })
	}
}

func nan() float64 { var z float64; return z / z }

// wantProblemAt fails t unless err is nil (path "") or a *ValidationError
// with a problem at path.
func wantProblemAt(t *testing.T, err error, path string) {
	t.Helper()
	if path == "" {
		if err != nil {
			t.Fatalf("want valid, got %v", err)
		}
		return
	}
	var ve *ValidationError
	if !errors.As(err, &ve) || !ve.Has(path) {
		t.Fatalf("want a problem at %s, got %v", path, err)
	}
}

// edit is one case of validateEdits: a change to a valid document and the
// path of the problem it makes ("" when the document stays valid).
type edit[T any] struct {
	name  string
	apply func(T)
	bad   string
}

// validateEdits applies each edit to a fresh valid document and checks what
// Validate reports.
func validateEdits[T interface{ Validate() error }](t *testing.T, fresh func() T, edits []edit[T]) {
	t.Helper()
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			doc := fresh()
			e.apply(doc)
			wantProblemAt(t, doc.Validate(), e.bad)
		})
	}
}

func TestValidateJudgement(t *testing.T) {
	j := exampleJudgement()
	j.Decision = Failure // disagrees with the clean verdict
	j.Votes[1].Error = ""
	j.Verdict.FirstErrorStep = ptr(0)
	err := j.Validate()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want *ValidationError, got %v", err)
	}
	for _, p := range []string{"decision", "votes[1].verdict", "verdict.first_error_step"} {
		if !ve.Has(p) {
			t.Errorf("missing problem at %s in %v", p, err)
		}
	}
}

func TestVerdictDecide(t *testing.T) {
	cases := []struct {
		v    Verdict
		want Decision
	}{
		{Verdict{Correctness: true}, CleanSuccess},
		{Verdict{Correctness: true, Redundant: []int{}}, CleanSuccess},
		{Verdict{Correctness: true, Redundant: []int{3}}, RedundantSuccess},
		{Verdict{Correctness: true, FirstErrorStep: ptr(2)}, RedundantSuccess},
		{Verdict{Correctness: false}, Failure},
	}
	for i, tc := range cases {
		if got := tc.v.Decide(); got != tc.want {
			t.Errorf("case %d: %+v → %s, want %s", i, tc.v, got, tc.want)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	good := testdata(t, "trajectory.golden.json")
	cases := []struct {
		name, in, want string
	}{
		{"syntax", "{\n  \"id\": \"x\",\n  oops\n}", "line 3, column 3"},
		{"type", "{\n  \"schema_version\": \"one\"\n}", "field \"schema_version\""},
		{"unknown field", `{"schema_version":1,"colour":"red"}`, "unknown field \"colour\""},
		{"newer schema", `{"schema_version":9}`, "schema_version 9"},
		{"trailing", string(good) + "{}", "unexpected data after the document"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeTrajectory([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want error containing %q, got %v", tc.want, err)
			}
		})
	}
	if _, err := DecodeTrajectory([]byte(`{"schema_version":9}`)); !errors.Is(err, ErrSchemaVersion) {
		t.Errorf("want ErrSchemaVersion, got %v", err)
	}
}

func FuzzDecodeTrajectory(f *testing.F) {
	good := testdata(f, "trajectory.golden.json")
	f.Add(good)
	f.Add([]byte(`{"schema_version":1}`))
	f.Add([]byte(`{"steps":[{"candidates":[{"action":{"type":"click","point":{"x":2}}}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := DecodeTrajectory(data)
		if err != nil {
			return
		}
		_ = tr.Validate() // must not panic on any decoded value
		enc, err := MarshalCompact(tr)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if _, err := DecodeTrajectory(enc); err != nil {
			t.Fatalf("re-encoded document does not decode: %v\n%s", err, enc)
		}
	})
}

// A version 1 document (written before coordinate spaces were recorded)
// still decodes and validates, and its models read as grid1000.
func TestVersion1DocumentsStillRead(t *testing.T) {
	b := testdata(t, "trajectory.v1.json")
	tr, err := DecodeTrajectory(b)
	if err != nil {
		t.Fatal(err)
	}
	if tr.SchemaVersion != 1 {
		t.Fatalf("schema_version %d, want 1", tr.SchemaVersion)
	}
	if err := tr.Validate(); err != nil {
		t.Fatalf("a v1 document must stay valid: %v", err)
	}
	for name, m := range map[string]ModelRef{"planner": tr.Models.Planner, "executor": tr.Models.Executor} {
		if m.Coords != nil {
			t.Errorf("%s: v1 document has coords %+v", name, *m.Coords)
		}
		if got := m.Space(); got != (Coords{Space: Grid1000}) {
			t.Errorf("%s: Space() = %+v, want grid1000", name, got)
		}
	}
	// The same document claiming version 2 lacks what version 2 requires.
	tr.SchemaVersion = 2
	var ve *ValidationError
	if err := tr.Validate(); !errors.As(err, &ve) || !ve.Has("models.planner.coords") || !ve.Has("models.executor.coords") ||
		!ve.Has("steps[0].candidates[2].parse_error_kind") {
		t.Fatalf("want coords and parse_error_kind required at version 2, got %v", err)
	}
}

func TestValidateCoordsAndParseErrorKind(t *testing.T) {
	validateEdits(t, exampleTrajectory, []edit[*Trajectory]{
		{"example", func(*Trajectory) {}, ""},
		{"unit", func(t *Trajectory) { t.Models.Executor.Coords = &Coords{Space: Unit} }, ""},
		{"pixels-screen", func(t *Trajectory) { t.Models.Executor.Coords = &Coords{Space: PixelsScreen} }, ""},
		{"unknown space", func(t *Trajectory) { t.Models.Executor.Coords = &Coords{Space: "pixels"} }, "models.executor.coords"},
		{"no prompt set", func(t *Trajectory) { t.Prompts = "" }, "prompts"},
		{"no prompt set at version 3", func(t *Trajectory) {
			t.Prompts, t.SchemaVersion, t.Steps[0].Candidates[0].ParseNotes = "", 3, nil
			t.Steps[0].Candidates[0].PlanTokenIDs, t.Steps[0].PlanPromptTokenIDs = nil, nil
		}, ""},
		{"prompt set not a hash", func(t *Trajectory) { t.Prompts = "planner.tmpl" }, "prompts"},
		{"resized without factor", func(t *Trajectory) {
			t.Models.Executor.Coords = &Coords{Space: PixelsResized, MinPixels: 1, MaxPixels: 2}
		}, "models.executor.coords"},
		{"resized min above max", func(t *Trajectory) {
			t.Models.Executor.Coords = &Coords{Space: PixelsResized, Factor: 28, MinPixels: 10, MaxPixels: 9}
		}, "models.executor.coords"},
		{"grid with factor", func(t *Trajectory) { t.Models.Planner.Coords = &Coords{Space: Grid1000, Factor: 28} }, "models.planner.coords"},
		{"missing at v2", func(t *Trajectory) { t.Models.Planner.Coords = nil }, "models.planner.coords"},
		{"kind without error", func(t *Trajectory) { t.Steps[0].Candidates[0].ParseErrorKind = ParseSyntax }, "steps[0].candidates[0].parse_error_kind"},
		{"error without kind", func(t *Trajectory) { t.Steps[0].Candidates[2].ParseErrorKind = "" }, "steps[0].candidates[2].parse_error_kind"},
		{"unknown kind", func(t *Trajectory) { t.Steps[0].Candidates[2].ParseErrorKind = "bad" }, "steps[0].candidates[2].parse_error_kind"},
		{"out of range kind", func(t *Trajectory) { t.Steps[0].Candidates[2].ParseErrorKind = ParseOutOfRange }, ""},
	})
}

// TestValidateParseNotes checks the rules for Candidate.ParseNotes: only
// with an executor output and a parsed action, from schema version 5, no
// empty note.
func TestValidateParseNotes(t *testing.T) {
	validateEdits(t, exampleTrajectory, []edit[*Trajectory]{
		{"example", func(*Trajectory) {}, ""},
		{"no notes", func(t *Trajectory) { t.Steps[0].Candidates[0].ParseNotes = nil }, ""},
		{"notes without executor output", func(t *Trajectory) { t.Steps[0].Candidates[0].ExecutorOutput = "" }, "steps[0].candidates[0].parse_notes"},
		{"notes without action", func(t *Trajectory) { t.Steps[0].Candidates[2].ParseNotes = []string{"x"} }, "steps[0].candidates[2].parse_notes"},
		{"empty note", func(t *Trajectory) {
			t.Steps[0].Candidates[0].ParseNotes = append(t.Steps[0].Candidates[0].ParseNotes, " ")
		}, "steps[0].candidates[0].parse_notes[2]"},
		{"notes at version 4", func(t *Trajectory) { t.SchemaVersion = 4 }, "steps[0].candidates[0].parse_notes"},
		{"no notes at version 4", func(t *Trajectory) {
			t.SchemaVersion, t.Steps[0].Candidates[0].ParseNotes, t.Steps[0].Candidates[0].PlanTokenIDs = 4, nil, nil
			t.Steps[0].PlanPromptTokenIDs = nil
		}, ""},
	})
}

func TestValidateSamplingAndTokens(t *testing.T) {
	validateEdits(t, exampleTrajectory, []edit[*Trajectory]{
		{"example", func(*Trajectory) {}, ""},
		{"no sampling at version 6", func(t *Trajectory) { t.Models.Planner.Sampling = nil }, "models.planner.sampling"},
		{"no sampling at version 5", func(t *Trajectory) {
			t.SchemaVersion, t.Models.Planner.Sampling, t.Models.Executor.Sampling = 5, nil, nil
			t.Steps[0].Candidates[0].PlanTokenIDs, t.Steps[0].PlanPromptTokenIDs = nil, nil
		}, ""},
		{"token ids at version 5", func(t *Trajectory) { t.SchemaVersion = 5 }, "steps[0].candidates[0].plan_token_ids"},
		{"prompt token ids at version 7", func(t *Trajectory) { t.SchemaVersion = 7 }, "steps[0].plan_prompt_token_ids"},
		{"no prompt token ids at version 7", func(t *Trajectory) { t.SchemaVersion, t.Steps[0].PlanPromptTokenIDs = 7, nil }, ""},
		{"negative prompt token id", func(t *Trajectory) { t.Steps[0].PlanPromptTokenIDs[2] = -1 }, "steps[0].plan_prompt_token_ids[2]"},
		{"token ids and logprobs differ", func(t *Trajectory) {
			t.Steps[0].Candidates[0].PlanTokenIDs = []int32{1}
		}, "steps[0].candidates[0].plan_token_ids"},
		{"negative token id", func(t *Trajectory) { t.Steps[0].Candidates[0].PlanTokenIDs[1] = -3 }, "steps[0].candidates[0].plan_token_ids[1]"},
		{"top_p zero", func(t *Trajectory) { t.Models.Executor.Sampling.TopP = 0 }, "models.executor.sampling"},
		{"top_k below -1", func(t *Trajectory) { t.Models.Planner.Sampling.TopK = -2 }, "models.planner.sampling"},
		{"empty stop", func(t *Trajectory) { t.Models.Planner.Sampling.Stop = []string{""} }, "models.planner.sampling"},
		{"context overflow without reason", func(t *Trajectory) {
			t.Outcome = Outcome{Kind: OutcomeContextOverflow}
		}, "outcome.reason"},
		{"context overflow", func(t *Trajectory) {
			t.Outcome = Outcome{Kind: OutcomeContextOverflow, Reason: "maximum context length is 32768 tokens"}
		}, ""},
	})
}

func TestJudgementDecisions(t *testing.T) {
	validateEdits(t, exampleJudgement, []edit[*Judgement]{
		{"example", func(*Judgement) {}, ""},
		{"not judged", func(j *Judgement) {
			j.Decision, j.Verdict, j.Votes, j.Reason = NotJudged, nil, nil, "environment error: vm: screenshot timed out"
		}, ""},
		{"not judged without reason", func(j *Judgement) { j.Decision, j.Verdict, j.Votes = NotJudged, nil, nil }, "reason"},
		{"not judged with votes", func(j *Judgement) { j.Decision, j.Verdict, j.Reason = NotJudged, nil, "x" }, "votes"},
		{"not judged with a verdict", func(j *Judgement) { j.Decision, j.Votes, j.Reason = NotJudged, nil, "x" }, "verdict"},
		{"undecided without votes", func(j *Judgement) { j.Decision, j.Verdict, j.Votes = Undecided, nil, nil }, "votes"},
		{"negative attempts", func(j *Judgement) { j.Votes[0].Attempts = -1 }, "votes[0].attempts"},
		{"choice of a multi-choice call", func(j *Judgement) { j.Votes[1].Choices, j.Votes[1].Choice = 3, 2 }, ""},
		{"choice beyond n", func(j *Judgement) { j.Votes[1].Choices, j.Votes[1].Choice = 3, 3 }, "votes[1].choice"},
		{"choice without n", func(j *Judgement) { j.Votes[1].Choice = 1 }, "votes[1].choice"},
		{"n of 1", func(j *Judgement) { j.Votes[1].Choices = 1 }, "votes[1].choice"},
		{"choices at version 6", func(j *Judgement) { j.SchemaVersion, j.Votes[1].Choices = 6, 2 }, "votes[1].choices"},
	})
	if n := exampleJudgement().Calls(); n != 4 {
		t.Errorf("Calls() = %d, want 1 + 3 attempts", n)
	}
	// Votes 1..3 answered by one call with n = 3 (vote 2 asked twice more
	// for a malformed answer): 1 + 1 + 2 + 0 calls.
	j := exampleJudgement()
	j.Votes = []Vote{j.Votes[0], j.Votes[0], j.Votes[0], j.Votes[0]}
	for i := 1; i < 4; i++ {
		j.Votes[i].Choices, j.Votes[i].Choice = 3, i-1
	}
	j.Votes[2].Attempts = 3
	if n := j.Calls(); n != 4 {
		t.Errorf("Calls() with one call of n = 3 = %d, want 4", n)
	}
}

func TestJudgedDocument(t *testing.T) {
	j := Judged{SchemaVersion: SchemaVersion, Judgement: *exampleJudgement(), Trajectory: *exampleTrajectory()}
	if err := j.Validate(); err != nil {
		t.Fatalf("example must be valid: %v", err)
	}
	b, err := MarshalCompact(&j)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeJudged(b)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := MarshalCompact(back); !bytes.Equal(again, b) {
		t.Fatal("decode+encode of a judged document is not byte-identical")
	}
	j.Judgement.TrajectoryID = "01KAKQ3J0G7ZR4X2M5T8V9W6YC"
	j.Trajectory.Steps[0].Index = 5
	var ve *ValidationError
	if err := j.Validate(); !errors.As(err, &ve) || !ve.Has("judgement.trajectory_id") || !ve.Has("trajectory.steps[0].index") {
		t.Fatalf("want problems at judgement.trajectory_id and trajectory.steps[0].index, got %v", err)
	}
	if _, err := DecodeJudged([]byte(`{"schema_version":3,"judgement":{"schema_version":9},"trajectory":{"schema_version":3}}`)); !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("a newer judgement inside: %v, want ErrSchemaVersion", err)
	}
}

func TestJudgeVersionID(t *testing.T) {
	v := exampleJudgement().Judge
	id := v.ID()
	if len(id) != 16 || strings.Trim(id, "0123456789abcdef") != "" {
		t.Fatalf("ID %q: want 16 hex digits", id)
	}
	if v.ID() != id {
		t.Fatal("ID is not stable")
	}
	for _, edit := range []func(*JudgeVersion){
		func(v *JudgeVersion) { v.Policy = "majority@4" },
		func(v *JudgeVersion) { v.Models = append(v.Models, "other") },
		func(v *JudgeVersion) { v.PromptSHA256 = strings.Repeat("1f", 32) },
	} {
		w := v
		w.Models = append([]string(nil), v.Models...)
		edit(&w)
		if w.ID() == id {
			t.Errorf("%+v has the same ID as %+v", w, v)
		}
	}
}
