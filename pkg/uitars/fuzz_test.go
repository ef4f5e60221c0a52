package uitars

import (
	"errors"
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
