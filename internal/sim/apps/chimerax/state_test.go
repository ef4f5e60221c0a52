package chimerax

import (
	"encoding/json"
	"net/url"
	"reflect"
	"slices"
	"testing"

	"github.com/codapipe/codapipe/internal/sim/desktop"
)

// TestStateCoversTheApp: State carries every field of the app but the
// ones derived from the others. A new field must go into cxState (and
// restore), or on the derived list with the reason.
func TestStateCoversTheApp(t *testing.T) {
	carried := []string{"models", "bg", "lighting", "light", "sil", "rot", "zoom", "sel", "log", "logScroll", "tab", "restPort", "cliDestroyed"}
	derived := []string{
		"cache", // coordinates: a function of each model's name, atoms and chains
		"files", // where ServeState's states command writes, not the session
	}
	typ := reflect.TypeOf(chimerax{})
	for i := range typ.NumField() {
		if f := typ.Field(i).Name; !slices.Contains(carried, f) && !slices.Contains(derived, f) {
			t.Errorf("field %s of chimerax is not in its State: add it to cxState and restore", f)
		}
	}
}

// jsonOf is v as JSON.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// memFiles collects what ServeState's states command writes.
type memFiles map[string]string

func (f memFiles) Abs(p string) string            { return desktop.AbsPath(p) }
func (f memFiles) WriteFile(p, text string) error { f[desktop.AbsPath(p)] = text; return nil }

// TestServeState: the session rebuilt from a screenshot's state is the
// session: the same state, states dump and info lines; the
// states command writes the live dump's files; any command that changes
// the session is not answered.
func TestServeState(t *testing.T) {
	m, c, _, run := machine(t)
	spec := Spec()
	run("open 4hhb", "open 2olx", "turn y 37", "turn x 12", "zoom 1.7", "lighting soft", "set bgColor gray",
		"graphics silhouettes true", "show atoms", "style ball", "surface #2", "hbonds #1", "color #1 rainbow",
		"color #2 red", "select #1/B")
	m.Click("ChimeraX Graphics tab")
	m.Input(desktop.Event{Kind: desktop.EvScroll, Amount: 3, X: cxLogBox.Min.X + 20, Y: cxLogBox.Min.Y + 20, HasXY: true})
	chunk := m.ChunkState()
	r, err := restore(chunk)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := jsonOf(t, r.State()), jsonOf(t, c.State()); got != want {
		t.Errorf("the rebuilt session's state differs:\n%.400s\n%.400s", got, want)
	}
	if got, want := string(pyJSON(r.sessionTree())), string(pyJSON(c.sessionTree())); got != want {
		t.Errorf("the rebuilt session's states dump differs")
	}
	if r.tab != "graphics" || r.logScroll != 3 || len(r.sel) != 1 || !reflect.DeepEqual(r.sel[0].atoms, c.sel[0].atoms) || len(r.sel[0].atoms) == 0 {
		t.Errorf("the rebuilt session: tab %q, log scroll %d, selection %d", r.tab, r.logScroll, len(r.sel))
	}
	for _, cmd := range []string{"info", "info models", "info chains", "info sel", "info rescolor /A", "info rescolor #2",
		"info rescolor /Z", "info bogus", "info models; info chains", "states", "states /home/user/Downloads"} {
		m.ServeState(spec, nil, "GET", "/run", url.Values{"command": {cmd}}, nil)
	}
	m.ServeState(spec, nil, "POST", "/run", nil, []byte("command=info+chains"))
	m.ServeState(spec, nil, "HEAD", "/run", url.Values{"command": {"info"}}, nil)
	m.ServeState(spec, nil, "GET", "/run", nil, nil)
	// The states dump, through a caller's files.
	files := memFiles{}
	m.ServeState(spec, files, "GET", "/run", url.Values{"command": {"states ~/Downloads 42"}}, nil)
	for _, name := range []string{"/home/user/Downloads/42.json", "/home/user/Downloads/42.raw.json"} {
		live, err := m.ReadFile(name)
		if err != nil || files[name] != string(live) || len(live) == 0 {
			t.Errorf("%s: from the state %d bytes, the app %d (%v)", name, len(files[name]), len(live), err)
		}
	}
	for _, cmd := range []string{"color red", "info models; close", "open 1crn", "select clear", "log clear", "destroy"} {
		if _, _, ok := ServeState(files, m.ChunkState(), "GET", "/run", url.Values{"command": {cmd}}, nil); ok {
			t.Errorf("%q answered from the state", cmd)
		}
	}
	if _, _, ok := ServeState(files, m.ChunkState(), "GET", "/other", url.Values{"command": {"info"}}, nil); ok {
		t.Error("a path other than /run answered")
	}
	if _, _, ok := ServeState(files, map[string]any{"vars": nil}, "GET", "/run", url.Values{"command": {"info"}}, nil); ok {
		t.Error("another app's state answered")
	}
}

// TestStateFiniteNumbers: commands refuse NaN and infinities, which no
// JSON state could carry.
func TestStateFiniteNumbers(t *testing.T) {
	_, c, u, _ := machine(t)
	c.run(u, "open 1crn", false)
	for _, cmd := range []string{"turn y inf", "zoom NaN", "lighting intensity nan", "graphics silhouettes true width -Inf"} {
		if res := c.run(u, cmd, false); res.err == nil {
			t.Errorf("%q accepted", cmd)
		}
	}
	if _, err := restore(c.State()); err != nil {
		t.Fatal(err)
	}
}
