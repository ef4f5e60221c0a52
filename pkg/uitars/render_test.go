package uitars

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/codapipe/codapipe/internal/contract/pystr"
	"github.com/codapipe/codapipe/pkg/traj"
)

func TestRender(t *testing.T) {
	cases := []struct {
		name   string
		a      traj.Action
		screen Screen
		want   string
	}{
		{"click", traj.Action{Type: traj.Click, Point: pt(500, 500)}, Screen{}, "pyautogui.click(640, 400)"},
		{"click rounding", traj.Action{Type: traj.Click, Point: pt(512, 384)}, Screen{}, "pyautogui.click(655, 307)"},
		{"click clamp", traj.Action{Type: traj.Click, Point: pt(1000, 1000)}, Screen{}, "pyautogui.click(1279, 799)"},
		{"click origin", traj.Action{Type: traj.Click, Point: pt(0, 0)}, Screen{}, "pyautogui.click(0, 0)"},
		{"click out of range", traj.Action{Type: traj.Click, Point: &traj.Point{X: -0.5, Y: 7}}, Screen{}, "pyautogui.click(0, 799)"},
		{"click other screen", traj.Action{Type: traj.Click, Point: pt(500, 250)}, Screen{W: 1920, H: 1080}, "pyautogui.click(960, 270)"},
		{"left_double", traj.Action{Type: traj.LeftDouble, Point: pt(100, 200)}, Screen{}, "pyautogui.doubleClick(128, 160)"},
		{"right_single", traj.Action{Type: traj.RightSingle, Point: pt(100, 200)}, Screen{}, "pyautogui.rightClick(128, 160)"},
		{"hover", traj.Action{Type: traj.Hover, Point: pt(100, 200)}, Screen{}, "pyautogui.moveTo(128, 160)"},
		{"drag", traj.Action{Type: traj.Drag, Start: pt(100, 200), End: pt(300, 400)}, Screen{},
			"pyautogui.moveTo(128, 160)\npyautogui.dragTo(384, 320, duration=0.5, button='left')"},
		{"hotkey", traj.Action{Type: traj.Hotkey, Keys: []string{"ctrl", "c"}}, Screen{}, "pyautogui.hotkey('ctrl', 'c')"},
		{"hotkey mapped", traj.Action{Type: traj.Hotkey, Keys: []string{"control", "arrowdown", "'"}}, Screen{},
			`pyautogui.hotkey('ctrl', 'down', '\'')`},
		{"keydown", traj.Action{Type: traj.KeyDown, Keys: []string{"shift"}}, Screen{}, "pyautogui.keyDown('shift')"},
		{"keydown two", traj.Action{Type: traj.KeyDown, Keys: []string{"control", "alt"}}, Screen{},
			"pyautogui.keyDown('ctrl')\npyautogui.keyDown('alt')"},
		{"keyup", traj.Action{Type: traj.KeyUp, Keys: []string{"arrowup"}}, Screen{}, "pyautogui.keyUp('up')"},
		{"type", traj.Action{Type: traj.TypeText, Text: "hello"}, Screen{}, "pyautogui.write('hello')"},
		{"type tricky", traj.Action{Type: traj.TypeText, Text: `it's "x" \ é 🙂` + "\t\x01"}, Screen{},
			`pyautogui.write('it\'s "x" \\ \u00e9 \U0001f642\t\x01')`},
		{"type newlines", traj.Action{Type: traj.TypeText, Text: "a\n\nb\r\nc\n"}, Screen{},
			"pyautogui.write('a')\npyautogui.press('enter')\npyautogui.press('enter')\npyautogui.write('b')\n" +
				"pyautogui.press('enter')\npyautogui.write('c')\npyautogui.press('enter')"},
		{"type empty", traj.Action{Type: traj.TypeText}, Screen{}, "pyautogui.write('')"},
		{"type invalid utf8", traj.Action{Type: traj.TypeText, Text: "a\xffb"}, Screen{}, `pyautogui.write('a\ufffdb')`},
		{"type at a point", traj.Action{Type: traj.TypeText, Text: "Hello\n", Point: pt(300, 400)}, Screen{},
			"pyautogui.click(384, 320)\npyautogui.write('Hello')\npyautogui.press('enter')"},
		{"type empty at a point", traj.Action{Type: traj.TypeText, Point: pt(0, 0)}, Screen{}, "pyautogui.click(0, 0)\npyautogui.write('')"},
		{"scroll down", traj.Action{Type: traj.Scroll, Point: pt(500, 500), Direction: traj.DirDown}, Screen{},
			"pyautogui.moveTo(640, 400)\npyautogui.scroll(-5)"},
		{"scroll up", traj.Action{Type: traj.Scroll, Direction: traj.DirUp}, Screen{}, "pyautogui.scroll(5)"},
		{"scroll left", traj.Action{Type: traj.Scroll, Direction: traj.DirLeft}, Screen{}, "pyautogui.hscroll(-5)"},
		{"scroll right", traj.Action{Type: traj.Scroll, Point: pt(0, 0), Direction: traj.DirRight}, Screen{},
			"pyautogui.moveTo(0, 0)\npyautogui.hscroll(5)"},
		{"wait", traj.Action{Type: traj.Wait}, Screen{}, "WAIT"},
		{"finished", traj.Action{Type: traj.Finished, Text: "all done"}, Screen{}, "DONE"},
		{"call_user", traj.Action{Type: traj.CallUser}, Screen{}, "FAIL"},
		{"answer", traj.Action{Type: traj.Answer, Text: " 10.31 "}, Screen{}, "ANS 10.31"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Render(c.a, c.screen)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got != c.want {
				t.Errorf("Render =\n%s\nwant\n%s", got, c.want)
			}
			special := c.a.Type == traj.Wait || c.a.Type == traj.Finished || c.a.Type == traj.CallUser || c.a.Type == traj.Answer
			if IsSpecial(got) != special {
				t.Errorf("IsSpecial(%q) = %v, want %v", got, !special, special)
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	cases := []struct {
		a      traj.Action
		screen Screen
		has    string
	}{
		{traj.Action{Type: traj.Click}, Screen{}, "missing point"},
		{traj.Action{Type: traj.Drag, Start: pt(1, 1)}, Screen{}, "missing end"},
		{traj.Action{Type: traj.Hover, Point: &traj.Point{X: math.NaN()}}, Screen{}, "not finite"},
		{traj.Action{Type: traj.TypeText, Text: "a", Point: &traj.Point{X: math.Inf(1)}}, Screen{}, "render type: point (+Inf, 0) is not finite"},
		{traj.Action{Type: traj.Hotkey}, Screen{}, "no keys"},
		{traj.Action{Type: traj.Hotkey, Keys: []string{"ctrl", ""}}, Screen{}, "empty key"},
		{traj.Action{Type: traj.Scroll, Direction: "sideways"}, Screen{}, "invalid direction"},
		{traj.Action{Type: traj.Answer, Text: "  "}, Screen{}, "empty answer"},
		{traj.Action{Type: traj.Answer, Text: "a\nb"}, Screen{}, "several lines"},
		{traj.Action{Type: "tap"}, Screen{}, `unknown action type "tap"`},
		{traj.Action{Type: traj.Click, Point: pt(1, 1)}, Screen{W: 0, H: 10}, "invalid screen size"},
	}
	for _, c := range cases {
		_, err := Render(c.a, c.screen)
		if err == nil || !strings.Contains(err.Error(), c.has) {
			t.Errorf("Render(%+v) err = %v, want one containing %q", c.a, err, c.has)
		}
	}
}

// unquotePy decodes a single-quoted Python literal as PyString writes it,
// rejecting anything else (raw non-ASCII, unknown escapes, bare quotes).
func unquotePy(lit string) (string, error) {
	if len(lit) < 2 || lit[0] != '\'' || lit[len(lit)-1] != '\'' {
		return "", fmt.Errorf("not single-quoted: %q", lit)
	}
	s := lit[1 : len(lit)-1]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || c < 0x20 || c == 0x7f {
			return "", fmt.Errorf("raw byte %#x at %d", c, i)
		}
		if c == '\'' {
			return "", fmt.Errorf("unescaped quote at %d", i)
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(s) {
			return "", fmt.Errorf("trailing backslash")
		}
		i++
		if !strings.ContainsRune(`\'nrtxuU`, rune(s[i])) {
			return "", fmt.Errorf("unknown escape \\%c", s[i])
		}
		n, err := pystr.Escape(&b, rune(s[i]), s[i+1:])
		if err != nil {
			return "", fmt.Errorf("bad escape at %d: %w", i-1, err)
		}
		i += n
	}
	return b.String(), nil
}

// pyExpect is what a Python str literal of s decodes to: invalid UTF-8
// bytes become U+FFFD one by one.
func pyExpect(s string) string { return string([]rune(s)) }

func TestPyString(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	g := gen{r: r, w: GridSize, h: GridSize}
	for i := 0; i < 20000; i++ {
		s := g.text(10)
		lit := PyString(s)
		got, err := unquotePy(lit)
		if err != nil {
			t.Fatalf("PyString(%q) = %s: %v", s, lit, err)
		}
		if got != pyExpect(s) {
			t.Fatalf("PyString(%q) = %s decodes to %q", s, lit, got)
		}
	}
}

// TestRenderPython executes rendered code under python3 with a stub
// pyautogui that records its calls, and compares the recorded arguments
// with the actions. It is skipped when python3 is not installed.
func TestRenderPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	r := rand.New(rand.NewPCG(5, 6))
	g := gen{r: r, w: GridSize, h: GridSize}
	var actions []traj.Action
	var prog strings.Builder
	prog.WriteString(`import json, sys
calls = []
class _P:
    def __getattr__(self, name):
        return lambda *a, **k: calls.append([name, list(a), k])
pyautogui = _P()
def step():
    calls.clear()
out = []
`)
	for i := 0; i < 400; i++ {
		a := g.action()
		code, err := Render(a, Screen{})
		if err != nil || IsSpecial(code) {
			continue
		}
		actions = append(actions, a)
		prog.WriteString("step()\n")
		prog.WriteString(code)
		prog.WriteString("\nout.append(list(calls))\n")
	}
	prog.WriteString("json.dump(out, sys.stdout, ensure_ascii=True)\n")
	cmd := exec.Command(py, "-")
	cmd.Stdin = strings.NewReader(prog.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, stderr.String())
	}
	var got [][][]json.RawMessage
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(actions) {
		t.Fatalf("python ran %d actions, want %d", len(got), len(actions))
	}
	for i, a := range actions {
		switch a.Type {
		case traj.TypeText:
			// A point is clicked first; the written lines joined by the
			// Enter presses give the text.
			calls := got[i]
			if a.Point != nil {
				var name string
				var args []int
				_ = json.Unmarshal(calls[0][0], &name)
				_ = json.Unmarshal(calls[0][1], &args)
				if x, y := toPixel(a.Point.X, DefaultScreen.W), toPixel(a.Point.Y, DefaultScreen.H); name != "click" || len(args) != 2 || args[0] != x || args[1] != y {
					t.Errorf("type at %+v: python's first call is %s %v, want click [%d %d]", *a.Point, calls[0][0], args, x, y)
				}
				calls = calls[1:]
			}
			var b strings.Builder
			for _, c := range calls {
				var name string
				var args []string
				_ = json.Unmarshal(c[0], &name)
				_ = json.Unmarshal(c[1], &args)
				switch name {
				case "write":
					b.WriteString(args[0])
				case "press":
					b.WriteString("\n")
				}
			}
			if want := strings.ReplaceAll(pyExpect(a.Text), "\r\n", "\n"); b.String() != want {
				t.Errorf("type %q: python typed %q", a.Text, b.String())
			}
		case traj.Hotkey:
			var args []string
			_ = json.Unmarshal(got[i][0][1], &args)
			for j, k := range a.Keys {
				if m, ok := pyKeys[k]; ok {
					k = m
				}
				if j >= len(args) || args[j] != pyExpect(k) {
					t.Errorf("hotkey %q: python got %q", a.Keys, args)
					break
				}
			}
		}
	}
}
