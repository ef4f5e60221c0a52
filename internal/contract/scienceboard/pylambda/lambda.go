package pylambda

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// DefaultMaxSteps is the step budget of a call when Compile is given no
// WithMaxSteps option. The largest task-file lambda over a realistic dump
// takes a few hundred steps.
const DefaultMaxSteps = 1_000_000

// ErrStepBudget is returned (wrapped) by Call when the lambda runs out of
// its step budget.
var ErrStepBudget = errors.New("pylambda: step budget exhausted")

// SyntaxError reports source that is not a valid Python lambda
// expression, or that names an undefined variable.
type SyntaxError struct {
	Line, Col int    // 1-based; Col counts characters
	Offset    int    // 0-based character offset in the source
	Msg       string // what is wrong
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("pylambda: %d:%d: syntax error: %s", e.Line, e.Col, e.Msg)
}

// UnsupportedError reports valid Python that this package does not
// evaluate: the construct, and why.
type UnsupportedError struct {
	Line, Col int    // 1-based; Col counts characters
	Offset    int    // 0-based character offset in the source
	Construct string // the Python feature, e.g. "f-string"
	Reason    string // why it is not evaluated
}

func (e *UnsupportedError) Error() string {
	s := fmt.Sprintf("pylambda: %d:%d: unsupported: %s", e.Line, e.Col, e.Construct)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// EvalError is an exception raised while a lambda runs (Python would
// raise KeyError, TypeError, ...). Line and Col locate the innermost
// operation of the lambda's source that failed, when known (0 otherwise).
type EvalError struct {
	Line, Col int
	Msg       string
}

func (e *EvalError) Error() string {
	if e.Line == 0 {
		return "pylambda: " + e.Msg
	}
	return fmt.Sprintf("pylambda: %d:%d: %s", e.Line, e.Col, e.Msg)
}

// Option configures Compile.
type Option func(*config)

type config struct {
	maxSteps uint64
	now      func() time.Time
}

// WithMaxSteps sets the step budget of each call (Starlark execution
// steps; 0 means DefaultMaxSteps).
func WithMaxSteps(n uint64) Option {
	return func(c *config) { c.maxSteps = n }
}

// WithNow sets the clock of datetime.datetime.today() and friends
// (default time.Now). The time is used as naive local time in its own
// location.
func WithNow(now func() time.Time) Option {
	return func(c *config) { c.now = now }
}

// Lambda is a compiled lambda. It is safe for concurrent use.
type Lambda struct {
	src        string
	translated string
	fn         *starlark.Function
	params     int
	cfg        config
	em         *emitter
	lines      []int // rune offsets of line starts in src
}

// programPrefix precedes the translation in the Starlark program.
const programPrefix = "__pyl_lambda = "

// Compile parses src, which must be a Python lambda expression, and
// translates it to Starlark. A Python feature it cannot evaluate gives an
// *UnsupportedError; source that is not a valid lambda gives a
// *SyntaxError. Both carry the position in src.
func Compile(src string, opts ...Option) (*Lambda, error) {
	l := &Lambda{src: src, lines: lineStarts(src)}
	for _, o := range opts {
		o(&l.cfg)
	}
	if l.cfg.maxSteps == 0 {
		l.cfg.maxSteps = DefaultMaxSteps
	}
	e, err := parse(src)
	if err != nil {
		return nil, l.locate(err)
	}
	lam, ok := e.(*lambdaExpr)
	if !ok {
		return nil, l.locate(&SyntaxError{Offset: e.offset(), Msg: "expected a lambda expression (lambda params: body)"})
	}
	l.em = &emitter{globals: globalNames}
	if err := l.em.translate(lam); err != nil {
		return nil, l.locate(err)
	}
	l.translated = l.em.b.String()
	for _, p := range lam.params {
		if p.kind == "" {
			l.params++
		}
	}
	thread := l.thread()
	opts2 := &syntax.FileOptions{Set: true}
	globals, err := starlark.ExecFileOptions(opts2, thread, "lambda", programPrefix+l.translated+"\n", predeclared)
	if err != nil {
		return nil, l.locate(l.starlarkError(err, true))
	}
	fn, ok := globals["__pyl_lambda"].(*starlark.Function)
	if !ok {
		return nil, fmt.Errorf("pylambda: internal error: translation did not give a function")
	}
	globals.Freeze()
	l.fn = fn
	return l, nil
}

// Source returns the Python source the lambda was compiled from.
func (l *Lambda) Source() string { return l.src }

// Translated returns the Starlark expression that runs for the lambda.
func (l *Lambda) Translated() string { return l.translated }

// Params returns the number of the lambda's ordinary parameters
// (without *args and **kwargs).
func (l *Lambda) Params() int { return l.params }

func (l *Lambda) thread() *starlark.Thread {
	th := &starlark.Thread{
		Name:  "pylambda",
		Print: func(*starlark.Thread, string) {},
		Load: func(*starlark.Thread, string) (starlark.StringDict, error) {
			return nil, errors.New("load is not available")
		},
	}
	th.SetMaxExecutionSteps(l.cfg.maxSteps)
	th.OnMaxSteps = func(th *starlark.Thread) { th.Cancel(ErrStepBudget.Error()) }
	th.SetLocal(nowKey, l.cfg.now)
	return th
}

// Call calls the lambda with JSON-like Go values and returns its result
// as a JSON-like Go value; the package documentation lists the
// conversions. The call
// stops with an error wrapping ctx.Err() when ctx ends, and with one
// wrapping ErrStepBudget when the budget runs out. An exception in the
// lambda is an *EvalError.
func (l *Lambda) Call(ctx context.Context, args ...any) (any, error) {
	v, err := l.call(ctx, args)
	if err != nil {
		return nil, err
	}
	out, err := fromValue(v, 0)
	if err != nil {
		return nil, fmt.Errorf("pylambda: result: %w", err)
	}
	return out, nil
}

// Truth calls the lambda like Call and returns the Python truth value of
// its result, as ScienceBoard's `if pred(...)` and filter(key, ...) use it.
func (l *Lambda) Truth(ctx context.Context, args ...any) (bool, error) {
	v, err := l.call(ctx, args)
	if err != nil {
		return false, err
	}
	return bool(v.Truth()), nil
}

func (l *Lambda) call(ctx context.Context, args []any) (starlark.Value, error) {
	return l.callThread(ctx, l.thread(), args)
}

// callThread calls the lambda in th, a thread made by l.thread.
func (l *Lambda) callThread(ctx context.Context, th *starlark.Thread, args []any) (starlark.Value, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("pylambda: %w", err)
	}
	sargs := make(starlark.Tuple, len(args))
	for i, a := range args {
		v, err := toValue(a, 0)
		if err != nil {
			return nil, fmt.Errorf("pylambda: argument %d: %w", i+1, err)
		}
		sargs[i] = v
	}
	th.SetLocal(limitsKey, &limits{maxSteps: l.cfg.maxSteps, ctx: ctx})
	stop := context.AfterFunc(ctx, func() { th.Cancel("context done") })
	defer stop()
	v, err := starlark.Call(th, l.fn, sargs, nil)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("pylambda: %w", ctxErr)
		}
		if th.ExecutionSteps() >= l.cfg.maxSteps || errors.Is(err, ErrStepBudget) {
			return nil, fmt.Errorf("%w (%d steps)", ErrStepBudget, l.cfg.maxSteps)
		}
		return nil, l.locate(l.starlarkError(err, false))
	}
	return v, nil
}

// starlarkError converts an error of the Starlark compiler or interpreter
// into this package's error types, with the position mapped back to the
// Python source.
func (l *Lambda) starlarkError(err error, compiling bool) error {
	var pos syntax.Position
	msg := err.Error()
	var se syntax.Error
	var ee *starlark.EvalError
	switch {
	case errors.As(err, &se):
		pos, msg = se.Pos, se.Msg
	case errors.As(err, &ee):
		msg = ee.Msg
		for i := len(ee.CallStack) - 1; i >= 0; i-- {
			if fr := ee.CallStack[i]; fr.Pos.Filename() == "lambda" {
				pos = fr.Pos
				break
			}
		}
	default:
		if rl, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range rl.Unwrap() {
				if errors.As(e, &se) {
					pos, msg = se.Pos, se.Msg
					break
				}
			}
		}
	}
	off, known := 0, false
	if pos.Line == 1 && pos.Col > 0 {
		off, known = l.em.srcOffset(int(pos.Col)-1-len(programPrefix)), true
	}
	if compiling && ee == nil {
		return &UnsupportedError{Offset: off, Construct: "translated expression", Reason: "Starlark rejects it: " + msg}
	}
	msg = strings.TrimPrefix(msg, "Starlark computation cancelled: ")
	out := &EvalError{Msg: msg}
	if known {
		out.Line, out.Col = -1, off // locate turns the offset into a line and column
	}
	return out
}

// locate fills in the line and column of an error from its offset.
func (l *Lambda) locate(err error) error {
	var se *SyntaxError
	var ue *UnsupportedError
	var ee *EvalError
	switch {
	case errors.As(err, &se):
		se.Line, se.Col = l.lineCol(se.Offset)
	case errors.As(err, &ue):
		ue.Line, ue.Col = l.lineCol(ue.Offset)
	case errors.As(err, &ee):
		if ee.Line == -1 { // Col holds an offset
			ee.Line, ee.Col = l.lineCol(ee.Col)
		}
	}
	return err
}

func lineStarts(src string) []int {
	starts := []int{0}
	i := 0
	for _, r := range src {
		i++
		if r == '\n' {
			starts = append(starts, i)
		}
	}
	return starts
}

func (l *Lambda) lineCol(off int) (int, int) {
	line := 0
	for line+1 < len(l.lines) && l.lines[line+1] <= off {
		line++
	}
	return line + 1, off - l.lines[line] + 1
}
