package desktop

import (
	"fmt"
	"image"
	"math"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// MachineConfig configures one simulated machine.
type MachineConfig struct {
	// Apps are the apps the machine can run (nil: none, a plain desktop).
	Apps *Catalog
	// Seed seeds everything random about the machine's looks (wallpaper,
	// screen textures). The apps' data (structures, star catalogue, maps)
	// is fixed and never depends on it, so task answers do not either.
	// Nothing else tells machines apart on screen: machines with the same
	// seed look the same, as real VMs reverted to one snapshot do, so a
	// seeded run gives the same screenshots whatever machine runs it.
	Seed int64
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

// machine implements Machine.
type machine struct {
	mu   sync.Mutex
	cfg  MachineConfig
	app  *catalogApp // the running app (nil: none)
	inst App         // the running app
	ui   *UI
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
	m := &machine{cfg: cfg}
	m.reset()
	return m
}

func (m *machine) reset() {
	m.app, m.inst = nil, nil
	m.ui = &UI{m: m, fields: map[string]string{}}
	m.seq = 0
	m.cur = image.Pt(ScreenW/2, ScreenH/2)
	m.down = nil
	m.held = nil
	m.clip = ""
	m.fs = snapshotFS(m.cfg.Apps)
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
		st.App = m.app.spec.Name
		st.AppState = m.inst.State()
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
	words, err := ShellWords(command)
	if err != nil {
		return fmt.Errorf("sim: launch %q: %w", command, err)
	}
	app, args := m.cfg.Apps.program(words)
	if app == nil {
		return fmt.Errorf("sim: launch %q: %w (the simulated apps are %s)", command, ErrUnknownProgram, strings.Join(m.cfg.Apps.Names(), ", "))
	}
	m.startApp(app, args)
	return nil
}

func (m *machine) startApp(app *catalogApp, args []string) {
	m.ui = &UI{m: m, app: app, fields: map[string]string{}, version: m.ui.version + 1}
	m.app = app
	m.inst = app.spec.Start(m.ui, args)
}

// AppServe serves one request to the running app's server.
func (m *machine) AppServe(method, p string, q url.Values, body []byte) ([]byte, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.app == nil {
		return nil, 0, ErrNoApp
	}
	if q == nil {
		q = url.Values{}
	}
	resp, status, ok := m.inst.Serve(m.ui, method, p, q, body)
	if !ok {
		return nil, 404, nil
	}
	m.ui.version++
	return resp, status, nil
}

// Accessibility returns an accessibility tree of the visible elements.
func (m *machine) Accessibility() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	b.WriteString(`<desktop-frame name="SIMULATOR desktop">` + "\n")
	if m.app != nil {
		b.WriteString(`  <application name="`)
		xmlEscape(&b, m.app.spec.Name)
		b.WriteString("\">\n")
		for _, e := range m.app.elems {
			if !m.inst.Visible(e.ID) {
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
			if ck, ok := m.inst.(Checker); ok {
				if on, has := ck.Checked(e.ID); has {
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
func (m *machine) hit(pt image.Point) *Element {
	if m.app == nil {
		return nil
	}
	elems := m.app.elems
	for i := len(elems) - 1; i >= 0; i-- {
		if e := &elems[i]; pt.In(e.Box) && m.inst.Visible(e.ID) {
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
				m.inst.Scroll(m.ui, *el, 0, ev.Amount)
			} else {
				m.inst.Scroll(m.ui, *el, ev.Amount, 0)
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
			m.click(*el, button, 1, pt)
		}
	default:
		m.click(*el, button, clicks, pt)
	}
}

// tabbed is an app that embeds Tabs: the machine opens its tabs.
type tabbed interface {
	ClickTab(el Element, button string) bool
}

// click delivers a click to the running app, after its tab bar if it has
// one.
func (m *machine) click(el Element, button string, clicks int, pt image.Point) {
	if t, ok := m.inst.(tabbed); ok && t.ClickTab(el, button) {
		return
	}
	m.inst.Click(m.ui, el, button, clicks, pt)
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
	m.inst.Drag(m.ui, *el, from, to)
}

func (m *machine) typeRune(r rune) {
	if m.app == nil || m.ui.focus == "" || !m.inst.Visible(m.ui.focus) {
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
	if u.focus != "" && !m.inst.Visible(u.focus) {
		u.focus, u.selAll = "", false // the field's tab was switched away
	}
	if u.focus != "" {
		id := u.focus
		switch combo {
		case "enter":
			text := u.fields[id]
			if m.inst.Submit(u, id, text) {
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
	m.inst.Shortcut(u, keys)
}

// focusNext moves the focus to the next visible field.
func (m *machine) focusNext() {
	var ids []string
	for _, e := range m.app.elems {
		if e.Kind == "field" && m.inst.Visible(e.ID) {
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
