package uitars

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
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

// typeArgsRadix are the numbers of choices FuzzTypeArgs reads, in order,
// from its form argument (mixed radix, least significant first): the text's
// name, the point's name, the quote, escaping of the other quote, the
// point's form, the argument order, the spacing, a trailing comma, the
// prefix, the suffix, an unknown argument or not, its position, its value
// and its value's quote.
var typeArgsRadix = []int{3, 4, 2, 2, 7, 2, 4, 2, 4, 4, 2, 3, 8, 2}

// typeArgsForm packs choices (in the order of typeArgsRadix; missing ones
// are 0) into a form value for FuzzTypeArgs seeds.
func typeArgsForm(choices ...int) uint32 {
	var form, mul uint32 = 0, 1
	for i, c := range choices {
		form += uint32(c) * mul
		mul *= uint32(typeArgsRadix[i])
	}
	return form
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
//
// The call is broken in two ways, and then no type action may come out of
// it (Parse fails, or, when a second Thought/Action block follows, uses
// that block's finished() instead): when bad is set the point is malformed
// or out of range; when the form asks for it, the call also carries an
// unknown keyword argument — its name is made from extra (any identifier
// that is not a name of type's own arguments), its value quoted or not,
// before, between or after the other two. For an unknown argument and a
// good point the error must name the argument.
func FuzzTypeArgs(f *testing.F) {
	f.Add("Hello", uint16(300), uint16(400), uint32(0), false, "")
	f.Add("Hello", uint16(300), uint16(400), uint32(1), false, "")
	f.Add("Hello', start_box='(1,2)", uint16(1), uint16(2), uint32(0x2a), false, "")
	f.Add(`a", point="(5,6)`, uint16(1000), uint16(0), uint32(0x155), false, "")
	f.Add("print('a', end='')\n", uint16(7), uint16(8), uint32(0x3c3), false, "")
	f.Add("x') then wait()", uint16(9), uint16(9), uint32(0x1f0f), false, "")
	f.Add("Thought: no\nAction: click(start_box='(1,2)')", uint16(1), uint16(1), uint32(0xfff), false, "")
	f.Add("Hello", uint16(300), uint16(400), uint32(0), true, "")
	f.Add("Hello", uint16(1200), uint16(400), uint32(0x80), true, "")
	// A malformed point, then a second block.
	f.Add("Hello", uint16(1), uint16(2), typeArgsForm(0, 0, 0, 0, 0, 0, 0, 0, 0, 3), true, "")
	// Unknown arguments (issue 21): type(content='Hello', button='left'),
	// the other orders and value forms, and one after a malformed point.
	f.Add("Hello", uint16(300), uint16(400), typeArgsForm(0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0), false, "button")
	f.Add("Hello", uint16(300), uint16(400), typeArgsForm(1, 1, 1, 0, 2, 1, 0, 1, 1, 1, 1, 0, 3, 1), false, "clicks")
	f.Add("print('a', end='')", uint16(5), uint16(6), typeArgsForm(0, 0, 0, 0, 0, 1, 1, 0, 2, 2, 1, 2, 6, 0), false, "end")
	f.Add("a', x='b", uint16(5), uint16(6), typeArgsForm(0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 1, 1, 1, 0), false, "x")
	f.Add("Hello", uint16(5), uint16(6), typeArgsForm(2, 3, 1, 1, 3, 0, 3, 0, 3, 0, 1, 2, 7, 1), false, "Text")
	f.Add("Hello", uint16(5), uint16(6), typeArgsForm(0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 1, 2, 0, 0), true, "9 key")
	f.Fuzz(func(t *testing.T, text string, x, y uint16, form uint32, bad bool, extra string) {
		next := 0
		bits := func() int {
			n := uint32(typeArgsRadix[next])
			next++
			v := int(form % n)
			form /= n
			return v
		}
		textName := []string{"content", "text", "Content"}[bits()]
		pointName := []string{"start_box", "point", "start_point", "Start_Box"}[bits()]
		q := []byte{'\'', '"'}[bits()]
		escapeOther := bits() == 1
		pointForm := bits()
		pointFirst := bits() == 1
		sp := []string{"", " ", "\n", "  \t"}[bits()]
		trailing := bits() == 1
		prefix := []string{"", "Action: ", "Thought: t\nAction: ", "```\n"}[bits()]
		suffix := []string{"", "\n\nwait()", " then wait()", "\nThought: more\nAction: finished()"}[bits()]
		unknown := bits() == 1
		unknownPos, unknownVal, unknownOther := bits(), bits(), bits() == 1

		// quote returns s quoted with c and escaped.
		quote := func(s string, c byte) string {
			var b strings.Builder
			b.WriteByte(c)
			for i := 0; i < len(s); i++ {
				switch ch := s[i]; {
				case ch == '\\' || ch == c:
					b.WriteByte('\\')
					b.WriteByte(ch)
				case ch == '\n':
					b.WriteString(`\n`)
				case ch == '\r':
					b.WriteString(`\r`)
				case ch == '\t':
					b.WriteString(`\t`)
				case (ch == '\'' || ch == '"') && escapeOther:
					b.WriteByte('\\')
					b.WriteByte(ch)
				default:
					b.WriteByte(ch)
				}
			}
			b.WriteByte(c)
			return b.String()
		}
		textArg := textName + sp + "=" + sp + quote(text, q)

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

		args := []string{textArg, pointArg}
		if pointFirst {
			args = []string{pointArg, textArg}
		}
		name := ""
		if unknown {
			name = unknownName(extra)
			vq := q
			if unknownOther {
				vq = '\'' + '"' - q
			}
			val := []string{
				quote("left", vq),
				quote("", vq),
				"2",
				"(1,2)",
				quote("<point>1 2</point>", vq),
				"True",
				quote(text, vq),
				quote("a"+string(vq)+", "+name+"="+string(vq)+"b", vq),
			}[unknownVal]
			args = slices.Insert(args, unknownPos, name+sp+"="+sp+val)
		}
		list := strings.Join(args, ","+sp)
		if trailing {
			list += ","
		}
		call := prefix + "type" + "(" + sp + list + sp + ")" + suffix

		got, err := Parse(call, DefaultOptions())
		if bad || unknown {
			// No type action may come out of a broken call.
			if err == nil {
				next := []traj.Action{{Type: traj.Finished}}
				if !strings.HasPrefix(suffix, "\nThought:") || !reflect.DeepEqual(got.Actions, next) || got.DroppedBlocks != 1 {
					t.Fatalf("Parse(%q) of a broken call (bad point %v, unknown argument %q) = %s, want an error",
						call, bad, name, dump(got.Actions))
				}
				return
			}
			if want := fmt.Sprintf("unknown argument %q for type (accepted: ", name); unknown && !bad && !strings.Contains(err.Error(), want) {
				t.Fatalf("Parse(%q): %v; want an error containing %q", call, err, want)
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

// unknownName makes an argument name that type does not take from s: the
// letters, digits and underscores of s ("arg" when there are none), with
// "x" before a leading digit and "_x" after a name of type's arguments.
func unknownName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			b.WriteByte(c)
		}
	}
	name := b.String()
	switch {
	case name == "":
		name = "arg"
	case '0' <= name[0] && name[0] <= '9':
		name = "x" + name
	}
	if canon := argAliases[strings.ToLower(name)]; canon == argContent || canon == argStart {
		name += "_x"
	}
	return name
}
