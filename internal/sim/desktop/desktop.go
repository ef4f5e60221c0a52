// Package desktop is part of codapipe's SIMULATOR (see package sim): the
// simulated machine. A Machine is one simulated VM — a 1280×800 desktop
// that runs the apps of its Catalog (each simulated app is a package of
// its own under internal/sim/apps implementing App) — driven by
// pyautogui-level input events (ParsePyAutoGUI interprets pyautogui code)
// and setup shell commands (a small simulated shell on a simulated file
// system), rendered to PNG screenshots (package screen) that carry the
// simulated state in an invisible PNG text chunk (ReadStateChunk). The
// screen always says SIMULATOR.
//
// Everything is seeded: the same seed and the same events give
// byte-identical screenshots.
package desktop

import (
	"errors"
	"image"
	"net/url"
)

// Screen size of every simulated machine.
const (
	ScreenW = 1280
	ScreenH = 800
)

// StateChunkKeyword is the keyword of the PNG tEXt chunk that carries the
// simulated state (JSON) in every screenshot. Only the simulated judge
// reads it; it is invisible in the image.
const StateChunkKeyword = "codapipe-sim-state"

// EventKind is a pyautogui-level input event.
type EventKind string

// Input events, named after the pyautogui calls that produce them.
const (
	EvMoveTo    EventKind = "moveTo"    // X, Y
	EvClick     EventKind = "click"     // X, Y, Button ("left", "right", "middle"), Clicks (1, 2, 3)
	EvMouseDown EventKind = "mouseDown" // X, Y, Button
	EvMouseUp   EventKind = "mouseUp"   // X, Y, Button
	EvDragTo    EventKind = "dragTo"    // X, Y (from the current cursor position), Button
	EvWrite     EventKind = "write"     // Text (literal characters; "\n" is Enter)
	EvPress     EventKind = "press"     // Keys[0] (a pyautogui key name: "enter", "tab", "backspace", "a", ...)
	EvHotkey    EventKind = "hotkey"    // Keys (e.g. ["ctrl", "a"])
	EvKeyDown   EventKind = "keyDown"   // Keys[0] pressed and held
	EvKeyUp     EventKind = "keyUp"     // Keys[0] released
	EvScroll    EventKind = "scroll"    // Amount (clicks; positive = up), at the cursor or X, Y when HasXY
	EvHScroll   EventKind = "hscroll"   // Amount (positive = right)
	EvSleep     EventKind = "sleep"     // Seconds
)

// Event is one input event. Coordinates are screen pixels.
type Event struct {
	Kind    EventKind
	X, Y    int
	HasXY   bool // X, Y were given (scroll, click without position use the cursor)
	Button  string
	Clicks  int
	Text    string
	Keys    []string
	Amount  int
	Seconds float64
}

// Element is a visible UI element at a fixed box. Labels are the
// accessible names (tooltips and the accessibility tree show them) and
// what plans quote; they are unique across a catalogue's apps, so a label
// alone grounds to one box.
type Element struct {
	App     string          // "ChimeraX", "Celestia", "KAlgebra", "GRASS GIS"
	ID      string          // stable id within the app, e.g. "cmdline"
	Label   string          // e.g. "ChimeraX command line"
	Kind    string          // "button", "field", "menu", "tab", "list", "canvas", "checkbox", "radio"
	Caption string          // the short text drawn on it ("Stick"), if any
	Box     image.Rectangle // pixels on the 1280×800 screen
}

// Machine is one simulated VM. Implementations are safe for concurrent use.
type Machine interface {
	// Screenshot renders the screen as a PNG carrying the state chunk.
	Screenshot() ([]byte, error)
	// Input applies one input event.
	Input(ev Event) error
	// Launch starts an application from a command line as a task's
	// "launch" item gives it (e.g. "chimerax --cmd ...", "/app/bin/kalgebra
	// 8000"); a command line that starts no simulated app is an error
	// matching ErrUnknownProgram.
	Launch(command string) error
	// Shell runs a command line in the simulated shell (a small subset:
	// rm, mkdir, touch, echo, printf, cat, bash SCRIPT, bash -c, ...; see
	// shell.go) and returns what it wrote to stdout and stderr and its
	// exit code (127: command not found).
	Shell(command string) (stdout, stderr string, code int)
	// AppServe serves one request to the application's own server (port
	// 8000 in a real VM: the routes of ScienceBoard's modified KAlgebra,
	// Celestia or GRASS GIS, or ChimeraX's REST server) with the method,
	// path, query and body it arrived with; status is an HTTP status (404
	// with an empty body for a path the app does not serve). When no app
	// runs nothing listens on that port: err matches ErrNoApp.
	AppServe(method, path string, query url.Values, body []byte) (resp []byte, status int, err error)
	// ReadFile returns the content of the file at path p (absolute, or
	// relative to the home folder). A missing file, a folder or a path
	// through a file is an *fs.PathError whose Err is syscall.ENOENT,
	// EISDIR or ENOTDIR, as the real file system answers.
	ReadFile(p string) ([]byte, error)
	// WriteFile writes data to the file at p, or appends it with appendTo.
	// Its folder must exist: WriteFile creates no folder (errors as
	// ReadFile's). "/dev/null" swallows everything.
	WriteFile(p string, data []byte, appendTo bool) error
	// Cursor returns the cursor position.
	Cursor() image.Point
	// Accessibility returns an accessibility tree (XML) of the visible elements.
	Accessibility() string
	// Reset reverts the machine to its snapshot (no app running).
	Reset()
	// State returns the simulated state (what the PNG chunk carries).
	State() State
}

// Errors of a Machine.
var (
	// ErrUnknownProgram is a command line that starts no simulated app.
	ErrUnknownProgram = errors.New("unknown program")
	// ErrNoApp is a request to the app server of a machine that runs no
	// app: on a real VM nothing listens on port 8000 then, and the
	// connection is refused.
	ErrNoApp = errors.New("no application is listening on the app port (connection refused)")
)

// State is the simulated state of one machine: the active app and its
// state, JSON-encoded into each screenshot's state chunk.
type State struct {
	App    string `json:"app"`    // "" when no app runs
	Seq    int    `json:"seq"`    // number of input events applied since reset
	Cursor [2]int `json:"cursor"` // x, y
	Focus  string `json:"focus"`  // id of the focused element, if any
	// SelectAll is true while the focused field's text is all selected
	// (after ctrl+a or a double click), so typing replaces it.
	SelectAll bool           `json:"select_all,omitempty"`
	AppState  map[string]any `json:"app_state"` // the app's own state (App.State: what its read-only routes answer from, AppSpec.ServeState)
	// Fields holds the text of the running app's text fields by element id
	// (what the screen shows in them); omitted when empty.
	Fields map[string]string `json:"fields,omitempty"`
}
