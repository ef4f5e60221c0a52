// Package desktoptest is part of codapipe's SIMULATOR (see package sim):
// helpers for the tests that drive a simulated machine (package desktop)
// with some apps, used by the tests of the machine and of every app.
package desktoptest

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/sim/desktop"
)

// Machine is a simulated machine driven by a test: its helpers fail the
// test when an input or a request fails.
type Machine struct {
	desktop.Machine
	Catalog *desktop.Catalog
	t       testing.TB
}

// New returns a machine in its snapshot state (no app running) that runs
// the given apps, with its looks seeded by seed.
func New(t testing.TB, seed int64, apps ...desktop.AppSpec) *Machine {
	t.Helper()
	cat, err := desktop.NewCatalog(apps...)
	if err != nil {
		t.Fatal(err)
	}
	return &Machine{Machine: desktop.NewMachine(desktop.MachineConfig{Apps: cat, Seed: seed}), Catalog: cat, t: t}
}

// Start returns a machine that runs app, its looks seeded by 0, with app
// launched by command.
func Start(t testing.TB, app desktop.AppSpec, command string) *Machine {
	t.Helper()
	m := New(t, 0, app)
	m.Start(command)
	return m
}

// Running is the app a test machine runs, as its spec's Start made it:
// the UI it was given and the app (zero until the machine launches it).
type Running[A desktop.App] struct {
	UI  *desktop.UI
	App A
}

// Watch returns app with its Start wrapped so that the launch records the
// UI and the app it makes (which must be an A) in the returned Running.
func Watch[A desktop.App](app desktop.AppSpec) (desktop.AppSpec, *Running[A]) {
	r := &Running[A]{}
	start := app.Start
	app.Start = func(u *desktop.UI, args []string) desktop.App {
		a := start(u, args)
		r.UI, r.App = u, a.(A)
		return a
	}
	return app, r
}

// Call sends one request to the app's own server (App.Serve) with a
// body when one is given or the method is POST, and returns the reply; a
// route the app does not serve answers 404 with no body.
func (r *Running[A]) Call(method, path, body string) (string, int) {
	var b []byte
	if body != "" || method == "POST" {
		b = []byte(body)
	}
	resp, status, ok := r.App.Serve(r.UI, method, path, nil, b)
	if !ok {
		return "", 404
	}
	return string(resp), status
}

// Route is one request to an app's own server and the answer a test
// wants: the status and the exact body, or "-" for a body not checked.
type Route struct {
	Method, Path, Body string
	Status             int
	Want               string
}

// CheckRoutes sends each route's request with call (a Running's Call)
// and reports every answer that is not the route's; it returns the bodies
// answered, one per route.
func CheckRoutes(t testing.TB, call func(method, path, body string) (string, int), routes []Route) []string {
	t.Helper()
	bodies := make([]string, len(routes))
	for i, r := range routes {
		got, status := call(r.Method, r.Path, r.Body)
		if status != r.Status || r.Want != "-" && got != r.Want {
			t.Errorf("%s %s %s = %d %.100q, want %d %q", r.Method, r.Path, r.Body, status, got, r.Status, r.Want)
		}
		bodies[i] = got
	}
	return bodies
}

// Start launches an app from a command line.
func (m *Machine) Start(command string) {
	m.t.Helper()
	if err := m.Launch(command); err != nil {
		m.t.Fatal(err)
	}
}

// Input applies events.
func (m *Machine) Input(evs ...desktop.Event) {
	m.t.Helper()
	for _, ev := range evs {
		if err := m.Machine.Input(ev); err != nil {
			m.t.Fatalf("input %+v: %v", ev, err)
		}
	}
}

// Click clicks the centre of the element with this label.
func (m *Machine) Click(label string) {
	m.t.Helper()
	e, ok := m.Catalog.FindElement(label)
	if !ok {
		m.t.Fatalf("no element %q", label)
	}
	c := e.Center()
	m.Input(desktop.Event{Kind: desktop.EvClick, X: c.X, Y: c.Y, HasXY: true, Button: "left", Clicks: 1})
}

// Write types text.
func (m *Machine) Write(text string) {
	m.t.Helper()
	m.Input(desktop.Event{Kind: desktop.EvWrite, Text: text})
}

// Key presses one key, or several together as a hotkey.
func (m *Machine) Key(keys ...string) {
	m.t.Helper()
	kind := desktop.EvHotkey
	if len(keys) == 1 {
		kind = desktop.EvPress
	}
	m.Input(desktop.Event{Kind: kind, Keys: keys})
}

// Get returns the JSON object the app server answers to path (which may
// carry a query): a GET when body is empty, else a POST of body. Any
// status but 200, or no app running, fails the test.
func (m *Machine) Get(path, body string) map[string]any {
	m.t.Helper()
	method, b := "GET", []byte(nil)
	if body != "" {
		method, b = "POST", []byte(body)
	}
	p, rawQuery, _ := strings.Cut(path, "?")
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		m.t.Fatalf("%s: bad query: %v", path, err)
	}
	resp, status, err := m.AppServe(method, p, q, b)
	if err != nil {
		m.t.Fatalf("%s %s: %v", method, path, err)
	}
	if status != 200 {
		m.t.Fatalf("%s %s: status %d: %s", method, path, status, resp)
	}
	var v map[string]any
	if err := json.Unmarshal(resp, &v); err != nil {
		m.t.Fatalf("%s: %v: %s", path, err, resp)
	}
	return v
}

// Value returns the value at keys in the JSON object a GET of path
// answers (nested objects; no keys: the whole object).
func (m *Machine) Value(path string, keys ...string) any {
	m.t.Helper()
	var v any = m.Get(path, "")
	for _, k := range keys {
		obj, ok := v.(map[string]any)
		if !ok {
			m.t.Fatalf("%s: no object at %q in %v", path, k, v)
		}
		v = obj[k]
	}
	return v
}

// ChunkState returns the app state a screenshot carries now: its state
// chunk's AppState, decoded as the simulated judge decodes it.
func (m *Machine) ChunkState() map[string]any {
	m.t.Helper()
	png, err := m.Screenshot()
	if err != nil {
		m.t.Fatal(err)
	}
	st, err := desktop.ReadStateChunk(png)
	if err != nil {
		m.t.Fatal(err)
	}
	return st.AppState
}

// ServeState checks that the app's AppSpec.ServeState answers a request
// from the state a screenshot carries now (ChunkState) as the running
// app answers it (AppServe), and returns that answer; a request it does
// not answer fails the test.
func (m *Machine) ServeState(spec desktop.AppSpec, files desktop.Files, method, path string, query url.Values, body []byte) ([]byte, int) {
	m.t.Helper()
	got, gotStatus, ok := spec.ServeState(files, m.ChunkState(), method, path, query, body)
	if !ok {
		m.t.Fatalf("%s %s %s: not answered from the state", method, path, body)
	}
	want, status, err := m.AppServe(method, path, query, body)
	if err != nil {
		m.t.Fatalf("%s %s: %v", method, path, err)
	}
	if gotStatus != status || string(got) != string(want) {
		m.t.Errorf("%s %s %s: from the state %d %.300q, the app %d %.300q", method, path, body, gotStatus, got, status, want)
	}
	return want, status
}

// Visible returns the elements of the running app that the accessibility
// tree lists, i.e. those shown now.
func (m *Machine) Visible() []desktop.Element { return VisibleElements(m.Machine, m.Catalog) }

// VisibleElements returns the elements of m's running app (from cat) that
// its accessibility tree lists, i.e. those shown now.
func VisibleElements(m desktop.Machine, cat *desktop.Catalog) []desktop.Element {
	var out []desktop.Element
	tree := m.Accessibility()
	for _, e := range cat.Elements(m.State().App) {
		if strings.Contains(tree, `name="`+e.Label+`"`) {
			out = append(out, e)
		}
	}
	return out
}
