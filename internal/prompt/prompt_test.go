package prompt_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/model"
	"github.com/codapipe/codapipe/internal/prompt"
	"github.com/codapipe/codapipe/pkg/traj"
)

func TestPrompts(t *testing.T) {
	def, err := prompt.Load("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, prompt.PlannerUserFile), []byte("Do this: {{.Instruction}} ({{.App}})"), 0o644); err != nil {
		t.Fatal(err)
	}
	own, err := prompt.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if own.Hash() == def.Hash() {
		t.Error("a changed template must change the prompt hash")
	}
	turn := prompt.PlannerTurn{
		Data:    prompt.Data{Instruction: "Open 2olx", App: "ChimeraX", Step: 2, StepLimit: 5, Width: 1280, Height: 800},
		History: []string{"Thought: a\nAction: wait()"},
		Prev:    &traj.ImageRef{SHA256: "prev"}, Cur: traj.ImageRef{SHA256: "cur"},
	}
	png := map[string][]byte{"prev": []byte("prev"), "cur": []byte("cur")}
	msgs, err := own.RenderPlanner(turn, func(r traj.ImageRef) (string, error) { return model.DataURI(png[r.SHA256]), nil })
	if err != nil {
		t.Fatal(err)
	}
	// system, one assistant turn, one user turn with two images and the text
	if len(msgs) != 3 || msgs[1].Role != "assistant" || len(msgs[2].MultiContent) != 3 {
		t.Fatalf("layout %+v", msgs)
	}
	if got := msgs[2].MultiContent[2].Text; got != "Do this: Open 2olx (ChimeraX)" {
		t.Errorf("user text %q", got)
	}
	if !strings.HasPrefix(msgs[2].MultiContent[0].ImageURL.URL, "data:image/png;base64,") {
		t.Error("images must be data URIs")
	}
	if err := os.WriteFile(filepath.Join(dir, prompt.ExecutorSystemFile), []byte("{{.Nope}}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := prompt.Load(dir); err == nil || !strings.Contains(err.Error(), "executor.tmpl") {
		t.Fatalf("a template with an unknown field must fail at load, naming the file: %v", err)
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
