package pystr

import (
	"errors"
	"strings"
	"testing"
)

func TestEscape(t *testing.T) {
	cases := []struct {
		e          rune
		rest, want string
		took       int
	}{
		{'n', "x", "\n", 0},
		{'\\', "", `\`, 0},
		{'"', "", `"`, 0},
		{'v', "", "\v", 0},
		{'\n', "a", "", 0},
		{'\r', "\na", "", 1},
		{'\r', "a", "", 0},
		{'1', "018", "A", 2},
		{'0', "", "\x00", 0},
		{'7', "7", "?", 1},
		{'x', "41z", "A", 2},
		{'u', "00e9", "é", 4},
		{'U', "0001F600", "😀", 8},
		{'q', "", `\q`, 0},
		{'8', "", `\8`, 0},
	}
	for _, c := range cases {
		var b strings.Builder
		n, err := Escape(&b, c.e, c.rest)
		if err != nil || b.String() != c.want || n != c.took {
			t.Errorf("Escape(%q, %q) = %q, %d, %v; want %q, %d", c.e, c.rest, b.String(), n, err, c.want, c.took)
		}
	}
}

func TestEscapeErrors(t *testing.T) {
	cases := []struct {
		e    rune
		rest string
		kind Kind
		msg  string
	}{
		{'x', "4", Truncated, `truncated \x escape`},
		{'u', "12zz", Invalid, `invalid \u escape "12zz"`},
		{'U', "00110000", Range, `\U escape "00110000" is not a valid code point`},
		{'u', "d800", Surrogate, `\u escape "d800" is a surrogate`},
		{'N', "{DASH}", Named, `\N{...} escapes are not supported`},
	}
	for _, c := range cases {
		var b strings.Builder
		_, err := Escape(&b, c.e, c.rest)
		var ee *EscapeError
		if !errors.As(err, &ee) || ee.Kind != c.kind || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Escape(%q, %q) err = %v, want kind %d containing %q", c.e, c.rest, err, c.kind, c.msg)
		}
	}
}
