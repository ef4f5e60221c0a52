package agent_test

import (
	"context"
	"encoding/json"
	"image"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/contract/prompt"
	"github.com/codapipe/codapipe/internal/sim"
	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	simtasks "github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/internal/stage/agent"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/guest"
)

// pyPoint matches the pixel positions in rendered pyautogui code.
var pyPoint = regexp.MustCompile(`pyautogui\.(?:click|doubleClick|rightClick|moveTo|dragTo)\((\d+), (\d+)`)

// quoted matches the single-quoted names in a thought.
var quoted = regexp.MustCompile(`'([^']+)'`)

// TestAcceptExecutedClicksLandOnIntendedElements runs the simulated rollout with
// the executor answering in each coordinate space (and the agent parsing in
// the same space) — every task in the default space, a quarter of them in
// each other one: every executed pointer action lands inside the element
// its thought names, every task succeeds with perfect models within its
// step limit, every step has its G+1 candidates, and the trajectory records
// both models' spaces.
//
// Its run of every task in the default space (G = 2) is also the
// simulator's acceptance end to end: over HTTP, through the planner and
// executor endpoints, the guest protocol and the task's own evaluator,
// every task succeeds within its step limit when the planner always takes
// the oracle step and the executor grounds without noise.
func TestAcceptExecutedClicksLandOnIntendedElements(t *testing.T) {
	others := []traj.Coords{
		uitars.Grid(),
		{Space: traj.PixelsScreen},
		{Space: traj.Unit},
		{Space: traj.PixelsResized, Factor: 14, MinPixels: 3136, MaxPixels: 200000}, // the sim screen shrunk to ~560x350
	}
	for k, space := range append([]traj.Coords{uitars.Resized()}, others...) {
		// Every task in the default space (UI-TARS-1.5's); in each other
		// space every len(others)-th task, so that together they cover
		// every task once more and each space sees every app.
		keep := func(i int) bool { return k == 0 || i%len(others) == k-1 }
		group := 1
		if k == 0 {
			group = 2
		}
		t.Run(uitars.CoordsString(space), func(t *testing.T) {
			w := startWorldWith(t, 4, group, func(wc *sim.WorldConfig) {
				perfect(wc)
				wc.Models.Executor.Coords = space
			}, func(c *agent.Config) { c.ExecutorCoords = space })
			checked := 0
			for id, tr := range w.runSome(t, keep) {
				if err := tr.Validate(); err != nil {
					t.Fatalf("%s: %v", id, err)
				}
				if c := tr.Models.Executor.Coords; c == nil || *c != uitars.WithDefaults(space) {
					t.Fatalf("%s: executor coords %+v, want %+v", id, c, space)
				}
				if c := tr.Models.Planner.Coords; c == nil || *c != uitars.Grid() {
					t.Fatalf("%s: planner coords %+v, want grid1000", id, c)
				}
				if tr.Outcome.IsEnvError() || tr.Eval == nil || !tr.Eval.Passed {
					t.Errorf("%s: not solved with perfect models (outcome %+v, eval %+v)", id, tr.Outcome, tr.Eval)
				}
				if len(tr.Steps) > tr.Task.StepLimit {
					t.Errorf("%s: %d steps over the limit %d", id, len(tr.Steps), tr.Task.StepLimit)
				}
				for _, s := range tr.Steps {
					if len(s.Candidates) != group+1 {
						t.Errorf("%s step %d: %d candidates, want G+1 = %d", id, s.Index, len(s.Candidates), group+1)
					}
					if s.Executed < 0 {
						continue
					}
					c := s.Candidates[s.Executed]
					if c.Action == nil || !(c.Action.Type.Pointed() && c.Action.Point != nil || c.Action.Type == traj.Drag) {
						continue
					}
					var els []desktop.Element
					for _, m := range quoted.FindAllStringSubmatch(c.Thought, -1) {
						if e, ok := apps.Catalog().FindElement(m[1]); ok {
							els = append(els, e)
						}
					}
					pts := pyPoint.FindAllStringSubmatch(s.Code, -1)
					if len(els) == 0 || len(pts) < len(els) {
						t.Fatalf("%s step %d: thought %q names %d elements, code %q has %d points", id, s.Index, c.Thought, len(els), s.Code, len(pts))
					}
					for i, e := range els {
						x, _ := strconv.Atoi(pts[i][1])
						y, _ := strconv.Atoi(pts[i][2])
						if !image.Pt(x, y).In(e.Box) {
							t.Errorf("%s step %d: %q executed at (%d,%d), outside %q %v (executor said %q)",
								id, s.Index, strings.ReplaceAll(s.Code, "\n", "; "), x, y, e.Label, e.Box, c.ExecutorOutput)
						}
						checked++
					}
				}
			}
			if checked == 0 {
				t.Fatal("no pointer action was executed")
			}
			t.Logf("%d executed points checked", checked)
		})
	}
}

// TestPromptsNameTheSpace: the default executor and planner prompts tell
// the model where positions lie in its configured space, on this
// screenshot.
func TestPromptsNameTheSpace(t *testing.T) {
	p, err := prompt.Load("")
	if err != nil {
		t.Fatal(err)
	}
	screen := uitars.Screen{W: 1920, H: 1080}
	for _, c := range []struct {
		space traj.Coords
		want  string
	}{
		{uitars.Resized(), "whole pixels of the 1932x1092 image you see: x from 0 to 1932, y from 0 to 1092"},
		{uitars.Grid(), "0-1000 grid"},
		{traj.Coords{Space: traj.PixelsScreen}, "whole pixels of the 1920x1080 image"},
		{traj.Coords{Space: traj.Unit}, "fractions of the image width and height from 0 to 1"},
	} {
		d := prompt.Data{Instruction: "Open 2olx", App: "ChimeraX", Step: 1, StepLimit: 5, Width: screen.W, Height: screen.H}
		if err := d.SetCoords(c.space, screen); err != nil {
			t.Fatal(err)
		}
		em, err := p.ExecutorMessages(d, "Click the 'File' menu.", []byte("png"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(em[0].Content, c.want) {
			t.Errorf("%s: executor system prompt lacks %q:\n%s", c.space.Space, c.want, em[0].Content)
		}
		pm, err := p.RenderPlanner(prompt.PlannerTurn{Data: d, Cur: traj.ImageRef{SHA256: "x"}}, prompt.RefURL)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(pm[0].Content, c.want) {
			t.Errorf("%s: planner system prompt lacks %q", c.space.Space, c.want)
		}
	}
}

// recordingGuest records the code an episode runs on its VM.
type recordingGuest struct {
	agent.Guest
	mu    sync.Mutex
	codes []string
}

func (g *recordingGuest) ExecPyAutoGUI(ctx context.Context, code string) (guest.ExecResult, error) {
	g.mu.Lock()
	g.codes = append(g.codes, code)
	g.mu.Unlock()
	return g.Guest.ExecPyAutoGUI(ctx, code)
}

// TestHeldKeysAreReleasedAtTheEnd: a press(key=...) holds the key (UI-TARS
// semantics); the episode releases what it left held before the final
// screenshot and the evaluator.
func TestHeldKeysAreReleasedAtTheEnd(t *testing.T) {
	var calls atomic.Int32
	answers := []string{"Action: press(key='shift')", "Action: finished()"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		content := answers[min(int(calls.Add(1))-1, len(answers)-1)]
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "x", "object": "chat.completion", "created": 1, "model": "canned",
			"choices": []map[string]any{{"index": 0, "message": map[string]string{"role": "assistant", "content": content}, "finish_reason": "stop"}},
			"usage":   map[string]int{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
		})
	}))
	defer srv.Close()
	w := startWorldWith(t, 1, 0, perfect, func(c *agent.Config) {
		exec, err := model.New(model.Config{BaseURL: srv.URL + "/v1", Model: "canned", Attempts: 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Executor = exec
	})
	task, _ := simtasks.ByID("ChimeraX/S01")
	l, err := w.pool.Lease(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer l.End(vmpool.Healthy)
	g := &recordingGuest{Guest: l.Guest()}
	tr, err := w.ag.Run(context.Background(), agent.Episode{Task: &task.Task, Samples: 1, VM: l.ID(), Guest: g})
	if err != nil || tr == nil {
		t.Fatalf("Run: %v", err)
	}
	if tr.Outcome.Kind != traj.OutcomeFinished || len(tr.Steps) != 2 || tr.Steps[0].Candidates[0].Action.Type != traj.KeyDown {
		t.Fatalf("outcome %+v, steps %d: want a keydown then finished()", tr.Outcome, len(tr.Steps))
	}
	want := []string{"pyautogui.keyDown('shift')", "pyautogui.keyUp('shift')"}
	if !slices.Equal(g.codes, want) {
		t.Fatalf("code run on the VM %q, want %q", g.codes, want)
	}
}
