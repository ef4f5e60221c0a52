package pystr

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// decode is the value of a literal's body made of escapes and other text.
func decode(body string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' || i+1 == len(body) {
			b.WriteByte(body[i])
			continue
		}
		n, err := Escape(&b, rune(body[i+1]), body[i+2:])
		if err != nil {
			return "", err
		}
		i += 1 + n
	}
	return b.String(), nil
}

// The escapes Go and Python share mean the same in both.
func TestEscapeAsGo(t *testing.T) {
	for _, esc := range strings.Fields(`\a \b \f \n \r \t \v \\ \" \x41 \x7f \u00e9 \uFFFD \U0001F600 \101 \000`) {
		want, err := strconv.Unquote(`"` + esc + `"`)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := decode(esc + "1"); err != nil || got != want+"1" {
			t.Errorf("%s: got %q, %v; want %q", esc, got, err, want+"1")
		}
	}
}

// Python's own escapes: short octal, line continuations, unknown escapes
// kept as written.
func TestEscapePython(t *testing.T) {
	for body, want := range map[string]string{
		`\0`:       "\x00",
		`\7x`:      "\ax",
		`\18`:      "\x018",
		`\1018`:    "A8",
		`\377`:     "\u00ff", // a code point; Go's \377 is a byte
		`\'`:       "'",
		"a\\\nb":   "ab",
		"a\\\r\nb": "ab",
		"a\\\rb":   "ab",
		`\q\8\9`:   `\q\8\9`,
		`\`:        `\`,
	} {
		if got, err := decode(body); err != nil || got != want {
			t.Errorf("%q: got %q, %v; want %q", body, got, err, want)
		}
	}
}

func TestEscapeErrors(t *testing.T) {
	for body, want := range map[string]error{
		`\x4`:         &EscapeError{Kind: Truncated, Letter: 'x', Digits: "4"},
		`\u12zz`:      &EscapeError{Kind: Invalid, Letter: 'u', Digits: "12zz"},
		`\U00110000`:  &EscapeError{Kind: Range, Letter: 'U', Digits: "00110000"},
		`\ud800`:      &EscapeError{Kind: Surrogate, Letter: 'u', Digits: "d800"},
		`\N{EM DASH}`: &EscapeError{Kind: Named, Letter: 'N'},
	} {
		_, err := decode(body)
		var got *EscapeError
		if !errors.As(err, &got) || *got != *want.(*EscapeError) || err.Error() != want.Error() {
			t.Errorf("%s: err %#v, want %#v", body, err, want)
		}
	}
	if got := (&EscapeError{Kind: Invalid, Letter: 'x', Digits: "ZZ"}).Error(); got != `invalid \x escape "ZZ"` {
		t.Errorf("message %q", got)
	}
}

// Quote writes what Python's repr() writes for these strings (with ascii,
// non-ASCII as \u or \U escapes), and Escape reads each literal back.
func TestQuote(t *testing.T) {
	for _, c := range []struct {
		s     string
		q     byte
		ascii bool
		want  string
	}{
		{"", '\'', false, `''`},
		{`it's "x"`, '\'', false, `'it\'s "x"'`},
		{`it's`, '"', false, `"it's"`},
		{"a\\b\n\r\t\x00\x1b\x7f", '\'', false, `'a\\b\n\r\t\x00\x1b\x7f'`},
		{"é日😀", '\'', false, "'é日😀'"},
		{"é日😀", '\'', true, `'\u00e9\u65e5\U0001f600'`},
		{"a\xffb", '\'', false, "'a\ufffdb'"},
		{"a\xffb", '"', true, `"a\ufffdb"`},
	} {
		got := Quote(c.s, c.q, c.ascii)
		if got != c.want {
			t.Errorf("Quote(%q, %c, %v) = %s, want %s", c.s, c.q, c.ascii, got, c.want)
		}
		back, err := decode(got[1 : len(got)-1])
		if want := strings.ToValidUTF8(c.s, "\ufffd"); err != nil || back != want {
			t.Errorf("%s decodes to %q, %v; want %q", got, back, err, want)
		}
	}
}

// TestLenient: Python's escapes, JSON's \/ and surrogate pairs, and what
// does not decode kept as written.
func TestLenient(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`a\nb\tc`, "a\nb\tc"},
		{`\'\"\\`, `'"\`},
		{`\x41\u00e9\U0001F600`, "Aé😀"},
		{`\/path`, "/path"},
		{`\ud83d\ude00!`, "😀!"},
		{`\ud83d!`, `\ud83d!`},           // a lone surrogate
		{`\ude00\ud83d`, `\ude00\ud83d`}, // low before high
		{`\x4`, `\x4`},                   // truncated
		{`\xZZ`, `\xZZ`},                 // not hexadecimal
		{`\q`, `\q`},                     // unknown: kept, as Python keeps it
		{`\N{DASH}`, `\N{DASH}`},
		{`\101`, "A"},
	} {
		var b strings.Builder
		for i := 0; i < len(c.in); {
			if c.in[i] != '\\' || i+1 >= len(c.in) {
				b.WriteByte(c.in[i])
				i++
				continue
			}
			e, size := utf8.DecodeRuneInString(c.in[i+1:])
			i += 1 + size
			i += Lenient(&b, e, c.in[i:])
		}
		if b.String() != c.want {
			t.Errorf("Lenient(%s) = %q, want %q", c.in, b.String(), c.want)
		}
	}
}

// TestQuoteJSON compares with what Python 3's json.dumps(s) prints for the
// same strings (ensure_ascii, its default).
func TestQuoteJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `""`},
		{"plain text", `"plain text"`},
		{"a\"b\\c'd", `"a\"b\\c'd"`},
		{"\n\r\t\b\f", `"\n\r\t\b\f"`},
		{"\x00\x01\x1f\x7f", `"\u0000\u0001\u001f\u007f"`},
		{"é€", `"\u00e9\u20ac"`},
		{"😀", `"\ud83d\ude00"`},
		{"\U0010ffff", `"\udbff\udfff"`},
		{"a\xffb", `"a\ufffdb"`}, // an invalid byte: U+FFFD, as Python decodes it with errors="replace"
	} {
		var b strings.Builder
		QuoteJSON(&b, tc.in)
		if b.String() != tc.want {
			t.Errorf("QuoteJSON(%q) = %s, want %s", tc.in, b.String(), tc.want)
		}
	}
}
