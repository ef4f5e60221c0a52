package prompt_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/contract/prompt"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/pkg/traj"
	openai "github.com/sashabaranov/go-openai"
)

func TestPrompts(t *testing.T) {
	def, err := prompt.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if def.Layout() != prompt.CurrentLayout {
		t.Fatalf("Load made a set of layout %q, want %q", def.Layout(), prompt.CurrentLayout)
	}
	dir := t.TempDir()
	own := "{{range .History}}[{{.Step}}] {{.Plan}}\n{{end}}Do this: {{.Instruction}} ({{.App}})"
	if err := os.WriteFile(filepath.Join(dir, prompt.PlannerUserFile), []byte(own), 0o644); err != nil {
		t.Fatal(err)
	}
	ownSet, err := prompt.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ownSet.Hash() == def.Hash() {
		t.Error("a changed template must change the prompt hash")
	}
	turn := prompt.PlannerTurn{
		Data:    prompt.Data{Instruction: "Open 2olx", App: "ChimeraX", Step: 3, StepLimit: 5, Width: 1280, Height: 800},
		History: []string{"Thought: a\nAction: wait()", "Thought: b\nAction: wait()"},
		Prev:    &traj.ImageRef{SHA256: "prev"}, Cur: traj.ImageRef{SHA256: "cur"},
	}
	png := map[string][]byte{"prev": []byte("prev"), "cur": []byte("cur")}
	msgs, err := ownSet.RenderPlanner(turn, func(r traj.ImageRef) (string, error) { return model.DataURI(png[r.SHA256]), nil })
	if err != nil {
		t.Fatal(err)
	}
	// system, one user turn with two images and the text, which holds the
	// history as the user's template words it
	if len(msgs) != 2 || msgs[1].Role != "user" || len(msgs[1].MultiContent) != 3 {
		t.Fatalf("layout %+v", msgs)
	}
	if got, want := msgs[1].MultiContent[2].Text, "[1] Thought: a\nAction: wait()\n[2] Thought: b\nAction: wait()\nDo this: Open 2olx (ChimeraX)"; got != want {
		t.Errorf("user text %q, want %q", got, want)
	}
	if !strings.HasPrefix(msgs[1].MultiContent[0].ImageURL.URL, "data:image/png;base64,") {
		t.Error("images must be data URIs")
	}
	if err := os.WriteFile(filepath.Join(dir, prompt.PlannerUserFile), []byte("Do this: {{.Instruction}}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := prompt.Load(dir); err == nil || !strings.Contains(err.Error(), ".History") {
		t.Fatalf("a planner_user.tmpl that does not show the history must fail at load: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, prompt.PlannerUserFile), []byte(own), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, prompt.ExecutorSystemFile), []byte("{{.Nope}}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := prompt.Load(dir); err == nil || !strings.Contains(err.Error(), "executor.tmpl") {
		t.Fatalf("a template with an unknown field must fail at load, naming the file: %v", err)
	}
}

// legacyDoc is a prompt set document as stored before layouts were named
// (no "layout"): its planner was sent every earlier plan as an assistant
// turn, and its planner_user.tmpl knows nothing of .History.
const legacyDoc = `{"kind":"codapipe.prompts/v1","files":{"executor.tmpl":"E","planner.tmpl":"S {{.Width}}x{{.Height}}","planner_user.tmpl":"Task: {{.Instruction}}\n{{if .Previous}}two images{{else}}one image{{end}}, step {{.Step}}"}}`

// TestRenderPlannerLayouts renders the same turns with a set of each
// layout: the current one puts the history into the one user turn (as
// the template words it), the legacy one re-renders old trajectories as
// their planner was sent them, with the plans as assistant turns.
func TestRenderPlannerLayouts(t *testing.T) {
	cur, err := prompt.Load("")
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := prompt.Parse([]byte(legacyDoc))
	if err != nil {
		t.Fatal(err)
	}
	if legacy.Layout() != prompt.LayoutAssistantTurns || !bytes.Equal(legacy.Document(), []byte(legacyDoc)) {
		t.Fatalf("legacy document: layout %q, bytes kept %v", legacy.Layout(), bytes.Equal(legacy.Document(), []byte(legacyDoc)))
	}
	if !strings.Contains(string(cur.Document()), `"layout":"user-history"`) {
		t.Fatalf("the current document does not name its layout: %.120s", cur.Document())
	}
	again, err := prompt.Parse(cur.Document())
	if err != nil || again.Layout() != prompt.LayoutUserHistory || again.Hash() != cur.Hash() {
		t.Fatalf("current document parsed again: %v", err)
	}
	ref := func(r traj.ImageRef) (string, error) { return prompt.RefURL(r) }
	data := prompt.Data{Instruction: "Open 2olx", App: "ChimeraX", Step: 3, StepLimit: 5, Width: 1280, Height: 800}
	two := prompt.PlannerTurn{Data: data, History: []string{"Thought: a\nAction: wait()", ""},
		Prev: &traj.ImageRef{SHA256: "p"}, Cur: traj.ImageRef{SHA256: "c"}}
	first := prompt.PlannerTurn{Data: data, Cur: traj.ImageRef{SHA256: "c"}}
	first.Data.Step = 1
	type msg struct{ role, text string }
	flat := func(ms []openai.ChatCompletionMessage) []msg {
		var out []msg
		for _, m := range ms {
			text := m.Content
			for _, p := range m.MultiContent {
				if p.ImageURL != nil {
					text += "<" + p.ImageURL.URL + ">"
				} else {
					text += p.Text
				}
			}
			out = append(out, msg{m.Role, text})
		}
		return out
	}
	for _, c := range []struct {
		name string
		set  *prompt.Set
		turn prompt.PlannerTurn
		want []msg
	}{
		{"current, first step", cur, first, []msg{{"system", ""}, {"user", "<sha256:c>Task: Open 2olx\nThe image is the screen now.\nThis is step 1 of at most 5."}}},
		{"current, history", cur, two, []msg{{"system", ""}, {"user", "<sha256:p><sha256:c>Your earlier steps in this task, oldest first:\n\nStep 1:\nThought: a\nAction: wait()\n\nStep 2:\n(no output)\n\n" +
			"Task: Open 2olx\nThe first image is the screen before your last action, the second the screen now.\nThis is step 3 of at most 5."}}},
		{"legacy, first step", legacy, first, []msg{{"system", "S 1280x800"}, {"user", "<sha256:c>Task: Open 2olx\none image, step 1"}}},
		{"legacy, history", legacy, two, []msg{{"system", "S 1280x800"}, {"assistant", "Thought: a\nAction: wait()"}, {"assistant", ""},
			{"user", "<sha256:p><sha256:c>Task: Open 2olx\ntwo images, step 3"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ms, err := c.set.RenderPlanner(c.turn, ref)
			if err != nil {
				t.Fatal(err)
			}
			got := flat(ms)
			if c.set == cur {
				got[0].text = "" // the default system prompt is long; its role is what matters here
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("got  %q\nwant %q", got, c.want)
			}
		})
	}
	if _, err := prompt.Parse([]byte(`{"kind":"codapipe.prompts/v1","layout":"sideways","files":{}}`)); err == nil || !strings.Contains(err.Error(), "layout") {
		t.Fatalf("an unknown layout was accepted: %v", err)
	}
}

func TestPromptSetDocument(t *testing.T) {
	p, err := prompt.Load("")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(p.Document())
	if hex.EncodeToString(sum[:]) != p.Hash() {
		t.Fatal("the hash is not the SHA-256 of the document")
	}
	q, err := prompt.Parse(p.Document())
	if err != nil {
		t.Fatal(err)
	}
	if q.Hash() != p.Hash() || !bytes.Equal(q.Document(), p.Document()) {
		t.Fatal("a parsed document must keep its hash and bytes")
	}
	for name, doc := range map[string]string{
		"not json":      "{",
		"unknown kind":  `{"kind":"x","files":{}}`,
		"missing file":  `{"kind":"codapipe.prompts/v1","files":{"planner.tmpl":"x"}}`,
		"unknown field": `{"kind":"codapipe.prompts/v1","files":{},"extra":1}`,
		"bad template":  `{"kind":"codapipe.prompts/v1","files":{"planner.tmpl":"{{.Nope}}","planner_user.tmpl":"x","executor.tmpl":"x"}}`,
	} {
		if _, err := prompt.Parse([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	store, err := blob.Open(context.Background(), t.TempDir(), blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prompt.Fetch(context.Background(), store, ""); err != prompt.ErrNotRecorded {
		t.Errorf("no hash: %v, want ErrNotRecorded", err)
	}
	if _, err := prompt.Fetch(context.Background(), store, p.Hash()); err == nil {
		t.Error("a prompt set never stored was found")
	}
	if err := prompt.Store(context.Background(), store, p); err != nil {
		t.Fatal(err)
	}
	if got, err := prompt.Fetch(context.Background(), store, p.Hash()); err != nil || got.Hash() != p.Hash() {
		t.Fatalf("fetch: %v", err)
	}
}

// TestPlannerTurnAtHistory: the history is each earlier step's executed
// plan, or candidate 0's when the step executed nothing.
func TestPlannerTurnAtHistory(t *testing.T) {
	ref := func(s string) traj.ImageRef {
		return traj.ImageRef{SHA256: strings.Repeat(s, 64), Size: 1, Width: 1280, Height: 800}
	}
	tr := &traj.Trajectory{ID: "x", Task: traj.TaskRef{Instruction: "do", App: "A", StepLimit: 9},
		Models: traj.Models{Planner: traj.ModelRef{Coords: &traj.Coords{Space: traj.Grid1000}}},
		Steps: []traj.Step{
			{Index: 0, Executed: 1, Screenshot: ref("a"), Candidates: []traj.Candidate{{Plan: "p0"}, {Plan: "p1"}}},
			{Index: 1, Executed: -1, Screenshot: ref("b"), Candidates: []traj.Candidate{{Plan: "q0"}, {Plan: "q1"}}},
			{Index: 2, Executed: 0, Screenshot: ref("c"), Candidates: []traj.Candidate{{Plan: "r0"}}},
		}}
	turn, err := prompt.PlannerTurnAt(tr, 2, tr.Steps[2].Screenshot)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(turn.History, ",") != "p1,q0" || turn.Prev == nil || turn.Prev.SHA256 != ref("b").SHA256 || turn.Data.Step != 3 {
		t.Fatalf("turn %+v", turn)
	}
	if turn, err = prompt.PlannerTurnAt(tr, 0, tr.Steps[0].Screenshot); err != nil || turn.Prev != nil || len(turn.History) != 0 {
		t.Fatalf("first step: %+v %v", turn, err)
	}
	if _, err := prompt.PlannerTurnAt(tr, 4, ref("d")); err == nil {
		t.Fatal("a step past the end was accepted")
	}
}
