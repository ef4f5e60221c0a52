package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/desktop/desktoptest"
	simguest "github.com/codapipe/codapipe/internal/sim/guest"
	"github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
)

// The acceptance tests of the simulated world: every task on a simulated
// machine (packages tasks and desktop), through this package's API. They
// live in the top package so that `go test -run TestAcceptOracleSolvesEveryTask
// ./internal/sim` (make test's full acceptance run) finds them.

// episode is the outcome of playing actions on a machine.
type episode struct {
	final  scienceboard.FinalAction
	steps  int
	shots  []int // screenshot sizes
	result traj.EvalResult
}

// newTaskMachine returns a fresh machine with the task's initialize items
// applied.
func newTaskMachine(t testing.TB, task *tasks.Task, seed int64) desktop.Machine {
	t.Helper()
	m, err := tasks.NewMachine(task, seed)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// play executes one UI-TARS action text the way the rollout does
// (tasks.Play) and returns the final action when the action ends the
// episode.
func play(t testing.TB, m desktop.Machine, action string) (scienceboard.FinalAction, bool) {
	t.Helper()
	final, end, err := tasks.Play(m, action)
	if err != nil {
		t.Fatal(err)
	}
	return final, end
}

// runActions plays actions (one per step), screenshots after every step and
// evaluates the task.
func runActions(t testing.TB, task *tasks.Task, m desktop.Machine, actions []string, screenshots bool) episode {
	t.Helper()
	var ep episode
	shot := func() {
		if !screenshots {
			return
		}
		b, err := m.Screenshot()
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		ep.shots = append(ep.shots, len(b))
	}
	shot()
	for _, a := range actions {
		ep.steps++
		final, end := play(t, m, a)
		if end {
			ep.final = final
			break
		}
		shot()
	}
	ep.result = scienceboard.Evaluate(context.Background(), &task.Task, simguest.Local(m, simguest.Config{}), ep.final)
	return ep
}

func mustTasks(t testing.TB) []tasks.Task {
	t.Helper()
	ts, err := tasks.All()
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestAcceptOracleSolvesEveryTask(t *testing.T) {
	// Screenshots after every step measure the sizes; -race and -short
	// runs take only the final one.
	full := !raceEnabled && !testing.Short()
	var sizes []int
	for i, task := range mustTasks(t) {
		task := task
		t.Run(task.ID, func(t *testing.T) {
			m := newTaskMachine(t, &task, int64(i+1))
			ep := runActions(t, &task, m, task.OracleActions(), full)
			if !full {
				b, err := m.Screenshot()
				if err != nil {
					t.Fatal(err)
				}
				ep.shots = append(ep.shots, len(b))
			}
			sizes = append(sizes, ep.shots...)
			if ep.steps > task.Steps {
				t.Errorf("oracle took %d steps, limit %d", ep.steps, task.Steps)
			}
			r := ep.result
			if !r.Passed || len(r.Unsupported) > 0 || r.Error != "" {
				t.Errorf("oracle does not pass: %+v", r)
			}
		})
	}
	if len(sizes) == 0 {
		return
	}
	sort.Ints(sizes)
	median := sizes[len(sizes)/2]
	t.Logf("screenshots over the oracle runs: n=%d median=%d KB min=%d KB max=%d KB", len(sizes), median/1024, sizes[0]/1024, sizes[len(sizes)-1]/1024)
	if !full {
		return
	}
	if median < 100*1024 {
		t.Errorf("median screenshot %d bytes, want ≥ 100 KB", median)
	}
	if sizes[len(sizes)-1] > 1200*1024 {
		t.Errorf("largest screenshot %d bytes, want ≤ ~1 MB", sizes[len(sizes)-1])
	}
}

// failedCleanly reports whether an evaluation is a real failure (not an
// unsupported check or an evaluator error).
func failedCleanly(t *testing.T, what string, r traj.EvalResult) {
	t.Helper()
	if r.Passed {
		t.Errorf("%s passes: %+v", what, r)
	}
	if len(r.Unsupported) > 0 || r.Error != "" {
		t.Errorf("%s: evaluation not clean: %+v", what, r)
	}
}

func finalKind(task *tasks.Task) string {
	last := task.Oracle[len(task.Oracle)-1].Action
	switch {
	case strings.HasPrefix(last, "ANS "):
		return scienceboard.FinalAns
	case last == "call_user()":
		return scienceboard.FinalFail
	}
	return scienceboard.FinalDone
}

func TestNoStepsFails(t *testing.T) {
	for i, task := range mustTasks(t) {
		task := task
		t.Run(task.ID, func(t *testing.T) {
			for _, final := range []scienceboard.FinalAction{{}, {Kind: scienceboard.FinalDone}, {Kind: scienceboard.FinalAns, Answer: "0"}} {
				if finalKind(&task) == scienceboard.FinalFail && final.Kind == "" {
					continue // covered below
				}
				m := newTaskMachine(t, &task, int64(i+100))
				r := scienceboard.Evaluate(context.Background(), &task.Task, simguest.Local(m, simguest.Config{}), final)
				failedCleanly(t, fmt.Sprintf("no steps, final %+v", final), r)
			}
		})
	}
}

// mutate changes a typed text or an answer plausibly: the first digit of
// the last number is bumped, else the last letter.
func mutate(s string) string {
	r := []rune(s)
	end := -1
	for i := len(r) - 1; i >= 0; i-- {
		if unicode.IsDigit(r[i]) {
			end = i
			break
		}
	}
	if end >= 0 {
		start := end
		for start > 0 && (unicode.IsDigit(r[start-1]) || r[start-1] == '.') {
			start--
		}
		for r[start] == '.' {
			start++
		}
		r[start] = '0' + (r[start]-'0'+1)%10
		if r[start] == '0' && start+1 < len(r) && unicode.IsDigit(r[start+1]) {
			r[start] = '1'
		}
		return string(r)
	}
	for i := len(r) - 1; i >= 0; i-- {
		if unicode.IsLetter(r[i]) {
			if r[i] == 'z' || r[i] == 'Z' {
				r[i]--
			} else {
				r[i]++
			}
			return string(r)
		}
	}
	return s + "x"
}

func TestMutate(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"open 2olx", "open 3olx"}, {"3.28084", "4.28084"}, {"turn y 90", "turn y 10"}, {"color red", "color ree"},
		{"if(elevation > 120, 1, 0)", "if(elevation > 120, 1, 1)"}, {"x^2+y^2=9", "x^2+y^2=0"}, {"Mars", "Mart"},
	} {
		t.Run(c.in, func(t *testing.T) {
			if got := mutate(c.in); got != c.want {
				t.Errorf("mutate(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

// wrongFinal returns a final action that must not satisfy the task.
func wrongFinal(task *tasks.Task) string {
	last := task.Oracle[len(task.Oracle)-1].Action
	if ans, ok := strings.CutPrefix(last, "ANS "); ok {
		return "ANS " + mutate(ans)
	}
	return "finished()"
}

func TestWrongTextFails(t *testing.T) {
	for i, task := range mustTasks(t) {
		task := task
		typed := false
		for _, s := range task.Oracle {
			typed = typed || strings.HasPrefix(s.Action, "type(")
		}
		if !typed {
			continue // covered by TestRandomWrongStepsFail
		}
		t.Run(task.ID, func(t *testing.T) {
			var actions []string
			for _, s := range task.Oracle[:len(task.Oracle)-1] {
				p, _ := uitars.Parse(s.Action, uitars.DefaultOptions())
				a := p.Actions[0]
				if a.Type == traj.TypeText {
					body, nl := strings.CutSuffix(a.Text, "\n")
					a.Text = mutate(body)
					if nl {
						a.Text += "\n"
					}
				}
				actions = append(actions, uitars.Format(a, uitars.DefaultOptions()))
			}
			actions = append(actions, wrongFinal(&task))
			m := newTaskMachine(t, &task, int64(i+200))
			failedCleanly(t, "oracle with mutated text", runActions(t, &task, m, actions, false).result)
		})
	}
}

func TestRandomWrongStepsFail(t *testing.T) {
	for i, task := range mustTasks(t) {
		task := task
		targets := map[string]bool{}
		var fields []desktop.Element
		for _, s := range task.Oracle {
			if s.Target != "" {
				targets[s.Target] = true
			}
		}
		for _, e := range apps.Catalog().Elements(task.App) {
			if e.Kind == "field" {
				fields = append(fields, e)
			}
		}
		t.Run(task.ID, func(t *testing.T) {
			for trial := 0; trial < 3; trial++ {
				rng := rand.New(rand.NewPCG(uint64(i), uint64(trial)))
				m := newTaskMachine(t, &task, int64(i*10+trial))
				var actions []string
				for k := 0; k < task.Steps-1; k++ {
					var a traj.Action
					visible := desktoptest.VisibleElements(m, apps.Catalog())
					switch rng.IntN(3) {
					case 0, 1: // click a visible element that is not an oracle target
						var cands []desktop.Element
						for _, e := range visible {
							if !targets[e.Label] && e.Kind != "field" {
								cands = append(cands, e)
							}
						}
						if len(cands) == 0 {
							continue
						}
						e := cands[rng.IntN(len(cands))]
						a = traj.Action{Type: traj.Click, Point: gridPoint(e)}
					default: // type wrong text into a visible field
						var vf []desktop.Element
						for _, f := range fields {
							for _, v := range visible {
								if v.Label == f.Label {
									vf = append(vf, f)
								}
							}
						}
						if len(vf) == 0 {
							continue
						}
						f := vf[rng.IntN(len(vf))]
						actions = append(actions, uitars.Format(traj.Action{Type: traj.Click, Point: gridPoint(f)}, uitars.DefaultOptions()))
						a = traj.Action{Type: traj.TypeText, Text: []string{"help\n", "open 1abc\n", "Venus\n", "q := 7\n", "g.list raster\n", "0\n"}[rng.IntN(6)]}
					}
					actions = append(actions, uitars.Format(a, uitars.DefaultOptions()))
				}
				actions = append(actions, wrongFinal(&task))
				failedCleanly(t, fmt.Sprintf("random wrong steps (trial %d)", trial), runActions(t, &task, m, actions, false).result)
			}
		})
	}
}

func TestScreenshotsDecodeWithState(t *testing.T) {
	task, ok := tasks.ByID("ChimeraX/S02")
	if !ok {
		t.Fatal("no task ChimeraX/S02")
	}
	m := newTaskMachine(t, task, 1)
	for _, step := range task.Oracle {
		play(t, m, step.Action)
		b, err := m.Screenshot()
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if img.Bounds() != image.Rect(0, 0, desktop.ScreenW, desktop.ScreenH) {
			t.Fatalf("bounds %v", img.Bounds())
		}
		if _, ok := img.(*image.RGBA); !ok || b[8+8+9] != 2 {
			t.Fatalf("decoded as %T with colour type %d, want 8-bit RGB (type 2)", img, b[8+8+9])
		}
		st, err := desktop.ReadStateChunk(b)
		if err != nil {
			t.Fatal(err)
		}
		want := m.State()
		if !reflect.DeepEqual(mustRoundTrip(t, want), mustRoundTrip(t, st)) {
			t.Fatalf("state chunk %+v, machine state %+v", st, want)
		}
	}
}

// mustRoundTrip normalises a desktop.State through JSON (numbers become float64).
func mustRoundTrip(t *testing.T, st desktop.State) string {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAcceptDeterminism(t *testing.T) {
	for _, task := range mustTasks(t) {
		if !strings.HasSuffix(task.ID, "/S01") {
			continue
		}
		task := task
		t.Run(task.ID, func(t *testing.T) {
			shots := func(seed int64) [][]byte {
				m := newTaskMachine(t, &task, seed)
				var out [][]byte
				for _, s := range task.Oracle {
					play(t, m, s.Action)
					b, err := m.Screenshot()
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, b)
				}
				return out
			}
			a, b, c := shots(7), shots(7), shots(8)
			differs := false
			for i := range a {
				if !bytes.Equal(a[i], b[i]) {
					t.Fatalf("step %d: same seed, different screenshots", i)
				}
				if !bytes.Equal(a[i], c[i]) {
					differs = true
				}
			}
			if !differs {
				t.Errorf("seeds 7 and 8 give identical screenshots")
			}
		})
	}
}

// gridPoint is the element's centre on the 0–1000 grid, as oracle actions
// write it.
func gridPoint(e desktop.Element) *traj.Point {
	gx, gy := e.GridCenter()
	return &traj.Point{X: float64(gx) / 1000, Y: float64(gy) / 1000}
}
