package uitars

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/pkg/traj"
)

// FuzzParse checks that Parse never panics, that errors are *SyntaxError
// with an offset inside the input, that parsed points lie in [0,1], that
// every parsed action renders, and that formatting the parsed actions and
// parsing again gives the same actions.
func FuzzParse(f *testing.F) {
	for _, c := range parseCases {
		f.Add(c.in)
	}
	g := gen{r: rand.New(rand.NewPCG(7, 8)), w: GridSize, h: GridSize}
	for i := 0; i < 20; i++ {
		f.Add(FormatAll([]traj.Action{g.action(), g.action()}, Options{}))
	}
	// The outputs of issue 21.
	f.Add("type(text='Hello', start_box='(300,400)')")
	f.Add("click(start_box='(1,2)') then wait()")
	f.Add("Action: click(start_box='(1,2)')\nThought: now wait\nAction: wait()")
	f.Fuzz(func(t *testing.T, s string) { checkParse(t, s, DefaultOptions()) })
}

// FuzzParseSpaces is FuzzParse in every coordinate space of TestRoundTrip.
func FuzzParseSpaces(f *testing.F) {
	for i, c := range parseCases {
		f.Add(c.in, uint8(i))
	}
	f.Add("Action: click(start_box='<|box_start|>(1854,45)<|box_end|>')", uint8(5))
	f.Add("Thought：x\nAction：type(content='print('a')')", uint8(4))
	f.Fuzz(func(t *testing.T, s string, sp uint8) {
		checkParse(t, s, roundTripSpaces[int(sp)%len(roundTripSpaces)])
	})
}

// checkParse asserts what FuzzParse promises for one input.
func checkParse(t *testing.T, s string, opt Options) {
	got, err := Parse(s, opt)
	if got.Raw != s {
		t.Fatalf("Raw = %q, want %q", got.Raw, s)
	}
	if err != nil {
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Fatalf("err %v is %T, want *SyntaxError", err, err)
		}
		if se.Offset < 0 || se.Offset > len(s) || se.Input != s {
			t.Fatalf("bad error %v (offset %d, input length %d)", err, se.Offset, len(s))
		}
		if got.Actions != nil {
			t.Fatalf("actions %v with error %v", got.Actions, err)
		}
		return
	}
	if len(got.Actions) == 0 {
		t.Fatal("no actions and no error")
	}
	if got.Joined < 0 || got.Joined >= len(got.Actions) || got.DroppedBlocks < 0 {
		t.Fatalf("Joined %d, DroppedBlocks %d with %d actions from %q", got.Joined, got.DroppedBlocks, len(got.Actions), s)
	}
	if noted := got.Joined > 0 || got.DroppedBlocks > 0; noted != (len(got.Notes) > 0) {
		t.Fatalf("Notes %q with Joined %d, DroppedBlocks %d from %q", got.Notes, got.Joined, got.DroppedBlocks, s)
	}
	for _, a := range got.Actions {
		if !a.Type.Known() {
			t.Fatalf("unknown type %q", a.Type)
		}
		for _, p := range []*traj.Point{a.Point, a.Start, a.End} {
			if p != nil && !(inUnit(p.X) && inUnit(p.Y)) {
				t.Fatalf("point %+v outside [0,1] from %q", *p, s)
			}
		}
		if _, err := Render(a, Screen{}); err != nil {
			t.Fatalf("Render(%+v) from %q: %v", a, s, err)
		}
		text := Format(a, opt)
		again, err := Parse(text, opt)
		if err != nil {
			t.Fatalf("Parse(Format) of %q: Parse(%q): %v", s, text, err)
		}
		if !reflect.DeepEqual(again.Actions, []traj.Action{a}) {
			t.Fatalf("Parse(%q) =\n%s\nwant\n%s", text, dump(again.Actions), dump([]traj.Action{a}))
		}
	}
	all := FormatAll(got.Actions, opt)
	if again, err := Parse(all, opt); err != nil || !reflect.DeepEqual(again.Actions, got.Actions) {
		t.Fatalf("Parse(FormatAll) of %q: Parse(%q) = %s, %v", s, all, dump(again.Actions), err)
	}
}

func inUnit(v float64) bool { return v >= 0 && v <= 1 && !math.Signbit(v) }

// FuzzRoundTrip builds valid actions from fuzzed values and checks that
// Parse(Format(a)) returns a exactly.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint8(0), 512.0, 384.0, 0.0, 0.0, "hello")
	f.Add(uint8(4), 1.5, 2.25, 999.0, 1000.0, "")
	f.Add(uint8(5), 0.0, 0.0, 0.0, 0.0, "Ctrl+Shift s")
	f.Add(uint8(6), 0.0, 0.0, 0.0, 0.0, "it's \\ \"quoted\"\nline\r\n\ttab")
	f.Add(uint8(22), 300.0, 400.0, 0.0, 0.0, "Hello', start_box='(1,2)")
	f.Add(uint8(11), 0.0, 0.0, 0.0, 0.0, " 10.31 ")
	f.Fuzz(func(t *testing.T, typ uint8, x, y, x2, y2 float64, text string) {
		opt := DefaultOptions()
		grid := func(v float64) *float64 {
			if !(v >= 0 && v <= GridSize) {
				return nil
			}
			n := v / GridSize
			return &n
		}
		point := func(x, y float64) *traj.Point {
			px, py := grid(x), grid(y)
			if px == nil || py == nil {
				return nil
			}
			return &traj.Point{X: *px, Y: *py}
		}
		a := traj.Action{Type: traj.ActionTypes[int(typ)%len(traj.ActionTypes)]}
		switch a.Type {
		case traj.Click, traj.LeftDouble, traj.RightSingle, traj.Hover:
			if a.Point = point(x, y); a.Point == nil {
				return
			}
		case traj.Drag:
			if a.Start, a.End = point(x, y), point(x2, y2); a.Start == nil || a.End == nil {
				return
			}
		case traj.Hotkey, traj.KeyDown, traj.KeyUp:
			if a.Keys = splitKeys(text); len(a.Keys) == 0 {
				return
			}
		case traj.TypeText, traj.Finished:
			a.Text = text
			if a.Type == traj.TypeText && typ&16 != 0 {
				a.Point = point(x, y) // nil when outside the grid
			}
		case traj.Scroll:
			a.Point = point(x, y)
			a.Direction = []string{traj.DirUp, traj.DirDown, traj.DirLeft, traj.DirRight}[int(typ/16)%4]
		case traj.Answer:
			if a.Text = strings.TrimSpace(text); a.Text == "" || strings.ContainsAny(a.Text, "\r\n") {
				return
			}
		}
		s := Format(a, opt)
		got, err := Parse(s, opt)
		if err != nil {
			t.Fatalf("Parse(%q): %v", s, err)
		}
		if !reflect.DeepEqual(got.Actions, []traj.Action{a}) {
			t.Fatalf("Parse(%q) =\n%s\nwant\n%s", s, dump(got.Actions), dump([]traj.Action{a}))
		}
	})
}

// FuzzTypeArgs writes type calls with a text and a point as keyword
// arguments in either order, under each accepted name (content/text,
// start_box/point/start_point), the text in single or double quotes and
// the point in several forms, quoted or not, with varied spacing, a
// trailing comma, an "Action:" label and a following action or not. The
// text is any string, escaped as Python would need it in its quotes
// (backslash, the quote, \n, \r, \t; the other quote optionally). It checks
// that the typed text is exactly the text written and the point the point
// written: no argument's syntax ever ends up in another argument's value.
// When bad is set the point is malformed or out of range, and Parse must
// fail rather than read the point into the text.
func FuzzTypeArgs(f *testing.F) {
	f.Add("Hello", uint16(300), uint16(400), uint32(0), false)
	f.Add("Hello", uint16(300), uint16(400), uint32(1), false)
	f.Add("Hello', start_box='(1,2)", uint16(1), uint16(2), uint32(0x2a), false)
	f.Add(`a", point="(5,6)`, uint16(1000), uint16(0), uint32(0x155), false)
	f.Add("print('a', end='')\n", uint16(7), uint16(8), uint32(0x3c3), false)
	f.Add("x') then wait()", uint16(9), uint16(9), uint32(0x1f0f), false)
	f.Add("Thought: no\nAction: click(start_box='(1,2)')", uint16(1), uint16(1), uint32(0xfff), false)
	f.Add("Hello", uint16(300), uint16(400), uint32(0), true)
	f.Add("Hello", uint16(1200), uint16(400), uint32(0x80), true)
	f.Fuzz(func(t *testing.T, text string, x, y uint16, form uint32, bad bool) {
		bits := func(n int) int { v := int(form % uint32(n)); form /= uint32(n); return v }
		textName := []string{"content", "text", "Content"}[bits(3)]
		pointName := []string{"start_box", "point", "start_point", "Start_Box"}[bits(4)]
		q := []byte{'\'', '"'}[bits(2)]
		escapeOther := bits(2) == 1
		pointForm := bits(7)
		pointFirst := bits(2) == 1
		sp := []string{"", " ", "\n", "  \t"}[bits(4)]
		trailing := bits(2) == 1
		prefix := []string{"", "Action: ", "Thought: t\nAction: ", "```\n"}[bits(4)]
		suffix := []string{"", "\n\nwait()", " then wait()", "\nThought: more\nAction: finished()"}[bits(4)]

		// The text, quoted and escaped.
		var b strings.Builder
		b.WriteByte(q)
		for i := 0; i < len(text); i++ {
			switch c := text[i]; {
			case c == '\\' || c == q:
				b.WriteByte('\\')
				b.WriteByte(c)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			case c == '\t':
				b.WriteString(`\t`)
			case (c == '\'' || c == '"') && escapeOther:
				b.WriteByte('\\')
				b.WriteByte(c)
			default:
				b.WriteByte(c)
			}
		}
		b.WriteByte(q)
		textArg := textName + sp + "=" + sp + b.String()

		// The point in one of its forms; bad makes it malformed (three
		// numbers) or, for large x, out of range.
		px, py := int(x%1001), int(y%1001)
		if bad && x > 1000 {
			px = int(x)
		}
		nums := fmt.Sprintf("%d,%d", px, py)
		if bad && x <= 1000 {
			nums += ",3"
		}
		pointVal := []string{
			"'(" + nums + ")'",
			`"(` + nums + `)"`,
			"(" + nums + ")",
			"'<|box_start|>(" + nums + ")<|box_end|>'",
			"'<point>" + strings.ReplaceAll(nums, ",", " ") + "</point>'",
			"'[" + strings.ReplaceAll(nums, ",", ", ") + "]'",
			"'" + nums + "'",
		}[pointForm]
		pointArg := pointName + sp + "=" + sp + pointVal

		args := textArg + "," + sp + pointArg
		if pointFirst {
			args = pointArg + "," + sp + textArg
		}
		if trailing {
			args += ","
		}
		call := prefix + "type" + "(" + sp + args + sp + ")" + suffix

		got, err := Parse(call, DefaultOptions())
		if bad {
			if err == nil {
				t.Fatalf("Parse(%q) with a bad point = %s, want an error", call, dump(got.Actions))
			}
			return
		}
		if err != nil {
			t.Fatalf("Parse(%q): %v", call, err)
		}
		want := traj.Action{Type: traj.TypeText, Text: text, Point: pt(float64(px), float64(py))}
		if len(got.Actions) == 0 || !reflect.DeepEqual(got.Actions[0], want) {
			t.Fatalf("Parse(%q) =\n%s\nwant first\n%s", call, dump(got.Actions), dump([]traj.Action{want}))
		}
		wantN, joined, dropped := 1, 0, 0
		switch suffix {
		case "\n\nwait()":
			wantN = 2
		case " then wait()":
			wantN, joined = 2, 1
		case "\nThought: more\nAction: finished()":
			dropped = 1
		}
		if len(got.Actions) != wantN || got.Joined != joined || got.DroppedBlocks != dropped {
			t.Fatalf("Parse(%q): %d actions, Joined %d, DroppedBlocks %d; want %d, %d, %d",
				call, len(got.Actions), got.Joined, got.DroppedBlocks, wantN, joined, dropped)
		}
	})
}
