package desktop

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"io"
	"maps"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/screen"
	"github.com/codapipe/codapipe/pkg/traj"
)

// AppSpec describes a simulated application to the machines that run it.
// Each app is a package of its own (internal/sim/apps/<name>) whose Spec
// function returns its AppSpec and whose running instances implement App;
// a Catalog lists the apps machines run.
type AppSpec struct {
	// Name is the app's name as task files spell their "type"
	// ("ChimeraX", "GRASS GIS").
	Name string
	// Programs are the programs that start the app: path.Match patterns
	// over the lower-case base name of a command line's program
	// ("chimerax", "celestia*").
	Programs []string
	// Elements are every element of the app with its fixed box and
	// caption, in layout order: where boxes nest, the later element wins
	// the hit test. The catalogue fills in Element.App.
	Elements []Element
	// Files are what the app adds to a machine's snapshot file system:
	// path → content; a path ending in "/" is a folder.
	Files map[string]string
	// Start runs the app with the arguments after the program on its
	// command line.
	Start func(u *UI, args []string) App
	// ServeState answers a request to the app's server (as App.Serve
	// gets it) from a state of the app — what App.State returned, in
	// process or decoded from a screenshot's state chunk — exactly as the
	// running app answers it in that state, for the requests that only
	// read the app; ok is false for every other request (one that changes
	// the app, or whose reply the state does not determine). Files such a
	// request writes (ChimeraX's states command) go to files, which may be
	// nil when there are none. The app's Serve answers the same requests
	// through the same function, so the two cannot differ. Nil: the state
	// answers nothing.
	ServeState func(files Files, state map[string]any, method, path string, query url.Values, body []byte) (resp []byte, status int, ok bool)
}

// Files is where a request to an app's server writes files: the
// machine's file system (*UI) or, for ServeState, the caller's own.
type Files interface {
	// Abs returns the absolute path of p (AbsPath).
	Abs(p string) string
	// WriteFile writes text to the file at p.
	WriteFile(p, text string) error
}

// App is the interface every simulated app implements: a running app,
// as the machine drives and draws it. The machine calls its methods one
// at a time, with the machine's lock held; u is the machine's user
// interface.
type App interface {
	// Visible reports whether the element with this id is shown now
	// (tabs hide elements).
	Visible(id string) bool
	// Click handles a click with button ("left", "right", "middle") on a
	// visible element at pt. A double click on a button, check box, radio
	// button or tab arrives as two single clicks, as in Qt.
	Click(u *UI, el Element, button string, clicks int, pt image.Point)
	// Submit handles Enter in the focused field id holding text and
	// reports whether the field is cleared (else its text stays, selected).
	Submit(u *UI, id, text string) (clear bool)
	// Shortcut handles a key press or hotkey that no field took; keys are
	// lower-case pyautogui names (["space"], ["ctrl", "l"]).
	Shortcut(u *UI, keys []string)
	// Scroll handles wheel clicks over el (dy > 0 is up, dx > 0 right).
	Scroll(u *UI, el Element, dx, dy int)
	// Drag handles a drag with the left button that started on el.
	Drag(u *UI, el Element, from, to image.Point)
	// State returns the app's state (JSON-serialisable, fresh maps): what
	// State.AppState and the screenshots' state chunk carry. It holds
	// what the app's read-only routes answer from (AppSpec.ServeState)
	// and what its window shows besides the fields (the open tab,
	// scrolling), so that any visible change changes it.
	State() map[string]any
	// Serve serves one request to the app's own server (port 8000 in a
	// real VM: the routes of ScienceBoard's modified app, or ChimeraX's
	// REST server) with the method, path, query and body it arrived with;
	// ok is false for paths the app does not serve.
	Serve(u *UI, method, path string, query url.Values, body []byte) (resp []byte, status int, ok bool)
	// Render draws the app's window below the title bar (from AppTop).
	Render(c *screen.Canvas, u *UI)
}

// Checker is implemented by apps that have checkable elements
// (check boxes, radio buttons, toggle buttons); the accessibility tree
// shows their state.
type Checker interface {
	// Checked reports whether element id is checked; ok is false when it
	// cannot be.
	Checked(id string) (on, ok bool)
}

// Screen geometry every app shares.
const (
	panelH = 24 // desktop top panel
	titleH = 24 // app window title bar
	// AppTop is the top of an app's window content, below the desktop's
	// top panel and the app's title bar.
	AppTop = panelH + titleH
)

// HomeDir is the home folder of the simulated user.
const HomeDir = "/home/user"

// UI is a machine's user-interface state that a running app may read and
// change: the text of its fields, the status line, and through it the
// cursor and the file system.
type UI struct {
	m       *machine
	app     *catalogApp       // the running app's catalogue entry (nil: none)
	focus   string            // focused field id
	fields  map[string]string // text of the app's fields
	selAll  bool              // the focused field's text is selected
	status  string            // status-bar message
	version uint64            // bumped on every change (screenshot cache)
}

// Field returns the text of field id.
func (u *UI) Field(id string) string { return u.fields[id] }

// SetField sets the text of field id.
func (u *UI) SetField(id, text string) { u.fields[id] = text }

// Status returns the status-bar message.
func (u *UI) Status() string { return u.status }

// SetStatus sets the status-bar message.
func (u *UI) SetStatus(s string) { u.status = s }

// Element returns the running app's element with this id (the zero
// Element when there is none).
func (u *UI) Element(id string) Element {
	if i, ok := u.app.byID[id]; ok {
		return u.app.elems[i]
	}
	return Element{}
}

// Elements returns the running app's elements in layout order.
func (u *UI) Elements() []Element { return slices.Clone(u.app.elems) }

// Cursor returns the mouse position.
func (u *UI) Cursor() image.Point { return u.m.cur }

// Abs returns the absolute path of p (AbsPath).
func (u *UI) Abs(p string) string { return AbsPath(p) }

// ReadFile returns the content of the file at p; ok is false when there
// is no such file.
func (u *UI) ReadFile(p string) (content string, ok bool) {
	p = u.m.abs(p)
	if !u.m.isFile(p) {
		return "", false
	}
	return u.m.fs[p], true
}

// WriteFile writes text to the file at p; its folder must exist.
func (u *UI) WriteFile(p, text string) error { return u.m.writeFile(p, text, false) }

// SubmitField submits field id as Enter in it does (the app's Submit) and
// clears it when Submit says so: what a field's Run or Calculate button
// does.
func (u *UI) SubmitField(id string) {
	if u.m.inst.Submit(u, id, u.fields[id]) {
		u.fields[id] = ""
	}
}

// DrawField draws field id with its text (or placeholder when it is empty
// and not focused), focus, caret and selection.
func (u *UI) DrawField(c *screen.Canvas, id, placeholder string) {
	c.Field(u.Element(id).Box, u.fields[id], placeholder, u.focus == id, u.selAll && u.focus == id)
}

// Catalog is the set of apps a machine can run, with their elements.
// It is read-only and shared by machines; a nil Catalog has no apps.
type Catalog struct {
	apps    []*catalogApp
	byLabel map[string]Element // lower-case label
}

type catalogApp struct {
	spec  AppSpec
	elems []Element      // with App set
	byID  map[string]int // index into elems
}

// NewCatalog returns the catalogue of apps, in this order. Names must be
// unique, element ids unique within an app, labels unique across all
// apps (so that a label alone grounds to one box), and every box
// non-empty and on the screen.
func NewCatalog(apps ...AppSpec) (*Catalog, error) {
	c := &Catalog{byLabel: map[string]Element{}}
	var errs []error
	for _, a := range apps {
		name := a.Name
		if _, dup := c.find(name); dup || name == "" {
			errs = append(errs, fmt.Errorf("app %q: empty or duplicate name", name))
			continue
		}
		for _, p := range a.Programs {
			if _, err := path.Match(p, ""); err != nil {
				errs = append(errs, fmt.Errorf("app %s: program pattern %q: %w", name, p, err))
			}
		}
		ca := &catalogApp{spec: a, byID: map[string]int{}}
		for _, e := range a.Elements {
			e.App = name
			key := strings.ToLower(e.Label)
			_, dupID := ca.byID[e.ID]
			_, dupLabel := c.byLabel[key]
			switch {
			case dupID:
				errs = append(errs, fmt.Errorf("app %s: duplicate element id %q", name, e.ID))
			case dupLabel:
				errs = append(errs, fmt.Errorf("app %s: duplicate element label %q", name, e.Label))
			case e.Box.Empty() || !e.Box.In(image.Rect(0, 0, ScreenW, ScreenH)):
				errs = append(errs, fmt.Errorf("app %s: element %q: box %v empty or off the screen", name, e.Label, e.Box))
			}
			ca.byID[e.ID] = len(ca.elems)
			ca.elems = append(ca.elems, e)
			c.byLabel[key] = e
		}
		c.apps = append(c.apps, ca)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("sim: catalogue: %w", errors.Join(errs...))
	}
	return c, nil
}

// Names returns the app names in catalogue order.
func (c *Catalog) Names() []string {
	if c == nil {
		return nil
	}
	out := make([]string, len(c.apps))
	for i, a := range c.apps {
		out[i] = a.spec.Name
	}
	return out
}

// Elements returns every element of an app with its fixed box, in layout
// order (nil for an unknown app). Some elements are shown only in some
// modes (toolbar tabs, app tabs); Machine.Accessibility lists the ones
// visible now.
func (c *Catalog) Elements(app string) []Element {
	a, ok := c.find(app)
	if !ok {
		return nil
	}
	return slices.Clone(a.elems)
}

// FindElement returns the element with the given label (case-insensitive;
// labels are unique across the catalogue).
func (c *Catalog) FindElement(label string) (Element, bool) {
	if c == nil {
		return Element{}, false
	}
	e, ok := c.byLabel[strings.ToLower(strings.TrimSpace(label))]
	return e, ok
}

func (c *Catalog) find(name string) (*catalogApp, bool) {
	if c == nil {
		return nil, false
	}
	for _, a := range c.apps {
		if a.spec.Name == name {
			return a, true
		}
	}
	return nil, false
}

// program finds the app a command line starts (after env assignments,
// possibly inside a `bash -c "..."` script) and returns it with the
// arguments after the program.
func (c *Catalog) program(words []string) (*catalogApp, []string) {
	if c == nil {
		return nil, nil
	}
	for i, w := range words {
		base := strings.ToLower(path.Base(w))
		for _, a := range c.apps {
			for _, p := range a.spec.Programs {
				if ok, _ := path.Match(p, base); ok {
					return a, words[i+1:]
				}
			}
		}
		if strings.ContainsAny(w, " ;") { // a nested script: bash -c "...; /app/bin/grass --gui ..."
			for _, part := range strings.Split(w, ";") {
				inner, err := ShellWords(part)
				if err != nil {
					continue
				}
				if a, args := c.program(inner); a != nil {
					return a, args
				}
			}
		}
	}
	return nil, nil
}

// files returns what the apps add to the snapshot file system.
func (c *Catalog) files() map[string]string {
	out := map[string]string{}
	if c != nil {
		for _, a := range c.apps {
			maps.Copy(out, a.spec.Files)
		}
	}
	return out
}

// JSON encodes v for an app-state response (traj.MarshalCompact: no HTML
// escaping, map keys sorted, no final newline); an encoding
// error becomes a JSONError body.
func JSON(v any) []byte {
	b, err := traj.MarshalCompact(v)
	if err != nil {
		return JSONError("encoding: " + err.Error())
	}
	return b
}

// RangeJSON reads a request body as the C++ app servers (Celestia,
// KAlgebra) do: nlohmann's json::parse of exactly one value, then a range
// loop over it, in which a list gives its elements, an object its values
// in key order, null nothing and any other value itself. With useNumber
// the numbers stay json.Number; without, they are float64 and one too
// large for it fails the parse.
func RangeJSON(body []byte, useNumber bool) ([]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if useNumber {
		dec.UseNumber()
	}
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data")
	}
	switch v := v.(type) {
	case []any:
		return v, nil
	case map[string]any:
		var elems []any
		for _, k := range slices.Sorted(maps.Keys(v)) {
			elems = append(elems, v[k])
		}
		return elems, nil
	case nil:
		return nil, nil
	}
	return []any{v}, nil
}

// JSONError is the body of an app-state error response:
// {"status": "error", "message": msg}.
func JSONError(msg string) []byte {
	b, _ := json.Marshal(map[string]string{"status": "error", "message": msg})
	return b
}

// Tabs is the tab bar of an app with tabs. An app embeds it, which gives
// the app its Visible method, and the machine then handles clicks on its
// tabs (ClickTab): elements "tab-N" open tab N.
type Tabs struct {
	Open int            // the open tab
	Of   map[string]int // the tab of each element that belongs to one; the others show on every tab
}

// Visible reports whether element id shows while the open tab is open.
func (t *Tabs) Visible(id string) bool {
	if tab, ok := t.Of[id]; ok {
		return tab == t.Open
	}
	return true
}

// ClickTab handles what a click does before the app's Click sees it:
// only left clicks count, and one on element "tab-N" opens tab N. It
// reports whether the click is used up.
func (t *Tabs) ClickTab(el Element, button string) bool {
	if button != "left" {
		return true
	}
	if rest, ok := strings.CutPrefix(el.ID, "tab-"); ok {
		t.Open, _ = strconv.Atoi(rest)
		return true
	}
	return false
}
