// Package tasks is part of codapipe's SIMULATOR (see package sim): the
// simulator's own tasks, in the ScienceBoard JSON format with a hidden
// oracle plan, embedded from VM/<App folder>/<ID>.json, and RunInit, which
// applies a task's initialize items to a simulated machine through its
// guest and app servers (package guest, in process).
package tasks

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/guest"
	"github.com/codapipe/codapipe/pkg/uitars"
)

// Thought conventions. Simulated plans are written so that the simulated
// executor can ground them from the thought alone, as a real grounding
// model grounds a plan's description:
//
//   - a target element is named by its exact label in single quotes:
//     "Click the 'ChimeraX command line' field."
//   - the verb picks the action: "Click" (click), "Double-click"
//     (left_double), "Right-click" (right_single), "Hover over" (hover),
//     "Drag from 'A' to 'B'" (drag), "Scroll up|down|left|right over 'A'"
//     (scroll), "Type 'TEXT'" (type; "... and press Enter" appends a
//     newline), "Press 'ctrl s'" (hotkey, keys separated by spaces),
//     "Wait" (wait), "The task is complete" (finished), "I cannot do
//     this" (call_user);
//   - answers are not grounded: the planner's action is "ANS <answer>".
//
// A quoted string that is not an element label is text to type.

// OracleStep is one step of a task's hidden oracle plan: a thought that
// quotes the target element's label, and the canonical UI-TARS action on
// the 0–1000 grid (targeting the element's centre).
type OracleStep struct {
	Thought string `json:"thought"`
	Action  string `json:"action"`
	Target  string `json:"target,omitempty"` // element label, "" for keyboard-only steps
}

// taskFiles holds the simulator's own tasks in the ScienceBoard layout:
// VM/<App folder>/<ID>.json beside this file. They are rendered (package
// taskgen) from the task specs of the app packages (each one's Tasks),
// which read the apps' simulated data: go test ./internal/sim/apps -run
// TestTaskFiles checks them, with -update-tasks rewrites them.
//
//go:embed VM
var taskFiles embed.FS

// Task is a simulated task: the ScienceBoard task as the loader reads it,
// plus the hidden oracle plan from the file's top-level "sim" block.
type Task struct {
	scienceboard.Task
	// Oracle is a plan that solves the task within its step limit; its
	// last step is finished(), call_user() or "ANS <answer>".
	Oracle []OracleStep
	// Alternatives are the labels of elements that also solve the task
	// (another way to the goal); the simulated planner's mistakes never
	// use them, so a planner of skill 0 never succeeds.
	Alternatives []string
}

// simBlock is the file's top-level "sim" key (kept by the loader in
// Task.Extra).
type simBlock struct {
	Oracle       []OracleStep `json:"oracle"`
	Alternatives []string     `json:"alternatives,omitempty"`
}

// FS returns the embedded task files; the paths are
// "VM/<App folder>/<ID>.json".
func FS() fs.FS { return taskFiles }

// Write writes the embedded task files under dir (creating
// dir/VM/<App folder>/), so that `rollout tasks --tasks DIR` and
// scienceboard.LoadDir read them; with only, just those tasks, named
// "<App folder>/<file stem>" (e.g. "ChimeraX/S01").
func Write(dir string, only ...string) error {
	want := map[string]bool{}
	for _, o := range only {
		want[o] = true
	}
	n := 0
	err := fs.WalkDir(FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if !d.IsDir() && len(want) > 0 && !want[strings.TrimSuffix(strings.TrimPrefix(p, "VM/"), ".json")] {
			return nil
		}
		if d.IsDir() {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return fmt.Errorf("sim: write tasks: %w", err)
			}
			return nil
		}
		data, err := fs.ReadFile(FS(), p)
		if err != nil {
			return fmt.Errorf("sim: write tasks: %w", err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return fmt.Errorf("sim: write tasks: %w", err)
		}
		n++
		return nil
	})
	if err == nil && len(want) > 0 && n != len(want) {
		err = fmt.Errorf("sim: write tasks: %d of the %d tasks asked for exist (names are <folder>/<stem>, e.g. ChimeraX/S01)", n, len(want))
	}
	return err
}

var (
	tasksOnce sync.Once
	tasksAll  []Task
	tasksErr  error
)

// All returns the simulator's tasks sorted by ID. The slice is shared:
// callers must not modify it.
func All() ([]Task, error) {
	tasksOnce.Do(func() { tasksAll, tasksErr = loadTasks(FS()) })
	return tasksAll, tasksErr
}

func loadTasks(fsys fs.FS) ([]Task, error) {
	var out []Task
	var errs []error
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || path.Ext(p) != ".json" {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		t, err := parseSimTask(p, data)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		out = append(out, *t)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sim: loading tasks: %w", err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("sim: loading tasks: %w", errors.Join(errs...))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// parseSimTask parses one task file with the ScienceBoard loader and
// reads its oracle.
func parseSimTask(p string, data []byte) (*Task, error) {
	st, err := scienceboard.ParseTask(p, data)
	if err != nil {
		return nil, err
	}
	t := &Task{Task: *st}
	raw, ok := st.Extra["sim"]
	if !ok {
		return nil, fmt.Errorf("%s: no \"sim\" block with the oracle", p)
	}
	var sb simBlock
	if err := json.Unmarshal(raw, &sb); err != nil {
		return nil, fmt.Errorf("%s: \"sim\" block: %w", p, err)
	}
	if len(sb.Oracle) == 0 {
		return nil, fmt.Errorf("%s: empty oracle", p)
	}
	t.Oracle, t.Alternatives = sb.Oracle, sb.Alternatives
	for _, label := range sb.Alternatives {
		if _, ok := apps.Catalog().FindElement(label); !ok {
			return nil, fmt.Errorf("%s: \"sim\" block: alternative %q is no element label", p, label)
		}
	}
	return t, nil
}

// ByInstruction returns the task with the given instruction (exact
// match after trimming, else a unique case-insensitive match).
func ByInstruction(instr string) (*Task, bool) {
	ts, err := All()
	if err != nil {
		return nil, false
	}
	instr = strings.TrimSpace(instr)
	var found *Task
	for i := range ts {
		if ts[i].Instruction == instr {
			return &ts[i], true
		}
	}
	for i := range ts {
		if strings.EqualFold(ts[i].Instruction, instr) {
			if found != nil {
				return nil, false
			}
			found = &ts[i]
		}
	}
	return found, found != nil
}

// ByID returns the task with the given ID, e.g. "ChimeraX/S01".
func ByID(id string) (*Task, bool) {
	ts, err := All()
	if err != nil {
		return nil, false
	}
	for i := range ts {
		if ts[i].ID == id {
			return &ts[i], true
		}
	}
	return nil, false
}

// DefaultPlaceholders are the values RunInit uses for the task files'
// placeholders.
var DefaultPlaceholders = map[string]string{"PORTLIKE": "8000"}

// InitOptions configure RunInitWith.
type InitOptions struct {
	// Placeholders fill «NAME» in the task's items; nil means
	// DefaultPlaceholders.
	Placeholders map[string]string
	// Downloads are the files a task's download items fetch, by URL: the
	// simulator has no network, so the test gives their content, which is
	// written into the guest through /setup/upload as the agent copies a
	// download from the host. A download item whose URL is not here is an
	// error.
	Downloads map[string][]byte
}

// RunInit runs a task's initialize items on a machine as the benchmark's
// harness does, through the machine's own guest and app servers in
// process (guest.Local): RunInitWith with the placeholder values (nil:
// DefaultPlaceholders) and no downloads.
func RunInit(m desktop.Machine, t *scienceboard.Task, values map[string]string) error {
	return RunInitWith(context.Background(), guest.Local(m, guest.Config{}), t, InitOptions{Placeholders: values})
}

// RunInitWith runs a task's initialize items through c, the way
// codapipe's agent does on a real VM (without the items' waits): it
// expands the placeholders, maps the items onto requests
// (scienceboard.SetupSteps), sends each and applies the step's accept
// rule (SetupStep.CheckReply). A request that fails, a reply the rule
// refuses, or a download it has no content for is an error naming the
// item.
func RunInitWith(ctx context.Context, c scienceboard.Caller, t *scienceboard.Task, opts InitOptions) error {
	values := opts.Placeholders
	if values == nil {
		values = DefaultPlaceholders
	}
	exp, err := t.ExpandPlaceholders(values)
	if err != nil {
		return fmt.Errorf("sim: init %s: %w", t.ID, err)
	}
	steps, err := scienceboard.SetupSteps(exp)
	if err != nil {
		return fmt.Errorf("sim: init: %w", err)
	}
	for _, st := range steps {
		op := fmt.Sprintf("sim: init %s: initialize[%d] %s", t.ID, st.Item, st.Func)
		switch {
		case st.Download != nil:
			data, ok := opts.Downloads[st.Download.URL]
			if !ok {
				return fmt.Errorf("%s: no content for the download of %s (the simulator has no network: give it in InitOptions.Downloads)", op, st.Download.URL)
			}
			r := guest.UploadRequest(st.Download.Path, data)
			if _, err := c.Call(ctx, r); err != nil {
				return fmt.Errorf("%s: %w", op, err)
			}
		case st.Request != nil:
			body, err := c.Call(ctx, *st.Request)
			if err != nil {
				return fmt.Errorf("%s: %w", op, err)
			}
			if err := st.CheckReply(body); err != nil {
				return fmt.Errorf("%s: %s: refused: %w", op, st.Request, err)
			}
		}
	}
	return nil
}

// NewMachine returns a simulated machine that runs every simulated app
// (apps.Catalog), its looks seeded by seed, with the task's initialize
// items applied (RunInit with DefaultPlaceholders).
func NewMachine(t *Task, seed int64) (desktop.Machine, error) {
	m := desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog(), Seed: seed})
	if err := RunInit(m, &t.Task, nil); err != nil {
		return nil, err
	}
	return m, nil
}

// OracleActions returns the actions of the task's oracle plan, in order.
func (t *Task) OracleActions() []string {
	out := make([]string, len(t.Oracle))
	for i, s := range t.Oracle {
		out[i] = s.Action
	}
	return out
}

// Play executes one action text of a plan (UI-TARS style, on the 0–1000
// grid) on m the way the rollout does: uitars.Parse → uitars.Render →
// desktop.ParsePyAutoGUI (inside the OSWorld wrapper) → Machine.Input. A
// wait does nothing; done reports an action that ends the episode, and
// final says how.
func Play(m desktop.Machine, action string) (final scienceboard.FinalAction, done bool, err error) {
	parsed, err := uitars.Parse(action, uitars.DefaultOptions())
	if err != nil {
		return final, false, fmt.Errorf("sim: play %q: %w", action, err)
	}
	for _, a := range parsed.Actions {
		code, err := uitars.Render(a, uitars.DefaultScreen)
		if err != nil {
			return final, false, fmt.Errorf("sim: play %q: %w", action, err)
		}
		switch {
		case code == uitars.TokenDone:
			return scienceboard.FinalAction{Kind: scienceboard.FinalDone}, true, nil
		case code == uitars.TokenFail:
			return scienceboard.FinalAction{Kind: scienceboard.FinalFail}, true, nil
		case strings.HasPrefix(code, uitars.TokenAns+" "):
			return scienceboard.FinalAction{Kind: scienceboard.FinalAns, Answer: strings.TrimPrefix(code, uitars.TokenAns+" ")}, true, nil
		case code == uitars.TokenWait:
			continue
		}
		evs, err := desktop.ParsePyAutoGUI("import pyautogui; import time; pyautogui.FAILSAFE = False; " + strings.ReplaceAll(code, "\n", "; "))
		if err != nil {
			return final, false, fmt.Errorf("sim: play %q: %w", action, err)
		}
		for _, ev := range evs {
			if err := m.Input(ev); err != nil {
				return final, false, fmt.Errorf("sim: play %q: input %+v: %w", action, ev, err)
			}
		}
	}
	return final, false, nil
}
