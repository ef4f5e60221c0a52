package models

import (
	"slices"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/prompt"
	"github.com/codapipe/codapipe/pkg/traj"
)

// TestHistoryFromDefaultPrompt: the simulated planner reads back the
// plans our default planner_user.tmpl shows in the user text — plans of
// several lines, multi-action plans with blank lines, empty plans — so
// the agent's current layout gives it its history.
func TestHistoryFromDefaultPrompt(t *testing.T) {
	set, err := prompt.Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		history []string
	}{
		{"first step", nil},
		{"one plan", []string{"Thought: Click the 'File' menu.\nAction: click(start_box='(10,20)')"}},
		{"several", []string{
			"Thought: Type it.\nAction: type(content='open 2olx\\n')",
			"",
			"Thought: Two steps.\nAction: click(start_box='(1,2)')\n\nclick(start_box='(3,4)')",
			"I should say Step 5: there",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			turn := prompt.PlannerTurn{
				Data:    prompt.Data{Instruction: "Fetch 2OLX.", Step: len(c.history) + 1, StepLimit: 9, Width: 1280, Height: 800},
				History: c.history, Cur: traj.ImageRef{SHA256: "c"},
			}
			msgs, err := set.RenderPlanner(turn, prompt.RefURL)
			if err != nil {
				t.Fatal(err)
			}
			call := &chatCall{}
			for _, m := range msgs {
				cm := callMessage{role: m.Role, text: m.Content}
				for _, p := range m.MultiContent {
					if p.ImageURL == nil {
						cm.text += p.Text
					}
				}
				call.msgs = append(call.msgs, cm)
			}
			if got := plannerHistory(call); !slices.Equal(got, c.history) {
				t.Fatalf("history %q, want %q", got, c.history)
			}
		})
	}
}
