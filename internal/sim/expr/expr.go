// Package expr is part of codapipe's SIMULATOR (see package sim): the
// small expression language of the simulated apps — what KAlgebra's
// calculator and plots and GRASS's r.mapcalc accept. Numbers, variables,
// + - * / ^ %, comparisons, && ||, function calls, lambdas (x->x^2,
// (x,y)->x*y), equations (x^2+y^2=9, KAlgebra) and sum/product over
// ranges (sum(1/n : n=1..20)). Assignments (p := 3*4) are the caller's:
// Env.Set binds a name.
package expr

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Node is a parsed expression.
type Node interface{ isNode() }

type (
	numNode   struct{ v float64 }
	varNode   struct{ name string }
	unaryNode struct{ x Node } // negation
	notNode   struct{ x Node }
	binNode   struct {
		op   string
		l, r Node
	}
	callNode struct {
		fn   Node
		args []Node
	}
	lambdaNode struct {
		params []string
		body   Node
	}
	rangeNode struct { // sum / product
		kind   string
		body   Node
		v      string
		lo, hi Node
	}
)

func (numNode) isNode()    {}
func (varNode) isNode()    {}
func (unaryNode) isNode()  {}
func (notNode) isNode()    {}
func (binNode) isNode()    {}
func (callNode) isNode()   {}
func (lambdaNode) isNode() {}
func (rangeNode) isNode()  {}

// Mode selects the dialect.
type Mode int

// Dialects.
const (
	KAlgebra Mode = iota // radians; log = log10; "=" is an equation
	Mapcalc              // degrees; log = ln; == comparisons
)

type token struct {
	kind string // "num", "id", "op", "eof"
	text string
	num  float64
	off  int
}

func lex(s string) ([]token, error) {
	var toks []token
	ops := []string{":=", "->", "..", "<=", ">=", "==", "!=", "&&", "||", "+", "-", "*", "/", "^", "%", "(", ")", ",", ":", "=", "<", ">", "!", "?", "{", "}"}
	for i := 0; i < len(s); {
		c := s[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			i++
			continue
		}
		if isDigit(c) || c == '.' && i+1 < len(s) && isDigit(s[i+1]) {
			j := i
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			if j < len(s) && s[j] == '.' && !(j+1 < len(s) && s[j+1] == '.') {
				j++
				for j < len(s) && isDigit(s[j]) {
					j++
				}
			}
			if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
				k := j + 1
				if k < len(s) && (s[k] == '+' || s[k] == '-') {
					k++
				}
				if k < len(s) && isDigit(s[k]) {
					for k < len(s) && isDigit(s[k]) {
						k++
					}
					j = k
				}
			}
			f, err := strconv.ParseFloat(s[i:j], 64)
			if err != nil {
				return nil, fmt.Errorf("invalid number %q", s[i:j])
			}
			toks = append(toks, token{kind: "num", text: s[i:j], num: f, off: i})
			i = j
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == 'π' {
			toks = append(toks, token{kind: "id", text: "pi", off: i})
			i += size
			continue
		}
		if r == '_' || unicode.IsLetter(r) {
			j := i
			for j < len(s) {
				r2, sz := utf8.DecodeRuneInString(s[j:])
				if r2 != '_' && r2 != '.' && !unicode.IsLetter(r2) && !unicode.IsDigit(r2) || r2 == 'π' {
					break
				}
				if r2 == '.' && !(j+1 < len(s) && (isIdentStart(s[j+1]) || isDigit(s[j+1]))) {
					break
				}
				j += sz
			}
			toks = append(toks, token{kind: "id", text: s[i:j], off: i})
			i = j
			continue
		}
		matched := false
		for _, op := range ops {
			if strings.HasPrefix(s[i:], op) {
				toks = append(toks, token{kind: "op", text: op, off: i})
				i += len(op)
				matched = true
				break
			}
		}
		if !matched {
			return nil, fmt.Errorf("unexpected character %q", r)
		}
	}
	toks = append(toks, token{kind: "eof", off: len(s)})
	return toks, nil
}

type parser struct {
	toks []token
	pos  int
	mode Mode
}

func (p *parser) at() token { return p.toks[p.pos] }
func (p *parser) isOp(op string) bool {
	t := p.at()
	return t.kind == "op" && t.text == op
}
func (p *parser) expect(op string) error {
	if !p.isOp(op) {
		return fmt.Errorf("expected %q, found %s", op, p.describe())
	}
	p.pos++
	return nil
}
func (p *parser) describe() string {
	t := p.at()
	if t.kind == "eof" {
		return "end of input"
	}
	return strconv.Quote(t.text)
}

// Parse parses a complete expression.
func Parse(s string, mode Mode) (Node, error) {
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, mode: mode}
	n, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.at().kind != "eof" {
		return nil, fmt.Errorf("unexpected %s", p.describe())
	}
	return n, nil
}

// expr := lambda | equation
func (p *parser) expr() (Node, error) {
	// Lambda: ident -> expr, or (a, b) -> expr.
	if t := p.at(); t.kind == "id" && p.toks[p.pos+1].kind == "op" && p.toks[p.pos+1].text == "->" {
		p.pos += 2
		body, err := p.expr()
		if err != nil {
			return nil, err
		}
		return lambdaNode{params: []string{t.text}, body: body}, nil
	}
	if p.isOp("(") {
		// Look ahead for "(a, b) ->".
		j := p.pos + 1
		var params []string
		for p.toks[j].kind == "id" {
			params = append(params, p.toks[j].text)
			j++
			if p.toks[j].kind == "op" && p.toks[j].text == "," {
				j++
				continue
			}
			break
		}
		if len(params) > 0 && p.toks[j].kind == "op" && p.toks[j].text == ")" &&
			p.toks[j+1].kind == "op" && p.toks[j+1].text == "->" {
			p.pos = j + 2
			body, err := p.expr()
			if err != nil {
				return nil, err
			}
			return lambdaNode{params: params, body: body}, nil
		}
	}
	return p.equation()
}

func (p *parser) equation() (Node, error) {
	l, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.mode == KAlgebra && p.isOp("=") {
		p.pos++
		r, err := p.or()
		if err != nil {
			return nil, err
		}
		return binNode{op: "=", l: l, r: r}, nil
	}
	return l, nil
}

// binary parses operands of next joined by left-associative ops.
func (p *parser) binary(next func() (Node, error), ops ...string) (Node, error) {
	l, err := next()
	if err != nil {
		return nil, err
	}
	for slices.ContainsFunc(ops, p.isOp) {
		op := p.at().text
		p.pos++
		r, err := next()
		if err != nil {
			return nil, err
		}
		l = binNode{op: op, l: l, r: r}
	}
	return l, nil
}

func (p *parser) or() (Node, error)  { return p.binary(p.and, "||") }
func (p *parser) and() (Node, error) { return p.binary(p.cmp, "&&") }

func (p *parser) cmp() (Node, error) {
	l, err := p.add()
	if err != nil {
		return nil, err
	}
	for _, op := range []string{"<=", ">=", "==", "!=", "<", ">"} {
		if p.isOp(op) {
			p.pos++
			r, err := p.add()
			if err != nil {
				return nil, err
			}
			return binNode{op: op, l: l, r: r}, nil
		}
	}
	return l, nil
}

func (p *parser) add() (Node, error) { return p.binary(p.mul, "+", "-") }
func (p *parser) mul() (Node, error) { return p.binary(p.unary, "*", "/", "%") }

func (p *parser) unary() (Node, error) {
	switch {
	case p.isOp("+"):
		p.pos++
		return p.unary()
	case p.isOp("-"), p.isOp("!"):
		op := p.at().text
		p.pos++
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		if op == "-" {
			return unaryNode{x: x}, nil
		}
		return notNode{x: x}, nil
	}
	return p.power()
}

func (p *parser) power() (Node, error) {
	base, err := p.postfix()
	if err != nil {
		return nil, err
	}
	if p.isOp("^") {
		p.pos++
		exp, err := p.unary() // right-associative, allows 2^-1
		if err != nil {
			return nil, err
		}
		return binNode{op: "^", l: base, r: exp}, nil
	}
	return base, nil
}

func (p *parser) postfix() (Node, error) {
	x, err := p.primary()
	if err != nil {
		return nil, err
	}
	for p.isOp("(") {
		p.pos++
		var args []Node
		for !p.isOp(")") {
			a, err := p.expr()
			if err != nil {
				return nil, err
			}
			args = append(args, a)
			if p.isOp(",") {
				p.pos++
				continue
			}
			if !p.isOp(")") {
				return nil, fmt.Errorf("expected ',' or ')' in the argument list, found %s", p.describe())
			}
		}
		p.pos++
		x = callNode{fn: x, args: args}
	}
	return x, nil
}

func (p *parser) primary() (Node, error) {
	t := p.at()
	switch t.kind {
	case "num":
		p.pos++
		n := Node(numNode{v: t.num})
		// Implicit multiplication after a number: 2x, 3(x+1).
		if nt := p.at(); nt.kind == "id" || nt.kind == "op" && nt.text == "(" {
			r, err := p.power()
			if err != nil {
				return nil, err
			}
			n = binNode{op: "*", l: n, r: r}
		}
		return n, nil
	case "id":
		p.pos++
		if (t.text == "sum" || t.text == "product") && p.isOp("(") {
			return p.rangeCall(t.text)
		}
		return varNode{name: t.text}, nil
	case "op":
		if t.text == "(" {
			p.pos++
			x, err := p.expr()
			if err != nil {
				return nil, err
			}
			if err := p.expect(")"); err != nil {
				return nil, err
			}
			return x, nil
		}
	}
	return nil, fmt.Errorf("unexpected %s", p.describe())
}

// rangeCall parses sum(body : n=lo..hi).
func (p *parser) rangeCall(kind string) (Node, error) {
	p.pos++ // (
	body, err := p.expr()
	if err != nil {
		return nil, err
	}
	if err := p.expect(":"); err != nil {
		return nil, fmt.Errorf("%s: %w (syntax: %s(expr : n=a..b))", kind, err, kind)
	}
	v := p.at()
	if v.kind != "id" {
		return nil, fmt.Errorf("%s: expected the bound variable, found %s", kind, p.describe())
	}
	p.pos++
	if err := p.expect("="); err != nil {
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	lo, err := p.add()
	if err != nil {
		return nil, err
	}
	if err := p.expect(".."); err != nil {
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	hi, err := p.add()
	if err != nil {
		return nil, err
	}
	if err := p.expect(")"); err != nil {
		return nil, err
	}
	return rangeNode{kind: kind, body: body, v: v.text, lo: lo, hi: hi}, nil
}

// Value is a number or a function (a lambda with what it closed over).
type Value struct {
	num float64
	fn  *function
}

// function is a lambda with the values it closed over.
type function struct {
	params []string
	body   Node
	bound  map[string]Value
}

// Env evaluates expressions of one dialect against its global variables.
type Env struct {
	mode  Mode
	vars  map[string]Value // global variables
	depth int
	steps int
}

// NewEnv returns an environment of the dialect without variables.
func NewEnv(mode Mode) *Env { return &Env{mode: mode, vars: map[string]Value{}} }

// Number returns the value x.
func Number(x float64) Value { return Value{num: x} }

// String returns the value as KAlgebra shows it: a number with up to 12
// significant digits, a function as its canonical lambda (x->x^2+1).
func (v Value) String() string {
	if v.fn != nil {
		return Format(lambdaNode{params: v.fn.params, body: v.fn.body})
	}
	return FormatNum(v.num)
}

// Set binds the global variable name.
func (e *Env) Set(name string, v Value) { e.vars[name] = v }

// Vars returns the global variables (a copy).
func (e *Env) Vars() map[string]Value { return maps.Clone(e.vars) }

// Names returns the names of the global variables, sorted.
func (e *Env) Names() []string { return slices.Sorted(maps.Keys(e.vars)) }

// Lookup returns a variable's value: a local, a global or a constant of
// the dialect (pi; e and euler in KAlgebra; true, false).
func (e *Env) Lookup(name string, locals map[string]Value) (Value, bool) {
	return e.lookup(name, locals)
}

// Eval evaluates n with locals bound, within a fresh budget of evaluation
// steps.
func (e *Env) Eval(n Node, locals map[string]Value) (Value, error) {
	e.steps = 0
	return e.eval(n, locals)
}

// Num evaluates n as Eval does; a function is an error.
func (e *Env) Num(n Node, locals map[string]Value) (float64, error) {
	e.steps = 0
	return e.num(n, locals)
}

var errTooDeep = errors.New("evaluation too deep (recursion?)")

const maxEvalSteps = 2_000_000

func (e *Env) lookup(name string, locals map[string]Value) (Value, bool) {
	if v, ok := locals[name]; ok {
		return v, true
	}
	if v, ok := e.vars[name]; ok {
		return v, true
	}
	switch name {
	case "pi":
		return Value{num: math.Pi}, true
	case "e":
		if e.mode == KAlgebra {
			return Value{num: math.E}, true
		}
	case "euler":
		if e.mode == KAlgebra {
			return Value{num: 0.5772156649015329}, true
		}
	case "true":
		return Value{num: 1}, true
	case "false":
		return Value{num: 0}, true
	}
	return Value{}, false
}

func (e *Env) num(n Node, locals map[string]Value) (float64, error) {
	v, err := e.eval(n, locals)
	if err != nil {
		return 0, err
	}
	if v.fn != nil {
		return 0, fmt.Errorf("a function (%s) is used as a number", Format(lambdaNode{params: v.fn.params, body: v.fn.body}))
	}
	return v.num, nil
}

// nums evaluates two numbers.
func (e *Env) nums(a, b Node, locals map[string]Value) (float64, float64, error) {
	x, err := e.num(a, locals)
	if err != nil {
		return 0, 0, err
	}
	y, err := e.num(b, locals)
	return x, y, err
}

func boolNum(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (e *Env) eval(n Node, locals map[string]Value) (Value, error) {
	e.steps++
	if e.steps > maxEvalSteps {
		return Value{}, errors.New("evaluation takes too long")
	}
	switch n := n.(type) {
	case numNode:
		return Value{num: n.v}, nil
	case varNode:
		v, ok := e.lookup(n.name, locals)
		if !ok {
			return Value{}, fmt.Errorf("unknown identifier: %s", n.name)
		}
		return v, nil
	case unaryNode:
		x, err := e.num(n.x, locals)
		return Value{num: -x}, err
	case notNode:
		x, err := e.num(n.x, locals)
		return Value{num: boolNum(x == 0)}, err
	case binNode:
		l, r, err := e.nums(n.l, n.r, locals)
		if err != nil {
			return Value{}, err
		}
		var v float64
		switch n.op {
		case "+":
			v = l + r
		case "-", "=":
			v = l - r
		case "*":
			v = l * r
		case "/":
			v = l / r
		case "%":
			v = math.Mod(l, r)
		case "^":
			v = math.Pow(l, r)
		case "<":
			v = boolNum(l < r)
		case ">":
			v = boolNum(l > r)
		case "<=":
			v = boolNum(l <= r)
		case ">=":
			v = boolNum(l >= r)
		case "==":
			v = boolNum(l == r)
		case "!=":
			v = boolNum(l != r)
		case "&&":
			v = boolNum(l != 0 && r != 0)
		case "||":
			v = boolNum(l != 0 || r != 0)
		}
		return Value{num: v}, nil
	case lambdaNode:
		return Value{fn: &function{params: n.params, body: n.body, bound: maps.Clone(locals)}}, nil
	case rangeNode:
		lo, hi, err := e.nums(n.lo, n.hi, locals)
		if err != nil {
			return Value{}, err
		}
		if hi-lo > 1e6 {
			return Value{}, fmt.Errorf("%s: range too large", n.kind)
		}
		acc := 0.0
		if n.kind == "product" {
			acc = 1
		}
		inner := make(map[string]Value, len(locals)+1)
		maps.Copy(inner, locals)
		for i := math.Ceil(lo); i <= hi; i++ {
			inner[n.v] = Value{num: i}
			x, err := e.num(n.body, inner)
			if err != nil {
				return Value{}, err
			}
			if n.kind == "sum" {
				acc += x
			} else {
				acc *= x
			}
		}
		return Value{num: acc}, nil
	case callNode:
		return e.call(n, locals)
	}
	return Value{}, fmt.Errorf("cannot evaluate %T", n)
}

func (e *Env) call(n callNode, locals map[string]Value) (Value, error) {
	if vn, ok := n.fn.(varNode); ok {
		if _, user := e.lookup(vn.name, locals); !user {
			return e.builtin(vn.name, n.args, locals)
		}
	}
	f, err := e.eval(n.fn, locals)
	if err != nil {
		return Value{}, err
	}
	if f.fn == nil {
		return Value{}, fmt.Errorf("%s is not a function", Format(n.fn))
	}
	return e.apply(f.fn, n.args, locals)
}

func (e *Env) apply(f *function, args []Node, locals map[string]Value) (Value, error) {
	if len(args) != len(f.params) {
		return Value{}, fmt.Errorf("wrong number of arguments: expected %d, got %d", len(f.params), len(args))
	}
	inner := make(map[string]Value, len(f.bound)+len(args))
	maps.Copy(inner, f.bound)
	for i, a := range args {
		v, err := e.eval(a, locals)
		if err != nil {
			return Value{}, err
		}
		inner[f.params[i]] = v
	}
	e.depth++
	defer func() { e.depth-- }()
	if e.depth > 200 {
		return Value{}, errTooDeep
	}
	return e.eval(f.body, inner)
}

func (e *Env) builtin(name string, args []Node, locals map[string]Value) (Value, error) {
	xs := make([]float64, len(args))
	for i, a := range args {
		x, err := e.num(a, locals)
		if err != nil {
			return Value{}, err
		}
		xs[i] = x
	}
	need := func(n int) error {
		if len(xs) != n {
			return fmt.Errorf("%s: expected %d argument(s), got %d", name, n, len(xs))
		}
		return nil
	}
	deg := 1.0
	if e.mode == Mapcalc {
		deg = math.Pi / 180
	}
	one := map[string]func(float64) float64{
		"sin":  func(x float64) float64 { return math.Sin(x * deg) },
		"cos":  func(x float64) float64 { return math.Cos(x * deg) },
		"tan":  func(x float64) float64 { return math.Tan(x * deg) },
		"asin": func(x float64) float64 { return math.Asin(x) / deg }, "arcsin": math.Asin,
		"acos": func(x float64) float64 { return math.Acos(x) / deg }, "arccos": math.Acos,
		"atan": func(x float64) float64 { return math.Atan(x) / deg }, "arctan": math.Atan,
		"sinh": math.Sinh, "cosh": math.Cosh, "tanh": math.Tanh,
		"exp": math.Exp, "ln": math.Log, "sqrt": math.Sqrt, "abs": math.Abs,
		"floor": math.Floor, "ceiling": math.Ceil, "ceil": math.Ceil, "round": math.Round,
		"factorial": func(x float64) float64 { return math.Gamma(x + 1) },
		"sign":      func(x float64) float64 { return boolNum(x > 0) - boolNum(x < 0) },
	}
	if f, ok := one[name]; ok {
		if err := need(1); err != nil {
			return Value{}, err
		}
		return Value{num: f(xs[0])}, nil
	}
	switch name {
	case "log":
		if e.mode == Mapcalc {
			if len(xs) == 2 {
				return Value{num: math.Log(xs[0]) / math.Log(xs[1])}, nil
			}
			if err := need(1); err != nil {
				return Value{}, err
			}
			return Value{num: math.Log(xs[0])}, nil
		}
		if err := need(1); err != nil {
			return Value{}, err
		}
		return Value{num: math.Log10(xs[0])}, nil
	case "root":
		if err := need(2); err != nil {
			return Value{}, err
		}
		return Value{num: math.Pow(xs[0], 1/xs[1])}, nil
	case "power":
		if err := need(2); err != nil {
			return Value{}, err
		}
		return Value{num: math.Pow(xs[0], xs[1])}, nil
	case "max", "min":
		if len(xs) == 0 {
			return Value{}, fmt.Errorf("%s: needs arguments", name)
		}
		v := xs[0]
		for _, x := range xs[1:] {
			if name == "max" {
				v = math.Max(v, x)
			} else {
				v = math.Min(v, x)
			}
		}
		return Value{num: v}, nil
	case "if":
		switch len(xs) {
		case 2:
			if xs[0] != 0 {
				return Value{num: xs[1]}, nil
			}
			return Value{num: math.NaN()}, nil
		case 3:
			if xs[0] != 0 {
				return Value{num: xs[1]}, nil
			}
			return Value{num: xs[2]}, nil
		}
		return Value{}, fmt.Errorf("if: expected 2 or 3 arguments, got %d", len(xs))
	}
	return Value{}, fmt.Errorf("unknown function: %s", name)
}

// Printing.

func prec(n Node) int {
	switch n := n.(type) {
	case lambdaNode:
		return 0
	case binNode:
		switch n.op {
		case "=":
			return 1
		case "||":
			return 2
		case "&&":
			return 3
		case "<", ">", "<=", ">=", "==", "!=":
			return 4
		case "+", "-":
			return 5
		case "*", "/", "%":
			return 6
		case "^":
			return 8
		}
	case unaryNode, notNode:
		return 7
	case numNode:
		if n.v < 0 {
			return 7
		}
	}
	return 9
}

// Format prints an expression canonically: no spaces around
// operators, only the parentheses precedence needs, numbers with up to
// 12 significant digits (x->x^2+1, (x, y)->x*y).
func Format(n Node) string {
	var b strings.Builder
	writeExpr(&b, n)
	return b.String()
}

func writeSub(b *strings.Builder, n Node, paren bool) {
	if paren {
		b.WriteByte('(')
	}
	writeExpr(b, n)
	if paren {
		b.WriteByte(')')
	}
}

func writeExpr(b *strings.Builder, n Node) {
	switch n := n.(type) {
	case numNode:
		b.WriteString(FormatNum(n.v))
	case varNode:
		b.WriteString(n.name)
	case unaryNode:
		b.WriteByte('-')
		writeSub(b, n.x, prec(n.x) < 7)
	case notNode:
		b.WriteByte('!')
		writeSub(b, n.x, prec(n.x) < 7)
	case binNode:
		p := prec(n)
		lp, rp := prec(n.l), prec(n.r)
		if n.op == "^" {
			writeSub(b, n.l, lp <= p)
			b.WriteString(n.op)
			writeSub(b, n.r, rp < 7)
			return
		}
		writeSub(b, n.l, lp < p)
		b.WriteString(n.op)
		nonAssoc := n.op == "-" || n.op == "/" || n.op == "%" || p == 4 || p == 1
		writeSub(b, n.r, rp < p || rp == p && nonAssoc)
	case callNode:
		writeSub(b, n.fn, prec(n.fn) < 9)
		b.WriteByte('(')
		for i, a := range n.args {
			if i > 0 {
				b.WriteString(", ")
			}
			writeExpr(b, a)
		}
		b.WriteByte(')')
	case lambdaNode:
		if len(n.params) == 1 {
			b.WriteString(n.params[0])
		} else {
			b.WriteString("(" + strings.Join(n.params, ", ") + ")")
		}
		b.WriteString("->")
		writeExpr(b, n.body)
	case rangeNode:
		b.WriteString(n.kind + "(")
		writeExpr(b, n.body)
		b.WriteString(" : " + n.v + "=")
		writeExpr(b, n.lo)
		b.WriteString("..")
		writeExpr(b, n.hi)
		b.WriteByte(')')
	}
}

// FormatNum formats a number as KAlgebra shows it: up to 12 significant
// digits, no trailing zeros.
func FormatNum(v float64) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	if v == 0 {
		return "0"
	}
	return strconv.FormatFloat(v, 'g', 12, 64)
}

// FreeVars returns the variables an expression uses that are not bound by
// its lambdas or ranges, in order of first use.
func FreeVars(n Node) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(n Node, bound map[string]bool)
	walk = func(n Node, bound map[string]bool) {
		switch n := n.(type) {
		case varNode:
			if !bound[n.name] && !seen[n.name] {
				seen[n.name] = true
				out = append(out, n.name)
			}
		case unaryNode:
			walk(n.x, bound)
		case notNode:
			walk(n.x, bound)
		case binNode:
			walk(n.l, bound)
			walk(n.r, bound)
		case callNode:
			if _, named := n.fn.(varNode); !named {
				walk(n.fn, bound) // a named callee is a function, not a free variable
			}
			for _, a := range n.args {
				walk(a, bound)
			}
		case lambdaNode:
			inner := map[string]bool{}
			for k := range bound {
				inner[k] = true
			}
			for _, p := range n.params {
				inner[p] = true
			}
			walk(n.body, inner)
		case rangeNode:
			walk(n.lo, bound)
			walk(n.hi, bound)
			inner := map[string]bool{n.v: true}
			for k := range bound {
				inner[k] = true
			}
			walk(n.body, inner)
		}
	}
	walk(n, map[string]bool{})
	return out
}

// Lambda returns the parameters and body of a lambda expression (x->x^2);
// ok is false for any other expression.
func Lambda(n Node) (params []string, body Node, ok bool) {
	l, ok := n.(lambdaNode)
	return l.params, l.body, ok
}

// IsEquation reports whether n is an equation (x^2+y^2=9); it evaluates
// to the left side minus the right side.
func IsEquation(n Node) bool {
	b, ok := n.(binNode)
	return ok && b.op == "="
}

// FormatLambda prints the lambda of params and body canonically.
func FormatLambda(params []string, body Node) string {
	return Format(lambdaNode{params: params, body: body})
}

// IsIdent reports whether s is an identifier: a letter or _ then letters,
// digits or _ (ASCII).
func IsIdent(s string) bool {
	if s == "" || !(isIdentStart(s[0])) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentStart(s[i]) && !isDigit(s[i]) {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool      { return '0' <= c && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// RoundSig rounds v to digits significant digits.
func RoundSig(v float64, digits int) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', digits, 64), 64)
	return f
}

// EquationZero returns the left side minus the right side of an equation
// (x^2+y^2=9 → x^2+y^2-9), the function KAlgebra plots an equation as;
// ok is false for any other expression.
func EquationZero(n Node) (zero Node, ok bool) {
	b, ok := n.(binNode)
	if !ok || b.op != "=" {
		return nil, false
	}
	return binNode{op: "-", l: b.l, r: b.r}, true
}
