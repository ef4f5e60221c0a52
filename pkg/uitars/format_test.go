package uitars

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/pkg/traj"
)

func TestFormat(t *testing.T) {
	cases := []struct {
		a    traj.Action
		want string
	}{
		{traj.Action{Type: traj.Click, Point: pt(512, 384)}, "click(start_box='(512,384)')"},
		{traj.Action{Type: traj.LeftDouble, Point: pt(0, 1000)}, "left_double(start_box='(0,1000)')"},
		{traj.Action{Type: traj.RightSingle, Point: pt(12.5, 7.25)}, "right_single(start_box='(12.5,7.25)')"},
		{traj.Action{Type: traj.Hover, Point: pt(1, 2)}, "hover(start_box='(1,2)')"},
		{traj.Action{Type: traj.Drag, Start: pt(1, 2), End: pt(3, 4)}, "drag(start_box='(1,2)', end_box='(3,4)')"},
		{traj.Action{Type: traj.Hotkey, Keys: []string{"ctrl", "shift", "s"}}, "hotkey(key='ctrl shift s')"},
		{traj.Action{Type: traj.TypeText, Text: "it's a \"test\"\\\n\tend\r"}, `type(content='it\'s a "test"\\\n\tend\r')`},
		{traj.Action{Type: traj.Scroll, Point: pt(5, 6), Direction: traj.DirDown}, "scroll(start_box='(5,6)', direction='down')"},
		{traj.Action{Type: traj.Scroll, Direction: traj.DirLeft}, "scroll(direction='left')"},
		{traj.Action{Type: traj.Wait}, "wait()"},
		{traj.Action{Type: traj.Finished}, "finished()"},
		{traj.Action{Type: traj.Finished, Text: "done"}, "finished(content='done')"},
		{traj.Action{Type: traj.CallUser}, "call_user()"},
		{traj.Action{Type: traj.Answer, Text: "10.31"}, "ANS 10.31"},
		{traj.Action{Type: traj.TypeText, Text: "Hello", Point: pt(300, 400)}, "type(content='Hello', start_box='(300,400)')"},
	}
	for _, c := range cases {
		if got := Format(c.a, DefaultOptions()); got != c.want {
			t.Errorf("Format(%+v) = %s, want %s", c.a, got, c.want)
		}
	}
	all := FormatAll([]traj.Action{cases[0].a, cases[13].a}, Options{})
	if want := "click(start_box='(512,384)')\n\nANS 10.31"; all != want {
		t.Errorf("FormatAll = %q, want %q", all, want)
	}
}

// TestGridString checks that grid values print as written: every integer
// and every one- and two-decimal value of the 1000 grid.
func TestGridString(t *testing.T) {
	for k := 0; k <= 100000; k++ {
		for _, s := range []string{strconv.Itoa(k / 100), strconv.FormatFloat(float64(k)/100, 'f', -1, 64)} {
			g, _ := strconv.ParseFloat(s, 64)
			if g > 1000 {
				continue
			}
			if got := gridString(g/1000, 1000); got != s {
				t.Fatalf("gridString(%s/1000) = %s", s, got)
			}
		}
	}
	// A value off the grid still gets the nearest text.
	if got := gridString(1.0/3, 1000); got != strconv.FormatFloat(1000.0/3, 'f', -1, 64) {
		t.Errorf("gridString(1/3) = %s", got)
	}
}

// gen generates random actions that Parse can produce.
type gen struct {
	r    *rand.Rand
	w, h float64 // extents of the coordinate space
}

var textPieces = []string{
	"a", "Z", "0", " ", "  ", "'", `"`, `\`, `\\`, `\n`, "\n", "\n\n", "\t", "\r", "\r\n",
	"é", "世界", "🙂", "\u2028", "\u00a0", "\x00", "\x7f", "\xff", "\xe4\xb8",
	"(", ")", ",", "=", "```", "Action: ", "Thought: ", "ANS ", "click(start_box='(1,2)')",
	"<|box_start|>", "%s", "{}", "#", "+",
}

var keyPool = []string{
	"ctrl", "shift", "alt", "win", "cmd", "enter", "esc", "tab", "space", "backspace",
	"a", "c", "v", "z", "f5", "arrowdown", "pageup", "+", "'", `"`, `\`, "é", ",", ")",
}

func (g gen) text(max int) string {
	var b strings.Builder
	for n := g.r.IntN(max + 1); n > 0; n-- {
		b.WriteString(textPieces[g.r.IntN(len(textPieces))])
	}
	return b.String()
}

// coord returns a value Parse can produce: an integer grid value, a
// decimal one, or the centre of a box of either.
func (g gen) coord(ext float64) float64 {
	one := func() float64 {
		switch g.r.IntN(3) {
		case 0:
			return float64(g.r.IntN(int(ext) + 1))
		case 1:
			v, _ := strconv.ParseFloat(strconv.FormatFloat(g.r.Float64()*ext, 'f', g.r.IntN(6), 64), 64)
			return math.Min(v, ext)
		default:
			return g.r.Float64() * ext
		}
	}
	v := one()
	if g.r.IntN(4) == 0 {
		v = (v + one()) / 2
	}
	return v / ext
}

func (g gen) point() *traj.Point { return &traj.Point{X: g.coord(g.w), Y: g.coord(g.h)} }

func (g gen) action() traj.Action {
	typ := traj.ActionTypes[g.r.IntN(len(traj.ActionTypes))]
	a := traj.Action{Type: typ}
	switch typ {
	case traj.Click, traj.LeftDouble, traj.RightSingle, traj.Hover:
		a.Point = g.point()
	case traj.Drag:
		a.Start, a.End = g.point(), g.point()
	case traj.Hotkey, traj.KeyDown, traj.KeyUp:
		for n := 1 + g.r.IntN(4); n > 0; n-- {
			a.Keys = append(a.Keys, keyPool[g.r.IntN(len(keyPool))])
		}
	case traj.TypeText:
		a.Text = g.text(12)
		if g.r.IntN(3) == 0 {
			a.Point = g.point()
		}
	case traj.Scroll:
		if g.r.IntN(2) == 0 {
			a.Point = g.point()
		}
		a.Direction = []string{traj.DirUp, traj.DirDown, traj.DirLeft, traj.DirRight}[g.r.IntN(4)]
	case traj.Finished:
		if g.r.IntN(2) == 0 {
			a.Text = g.text(6)
		}
	case traj.Answer:
		// One line, trimmed, not empty.
		a.Text = strings.TrimSpace(strings.NewReplacer("\n", " ", "\r", " ").Replace(g.text(8)))
		if a.Text == "" {
			a.Text = "42"
		}
	}
	return a
}

// roundTripSpaces are the options TestRoundTrip runs in: every space, and
// the pixel spaces on several image sizes.
var roundTripSpaces = []Options{
	DefaultOptions(),
	{Coords: traj.Coords{Space: traj.Unit}},
	{Coords: traj.Coords{Space: traj.PixelsScreen}, Image: DefaultScreen},
	{Coords: traj.Coords{Space: traj.PixelsScreen}, Image: Screen{W: 999, H: 777}},
	{Coords: Resized(), Image: DefaultScreen},
	{Coords: Resized(), Image: Screen{W: 1920, H: 1080}},
	{Coords: traj.Coords{Space: traj.PixelsResized, Factor: 14, MinPixels: 100, MaxPixels: 200000}, Image: Screen{W: 2560, H: 1440}},
}

// TestRoundTrip checks Parse(Format(a)) == a and Parse(FormatAll(as)) == as
// for random actions in every coordinate space.
func TestRoundTrip(t *testing.T) {
	for si, opt := range roundTripSpaces {
		w, h, err := Extent(opt.Coords, opt.Image)
		if err != nil {
			t.Fatal(err)
		}
		space := CoordsString(opt.Coords) + fmt.Sprintf("@%dx%d", opt.Image.W, opt.Image.H)
		g := gen{r: rand.New(rand.NewPCG(1, uint64(si))), w: w, h: h}
		for i := 0; i < 20000; i++ {
			a := g.action()
			text := Format(a, opt)
			got, err := Parse(text, opt)
			if err != nil {
				t.Fatalf("space %v: Parse(%q): %v", space, text, err)
			}
			if want := []traj.Action{a}; !reflect.DeepEqual(got.Actions, want) {
				t.Fatalf("space %v: Parse(%q) =\n%s\nwant\n%s", space, text, dump(got.Actions), dump(want))
			}
		}
		for i := 0; i < 3000; i++ {
			as := make([]traj.Action, 1+g.r.IntN(5))
			for j := range as {
				as[j] = g.action()
			}
			text := FormatAll(as, opt)
			got, err := Parse(text, opt)
			if err != nil {
				t.Fatalf("space %v: Parse(%q): %v", space, text, err)
			}
			if !reflect.DeepEqual(got.Actions, as) {
				t.Fatalf("space %v: Parse(%q) =\n%s\nwant\n%s", space, text, dump(got.Actions), dump(as))
			}
			// The same actions behind a thought parse the same way.
			thought := "Thought: " + strings.TrimSpace(strings.ReplaceAll(g.text(6), "Action:", "")) + "\nAction: "
			if got, err := Parse(thought+text, opt); err != nil || !reflect.DeepEqual(got.Actions, as) {
				t.Fatalf("space %v: Parse(%q) = %v, %v", space, thought+text, dump(got.Actions), err)
			}
		}
	}
}
