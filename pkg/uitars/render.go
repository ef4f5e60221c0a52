package uitars

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/internal/contract/pystr"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Screen is the size in pixels of the screen actions are rendered for.
// The zero Screen means DefaultScreen.
type Screen struct {
	W, H int
}

// DefaultScreen is the screen of CODA's and ScienceBoard's VMs.
var DefaultScreen = Screen{W: 1280, H: 800}

// Special tokens returned by Render for actions that are not GUI input.
// OSWorld and ScienceBoard guests treat them as control actions rather than
// Python code; an answer renders as "ANS <answer>".
const (
	TokenWait = "WAIT" // wait()
	TokenDone = "DONE" // finished(...)
	TokenFail = "FAIL" // call_user()
	TokenAns  = "ANS"  // prefix of "ANS <answer>"
)

// Rendering constants.
const (
	// ScrollClicks is the number of wheel clicks one scroll action makes.
	ScrollClicks = 5
	// DragDuration is the duration in seconds of the pointer move of a drag.
	DragDuration = 0.5
)

// pyKeys maps UI-TARS key names onto pyautogui's where they differ.
var pyKeys = map[string]string{
	"arrowup":    "up",
	"arrowdown":  "down",
	"arrowleft":  "left",
	"arrowright": "right",
	"control":    "ctrl",
}

// pointFuncs names the pyautogui function of each single-point action.
var pointFuncs = map[traj.ActionType]string{
	traj.Click:       "click",
	traj.LeftDouble:  "doubleClick",
	traj.RightSingle: "rightClick",
	traj.Hover:       "moveTo",
}

// IsSpecial reports whether code, a result of Render, is one of the special
// tokens (WAIT, DONE, FAIL, "ANS <answer>") rather than pyautogui code.
func IsSpecial(code string) bool {
	switch code {
	case TokenWait, TokenDone, TokenFail:
		return true
	}
	return strings.HasPrefix(code, TokenAns+" ")
}

// Render returns the pyautogui code that performs a on screen, one
// statement per line, or a special token:
//
//	click           pyautogui.click(x, y)
//	left_double     pyautogui.doubleClick(x, y)
//	right_single    pyautogui.rightClick(x, y)
//	hover           pyautogui.moveTo(x, y)
//	drag            pyautogui.moveTo(x1, y1) + pyautogui.dragTo(x2, y2, duration=0.5, button='left')
//	hotkey          pyautogui.hotkey('ctrl', 'c')
//	keydown         pyautogui.keyDown('shift') per key, in order
//	keyup           pyautogui.keyUp('shift') per key, in order
//	type            [pyautogui.click(x, y)] + pyautogui.write('...') per line, pyautogui.press('enter') between lines
//	scroll          [pyautogui.moveTo(x, y)] + pyautogui.scroll(±5) or pyautogui.hscroll(±5)
//	wait            WAIT
//	finished        DONE
//	call_user       FAIL
//	answer          ANS <answer>
//
// Pixel coordinates are round(normalised × size) clamped to [0, size−1].
// Python string literals are single-quoted and pure ASCII: quotes,
// backslashes and control characters are escaped, other non-ASCII
// characters become \uXXXX or \UXXXXXXXX escapes, and bytes that are not
// valid UTF-8 become U+FFFD.
func Render(a traj.Action, screen Screen) (string, error) {
	if screen == (Screen{}) {
		screen = DefaultScreen
	}
	if screen.W <= 0 || screen.H <= 0 {
		return "", fmt.Errorf("uitars: render %s: invalid screen size %dx%d", a.Type, screen.W, screen.H)
	}
	r := renderer{screen: screen, typ: a.Type}
	var b strings.Builder
	switch a.Type {
	case traj.Click, traj.LeftDouble, traj.RightSingle, traj.Hover:
		x, y, err := r.pixel("point", a.Point)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "pyautogui.%s(%d, %d)", pointFuncs[a.Type], x, y)
	case traj.Drag:
		x1, y1, err := r.pixel("start", a.Start)
		if err != nil {
			return "", err
		}
		x2, y2, err := r.pixel("end", a.End)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "pyautogui.moveTo(%d, %d)\npyautogui.dragTo(%d, %d, duration=%s, button='left')",
			x1, y1, x2, y2, strconv.FormatFloat(DragDuration, 'f', -1, 64))
	case traj.Hotkey, traj.KeyDown, traj.KeyUp:
		if len(a.Keys) == 0 {
			return "", fmt.Errorf("uitars: render %s: no keys", a.Type)
		}
		keys := make([]string, len(a.Keys))
		for i, k := range a.Keys {
			if k == "" {
				return "", fmt.Errorf("uitars: render %s: empty key at index %d", a.Type, i)
			}
			if m, ok := pyKeys[k]; ok {
				k = m
			}
			keys[i] = PyString(k)
		}
		switch a.Type {
		case traj.Hotkey:
			b.WriteString("pyautogui.hotkey(" + strings.Join(keys, ", ") + ")")
		case traj.KeyDown:
			b.WriteString("pyautogui.keyDown(" + strings.Join(keys, ")\npyautogui.keyDown(") + ")")
		default:
			b.WriteString("pyautogui.keyUp(" + strings.Join(keys, ")\npyautogui.keyUp(") + ")")
		}
	case traj.TypeText:
		var stmts []string
		if a.Point != nil {
			// type(content=..., start_box=...): click the field, then type.
			x, y, err := r.pixel("point", a.Point)
			if err != nil {
				return "", err
			}
			stmts = append(stmts, fmt.Sprintf("pyautogui.click(%d, %d)", x, y))
		}
		for i, line := range strings.Split(strings.ReplaceAll(a.Text, "\r\n", "\n"), "\n") {
			if i > 0 {
				stmts = append(stmts, "pyautogui.press('enter')")
			}
			if line != "" {
				stmts = append(stmts, "pyautogui.write("+PyString(line)+")")
			}
		}
		if a.Text == "" {
			stmts = append(stmts, "pyautogui.write('')")
		}
		b.WriteString(strings.Join(stmts, "\n"))
	case traj.Scroll:
		if a.Point != nil {
			x, y, err := r.pixel("point", a.Point)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "pyautogui.moveTo(%d, %d)\n", x, y)
		}
		switch a.Direction {
		case traj.DirUp:
			fmt.Fprintf(&b, "pyautogui.scroll(%d)", ScrollClicks)
		case traj.DirDown:
			fmt.Fprintf(&b, "pyautogui.scroll(%d)", -ScrollClicks)
		case traj.DirLeft:
			fmt.Fprintf(&b, "pyautogui.hscroll(%d)", -ScrollClicks)
		case traj.DirRight:
			fmt.Fprintf(&b, "pyautogui.hscroll(%d)", ScrollClicks)
		default:
			return "", fmt.Errorf("uitars: render scroll: invalid direction %q (want up, down, left or right)", a.Direction)
		}
	case traj.Wait:
		return TokenWait, nil
	case traj.Finished:
		return TokenDone, nil
	case traj.CallUser:
		return TokenFail, nil
	case traj.Answer:
		text := strings.TrimSpace(a.Text)
		if text == "" {
			return "", fmt.Errorf("uitars: render answer: empty answer text")
		}
		if strings.ContainsAny(text, "\r\n") {
			return "", fmt.Errorf("uitars: render answer: answer text spans several lines")
		}
		return TokenAns + " " + text, nil
	default:
		return "", fmt.Errorf("uitars: render: unknown action type %q", a.Type)
	}
	return b.String(), nil
}

type renderer struct {
	screen Screen
	typ    traj.ActionType
}

// pixel converts a normalised point to clamped pixel coordinates.
func (r renderer) pixel(what string, pt *traj.Point) (int, int, error) {
	if pt == nil {
		return 0, 0, fmt.Errorf("uitars: render %s: missing %s", r.typ, what)
	}
	if math.IsNaN(pt.X) || math.IsNaN(pt.Y) || math.IsInf(pt.X, 0) || math.IsInf(pt.Y, 0) {
		return 0, 0, fmt.Errorf("uitars: render %s: %s (%v, %v) is not finite", r.typ, what, pt.X, pt.Y)
	}
	x, y := r.screen.Pixel(*pt)
	return x, y, nil
}

// Pixel is the pixel of s a normalised point stands for: the one
// mapping Render uses (round(n×size), clamped to the screen).
func (s Screen) Pixel(p traj.Point) (x, y int) {
	if s == (Screen{}) {
		s = DefaultScreen
	}
	return toPixel(p.X, s.W), toPixel(p.Y, s.H)
}

// toPixel returns round(n*size) clamped to [0, size-1].
func toPixel(n float64, size int) int {
	v := math.Round(n * float64(size))
	if v < 0 {
		return 0
	}
	if v > float64(size-1) {
		return size - 1
	}
	return int(v)
}

// PyString returns s as a single-quoted, pure-ASCII Python 3 string
// literal: \\, \', \n, \r and \t escaped, other control characters and
// DEL as \xHH, non-ASCII characters as \uXXXX or \UXXXXXXXX, and each byte
// that is not valid UTF-8 as \ufffd (U+FFFD).
func PyString(s string) string { return pystr.Quote(s, '\'', true) }
