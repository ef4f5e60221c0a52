package desktop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"math"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/codapipe/codapipe/internal/sim/screen"
)

// MachineConfig configures one simulated machine.
type MachineConfig struct {
	// Seed seeds everything random about the machine's looks (wallpaper,
	// screen textures). The apps' data (structures, star catalogue, maps)
	// is fixed and never depends on it, so task answers do not either.
	// Nothing else tells machines apart on screen: machines with the same
	// seed look the same, as real VMs reverted to one snapshot do, so a
	// seeded run gives the same screenshots whatever machine runs it.
	Seed int64
}

// App names, as the task files' "type" field spells them.
const (
	AppChimeraX = "ChimeraX"
	AppCelestia = "Celestia"
	AppKAlgebra = "KAlgebra"
	AppGRASS    = "GRASS GIS"
)

// Apps returns the simulated app names in a stable order.
func Apps() []string { return []string{AppChimeraX, AppCelestia, AppKAlgebra, AppGRASS} }

// Screen geometry shared by every app.
const (
	panelH  = 24 // desktop top panel
	titleH  = 24 // app window title bar
	appTop  = panelH + titleH
	homeDir = "/home/user"
)

// simApp is one simulated application. Its methods are called with the
// machine's mutex held.
type simApp interface {
	// name returns the app name (one of Apps()).
	name() string
	// visible reports whether the element with this id is shown now.
	visible(id string) bool
	// click handles a click on a visible element. pt is the click point.
	click(u *ui, el *uiElement, button string, clicks int, pt image.Point)
	// submit handles Enter in the focused field; it returns whether the
	// field is cleared afterwards.
	submit(u *ui, id, text string) (clear bool)
	// shortcut handles a key press or hotkey that no field consumed; keys
	// are lower-case pyautogui names, e.g. ["space"] or ["ctrl", "l"].
	shortcut(u *ui, keys []string)
	// scroll handles wheel clicks (dy > 0 is up, dx > 0 is right) over el.
	scroll(u *ui, el *uiElement, dx, dy int)
	// drag handles a drag with the left button that started on el.
	drag(u *ui, el *uiElement, from, to image.Point)
	// state returns the app's state (JSON-serialisable, fresh maps).
	state() map[string]any
	// endpoint serves one app-state request; ok is false for paths the
	// app does not serve.
	endpoint(path string, query url.Values, body []byte) (resp []byte, status int, ok bool)
	// launchArgs applies the app's command-line arguments.
	launchArgs(u *ui, args []string)
	// render draws the app's window content below the title bar.
	render(c *screen.Canvas, u *ui)
}

// uiElement is an element with its app-level behaviour flags.
type uiElement struct {
	Element
	caption string // short text drawn on the element
}

// appLayout is the static layout of one app.
type appLayout struct {
	app   string
	elems []*uiElement
	byID  map[string]*uiElement
}

var (
	layoutsOnce sync.Once
	layouts     map[string]*appLayout
	byLabel     map[string]*uiElement
)

func initLayouts() {
	layoutsOnce.Do(func() {
		layouts = map[string]*appLayout{}
		byLabel = map[string]*uiElement{}
		for _, l := range []*appLayout{chimeraxLayout(), celestiaLayout(), kalgebraLayout(), grassLayout()} {
			l.byID = map[string]*uiElement{}
			for _, e := range l.elems {
				e.App = l.app
				if _, dup := l.byID[e.ID]; dup {
					panic("sim: duplicate element id " + l.app + "/" + e.ID)
				}
				if _, dup := byLabel[strings.ToLower(e.Label)]; dup {
					panic("sim: duplicate element label " + e.Label)
				}
				if !e.Box.In(image.Rect(0, 0, ScreenW, ScreenH)) || e.Box.Empty() {
					panic("sim: element box off screen: " + e.Label)
				}
				l.byID[e.ID] = e
				byLabel[strings.ToLower(e.Label)] = e
			}
			layouts[l.app] = l
		}
	})
}

// Elements returns every element of an app with its fixed box, in layout
// order (nil for an unknown app). Some elements are shown only in some
// modes (toolbar tabs, app tabs); Machine.Accessibility lists the ones
// visible now.
func Elements(app string) []Element {
	initLayouts()
	l, ok := layouts[app]
	if !ok {
		return nil
	}
	out := make([]Element, len(l.elems))
	for i, e := range l.elems {
		out[i] = e.Element
	}
	return out
}

// FindElement returns the element with the given label (case-insensitive;
// labels are unique across all apps).
func FindElement(label string) (Element, bool) {
	initLayouts()
	e, ok := byLabel[strings.ToLower(strings.TrimSpace(label))]
	if !ok {
		return Element{}, false
	}
	return e.Element, true
}

// Center returns the centre pixel of an element's box.
func (e Element) Center() image.Point {
	return image.Pt((e.Box.Min.X+e.Box.Max.X)/2, (e.Box.Min.Y+e.Box.Max.Y)/2)
}

// GridCenter returns the element's centre on the 0–1000 grid of UI-TARS
// coordinates (rounded to integers), as the oracle actions give it:
// click(start_box='(x,y)'). uitars.Render maps it back to a pixel within
// one pixel of Center.
func (e Element) GridCenter() (x, y int) {
	c := e.Center()
	return int(math.Round(float64(c.X) * 1000 / ScreenW)), int(math.Round(float64(c.Y) * 1000 / ScreenH))
}

// ui is the mutable user-interface state of a machine: what the app
// methods may change besides their own model.
type ui struct {
	m       *machine
	layout  *appLayout
	focus   string            // focused field id
	fields  map[string]string // text of the app's fields
	selAll  bool              // the focused field's text is selected
	status  string            // status-bar message
	version uint64            // bumped on every change (screenshot cache)
}

// setField sets a field's text.
func (u *ui) setField(id, text string) { u.fields[id] = text }

// field returns a field's text.
func (u *ui) field(id string) string { return u.fields[id] }

// machine implements Machine.
type machine struct {
	mu   sync.Mutex
	cfg  MachineConfig
	app  simApp
	ui   *ui
	seq  int
	cur  image.Point
	down *image.Point // mouse button held since this point
	held []string     // modifier keys held down by keyDown (ctrl, shift, alt, super)
	fs   map[string]string
	clip string

	cacheVer uint64
	cacheSeq int
	cache    []byte
}

// NewMachine returns a simulated machine in its snapshot state: a plain
// desktop with no app running.
func NewMachine(cfg MachineConfig) Machine {
	initLayouts()
	m := &machine{cfg: cfg}
	m.reset()
	return m
}

func (m *machine) reset() {
	m.app = nil
	m.ui = &ui{m: m, fields: map[string]string{}}
	m.seq = 0
	m.cur = image.Pt(ScreenW/2, ScreenH/2)
	m.down = nil
	m.held = nil
	m.clip = ""
	m.fs = snapshotFS()
	m.cache = nil
	m.ui.version++
}

// Reset reverts the machine to its snapshot.
func (m *machine) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reset()
}

// Cursor returns the cursor position.
func (m *machine) Cursor() image.Point {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// State returns the simulated state.
func (m *machine) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stateLocked()
}

func (m *machine) stateLocked() State {
	st := State{Seq: m.seq, Cursor: [2]int{m.cur.X, m.cur.Y}, Focus: m.ui.focus, SelectAll: m.ui.selAll, AppState: map[string]any{}}
	if m.app != nil {
		st.App = m.app.name()
		st.AppState = m.app.state()
		if len(m.ui.fields) > 0 {
			st.Fields = make(map[string]string, len(m.ui.fields))
			for k, v := range m.ui.fields {
				st.Fields[k] = v
			}
		}
	}
	return st
}

// Launch starts an app from a command line.
func (m *machine) Launch(command string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	words, err := shellWords(command)
	if err != nil {
		return fmt.Errorf("sim: launch %q: %w", command, err)
	}
	appName, args := programOf(words)
	if appName == "" {
		return fmt.Errorf("sim: launch %q: unknown program (the simulator runs chimerax, celestia, kalgebra and grass)", command)
	}
	m.startApp(appName, args)
	return nil
}

// programOf finds the simulated program in a command line (after env
// assignments, possibly inside a `bash -c "..."` string) and returns the
// app name and the arguments after the program.
func programOf(words []string) (string, []string) {
	for i, w := range words {
		base := strings.ToLower(path.Base(w))
		switch {
		case base == "chimerax" || strings.HasPrefix(base, "chimerax-") || base == "chimerax.exe":
			return AppChimeraX, words[i+1:]
		case strings.HasPrefix(base, "celestia"):
			return AppCelestia, words[i+1:]
		case base == "kalgebra" || base == "kalgebramobile":
			return AppKAlgebra, words[i+1:]
		case base == "grass" || strings.HasPrefix(base, "grass8") || strings.HasPrefix(base, "grass7"):
			return AppGRASS, words[i+1:]
		}
		if strings.ContainsAny(w, " ;") { // a nested script: bash -c "...; /app/bin/grass --gui ..."
			for _, part := range strings.Split(w, ";") {
				inner, err := shellWords(part)
				if err != nil {
					continue
				}
				if app, args := programOf(inner); app != "" {
					return app, args
				}
			}
		}
	}
	return "", nil
}

func (m *machine) startApp(appName string, args []string) {
	m.ui = &ui{m: m, fields: map[string]string{}, version: m.ui.version + 1}
	m.ui.layout = layouts[appName]
	switch appName {
	case AppChimeraX:
		m.app = newChimeraX()
	case AppCelestia:
		m.app = newCelestia()
	case AppKAlgebra:
		m.app = newKAlgebra()
	case AppGRASS:
		m.app = newGRASS()
	}
	m.app.launchArgs(m.ui, args)
}

// AppState serves the app-state endpoints.
func (m *machine) AppState(reqPath string, body []byte) ([]byte, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, rawQuery, _ := strings.Cut(reqPath, "?")
	q, _ := url.ParseQuery(rawQuery)
	if m.app == nil {
		return jsonError("no application is running"), 503
	}
	resp, status, ok := m.app.endpoint(p, q, body)
	if !ok {
		return jsonError(fmt.Sprintf("%s does not serve %s", m.app.name(), p)), 404
	}
	m.ui.version++
	return resp, status
}

func jsonError(msg string) []byte {
	b, _ := json.Marshal(map[string]string{"status": "error", "message": msg})
	return b
}

// mustJSON encodes v (maps get sorted keys) without HTML escaping.
func mustJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return jsonError("encoding: " + err.Error())
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// Accessibility returns an accessibility tree of the visible elements.
func (m *machine) Accessibility() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	b.WriteString(`<desktop-frame name="SIMULATOR desktop">` + "\n")
	if m.app != nil {
		b.WriteString(`  <application name="`)
		xmlEscape(&b, m.app.name())
		b.WriteString("\">\n")
		for _, e := range m.ui.layout.elems {
			if !m.app.visible(e.ID) {
				continue
			}
			role := map[string]string{
				"button": "push-button", "field": "entry", "menu": "menu-item", "tab": "page-tab",
				"list": "list", "canvas": "canvas", "checkbox": "check-box", "radio": "radio-button",
			}[e.Kind]
			if role == "" {
				role = "panel"
			}
			fmt.Fprintf(&b, `    <%s name="`, role)
			xmlEscape(&b, e.Label)
			fmt.Fprintf(&b, `" id="%s" x="%d" y="%d" width="%d" height="%d" showing="true" focused="%t"`,
				e.ID, e.Box.Min.X, e.Box.Min.Y, e.Box.Dx(), e.Box.Dy(), m.ui.focus == e.ID)
			if e.Kind == "field" {
				b.WriteString(` text="`)
				xmlEscape(&b, m.ui.fields[e.ID])
				b.WriteString(`"`)
			}
			if ck, ok := m.app.(interface{ checked(id string) (bool, bool) }); ok {
				if on, has := ck.checked(e.ID); has {
					fmt.Fprintf(&b, ` checked="%t"`, on)
				}
			}
			b.WriteString("/>\n")
		}
		b.WriteString("  </application>\n")
	}
	b.WriteString("</desktop-frame>\n")
	return b.String()
}

func xmlEscape(b *strings.Builder, s string) {
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '"':
			b.WriteString("&quot;")
		case '\n':
			b.WriteString("&#10;")
		default:
			if r < 0x20 {
				fmt.Fprintf(b, "&#%d;", r)
				continue
			}
			b.WriteRune(r)
		}
	}
}

// hit returns the visible element under pt (the last one in layout order,
// so that elements listed after a container win), or nil.
func (m *machine) hit(pt image.Point) *uiElement {
	if m.app == nil {
		return nil
	}
	elems := m.ui.layout.elems
	for i := len(elems) - 1; i >= 0; i-- {
		e := elems[i]
		if pt.In(e.Box) && m.app.visible(e.ID) {
			return e
		}
	}
	return nil
}

// Input applies one input event.
func (m *machine) Input(ev Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.input(ev); err != nil {
		return err
	}
	m.seq++
	m.ui.version++
	return nil
}

func clampPt(x, y int) image.Point {
	x = max(0, min(ScreenW-1, x))
	y = max(0, min(ScreenH-1, y))
	return image.Pt(x, y)
}

func (m *machine) input(ev Event) error {
	switch ev.Kind {
	case EvMoveTo:
		m.cur = clampPt(ev.X, ev.Y)
	case EvClick:
		if ev.HasXY {
			m.cur = clampPt(ev.X, ev.Y)
		}
		btn := ev.Button
		if btn == "" {
			btn = "left"
		}
		clicks := ev.Clicks
		if clicks <= 0 {
			clicks = 1
		}
		m.down = nil
		m.clickAt(m.cur, btn, clicks)
	case EvMouseDown:
		if ev.HasXY {
			m.cur = clampPt(ev.X, ev.Y)
		}
		p := m.cur
		m.down = &p
	case EvMouseUp:
		if ev.HasXY {
			m.cur = clampPt(ev.X, ev.Y)
		}
		if m.down == nil {
			return nil
		}
		from := *m.down
		m.down = nil
		btn := ev.Button
		if btn == "" {
			btn = "left"
		}
		if from == m.cur {
			m.clickAt(m.cur, btn, 1)
		} else if btn == "left" {
			m.dragFrom(from, m.cur)
		}
	case EvDragTo:
		from := m.cur
		m.cur = clampPt(ev.X, ev.Y)
		m.down = nil
		if ev.Button == "" || ev.Button == "left" {
			m.dragFrom(from, m.cur)
		}
	case EvWrite:
		for _, r := range ev.Text {
			switch r {
			case '\n':
				m.key([]string{"enter"})
			case '\t':
				m.key([]string{"tab"})
			case '\r':
			default:
				m.typeRune(r)
			}
		}
	case EvPress:
		if len(ev.Keys) != 1 {
			return fmt.Errorf("sim: press needs exactly one key, got %d", len(ev.Keys))
		}
		m.key(m.withHeld(normKeys(ev.Keys)))
	case EvHotkey:
		if len(ev.Keys) == 0 {
			return fmt.Errorf("sim: hotkey needs at least one key")
		}
		m.key(m.withHeld(normKeys(ev.Keys)))
	case EvKeyDown, EvKeyUp:
		if len(ev.Keys) != 1 {
			return fmt.Errorf("sim: %s needs exactly one key, got %d", ev.Kind, len(ev.Keys))
		}
		k := normKeys(ev.Keys)[0]
		held := slices.Contains(m.held, k)
		switch {
		case ev.Kind == EvKeyUp:
			m.held = slices.DeleteFunc(m.held, func(h string) bool { return h == k })
		case modifierKeys[k] && !held:
			m.held = append(m.held, k)
		case !modifierKeys[k]:
			// A key held down types once (no autorepeat), with the modifiers
			// held at the time.
			m.key(m.withHeld([]string{k}))
		}
	case EvScroll, EvHScroll:
		if ev.HasXY {
			m.cur = clampPt(ev.X, ev.Y)
		}
		if m.app == nil {
			return nil
		}
		if el := m.hit(m.cur); el != nil {
			if ev.Kind == EvScroll {
				m.app.scroll(m.ui, el, 0, ev.Amount)
			} else {
				m.app.scroll(m.ui, el, ev.Amount, 0)
			}
		}
	case EvSleep:
		// Simulated time does not pass on its own.
	default:
		return fmt.Errorf("sim: unknown event kind %q", ev.Kind)
	}
	return nil
}

// modifierKeys are the keys keyDown holds; any other key pressed by keyDown
// acts once.
var modifierKeys = map[string]bool{"ctrl": true, "shift": true, "alt": true, "super": true}

// withHeld puts the held modifiers before keys (without repeating one).
func (m *machine) withHeld(keys []string) []string {
	if len(m.held) == 0 {
		return keys
	}
	out := slices.Clone(m.held)
	for _, k := range keys {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// keyAliases maps key names onto the ones the apps handle.
var keyAliases = map[string]string{
	"return": "enter", "esc": "escape", "control": "ctrl", "ctrlleft": "ctrl", "ctrlright": "ctrl",
	"shiftleft": "shift", "shiftright": "shift", "altleft": "alt", "altright": "alt", "del": "delete",
	"arrowup": "up", "arrowdown": "down", "arrowleft": "left", "arrowright": "right", "command": "ctrl",
	"cmd": "ctrl", "win": "super", "winleft": "super", "meta": "super", " ": "space",
}

func normKeys(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		k = strings.ToLower(strings.TrimSpace(k))
		if a, ok := keyAliases[k]; ok {
			k = a
		}
		out[i] = k
	}
	return out
}

func (m *machine) clickAt(pt image.Point, button string, clicks int) {
	if m.app == nil {
		return
	}
	el := m.hit(pt)
	if el == nil {
		m.ui.focus = ""
		m.ui.selAll = false
		return
	}
	if el.Kind == "field" && button == "left" {
		m.ui.focus = el.ID
		m.ui.selAll = clicks >= 2 // double/triple click selects the text
		return
	}
	if button == "left" {
		m.ui.focus = ""
		m.ui.selAll = false
	}
	switch el.Kind {
	case "button", "checkbox", "radio", "tab":
		// A double click on a button presses it twice, as in Qt.
		for range clicks {
			m.app.click(m.ui, el, button, 1, pt)
		}
	default:
		m.app.click(m.ui, el, button, clicks, pt)
	}
}

func (m *machine) dragFrom(from, to image.Point) {
	if m.app == nil {
		return
	}
	el := m.hit(from)
	if el == nil {
		return
	}
	if el.Kind == "field" {
		m.ui.focus = el.ID
		m.ui.selAll = true // dragging across a field selects its text
		return
	}
	m.app.drag(m.ui, el, from, to)
}

func (m *machine) typeRune(r rune) {
	if m.app == nil || m.ui.focus == "" || !m.app.visible(m.ui.focus) {
		return
	}
	id := m.ui.focus
	if m.ui.selAll {
		m.ui.fields[id] = ""
		m.ui.selAll = false
	}
	if len(m.ui.fields[id]) < 4096 {
		m.ui.fields[id] += string(r)
	}
}

// key applies a key press or a hotkey.
func (m *machine) key(keys []string) {
	if m.app == nil {
		return
	}
	u := m.ui
	combo := strings.Join(keys, "+")
	if u.focus != "" && !m.app.visible(u.focus) {
		u.focus, u.selAll = "", false // the field's tab was switched away
	}
	if u.focus != "" {
		id := u.focus
		switch combo {
		case "enter":
			text := u.fields[id]
			if m.app.submit(u, id, text) {
				u.fields[id] = ""
				u.selAll = false
			} else {
				u.selAll = true
			}
			return
		case "backspace", "delete":
			if u.selAll {
				u.fields[id] = ""
				u.selAll = false
				return
			}
			if combo == "backspace" {
				t := []rune(u.fields[id])
				if len(t) > 0 {
					u.fields[id] = string(t[:len(t)-1])
				}
			}
			return
		case "ctrl+a":
			u.selAll = true
			return
		case "ctrl+c", "ctrl+x":
			if u.selAll {
				m.clip = u.fields[id]
				if combo == "ctrl+x" {
					u.fields[id] = ""
					u.selAll = false
				}
			}
			return
		case "ctrl+v", "shift+insert":
			for _, r := range m.clip {
				if r != '\n' && r != '\r' {
					m.typeRune(r)
				}
			}
			return
		case "escape":
			u.selAll = false
			return
		case "tab":
			m.focusNext()
			return
		case "space":
			m.typeRune(' ')
			return
		case "left", "right", "home", "end", "up", "down":
			u.selAll = false
			return
		}
		if len(keys) == 1 && len([]rune(keys[0])) == 1 {
			m.typeRune([]rune(keys[0])[0])
			return
		}
		if len(keys) == 2 && keys[0] == "shift" && len([]rune(keys[1])) == 1 {
			m.typeRune([]rune(strings.ToUpper(keys[1]))[0])
			return
		}
	}
	if combo == "tab" {
		m.focusNext()
		return
	}
	m.app.shortcut(u, keys)
}

// focusNext moves the focus to the next visible field.
func (m *machine) focusNext() {
	var ids []string
	for _, e := range m.ui.layout.elems {
		if e.Kind == "field" && m.app.visible(e.ID) {
			ids = append(ids, e.ID)
		}
	}
	if len(ids) == 0 {
		return
	}
	next := ids[0]
	for i, id := range ids {
		if id == m.ui.focus {
			next = ids[(i+1)%len(ids)]
		}
	}
	m.ui.focus = next
	m.ui.selAll = true
}

// Screenshot renders the screen.
func (m *machine) Screenshot() ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cache != nil && m.cacheVer == m.ui.version && m.cacheSeq == m.seq {
		return m.cache, nil
	}
	png, err := m.screenshotLocked()
	if err != nil {
		return nil, err
	}
	m.cache, m.cacheVer, m.cacheSeq = png, m.ui.version, m.seq
	return png, nil
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
