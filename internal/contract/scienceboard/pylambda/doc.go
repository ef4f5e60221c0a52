// Package pylambda evaluates the Python lambda expressions of ScienceBoard
// task files (the key, pred, find and value fields of evaluate items) in a
// sandbox: the source is parsed with Python 3.11's expression grammar,
// translated to Starlark, and run by go.starlark.net with a step budget,
// context cancellation, no I/O and no load().
//
//	key, err := pylambda.Compile("lambda dump: dump['layers']")
//	pred, err := pylambda.Compile("lambda key, value: any([item['name'] == value for item in key])")
//	k, err := key.Call(ctx, json.RawMessage(dumpJSON))
//	ok, err := pred.Truth(ctx, k, "countries@PERMANENT")
//
// All 158 lambdas of the 169 task files compile (TestTaskFileLambdasCompile),
// and testdata/golden.json holds 1160 calls recorded with CPython 3.11
// (tools/pylambda-golden/gen.py; regenerate with
// go test ./internal/contract/scienceboard/pylambda -run TestGolden -update) that
// the Starlark results match exactly, types and float bits included, apart
// from the known divergences listed in golden_test.go.
//
// # Errors
//
// Compile returns a *SyntaxError for source that is not a lambda
// expression, is not valid Python, or names an undefined variable (Python
// would raise NameError when evaluating it), and an *UnsupportedError,
// with the construct and the reason, for valid Python that is not
// evaluated. Both carry the line and column (in characters) in the source.
// Call returns an *EvalError for an exception raised by the lambda (Python
// would raise KeyError, TypeError, ...) with the position of the failing
// operation, an error wrapping ErrStepBudget when the budget runs out, and
// one wrapping ctx.Err() when the context ends.
//
// # Values
//
// Call's arguments are JSON-like Go values: nil, bool, string, float64,
// json.Number, Go integers, []any, map[string]any (and other slices and
// string-keyed maps), or json.RawMessage. json.Number and json.RawMessage
// give exactly what Python's json.loads gives: a number without fraction
// or exponent is an int, others are floats, and objects keep their key
// order. A float64 that is integral and at most 2^53 in magnitude becomes
// an int (encoding/json cannot tell 400 from 400.0; the task files mean
// ints there), and map[string]any keys are inserted in sorted order.
// Results come back as nil, bool, string, json.Number (ints, exact),
// float64, []any (lists, tuples, sets) and map[string]any (dicts with
// string keys); Truth gives Python's truth value of the result instead.
//
// # Translation
//
// Python that Starlark lacks is translated on the syntax tree, never on
// the text:
//
//   - x ** y calls a helper with Python's semantics (exact int powers,
//     int ** negative int is a float, CPython's float special cases,
//     OverflowError and ZeroDivisionError); an integral float exponent is
//     computed with 256-bit intermediates and rounded once, a fractional
//     one with Go's math.Pow.
//   - x % y and x // y call helpers that use CPython's float algorithm
//     (-720.0 % 360 is 0.0, 1 // 0.1 is 9.0) and Starlark's operators
//     otherwise; x * y calls one that bounds repetition of strings and
//     lists to 1 Mi elements.
//   - n := v (walrus): the names bound by := in the lambda live in a dict
//     created for each call; reads and writes go through helpers, so a
//     tuple of assignments (Celestia B-12) evaluates left to right as in
//     Python.
//   - a < b < c evaluates b once, through an immediately called lambda
//     (or a < b and b < c when b is a name or literal).
//   - x is None, x is not True, type(x) is dict: == and != (identity is
//     only translated against None, True, False and the builtin classes).
//   - Generator expressions become list comprehensions (see below).
//   - {a, b} and set comprehensions build sets; a dict display with
//     several entries is built from pairs so that a repeated key keeps the
//     last value, as in Python.
//   - String literals are decoded with Python's rules (prefixes r and u,
//     implicit concatenation, \x, \u, \U, octal and unknown escapes) and
//     re-encoded; number literals lose their underscores; a float literal
//     too large for float64 is inf; the identifier load, a Starlark
//     keyword, is renamed.
//   - __import__('math') gives go.starlark.net/lib/math with Python's
//     errors (math domain error, math range error), CPython's degrees and
//     radians, and fmod, log10, log2, trunc, isnan, isinf, isfinite,
//     isclose, inf, nan, tau. __import__('datetime') gives
//     datetime.datetime.today()/now() and datetime.date.today() (clock:
//     WithNow) with strftime (C-locale directives), isoformat and the
//     date and time fields. Other modules are unsupported.
//   - Python builtins that Starlark lacks or defines differently: round
//     (CPython's correctly rounded decimal rounding, half to even), sum
//     (Python 3.11: a left fold with +; 3.12 sums floats with
//     compensation), pow (with a modulus too), divmod, map and filter
//     (returning lists), isinstance and type (type(x) returns the builtin
//     int, str, dict, ... so that type(x) == dict works), and range, which
//     refuses more elements than the step budget (Starlark's builtins
//     iterate without counting steps).
//
// # Unsupported
//
// These give an *UnsupportedError: f-strings, bytes and imaginary
// literals, \N{...} escapes and lone surrogates, Ellipsis, @, await,
// yield and async comprehensions, positional-only parameters, * and **
// unpacking inside displays, attribute or subscript targets and starred
// targets in for clauses, := inside a nested lambda or a default value,
// multi-dimensional slices, `is` between arbitrary values, imports other
// than math and datetime, Python builtins not listed above (open, eval,
// next, iter, format, hex, ...) and exception classes.
//
// # Differences from CPython
//
// Starlark's semantics remain where the translation does not reach:
//
//   - bool is not an int: True == 1 is False, True + 1 is an error
//     (sum, round, pow, divmod, % and // do treat bools as ints).
//   - Strings are UTF-8 bytes: len, indexing and slicing count bytes, and
//     strings are not iterable (use a comprehension over s.elems()).
//   - Generator expressions, map, filter, reversed, zip, enumerate and
//     dict views are lists: any() and all() over a generator evaluate every
//     element, so an element that raises fails the call where Python could
//     have stopped early.
//   - str.format has no format specs ({:.2f}); str() and % formatting of
//     floats follow Starlark (1e+15 where Python prints 1000000000000000.0).
//   - There is no object model: no __class__, __dict__, dunder methods or
//     classes; default parameter values are frozen.
//   - The step budget counts interpreted steps and the loops of this
//     package's builtins; a single Starlark builtin (sorted, str.join, a
//     string method) on a large value runs to its end.
package pylambda
