package prompt_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/prompt"
	"github.com/codapipe/codapipe/pkg/traj"
)

// FuzzParse feeds arbitrary bytes to Parse, the parser of the prompt set
// documents fetched from the blob store by hash (sftpack and the shard
// writer render a trajectory's prompts again with them): an error says
// what was parsed; an accepted set keeps the stored bytes and their
// SHA-256 as its hash, parses again to the same hash, and renders a
// planner turn without panicking.
func FuzzParse(f *testing.F) {
	def, err := prompt.Load("")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(def.Document())
	f.Add([]byte(`{"kind":"codapipe.prompts/v1","files":{"planner.tmpl":"S","planner_user.tmpl":"{{.Instruction}}","executor.tmpl":"E"}}`))
	f.Add([]byte(`{"kind":"codapipe.prompts/v1","layout":"user-history","files":{"planner.tmpl":"S","planner_user.tmpl":"{{range .History}}{{.Plan}}{{end}}","executor.tmpl":"{{.Nope}}"}}`))
	f.Add([]byte(`{"kind":"codapipe.prompts/v1","layout":"x","files":{}}`))
	f.Add([]byte(`{"kind":"codapipe.prompts/v1","files":{"planner.tmpl":"{{define \"a\"}}{{.App}}{{end}}{{template \"a\" .}}","planner_user.tmpl":"","executor.tmpl":""}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		p, err := prompt.Parse(doc)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "prompt: ") {
				t.Fatalf("error does not say what was parsed: %v", err)
			}
			return
		}
		sum := sha256.Sum256(doc)
		if string(p.Document()) != string(doc) || p.Hash() != hex.EncodeToString(sum[:]) {
			t.Fatalf("accepted set has document %q and hash %s, not the stored bytes' own", p.Document(), p.Hash())
		}
		again, err := prompt.Parse(p.Document())
		if err != nil || again.Hash() != p.Hash() || again.Layout() != p.Layout() {
			t.Fatalf("the set's document does not parse again to it: %v", err)
		}
		turn := prompt.PlannerTurn{
			Data:    prompt.Data{Instruction: "Open 2olx", App: "ChimeraX", Step: 2, StepLimit: 5, Width: 1280, Height: 800},
			History: []string{"Thought: a\nAction: wait()"},
			Prev:    &traj.ImageRef{SHA256: "p"}, Cur: traj.ImageRef{SHA256: "c"},
		}
		_, _ = p.RenderPlanner(turn, func(r traj.ImageRef) (string, error) { return prompt.RefURL(r) })
	})
}
