package pylambda

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.starlark.net/syntax"
)

// Names of the helpers that translated code calls. They start with
// "__pyl_", a prefix that Compile refuses in lambda source.
const (
	hPow    = "__pyl_pow"      // a ** b
	hSet    = "__pyl_set"      // set displays and comprehensions
	hDict   = "__pyl_dict"     // dict displays with several entries
	hAssign = "__pyl_let"      // n := v
	hRead   = "__pyl_get"      // read of a name bound by :=
	hScope  = "__pyl_w"        // the dict holding names bound by :=
	hInf    = "__pyl_inf"      // a float literal too large for float64
	hMod    = "__pyl_mod"      // a % b
	hFloor  = "__pyl_floordiv" // a // b
	hMul    = "__pyl_mul"      // a * b
	reserve = "__pyl"
)

// pyOnlyBuiltins are Python builtins that this package does not provide;
// a lambda naming one gets an *UnsupportedError rather than a name error.
var pyOnlyBuiltins = map[string]string{
	"aiter": "async", "anext": "async", "ascii": "", "bin": "", "breakpoint": "no debugger",
	"bytearray": "bytes have no JSON form", "callable": "", "classmethod": "no classes",
	"compile": "no code generation", "complex": "complex numbers have no JSON form",
	"copyright": "", "credits": "", "delattr": "no mutation of objects", "eval": "no code generation",
	"exec": "no code generation", "exit": "no process control", "format": "", "frozenset": "",
	"globals": "no access to scopes", "help": "", "hex": "", "id": "no object identity",
	"input": "no I/O", "issubclass": "no classes", "iter": "iterators are not modelled",
	"license": "", "locals": "no access to scopes", "memoryview": "bytes have no JSON form",
	"next": "iterators are not modelled", "object": "no classes", "oct": "",
	"open": "no I/O", "property": "no classes", "quit": "no process control",
	"setattr": "no mutation of objects", "slice": "", "staticmethod": "no classes",
	"super": "no classes", "vars": "no access to scopes", "Ellipsis": "Ellipsis has no JSON form",
	"NotImplemented": "",
}

// knownModules are the modules __import__ gives.
var knownModules = map[string]bool{"math": true, "datetime": true}

// scope is a lexical scope of the lambda: a lambda's parameters or a
// comprehension's targets.
type scope struct {
	parent *scope
	names  map[string]bool
	top    bool // the outermost lambda, where := names live
}

func (s *scope) lookup(name string) *scope {
	for ; s != nil; s = s.parent {
		if s.names[name] {
			return s
		}
	}
	return nil
}

// emitter translates the parsed lambda into Starlark source text and
// records, for every emitted token it knows the origin of, the pair
// (offset in the output, offset in the source), in runes.
type emitter struct {
	b       strings.Builder
	n       int // runes written
	marks   [][2]int
	walrus  map[string]bool // names bound by := in the outermost lambda
	globals map[string]bool // names the lambda may read from the builtins
	tmp     int
}

func (em *emitter) write(s string) {
	em.b.WriteString(s)
	em.n += utf8.RuneCountInString(s)
}

func (em *emitter) mark(src int) {
	if k := len(em.marks); k > 0 && em.marks[k-1][0] == em.n {
		em.marks[k-1][1] = src
		return
	}
	em.marks = append(em.marks, [2]int{em.n, src})
}

// srcOffset maps an output rune offset back to a source offset.
func (em *emitter) srcOffset(out int) int {
	i := sort.Search(len(em.marks), func(i int) bool { return em.marks[i][0] > out }) - 1
	if i < 0 {
		return 0
	}
	return em.marks[i][1]
}

func unsupported(pos int, construct, reason string) error {
	return &UnsupportedError{Offset: pos, Construct: construct, Reason: reason}
}

// translate checks the lambda and writes its Starlark form.
func (em *emitter) translate(l *lambdaExpr) error {
	em.walrus = map[string]bool{}
	if err := em.collectWalrus(l.body, false); err != nil {
		return err
	}
	for _, pr := range l.params {
		if pr.deflt != nil {
			if err := em.collectWalrus(pr.deflt, true); err != nil {
				return err
			}
		}
	}
	top := &scope{names: map[string]bool{}, top: true}
	em.mark(l.pos)
	em.write("lambda")
	if err := em.params(l.params, nil, top); err != nil {
		return err
	}
	em.write(": ")
	if len(em.walrus) == 0 {
		return em.expr(l.body, top)
	}
	// Names bound by := live in a dict created afresh for each call and
	// passed to an inner lambda; parameters that are also := targets
	// start with the argument's value.
	em.write("(lambda " + hScope + ": ")
	if err := em.expr(l.body, top); err != nil {
		return err
	}
	em.write(")({")
	names := make([]string, 0, len(em.walrus))
	for n := range em.walrus {
		if top.names[n] {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for i, n := range names {
		if i > 0 {
			em.write(", ")
		}
		em.write(syntax.Quote(n, false) + ": " + starName(n))
	}
	em.write("})")
	return nil
}

// collectWalrus records the := targets of the outermost lambda; one inside
// a nested lambda is unsupported.
func (em *emitter) collectWalrus(e expr, nested bool) error {
	var err error
	walk(e, func(x expr, inLambda bool) bool {
		if err != nil {
			return false
		}
		w, ok := x.(*walrusExpr)
		if !ok {
			return true
		}
		if inLambda || nested {
			err = unsupported(w.pos, "assignment expression ':=' inside a nested lambda or a default value", "only the outermost lambda's := bindings are translated")
			return false
		}
		if strings.HasPrefix(w.name, reserve) {
			err = unsupported(w.pos, "name "+w.name, "names starting with "+reserve+" are reserved for the translation")
			return false
		}
		em.walrus[w.name] = true
		return true
	})
	return err
}

// walk calls f on e and its subexpressions in source order; inLambda
// tells whether x is inside a nested lambda. f returns false to skip x's
// children.
func walk(e expr, f func(x expr, inLambda bool) bool) {
	var rec func(e expr, inLambda bool)
	rec = func(e expr, inLambda bool) {
		if e == nil || !f(e, inLambda) {
			return
		}
		switch e := e.(type) {
		case *seqExpr:
			for _, x := range e.elts {
				rec(x, inLambda)
			}
		case *dictExpr:
			for i := range e.vals {
				rec(e.keys[i], inLambda)
				rec(e.vals[i], inLambda)
			}
		case *compExpr:
			for _, c := range e.clauses {
				rec(c.iter, inLambda)
				for _, x := range c.ifs {
					rec(x, inLambda)
				}
			}
			rec(e.elt, inLambda)
			rec(e.val, inLambda)
		case *unaryExpr:
			rec(e.x, inLambda)
		case *binaryExpr:
			rec(e.x, inLambda)
			rec(e.y, inLambda)
		case *compareExpr:
			rec(e.x, inLambda)
			for _, y := range e.ys {
				rec(y, inLambda)
			}
		case *condExpr:
			rec(e.then, inLambda)
			rec(e.cond, inLambda)
			rec(e.els_, inLambda)
		case *lambdaExpr:
			for _, pr := range e.params {
				rec(pr.deflt, inLambda)
			}
			rec(e.body, true)
		case *callExpr:
			rec(e.fn, inLambda)
			for _, a := range e.args {
				rec(a.value, inLambda)
			}
		case *attrExpr:
			rec(e.x, inLambda)
		case *indexExpr:
			rec(e.x, inLambda)
			rec(e.index, inLambda)
		case *sliceExpr:
			rec(e.lo, inLambda)
			rec(e.hi, inLambda)
			rec(e.step, inLambda)
		case *walrusExpr:
			rec(e.value, inLambda)
		case *starExpr:
			rec(e.x, inLambda)
		}
	}
	rec(e, false)
}

// starName is the Starlark spelling of a Python identifier: "load" is a
// Starlark keyword.
func starName(n string) string {
	if n == "load" {
		return reserve + "_load"
	}
	return n
}

func (em *emitter) checkName(pos int, n string) error {
	if strings.HasPrefix(n, reserve) {
		return unsupported(pos, "name "+n, "names starting with "+reserve+" are reserved for the translation")
	}
	return nil
}

// params writes a parameter list and binds the names in sc. outer is the
// scope the default values are evaluated in (nil: the builtins only).
func (em *emitter) params(ps []param, outer, sc *scope) error {
	if len(ps) > 0 {
		em.write(" ")
	}
	for i, pr := range ps {
		if i > 0 {
			em.write(", ")
		}
		em.mark(pr.pos)
		switch pr.kind {
		case "/":
			return unsupported(pr.pos, "positional-only parameter marker '/'", "Starlark has no positional-only parameters")
		case "*", "**":
			em.write(pr.kind)
		}
		if pr.name != "" {
			if err := em.checkName(pr.pos, pr.name); err != nil {
				return err
			}
			em.write(starName(pr.name))
			sc.names[pr.name] = true
		}
		if pr.deflt != nil {
			em.write("=")
			if err := em.expr(pr.deflt, outer); err != nil {
				return err
			}
		}
	}
	return nil
}

// compound reports whether e must be parenthesized as an operand.
func compound(e expr) bool {
	switch e := e.(type) {
	case *binaryExpr:
		return e.op != "**" && e.op != "%" && e.op != "//" && e.op != "*" // those become calls
	case *unaryExpr, *compareExpr, *condExpr, *lambdaExpr:
		return true
	}
	return false
}

// primaryOperand writes the operand of an attribute, subscript or call:
// also a number literal is parenthesized (1 .real must not become 1.real).
func (em *emitter) primaryOperand(e expr, sc *scope) error {
	if c, ok := e.(*constExpr); ok && (c.kind == tInt || c.kind == tFloat) {
		em.write("(")
		if err := em.expr(e, sc); err != nil {
			return err
		}
		em.write(")")
		return nil
	}
	return em.operand(e, sc)
}

func (em *emitter) operand(e expr, sc *scope) error {
	if !compound(e) {
		return em.expr(e, sc)
	}
	em.write("(")
	if err := em.expr(e, sc); err != nil {
		return err
	}
	em.write(")")
	return nil
}

func formatFloat(f float64) string {
	if math.IsInf(f, 0) {
		return hInf
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// isSingleton reports whether e is the literal None, True or False, or
// names a builtin class (type(x) is dict), for which identity and
// equality agree.
func isSingleton(e expr, sc *scope) bool {
	switch e := e.(type) {
	case *constExpr:
		return e.kind == tName
	case *nameExpr:
		return sc.lookup(e.name) == nil && pyClassNames[e.name]
	}
	return false
}

func (em *emitter) expr(e expr, sc *scope) error {
	em.mark(e.offset())
	switch e := e.(type) {
	case *nameExpr:
		return em.name(e, sc)
	case *constExpr:
		switch e.kind {
		case tInt:
			em.write(e.ival.String())
		case tFloat:
			em.write(formatFloat(e.fval))
		case tString:
			em.write(syntax.Quote(e.sval, false))
		default:
			em.write(e.sval)
		}
		return nil
	case *seqExpr:
		for _, x := range e.elts {
			if s, ok := x.(*starExpr); ok {
				return unsupported(s.pos, "iterable unpacking '*' in a "+e.kind+" display", "Starlark has no unpacking in displays")
			}
		}
		switch e.kind {
		case "tuple":
			em.write("(")
			if err := em.join(", ", sc, e.elts...); err != nil {
				return err
			}
			if len(e.elts) == 1 {
				em.write(",")
			}
			em.write(")")
		case "list":
			em.write("[")
			if err := em.join(", ", sc, e.elts...); err != nil {
				return err
			}
			em.write("]")
		case "set":
			em.write(hSet + "([")
			if err := em.join(", ", sc, e.elts...); err != nil {
				return err
			}
			em.write("])")
		}
		return nil
	case *dictExpr:
		for i, k := range e.keys {
			if k == nil {
				return unsupported(e.vals[i].offset(), "dict unpacking '**' in a dict display", "Starlark has no unpacking in displays")
			}
		}
		if len(e.keys) < 2 {
			em.write("{")
			for i := range e.keys {
				if err := em.join(": ", sc, e.keys[i], e.vals[i]); err != nil {
					return err
				}
			}
			em.write("}")
			return nil
		}
		// Python lets a later duplicate key win; a Starlark dict
		// literal fails on duplicates, so build the dict from pairs.
		em.write(hDict + "((")
		for i := range e.keys {
			if i > 0 {
				em.write(", ")
			}
			em.write("(")
			if err := em.join(", ", sc, e.keys[i], e.vals[i]); err != nil {
				return err
			}
			em.write(")")
		}
		em.write("))")
		return nil
	case *compExpr:
		return em.comprehension(e, sc)
	case *unaryExpr:
		if e.op == "not" {
			em.write("not ")
		} else {
			em.write(e.op)
		}
		return em.operand(e.x, sc)
	case *binaryExpr:
		switch e.op {
		case "@":
			return unsupported(e.opPos, "matrix multiplication '@'", "no matrices")
		case "**", "%", "//", "*":
			em.write(map[string]string{"**": hPow, "%": hMod, "//": hFloor, "*": hMul}[e.op] + "(")
			if err := em.join(", ", sc, e.x, e.y); err != nil {
				return err
			}
			em.mark(e.opPos)
			em.write(")")
			return nil
		}
		if err := em.operand(e.x, sc); err != nil {
			return err
		}
		em.write(" ")
		em.mark(e.opPos)
		em.write(e.op + " ")
		return em.operand(e.y, sc)
	case *compareExpr:
		return em.compare(e, sc)
	case *condExpr:
		if err := em.operand(e.then, sc); err != nil {
			return err
		}
		em.write(" if ")
		if err := em.operand(e.cond, sc); err != nil {
			return err
		}
		em.write(" else ")
		return em.operand(e.els_, sc)
	case *lambdaExpr:
		inner := &scope{parent: sc, names: map[string]bool{}}
		em.write("lambda")
		if err := em.params(e.params, sc, inner); err != nil {
			return err
		}
		em.write(": ")
		return em.expr(e.body, inner)
	case *callExpr:
		return em.call(e, sc)
	case *attrExpr:
		if err := em.primaryOperand(e.x, sc); err != nil {
			return err
		}
		if e.name == "load" {
			return unsupported(e.dot, "attribute 'load'", "load is a Starlark keyword and no value here has such an attribute")
		}
		em.mark(e.dot)
		em.write("." + e.name)
		return nil
	case *indexExpr:
		if err := em.primaryOperand(e.x, sc); err != nil {
			return err
		}
		em.mark(e.lbrak)
		em.write("[")
		switch idx := e.index.(type) {
		case *sliceExpr:
			if err := em.slice(idx, sc); err != nil {
				return err
			}
		case *seqExpr:
			for _, x := range idx.elts {
				if _, ok := x.(*sliceExpr); ok {
					return unsupported(x.offset(), "multi-dimensional slice", "no value here takes a tuple of slices")
				}
			}
			if err := em.expr(idx, sc); err != nil {
				return err
			}
		default:
			if err := em.expr(idx, sc); err != nil {
				return err
			}
		}
		em.write("]")
		return nil
	case *sliceExpr:
		return unsupported(e.pos, "slice outside a subscript", "")
	case *walrusExpr:
		if sc.lookup(e.name) != nil && !sc.lookup(e.name).top {
			return &SyntaxError{Offset: e.pos, Msg: sprintf("assignment expression cannot rebind comprehension iteration variable %q", e.name)}
		}
		em.write(hAssign + "(" + hScope + ", " + syntax.Quote(e.name, false) + ", ")
		if err := em.expr(e.value, sc); err != nil {
			return err
		}
		em.write(")")
		return nil
	case *starExpr:
		return &SyntaxError{Offset: e.pos, Msg: "cannot use starred expression here"}
	case *unsupportedExpr:
		return unsupported(e.pos, e.construct, e.reason)
	}
	return unsupported(e.offset(), "expression", "not translated")
}

// join writes the expressions elts separated by sep.
func (em *emitter) join(sep string, sc *scope, elts ...expr) error {
	for i, x := range elts {
		if i > 0 {
			em.write(sep)
		}
		if err := em.expr(x, sc); err != nil {
			return err
		}
	}
	return nil
}

func (em *emitter) slice(s *sliceExpr, sc *scope) error {
	for i, x := range []expr{s.lo, s.hi, s.step} {
		if i > 0 {
			em.write(":")
		}
		if x != nil {
			if err := em.expr(x, sc); err != nil {
				return err
			}
		}
	}
	return nil
}

func (em *emitter) name(e *nameExpr, sc *scope) error {
	if err := em.checkName(e.pos, e.name); err != nil {
		return err
	}
	if s := sc.lookup(e.name); s != nil {
		if s.top && em.walrus[e.name] {
			em.write(hRead + "(" + hScope + ", " + syntax.Quote(e.name, false) + ")")
			return nil
		}
		em.write(starName(e.name))
		return nil
	}
	if em.walrus[e.name] && sc != nil {
		em.write(hRead + "(" + hScope + ", " + syntax.Quote(e.name, false) + ")")
		return nil
	}
	if em.globals[e.name] {
		em.write(e.name)
		return nil
	}
	if reason, ok := pyOnlyBuiltins[e.name]; ok || isExceptionName(e.name) {
		if reason == "" {
			reason = "not provided"
		}
		return unsupported(e.pos, "builtin "+e.name, reason)
	}
	return &SyntaxError{Offset: e.pos, Msg: sprintf("name %q is not defined (Python would raise NameError when it is evaluated)", e.name)}
}

func isExceptionName(n string) bool {
	if n == "" || n[0] < 'A' || n[0] > 'Z' {
		return false
	}
	for _, suf := range []string{"Error", "Exception", "Warning", "Exit", "Iteration", "Interrupt"} {
		if strings.HasSuffix(n, suf) {
			return true
		}
	}
	return false
}

func (em *emitter) comprehension(c *compExpr, sc *scope) error {
	switch c.kind {
	case "set":
		em.write(hSet + "([")
	case "dict":
		em.write("{")
	default: // list, and generator expressions, evaluated eagerly
		em.write("[")
	}
	// Scopes: the first iterable is evaluated outside the comprehension;
	// every target is bound inside it.
	inner := &scope{parent: sc, names: map[string]bool{}}
	var binds func(t expr) error
	binds = func(t expr) error {
		switch t := t.(type) {
		case *nameExpr:
			if err := em.checkName(t.pos, t.name); err != nil {
				return err
			}
			inner.names[t.name] = true
			return nil
		case *seqExpr:
			for _, x := range t.elts {
				if err := binds(x); err != nil {
					return err
				}
			}
			return nil
		case *starExpr:
			return unsupported(t.pos, "starred target in a for clause", "Starlark has no starred assignment")
		}
		return unsupported(t.offset(), "attribute or subscript target in a for clause", "only names can be bound")
	}
	for _, cl := range c.clauses {
		if err := binds(cl.target); err != nil {
			return err
		}
		var err error
		walk(cl.iter, func(x expr, _ bool) bool {
			if w, ok := x.(*walrusExpr); ok && err == nil {
				err = &SyntaxError{Offset: w.pos, Msg: "assignment expression cannot be used in a comprehension iterable expression"}
			}
			return err == nil
		})
		if err != nil {
			return err
		}
	}
	if err := em.expr(c.elt, inner); err != nil {
		return err
	}
	if c.kind == "dict" {
		em.write(": ")
		if err := em.expr(c.val, inner); err != nil {
			return err
		}
	}
	for i, cl := range c.clauses {
		em.mark(cl.pos)
		em.write(" for ")
		if err := em.target(cl.target); err != nil {
			return err
		}
		em.write(" in ")
		iterScope := inner
		if i == 0 {
			iterScope = sc
		}
		if err := em.operand(cl.iter, iterScope); err != nil {
			return err
		}
		for _, cond := range cl.ifs {
			em.write(" if ")
			if err := em.operand(cond, inner); err != nil {
				return err
			}
		}
	}
	switch c.kind {
	case "set":
		em.write("])")
	case "dict":
		em.write("}")
	default:
		em.write("]")
	}
	return nil
}

func (em *emitter) target(t expr) error {
	em.mark(t.offset())
	switch t := t.(type) {
	case *nameExpr:
		em.write(starName(t.name))
	case *seqExpr:
		em.write("(")
		for i, x := range t.elts {
			if i > 0 {
				em.write(", ")
			}
			if err := em.target(x); err != nil {
				return err
			}
		}
		if len(t.elts) == 1 {
			em.write(",")
		}
		em.write(")")
	}
	return nil
}

// compare writes a comparison. "is" and "is not" become == and != when
// one side is None, True, False or a class such as dict (identity and
// equality agree there). A chain a < b < c evaluates b once, as Python does,
// through an immediately called lambda.
func (em *emitter) compare(c *compareExpr, sc *scope) error {
	operands := append([]expr{c.x}, c.ys...)
	ops := make([]string, len(c.ops))
	for i, op := range c.ops {
		switch op {
		case "is", "is not":
			if !isSingleton(operands[i], sc) && !isSingleton(operands[i+1], sc) {
				return unsupported(c.opPos[i], "'"+op+"' with an operand other than None, True, False or a builtin class", "object identity is not defined for JSON values")
			}
			ops[i] = map[string]string{"is": "==", "is not": "!="}[op]
		default:
			ops[i] = op
		}
	}
	if len(ops) == 1 {
		if err := em.operand(operands[0], sc); err != nil {
			return err
		}
		em.write(" ")
		em.mark(c.opPos[0])
		em.write(ops[0] + " ")
		return em.operand(operands[1], sc)
	}
	// a op0 b op1 c ... → (lambda t0, t1: t0 op0 t1 and (lambda t2: t1 op1 t2 and ...)(c))(a, b)
	simple := func(e expr) bool {
		switch e.(type) {
		case *nameExpr, *constExpr:
			return true
		}
		return false
	}
	allSimple := true
	for _, o := range operands[1 : len(operands)-1] {
		allSimple = allSimple && simple(o)
	}
	if allSimple {
		// Middle operands without effects or cost: a < b and b < c.
		for i, op := range ops {
			if i > 0 {
				em.write(" and ")
			}
			em.write("(")
			if err := em.operand(operands[i], sc); err != nil {
				return err
			}
			em.write(" ")
			em.mark(c.opPos[i])
			em.write(op + " ")
			if err := em.operand(operands[i+1], sc); err != nil {
				return err
			}
			em.write(")")
		}
		return nil
	}
	tmp := func() string {
		em.tmp++
		return reserve + "_c" + strconv.Itoa(em.tmp)
	}
	prev := tmp()
	first := tmp()
	em.write("(lambda " + prev + ", " + first + ": ")
	cur := first
	for i := 0; i < len(ops); i++ {
		em.write(prev + " ")
		em.mark(c.opPos[i])
		em.write(ops[i] + " " + cur)
		if i == len(ops)-1 {
			break
		}
		next := tmp()
		em.write(" and (lambda " + next + ": ")
		prev, cur = cur, next
	}
	for i := len(ops) - 1; i >= 1; i-- {
		em.write(")(")
		if err := em.expr(operands[i+1], sc); err != nil {
			return err
		}
		em.write(")")
	}
	em.write(")(")
	if err := em.expr(operands[0], sc); err != nil {
		return err
	}
	em.write(", ")
	if err := em.expr(operands[1], sc); err != nil {
		return err
	}
	em.write(")")
	return nil
}

func (em *emitter) call(c *callExpr, sc *scope) error {
	// __import__('name'): the module must be one we provide.
	if n, ok := c.fn.(*nameExpr); ok && n.name == "__import__" && sc.lookup(n.name) == nil && len(c.args) > 0 && c.args[0].kind == "" {
		if s, ok := c.args[0].value.(*constExpr); ok && s.kind == tString && !knownModules[s.sval] {
			return unsupported(s.pos, "module "+strconv.Quote(s.sval), "only math and datetime can be imported")
		}
	}
	if err := em.primaryOperand(c.fn, sc); err != nil {
		return err
	}
	em.mark(c.lpar)
	em.write("(")
	// Starlark wants positional, then keyword, then *args, then **kwargs.
	rank := map[string]int{"": 0, "=": 1, "*": 2, "**": 3}
	last := 0
	for i, a := range c.args {
		if rank[a.kind] < last {
			return unsupported(a.pos, "argument order", "Starlark needs positional, keyword, *args, **kwargs arguments in that order")
		}
		if a.kind == "*" && last == 2 || a.kind == "**" && last == 3 {
			return unsupported(a.pos, "repeated argument unpacking", "Starlark allows one *args and one **kwargs")
		}
		last = rank[a.kind]
		if i > 0 {
			em.write(", ")
		}
		em.mark(a.pos)
		switch a.kind {
		case "=":
			if err := em.checkName(a.pos, a.name); err != nil {
				return err
			}
			if a.name == "load" {
				return unsupported(a.pos, "keyword argument 'load'", "load is a Starlark keyword")
			}
			em.write(a.name + "=")
		case "*", "**":
			em.write(a.kind)
		}
		if err := em.expr(a.value, sc); err != nil {
			return err
		}
	}
	em.write(")")
	return nil
}
