package uitars

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/pkg/traj"
)

// pt returns the point Parse produces for grid coordinates (x, y) on the
// default 1000 grid.
func pt(x, y float64) *traj.Point { return &traj.Point{X: x / 1000, Y: y / 1000} }

type parseCase struct {
	name    string
	in      string
	thought string
	want    []traj.Action
	// For error cases: the offset and substrings of the message.
	errOff  int
	errHas  []string
	wantErr bool
}

var parseCases = []parseCase{
	// One case per action type.
	{name: "click", in: "click(start_box='(512,384)')",
		want: []traj.Action{{Type: traj.Click, Point: pt(512, 384)}}},
	{name: "left_double", in: "left_double(start_box='(10,20)')",
		want: []traj.Action{{Type: traj.LeftDouble, Point: pt(10, 20)}}},
	{name: "right_single", in: "right_single(start_box='(999,1)')",
		want: []traj.Action{{Type: traj.RightSingle, Point: pt(999, 1)}}},
	{name: "hover", in: "hover(start_box='(0,1000)')",
		want: []traj.Action{{Type: traj.Hover, Point: pt(0, 1000)}}},
	{name: "drag", in: "drag(start_box='(100,200)', end_box='(300,400)')",
		want: []traj.Action{{Type: traj.Drag, Start: pt(100, 200), End: pt(300, 400)}}},
	{name: "hotkey", in: "hotkey(key='ctrl c')",
		want: []traj.Action{{Type: traj.Hotkey, Keys: []string{"ctrl", "c"}}}},
	{name: "type", in: "type(content='hello world')",
		want: []traj.Action{{Type: traj.TypeText, Text: "hello world"}}},
	{name: "scroll", in: "scroll(start_box='(500,500)', direction='down')",
		want: []traj.Action{{Type: traj.Scroll, Point: pt(500, 500), Direction: traj.DirDown}}},
	{name: "wait", in: "wait()",
		want: []traj.Action{{Type: traj.Wait}}},
	{name: "finished", in: "finished()",
		want: []traj.Action{{Type: traj.Finished}}},
	{name: "call_user", in: "call_user()",
		want: []traj.Action{{Type: traj.CallUser}}},
	{name: "answer", in: "ANS 10.31",
		want: []traj.Action{{Type: traj.Answer, Text: "10.31"}}},

	// One case per coordinate form.
	{name: "coord/paren point", in: "click(start_box='(1,2)')",
		want: []traj.Action{{Type: traj.Click, Point: pt(1, 2)}}},
	{name: "coord/paren box", in: "click(start_box='(100,200,300,400)')",
		want: []traj.Action{{Type: traj.Click, Point: pt(200, 300)}}},
	{name: "coord/box tokens point", in: "click(start_box='<|box_start|>(512,384)<|box_end|>')",
		want: []traj.Action{{Type: traj.Click, Point: pt(512, 384)}}},
	{name: "coord/box tokens box", in: "click(start_box='<|box_start|>(100,200,301,400)<|box_end|>')",
		want: []traj.Action{{Type: traj.Click, Point: pt(200.5, 300)}}},
	{name: "coord/point tag", in: "click(start_box='<point>512 384</point>')",
		want: []traj.Action{{Type: traj.Click, Point: pt(512, 384)}}},
	{name: "coord/bbox tag", in: "click(start_box='<bbox>100 200 300 400</bbox>')",
		want: []traj.Action{{Type: traj.Click, Point: pt(200, 300)}}},
	{name: "coord/list point", in: "click(start_box='[512, 384]')",
		want: []traj.Action{{Type: traj.Click, Point: pt(512, 384)}}},
	{name: "coord/list box", in: "click(start_box='[100, 200, 300, 400]')",
		want: []traj.Action{{Type: traj.Click, Point: pt(200, 300)}}},
	{name: "coord/bare numbers", in: "click(start_box='512,384')",
		want: []traj.Action{{Type: traj.Click, Point: pt(512, 384)}}},
	{name: "coord/decimals", in: "click(start_box='(512.5, 384.25)')",
		want: []traj.Action{{Type: traj.Click, Point: pt(512.5, 384.25)}}},
	{name: "coord/leading dot and plus", in: "click(start_box='(.5,+7)')",
		want: []traj.Action{{Type: traj.Click, Point: pt(0.5, 7)}}},
	{name: "coord/negative zero", in: "click(start_box='(-0,0)')",
		want: []traj.Action{{Type: traj.Click, Point: &traj.Point{}}}},

	// Argument syntax tolerance.
	{name: "args/point alias", in: "click(point='<point>5 6</point>')",
		want: []traj.Action{{Type: traj.Click, Point: pt(5, 6)}}},
	{name: "args/drag point aliases", in: "drag(start_point='<point>1 2</point>', end_point='<point>3 4</point>')",
		want: []traj.Action{{Type: traj.Drag, Start: pt(1, 2), End: pt(3, 4)}}},
	{name: "args/unquoted box", in: "click(start_box=(512,384))",
		want: []traj.Action{{Type: traj.Click, Point: pt(512, 384)}}},
	{name: "args/unquoted box tokens", in: "click(start_box=<|box_start|>(512,384)<|box_end|>)",
		want: []traj.Action{{Type: traj.Click, Point: pt(512, 384)}}},
	{name: "args/unquoted list and direction", in: "scroll(start_box=[1, 2], direction=up)",
		want: []traj.Action{{Type: traj.Scroll, Point: pt(1, 2), Direction: traj.DirUp}}},
	{name: "args/whitespace", in: "drag ( start_box = '( 1 , 2 )' ,\n end_box = \"(3,4)\" , )",
		want: []traj.Action{{Type: traj.Drag, Start: pt(1, 2), End: pt(3, 4)}}},
	{name: "args/case-insensitive names", in: "Click(Start_Box='(1,2)')",
		want: []traj.Action{{Type: traj.Click, Point: pt(1, 2)}}},
	{name: "alias/left_single", in: "left_single(start_box='(1,2)')",
		want: []traj.Action{{Type: traj.Click, Point: pt(1, 2)}}},
	{name: "hotkey/plus", in: "hotkey(key='Ctrl+Shift+S')",
		want: []traj.Action{{Type: traj.Hotkey, Keys: []string{"ctrl", "shift", "s"}}}},
	{name: "hotkey/plus key", in: "hotkey(key='ctrl +')",
		want: []traj.Action{{Type: traj.Hotkey, Keys: []string{"ctrl", "+"}}}},
	{name: "keys/press holds", in: "press(key='shift')",
		want: []traj.Action{{Type: traj.KeyDown, Keys: []string{"shift"}}}},
	{name: "keys/press argument", in: "press(press='enter')",
		want: []traj.Action{{Type: traj.KeyDown, Keys: []string{"enter"}}}},
	{name: "keys/keydown", in: "keydown(key='ctrl')",
		want: []traj.Action{{Type: traj.KeyDown, Keys: []string{"ctrl"}}}},
	{name: "keys/release", in: "release(key='shift')",
		want: []traj.Action{{Type: traj.KeyUp, Keys: []string{"shift"}}}},
	{name: "keys/keyup", in: "keyup(key='Shift')",
		want: []traj.Action{{Type: traj.KeyUp, Keys: []string{"shift"}}}},
	{name: "keys/hotkey argument", in: "hotkey(hotkey='ctrl s')",
		want: []traj.Action{{Type: traj.Hotkey, Keys: []string{"ctrl", "s"}}}},
	{name: "scroll/no point", in: "scroll(direction='UP')",
		want: []traj.Action{{Type: traj.Scroll, Direction: traj.DirUp}}},
	{name: "scroll/left", in: "scroll(start_box='(1,1)', direction='left')",
		want: []traj.Action{{Type: traj.Scroll, Point: pt(1, 1), Direction: traj.DirLeft}}},
	{name: "scroll/right", in: "scroll(direction=\"right\", start_box='(1,1)')",
		want: []traj.Action{{Type: traj.Scroll, Point: pt(1, 1), Direction: traj.DirRight}}},
	{name: "finished/content", in: "finished(content='The file is saved.')",
		want: []traj.Action{{Type: traj.Finished, Text: "The file is saved."}}},

	// Strings.
	{name: "type/double quotes", in: `type(content="say 'hi'")`,
		want: []traj.Action{{Type: traj.TypeText, Text: "say 'hi'"}}},
	{name: "type/escapes", in: `type(content='a\'b\"c\\d\ne\tf\rg\qh')`,
		want: []traj.Action{{Type: traj.TypeText, Text: "a'b\"c\\d\ne\tf\rg\\qh"}}},
	{name: "type/literal newlines", in: "type(content='line 1\n\nline 3\n')",
		want: []traj.Action{{Type: traj.TypeText, Text: "line 1\n\nline 3\n"}}},
	{name: "type/python and json escapes", in: `type(content='\x41\u00e9\/\ud83d\ude00\x4')`,
		want: []traj.Action{{Type: traj.TypeText, Text: "Aé/😀\\x4"}}},
	{name: "type/unescaped inner quote", in: "type(content='it's fine')",
		want: []traj.Action{{Type: traj.TypeText, Text: "it's fine"}}},
	{name: "type/empty", in: "type(content='')",
		want: []traj.Action{{Type: traj.TypeText}}},
	{name: "type/unicode", in: "type(content='Grüße, 世界 🙂')",
		want: []traj.Action{{Type: traj.TypeText, Text: "Grüße, 世界 🙂"}}},
	{name: "type/parens and commas inside", in: "type(content='f(a, b)', )",
		want: []traj.Action{{Type: traj.TypeText, Text: "f(a, b)"}}},

	// type at a point: keyword arguments in any order.
	{name: "type/text then start_box", in: "type(text='Hello', start_box='(300,400)')",
		want: []traj.Action{{Type: traj.TypeText, Text: "Hello", Point: pt(300, 400)}}},
	{name: "type/start_box then content", in: "type(start_box='(300,400)', content='Hello')",
		want: []traj.Action{{Type: traj.TypeText, Text: "Hello", Point: pt(300, 400)}}},
	{name: "type/point alias and double quotes", in: `type(point='<point>300 400</point>', text="Hello")`,
		want: []traj.Action{{Type: traj.TypeText, Text: "Hello", Point: pt(300, 400)}}},
	{name: "type/box tokens, empty text", in: "type(content='', start_box='<|box_start|>(300,400)<|box_end|>')",
		want: []traj.Action{{Type: traj.TypeText, Point: pt(300, 400)}}},
	{name: "type/unquoted box", in: "type(start_box=(1,2), content='a\n')",
		want: []traj.Action{{Type: traj.TypeText, Text: "a\n", Point: pt(1, 2)}}},
	{name: "type/unescaped quote before start_box", in: "type(content='it's', start_box='(1,2)')",
		want: []traj.Action{{Type: traj.TypeText, Text: "it's", Point: pt(1, 2)}}},
	{name: "type/typed keyword code, escaped", in: `type(content='print(\'a\', end=\'\')', start_box='(1,2)')`,
		want: []traj.Action{{Type: traj.TypeText, Text: "print('a', end='')", Point: pt(1, 2)}}},
	{name: "type/typed keyword code in other quotes", in: `type(content="print('a', end='')")`,
		want: []traj.Action{{Type: traj.TypeText, Text: "print('a', end='')"}}},
	{name: "type/comparison is not an argument", in: "type(content='if a', b == c')",
		want: []traj.Action{{Type: traj.TypeText, Text: "if a', b == c"}}},
	{name: "type/keyword text without a quote before it", in: "type(content='a, b=c')",
		want: []traj.Action{{Type: traj.TypeText, Text: "a, b=c"}}},
	{name: "err/type unknown argument is not typed", in: "type(content='Hello', button='left')", wantErr: true, errOff: 22,
		errHas: []string{`unknown argument "button" for type (accepted: content, point, start_box, start_point, text)`,
			`the quoted value before it ends at the quote before ", button="`, "escape the quotes"}},
	{name: "err/type unknown unquoted argument", in: "type(content='Hello', clicks = 2)", wantErr: true, errOff: 22,
		errHas: []string{`unknown argument "clicks" for type`}},
	{name: "err/type unknown argument first", in: "type(interval=0.1, content='Hello')", wantErr: true, errOff: 5,
		errHas: []string{`unknown argument "interval" for type (accepted: content, point, start_box, start_point, text)`}},
	{name: "err/type unknown argument after the point", in: "type(start_box='(1,2)', x='y', content='Hello')", wantErr: true, errOff: 24,
		errHas: []string{`unknown argument "x" for type`}},
	{name: "err/typed keyword code is ambiguous", in: "type(content='print('a', end='')')", wantErr: true, errOff: 25,
		errHas: []string{`unknown argument "end" for type`, "escape the quotes"}},
	{name: "err/typed keyword code before start_box", in: "type(content='f(a='x', b='y')', start_box='(1,2)')", wantErr: true, errOff: 23,
		errHas: []string{`unknown argument "b" for type`}},
	{name: "err/type own argument under another name", in: "type(content='a', text='b')", wantErr: true, errOff: 18,
		errHas: []string{`duplicate argument "text" for type`}},
	{name: "err/finished unknown argument", in: "finished(content='done', reason='ok')", wantErr: true, errOff: 25,
		errHas: []string{`unknown argument "reason" for finished (accepted: content, text)`}},
	{name: "type/typed argument syntax in other quotes", in: `type(content="a', start_box='(5,6)", start_box='(1,2)')`,
		want: []traj.Action{{Type: traj.TypeText, Text: "a', start_box='(5,6)", Point: pt(1, 2)}}},
	{name: "err/type bad point is not typed", in: "type(content='Hello', start_box='(1,2,3)')", wantErr: true, errOff: 33,
		errHas: []string{"expected 2 numbers (x,y) or 4", "found 3"}},
	{name: "err/type point out of range is not typed", in: "type(start_box='(1,2000)', content='Hello')", wantErr: true, errOff: 19,
		errHas: []string{"y coordinate 2000 outside"}},
	{name: "err/type duplicate point", in: "type(content='a', start_box='(1,2)', point='(3,4)')", wantErr: true, errOff: 37,
		errHas: []string{`duplicate argument "point" for type`}},
	{name: "err/type point only", in: "type(start_box='(1,2)')", wantErr: true, errOff: 22,
		errHas: []string{"type: missing required argument content"}},
	{name: "err/then at the end", in: "click(start_box='(1,2)') then", wantErr: true, errOff: 29,
		errHas: []string{`expected an action after "then"`, "found end of input"}},
	{name: "err/then then", in: "click(start_box='(1,2)') then then wait()", wantErr: true, errOff: 30,
		errHas: []string{`expected an action after "then"`, `found "then wait()"`}},
	{name: "err/then before prose", in: "wait() then I will check", wantErr: true, errOff: 12,
		errHas: []string{`expected an action after "then"`, `found "I will check"`}},
	{name: "err/then first", in: "then wait()", wantErr: true, errOff: 0,
		errHas: []string{`unknown action "then"`}},
	{name: "err/comma between actions", in: "type(content='f(a, b)'), wait()",
		errOff: 23, errHas: []string{`expected an action`, `found ", wait()"`}, wantErr: true},

	// Responses.
	{name: "response/thought and action",
		in:      "Thought: The Save button is at the top.\nI will click it.\nAction: click(start_box='(20,30)')",
		thought: "The Save button is at the top.\nI will click it.",
		want:    []traj.Action{{Type: traj.Click, Point: pt(20, 30)}}},
	{name: "response/reflection and summary",
		in:      "Reflection: The dialog opened.\nAction_Summary: Type the name.\nAction: type(content='report')",
		thought: "Type the name.",
		want:    []traj.Action{{Type: traj.TypeText, Text: "report"}}},
	{name: "response/reflection only",
		in:      "Reflection: The menu is closed.\nAction: wait()",
		thought: "The menu is closed.",
		want:    []traj.Action{{Type: traj.Wait}}},
	{name: "response/unlabelled preamble",
		in:      "I should wait for the app.\nAction: wait()",
		thought: "I should wait for the app.",
		want:    []traj.Action{{Type: traj.Wait}}},
	{name: "response/multi action",
		in:      "Thought: Select all and copy.\nAction: hotkey(key='ctrl a')\n\nhotkey(key='ctrl c')\n\nclick(start_box='(1,2)')",
		thought: "Select all and copy.",
		want: []traj.Action{
			{Type: traj.Hotkey, Keys: []string{"ctrl", "a"}},
			{Type: traj.Hotkey, Keys: []string{"ctrl", "c"}},
			{Type: traj.Click, Point: pt(1, 2)},
		}},
	{name: "response/repeated action label",
		in:   "Action: wait()\nAction: finished()",
		want: []traj.Action{{Type: traj.Wait}, {Type: traj.Finished}}},
	{name: "response/answer multi word",
		in:      "Thought: The period is shown.\nAction: ANS 16.1 hours, roughly  ",
		thought: "The period is shown.",
		want:    []traj.Action{{Type: traj.Answer, Text: "16.1 hours, roughly"}}},
	{name: "response/fenced answer",
		in:      "Thought: Found it.\nAction:\n```\nANS 1966-047A\n```",
		thought: "Found it.",
		want:    []traj.Action{{Type: traj.Answer, Text: "1966-047A"}}},
	{name: "response/fenced text answer",
		in:   "```text\nANS Sirius A\n```\n",
		want: []traj.Action{{Type: traj.Answer, Text: "Sirius A"}}},
	{name: "response/inline fenced answer",
		in:   "```ANS 42```",
		want: []traj.Action{{Type: traj.Answer, Text: "42"}}},
	{name: "response/fenced action",
		in:   "```python\nclick(start_box='(1,2)')\n```",
		want: []traj.Action{{Type: traj.Click, Point: pt(1, 2)}}},
	{name: "response/unclosed fence",
		in:   "```\nANS 7",
		want: []traj.Action{{Type: traj.Answer, Text: "7"}}},
	{name: "response/answer then action",
		in:   "ANS: yes\nfinished()",
		want: []traj.Action{{Type: traj.Answer, Text: "yes"}, {Type: traj.Finished}}},

	// Errors.
	{name: "err/empty", in: "", wantErr: true, errOff: 0, errHas: []string{"empty input"}},
	{name: "err/blank", in: " \n\t", wantErr: true, errOff: 0, errHas: []string{"empty input"}},
	{name: "err/missing close paren", in: "click(start_box='(1,2)' x", wantErr: true, errOff: 24,
		errHas: []string{`expected ',' or ')' after argument "start_box", found "x"`}},
	{name: "err/end of input in args", in: "click(start_box='(1,2)'", wantErr: true, errOff: 23,
		errHas: []string{"found end of input"}},
	{name: "err/unknown action", in: "tap(start_box='(1,2)')", wantErr: true, errOff: 0,
		errHas: []string{`unknown action "tap"`, "click", "left_double", "call_user", "ANS <answer>"}},
	{name: "err/missing argument", in: "click()", wantErr: true, errOff: 6,
		errHas: []string{"missing required argument start_box"}},
	{name: "err/missing end", in: "drag(start_box='(1,2)')", wantErr: true, errOff: 22,
		errHas: []string{"missing required argument end_box"}},
	{name: "err/missing direction", in: "scroll(start_box='(1,2)')", wantErr: true, errOff: 24,
		errHas: []string{"missing required argument direction"}},
	{name: "err/out of grid", in: "click(start_box='(1200,5)')", wantErr: true, errOff: 18,
		errHas: []string{"x coordinate 1200 outside [0, 1000] of the coordinate space grid1000"}},
	{name: "err/negative", in: "click(start_box='(5, -1)')", wantErr: true, errOff: 21,
		errHas: []string{"y coordinate -1 outside [0, 1000]"}},
	{name: "err/out of grid box", in: "click(start_box='(1,2,3,1000.5)')", wantErr: true, errOff: 24,
		errHas: []string{"y2 coordinate 1000.5 outside [0, 1000]"}},
	{name: "err/three numbers", in: "click(start_box='(1,2,3)')", wantErr: true, errOff: 17,
		errHas: []string{"expected 2 numbers (x,y) or 4", "found 3"}},
	{name: "err/not a number", in: "click(start_box='(1,abc)')", wantErr: true, errOff: 20,
		errHas: []string{"expected a number", `found "abc"`}},
	{name: "err/unbalanced", in: "click(start_box='(1,2')", wantErr: true, errOff: 21,
		errHas: []string{`expected ")" to close "("`}},
	{name: "err/unterminated string", in: "type(content='abc", wantErr: true, errOff: 13,
		errHas: []string{"unterminated string"}},
	{name: "err/bad direction", in: "scroll(direction='sideways')", wantErr: true, errOff: 18,
		errHas: []string{`invalid scroll direction "sideways"`}},
	{name: "err/unknown argument", in: "click(start_box='(1,2)', button='left')", wantErr: true, errOff: 25,
		errHas: []string{`unknown argument "button" for click`, "start_box", "point"}},
	{name: "err/argument of wait", in: "wait(start_box='(1,2)')", wantErr: true, errOff: 5,
		errHas: []string{"accepted: none"}},
	{name: "err/duplicate argument", in: "click(start_box='(1,2)', point='(3,4)')", wantErr: true, errOff: 25,
		errHas: []string{`duplicate argument "point"`}},
	{name: "err/empty answer", in: "ANS\nwait()", wantErr: true, errOff: 0,
		errHas: []string{"expected answer text"}},
	{name: "err/prose", in: "I will click the button.", wantErr: true, errOff: 0,
		errHas: []string{`unknown action "I"`}},
	{name: "err/missing paren", in: "wait", wantErr: true, errOff: 4,
		errHas: []string{`expected '(' after "wait", found end of input`}},
	{name: "err/empty keys", in: "hotkey(key=' + ')", wantErr: false,
		want: []traj.Action{{Type: traj.Hotkey, Keys: []string{"+"}}}},
	{name: "err/no keys", in: "hotkey(key='  ')", wantErr: true, errOff: 12,
		errHas: []string{"empty key list"}},
	{name: "err/thought only", in: "Thought: I am not sure what to do.", wantErr: true, errOff: 34,
		thought: "I am not sure what to do.", errHas: []string{`expected an "Action:" line`}},
	{name: "err/empty action part", in: "Thought: x\nAction:  \n", wantErr: true, errOff: 21,
		thought: "x", errHas: []string{"expected an action", "found end of input"}},
	{name: "err/missing value", in: "click(start_box=)", wantErr: true, errOff: 16,
		errHas: []string{"expected an argument value"}},
	{name: "err/symbol", in: "!", wantErr: true, errOff: 0,
		errHas: []string{"expected an action", `found "!"`}},
}

func TestParse(t *testing.T) {
	for _, c := range parseCases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse(c.in, DefaultOptions())
			if got.Raw != c.in {
				t.Errorf("Raw = %q, want the input", got.Raw)
			}
			if got.Thought != c.thought {
				t.Errorf("Thought = %q, want %q", got.Thought, c.thought)
			}
			if c.wantErr {
				var se *SyntaxError
				if !errors.As(err, &se) {
					t.Fatalf("err = %v (%T), want *SyntaxError", err, err)
				}
				if se.Offset != c.errOff {
					t.Errorf("offset = %d, want %d (%v)", se.Offset, c.errOff, err)
				}
				if se.Input != c.in {
					t.Errorf("Input = %q, want the input", se.Input)
				}
				if !strings.HasPrefix(err.Error(), "uitars: offset ") {
					t.Errorf("message %q lacks the offset prefix", err)
				}
				for _, h := range c.errHas {
					if !strings.Contains(err.Error(), h) {
						t.Errorf("message %q does not contain %q", err, h)
					}
				}
				if got.Actions != nil {
					t.Errorf("Actions = %v on error, want nil", got.Actions)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got.Actions, c.want) {
				t.Errorf("Actions =\n%s\nwant\n%s", dump(got.Actions), dump(c.want))
			}
		})
	}
}

// TestParseNotes covers responses Parse accepts beyond the plain grammar
// and what it records about them.
func TestParseNotes(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		thought string
		want    []traj.Action
		joined  int
		dropped int
		notes   []string
	}{
		{name: "then", in: "click(start_box='(1,2)') then wait()",
			want:   []traj.Action{{Type: traj.Click, Point: pt(1, 2)}, {Type: traj.Wait}},
			joined: 1, notes: []string{`"then" joined 1 of the 2 actions to the action before it; all are kept, in order`}},
		{name: "then across lines, any case", in: "Action: hotkey(key='ctrl a')\nThen hotkey(key='ctrl c') THEN\tANS done",
			want:   []traj.Action{{Type: traj.Hotkey, Keys: []string{"ctrl", "a"}}, {Type: traj.Hotkey, Keys: []string{"ctrl", "c"}}, {Type: traj.Answer, Text: "done"}},
			joined: 2, notes: []string{`"then" joined 2 of the 3 actions to the action before it; all are kept, in order`}},
		{name: "then with blank-line actions", in: "wait()\n\nclick(start_box='(1,2)') then wait()",
			want:   []traj.Action{{Type: traj.Wait}, {Type: traj.Click, Point: pt(1, 2)}, {Type: traj.Wait}},
			joined: 1, notes: []string{`"then" joined 1 of the 3 actions to the action before it; all are kept, in order`}},
		{name: "then after typed text", in: "type(content='a') then type(content='b')",
			want:   []traj.Action{{Type: traj.TypeText, Text: "a"}, {Type: traj.TypeText, Text: "b"}},
			joined: 1, notes: []string{`"then" joined 1 of the 2 actions to the action before it; all are kept, in order`}},
		{name: "then after unescaped quote", in: "type(content='it's') then wait()",
			want:   []traj.Action{{Type: traj.TypeText, Text: "it's"}, {Type: traj.Wait}},
			joined: 1, notes: []string{`"then" joined 1 of the 2 actions to the action before it; all are kept, in order`}},
		{name: "then inside typed text", in: "type(content='click(x) then wait()')",
			want: []traj.Action{{Type: traj.TypeText, Text: "click(x) then wait()"}}},
		{name: "two blocks", in: "Action: click(start_box='(1,2)')\nThought: now wait\nAction: wait()",
			want:    []traj.Action{{Type: traj.Click, Point: pt(1, 2)}},
			dropped: 1, notes: []string{"the response holds 2 Thought/Action blocks; block 1 is used and the block after it dropped"}},
		{name: "three blocks", in: "Thought: a\nAction: wait()\n\nThought: b\nAction: wait()\nReflection: c\nAction_Summary: d\nAction: finished()",
			thought: "a", want: []traj.Action{{Type: traj.Wait}},
			dropped: 2, notes: []string{"the response holds 3 Thought/Action blocks; block 1 is used and the 2 blocks after it dropped"}},
		{name: "trailing thought without action", in: "Thought: a\nAction: wait()\nThought: and then",
			thought: "a", want: []traj.Action{{Type: traj.Wait}},
			dropped: 1, notes: []string{"the response holds 2 Thought/Action blocks; block 1 is used and the block after it dropped"}},
		{name: "broken first block", in: "Thought: a\nAction: clik()\nThought: b\nAction: wait()",
			thought: "b", want: []traj.Action{{Type: traj.Wait}},
			dropped: 1, notes: []string{"the response holds 2 Thought/Action blocks; block 2 is used (block 1 did not parse)"}},
		{name: "broken first blocks", in: "Thought: a\nAction: clik()\nThought: b\nAction: tap()\nThought: c\nAction: wait()\nThought: d\nAction: wait()",
			thought: "c", want: []traj.Action{{Type: traj.Wait}},
			dropped: 3, notes: []string{"the response holds 4 Thought/Action blocks; block 3 is used (blocks 1-2 did not parse) and the block after it dropped"}},
		{name: "bare action then a block", in: "click(start_box='(1,2)')\nThought: b\nAction: wait()",
			want:    []traj.Action{{Type: traj.Click, Point: pt(1, 2)}},
			dropped: 1, notes: []string{"the response holds 2 Thought/Action blocks; block 1 is used and the block after it dropped"}},
		{name: "fenced bare action then a block", in: "```\nclick(start_box='(1,2)')\n```\nThought: b\nAction: wait()",
			want:    []traj.Action{{Type: traj.Click, Point: pt(1, 2)}},
			dropped: 1, notes: []string{"the response holds 2 Thought/Action blocks; block 1 is used and the block after it dropped"}},
		{name: "prose before a block is its thought", in: "I should wait.\nThought: hmm\nAction: wait()",
			thought: "hmm", want: []traj.Action{{Type: traj.Wait}}},
		{name: "labelled line in bare typed text", in: "type(content='a\nThought: b')",
			want: []traj.Action{{Type: traj.TypeText, Text: "a\nThought: b"}}},
		{name: "labelled lines in typed text are one block", in: "Thought: t\nAction: type(content='x\nThought: y\nAction: z')",
			thought: "t", want: []traj.Action{{Type: traj.TypeText, Text: "x\nThought: y\nAction: z"}}},
		{name: "then and blocks", in: "Thought: a\nAction: click(start_box='(1,2)') then wait()\nThought: b\nAction: finished()",
			thought: "a", want: []traj.Action{{Type: traj.Click, Point: pt(1, 2)}, {Type: traj.Wait}},
			joined: 1, dropped: 1, notes: []string{
				`"then" joined 1 of the 2 actions to the action before it; all are kept, in order`,
				"the response holds 2 Thought/Action blocks; block 1 is used and the block after it dropped"}},
		{name: "plain", in: "Thought: a\nAction: wait()\n\nfinished()", thought: "a",
			want: []traj.Action{{Type: traj.Wait}, {Type: traj.Finished}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse(c.in, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if got.Thought != c.thought {
				t.Errorf("Thought = %q, want %q", got.Thought, c.thought)
			}
			if !reflect.DeepEqual(got.Actions, c.want) {
				t.Errorf("Actions =\n%s\nwant\n%s", dump(got.Actions), dump(c.want))
			}
			if got.Joined != c.joined || got.DroppedBlocks != c.dropped {
				t.Errorf("Joined, DroppedBlocks = %d, %d; want %d, %d", got.Joined, got.DroppedBlocks, c.joined, c.dropped)
			}
			if !reflect.DeepEqual(got.Notes, c.notes) {
				t.Errorf("Notes = %q, want %q", got.Notes, c.notes)
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	_, err := Parse("click(start_box='(1,2)' x", Options{})
	want := `uitars: offset 24: expected ',' or ')' after argument "start_box", found "x"`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
}

func TestParseOptionsErrors(t *testing.T) {
	for _, opt := range []Options{
		{Coords: traj.Coords{Space: "pixels"}},
		{Coords: traj.Coords{Space: traj.PixelsScreen}},                               // no image size
		{Coords: traj.Coords{Space: traj.PixelsResized}, Image: Screen{W: 0, H: 800}}, // no image size
		{Coords: traj.Coords{Space: traj.PixelsResized, Factor: 28, MinPixels: 9, MaxPixels: 8}, Image: DefaultScreen},
		{Coords: traj.Coords{Space: traj.Grid1000, Factor: 28}},
		{Coords: Resized(), Image: Screen{W: 10000, H: 10}}, // aspect ratio above 200
	} {
		_, err := Parse("wait()", opt)
		var se *SyntaxError
		if err == nil || errors.As(err, &se) {
			t.Errorf("%+v: err = %v, want a plain options error", opt, err)
		}
	}
}

func dump(as []traj.Action) string {
	var b strings.Builder
	for _, a := range as {
		fmt.Fprintf(&b, "%+v", a)
		for _, p := range []*traj.Point{a.Point, a.Start, a.End} {
			if p != nil {
				fmt.Fprintf(&b, " %+v", *p)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}
