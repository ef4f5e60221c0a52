// Package pystr decodes the backslash escapes of Python str literals. It is
// the one decoder of the task files' lambdas (internal/contract/scienceboard/pylambda),
// the simulator's pyautogui interpreter (internal/sim/desktop), the tests
// of pkg/uitars's pyautogui rendering and, with JSON's escapes too
// (Lenient), of the strings in models' answers: the UI-TARS actions
// (pkg/uitars) and the judges' verdicts (internal/stage/judge); each of them
// finds where its literals begin and end, this package says what an
// escape inside one means. Quote
// writes such literals: pkg/uitars's pyautogui code and the simulated guest
// server's repr() (internal/sim/guest).
package pystr

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Kind says what is wrong with an escape.
type Kind int

// The kinds of EscapeError.
const (
	Truncated Kind = iota // fewer characters left than the escape's hex digits
	Invalid               // the digits of \x, \u or \U are not hexadecimal
	Range                 // the code point is above U+10FFFF
	Surrogate             // the code point is a UTF-16 surrogate, which has no UTF-8 form
	Named                 // \N{...}: the Unicode name database is not included
)

// EscapeError reports an escape that Escape does not decode.
type EscapeError struct {
	Kind   Kind
	Letter rune   // the letter after the backslash: x, u, U or N
	Digits string // the digits the escape reads (possibly fewer than it needs)
}

func (e *EscapeError) Error() string {
	switch e.Kind {
	case Truncated:
		return fmt.Sprintf("truncated \\%c escape", e.Letter)
	case Invalid:
		return fmt.Sprintf("invalid \\%c escape %q", e.Letter, e.Digits)
	case Range:
		return fmt.Sprintf("\\%c escape %q is not a valid code point", e.Letter, e.Digits)
	case Surrogate:
		return fmt.Sprintf("\\%c escape %q is a surrogate, which has no UTF-8 form", e.Letter, e.Digits)
	default:
		return `\N{...} escapes are not supported: the Unicode name database is not included`
	}
}

// hexDigits is the number of hex digits of each hex escape.
var hexDigits = map[rune]int{'x': 2, 'u': 4, 'U': 8}

// simple are the one-letter escapes and what they stand for.
var simple = map[rune]byte{
	'\\': '\\', '\'': '\'', '"': '"',
	'a': '\a', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'v': '\v',
}

// Escape decodes the escape of a non-raw str literal whose letter e follows
// a backslash; rest is the text after e (Escape reads at most its first 8
// bytes). It appends the decoded text to b and returns how many bytes of
// rest the escape also took. A backslash before a line break (\n, \r or
// \r\n) continues the literal and stands for nothing; escapes Python does
// not know are kept as written, backslash included, as Python keeps them.
// Errors are *EscapeError.
func Escape(b *strings.Builder, e rune, rest string) (int, error) {
	if c, ok := simple[e]; ok {
		b.WriteByte(c)
		return 0, nil
	}
	switch {
	case e == '\n':
		return 0, nil
	case e == '\r':
		if strings.HasPrefix(rest, "\n") {
			return 1, nil
		}
		return 0, nil
	case '0' <= e && e <= '7':
		v, n := int(e-'0'), 0
		for ; n < 2 && n < len(rest) && '0' <= rest[n] && rest[n] <= '7'; n++ {
			v = v*8 + int(rest[n]-'0')
		}
		b.WriteRune(rune(v))
		return n, nil
	case e == 'N':
		return 0, &EscapeError{Kind: Named, Letter: e}
	}
	n, ok := hexDigits[e]
	if !ok {
		b.WriteByte('\\')
		b.WriteRune(e)
		return 0, nil
	}
	if n > len(rest) {
		return 0, &EscapeError{Kind: Truncated, Letter: e, Digits: rest}
	}
	digits := rest[:n]
	v, err := strconv.ParseUint(digits, 16, 32)
	switch {
	case err != nil:
		return 0, &EscapeError{Kind: Invalid, Letter: e, Digits: digits}
	case v > utf8.MaxRune:
		return 0, &EscapeError{Kind: Range, Letter: e, Digits: digits}
	case v >= 0xD800 && v < 0xE000:
		return 0, &EscapeError{Kind: Surrogate, Letter: e, Digits: digits}
	}
	b.WriteRune(rune(v))
	return n, nil
}

// Lenient decodes an escape of a string literal that may be Python's or
// JSON's — a model's answer, which writes either: Python's escapes as
// Escape decodes them, and the two of JSON that Python reads otherwise: \/
// is '/', and the \u escape of a UTF-16 high surrogate followed by the \u
// escape of a low one is the pair's character. An escape Escape does not
// decode (a truncated \x, a lone surrogate, \N{...}) is kept as written,
// backslash included, and what follows it is read as text. It returns how
// many bytes of rest the escape also took.
func Lenient(b *strings.Builder, e rune, rest string) int {
	switch {
	case e == '/':
		b.WriteByte('/')
		return 0
	case e == 'u' && len(rest) >= 10 && rest[4] == '\\' && rest[5] == 'u':
		hi, err1 := strconv.ParseUint(rest[:4], 16, 16)
		lo, err2 := strconv.ParseUint(rest[6:10], 16, 16)
		if err1 == nil && err2 == nil && 0xD800 <= hi && hi < 0xDC00 && 0xDC00 <= lo && lo < 0xE000 {
			b.WriteRune(utf16.DecodeRune(rune(hi), rune(lo)))
			return 10
		}
	}
	var one strings.Builder
	n, err := Escape(&one, e, rest)
	if err != nil {
		b.WriteByte('\\')
		b.WriteRune(e)
		return 0
	}
	b.WriteString(one.String())
	return n
}

// Quote returns s as a Python str literal between quotes q (' or "), the
// inverse of Escape: \\, q, \n, \r and \t escaped, the other ASCII control
// characters and DEL as \xHH. With ascii, each non-ASCII character is
// written as \uXXXX or \UXXXXXXXX, so that the literal is pure ASCII;
// without it, every non-ASCII character as itself (where Python's repr()
// would still escape the non-printable ones).
// Each byte that is not valid UTF-8 stands for U+FFFD.
func Quote(s string, q byte, ascii bool) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	quote(&b, s, q, ascii, false)
	return b.String()
}

// QuoteJSON writes s to b as Python's json.dumps(s) writes a str by default
// (ensure_ascii): between double quotes, with \", \\, \n, \r, \t, \b and \f
// escaped, the other ASCII control characters, DEL and every non-ASCII
// character as \uXXXX (a surrogate pair above U+FFFF). Each byte that is
// not valid UTF-8 stands for U+FFFD.
func QuoteJSON(b *strings.Builder, s string) {
	quote(b, s, '"', true, true)
}

// quote writes s between quotes q, escaped as a Python literal, or as
// json.dumps does with json.
func quote(b *strings.Builder, s string, q byte, ascii, json bool) {
	b.WriteByte(q)
	for _, r := range s { // an invalid byte ranges as (RuneError, 1)
		switch {
		case r == '\\' || r == rune(q):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case json && r == '\b':
			b.WriteString(`\b`)
		case json && r == '\f':
			b.WriteString(`\f`)
		case (r < 0x20 || r == 0x7f) && json:
			fmt.Fprintf(b, `\u%04x`, r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(b, `\x%02x`, r)
		case r < utf8.RuneSelf || !ascii:
			b.WriteRune(r)
		case r <= 0xffff:
			fmt.Fprintf(b, `\u%04x`, r)
		case json:
			r -= 0x10000
			fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10)&0x3ff, 0xdc00+r&0x3ff)
		default:
			fmt.Fprintf(b, `\U%08x`, r)
		}
	}
	b.WriteByte(q)
}
