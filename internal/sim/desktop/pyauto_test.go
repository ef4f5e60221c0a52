package desktop

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
)

func TestParsePyAutoGUI(t *testing.T) {
	click := func(x, y int, btn string, n int) Event {
		return Event{Kind: EvClick, X: x, Y: y, HasXY: true, Button: btn, Clicks: n}
	}
	cases := []struct {
		name string
		code string
		want []Event
	}{
		{"click", "pyautogui.click(640, 400)", []Event{click(640, 400, "left", 1)}},
		{"double", "pyautogui.doubleClick(1, 2)", []Event{click(1, 2, "left", 2)}},
		{"triple", "pyautogui.tripleClick(1, 2)", []Event{click(1, 2, "left", 3)}},
		{"right", "pyautogui.rightClick(5, 6)", []Event{click(5, 6, "right", 1)}},
		{"middle", "pyautogui.middleClick(5, 6)", []Event{click(5, 6, "middle", 1)}},
		{"click kwargs", "pyautogui.click(x=10, y=20, clicks=2, interval=0.1, button='right', duration=0.2)", []Event{click(10, 20, "right", 2)}},
		{"click tuple", "pyautogui.click((10, 20))", []Event{click(10, 20, "left", 1)}},
		{"click no position", "pyautogui.click()", []Event{{Kind: EvClick, Button: "left", Clicks: 1}}},
		{"click float coords", "pyautogui.click(10.6, 20.4)", []Event{click(11, 20, "left", 1)}},
		{"move", "pyautogui.moveTo(3, 4, duration=0.5)", []Event{{Kind: EvMoveTo, X: 3, Y: 4, HasXY: true}}},
		{"drag as rendered", "pyautogui.moveTo(1, 2)\npyautogui.dragTo(30, 40, duration=0.5, button='left')",
			[]Event{{Kind: EvMoveTo, X: 1, Y: 2, HasXY: true}, {Kind: EvDragTo, X: 30, Y: 40, HasXY: true, Button: "left"}}},
		{"mouse down up", "pyautogui.mouseDown(1, 2); pyautogui.mouseUp(x=3, y=4, button='left')",
			[]Event{{Kind: EvMouseDown, X: 1, Y: 2, HasXY: true, Button: "left"}, {Kind: EvMouseUp, X: 3, Y: 4, HasXY: true, Button: "left"}}},
		{"write", `pyautogui.write('open 2olx')`, []Event{{Kind: EvWrite, Text: "open 2olx"}}},
		{"write escapes", `pyautogui.write('a\'b\\c\n\t\x41\u00e9\U0001F600\101')`, []Event{{Kind: EvWrite, Text: "a'b\\c\n\tAé😀A"}}},
		{"write double quotes", `pyautogui.write("it's", interval=0.05)`, []Event{{Kind: EvWrite, Text: "it's"}}},
		{"write raw", `pyautogui.write(r'a\nb')`, []Event{{Kind: EvWrite, Text: `a\nb`}}},
		{"write triple", `pyautogui.write('''x'y''')`, []Event{{Kind: EvWrite, Text: "x'y"}}},
		{"write concat", `pyautogui.write('a' 'b')`, []Event{{Kind: EvWrite, Text: "ab"}}},
		{"typewrite alias", `pyautogui.typewrite('hi')`, []Event{{Kind: EvWrite, Text: "hi"}}},
		{"typewrite keys", `pyautogui.typewrite(['a', 'enter'])`, []Event{{Kind: EvPress, Keys: []string{"a"}}, {Kind: EvPress, Keys: []string{"enter"}}}},
		{"press", `pyautogui.press('enter')`, []Event{{Kind: EvPress, Keys: []string{"enter"}}}},
		{"press presses", `pyautogui.press('Tab', presses=2)`, []Event{{Kind: EvPress, Keys: []string{"tab"}}, {Kind: EvPress, Keys: []string{"tab"}}}},
		{"press list", `pyautogui.press(['up', 'down'])`, []Event{{Kind: EvPress, Keys: []string{"up"}}, {Kind: EvPress, Keys: []string{"down"}}}},
		{"hotkey", `pyautogui.hotkey('ctrl', 'shift', 't', interval=0.1)`, []Event{{Kind: EvHotkey, Keys: []string{"ctrl", "shift", "t"}}}},
		{"scroll", `pyautogui.scroll(-5)`, []Event{{Kind: EvScroll, Amount: -5}}},
		{"scroll at", `pyautogui.scroll(5, x=10, y=20)`, []Event{{Kind: EvScroll, Amount: 5, X: 10, Y: 20, HasXY: true}}},
		{"vscroll", `pyautogui.vscroll(3)`, []Event{{Kind: EvScroll, Amount: 3}}},
		{"hscroll", `pyautogui.hscroll(-5)`, []Event{{Kind: EvHScroll, Amount: -5}}},
		{"sleep", `time.sleep(0.5)`, []Event{{Kind: EvSleep, Seconds: 0.5}}},
		{"pyautogui sleep", `pyautogui.sleep(1)`, []Event{{Kind: EvSleep, Seconds: 1}}},
		{"osworld wrapper", "import pyautogui; import time; pyautogui.FAILSAFE = False; pyautogui.click(1, 2); time.sleep(0.5)",
			[]Event{click(1, 2, "left", 1), {Kind: EvSleep, Seconds: 0.5}}},
		{"comments and blank lines", "# start\n\nimport pyautogui  # the module\npass\npyautogui.PAUSE = 0.1\npyautogui.press('a')  # done\n",
			[]Event{{Kind: EvPress, Keys: []string{"a"}}}},
		{"multi-line call", "pyautogui.click(\n    10,\n    20,\n)", []Event{click(10, 20, "left", 1)}},
		{"line continuation", "pyautogui.click(10, \\\n20)", []Event{click(10, 20, "left", 1)}},
		{"from import", "from pyautogui import click\npyautogui.click(1, 1)", []Event{click(1, 1, "left", 1)}},
		{"empty", "", nil},
		{"zero clicks moves", "pyautogui.click(4, 5, clicks=0)", []Event{{Kind: EvMoveTo, X: 4, Y: 5, HasXY: true}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParsePyAutoGUI(c.code)
			if err != nil {
				t.Fatalf("ParsePyAutoGUI(%q): %v", c.code, err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("ParsePyAutoGUI(%q)\n got %+v\nwant %+v", c.code, got, c.want)
			}
		})
	}
}

func TestParsePyAutoGUIErrors(t *testing.T) {
	cases := []struct {
		name, code, msg string
		offset          int
	}{
		{"other module", "import os; os.system('rm -rf /')", "unsupported call os.system", 11},
		{"unknown pyautogui", "pyautogui.moveRel(1, 2)", "unsupported call pyautogui.moveRel", 0},
		{"second statement", "pyautogui.click(1, 2)\nsubprocess.run('x')", "unsupported call subprocess.run", 22},
		{"assignment", "x = 5", "unsupported assignment to x", 0},
		{"expression", "1 + 2", "unsupported statement", 0},
		{"unterminated", "pyautogui.write('abc)", "unterminated string", 16},
		{"unknown kwarg", "pyautogui.click(1, 2, foo=3)", `unknown keyword argument "foo"`, 26},
		{"x without y", "pyautogui.click(1)", "x and y must be given together", 0},
		{"bad button", "pyautogui.click(1, 2, button='side')", `unknown button "side"`, 29},
		{"string coordinate", "pyautogui.click('a', 2)", `argument "x" must be a number`, 16},
		{"positional after keyword", "pyautogui.click(x=1, 2)", "positional argument follows keyword argument", 21},
		{"missing paren", "pyautogui.click(1, 2", "expected ',' or ')'", 20},
		{"trailing garbage", "pyautogui.click(1, 2) x", "unexpected", 22},
		{"bad escape", `pyautogui.write('\xZZ')`, "invalid \\x escape", 17},
		// Python would accept these two; the simulator says it cannot
		// (internal/contract/pystr: no Unicode name table; a surrogate has no UTF-8
		// form to type) rather than typing something else than Python.
		{"named escape", `pyautogui.write('\N{BULLET}')`, "\\N{...} escapes are not supported", 17},
		{"surrogate escape", `pyautogui.write('a\ud800')`, "is a surrogate", 18},
		{"hotkey without keys", "pyautogui.hotkey()", "hotkey needs at least one key", 0},
		{"scroll float", "pyautogui.scroll(1.5)", "integer number of clicks", 0},
		{"write number", "pyautogui.write(5)", "message must be a string", 16},
		{"bad character", "pyautogui.click(1, 2) $", "unexpected character", 22},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParsePyAutoGUI(c.code)
			var pe *PyAutoGUIError
			if !errors.As(err, &pe) {
				t.Fatalf("ParsePyAutoGUI(%q) = %v, want a *PyAutoGUIError", c.code, err)
			}
			if !strings.Contains(pe.Msg, c.msg) {
				t.Errorf("message %q does not contain %q", pe.Msg, c.msg)
			}
			if pe.Offset != c.offset {
				t.Errorf("offset %d, want %d (%v)", pe.Offset, c.offset, err)
			}
		})
	}
}

// randomAction returns a random GUI action of the UI-TARS space.
func randomAction(r *rand.Rand) traj.Action {
	pt := func() *traj.Point {
		return &traj.Point{X: float64(r.IntN(1001)) / 1000, Y: float64(r.IntN(1001)) / 1000}
	}
	texts := []string{"open 2olx", "a\nb", "it's \\ \"quoted\"", "é ü 中文 😀", "\t tab", "", "x\r\ny"}
	switch r.IntN(10) {
	case 7:
		return traj.Action{Type: traj.KeyDown, Keys: [][]string{{"shift"}, {"control", "alt"}}[r.IntN(2)]}
	case 8:
		return traj.Action{Type: traj.KeyUp, Keys: [][]string{{"shift"}, {"arrowup"}}[r.IntN(2)]}
	case 0:
		return traj.Action{Type: traj.Click, Point: pt()}
	case 1:
		return traj.Action{Type: traj.LeftDouble, Point: pt()}
	case 2:
		return traj.Action{Type: traj.RightSingle, Point: pt()}
	case 3:
		return traj.Action{Type: traj.Hover, Point: pt()}
	case 4:
		return traj.Action{Type: traj.Drag, Start: pt(), End: pt()}
	case 5:
		return traj.Action{Type: traj.Hotkey, Keys: [][]string{{"ctrl", "c"}, {"arrowup"}, {"control", "shift", "t"}, {"enter"}}[r.IntN(4)]}
	case 6:
		return traj.Action{Type: traj.TypeText, Text: texts[r.IntN(len(texts))]}
	}
	dir := []string{traj.DirUp, traj.DirDown, traj.DirLeft, traj.DirRight}[r.IntN(4)]
	if r.IntN(2) == 0 {
		return traj.Action{Type: traj.Scroll, Direction: dir}
	}
	return traj.Action{Type: traj.Scroll, Point: pt(), Direction: dir}
}

// TestRenderedActionsParse checks that everything uitars.Render emits is
// accepted and means what the action says.
func TestRenderedActionsParse(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	px := func(p *traj.Point) (int, int) {
		code, _ := uitars.Render(traj.Action{Type: traj.Hover, Point: p}, uitars.DefaultScreen)
		evs, err := ParsePyAutoGUI(code)
		if err != nil || len(evs) != 1 {
			t.Fatalf("hover %q: %v", code, err)
		}
		return evs[0].X, evs[0].Y
	}
	for i := 0; i < 2000; i++ {
		a := randomAction(r)
		code, err := uitars.Render(a, uitars.DefaultScreen)
		if err != nil {
			t.Fatalf("render %+v: %v", a, err)
		}
		for _, wrapped := range []string{code, "import pyautogui; import time; pyautogui.FAILSAFE = False; " + strings.ReplaceAll(code, "\n", "; ")} {
			evs, err := ParsePyAutoGUI(wrapped)
			if err != nil {
				t.Fatalf("action %+v rendered as %q: %v", a, wrapped, err)
			}
			switch a.Type {
			case traj.Click, traj.LeftDouble, traj.RightSingle:
				x, y := px(a.Point)
				want := map[traj.ActionType]Event{
					traj.Click:       {Kind: EvClick, X: x, Y: y, HasXY: true, Button: "left", Clicks: 1},
					traj.LeftDouble:  {Kind: EvClick, X: x, Y: y, HasXY: true, Button: "left", Clicks: 2},
					traj.RightSingle: {Kind: EvClick, X: x, Y: y, HasXY: true, Button: "right", Clicks: 1},
				}[a.Type]
				if len(evs) != 1 || !reflect.DeepEqual(evs[0], want) {
					t.Fatalf("%q: got %+v, want %+v", code, evs, want)
				}
			case traj.Drag:
				x1, y1 := px(a.Start)
				x2, y2 := px(a.End)
				if len(evs) != 2 || evs[0].X != x1 || evs[0].Y != y1 || evs[1].Kind != EvDragTo || evs[1].X != x2 || evs[1].Y != y2 {
					t.Fatalf("%q: got %+v", code, evs)
				}
			case traj.TypeText:
				var text strings.Builder
				for _, ev := range evs {
					switch ev.Kind {
					case EvWrite:
						text.WriteString(ev.Text)
					case EvPress:
						if ev.Keys[0] != "enter" {
							t.Fatalf("%q: unexpected key %v", code, ev.Keys)
						}
						text.WriteByte('\n')
					}
				}
				if want := strings.ReplaceAll(a.Text, "\r\n", "\n"); text.String() != want {
					t.Fatalf("%q: typed %q, want %q", code, text.String(), want)
				}
			case traj.KeyDown, traj.KeyUp:
				kind := map[traj.ActionType]EventKind{traj.KeyDown: EvKeyDown, traj.KeyUp: EvKeyUp}[a.Type]
				if len(evs) != len(a.Keys) {
					t.Fatalf("%q: got %+v, want one event per key", code, evs)
				}
				for i, ev := range evs {
					want := strings.NewReplacer("control", "ctrl", "arrowup", "up").Replace(a.Keys[i])
					if ev.Kind != kind || len(ev.Keys) != 1 || ev.Keys[0] != want {
						t.Fatalf("%q: event %d = %+v, want %s %s", code, i, ev, kind, want)
					}
				}
			case traj.Scroll:
				last := evs[len(evs)-1]
				if (last.Kind != EvScroll && last.Kind != EvHScroll) || last.Amount == 0 {
					t.Fatalf("%q: got %+v", code, evs)
				}
			}
		}
	}
}

// FuzzParsePyAutoGUI feeds arbitrary code to the interpreter: it must not
// panic, must report errors as *PyAutoGUIError with an offset inside the
// code, and must return only known event kinds. Code of the form
// pyautogui.write(<uitars.PyString(s)>) must type s back.
func FuzzParsePyAutoGUI(f *testing.F) {
	for _, s := range []string{
		"pyautogui.click(640, 400)", "import pyautogui; import time; pyautogui.FAILSAFE = False; pyautogui.write('x\\n')",
		"pyautogui.moveTo(1, 2)\npyautogui.dragTo(3, 4, duration=0.5, button='left')", "pyautogui.hotkey('ctrl', 'c')",
		"pyautogui.scroll(-5, x=1, y=2)", "time.sleep(0.5)", `pyautogui.write('\u00e9\U0001F600\x41\101')`,
		"pyautogui.click(\n1,\n2)", "pyautogui.press(['a', 'b'], presses=3)", "os.system('x')", "pyautogui.write('''a'b''')",
		"pyautogui.click((1, 2))", "pyautogui.click(x=-5, y=1e3)", "r'\\'",
	} {
		f.Add(s)
	}
	known := map[EventKind]bool{EvMoveTo: true, EvClick: true, EvMouseDown: true, EvMouseUp: true, EvDragTo: true,
		EvWrite: true, EvPress: true, EvHotkey: true, EvKeyDown: true, EvKeyUp: true, EvScroll: true, EvHScroll: true, EvSleep: true}
	f.Fuzz(func(t *testing.T, code string) {
		evs, err := ParsePyAutoGUI(code)
		if err != nil {
			var pe *PyAutoGUIError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *PyAutoGUIError", err)
			}
			if pe.Offset < 0 || pe.Offset > len(code) {
				t.Fatalf("offset %d outside the code (%d bytes)", pe.Offset, len(code))
			}
		}
		for _, ev := range evs {
			if !known[ev.Kind] {
				t.Fatalf("unknown event kind %q", ev.Kind)
			}
		}
		// The string literal round trip.
		lit := uitars.PyString(code)
		evs, err = ParsePyAutoGUI("pyautogui.write(" + lit + ")")
		if err != nil || len(evs) != 1 {
			t.Fatalf("write(%s): %v", lit, err)
		}
		want := strings.ToValidUTF8(code, "\ufffd")
		if !utf8.ValidString(code) {
			// Each invalid byte becomes one U+FFFD in PyString.
			var b strings.Builder
			for i := 0; i < len(code); {
				r, size := utf8.DecodeRuneInString(code[i:])
				b.WriteRune(r)
				i += size
			}
			want = b.String()
		}
		if evs[0].Text != want {
			t.Fatalf("write(%s) typed %q, want %q", lit, evs[0].Text, want)
		}
	})
}

// TestKeyDownHoldsModifiers: keyDown holds modifiers until keyUp (and a
// reset); keys pressed meanwhile carry them; a non-modifier key held down
// acts once.
func TestKeyDownHoldsModifiers(t *testing.T) {
	m := NewMachine(MachineConfig{}).(*machine)
	in := func(code string) {
		t.Helper()
		evs, err := ParsePyAutoGUI(code)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if err := m.Input(ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	in("pyautogui.keyDown('ctrl')\npyautogui.keyDown('shiftleft')\npyautogui.keyDown('ctrl')")
	if !reflect.DeepEqual(m.held, []string{"ctrl", "shift"}) {
		t.Fatalf("held %v, want [ctrl shift]", m.held)
	}
	if got := m.withHeld([]string{"shift", "s"}); !reflect.DeepEqual(got, []string{"ctrl", "shift", "s"}) {
		t.Errorf("withHeld = %v", got)
	}
	in("pyautogui.keyDown('a')") // not held
	in("pyautogui.keyUp('ctrl')")
	if !reflect.DeepEqual(m.held, []string{"shift"}) {
		t.Fatalf("after keyUp: held %v, want [shift]", m.held)
	}
	m.Reset()
	if len(m.held) != 0 {
		t.Fatalf("after reset: held %v", m.held)
	}
	if _, err := ParsePyAutoGUI("pyautogui.keyDown(1)"); err == nil {
		t.Error("keyDown(1): no error")
	}
}
