package pylambda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// maxPowBits bounds the size of an integer power (Python has no such
// limit; a lambda over JSON values has no use for larger numbers).
const maxPowBits = 1 << 16

// universeNames are the Starlark builtins that Python also has under the
// same name and with the same meaning for JSON values.
var universeNames = []string{
	"abs", "all", "any", "bool", "bytes", "chr", "dict", "dir", "enumerate",
	"float", "getattr", "hasattr", "hash", "int", "len", "list", "max", "min",
	"ord", "print", "repr", "reversed", "set", "sorted", "str",
	"tuple", "zip",
}

var noneType = starlark.NewBuiltin("NoneType", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
		return nil, err
	}
	return starlark.None, nil
})

var functionType = starlark.NewBuiltin("function", func(_ *starlark.Thread, b *starlark.Builtin, _ starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	return nil, errors.New("cannot create 'function' instances")
})

// predeclared is what a translated lambda sees besides Starlark's
// universe: Python builtins that Starlark lacks or defines differently,
// and the translation's helpers.
var predeclared = starlark.StringDict{
	"round":      starlark.NewBuiltin("round", builtinRound),
	"sum":        starlark.NewBuiltin("sum", builtinSum),
	"pow":        starlark.NewBuiltin("pow", builtinPow),
	"divmod":     starlark.NewBuiltin("divmod", builtinDivmod),
	"map":        starlark.NewBuiltin("map", builtinMap),
	"filter":     starlark.NewBuiltin("filter", builtinFilter),
	"isinstance": starlark.NewBuiltin("isinstance", builtinIsinstance),
	"type":       starlark.NewBuiltin("type", builtinType),
	"__import__": starlark.NewBuiltin("__import__", builtinImport),

	hPow:    starlark.NewBuiltin("pow", builtinPowOp),
	hSet:    starlark.NewBuiltin("set", helperSet),
	hDict:   starlark.NewBuiltin("dict", helperDict),
	hAssign: starlark.NewBuiltin(":=", helperLet),
	hRead:   starlark.NewBuiltin("name", helperGet),
	hInf:    starlark.Float(math.Inf(1)),
	hMod:    starlark.NewBuiltin("%", builtinModOp),
	hMul:    starlark.NewBuiltin("*", builtinMulOp),
	"range": starlark.NewBuiltin("range", builtinRange),
	hFloor:  starlark.NewBuiltin("//", builtinFloorDivOp),
}

// pyClassNames are the builtins that stand for Python classes.
var pyClassNames = map[string]bool{"int": true, "float": true, "str": true, "bool": true, "list": true, "tuple": true, "dict": true, "set": true}

// globalNames are the names a lambda may use without binding them.
var globalNames = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range universeNames {
		m[n] = true
	}
	for n := range predeclared {
		m[n] = true
	}
	return m
}()

// pyClass maps the builtins that act as Python's classes to the class
// names of isinstance and type.
var pyClass = func() map[starlark.Value]string {
	m := map[starlark.Value]string{noneType: "NoneType", functionType: "function"}
	for _, n := range []string{"int", "float", "str", "bool", "list", "tuple", "dict", "set"} {
		m[starlark.Universe[n]] = n
	}
	return m
}()

// className is the Python class name of a value.
func className(v starlark.Value) string {
	switch v.(type) {
	case starlark.NoneType:
		return "NoneType"
	case starlark.Bool:
		return "bool"
	case starlark.Int:
		return "int"
	case starlark.Float:
		return "float"
	case starlark.String:
		return "str"
	case *starlark.List:
		return "list"
	case starlark.Tuple:
		return "tuple"
	case *starlark.Dict:
		return "dict"
	case *starlark.Set:
		return "set"
	case *starlark.Function, *starlark.Builtin:
		return "function"
	}
	return v.Type()
}

// asInt treats a bool as the int Python makes of it.
func asInt(v starlark.Value) starlark.Value {
	if b, ok := v.(starlark.Bool); ok {
		if b {
			return starlark.MakeInt(1)
		}
		return starlark.MakeInt(0)
	}
	return v
}

// toFloat converts an int or float as Python's float() does for the
// arithmetic operators (OverflowError for huge ints).
func toFloat(v starlark.Value) (float64, bool, error) {
	switch v := asInt(v).(type) {
	case starlark.Int:
		f, ok := starlark.AsFloat(v)
		if !ok || math.IsInf(f, 0) {
			return 0, true, errors.New("OverflowError: int too large to convert to float")
		}
		return f, true, nil
	case starlark.Float:
		return float64(v), true, nil
	}
	return 0, false, nil
}

func builtinType(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x starlark.Value
	if err := starlark.UnpackPositionalArgs("type", args, kwargs, 1, &x); err != nil {
		return nil, err
	}
	switch n := className(x); n {
	case "NoneType":
		return noneType, nil
	case "function":
		return functionType, nil
	case "int", "float", "str", "bool", "list", "tuple", "dict", "set":
		return starlark.Universe[n], nil
	default:
		return nil, fmt.Errorf("type: no Python class for a %s", x.Type())
	}
}

func builtinIsinstance(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x, classes starlark.Value
	if err := starlark.UnpackPositionalArgs("isinstance", args, kwargs, 2, &x, &classes); err != nil {
		return nil, err
	}
	var list []starlark.Value
	if t, ok := classes.(starlark.Tuple); ok {
		list = t
	} else {
		list = []starlark.Value{classes}
	}
	have := className(x)
	for _, c := range list {
		name, ok := pyClass[c]
		if !ok {
			return nil, fmt.Errorf("TypeError: isinstance() arg 2 must be a type or tuple of types, not %s", c.Type())
		}
		if name == have || name == "int" && have == "bool" {
			return starlark.True, nil
		}
	}
	return starlark.False, nil
}

// builtinRound is Python 3's round(number, ndigits=None).
func builtinRound(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x, nd starlark.Value = nil, starlark.None
	if err := starlark.UnpackArgs("round", args, kwargs, "number", &x, "ndigits?", &nd); err != nil {
		return nil, err
	}
	x = asInt(x)
	if nd == starlark.None {
		switch x := x.(type) {
		case starlark.Int:
			return x, nil
		case starlark.Float:
			f := float64(x)
			if math.IsNaN(f) {
				return nil, errors.New("ValueError: cannot convert float NaN to integer")
			}
			if math.IsInf(f, 0) {
				return nil, errors.New("OverflowError: cannot convert float infinity to integer")
			}
			return starlark.NumberToInt(starlark.Float(math.RoundToEven(f)))
		}
		return nil, fmt.Errorf("TypeError: type %s doesn't define __round__ method", className(x))
	}
	ndi, ok := asInt(nd).(starlark.Int)
	if !ok {
		return nil, fmt.Errorf("TypeError: '%s' object cannot be interpreted as an integer", className(nd))
	}
	n, ok := ndi.Int64()
	if !ok {
		if ndi.Sign() > 0 {
			n = math.MaxInt32
		} else {
			n = math.MinInt32
		}
	}
	switch x := x.(type) {
	case starlark.Int:
		if n >= 0 {
			return x, nil
		}
		if -n > 4096 {
			return starlark.MakeInt(0), nil
		}
		pow10 := new(big.Int).Exp(big.NewInt(10), big.NewInt(-n), nil)
		q, r := new(big.Int).DivMod(x.BigInt(), pow10, new(big.Int)) // floor for pow10 > 0
		r2 := new(big.Int).Lsh(r, 1)
		if c := r2.Cmp(pow10); c > 0 || c == 0 && q.Bit(0) == 1 {
			q.Add(q, big.NewInt(1))
		}
		return starlark.MakeBigInt(q.Mul(q, pow10)), nil
	case starlark.Float:
		f, err := roundFloat(float64(x), n)
		if err != nil {
			return nil, err
		}
		return starlark.Float(f), nil
	}
	return nil, fmt.Errorf("TypeError: type %s doesn't define __round__ method", className(x))
}

// roundFloat rounds x to nd decimal digits as CPython does: the exact
// binary value is rounded half-to-even at the decimal digit, and the
// result is the float nearest to that decimal.
func roundFloat(x float64, nd int64) (float64, error) {
	if math.IsNaN(x) || math.IsInf(x, 0) || x == 0 {
		return x, nil
	}
	// CPython's NDIGITS_MAX and NDIGITS_MIN for IEEE doubles.
	if nd > 323 {
		return x, nil
	}
	if nd < -308 {
		return math.Copysign(0, x), nil
	}
	r := new(big.Rat).SetFloat64(x)
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(abs64(nd)), nil)
	pr := new(big.Rat).SetInt(p)
	if nd >= 0 {
		r.Mul(r, pr)
	} else {
		r.Quo(r, pr)
	}
	num, den := r.Num(), r.Denom()
	q, m := new(big.Int).QuoRem(num, den, new(big.Int))
	m.Abs(m).Lsh(m, 1)
	if c := m.Cmp(den); c > 0 || c == 0 && q.Bit(0) == 1 {
		if num.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	z := new(big.Rat).SetInt(q)
	if nd >= 0 {
		z.Quo(z, pr)
	} else {
		z.Mul(z, pr)
	}
	f, _ := z.Float64()
	if math.IsInf(f, 0) {
		return 0, errors.New("OverflowError: rounded value too large to represent")
	}
	if f == 0 {
		f = math.Copysign(0, x)
	}
	return f, nil
}

func abs64(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// builtinSum is Python 3.11's sum(iterable, /, start=0): a left fold with
// +, bools counting as ints, floats added one by one (Python 3.12 and
// later add floats with compensated summation; ScienceBoard runs 3.11).
func builtinSum(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var iterable starlark.Iterable
	var start starlark.Value = starlark.MakeInt(0)
	if err := starlark.UnpackArgs("sum", args, kwargs, "iterable", &iterable, "start?", &start); err != nil {
		return nil, err
	}
	switch start.(type) {
	case starlark.String:
		return nil, errors.New("TypeError: sum() can't sum strings [use ''.join(seq) instead]")
	case starlark.Bytes:
		return nil, errors.New("TypeError: sum() can't sum bytes [use b''.join(seq) instead]")
	}
	acc := asInt(start)
	it := iterable.Iterate()
	defer it.Done()
	var x starlark.Value
	for it.Next(&x) {
		if err := charge(thread); err != nil {
			return nil, err
		}
		v, err := starlark.Binary(plusToken, acc, asInt(x))
		if err != nil {
			return nil, err
		}
		acc = v
	}
	return acc, nil
}

// builtinPow is Python's pow(base, exp, mod=None).
func builtinPow(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x, y starlark.Value
	var mod starlark.Value = starlark.None
	if err := starlark.UnpackArgs("pow", args, kwargs, "base", &x, "exp", &y, "mod?", &mod); err != nil {
		return nil, err
	}
	if mod == starlark.None {
		return pyPow(x, y)
	}
	xi, ok1 := asInt(x).(starlark.Int)
	yi, ok2 := asInt(y).(starlark.Int)
	mi, ok3 := asInt(mod).(starlark.Int)
	if !ok1 || !ok2 || !ok3 {
		return nil, errors.New("TypeError: pow() 3rd argument not allowed unless all arguments are integers")
	}
	if mi.Sign() == 0 {
		return nil, errors.New("ValueError: pow() 3rd argument cannot be 0")
	}
	if yi.Sign() < 0 {
		return nil, errors.New("pow: a negative exponent with a modulus is not supported")
	}
	m := mi.BigInt()
	r := new(big.Int).Exp(xi.BigInt(), yi.BigInt(), new(big.Int).Abs(m))
	// Python's result has the sign of the modulus.
	if r.Sign() != 0 && m.Sign() < 0 {
		r.Add(r, m)
	}
	return starlark.MakeBigInt(r), nil
}

// builtinPowOp implements the ** operator.
func builtinPowOp(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x, y starlark.Value
	if err := starlark.UnpackPositionalArgs("pow", args, kwargs, 2, &x, &y); err != nil {
		return nil, err
	}
	return pyPow(x, y)
}

// pyPow is Python's x ** y for ints, floats and bools.
func pyPow(x, y starlark.Value) (starlark.Value, error) {
	xi, xIsInt := asInt(x).(starlark.Int)
	yi, yIsInt := asInt(y).(starlark.Int)
	if xIsInt && yIsInt && yi.Sign() >= 0 {
		bx := xi.BigInt()
		if bx.CmpAbs(big.NewInt(1)) <= 0 {
			if bx.Sign() < 0 && yi.BigInt().Bit(0) == 0 {
				return starlark.MakeInt(1), nil
			}
			if yi.Sign() == 0 {
				return starlark.MakeInt(1), nil
			}
			return xi, nil
		}
		e, ok := yi.Int64()
		if !ok || e > maxPowBits || int64(bx.BitLen())*e > maxPowBits {
			return nil, fmt.Errorf("pow: integer result too large (over %d bits)", maxPowBits)
		}
		return starlark.MakeBigInt(bx.Exp(bx, big.NewInt(e), nil)), nil
	}
	xf, yf, err := numberOperands("** or pow()", x, y)
	if err != nil {
		return nil, err
	}
	if xIsInt && yIsInt && xf == 0 {
		return nil, errors.New("ZeroDivisionError: 0.0 cannot be raised to a negative power")
	}
	f, err := floatPow(xf, yf)
	if err != nil {
		return nil, err
	}
	return starlark.Float(f), nil
}

func isOddInteger(y float64) bool {
	return math.Mod(y, 2) == 1 || math.Mod(y, 2) == -1
}

// floatPow follows CPython's float_pow special cases; the finite, positive
// case is computed by powPositive.
func floatPow(x, y float64) (float64, error) {
	switch {
	case y == 0:
		return 1, nil
	case math.IsNaN(x):
		return x, nil
	case math.IsNaN(y):
		if x == 1 {
			return 1, nil
		}
		return y, nil
	case math.IsInf(y, 0):
		ax := math.Abs(x)
		if ax == 1 {
			return 1, nil
		}
		if (y > 0) == (ax > 1) {
			return math.Inf(1), nil
		}
		return 0, nil
	case math.IsInf(x, 0):
		odd := isOddInteger(y)
		if y > 0 {
			if odd {
				return x, nil
			}
			return math.Abs(x), nil
		}
		if odd {
			return math.Copysign(0, x), nil
		}
		return 0, nil
	case x == 0:
		odd := isOddInteger(y)
		if y < 0 {
			return 0, errors.New("ZeroDivisionError: 0.0 cannot be raised to a negative power")
		}
		if odd {
			return x, nil
		}
		return 0, nil
	}
	negate := false
	if x < 0 {
		if y != math.Floor(y) {
			return 0, errors.New("pow: a negative number to a fractional power is complex in Python; complex numbers are not supported")
		}
		x = -x
		negate = isOddInteger(y)
	}
	if x == 1 {
		if negate {
			return -1, nil
		}
		return 1, nil
	}
	r := powPositive(x, y)
	if math.IsInf(r, 0) {
		return 0, errors.New("OverflowError: (34, 'Numerical result out of range')")
	}
	if negate {
		r = -r
	}
	return r, nil
}

// powPositive is x**y for finite x > 0 and finite y. An integral y is
// computed with 256-bit intermediates and rounded once, so the result is
// the correctly rounded power, as C's pow gives it in practice; other
// exponents use Go's math.Pow, which can differ from C in the last bit.
func powPositive(x, y float64) float64 {
	if y != math.Trunc(y) || math.Abs(y) > 1<<62 {
		return math.Pow(x, y)
	}
	const prec = 256
	n := int64(math.Abs(y))
	base := new(big.Float).SetPrec(prec).SetFloat64(x)
	acc := new(big.Float).SetPrec(prec).SetInt64(1)
	for n > 0 {
		if n&1 == 1 {
			acc.Mul(acc, base)
		}
		n >>= 1
		if n > 0 {
			base.Mul(base, base)
		}
		if acc.IsInf() || base.IsInf() {
			break
		}
	}
	if y < 0 {
		acc.Quo(new(big.Float).SetPrec(prec).SetInt64(1), acc)
	}
	f, _ := acc.Float64()
	return f
}

// builtinDivmod is Python's divmod(a, b), with CPython's float algorithm.
func builtinDivmod(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x, y starlark.Value
	if err := starlark.UnpackPositionalArgs("divmod", args, kwargs, 2, &x, &y); err != nil {
		return nil, err
	}
	x, y = asInt(x), asInt(y)
	xi, ok1 := x.(starlark.Int)
	yi, ok2 := y.(starlark.Int)
	if ok1 && ok2 {
		if yi.Sign() == 0 {
			return nil, errors.New("ZeroDivisionError: integer division or modulo by zero")
		}
		return starlark.Tuple{xi.Div(yi), xi.Mod(yi)}, nil
	}
	vx, wx, err := numberOperands("divmod()", x, y)
	if err != nil {
		return nil, err
	}
	if wx == 0 {
		return nil, errors.New("ZeroDivisionError: float divmod()")
	}
	div, mod := floatDivmod(vx, wx)
	return starlark.Tuple{starlark.Float(div), starlark.Float(mod)}, nil
}

// floatDivmod is CPython's _float_div_mod.
func floatDivmod(vx, wx float64) (float64, float64) {
	mod := math.Mod(vx, wx)
	div := (vx - mod) / wx
	if mod != 0 {
		if (wx < 0) != (mod < 0) {
			mod += wx
			div -= 1
		}
	} else {
		mod = math.Copysign(0, wx)
	}
	var floordiv float64
	if div != 0 {
		floordiv = math.Floor(div)
		if div-floordiv > 0.5 {
			floordiv += 1
		}
	} else {
		floordiv = math.Copysign(0, vx/wx)
	}
	return floordiv, mod
}

// builtinMap is Python's map(function, *iterables), evaluated eagerly
// into a list.
func builtinMap(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(kwargs) > 0 {
		return nil, errors.New("TypeError: map() takes no keyword arguments")
	}
	if len(args) < 2 {
		return nil, errors.New("TypeError: map() must have at least two arguments.")
	}
	fn, ok := args[0].(starlark.Callable)
	if !ok {
		return nil, fmt.Errorf("TypeError: '%s' object is not callable", className(args[0]))
	}
	its := make([]starlark.Iterator, len(args)-1)
	for i, a := range args[1:] {
		it, ok := a.(starlark.Iterable)
		if !ok {
			return nil, fmt.Errorf("TypeError: '%s' object is not iterable", className(a))
		}
		its[i] = it.Iterate()
		defer its[i].Done()
	}
	var out []starlark.Value
	for {
		if err := charge(thread); err != nil {
			return nil, err
		}
		call := make(starlark.Tuple, len(its))
		for i, it := range its {
			if !it.Next(&call[i]) {
				return starlark.NewList(out), nil
			}
		}
		v, err := starlark.Call(thread, fn, call, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
}

// builtinFilter is Python's filter(function or None, iterable), evaluated
// eagerly into a list.
func builtinFilter(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var fn starlark.Value
	var iterable starlark.Iterable
	if err := starlark.UnpackPositionalArgs("filter", args, kwargs, 2, &fn, &iterable); err != nil {
		return nil, err
	}
	call, isCallable := fn.(starlark.Callable)
	if fn != starlark.None && !isCallable {
		return nil, fmt.Errorf("TypeError: '%s' object is not callable", className(fn))
	}
	it := iterable.Iterate()
	defer it.Done()
	var out []starlark.Value
	var x starlark.Value
	for it.Next(&x) {
		if err := charge(thread); err != nil {
			return nil, err
		}
		keep := x
		if fn != starlark.None {
			v, err := starlark.Call(thread, call, starlark.Tuple{x}, nil)
			if err != nil {
				return nil, err
			}
			keep = v
		}
		if keep.Truth() {
			out = append(out, x)
		}
	}
	return starlark.NewList(out), nil
}

func builtinImport(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	if len(args) > 1 || len(kwargs) > 0 {
		return nil, errors.New("__import__: only the module name is supported")
	}
	if err := starlark.UnpackPositionalArgs("__import__", args, nil, 1, &name); err != nil {
		return nil, err
	}
	switch name {
	case "math":
		return mathModule, nil
	case "datetime":
		return datetimeModule, nil
	}
	return nil, fmt.Errorf("ModuleNotFoundError: module %q is not available (only math and datetime)", name)
}

func helperSet(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var elems *starlark.List
	if err := starlark.UnpackPositionalArgs("set", args, kwargs, 1, &elems); err != nil {
		return nil, err
	}
	s := starlark.NewSet(elems.Len())
	for i := 0; i < elems.Len(); i++ {
		if err := s.Insert(elems.Index(i)); err != nil {
			return nil, fmt.Errorf("TypeError: %v", err)
		}
	}
	return s, nil
}

func helperDict(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var pairs starlark.Tuple
	if err := starlark.UnpackPositionalArgs("dict", args, kwargs, 1, &pairs); err != nil {
		return nil, err
	}
	d := starlark.NewDict(len(pairs))
	for _, p := range pairs {
		kv := p.(starlark.Tuple)
		if err := d.SetKey(kv[0], kv[1]); err != nil {
			return nil, fmt.Errorf("TypeError: %v", err)
		}
	}
	return d, nil
}

// helperLet implements n := v: it stores v under n in the := dict and
// returns v.
func helperLet(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	d := args[0].(*starlark.Dict)
	if err := d.SetKey(args[1], args[2]); err != nil {
		return nil, err
	}
	return args[2], nil
}

// helperGet reads a name bound by :=.
func helperGet(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	d := args[0].(*starlark.Dict)
	v, found, err := d.Get(args[1])
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("UnboundLocalError: local variable %s referenced before assignment", args[1])
	}
	return v, nil
}

// floatOperands returns both operands as floats when they are numbers and
// at least one is a float (Python's float arithmetic); ok is false when
// the operator should fall back to Starlark's.
func floatOperands(x, y starlark.Value) (vx, wx float64, ok bool, err error) {
	x, y = asInt(x), asInt(y)
	_, xf := x.(starlark.Float)
	_, yf := y.(starlark.Float)
	if !xf && !yf {
		return 0, 0, false, nil
	}
	return toFloats(x, y)
}

// toFloats is toFloat of both operands; ok is false when one of them is
// not a number.
func toFloats(x, y starlark.Value) (vx, wx float64, ok bool, err error) {
	vx, okx, err := toFloat(x)
	if err != nil {
		return 0, 0, false, err
	}
	wx, oky, err := toFloat(y)
	if err != nil {
		return 0, 0, false, err
	}
	return vx, wx, okx && oky, nil
}

// numberOperands is toFloats of the operands of op, a TypeError when one
// of them is not a number.
func numberOperands(op string, x, y starlark.Value) (vx, wx float64, err error) {
	vx, wx, ok, err := toFloats(x, y)
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, fmt.Errorf("TypeError: unsupported operand type(s) for %s: '%s' and '%s'", op, className(x), className(y))
	}
	return vx, wx, nil
}

// builtinModOp implements %: CPython's float remainder (the sign of a zero
// result follows the divisor), Starlark's for ints and string formatting.
var builtinModOp = floatDivOp(syntax.PERCENT, "float modulo", func(_, mod float64) float64 { return mod })

// builtinFloorDivOp implements //: CPython's float floor division
// (1 // 0.1 is 9.0), Starlark's for ints.
var builtinFloorDivOp = floatDivOp(syntax.SLASHSLASH, "float floor division by zero", func(div, _ float64) float64 { return div })

// floatDivOp makes the builtin of a division operator: with a float
// operand, pick's part of CPython's divmod (ZeroDivisionError: zeroMsg for
// a zero divisor); otherwise Starlark's op.
func floatDivOp(op syntax.Token, zeroMsg string, pick func(div, mod float64) float64) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		x, y := args[0], args[1]
		vx, wx, ok, err := floatOperands(x, y)
		if err != nil {
			return nil, err
		}
		if !ok {
			return starlark.Binary(op, asIntIfNumber(x, y), asIntIfNumber(y, x))
		}
		if wx == 0 {
			return nil, errors.New("ZeroDivisionError: " + zeroMsg)
		}
		return starlark.Float(pick(floatDivmod(vx, wx))), nil
	}
}

// asIntIfNumber turns a bool into an int when the other operand is a
// number (True % 2 is 1 in Python); a bool beside a string stays as it is.
func asIntIfNumber(v, other starlark.Value) starlark.Value {
	switch asInt(other).(type) {
	case starlark.Int, starlark.Float:
		return asInt(v)
	}
	return v
}

// maxRepeat bounds the length of a repeated string, list or tuple
// (Starlark's own bound is 1 GiB).
const maxRepeat = 1 << 20

// charge counts one step of a builtin's loop against the thread's budget
// and notices a cancelled context.
func charge(th *starlark.Thread) error {
	th.Steps++
	lim, _ := th.Local(limitsKey).(*limits)
	if lim == nil {
		return nil
	}
	if th.Steps >= lim.maxSteps {
		return ErrStepBudget
	}
	if th.Steps%1024 == 0 && lim.ctx != nil && lim.ctx.Err() != nil {
		return lim.ctx.Err()
	}
	return nil
}

// limitsKey is the thread-local key of a call's limits.
const limitsKey = "pylambda.limits"

type limits struct {
	maxSteps uint64
	ctx      context.Context
}

// builtinRange is Starlark's range, refused when it has more elements
// than the step budget: builtins such as list() and sorted() iterate
// without counting steps.
func builtinRange(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	v, err := starlark.Call(th, starlark.Universe["range"], args, kwargs)
	if err != nil {
		return nil, err
	}
	if lim, _ := th.Local(limitsKey).(*limits); lim != nil {
		if n := v.(starlark.Sequence).Len(); uint64(n) > lim.maxSteps {
			return nil, fmt.Errorf("range: %d elements: %w (%d steps)", n, ErrStepBudget, lim.maxSteps)
		}
	}
	return v, nil
}

// builtinMulOp implements *: Starlark's, with repetition of strings,
// lists and tuples bounded by maxRepeat.
func builtinMulOp(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	x, y := args[0], args[1]
	seq, n := x, y
	if _, ok := asInt(x).(starlark.Int); ok {
		seq, n = y, x
	}
	var size int
	switch s := seq.(type) {
	case starlark.String:
		size = len(s)
	case starlark.Bytes:
		size = len(s)
	case starlark.Indexable:
		size = s.Len()
	}
	if size > 0 {
		if ni, ok := asInt(n).(starlark.Int); ok {
			if k, ok := ni.Int64(); !ok || k > 0 && int64(size)*k > maxRepeat || k > maxRepeat {
				return nil, fmt.Errorf("MemoryError: repetition to more than %d elements", maxRepeat)
			}
		}
	}
	return starlark.Binary(syntax.STAR, asIntIfNumber(x, y), asIntIfNumber(y, x))
}
