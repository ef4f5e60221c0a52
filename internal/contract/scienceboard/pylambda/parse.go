package pylambda

import (
	"fmt"
	"math/big"
)

// The abstract syntax of Python expressions, as far as a lambda can hold
// them. Every node records the rune offset of the token that starts it.

type expr interface{ offset() int }

type (
	nameExpr struct {
		pos  int
		name string
	}
	// constExpr is a literal: int, float, str, None, True or False.
	constExpr struct {
		pos  int
		kind tokKind // tInt, tFloat, tString, or tName for None/True/False
		ival *big.Int
		fval float64
		sval string
	}
	seqExpr struct {
		pos  int
		kind string // "tuple", "list", "set"
		elts []expr
	}
	dictExpr struct {
		pos  int
		keys []expr // nil key: **value unpacking
		vals []expr
	}
	compExpr struct {
		pos     int
		kind    string // "list", "set", "dict", "gen"
		elt     expr   // element, or the key of a dict comprehension
		val     expr   // dict comprehension value
		clauses []compClause
	}
	unaryExpr struct {
		pos int
		op  string // "-", "+", "~", "not"
		x   expr
	}
	binaryExpr struct {
		pos   int // start of x
		opPos int
		op    string // arithmetic, "and", "or"
		x, y  expr
	}
	compareExpr struct {
		pos   int
		x     expr
		ops   []string // "==", "<", "in", "not in", "is", "is not", ...
		opPos []int
		ys    []expr
	}
	condExpr struct {
		pos              int
		then, cond, els_ expr
	}
	lambdaExpr struct {
		pos    int
		params []param
		body   expr
	}
	callExpr struct {
		pos   int
		lpar  int
		fn    expr
		args  []callArg
		genex bool // sole argument is an unparenthesized generator expression
	}
	attrExpr struct {
		pos  int
		dot  int
		x    expr
		name string
	}
	indexExpr struct {
		pos   int
		lbrak int
		x     expr
		index expr // may be a sliceExpr, or a tuple holding slices
	}
	sliceExpr struct {
		pos          int
		lo, hi, step expr
	}
	walrusExpr struct {
		pos   int
		name  string
		value expr
	}
	starExpr struct {
		pos int
		x   expr
	}
	// unsupportedExpr is a construct that parses but that we do not
	// evaluate (Ellipsis, await, yield); the emitter reports it.
	unsupportedExpr struct {
		pos       int
		construct string
		reason    string
	}
)

type compClause struct {
	pos    int
	target expr // nameExpr, or a tuple/list of targets
	iter   expr
	ifs    []expr
}

type param struct {
	pos   int
	kind  string // "", "*", "**", "/", or "*" with empty name for a bare *
	name  string
	deflt expr
}

type callArg struct {
	pos   int
	kind  string // "", "*", "**", or "=" for a keyword argument
	name  string
	value expr
}

func (e *nameExpr) offset() int        { return e.pos }
func (e *constExpr) offset() int       { return e.pos }
func (e *seqExpr) offset() int         { return e.pos }
func (e *dictExpr) offset() int        { return e.pos }
func (e *compExpr) offset() int        { return e.pos }
func (e *unaryExpr) offset() int       { return e.pos }
func (e *binaryExpr) offset() int      { return e.pos }
func (e *compareExpr) offset() int     { return e.pos }
func (e *condExpr) offset() int        { return e.pos }
func (e *lambdaExpr) offset() int      { return e.pos }
func (e *callExpr) offset() int        { return e.pos }
func (e *attrExpr) offset() int        { return e.pos }
func (e *indexExpr) offset() int       { return e.pos }
func (e *sliceExpr) offset() int       { return e.pos }
func (e *walrusExpr) offset() int      { return e.pos }
func (e *starExpr) offset() int        { return e.pos }
func (e *unsupportedExpr) offset() int { return e.pos }

// parser is a recursive-descent parser for Python 3.11 expressions
// (the grammar's "expressions" rule and below).
type parser struct {
	toks []token
	i    int
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// parse parses src as one Python expression in eval mode.
func parse(src string) (expr, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	if p.tok().kind == tEOF {
		return nil, &SyntaxError{Offset: 0, Msg: "empty source: expected a lambda expression"}
	}
	e, err := p.expressions()
	if err != nil {
		return nil, err
	}
	if t := p.tok(); t.kind != tEOF {
		return nil, p.unexpected(t)
	}
	return e, nil
}

func (p *parser) tok() token     { return p.toks[p.i] }
func (p *parser) peekTok() token { return p.toks[min(p.i+1, len(p.toks)-1)] }
func (p *parser) advance() token { t := p.toks[p.i]; p.i++; return t }
func (p *parser) isOp(s string) bool {
	t := p.tok()
	return t.kind == tOp && t.text == s
}
func (p *parser) isKw(s string) bool {
	t := p.tok()
	return t.kind == tName && t.text == s
}

func (p *parser) unexpected(t token) error {
	switch {
	case t.kind == tEOF:
		return &SyntaxError{Offset: t.pos, Msg: "invalid syntax: unexpected end of source"}
	case t.kind == tName && (t.text == "await" || t.text == "yield" || t.text == "async"):
		return &UnsupportedError{Offset: t.pos, Construct: "'" + t.text + "'", Reason: "generators and coroutines are not evaluated"}
	case t.kind == tOp && t.text == ":=":
		return &SyntaxError{Offset: t.pos, Msg: "invalid syntax: an assignment expression ':=' is only valid inside parentheses, brackets or call arguments"}
	}
	return &SyntaxError{Offset: t.pos, Msg: sprintf("invalid syntax at %q", t.text)}
}

func (p *parser) expect(op string) (token, error) {
	if !p.isOp(op) {
		return token{}, p.unexpected(p.tok())
	}
	return p.advance(), nil
}

// expressions: expression (',' expression)* [','] — a bare tuple.
func (p *parser) expressions() (expr, error) {
	return p.bareTuple(p.expression, p.atExprEnd)
}

// bareTuple: item (',' item)* [','] — a tuple without parentheses, or the
// one item when no comma follows it. end reports whether the token after
// a comma ends the tuple (a trailing comma).
func (p *parser) bareTuple(item func() (expr, error), end func() bool) (expr, error) {
	start := p.tok().pos
	first, err := item()
	if err != nil {
		return nil, err
	}
	if !p.isOp(",") {
		return first, nil
	}
	elts, err := p.commaList(first, item, end)
	if err != nil {
		return nil, err
	}
	return &seqExpr{pos: start, kind: "tuple", elts: elts}, nil
}

// commaList reads the (',' item)* [','] after the first item of a list,
// stopping at a comma after which end reports the end of the list.
func (p *parser) commaList(first expr, item func() (expr, error), end func() bool) ([]expr, error) {
	elts := []expr{first}
	for p.isOp(",") {
		p.advance()
		if end() {
			break
		}
		e, err := item()
		if err != nil {
			return nil, err
		}
		elts = append(elts, e)
	}
	return elts, nil
}

// commaOr reads the ',' after an item of a bracketed list, or checks that
// closer comes next (and leaves it for the caller).
func (p *parser) commaOr(closer string) error {
	if p.isOp(",") {
		p.advance()
		return nil
	}
	if !p.isOp(closer) {
		return p.unexpected(p.tok())
	}
	return nil
}

// atOp returns a function reporting whether the current token is op.
func (p *parser) atOp(op string) func() bool {
	return func() bool { return p.isOp(op) }
}

// atExprEnd reports whether the current token cannot start an expression
// (used after a trailing comma).
func (p *parser) atExprEnd() bool {
	t := p.tok()
	if t.kind == tEOF {
		return true
	}
	if t.kind == tOp {
		switch t.text {
		case ")", "]", "}", ":", "=", ",":
			return true
		}
	}
	if t.kind == tName && (t.text == "for" || t.text == "async") {
		return true
	}
	return false
}

// expression: lambdef | disjunction ['if' disjunction 'else' expression]
func (p *parser) expression() (expr, error) {
	if p.isKw("lambda") {
		return p.lambdef()
	}
	start := p.tok().pos
	e, err := p.disjunction()
	if err != nil {
		return nil, err
	}
	if !p.isKw("if") {
		return e, nil
	}
	p.advance()
	cond, err := p.disjunction()
	if err != nil {
		return nil, err
	}
	if !p.isKw("else") {
		return nil, &SyntaxError{Offset: p.tok().pos, Msg: "invalid syntax: expected 'else' after 'if' expression"}
	}
	p.advance()
	els, err := p.expression()
	if err != nil {
		return nil, err
	}
	return &condExpr{pos: start, then: e, cond: cond, els_: els}, nil
}

// namedExpression: NAME ':=' expression | expression
func (p *parser) namedExpression() (expr, error) {
	t := p.tok()
	if t.kind == tName && !pyKeywords[t.text] && p.peekTok().kind == tOp && p.peekTok().text == ":=" {
		p.advance()
		p.advance()
		v, err := p.expression()
		if err != nil {
			return nil, err
		}
		return &walrusExpr{pos: t.pos, name: t.text, value: v}, nil
	}
	e, err := p.expression()
	if err != nil {
		return nil, err
	}
	if p.isOp(":=") {
		return nil, &SyntaxError{Offset: p.tok().pos, Msg: "invalid syntax: cannot use assignment expressions with this target"}
	}
	return e, nil
}

func (p *parser) lambdef() (expr, error) {
	start := p.advance().pos // 'lambda'
	var params []param
	seen := map[string]bool{}
	sawStar, sawDefault := false, false
	for !p.isOp(":") {
		t := p.tok()
		var pr param
		pr.pos = t.pos
		switch {
		case t.kind == tOp && (t.text == "*" || t.text == "**"):
			p.advance()
			pr.kind = t.text
			if t.text == "*" && sawStar {
				return nil, &SyntaxError{Offset: t.pos, Msg: "invalid syntax: * argument may appear only once"}
			}
			if t.text == "*" {
				sawStar = true
			}
			if n := p.tok(); n.kind == tName && !pyKeywords[n.text] {
				pr.name = n.text
				p.advance()
			} else if t.text == "**" {
				return nil, p.unexpected(n)
			}
		case t.kind == tOp && t.text == "/":
			p.advance()
			pr.kind = "/"
		case t.kind == tName && !pyKeywords[t.text]:
			p.advance()
			pr.name = t.text
			if p.isOp("=") {
				p.advance()
				d, err := p.expression()
				if err != nil {
					return nil, err
				}
				pr.deflt = d
				sawDefault = true
			} else if sawDefault && !sawStar {
				return nil, &SyntaxError{Offset: t.pos, Msg: "non-default argument follows default argument"}
			}
		default:
			return nil, p.unexpected(t)
		}
		if pr.name != "" {
			if seen[pr.name] {
				return nil, &SyntaxError{Offset: pr.pos, Msg: sprintf("duplicate argument %q in function definition", pr.name)}
			}
			seen[pr.name] = true
		}
		params = append(params, pr)
		if pr.kind == "**" {
			if !p.isOp(":") {
				return nil, p.unexpected(p.tok())
			}
			break
		}
		if err := p.commaOr(":"); err != nil {
			return nil, err
		}
	}
	if n := len(params); n > 0 && params[n-1].kind == "*" && params[n-1].name == "" {
		return nil, &SyntaxError{Offset: params[n-1].pos, Msg: "named arguments must follow bare *"}
	}
	p.advance() // ':'
	body, err := p.expression()
	if err != nil {
		return nil, err
	}
	return &lambdaExpr{pos: start, params: params, body: body}, nil
}

func (p *parser) disjunction() (expr, error) {
	return p.boolChain("or", p.conjunction)
}

func (p *parser) conjunction() (expr, error) {
	return p.boolChain("and", p.inversion)
}

func (p *parser) boolChain(kw string, next func() (expr, error)) (expr, error) {
	x, err := next()
	if err != nil {
		return nil, err
	}
	for p.isKw(kw) {
		opPos := p.advance().pos
		y, err := next()
		if err != nil {
			return nil, err
		}
		x = &binaryExpr{pos: x.offset(), opPos: opPos, op: kw, x: x, y: y}
	}
	return x, nil
}

func (p *parser) inversion() (expr, error) {
	if p.isKw("not") {
		pos := p.advance().pos
		x, err := p.inversion()
		if err != nil {
			return nil, err
		}
		return &unaryExpr{pos: pos, op: "not", x: x}, nil
	}
	return p.comparison()
}

func (p *parser) compOp() (string, bool) {
	t := p.tok()
	if t.kind == tOp {
		switch t.text {
		case "==", "!=", "<", "<=", ">", ">=":
			return t.text, true
		}
		return "", false
	}
	if t.kind != tName {
		return "", false
	}
	switch t.text {
	case "in":
		return "in", true
	case "not":
		if n := p.peekTok(); n.kind == tName && n.text == "in" {
			return "not in", true
		}
	case "is":
		if n := p.peekTok(); n.kind == tName && n.text == "not" {
			return "is not", true
		}
		return "is", true
	}
	return "", false
}

func (p *parser) comparison() (expr, error) {
	x, err := p.bitOr()
	if err != nil {
		return nil, err
	}
	var c *compareExpr
	for {
		op, ok := p.compOp()
		if !ok {
			break
		}
		opPos := p.advance().pos
		if op == "not in" || op == "is not" {
			p.advance()
		}
		y, err := p.bitOr()
		if err != nil {
			return nil, err
		}
		if c == nil {
			c = &compareExpr{pos: x.offset(), x: x}
		}
		c.ops = append(c.ops, op)
		c.opPos = append(c.opPos, opPos)
		c.ys = append(c.ys, y)
	}
	if c == nil {
		return x, nil
	}
	return c, nil
}

// binaryLevel parses a left-associative level of binary operators.
func (p *parser) binaryLevel(ops []string, next func() (expr, error)) (expr, error) {
	x, err := next()
	if err != nil {
		return nil, err
	}
	for {
		t := p.tok()
		found := ""
		if t.kind == tOp {
			for _, op := range ops {
				if t.text == op {
					found = op
				}
			}
		}
		if found == "" {
			return x, nil
		}
		p.advance()
		y, err := next()
		if err != nil {
			return nil, err
		}
		x = &binaryExpr{pos: x.offset(), opPos: t.pos, op: found, x: x, y: y}
	}
}

func (p *parser) bitOr() (expr, error)  { return p.binaryLevel([]string{"|"}, p.bitXor) }
func (p *parser) bitXor() (expr, error) { return p.binaryLevel([]string{"^"}, p.bitAnd) }
func (p *parser) bitAnd() (expr, error) { return p.binaryLevel([]string{"&"}, p.shift) }
func (p *parser) shift() (expr, error)  { return p.binaryLevel([]string{"<<", ">>"}, p.sum) }
func (p *parser) sum() (expr, error)    { return p.binaryLevel([]string{"+", "-"}, p.term) }
func (p *parser) term() (expr, error) {
	return p.binaryLevel([]string{"*", "/", "//", "%", "@"}, p.factor)
}

// factor: ('+'|'-'|'~') factor | power
func (p *parser) factor() (expr, error) {
	if t := p.tok(); t.kind == tOp && (t.text == "+" || t.text == "-" || t.text == "~") {
		p.advance()
		x, err := p.factor()
		if err != nil {
			return nil, err
		}
		return &unaryExpr{pos: t.pos, op: t.text, x: x}, nil
	}
	return p.power()
}

// power: await_primary ['**' factor] — right-associative, binds tighter
// than a unary operator on its left and looser than one on its right.
func (p *parser) power() (expr, error) {
	if p.isKw("await") {
		t := p.advance()
		if _, err := p.primary(); err != nil {
			return nil, err
		}
		return &unsupportedExpr{pos: t.pos, construct: "'await'", reason: "coroutines are not evaluated"}, nil
	}
	x, err := p.primary()
	if err != nil {
		return nil, err
	}
	if p.isOp("**") {
		t := p.advance()
		y, err := p.factor()
		if err != nil {
			return nil, err
		}
		return &binaryExpr{pos: x.offset(), opPos: t.pos, op: "**", x: x, y: y}, nil
	}
	return x, nil
}

// primary: atom trailer*
func (p *parser) primary() (expr, error) {
	x, err := p.atom()
	if err != nil {
		return nil, err
	}
	for {
		t := p.tok()
		if t.kind != tOp {
			return x, nil
		}
		switch t.text {
		case ".":
			p.advance()
			n := p.tok()
			if n.kind != tName || pyKeywords[n.text] {
				return nil, p.unexpected(n)
			}
			p.advance()
			x = &attrExpr{pos: x.offset(), dot: t.pos, x: x, name: n.text}
		case "(":
			c, err := p.callArgs(x)
			if err != nil {
				return nil, err
			}
			x = c
		case "[":
			p.advance()
			idx, err := p.slices()
			if err != nil {
				return nil, err
			}
			if _, err := p.expect("]"); err != nil {
				return nil, err
			}
			x = &indexExpr{pos: x.offset(), lbrak: t.pos, x: x, index: idx}
		default:
			return x, nil
		}
	}
}

func (p *parser) callArgs(fn expr) (expr, error) {
	lpar := p.advance().pos
	c := &callExpr{pos: fn.offset(), lpar: lpar, fn: fn}
	sawKw := false
	for !p.isOp(")") {
		t := p.tok()
		var a callArg
		a.pos = t.pos
		switch {
		case t.kind == tOp && (t.text == "*" || t.text == "**"):
			p.advance()
			v, err := p.expression()
			if err != nil {
				return nil, err
			}
			a.kind, a.value = t.text, v
			if t.text == "**" {
				sawKw = true
			}
		case t.kind == tName && !pyKeywords[t.text] && p.peekTok().kind == tOp && p.peekTok().text == "=":
			p.advance()
			p.advance()
			v, err := p.expression()
			if err != nil {
				return nil, err
			}
			a.kind, a.name, a.value = "=", t.text, v
			sawKw = true
		default:
			v, err := p.namedExpression()
			if err != nil {
				return nil, err
			}
			if p.isKw("for") || p.isKw("async") {
				g, err := p.comprehension("gen", t.pos, v, nil)
				if err != nil {
					return nil, err
				}
				if len(c.args) > 0 || !p.isOp(")") {
					return nil, &SyntaxError{Offset: t.pos, Msg: "Generator expression must be parenthesized"}
				}
				c.args = append(c.args, callArg{pos: t.pos, value: g})
				c.genex = true
				continue
			}
			if sawKw {
				return nil, &SyntaxError{Offset: t.pos, Msg: "positional argument follows keyword argument"}
			}
			a.value = v
		}
		c.args = append(c.args, a)
		if err := p.commaOr(")"); err != nil {
			return nil, err
		}
	}
	p.advance()
	return c, nil
}

// slices: slice | slice (',' slice)* [',']
func (p *parser) slices() (expr, error) {
	return p.bareTuple(p.slice, p.atOp("]"))
}

func (p *parser) slice() (expr, error) {
	start := p.tok().pos
	var lo expr
	if !p.isOp(":") {
		e, err := p.namedExpression()
		if err != nil {
			return nil, err
		}
		if !p.isOp(":") {
			return e, nil
		}
		lo = e
	}
	p.advance() // ':'
	s := &sliceExpr{pos: start, lo: lo}
	if !p.isOp(":") && !p.isOp("]") && !p.isOp(",") {
		e, err := p.expression()
		if err != nil {
			return nil, err
		}
		s.hi = e
	}
	if p.isOp(":") {
		p.advance()
		if !p.isOp("]") && !p.isOp(",") {
			e, err := p.expression()
			if err != nil {
				return nil, err
			}
			s.step = e
		}
	}
	return s, nil
}

func (p *parser) atom() (expr, error) {
	t := p.tok()
	switch t.kind {
	case tName:
		switch t.text {
		case "None", "True", "False":
			p.advance()
			return &constExpr{pos: t.pos, kind: tName, sval: t.text}, nil
		}
		if pyKeywords[t.text] {
			return nil, p.unexpected(t)
		}
		p.advance()
		return &nameExpr{pos: t.pos, name: t.text}, nil
	case tInt:
		p.advance()
		return &constExpr{pos: t.pos, kind: tInt, ival: t.ival}, nil
	case tFloat:
		p.advance()
		return &constExpr{pos: t.pos, kind: tFloat, fval: t.fval}, nil
	case tString:
		s := ""
		for p.tok().kind == tString { // implicit concatenation
			s += p.advance().sval
		}
		return &constExpr{pos: t.pos, kind: tString, sval: s}, nil
	case tOp:
		switch t.text {
		case "(":
			return p.parenAtom()
		case "[":
			return p.listAtom()
		case "{":
			return p.braceAtom()
		case "...":
			p.advance()
			return &unsupportedExpr{pos: t.pos, construct: "Ellipsis '...'", reason: "Ellipsis has no JSON form"}, nil
		}
	}
	return nil, p.unexpected(t)
}

// starOrNamed parses an element of a display: '*' bitor | namedExpression.
func (p *parser) starOrNamed() (expr, error) {
	if t := p.tok(); t.kind == tOp && t.text == "*" {
		p.advance()
		x, err := p.bitOr()
		if err != nil {
			return nil, err
		}
		return &starExpr{pos: t.pos, x: x}, nil
	}
	return p.namedExpression()
}

func (p *parser) parenAtom() (expr, error) {
	lpar := p.advance().pos
	if p.isOp(")") {
		p.advance()
		return &seqExpr{pos: lpar, kind: "tuple"}, nil
	}
	if p.isKw("yield") {
		return nil, &UnsupportedError{Offset: p.tok().pos, Construct: "'yield'", Reason: "generators are not evaluated"}
	}
	first, err := p.starOrNamed()
	if err != nil {
		return nil, err
	}
	if p.isKw("for") || p.isKw("async") {
		return p.closedComprehension("gen", lpar, first, nil, ")")
	}
	if p.isOp(")") {
		p.advance()
		if s, ok := first.(*starExpr); ok {
			return nil, &SyntaxError{Offset: s.pos, Msg: "cannot use starred expression here"}
		}
		return first, nil // parenthesized expression
	}
	return p.display("tuple", lpar, first, ")")
}

func (p *parser) listAtom() (expr, error) {
	lbrak := p.advance().pos
	if p.isOp("]") {
		p.advance()
		return &seqExpr{pos: lbrak, kind: "list"}, nil
	}
	first, err := p.starOrNamed()
	if err != nil {
		return nil, err
	}
	if p.isKw("for") || p.isKw("async") {
		return p.closedComprehension("list", lbrak, first, nil, "]")
	}
	return p.display("list", lbrak, first, "]")
}

func (p *parser) braceAtom() (expr, error) {
	lbrace := p.advance().pos
	if p.isOp("}") {
		p.advance()
		return &dictExpr{pos: lbrace}, nil
	}
	// Dict: key ':' value or '**' bitor; set: starOrNamed.
	if p.isOp("**") {
		return p.dictRest(lbrace, nil, nil)
	}
	first, err := p.starOrNamed()
	if err != nil {
		return nil, err
	}
	if p.isOp(":") {
		if _, ok := first.(*starExpr); ok {
			return nil, &SyntaxError{Offset: first.offset(), Msg: "cannot use a starred expression in a dictionary key"}
		}
		p.advance()
		v, err := p.expression()
		if err != nil {
			return nil, err
		}
		if p.isKw("for") || p.isKw("async") {
			return p.closedComprehension("dict", lbrace, first, v, "}")
		}
		return p.dictRest(lbrace, first, v)
	}
	if p.isKw("for") || p.isKw("async") {
		return p.closedComprehension("set", lbrace, first, nil, "}")
	}
	return p.display("set", lbrace, first, "}")
}

// closedComprehension parses the for and if clauses of a comprehension of
// kind whose element (elt, and val for a dict) has been read, then closer.
func (p *parser) closedComprehension(kind string, pos int, elt, val expr, closer string) (expr, error) {
	c, err := p.comprehension(kind, pos, elt, val)
	if err != nil {
		return nil, err
	}
	if _, err := p.expect(closer); err != nil {
		return nil, err
	}
	return c, nil
}

// display parses the rest of a tuple, list or set display of kind opened
// at pos whose first element has been read, through closer.
func (p *parser) display(kind string, pos int, first expr, closer string) (expr, error) {
	elts, err := p.commaList(first, p.starOrNamed, p.atOp(closer))
	if err != nil {
		return nil, err
	}
	if _, err := p.expect(closer); err != nil {
		return nil, err
	}
	return &seqExpr{pos: pos, kind: kind, elts: elts}, nil
}

// dictRest parses the remaining entries of a dict display whose first
// entry (k, v) has been read (k nil: none read yet, at '**' or a key).
func (p *parser) dictRest(lbrace int, k, v expr) (expr, error) {
	d := &dictExpr{pos: lbrace}
	if k != nil {
		d.keys = append(d.keys, k)
		d.vals = append(d.vals, v)
		if !p.isOp(",") {
			if _, err := p.expect("}"); err != nil {
				return nil, err
			}
			return d, nil
		}
		p.advance()
	}
	for !p.isOp("}") {
		if p.isOp("**") {
			p.advance()
			x, err := p.bitOr()
			if err != nil {
				return nil, err
			}
			d.keys = append(d.keys, nil)
			d.vals = append(d.vals, x)
		} else {
			k, err := p.expression()
			if err != nil {
				return nil, err
			}
			if _, err := p.expect(":"); err != nil {
				return nil, err
			}
			v, err := p.expression()
			if err != nil {
				return nil, err
			}
			d.keys = append(d.keys, k)
			d.vals = append(d.vals, v)
		}
		if err := p.commaOr("}"); err != nil {
			return nil, err
		}
	}
	p.advance()
	return d, nil
}

// comprehension parses the for/if clauses after the element.
func (p *parser) comprehension(kind string, pos int, elt, val expr) (expr, error) {
	if s, ok := elt.(*starExpr); ok {
		return nil, &SyntaxError{Offset: s.pos, Msg: "iterable unpacking cannot be used in comprehension"}
	}
	c := &compExpr{pos: pos, kind: kind, elt: elt, val: val}
	for p.isKw("for") || p.isKw("async") {
		if p.isKw("async") {
			return nil, &UnsupportedError{Offset: p.tok().pos, Construct: "'async for'", Reason: "coroutines are not evaluated"}
		}
		forPos := p.advance().pos
		target, err := p.targets()
		if err != nil {
			return nil, err
		}
		if !p.isKw("in") {
			return nil, p.unexpected(p.tok())
		}
		p.advance()
		iter, err := p.disjunction()
		if err != nil {
			return nil, err
		}
		cl := compClause{pos: forPos, target: target, iter: iter}
		for p.isKw("if") {
			p.advance()
			cond, err := p.disjunction()
			if err != nil {
				return nil, err
			}
			cl.ifs = append(cl.ifs, cond)
		}
		c.clauses = append(c.clauses, cl)
	}
	return c, nil
}

// targets parses the target list of a for clause: star_targets.
func (p *parser) targets() (expr, error) {
	return p.bareTuple(p.target, func() bool { return p.isKw("in") })
}

func (p *parser) target() (expr, error) {
	t := p.tok()
	switch {
	case t.kind == tOp && t.text == "*":
		p.advance()
		x, err := p.target()
		if err != nil {
			return nil, err
		}
		return &starExpr{pos: t.pos, x: x}, nil
	case t.kind == tOp && (t.text == "(" || t.text == "["):
		p.advance()
		closer := map[string]string{"(": ")", "[": "]"}[t.text]
		var elts []expr
		for !p.isOp(closer) {
			e, err := p.target()
			if err != nil {
				return nil, err
			}
			elts = append(elts, e)
			if err := p.commaOr(closer); err != nil {
				return nil, err
			}
		}
		p.advance()
		if t.text == "(" && len(elts) == 1 {
			return elts[0], nil
		}
		return &seqExpr{pos: t.pos, kind: "tuple", elts: elts}, nil
	}
	// A name, or an attribute/subscript target (t_primary).
	x, err := p.primary()
	if err != nil {
		return nil, err
	}
	switch x.(type) {
	case *nameExpr, *attrExpr, *indexExpr:
		return x, nil
	}
	return nil, &SyntaxError{Offset: x.offset(), Msg: "cannot assign to this expression in a for clause"}
}
