package uitars

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/pkg/traj"
)

// TestSmartResizeMatchesPublishedRule checks SmartResize against outputs of
// the published Python rule (the smart_resize of qwen-vl-utils, which
// UI-TARS's action parser copies), run on these sizes with factor 28 and
// max_pixels 16384·28², once with Qwen2.5-VL's min_pixels 4·28² and once
// with the 100·28² of UI-TARS's parser. The 70×70 and 42×98 rows pin
// Python's round-half-to-even.
func TestSmartResizeMatchesPublishedRule(t *testing.T) {
	type row struct{ w, h, qw, qh, uw, uh int }
	rows := []row{
		{1280, 800, 1288, 812, 1288, 812},
		{1920, 1080, 1932, 1092, 1932, 1092},
		{2560, 1440, 2548, 1428, 2548, 1428},
		{3840, 2160, 3836, 2156, 3836, 2156},
		{1366, 768, 1372, 756, 1372, 756},
		{1024, 768, 1036, 756, 1036, 756},
		{800, 600, 812, 588, 812, 588},
		{1440, 900, 1428, 896, 1428, 896},
		{1680, 1050, 1680, 1064, 1680, 1064},
		{5120, 2880, 4760, 2688, 4760, 2688},
		{7680, 4320, 4760, 2688, 4760, 2688},
		{14, 14, 56, 56, 280, 280},
		{56, 56, 56, 56, 280, 280},
		{70, 70, 56, 56, 280, 280},
		{42, 98, 56, 112, 196, 448},
		{100, 30, 112, 28, 532, 168},
		{28, 5000, 28, 5012, 28, 5012},
		{1288, 812, 1288, 812, 1288, 812},
		{3000, 2000, 2996, 1988, 2996, 1988},
		{64, 9000, 56, 8988, 56, 8988},
		{12345, 678, 12348, 672, 12348, 672},
		{10, 1000, 28, 1008, 28, 2800},
		{250, 250, 252, 252, 280, 280},
	}
	for _, r := range rows {
		w, h, err := SmartResize(r.w, r.h, ResizeFactor, ResizeMinPixels, ResizeMaxPixels)
		if err != nil || w != r.qw || h != r.qh {
			t.Errorf("qwen defaults: SmartResize(%d, %d) = %d, %d, %v; want %d, %d", r.w, r.h, w, h, err, r.qw, r.qh)
		}
		w, h, err = SmartResize(r.w, r.h, ResizeFactor, 100*28*28, ResizeMaxPixels)
		if err != nil || w != r.uw || h != r.uh {
			t.Errorf("ui-tars min_pixels: SmartResize(%d, %d) = %d, %d, %v; want %d, %d", r.w, r.h, w, h, err, r.uw, r.uh)
		}
	}
	for _, bad := range [][2]int{{0, 800}, {1280, -1}, {10000, 10}, {1, 201}} {
		if _, _, err := SmartResize(bad[0], bad[1], ResizeFactor, ResizeMinPixels, ResizeMaxPixels); err == nil {
			t.Errorf("SmartResize(%d, %d): no error", bad[0], bad[1])
		}
	}
	if _, _, err := SmartResize(1280, 800, 0, 1, 2); err == nil {
		t.Error("factor 0: no error")
	}
	// A custom maximum that would floor a side to 0 keeps it at factor.
	if w, h, err := SmartResize(2000, 100, 28, 28*28, 28*28*4); err != nil || w <= 0 || h != 28 {
		t.Errorf("SmartResize(2000, 100) with max_pixels 3136 = %d, %d, %v; want a side of at least 28", w, h, err)
	}
}

func TestExtent(t *testing.T) {
	cases := []struct {
		c    traj.Coords
		img  Screen
		w, h float64
	}{
		{Grid(), Screen{}, 1000, 1000},
		{traj.Coords{Space: traj.Unit}, Screen{}, 1, 1},
		{traj.Coords{Space: traj.PixelsScreen}, Screen{W: 1280, H: 800}, 1280, 800},
		{Resized(), Screen{W: 1280, H: 800}, 1288, 812},
		{traj.Coords{Space: traj.PixelsResized}, Screen{W: 1920, H: 1080}, 1932, 1092}, // zero parameters: defaults
	}
	for _, c := range cases {
		w, h, err := Extent(c.c, c.img)
		if err != nil || w != c.w || h != c.h {
			t.Errorf("Extent(%+v, %v) = %v, %v, %v; want %v, %v", c.c, c.img, w, h, err, c.w, c.h)
		}
	}
}

func TestParseCoords(t *testing.T) {
	good := []struct {
		in   string
		want traj.Coords
	}{
		{"grid1000", Grid()},
		{" Unit ", traj.Coords{Space: traj.Unit}},
		{"pixels-screen", traj.Coords{Space: traj.PixelsScreen}},
		{"pixels-resized", Resized()},
		{"pixels-resized:min_pixels=78400", traj.Coords{Space: traj.PixelsResized, Factor: 28, MinPixels: 78400, MaxPixels: ResizeMaxPixels}},
		{"pixels-resized:factor=14,min_pixels=100,max_pixels=1000", traj.Coords{Space: traj.PixelsResized, Factor: 14, MinPixels: 100, MaxPixels: 1000}},
	}
	for _, g := range good {
		got, err := ParseCoords(g.in)
		if err != nil || got != g.want {
			t.Errorf("ParseCoords(%q) = %+v, %v; want %+v", g.in, got, err, g.want)
			continue
		}
		if again, err := ParseCoords(CoordsString(got)); err != nil || again != got {
			t.Errorf("ParseCoords(CoordsString(%+v)) = %+v, %v", got, again, err)
		}
	}
	for _, bad := range []string{"", "pixels", "grid1000:factor=28", "pixels-resized:factor=0", "pixels-resized:size=3",
		"pixels-resized:factor=28,factor=14",
		"pixels-resized:min_pixels=10,max_pixels=5", "pixels-resized:factor"} {
		if _, err := ParseCoords(bad); !errors.Is(err, ErrCoordsSyntax) {
			t.Errorf("ParseCoords(%q): err = %v, want ErrCoordsSyntax", bad, err)
		}
	}
}

// TestRealExecutorOutputs parses outputs in the forms executors write, in
// each coordinate space, and checks the normalised points to 1e-9.
func TestRealExecutorOutputs(t *testing.T) {
	fhd := Screen{W: 1920, H: 1080}
	cases := []struct {
		name   string
		opt    Options
		in     string
		typ    traj.ActionType
		x, y   float64 // expected normalised point (start point for a drag)
		x2, y2 float64 // end point of a drag
	}{
		// UI-TARS-1.5 on a 1920×1080 screen sees 1932×1092: x beyond 1000.
		{"ui-tars-1.5 fhd right edge", Options{Coords: Resized(), Image: fhd},
			"Thought: The close button is in the top-right corner.\nAction: click(start_box='<|box_start|>(1854,45)<|box_end|>')",
			traj.Click, 1854.0 / 1932, 45.0 / 1092, 0, 0},
		{"ui-tars-1.5 fhd bottom", Options{Coords: Resized(), Image: fhd},
			"Action: left_double(start_box='(30,1083)')", traj.LeftDouble, 30.0 / 1932, 1083.0 / 1092, 0, 0},
		{"ui-tars-1.5 point tag", Options{Coords: Resized(), Image: fhd},
			"Thought: Open the menu.\nAction: click(point='<point>1211 38</point>')", traj.Click, 1211.0 / 1932, 38.0 / 1092, 0, 0},
		{"ui-tars-1.5 1280x800", Options{Coords: Resized(), Image: DefaultScreen},
			"Action: right_single(start_box='(1288,812)')", traj.RightSingle, 1, 1, 0, 0},
		{"ui-tars-1.5 drag", Options{Coords: Resized(), Image: DefaultScreen},
			"Action: drag(start_box='<|box_start|>(644,406)<|box_end|>', end_box='<|box_start|>(966,203)<|box_end|>')",
			traj.Drag, 0.5, 0.5, 966.0 / 1288, 203.0 / 812},
		{"ui-tars-1.0 grid", Options{Coords: Grid(), Image: fhd},
			"Thought: click the command line\nAction: click(start_box='<|box_start|>(498,962)<|box_end|>')", traj.Click, 0.498, 0.962, 0, 0},
		{"grid box", Options{Coords: Grid()},
			"Action: scroll(start_box='[100, 200, 300, 400]', direction='down')", traj.Scroll, 0.2, 0.3, 0, 0},
		{"screen pixels", Options{Coords: traj.Coords{Space: traj.PixelsScreen}, Image: fhd},
			"Action: click(start_box='(1919,1079)')", traj.Click, 1919.0 / 1920, 1079.0 / 1080, 0, 0},
		{"screen pixels decimals", Options{Coords: traj.Coords{Space: traj.PixelsScreen}, Image: DefaultScreen},
			"click(start_box='(640.5, 400.25)')", traj.Click, 640.5 / 1280, 400.25 / 800, 0, 0},
		{"unit", Options{Coords: traj.Coords{Space: traj.Unit}},
			"Action: hover(start_box='(0.25, 0.75)')", traj.Hover, 0.25, 0.75, 0, 0},
		{"unit box", Options{Coords: traj.Coords{Space: traj.Unit}},
			"click(start_box='(0.1,0.2,0.3,0.4)')", traj.Click, 0.2, 0.30000000000000004, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse(c.in, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Actions) != 1 || got.Actions[0].Type != c.typ {
				t.Fatalf("actions %s, want one %s", dump(got.Actions), c.typ)
			}
			a := got.Actions[0]
			p, q := a.Point, (*traj.Point)(nil)
			if c.typ == traj.Drag {
				p, q = a.Start, a.End
			}
			near := func(p *traj.Point, x, y float64) bool {
				return p != nil && math.Abs(p.X-x) <= 1e-9 && math.Abs(p.Y-y) <= 1e-9
			}
			if !near(p, c.x, c.y) {
				t.Errorf("point %+v, want (%v, %v)", p, c.x, c.y)
			}
			if c.typ == traj.Drag && !near(q, c.x2, c.y2) {
				t.Errorf("end %+v, want (%v, %v)", q, c.x2, c.y2)
			}
		})
	}
}

// TestOutOfRangeIsTyped: a point beyond the space's extent is an error that
// wraps ErrOutOfRange and names the space; the same text in the space the
// model really used parses.
func TestOutOfRangeIsTyped(t *testing.T) {
	in := "Action: click(start_box='(1854,45)')"
	for _, opt := range []Options{
		DefaultOptions(), // a pixels-resized answer read on the 0-1000 grid
		{Coords: traj.Coords{Space: traj.PixelsScreen}, Image: Screen{W: 1280, H: 800}},
		{Coords: traj.Coords{Space: traj.Unit}},
	} {
		_, err := Parse(in, opt)
		var se *SyntaxError
		if !errors.As(err, &se) || !errors.Is(err, ErrOutOfRange) || !strings.Contains(err.Error(), "x coordinate 1854 outside") ||
			!strings.Contains(err.Error(), string(WithDefaults(opt.Coords).Space)) {
			t.Errorf("%+v: err = %v, want an out-of-range *SyntaxError naming the space", opt.Coords, err)
		}
	}
	if _, err := Parse(in, Options{Coords: Resized(), Image: Screen{W: 1920, H: 1080}}); err != nil {
		t.Errorf("pixels-resized on 1920x1080: %v", err)
	}
	for _, malformed := range []string{"click(start_box='(1,2,3)')", "click(start_box='(1,2,3000)')", "click(start_box='(5000)')",
		"click(start_box='(1,2,3,4,5000)')"} {
		_, err := Parse(malformed, DefaultOptions())
		var se *SyntaxError
		if !errors.As(err, &se) || errors.Is(err, ErrOutOfRange) {
			t.Errorf("%s: a malformed point is a syntax error, not out of range: %v", malformed, err)
		}
	}
	// An out-of-range point in the first block is reported, not skipped for
	// the block after it; one in a dropped later block does not matter.
	_, err := Parse("Thought: a\nAction: click(start_box='(3000,4)')\nThought: b\nAction: click(start_box='(1,2)')", DefaultOptions())
	if !errors.Is(err, ErrOutOfRange) {
		t.Errorf("out-of-range first block: err = %v, want ErrOutOfRange", err)
	}
	if _, err := Parse("Thought: a\nAction: click(start_box='(1,2)')\nThought: b\nAction: click(start_box='(3000,4)')", DefaultOptions()); err != nil {
		t.Errorf("out-of-range dropped block: %v", err)
	}
}

// TestRobustness covers forms seen in real model output.
func TestRobustness(t *testing.T) {
	type out struct {
		thought string
		acts    []traj.Action
	}
	cases := []struct {
		name string
		in   string
		want out
	}{
		{"full-width colon", "Thought：点击保存按钮。\nAction：click(start_box='(20,30)')",
			out{"点击保存按钮。", []traj.Action{{Type: traj.Click, Point: pt(20, 30)}}}},
		{"full-width colon action only", "Action： hotkey(key='ctrl s')",
			out{"", []traj.Action{{Type: traj.Hotkey, Keys: []string{"ctrl", "s"}}}}},
		{"space before colon", "Thought : wait.\nAction : wait()", out{"wait.", []traj.Action{{Type: traj.Wait}}}},
		{"type text argument", "Action: type(text='hello world')",
			out{"", []traj.Action{{Type: traj.TypeText, Text: "hello world"}}}},
		{"unescaped quotes in call", "Action: type(content='print('hello')')",
			out{"", []traj.Action{{Type: traj.TypeText, Text: "print('hello')"}}}},
		{"unescaped quotes in list", "Action: type(content='['a', 'b']')",
			out{"", []traj.Action{{Type: traj.TypeText, Text: "['a', 'b']"}}}},
		{"unescaped quotes then enter", "Action: type(content='x = f('a', 'b')\\n')",
			out{"", []traj.Action{{Type: traj.TypeText, Text: "x = f('a', 'b')\n"}}}},
		{"unescaped quotes before next action", "Action: type(content='say 'hi'')\n\nhotkey(key='enter')",
			out{"", []traj.Action{{Type: traj.TypeText, Text: "say 'hi'"}, {Type: traj.Hotkey, Keys: []string{"enter"}}}}},
		{"unescaped double quotes", `Action: type(content="a "quoted" word")`,
			out{"", []traj.Action{{Type: traj.TypeText, Text: `a "quoted" word`}}}},
		{"box tokens two corners", "Action: click(start_box='<|box_start|>(100,200)<|box_end|>(300,400)<|box_end|>')",
			out{"", []traj.Action{{Type: traj.Click, Point: pt(200, 300)}}}},
		{"two corners adjacent", "click(start_box='(100,200)(300,401)')",
			out{"", []traj.Action{{Type: traj.Click, Point: pt(200, 300.5)}}}},
		{"two corners comma", "click(start_box='(100,200), (300,400)')",
			out{"", []traj.Action{{Type: traj.Click, Point: pt(200, 300)}}}},
		{"blocks: first one", "Thought: Open the menu.\nAction: click(start_box='(10,10)')\nThought: Now save.\nAction: hotkey(key='ctrl s')",
			out{"Open the menu.", []traj.Action{{Type: traj.Click, Point: pt(10, 10)}}}},
		{"blocks: broken first one", "Thought: Open the menu.\nAction: click(start_box='(10,\nThought: Now save.\nAction: hotkey(key='ctrl s')",
			out{"Now save.", []traj.Action{{Type: traj.Hotkey, Keys: []string{"ctrl", "s"}}}}},
		{"blocks: truncated last", "Thought: Open the menu.\nAction: click(start_box='(10,10)')\nThought: Now I will",
			out{"Open the menu.", []traj.Action{{Type: traj.Click, Point: pt(10, 10)}}}},
		{"blocks: broken last action", "Thought: A.\nAction: wait()\n\nThought: B.\nAction: click(start_box='(10,",
			out{"A.", []traj.Action{{Type: traj.Wait}}}},
		{"blocks: three", "Thought: A.\nAction: wait()\nThought: B.\nAction: wait()\nReflection: hm\nAction_Summary: C.\nAction: finished()",
			out{"A.", []traj.Action{{Type: traj.Wait}}}},
		{"labelled line inside typed text", "Thought: Write the note.\nAction: type(content='Action: done\nThought: later')",
			out{"Write the note.", []traj.Action{{Type: traj.TypeText, Text: "Action: done\nThought: later"}}}},
		{"two actions on one line", "Action: hotkey(key='ctrl c') hotkey(key='ctrl v')",
			out{"", []traj.Action{{Type: traj.Hotkey, Keys: []string{"ctrl", "c"}}, {Type: traj.Hotkey, Keys: []string{"ctrl", "v"}}}}},
		{"type then click on one line", "type(content='x') click(start_box='(1,2)')",
			out{"", []traj.Action{{Type: traj.TypeText, Text: "x"}, {Type: traj.Click, Point: pt(1, 2)}}}},
		{"click then type on one line", "click(start_box='(1,2)') type(content='x')",
			out{"", []traj.Action{{Type: traj.Click, Point: pt(1, 2)}, {Type: traj.TypeText, Text: "x"}}}},
		{"escaped newlines with unescaped quotes", "Action: type(content='def f():\\n    print('x')\\n    return 1\\n')",
			out{"", []traj.Action{{Type: traj.TypeText, Text: "def f():\n    print('x')\n    return 1\n"}}}},
		{"multi-line code with literal newlines", "Action: type(content='def f():\n    print('x')\n    return')\n\nhotkey(key='ctrl s')",
			out{"", []traj.Action{{Type: traj.TypeText, Text: "def f():\n    print('x')\n    return"}, {Type: traj.Hotkey, Keys: []string{"ctrl", "s"}}}}},
		{"press holds, release lets go", "Action: press(key='shift')\n\nclick(start_box='(5,5)')\n\nrelease(key='shift')",
			out{"", []traj.Action{{Type: traj.KeyDown, Keys: []string{"shift"}}, {Type: traj.Click, Point: pt(5, 5)}, {Type: traj.KeyUp, Keys: []string{"shift"}}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse(c.in, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if got.Thought != c.want.thought {
				t.Errorf("thought %q, want %q", got.Thought, c.want.thought)
			}
			if !reflect.DeepEqual(got.Actions, c.want.acts) {
				t.Errorf("actions\n%s\nwant\n%s", dump(got.Actions), dump(c.want.acts))
			}
		})
	}
	// Still unparseable: the raw text is kept with a reason.
	for _, in := range []string{
		"Thought: A.\nAction: clik(start_box='(1,2)')\nThought: B.\nAction: tap()",
		"The element is at the bottom of the window.",
		"Action: click(start_box='(1,2)(3)')",
	} {
		got, err := Parse(in, DefaultOptions())
		var se *SyntaxError
		if !errors.As(err, &se) || got.Raw != in || got.Actions != nil || se.Msg == "" {
			t.Errorf("Parse(%q) = %+v, %v; want a *SyntaxError with the raw text kept", in, got, err)
		}
	}
}

func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		c    traj.Coords
		want string
	}{
		{Grid(), "0-1000 grid"},
		{traj.Coords{Space: traj.Unit}, "fractions"},
		{Resized(), "1288x812 image you see: x from 0 to 1288, y from 0 to 812"},
		{traj.Coords{Space: traj.PixelsScreen}, "1280x800 image"},
	} {
		got, err := Describe(c.c, DefaultScreen)
		if err != nil || !strings.Contains(got, c.want) {
			t.Errorf("Describe(%+v) = %q, %v; want it to contain %q", c.c, got, err, c.want)
		}
	}
}
