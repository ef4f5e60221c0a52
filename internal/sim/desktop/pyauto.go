package desktop

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/codapipe/codapipe/internal/contract/pystr"
)

// PyAutoGUIError reports why ParsePyAutoGUI rejected a program. Offset is
// the byte offset into the code of the statement (or token) at fault.
type PyAutoGUIError struct {
	Offset int    // byte offset into the code
	Msg    string // what is wrong, naming the statement or call
}

// Error implements error.
func (e *PyAutoGUIError) Error() string {
	return fmt.Sprintf("sim: pyautogui code at offset %d: %s", e.Offset, e.Msg)
}

// ParsePyAutoGUI interprets the small subset of Python that GUI agents send
// to a VM and returns the input events it performs, in order. It accepts
// everything uitars.Render emits and the OSWorld wrapper around it:
//
//	import pyautogui; import time; pyautogui.FAILSAFE = False; ...
//	pyautogui.click(x, y)             click(x=, y=, clicks=, interval=, button=, duration=)
//	pyautogui.doubleClick(x, y)       tripleClick, rightClick, middleClick
//	pyautogui.moveTo(x, y)            duration= ignored
//	pyautogui.dragTo(x, y, duration=0.5, button='left')
//	pyautogui.mouseDown(x, y, button=) / mouseUp(...)
//	pyautogui.write('text')           typewrite alias; a list argument is a list of key names
//	pyautogui.press('enter')          a list of keys, presses=N
//	pyautogui.hotkey('ctrl', 'c')
//	pyautogui.scroll(n) / vscroll(n) / hscroll(n)   optional x=, y=
//	time.sleep(s)
//
// Statements are separated by newlines or semicolons; comments, `pass`,
// imports and assignments to pyautogui settings (FAILSAFE, PAUSE) are
// ignored. String literals follow Python 3 (single or double quotes, r”
// raw strings, \n \t \xHH \uXXXX \UXXXXXXXX \ooo escapes). Anything else
// is an error (*PyAutoGUIError) naming the statement and its offset.
func ParsePyAutoGUI(code string) ([]Event, error) {
	p := &pyParser{src: code}
	toks, err := p.lex()
	if err != nil {
		return nil, err
	}
	p.toks = toks
	var evs []Event
	for {
		p.skipSeparators()
		if p.at().kind == tkEOF {
			break
		}
		stmtStart := p.at().off
		out, err := p.statement()
		if err != nil {
			return nil, err
		}
		evs = append(evs, out...)
		switch t := p.at(); t.kind {
		case tkEOF, tkNewline, tkSemi:
		default:
			return nil, &PyAutoGUIError{Offset: t.off, Msg: fmt.Sprintf("unexpected %s after the statement at offset %d", t.describe(), stmtStart)}
		}
	}
	return evs, nil
}

type tokKind int

const (
	tkEOF tokKind = iota
	tkNewline
	tkSemi
	tkIdent
	tkNumber
	tkString
	tkPunct
)

type pyTok struct {
	kind  tokKind
	off   int
	text  string  // identifier, punctuation, or number spelling
	str   string  // decoded string literal
	num   float64 // number value
	isInt bool
}

func (t pyTok) describe() string {
	switch t.kind {
	case tkEOF:
		return "end of code"
	case tkNewline:
		return "end of line"
	case tkSemi:
		return "';'"
	case tkString:
		return "string " + strconv.Quote(t.str)
	}
	return strconv.Quote(t.text)
}

type pyParser struct {
	src  string
	toks []pyTok
	pos  int
}

func (p *pyParser) errAt(off int, format string, args ...any) error {
	return &PyAutoGUIError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// lex splits the code into tokens. Newlines inside brackets are dropped, as
// in Python.
func (p *pyParser) lex() ([]pyTok, error) {
	s := p.src
	var toks []pyTok
	depth := 0
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			i++
		case c == '\\' && i+1 < len(s) && s[i+1] == '\n':
			i += 2 // explicit line joining
		case c == '\\' && i+2 < len(s) && s[i+1] == '\r' && s[i+2] == '\n':
			i += 3
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '\n':
			if depth == 0 {
				toks = append(toks, pyTok{kind: tkNewline, off: i})
			}
			i++
		case c == ';':
			toks = append(toks, pyTok{kind: tkSemi, off: i, text: ";"})
			i++
		case c == '(' || c == '[':
			depth++
			toks = append(toks, pyTok{kind: tkPunct, off: i, text: string(c)})
			i++
		case c == ')' || c == ']':
			if depth > 0 {
				depth--
			}
			toks = append(toks, pyTok{kind: tkPunct, off: i, text: string(c)})
			i++
		case c == ',' || c == '=' || c == '.' && !(i+1 < len(s) && isDigit(s[i+1])):
			toks = append(toks, pyTok{kind: tkPunct, off: i, text: string(c)})
			i++
		case c == '-' || c == '+':
			toks = append(toks, pyTok{kind: tkPunct, off: i, text: string(c)})
			i++
		case isDigit(c) || c == '.':
			j := i
			for j < len(s) && (isDigit(s[j]) || s[j] == '.' || s[j] == '_' || s[j] == 'e' || s[j] == 'E' ||
				((s[j] == '+' || s[j] == '-') && j > i && (s[j-1] == 'e' || s[j-1] == 'E'))) {
				j++
			}
			text := s[i:j]
			clean := strings.ReplaceAll(text, "_", "")
			f, err := strconv.ParseFloat(clean, 64)
			if err != nil || math.IsInf(f, 0) {
				return nil, p.errAt(i, "invalid number %q", text)
			}
			isInt := !strings.ContainsAny(clean, ".eE")
			toks = append(toks, pyTok{kind: tkNumber, off: i, text: text, num: f, isInt: isInt})
			i = j
		case isIdentStart(c):
			j := i
			for j < len(s) && (isIdentStart(s[j]) || isDigit(s[j])) {
				j++
			}
			word := s[i:j]
			// String prefixes: r, u, R, U (b/f strings are not supported).
			if j < len(s) && (s[j] == '\'' || s[j] == '"') && (word == "r" || word == "R" || word == "u" || word == "U") {
				str, end, err := p.stringLit(j, word == "r" || word == "R")
				if err != nil {
					return nil, err
				}
				toks = append(toks, pyTok{kind: tkString, off: i, str: str, text: s[i:end]})
				i = end
				continue
			}
			toks = append(toks, pyTok{kind: tkIdent, off: i, text: word})
			i = j
		case c == '\'' || c == '"':
			str, end, err := p.stringLit(i, false)
			if err != nil {
				return nil, err
			}
			toks = append(toks, pyTok{kind: tkString, off: i, str: str, text: s[i:end]})
			i = end
		default:
			r, _ := utf8.DecodeRuneInString(s[i:])
			return nil, p.errAt(i, "unexpected character %q", r)
		}
	}
	toks = append(toks, pyTok{kind: tkEOF, off: len(s)})
	return toks, nil
}

func isDigit(c byte) bool      { return '0' <= c && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// stringLit decodes the Python string literal starting at the quote at i
// and returns its value and the offset after it. Triple quotes are
// accepted.
func (p *pyParser) stringLit(i int, raw bool) (string, int, error) {
	s := p.src
	q := s[i]
	start := i
	triple := strings.HasPrefix(s[i:], strings.Repeat(string(q), 3))
	if triple {
		i += 3
	} else {
		i++
	}
	var b strings.Builder
	for {
		if i >= len(s) {
			return "", 0, p.errAt(start, "unterminated string literal")
		}
		c := s[i]
		if triple {
			if strings.HasPrefix(s[i:], strings.Repeat(string(q), 3)) {
				return b.String(), i + 3, nil
			}
		} else if c == q {
			return b.String(), i + 1, nil
		} else if c == '\n' {
			return "", 0, p.errAt(start, "unterminated string literal (newline inside)")
		}
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			return "", 0, p.errAt(start, "unterminated string literal")
		}
		e := s[i+1]
		if raw {
			// In raw strings a backslash escapes nothing but keeps a quote
			// from closing the literal.
			b.WriteByte('\\')
			b.WriteByte(e)
			i += 2
			continue
		}
		if e >= utf8.RuneSelf {
			// Not an escape: the backslash stays, the character after it
			// is read as usual.
			b.WriteByte('\\')
			i++
			continue
		}
		i += 2
		n, err := pystr.Escape(&b, rune(e), s[i:])
		if err != nil {
			return "", 0, p.errAt(i-2, "%v", err)
		}
		i += n
	}
}

func (p *pyParser) at() pyTok { return p.toks[p.pos] }

func (p *pyParser) next() pyTok {
	t := p.toks[p.pos]
	if t.kind != tkEOF {
		p.pos++
	}
	return t
}

func (p *pyParser) isPunct(s string) bool {
	t := p.at()
	return t.kind == tkPunct && t.text == s
}

func (p *pyParser) expectPunct(s string) error {
	if !p.isPunct(s) {
		t := p.at()
		return p.errAt(t.off, "expected %q, found %s", s, t.describe())
	}
	p.pos++
	return nil
}

func (p *pyParser) skipSeparators() {
	for k := p.at().kind; k == tkNewline || k == tkSemi; k = p.at().kind {
		p.pos++
	}
}

// skipToEnd skips the rest of the statement.
func (p *pyParser) skipToEnd() {
	for k := p.at().kind; k != tkEOF && k != tkNewline && k != tkSemi; k = p.at().kind {
		p.pos++
	}
}

// dotted reads a dotted name such as pyautogui.click.
func (p *pyParser) dotted() (string, error) {
	t := p.next()
	if t.kind != tkIdent {
		return "", p.errAt(t.off, "expected a name, found %s", t.describe())
	}
	name := t.text
	for p.isPunct(".") {
		p.pos++
		t := p.next()
		if t.kind != tkIdent {
			return "", p.errAt(t.off, "expected a name after '.', found %s", t.describe())
		}
		name += "." + t.text
	}
	return name, nil
}

// pyVal is an argument value.
type pyVal struct {
	off   int
	kind  string // "num", "str", "bool", "none", "list"
	num   float64
	isInt bool
	str   string
	b     bool
	list  []pyVal
}

func (v pyVal) describe() string {
	switch v.kind {
	case "num":
		return "number " + strconv.FormatFloat(v.num, 'g', -1, 64)
	case "str":
		return "string " + strconv.Quote(v.str)
	case "bool":
		return "boolean"
	case "none":
		return "None"
	}
	return "list"
}

func (p *pyParser) value() (pyVal, error) {
	t := p.at()
	switch {
	case t.kind == tkPunct && (t.text == "-" || t.text == "+"):
		p.pos++
		v, err := p.value()
		if err != nil {
			return v, err
		}
		if v.kind != "num" {
			return v, p.errAt(t.off, "unary %s applied to a %s", t.text, v.describe())
		}
		if t.text == "-" {
			v.num = -v.num
		}
		v.off = t.off
		return v, nil
	case t.kind == tkNumber:
		p.pos++
		return pyVal{off: t.off, kind: "num", num: t.num, isInt: t.isInt}, nil
	case t.kind == tkString:
		p.pos++
		s := t.str
		for p.at().kind == tkString { // implicit concatenation
			s += p.next().str
		}
		return pyVal{off: t.off, kind: "str", str: s}, nil
	case t.kind == tkIdent && (t.text == "True" || t.text == "False"):
		p.pos++
		return pyVal{off: t.off, kind: "bool", b: t.text == "True"}, nil
	case t.kind == tkIdent && t.text == "None":
		p.pos++
		return pyVal{off: t.off, kind: "none"}, nil
	case t.kind == tkPunct && (t.text == "(" || t.text == "["):
		p.pos++
		closer := map[string]string{"(": ")", "[": "]"}[t.text]
		v := pyVal{off: t.off, kind: "list"}
		for !p.isPunct(closer) {
			e, err := p.value()
			if err != nil {
				return v, err
			}
			v.list = append(v.list, e)
			if p.isPunct(",") {
				p.pos++
				continue
			}
			if !p.isPunct(closer) {
				u := p.at()
				return v, p.errAt(u.off, "expected ',' or %q in a list, found %s", closer, u.describe())
			}
		}
		p.pos++
		if t.text == "(" && len(v.list) == 1 {
			// (x) is just x; a one-element tuple needs a trailing comma,
			// which we do not distinguish.
			return v.list[0], nil
		}
		return v, nil
	}
	return pyVal{}, p.errAt(t.off, "unsupported argument %s (only numbers, strings, True/False/None and lists)", t.describe())
}

type pyCall struct {
	name   string
	off    int
	pos    []pyVal
	kw     map[string]pyVal
	kwKeys []string
}

func (p *pyParser) args(c *pyCall) error {
	if err := p.expectPunct("("); err != nil {
		return err
	}
	c.kw = map[string]pyVal{}
	for !p.isPunct(")") {
		t := p.at()
		if t.kind == tkIdent && p.toks[p.pos+1].kind == tkPunct && p.toks[p.pos+1].text == "=" {
			p.pos += 2
			v, err := p.value()
			if err != nil {
				return err
			}
			if _, dup := c.kw[t.text]; dup {
				return p.errAt(t.off, "%s: keyword argument %q repeated", c.name, t.text)
			}
			c.kw[t.text] = v
			c.kwKeys = append(c.kwKeys, t.text)
		} else {
			if len(c.kw) > 0 {
				return p.errAt(t.off, "%s: positional argument follows keyword argument", c.name)
			}
			v, err := p.value()
			if err != nil {
				return err
			}
			c.pos = append(c.pos, v)
		}
		if p.isPunct(",") {
			p.pos++
			continue
		}
		if !p.isPunct(")") {
			u := p.at()
			return p.errAt(u.off, "%s: expected ',' or ')' in the argument list, found %s", c.name, u.describe())
		}
	}
	p.pos++
	return nil
}

// statement parses one statement and returns its events.
func (p *pyParser) statement() ([]Event, error) {
	t := p.at()
	if t.kind == tkIdent {
		switch t.text {
		case "import", "from":
			p.skipToEnd()
			return nil, nil
		case "pass":
			p.pos++
			return nil, nil
		}
	}
	if t.kind != tkIdent {
		return nil, p.errAt(t.off, "unsupported statement starting with %s", t.describe())
	}
	name, err := p.dotted()
	if err != nil {
		return nil, err
	}
	if p.isPunct("=") {
		// Settings such as pyautogui.FAILSAFE = False or pyautogui.PAUSE = 0.5.
		if !strings.HasPrefix(name, "pyautogui.") {
			return nil, p.errAt(t.off, "unsupported assignment to %s (only pyautogui settings)", name)
		}
		p.pos++
		if _, err := p.value(); err != nil {
			return nil, err
		}
		return nil, nil
	}
	if !p.isPunct("(") {
		u := p.at()
		return nil, p.errAt(u.off, "unsupported statement %s: expected a call, found %s", name, u.describe())
	}
	c := &pyCall{name: name, off: t.off}
	if err := p.args(c); err != nil {
		return nil, err
	}
	return p.call(c)
}

// spec checks the arguments of a call against its parameter list and
// returns them by name; missing optional parameters are absent.
func (p *pyParser) bind(c *pyCall, params ...string) (map[string]pyVal, error) {
	if len(c.pos) > len(params) {
		return nil, p.errAt(c.pos[len(params)].off, "%s takes at most %d positional arguments (%s), got %d",
			c.name, len(params), strings.Join(params, ", "), len(c.pos))
	}
	out := make(map[string]pyVal, len(params))
	for i, v := range c.pos {
		out[params[i]] = v
	}
	for _, k := range c.kwKeys {
		known := false
		for _, pn := range params {
			if pn == k {
				known = true
			}
		}
		if !known {
			return nil, p.errAt(c.kw[k].off, "%s: unknown keyword argument %q (accepted: %s)", c.name, k, strings.Join(params, ", "))
		}
		if _, dup := out[k]; dup {
			return nil, p.errAt(c.kw[k].off, "%s: argument %q given twice", c.name, k)
		}
		out[k] = c.kw[k]
	}
	for k, v := range out {
		if v.kind == "none" {
			delete(out, k)
		}
	}
	return out, nil
}

func (p *pyParser) num(c *pyCall, a map[string]pyVal, name string) (float64, bool, error) {
	v, ok := a[name]
	if !ok {
		return 0, false, nil
	}
	if v.kind == "bool" {
		if v.b {
			return 1, true, nil
		}
		return 0, true, nil
	}
	if v.kind != "num" {
		return 0, false, p.errAt(v.off, "%s: argument %q must be a number, got %s", c.name, name, v.describe())
	}
	return v.num, true, nil
}

func (p *pyParser) coord(c *pyCall, a map[string]pyVal, name string) (int, bool, error) {
	f, ok, err := p.num(c, a, name)
	if err != nil || !ok {
		return 0, ok, err
	}
	if f < -1e6 || f > 1e6 {
		return 0, false, p.errAt(a[name].off, "%s: coordinate %s=%v out of range", c.name, name, f)
	}
	return int(math.Round(f)), true, nil
}

// bindPosition binds the arguments of a mouse call (bind) and reads its
// position.
func (p *pyParser) bindPosition(c *pyCall, params ...string) (a map[string]pyVal, x, y int, has bool, err error) {
	if a, err = p.bind(c, params...); err != nil {
		return nil, 0, 0, false, err
	}
	x, y, has, err = p.position(c, a)
	return a, x, y, has, err
}

// position reads x and y. pyautogui accepts x as an (x, y) tuple too.
func (p *pyParser) position(c *pyCall, a map[string]pyVal) (x, y int, has bool, err error) {
	if v, ok := a["x"]; ok && v.kind == "list" {
		if len(v.list) != 2 {
			return 0, 0, false, p.errAt(v.off, "%s: a position tuple needs 2 numbers, got %d", c.name, len(v.list))
		}
		if _, ok := a["y"]; ok {
			return 0, 0, false, p.errAt(v.off, "%s: position given both as a tuple and as y", c.name)
		}
		a = map[string]pyVal{"x": v.list[0], "y": v.list[1]}
	}
	x, hx, err := p.coord(c, a, "x")
	if err != nil {
		return 0, 0, false, err
	}
	y, hy, err := p.coord(c, a, "y")
	if err != nil {
		return 0, 0, false, err
	}
	if hx != hy {
		return 0, 0, false, p.errAt(c.off, "%s: x and y must be given together", c.name)
	}
	return x, y, hx, nil
}

func (p *pyParser) str(c *pyCall, a map[string]pyVal, name, def string) (string, error) {
	v, ok := a[name]
	if !ok {
		return def, nil
	}
	if v.kind != "str" {
		return "", p.errAt(v.off, "%s: argument %q must be a string, got %s", c.name, name, v.describe())
	}
	return v.str, nil
}

func (p *pyParser) button(c *pyCall, a map[string]pyVal, def string) (string, error) {
	b, err := p.str(c, a, "button", def)
	if err != nil {
		return "", err
	}
	b = strings.ToLower(b)
	switch b {
	case "left", "right", "middle", "primary", "secondary":
	default:
		return "", p.errAt(a["button"].off, "%s: unknown button %q (left, right, middle)", c.name, b)
	}
	switch b {
	case "primary":
		b = "left"
	case "secondary":
		b = "right"
	}
	return b, nil
}

func (p *pyParser) count(c *pyCall, a map[string]pyVal, name string, def int) (int, error) {
	f, ok, err := p.num(c, a, name)
	if err != nil {
		return 0, err
	}
	if !ok {
		return def, nil
	}
	if f != math.Trunc(f) || f < 0 || f > 100 {
		return 0, p.errAt(a[name].off, "%s: %s must be an integer in [0, 100], got %v", c.name, name, f)
	}
	return int(f), nil
}

// keyList reads a key name or a list of key names.
func (p *pyParser) keyList(c *pyCall, v pyVal) ([]string, error) {
	switch v.kind {
	case "str":
		return []string{strings.ToLower(v.str)}, nil
	case "list":
		var ks []string
		for _, e := range v.list {
			if e.kind != "str" {
				return nil, p.errAt(e.off, "%s: key names must be strings, got %s", c.name, e.describe())
			}
			ks = append(ks, strings.ToLower(e.str))
		}
		return ks, nil
	}
	return nil, p.errAt(v.off, "%s: expected a key name or a list of key names, got %s", c.name, v.describe())
}

func (p *pyParser) call(c *pyCall) ([]Event, error) {
	fn, isPy := strings.CutPrefix(c.name, "pyautogui.")
	if !isPy {
		if c.name == "time.sleep" {
			return p.sleep(c, "secs")
		}
		return nil, p.errAt(c.off, "unsupported call %s (only pyautogui.* and time.sleep)", c.name)
	}
	switch fn {
	case "click", "doubleClick", "tripleClick", "rightClick", "middleClick", "leftClick":
		params := []string{"x", "y", "clicks", "interval", "button", "duration", "tween", "logScreenshot", "_pause"}
		if fn != "click" {
			params = []string{"x", "y", "interval", "duration", "tween", "logScreenshot", "_pause"}
			if fn == "doubleClick" || fn == "tripleClick" {
				params = []string{"x", "y", "interval", "button", "duration", "tween", "logScreenshot", "_pause"}
			}
		}
		a, x, y, has, err := p.bindPosition(c, params...)
		if err != nil {
			return nil, err
		}
		def := map[string]string{"rightClick": "right", "middleClick": "middle"}[fn]
		if def == "" {
			def = "left"
		}
		btn, err := p.button(c, a, def)
		if err != nil {
			return nil, err
		}
		clicks := map[string]int{"doubleClick": 2, "tripleClick": 3}[fn]
		if clicks == 0 {
			if clicks, err = p.count(c, a, "clicks", 1); err != nil {
				return nil, err
			}
		}
		if clicks == 0 {
			if has {
				return []Event{{Kind: EvMoveTo, X: x, Y: y, HasXY: true}}, nil
			}
			return nil, nil
		}
		return []Event{{Kind: EvClick, X: x, Y: y, HasXY: has, Button: btn, Clicks: clicks}}, nil
	case "moveTo", "mouseDown", "mouseUp", "dragTo":
		params := []string{"x", "y", "duration", "tween", "logScreenshot", "_pause"}
		if fn != "moveTo" {
			params = []string{"x", "y", "button", "duration", "tween", "logScreenshot", "_pause", "mouseDownUp"}
		}
		a, x, y, has, err := p.bindPosition(c, params...)
		if err != nil {
			return nil, err
		}
		switch fn {
		case "moveTo":
			if !has {
				return nil, nil
			}
			return []Event{{Kind: EvMoveTo, X: x, Y: y, HasXY: true}}, nil
		case "dragTo":
			if !has {
				return nil, p.errAt(c.off, "dragTo needs x and y")
			}
			btn, err := p.button(c, a, "left")
			if err != nil {
				return nil, err
			}
			return []Event{{Kind: EvDragTo, X: x, Y: y, HasXY: true, Button: btn}}, nil
		}
		btn, err := p.button(c, a, "left")
		if err != nil {
			return nil, err
		}
		kind := EvMouseDown
		if fn == "mouseUp" {
			kind = EvMouseUp
		}
		return []Event{{Kind: kind, X: x, Y: y, HasXY: has, Button: btn}}, nil
	case "write", "typewrite":
		a, err := p.bind(c, "message", "interval", "logScreenshot", "_pause")
		if err != nil {
			return nil, err
		}
		v, ok := a["message"]
		if !ok {
			return nil, p.errAt(c.off, "%s needs a message", c.name)
		}
		if v.kind == "list" {
			keys, err := p.keyList(c, v)
			if err != nil {
				return nil, err
			}
			evs := make([]Event, 0, len(keys))
			for _, k := range keys {
				evs = append(evs, Event{Kind: EvPress, Keys: []string{k}})
			}
			return evs, nil
		}
		if v.kind != "str" {
			return nil, p.errAt(v.off, "%s: message must be a string or a list of key names, got %s", c.name, v.describe())
		}
		return []Event{{Kind: EvWrite, Text: v.str}}, nil
	case "press":
		a, err := p.bind(c, "keys", "presses", "interval", "logScreenshot", "_pause")
		if err != nil {
			return nil, err
		}
		v, ok := a["keys"]
		if !ok {
			return nil, p.errAt(c.off, "press needs a key")
		}
		keys, err := p.keyList(c, v)
		if err != nil {
			return nil, err
		}
		n, err := p.count(c, a, "presses", 1)
		if err != nil {
			return nil, err
		}
		var evs []Event
		for range n {
			for _, k := range keys {
				evs = append(evs, Event{Kind: EvPress, Keys: []string{k}})
			}
		}
		return evs, nil
	case "keyDown", "keyUp":
		a, err := p.bind(c, "key", "logScreenshot", "_pause")
		if err != nil {
			return nil, err
		}
		v, ok := a["key"]
		if !ok || v.kind != "str" {
			return nil, p.errAt(c.off, "%s needs one key name (a string)", c.name)
		}
		kind := EvKeyDown
		if fn == "keyUp" {
			kind = EvKeyUp
		}
		return []Event{{Kind: kind, Keys: []string{strings.ToLower(v.str)}}}, nil
	case "hotkey":
		var keys []string
		for _, v := range c.pos {
			if v.kind != "str" {
				return nil, p.errAt(v.off, "hotkey: keys must be strings, got %s", v.describe())
			}
			keys = append(keys, strings.ToLower(v.str))
		}
		for _, k := range c.kwKeys {
			switch k {
			case "interval", "logScreenshot", "_pause":
			default:
				return nil, p.errAt(c.kw[k].off, "hotkey: unknown keyword argument %q", k)
			}
		}
		if len(keys) == 0 {
			return nil, p.errAt(c.off, "hotkey needs at least one key")
		}
		return []Event{{Kind: EvHotkey, Keys: keys}}, nil
	case "scroll", "vscroll", "hscroll":
		a, err := p.bind(c, "clicks", "x", "y", "logScreenshot", "_pause")
		if err != nil {
			return nil, err
		}
		f, ok, err := p.num(c, a, "clicks")
		if err != nil {
			return nil, err
		}
		if !ok || f != math.Trunc(f) || math.Abs(f) > 10000 {
			return nil, p.errAt(c.off, "%s needs an integer number of clicks", c.name)
		}
		x, y, has, err := p.position(c, a)
		if err != nil {
			return nil, err
		}
		kind := EvScroll
		if fn == "hscroll" {
			kind = EvHScroll
		}
		return []Event{{Kind: kind, Amount: int(f), X: x, Y: y, HasXY: has}}, nil
	case "sleep":
		return p.sleep(c, "seconds")
	}
	return nil, p.errAt(c.off, "unsupported call %s", c.name)
}

// sleep reads the argument of time.sleep (param secs) or pyautogui.sleep
// (seconds).
func (p *pyParser) sleep(c *pyCall, param string) ([]Event, error) {
	a, err := p.bind(c, param)
	if err != nil {
		return nil, err
	}
	s, ok, err := p.num(c, a, param)
	if err != nil {
		return nil, err
	}
	if !ok || s < 0 || s > 3600 {
		return nil, p.errAt(c.off, "%s needs a number of seconds in [0, 3600]", c.name)
	}
	return []Event{{Kind: EvSleep, Seconds: s}}, nil
}
