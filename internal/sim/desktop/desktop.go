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
	"image"
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
	// 8000"); an unknown program is an error.
	Launch(command string) error
	// Shell runs a setup shell command (a small simulated subset: rm,
	// mkdir, touch, echo, true, ...) and returns its output and exit code.
	Shell(command string) (output string, code int)
	// AppState serves the app-state endpoints ScienceBoard exposes (path
	// such as "/dump", "/vars", "/chimerax/run"); status is an HTTP status.
	AppState(path string, body []byte) (resp []byte, status int)
	// Cursor returns the cursor position.
	Cursor() image.Point
	// Accessibility returns an accessibility tree (XML) of the visible elements.
	Accessibility() string
	// Reset reverts the machine to its snapshot (no app running).
	Reset()
	// State returns the simulated state (what the PNG chunk carries).
	State() State
}

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
	AppState  map[string]any `json:"app_state"` // the app's own state (what its state endpoint dumps)
	// Fields holds the text of the running app's text fields by element id
	// (what the screen shows in them); omitted when empty.
	Fields map[string]string `json:"fields,omitempty"`
}
