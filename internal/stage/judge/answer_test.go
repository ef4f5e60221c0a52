package judge

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The answer shapes of the judges people use, in the variants real models
// write (markdown, quotes, casing, trailing prose, fences, LaTeX, think
// blocks), read with the format of each shipped prompt set or of an
// answer.json a user would write for another project's prompt. want is
// the verdict; "" means the answer must be unusable (never a silent
// guess).
func TestAnswerFormats(t *testing.T) {
	load := func(name string) AnswerFormat {
		p, err := LoadPrompt(name)
		if err != nil {
			t.Fatal(err)
		}
		return p.Answer
	}
	webvoyager := AnswerFormat{Kind: FormatFinalLine, Success: []string{"success"}, Failure: []string{"not success"}}
	verdictLabels := AnswerFormat{Kind: FormatVerdict, Labels: []string{"Verdict", "Status", "the task is considered"}, Success: []string{"success"}, Failure: []string{"not success", "failure"}}
	cases := []struct {
		name   string
		format AnswerFormat
		answer string
		want   string // "success", "failure" or "" (unusable)
	}{
		// keypoints: a "Status:" line.
		{"status plain", load("keypoints"), "Key points:\n1. open the file\nStatus: success", "success"},
		{"status quoted", load("keypoints"), "The sphere is shown.\n\nStatus: \"success\"", "success"},
		{"status bold value", load("keypoints"), "Thoughts: nothing was saved.\n**Status:** **failure**", "failure"},
		{"status bold label", load("keypoints"), "**Status**: Failure. The file was not saved.", "failure"},
		{"status last wins", load("keypoints"), "Status: success would need the plot.\nStatus: failure", "failure"},
		{"status next line", load("keypoints"), "Status:\n\"success\"", "success"},
		{"status curly quotes", load("keypoints"), "Status: “failure”", "failure"},
		{"status in think only", load("keypoints"), "<think>Status: success?</think>\nThe answer was wrong.\nStatus: failure", "failure"},
		{"status missing", load("keypoints"), "The agent did well overall.", ""},
		{"status other word", load("keypoints"), "Status: partially done", ""},
		{"status thinking cut", load("keypoints"), "Key points listed.\n<think>Status: success is likely, but", ""},
		{"status lone close", load("keypoints"), "Status: success\n</think>\nStatus: failure", "failure"},
		// yesno: the last line.
		{"yes", load("yesno"), "The molecule is coloured red as asked.\nYes", "success"},
		{"no bold", load("yesno"), "The colour is unchanged.\n\n**No**", "failure"},
		{"no trailing prose", load("yesno"), "Looking at the final screen...\nNo, the value was not set.", "failure"},
		{"yes with stop", load("yesno"), "Fine.\nYes.", "success"},
		{"none is not no", load("yesno"), "It is unclear.\nNone of the steps show it.", ""},
		{"yesno think", load("yesno"), "<think>\nYes? no...\n</think>\nYes", "success"},
		// score: a JSON score in a fence.
		{"score fenced", load("score"), "The plot is right.\n```json\n{\"reason\": \"done\", \"score\": 5}\n```", "success"},
		{"score low", load("score"), "```json\n{\"reason\": \"only opened\", \"score\": 2}\n```", "failure"},
		{"score string", load("score"), `{"reason": "close", "score": "4/5"}`, "success"},
		{"score at threshold minus", load("score"), `{"score": 3}`, "failure"},
		{"score off scale", load("score"), `{"score": 9}`, ""},
		{"score missing", load("score"), `{"reason": "no score given"}`, ""},
		{"score last object", load("score"), "{\"score\": 5} was my first guess.\n```json\n{\"score\": 1}\n```", "failure"},
		// coda's result dict, with a think block before it.
		{"res_dict think", load("coda"), "<think>{'Correctness': False}</think>\nFrame 1: ok\n<res_dict>{'Correctness': True, 'Redundant': [], 'First_Error_Step': None}</res_dict>", "success"},
		{"res_dict all thinking", load("coda"), "<think>Frame 1: ok, so {'Correctness': True", ""},
		// Other projects' answer styles, read by an answer.json for them.
		{"webvoyager not success", webvoyager, "The screenshots show the search page only.\n\nNOT SUCCESS", "failure"},
		{"webvoyager success", webvoyager, "All requirements are visible.\nSUCCESS", "success"},
		{"verdict bold label", verdictLabels, "**Verdict**: SUCCESS", "success"},
		{"verdict quoted", verdictLabels, `Status: "success"`, "success"},
		{"considered bold", verdictLabels, "Given the missing answer, the task is considered: **NOT SUCCESS**", "failure"},
		{"verdict then prose", verdictLabels, "Verdict: SUCCESS\n\nThe agent found the price and reported it.", "success"},
		{"verdict latex", verdictLabels, `So {x} holds and the verdict is: \boxed{NOT SUCCESS}. Verdict: \boxed{\text{NOT SUCCESS}}`, "failure"},
		{"json plain", AnswerFormat{Kind: FormatJSON, Key: "success"}, `{"thoughts": "ok", "success": true}`, "success"},
		{"json word", AnswerFormat{Kind: FormatJSON, Key: "verdict", Success: []string{"success"}, Failure: []string{"not success", "unknown"}}, "```json\n{\"verdict\": \"NOT SUCCESS\", \"reason\": \"x\"}\n```", "failure"},
		{"json nested", AnswerFormat{Kind: FormatJSON, Key: "is_success"}, `{"result": {"Is Success": false}}`, "failure"},
		{"score line", AnswerFormat{Kind: FormatScore, Labels: []string{"Score", "Rating"}, Scale: []float64{1, 10}, Threshold: 7}, "**Rating**: 8 out of 10 — good", "success"},
		{"score line low", AnswerFormat{Kind: FormatScore, Labels: []string{"Score"}, Scale: []float64{0, 1}, Threshold: 0.5}, "Score: 0.25", "failure"},
		// Read wrong before (a review of this parser): a verdict word that
		// starts a longer phrase, a label inside prose, a score on another
		// scale, a LaTeX negation.
		{"label in prose", load("keypoints"), "Status: failure\nRecap: point 1 met (status: success), point 2 not met.", "failure"},
		{"score in prose", AnswerFormat{Kind: FormatScore, Labels: []string{"Score"}, Scale: []float64{1, 5}, Threshold: 4}, "Score: 2/5 (confidence score: 5)", "failure"},
		{"other scale", AnswerFormat{Kind: FormatScore, Labels: []string{"Score"}, Scale: []float64{1, 5}, Threshold: 4}, "Score: 4/10", ""},
		{"other scale json", load("score"), `{"score": "4/10"}`, ""},
		{"word starts a phrase", verdictLabels, "Verdict: success not achieved", ""},
		{"complete failure", AnswerFormat{Kind: FormatVerdict, Labels: []string{"Status"}}, "Status: Complete failure", ""},
		{"no problems", load("yesno"), "All fine.\nNo problems; the task is done.", ""},
		{"latex negation", verdictLabels, `Verdict: \boxed{\neg\text{success}}`, "failure"},
		{"label after a sentence", verdictLabels, "The plot is right. Verdict: SUCCESS", "success"},
		{"word then a dash", load("keypoints"), "**Status:** \"failure\" — the colour was not changed.", "failure"},
		{"word then an accented word", verdictLabels, "Verdict: success été", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := c.format.Parse(c.answer)
			switch {
			case c.want == "" && err == nil:
				t.Fatalf("read %v from an answer that holds no verdict: %q", a.Verdict.Correctness, c.answer)
			case c.want == "":
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("error %v is not a *ParseError", err)
				}
				return
			case err != nil:
				t.Fatalf("%v\nanswer: %q", err, c.answer)
			}
			if got := map[bool]string{true: "success", false: "failure"}[a.Verdict.Correctness]; got != c.want {
				t.Fatalf("read %s, want %s\nanswer: %q", got, c.want, c.answer)
			}
			if c.format.Kind != FormatResDict && a.Verdict.Correctness && !a.Verdict.Clean() {
				t.Error("a binary success is not clean")
			}
		})
	}
}

// TestAnswerFormatFiles: every shipped prompt set loads with its format,
// the format is part of the judge version (the same template read another
// way is another version), and a bad answer.json is refused naming the
// file and the field.
func TestAnswerFormatFiles(t *testing.T) {
	seen := map[string]string{}
	for _, name := range PromptSets {
		p, err := LoadPrompt(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if other, ok := seen[p.SHA256]; ok {
			t.Errorf("%s and %s share a prompt hash", name, other)
		}
		seen[p.SHA256] = name
		if name == "coda" && (p.Answer.Kind != FormatResDict || p.Source != "embedded") {
			t.Errorf("coda: format %q, source %q", p.Answer.Kind, p.Source)
		}
	}
	def, err := LoadPrompt("")
	if err != nil || def.SHA256 != func() string { p, _ := LoadPrompt("coda"); return p.SHA256 }() {
		t.Fatalf("the default prompt is not coda: %v", err)
	}

	dir := t.TempDir()
	writeFile(t, dir, PromptFile, mustShipped(t, "keypoints/judge.tmpl"))
	plain, err := LoadPrompt(dir)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, AnswerFile, mustShipped(t, "keypoints/answer.json"))
	withFormat, err := LoadPrompt(dir)
	if err != nil {
		t.Fatal(err)
	}
	if plain.SHA256 == withFormat.SHA256 || withFormat.Answer.Kind != FormatVerdict {
		t.Errorf("answer.json does not change the prompt hash (%s) or was not read (%q)", plain.SHA256, withFormat.Answer.Kind)
	}
	for _, bad := range []struct{ json, want string }{
		{`{"kind": "verdict"}`, "labels"},
		{`{"kind": "vote"}`, `unknown kind "vote"`},
		{`{"kind": "json"}`, "key"},
		{`{"kind": "score", "labels": ["Score"], "scale": [5, 1], "threshold": 3}`, "scale"},
		{`{"kind": "score", "labels": ["Score"], "scale": [1, 5], "threshold": 9}`, "threshold"},
		{`{"kind": "verdict", "labels": ["S"], "success": ["ok"], "failure": ["OK"]}`, "both a success and a failure word"},
		{`{"kind": "verdict", "labels": ["S"], "sucess": ["ok"]}`, `unknown field "sucess"`},
		{`{"kind": "res_dict", "labels": ["S"]}`, "res_dict takes no"},
	} {
		writeFile(t, dir, AnswerFile, bad.json)
		_, err := LoadPrompt(dir)
		if err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), AnswerFile) {
			t.Errorf("answer.json %s: error %v, want one naming %s and %q", bad.json, err, AnswerFile, bad.want)
		}
	}
	if _, err := LoadPrompt("no-such-set"); err == nil || !strings.Contains(err.Error(), "keypoints") {
		t.Errorf("an unknown prompt set: %v, want the list of shipped sets", err)
	}
}

func writeFile(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mustShipped is a file of the shipped prompt sets (prompts/<path>).
func mustShipped(t *testing.T, path string) string {
	t.Helper()
	b, err := shipped.ReadFile("prompts/" + path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzAnswerFormats: reading an answer in any shipped format never
// panics, fails only with a *ParseError with a reason, and a verdict read
// from a labelled or final-line answer is one of the format's words in the
// text outside the thinking.
func FuzzAnswerFormats(f *testing.F) {
	for _, s := range []string{
		"Status: success", "**Verdict**: NOT SUCCESS", "<think>Status: success</think>Status: failure",
		"```json\n{\"score\": 4}\n```", "Yes", "No, not at all.", `\boxed{\text{SUCCESS}}`, "Status:\n\n", "<think>",
		"{'Correctness': True}", "</think></think>Status: “success”",
	} {
		f.Add(s)
	}
	var formats []AnswerFormat
	for _, name := range PromptSets {
		p, err := LoadPrompt(name)
		if err != nil {
			f.Fatal(err)
		}
		formats = append(formats, p.Answer)
	}
	formats = append(formats, AnswerFormat{Kind: FormatVerdict, Labels: []string{"Verdict", "the task is considered"}})
	f.Fuzz(func(t *testing.T, s string) {
		for _, af := range formats {
			a, err := af.Parse(s)
			if err != nil {
				var pe *ParseError
				if !errors.As(err, &pe) || pe.Reason == "" {
					t.Fatalf("%s: error %v is not a *ParseError with a reason", af.Kind, err)
				}
				continue
			}
			if af.Kind != FormatVerdict && af.Kind != FormatFinalLine {
				continue
			}
			success, failure := af.words()
			words := failure
			if a.Verdict.Correctness {
				words = success
			}
			text, _ := stripThinking(s)
			found := false
			for _, w := range words {
				found = found || strings.Contains(normWords(text), normWords(w))
			}
			if !found {
				t.Fatalf("%s: read %v from %q, which holds none of %q", af.Kind, a.Verdict.Correctness, s, words)
			}
		}
	})
}
