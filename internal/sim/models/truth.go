package models

import (
	"context"
	"errors"
	"fmt"
	"image"
	"io/fs"
	"net/url"
	"path"
	"reflect"
	"sync"
	"syscall"

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	simguest "github.com/codapipe/codapipe/internal/sim/guest"
	"github.com/codapipe/codapipe/internal/sim/tasks"
)

// StateTruth is the simulated judge's default truth: it runs the task's
// own evaluator (scienceboard.Evaluate) against the last screenshot's
// state chunk, which answers the requests whose reply the app's state
// determines exactly as the machine answered them when the screenshot was
// taken (see chunkSource):
//
//   - ChimeraX: the states dump (POST guest /chimerax/run "states DIR
//     STAMP", then GET guest /read of DIR/STAMP.json) and the "info"
//     checks (POST guest /chimerax/run "info ...");
//   - Celestia: POST /dump with the task's query;
//   - KAlgebra: GET /vars (the "val" and "var" checks);
//   - GRASS GIS: GET /dump (the "info" checks).
//
// Limitations, by design of a screenshot-only judge:
//   - checks that need any other request (KAlgebra's "eqn" point queries
//     POST /func/2d and /func/3d, GRASS GIS's "db" queries POST /gcmd,
//     /read of other files, /lean/check, /tex/check) cannot be answered
//     from a screenshot; for such tasks the truth falls back to
//     DefaultTruth (the oracle's answer for question tasks, failure
//     otherwise);
//   - the state does not carry the file system: ChimeraX's states command
//     takes its folder to exist;
//   - the judge sees the agent's answer (an "ANS" line) but not whether it
//     ended with DONE or FAIL: tasks whose success is giving up (a "stop"
//     check for FAIL) fall back to DefaultTruth too, and other "stop"
//     checks see DONE when there is no answer.
//
// Redundant steps are the steps after which nothing the screenshot shows
// changed — the app, the focus, the selection in a field, the fields'
// text and the app state, which includes what the window shows (open
// tabs, scrolling) — on a successful trajectory only; the last step, which
// ends the episode, never counts. The first error step is not computed
// (0).
func StateTruth(task *tasks.Task, states []desktop.State, answer string) (bool, int, []int, error) {
	if task == nil || len(states) == 0 || expectsFail(&task.Task) {
		return DefaultTruth(task, states, answer)
	}
	last := states[len(states)-1]
	final := scienceboard.FinalAction{Kind: scienceboard.FinalDone}
	if answer != "" {
		final = scienceboard.FinalAction{Kind: scienceboard.FinalAns, Answer: answer}
	}
	res := scienceboard.Evaluate(context.Background(), &task.Task, newChunkSource(last), final)
	if len(res.Unsupported) > 0 || res.Error != "" {
		return DefaultTruth(task, states, answer)
	}
	if !res.Passed {
		return false, 0, nil, nil
	}
	// The last transition (the last step's screen → the final screen) is
	// the step that ended the episode (DONE or the answer), which changes
	// nothing by nature: it is never redundant.
	var redundant []int
	for i := 1; i < len(states)-1; i++ {
		// Step i (1-based) turned frame i into frame i+1.
		a, b := states[i-1], states[i]
		if a.App == b.App && a.Focus == b.Focus && a.SelectAll == b.SelectAll && reflect.DeepEqual(a.AppState, b.AppState) && reflect.DeepEqual(a.Fields, b.Fields) {
			redundant = append(redundant, i)
		}
	}
	return true, 0, redundant, nil
}

// chunkSource is a scienceboard.Caller that answers, from a screenshot's
// state, the requests whose reply that state determines, exactly as the
// machine answered them when the screenshot was taken: every request goes
// through the guest and app servers of package guest (guest.Local), in
// front of a frozen machine whose app server is the app's
// desktop.AppSpec.ServeState on the state chunk's AppState — the same
// function the running app's Serve answers those routes with — and whose
// file system holds only what those requests wrote. That covers:
//
//   - KAlgebra: GET /vars (and /version);
//   - GRASS GIS: GET /dump (and /version);
//   - Celestia: POST /dump with any query (and /version);
//   - ChimeraX: the guest's POST /chimerax/run with info (any target) and
//     the states command, and the guest's GET /read of the files that
//     states command wrote (the states dump);
//
// A request that needs anything else — one that changes the app or the
// machine (POST /tab, /gcmd, /setup/*, a ChimeraX command other than info
// or states), a read the state does not determine (KAlgebra's /func
// points, GRASS GIS's /gcmd queries, /read of any other file,
// /lean/check, /tex/check), or an app other than the screenshot's — is an
// error without an HTTP status, so the evaluation reports an error and
// the truth falls back to DefaultTruth. A chunkSource serves one
// evaluation (its file system keeps what the requests wrote).
type chunkSource struct {
	m      *frozenMachine
	caller scienceboard.Caller
}

func newChunkSource(st desktop.State) *chunkSource {
	m := &frozenMachine{st: st}
	if a, ok := appSpecs()[st.App]; ok {
		m.serve = a.ServeState
	}
	return &chunkSource{m: m, caller: simguest.Local(m, simguest.Config{})}
}

// appSpecs are the simulated apps by name.
var appSpecs = sync.OnceValue(func() map[string]desktop.AppSpec {
	out := map[string]desktop.AppSpec{}
	for _, a := range apps.All() {
		out[a.Name] = a
	}
	return out
})

// Call implements scienceboard.Caller.
func (c *chunkSource) Call(ctx context.Context, r scienceboard.Request) ([]byte, error) {
	c.m.begin()
	b, err := c.caller.Call(ctx, r)
	if miss := c.m.end(); miss != "" {
		return nil, fmt.Errorf("%s cannot be answered from a %q screenshot: %s", r, c.m.st.App, miss)
	}
	return b, err
}

// frozenMachine is a desktop.Machine that is one screenshot's state: its
// app server answers what the app's ServeState answers from the state;
// everything else, and every file it was not asked to write, is missing
// (recorded for chunkSource, which then reports the request as
// unanswerable).
type frozenMachine struct {
	st    desktop.State
	serve func(desktop.Files, map[string]any, string, string, url.Values, []byte) ([]byte, int, bool)
	files memFiles
	mu    sync.Mutex
	miss  string // why the current request cannot be answered
}

var errFrozen = errors.New("a screenshot's state cannot answer this")

func (m *frozenMachine) begin() { m.mu.Lock(); m.miss = ""; m.mu.Unlock() }
func (m *frozenMachine) end() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.miss
}

// missing records that the current request needs what the state lacks.
func (m *frozenMachine) missing(what string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.miss == "" {
		m.miss = what
	}
}

// Screenshot, Input, Launch, Shell, WriteFile, Accessibility and Reset
// need the live machine.
func (m *frozenMachine) Screenshot() ([]byte, error) {
	m.missing("a screenshot")
	return nil, errFrozen
}

func (m *frozenMachine) Input(desktop.Event) error {
	m.missing("input")
	return errFrozen
}

func (m *frozenMachine) Launch(string) error {
	m.missing("a launch")
	return errFrozen
}

func (m *frozenMachine) Shell(string) (string, string, int) {
	m.missing("the shell")
	return "", errFrozen.Error(), 1
}

func (m *frozenMachine) WriteFile(p string, _ []byte, _ bool) error {
	m.missing("writing " + p)
	return errFrozen
}

func (m *frozenMachine) Accessibility() string {
	m.missing("the accessibility tree")
	return ""
}

func (m *frozenMachine) Reset() { m.missing("a reset") }

// Cursor and State are the state's.
func (m *frozenMachine) Cursor() image.Point  { return image.Pt(m.st.Cursor[0], m.st.Cursor[1]) }
func (m *frozenMachine) State() desktop.State { return m.st }

// AppServe answers with the app's ServeState.
func (m *frozenMachine) AppServe(method, p string, q url.Values, body []byte) ([]byte, int, error) {
	if m.st.App == "" {
		return nil, 0, desktop.ErrNoApp
	}
	if m.serve != nil {
		if resp, status, ok := m.serve(&m.files, m.st.AppState, method, p, q, body); ok {
			return resp, status, nil
		}
	}
	m.missing(fmt.Sprintf("%s %s of the app", method, p))
	return nil, 0, errFrozen
}

// ReadFile reads what the app's replies wrote.
func (m *frozenMachine) ReadFile(p string) ([]byte, error) {
	text, ok := m.files.read(path.Clean(p))
	if !ok {
		m.missing("the file " + p)
		return nil, &fs.PathError{Op: "open", Path: p, Err: syscall.ENOENT}
	}
	return []byte(text), nil
}

// memFiles is a frozen machine's file system (desktop.Files): the files
// its app's replies wrote, by absolute path. Folders are taken to exist.
type memFiles struct {
	mu    sync.Mutex
	files map[string]string
}

// Abs implements desktop.Files.
func (f *memFiles) Abs(p string) string { return desktop.AbsPath(p) }

// WriteFile implements desktop.Files.
func (f *memFiles) WriteFile(p, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.files == nil {
		f.files = map[string]string{}
	}
	f.files[desktop.AbsPath(p)] = text
	return nil
}

func (f *memFiles) read(p string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	text, ok := f.files[p]
	return text, ok
}

// expectsFail reports whether the task succeeds by giving up.
func expectsFail(t *scienceboard.Task) bool {
	for _, c := range t.Evaluate {
		if sc, ok := c.Args.(*scienceboard.StopCheck); ok && sc.Value == scienceboard.StopFail {
			return true
		}
	}
	return false
}
