package ground

import (
	"reflect"
	"testing"

	"github.com/codapipe/codapipe/pkg/uitars"
)

// TestGroundNotes checks what a candidate records about the parse of its
// executor output: the parser's notes, and a note when actions beyond the
// first are not executed.
func TestGroundNotes(t *testing.T) {
	cases := []struct {
		name string
		out  string
		want []string
	}{
		{name: "one action", out: "Thought: t\nAction: click(start_box='(1,2)')"},
		{name: "then", out: "click(start_box='(1,2)') then type(content='a')", want: []string{
			`"then" joined 1 of the 2 actions to the action before it; all are kept, in order`,
			"the executor output holds 2 actions (click, type); only the first is executed, one action per step"}},
		{name: "blank-line actions", out: "hotkey(key='ctrl a')\n\nhotkey(key='ctrl c')\n\nwait()", want: []string{
			"the executor output holds 3 actions (hotkey, hotkey, wait); only the first is executed, one action per step"}},
		{name: "second block", out: "Action: click(start_box='(1,2)')\nThought: now wait\nAction: wait()", want: []string{
			"the response holds 2 Thought/Action blocks; block 1 is used and the block after it dropped"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ex, err := uitars.Parse(c.out, uitars.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if got := notes(ex); !reflect.DeepEqual(got, c.want) {
				t.Errorf("notes = %q, want %q", got, c.want)
			}
		})
	}
}
