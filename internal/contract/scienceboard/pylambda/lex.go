package pylambda

import (
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/codapipe/codapipe/internal/contract/pystr"
)

// tokKind is the kind of a Python token.
type tokKind int

const (
	tEOF    tokKind = iota
	tName           // identifier or keyword
	tInt            // integer literal (value in tok.ival)
	tFloat          // float literal (value in tok.fval)
	tString         // str literal (decoded value in tok.sval)
	tOp             // operator or delimiter (text in tok.text)
)

// token is one Python token. pos is the rune offset of its first character
// in the source.
type token struct {
	kind tokKind
	pos  int
	text string // source text (names, operators); the literal as written otherwise
	ival *big.Int
	fval float64
	sval string
}

// pyKeywords are Python's reserved words (3.11); soft keywords such as
// match, case and _ are identifiers.
var pyKeywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true,
	"assert": true, "async": true, "await": true, "break": true,
	"class": true, "continue": true, "def": true, "del": true, "elif": true,
	"else": true, "except": true, "finally": true, "for": true, "from": true,
	"global": true, "if": true, "import": true, "in": true, "is": true,
	"lambda": true, "nonlocal": true, "not": true, "or": true, "pass": true,
	"raise": true, "return": true, "try": true, "while": true, "with": true,
	"yield": true,
}

// operators, longest first within each leading character.
var pyOperators = []string{
	"**=", "//=", ">>=", "<<=", "...",
	"**", "//", "<<", ">>", "<=", ">=", "==", "!=", "->", ":=",
	"+=", "-=", "*=", "/=", "%=", "@=", "&=", "|=", "^=",
	"+", "-", "*", "/", "%", "@", "&", "|", "^", "~", "<", ">",
	"(", ")", "[", "]", "{", "}", ",", ":", ".", ";", "=",
}

// lexer turns Python source into tokens. It works on runes so that
// positions are character offsets, as Python reports them.
type lexer struct {
	src   []rune
	i     int
	depth int // bracket nesting: newlines inside brackets are white space
}

// lex tokenizes src completely. Errors are *SyntaxError or
// *UnsupportedError with the position of the offending character.
func lex(src string) ([]token, error) {
	lx := &lexer{src: []rune(src)}
	var toks []token
	for {
		t, err := lx.next()
		if err != nil {
			return nil, err
		}
		toks = append(toks, t)
		if t.kind == tEOF {
			return toks, nil
		}
	}
}

func (lx *lexer) peek(k int) rune {
	if lx.i+k < len(lx.src) {
		return lx.src[lx.i+k]
	}
	return 0
}

func (lx *lexer) syntax(pos int, format string, args ...any) error {
	return &SyntaxError{Offset: pos, Msg: sprintf(format, args...)}
}

// skipSpace skips blanks, comments, line continuations and, inside
// brackets, newlines. A newline outside brackets must end the source (eval
// mode allows trailing blank lines and comments only).
func (lx *lexer) skipSpace() error {
	for lx.i < len(lx.src) {
		c := lx.src[lx.i]
		switch {
		case c == ' ' || c == '\t' || c == '\f':
			lx.i++
		case c == '#':
			for lx.i < len(lx.src) && lx.src[lx.i] != '\n' && lx.src[lx.i] != '\r' {
				lx.i++
			}
		case c == '\\' && (lx.peek(1) == '\n' || lx.peek(1) == '\r'):
			lx.i += 2
			if c := lx.src[lx.i-1]; c == '\r' && lx.peek(0) == '\n' {
				lx.i++
			}
		case c == '\\':
			return lx.syntax(lx.i, "unexpected character after line continuation character")
		case c == '\n' || c == '\r':
			if lx.depth > 0 {
				lx.i++
				continue
			}
			// Outside brackets: only blank lines and comments may follow.
			j := lx.i
			for j < len(lx.src) {
				d := lx.src[j]
				if d == ' ' || d == '\t' || d == '\f' || d == '\n' || d == '\r' {
					j++
					continue
				}
				if d == '#' {
					for j < len(lx.src) && lx.src[j] != '\n' && lx.src[j] != '\r' {
						j++
					}
					continue
				}
				return lx.syntax(j, "invalid syntax: the expression continues on a new line outside brackets")
			}
			lx.i = j
		default:
			return nil
		}
	}
	return nil
}

func isIdentStart(c rune) bool {
	return c == '_' || unicode.IsLetter(c)
}

func isIdentPart(c rune) bool {
	return c == '_' || unicode.IsLetter(c) || unicode.IsDigit(c) || unicode.Is(unicode.Mn, c) || unicode.Is(unicode.Mc, c) || unicode.Is(unicode.Nd, c) || unicode.Is(unicode.Pc, c)
}

func (lx *lexer) next() (token, error) {
	if err := lx.skipSpace(); err != nil {
		return token{}, err
	}
	if lx.i >= len(lx.src) {
		return token{kind: tEOF, pos: lx.i}, nil
	}
	start := lx.i
	c := lx.src[lx.i]
	switch {
	case isIdentStart(c):
		for lx.i < len(lx.src) && isIdentPart(lx.src[lx.i]) {
			lx.i++
		}
		word := string(lx.src[start:lx.i])
		if lx.i < len(lx.src) && (lx.src[lx.i] == '\'' || lx.src[lx.i] == '"') && isStringPrefix(word) {
			return lx.str(start, strings.ToLower(word))
		}
		return token{kind: tName, pos: start, text: word}, nil
	case c >= '0' && c <= '9', c == '.' && lx.peek(1) >= '0' && lx.peek(1) <= '9':
		return lx.number(start)
	case c == '\'' || c == '"':
		return lx.str(start, "")
	}
	for _, op := range pyOperators {
		if lx.hasPrefix(op) {
			lx.i += utf8.RuneCountInString(op)
			switch op {
			case "(", "[", "{":
				lx.depth++
			case ")", "]", "}":
				if lx.depth > 0 {
					lx.depth--
				}
			}
			return token{kind: tOp, pos: start, text: op}, nil
		}
	}
	if c == '!' {
		return token{}, lx.syntax(start, "invalid syntax: '!' is only valid in '!='")
	}
	return token{}, lx.syntax(start, "invalid character %q in source", c)
}

func (lx *lexer) hasPrefix(op string) bool {
	j := lx.i
	for _, r := range op {
		if j >= len(lx.src) || lx.src[j] != r {
			return false
		}
		j++
	}
	return true
}

func isStringPrefix(w string) bool {
	switch strings.ToLower(w) {
	case "r", "u", "b", "br", "rb", "f", "fr", "rf":
		return true
	}
	return false
}

// number scans an integer or float literal (Python syntax: underscores
// between digits, 0x/0o/0b prefixes, no leading zeros on non-zero decimal
// integers). Imaginary literals are unsupported.
func (lx *lexer) number(start int) (token, error) {
	digits := func(ok func(rune) bool) (bool, error) {
		any := false
		for lx.i < len(lx.src) {
			c := lx.src[lx.i]
			if c == '_' {
				if !any || lx.i+1 >= len(lx.src) || !ok(lx.src[lx.i+1]) {
					return any, lx.syntax(lx.i, "invalid decimal literal")
				}
				lx.i++
				continue
			}
			if !ok(c) {
				break
			}
			any = true
			lx.i++
		}
		return any, nil
	}
	dec := func(c rune) bool { return c >= '0' && c <= '9' }
	finish := func(kind tokKind) (token, error) {
		if lx.i < len(lx.src) && (lx.src[lx.i] == 'j' || lx.src[lx.i] == 'J') {
			lx.i++
			return token{}, &UnsupportedError{Offset: start, Construct: "imaginary literal " + string(lx.src[start:lx.i]), Reason: "complex numbers have no JSON form"}
		}
		if lx.i < len(lx.src) && isIdentPart(lx.src[lx.i]) {
			return token{}, lx.syntax(lx.i, "invalid decimal literal")
		}
		text := string(lx.src[start:lx.i])
		clean := strings.ReplaceAll(text, "_", "")
		t := token{kind: kind, pos: start, text: text}
		if kind == tInt {
			v, ok := new(big.Int).SetString(clean, 0)
			if !ok {
				return token{}, lx.syntax(start, "invalid integer literal %q", text)
			}
			t.ival = v
			return t, nil
		}
		f, err := strconv.ParseFloat(clean, 64)
		if err != nil && !isRangeErr(err) {
			return token{}, lx.syntax(start, "invalid float literal %q", text)
		}
		t.fval = f // out of range: ±Inf, as Python gives
		return t, nil
	}
	if lx.src[lx.i] == '0' && lx.i+1 < len(lx.src) {
		var ok func(rune) bool
		switch lx.src[lx.i+1] {
		case 'x', 'X':
			ok = func(c rune) bool { return dec(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') }
		case 'o', 'O':
			ok = func(c rune) bool { return c >= '0' && c <= '7' }
		case 'b', 'B':
			ok = func(c rune) bool { return c == '0' || c == '1' }
		}
		if ok != nil {
			lx.i += 2
			if lx.i < len(lx.src) && lx.src[lx.i] == '_' {
				lx.i++ // 0x_1 is valid
			}
			any, err := digits(ok)
			if err != nil {
				return token{}, err
			}
			if !any {
				return token{}, lx.syntax(start, "invalid number literal")
			}
			return finish(tInt)
		}
	}
	kind := tInt
	if _, err := digits(dec); err != nil {
		return token{}, err
	}
	if lx.i < len(lx.src) && lx.src[lx.i] == '.' {
		kind = tFloat
		lx.i++
		if lx.i < len(lx.src) && lx.src[lx.i] == '_' {
			return token{}, lx.syntax(lx.i, "invalid decimal literal")
		}
		if _, err := digits(dec); err != nil {
			return token{}, err
		}
	}
	if lx.i < len(lx.src) && (lx.src[lx.i] == 'e' || lx.src[lx.i] == 'E') {
		save := lx.i
		lx.i++
		if lx.i < len(lx.src) && (lx.src[lx.i] == '+' || lx.src[lx.i] == '-') {
			lx.i++
		}
		any, err := digits(dec)
		if err != nil {
			return token{}, err
		}
		if !any {
			lx.i = save
			return token{}, lx.syntax(start, "invalid decimal literal")
		}
		kind = tFloat
	}
	if kind == tInt {
		text := strings.ReplaceAll(string(lx.src[start:lx.i]), "_", "")
		if len(text) > 1 && text[0] == '0' && strings.Trim(text, "0") != "" {
			if lx.i < len(lx.src) && (lx.src[lx.i] == 'j' || lx.src[lx.i] == 'J') {
				return finish(kind)
			}
			return token{}, lx.syntax(start, "leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers")
		}
	}
	return finish(kind)
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// str scans a string literal whose prefix (lower-cased, possibly empty)
// has been read; lx.i is at the opening quote. The token carries the
// decoded value. Bytes and f-strings are unsupported.
func (lx *lexer) str(start int, prefix string) (token, error) {
	raw := strings.Contains(prefix, "r")
	q := lx.src[lx.i]
	triple := lx.peek(1) == q && lx.peek(2) == q
	if triple {
		lx.i += 3
	} else {
		lx.i++
	}
	var b strings.Builder
	for {
		if lx.i >= len(lx.src) {
			if triple {
				return token{}, lx.syntax(start, "unterminated triple-quoted string literal")
			}
			return token{}, lx.syntax(start, "unterminated string literal")
		}
		c := lx.src[lx.i]
		if c == q {
			if !triple {
				lx.i++
				break
			}
			if lx.peek(1) == q && lx.peek(2) == q {
				lx.i += 3
				break
			}
		}
		if (c == '\n' || c == '\r') && !triple {
			return token{}, lx.syntax(start, "unterminated string literal")
		}
		if c != '\\' {
			b.WriteRune(c)
			lx.i++
			continue
		}
		// Backslash.
		if lx.i+1 >= len(lx.src) {
			lx.i++
			continue // reported as unterminated at the loop head
		}
		e := lx.src[lx.i+1]
		if raw {
			// A raw string keeps the backslash; it only stops the quote or
			// newline after it from ending the literal.
			b.WriteRune('\\')
			b.WriteRune(e)
			lx.i += 2
			continue
		}
		lx.i += 2
		if strings.Contains(prefix, "b") && (e == 'u' || e == 'U') {
			// Not escapes in bytes; the literal is refused below anyway.
			b.WriteRune('\\')
			b.WriteRune(e)
			continue
		}
		n, err := pystr.Escape(&b, e, string(lx.src[lx.i:min(lx.i+8, len(lx.src))]))
		if err != nil {
			return token{}, lx.escapeErr(lx.i-2, err.(*pystr.EscapeError))
		}
		lx.i += n
	}
	if strings.Contains(prefix, "f") {
		return token{}, &UnsupportedError{Offset: start, Construct: "f-string", Reason: "formatted string literals are not translated; use str.format or %"}
	}
	if strings.Contains(prefix, "b") {
		return token{}, &UnsupportedError{Offset: start, Construct: "bytes literal", Reason: "bytes have no JSON form"}
	}
	return token{kind: tString, pos: start, text: string(lx.src[start:lx.i]), sval: b.String()}, nil
}

// escapeErr is the error of the string escape at pos that pystr.Escape
// refused.
func (lx *lexer) escapeErr(pos int, e *pystr.EscapeError) error {
	switch e.Kind {
	case pystr.Range:
		return lx.syntax(pos, "illegal Unicode character")
	case pystr.Surrogate:
		return &UnsupportedError{Offset: pos, Construct: "surrogate escape \\" + string(e.Letter) + e.Digits, Reason: "strings are UTF-8 here; a lone surrogate has no UTF-8 form"}
	case pystr.Named:
		return &UnsupportedError{Offset: pos, Construct: `\N{...} escape`, Reason: "the Unicode name database is not included"}
	default:
		return lx.syntax(pos, "truncated \\%cXX escape", e.Letter)
	}
}
