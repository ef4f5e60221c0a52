package pylambda

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	starmath "go.starlark.net/lib/math"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

var plusToken = syntax.PLUS

// mathModule is what __import__('math') gives: go.starlark.net/lib/math
// with Python's error behaviour (ValueError for a NaN from non-NaN
// arguments, OverflowError for an infinity from finite ones), Python's
// formulas for degrees and radians, and a few more of Python's names.
var mathModule = func() *starlarkstruct.Module {
	m := &starlarkstruct.Module{Name: "math", Members: starlark.StringDict{}}
	for name, v := range starmath.Module.Members {
		switch name {
		case "mod", "round": // not in Python's math
			continue
		}
		if b, ok := v.(*starlark.Builtin); ok && name != "ceil" && name != "floor" {
			v = pyMathChecked(b)
		}
		m.Members[name] = v
	}
	// CPython: radians = x * (pi/180), degrees = x / (pi/180).
	const degToRad = math.Pi / 180
	m.Members["degrees"] = unaryMath("degrees", func(x float64) float64 { return x / degToRad })
	m.Members["radians"] = unaryMath("radians", func(x float64) float64 { return x * degToRad })
	m.Members["fmod"] = pyMathChecked(starmath.Module.Members["mod"].(*starlark.Builtin))
	m.Members["log10"] = unaryMath("log10", math.Log10)
	m.Members["log2"] = unaryMath("log2", math.Log2)
	m.Members["trunc"] = starlark.NewBuiltin("trunc", mathTrunc)
	m.Members["isnan"] = floatPred("isnan", math.IsNaN)
	m.Members["isinf"] = floatPred("isinf", func(x float64) bool { return math.IsInf(x, 0) })
	m.Members["isfinite"] = floatPred("isfinite", func(x float64) bool { return !math.IsInf(x, 0) && !math.IsNaN(x) })
	m.Members["isclose"] = starlark.NewBuiltin("isclose", mathIsclose)
	m.Members["inf"] = starlark.Float(math.Inf(1))
	m.Members["nan"] = starlark.Float(math.NaN())
	m.Members["tau"] = starlark.Float(2 * math.Pi)
	return m
}()

func numArg(fn string, v starlark.Value) (float64, error) {
	f, ok, err := toFloat(v)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("TypeError: %s: must be real number, not %s", fn, className(v))
	}
	return f, nil
}

// unaryMath is the math function name of one number, fn, with CPython's
// checks.
func unaryMath(name string, fn func(float64) float64) *starlark.Builtin {
	return pyMathChecked(floatFunc(name, func(x float64) starlark.Value { return starlark.Float(fn(x)) }))
}

// floatFunc is the builtin name of one number (an int or a float): fn of
// it as a float.
func floatFunc(name string, fn func(float64) starlark.Value) *starlark.Builtin {
	return starlark.NewBuiltin(name, func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var x starlark.Value
		if err := starlark.UnpackPositionalArgs(name, args, kwargs, 1, &x); err != nil {
			return nil, err
		}
		f, err := numArg(name, x)
		if err != nil {
			return nil, err
		}
		return fn(f), nil
	})
}

// pyMathChecked wraps a math builtin with CPython's math_1/math_2 checks.
func pyMathChecked(b *starlark.Builtin) *starlark.Builtin {
	name := b.Name()
	return starlark.NewBuiltin(name, func(th *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		in := make(starlark.Tuple, len(args))
		finite, nan := true, false
		for i, a := range args {
			a = asInt(a)
			f, err := numArg(name, a)
			if err != nil {
				return nil, err
			}
			in[i] = a
			finite = finite && !math.IsInf(f, 0) && !math.IsNaN(f)
			nan = nan || math.IsNaN(f)
		}
		v, err := starlark.Call(th, b, in, kwargs)
		if err != nil {
			return nil, fmt.Errorf("ValueError: %v", err)
		}
		if f, ok := v.(starlark.Float); ok {
			switch {
			case math.IsNaN(float64(f)) && !nan:
				return nil, errors.New("ValueError: math domain error")
			case math.IsInf(float64(f), 0) && finite:
				if name == "exp" || name == "cosh" || name == "sinh" || name == "hypot" || name == "pow" || name == "gamma" && math.Abs(float64(f)) > 1 {
					return nil, errors.New("OverflowError: math range error")
				}
				return nil, errors.New("ValueError: math domain error")
			}
		}
		return v, nil
	})
}

func floatPred(name string, fn func(float64) bool) *starlark.Builtin {
	return floatFunc(name, func(x float64) starlark.Value { return starlark.Bool(fn(x)) })
}

func mathTrunc(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x starlark.Value
	if err := starlark.UnpackPositionalArgs("trunc", args, kwargs, 1, &x); err != nil {
		return nil, err
	}
	switch x := asInt(x).(type) {
	case starlark.Int:
		return x, nil
	case starlark.Float:
		if math.IsNaN(float64(x)) {
			return nil, errors.New("ValueError: cannot convert float NaN to integer")
		}
		if math.IsInf(float64(x), 0) {
			return nil, errors.New("OverflowError: cannot convert float infinity to integer")
		}
		return starlark.NumberToInt(starlark.Float(math.Trunc(float64(x))))
	}
	return nil, fmt.Errorf("TypeError: type %s doesn't define __trunc__ method", className(x))
}

// mathIsclose is Python's math.isclose(a, b, *, rel_tol=1e-09, abs_tol=0.0).
func mathIsclose(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var av, bv starlark.Value
	var relv, absv starlark.Value = starlark.Float(1e-9), starlark.Float(0)
	if err := starlark.UnpackArgs("isclose", args, kwargs, "a", &av, "b", &bv, "rel_tol?", &relv, "abs_tol?", &absv); err != nil {
		return nil, err
	}
	var fs [4]float64
	for i, v := range []starlark.Value{av, bv, relv, absv} {
		f, err := numArg("isclose", v)
		if err != nil {
			return nil, err
		}
		fs[i] = f
	}
	a, bb, rel, abst := fs[0], fs[1], fs[2], fs[3]
	if rel < 0 || abst < 0 {
		return nil, errors.New("ValueError: tolerances must be non-negative")
	}
	if a == bb {
		return starlark.True, nil
	}
	if math.IsInf(a, 0) || math.IsInf(bb, 0) {
		return starlark.False, nil
	}
	diff := math.Abs(bb - a)
	return starlark.Bool(diff <= math.Abs(rel*bb) || diff <= math.Abs(rel*a) || diff <= abst), nil
}

// Now is the thread-local key of the clock that datetime reads.
const nowKey = "pylambda.now"

// datetimeModule is what __import__('datetime') gives: datetime.today(),
// datetime.now() (naive local time, from the Compile option WithNow) and
// date.today(), whose values have strftime, isoformat and the date and
// time fields.
var datetimeModule = &starlarkstruct.Module{
	Name: "datetime",
	Members: starlark.StringDict{
		"datetime": &starlarkstruct.Module{Name: "datetime", Members: starlark.StringDict{
			"today": starlark.NewBuiltin("today", dtNow(false)),
			"now":   starlark.NewBuiltin("now", dtNow(false)),
		}},
		"date": &starlarkstruct.Module{Name: "date", Members: starlark.StringDict{
			"today": starlark.NewBuiltin("today", dtNow(true)),
		}},
	},
}

func dtNow(dateOnly bool) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
			return nil, err
		}
		now := time.Now
		if f, ok := th.Local(nowKey).(func() time.Time); ok && f != nil {
			now = f
		}
		t := now()
		if dateOnly {
			t = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, t.Location())
		}
		return &pyDatetime{t: t, dateOnly: dateOnly}, nil
	}
}

// pyDatetime is a naive datetime.datetime or datetime.date.
type pyDatetime struct {
	t        time.Time
	dateOnly bool
}

var _ starlark.HasAttrs = (*pyDatetime)(nil)

func (d *pyDatetime) String() string {
	if d.dateOnly {
		return d.t.Format("2006-01-02")
	}
	s := d.t.Format("2006-01-02 15:04:05")
	if us := d.t.Nanosecond() / 1000; us != 0 {
		s += fmt.Sprintf(".%06d", us)
	}
	return s
}

func (d *pyDatetime) Type() string {
	if d.dateOnly {
		return "date"
	}
	return "datetime"
}
func (d *pyDatetime) Freeze()              {}
func (d *pyDatetime) Truth() starlark.Bool { return true }
func (d *pyDatetime) Hash() (uint32, error) {
	return uint32(d.t.UnixNano()), nil
}

func (d *pyDatetime) AttrNames() []string {
	names := []string{"day", "isoformat", "isoweekday", "month", "strftime", "weekday", "year"}
	if !d.dateOnly {
		names = append(names, "hour", "microsecond", "minute", "second")
	}
	return names
}

func (d *pyDatetime) Attr(name string) (starlark.Value, error) {
	t := d.t
	switch name {
	case "year":
		return starlark.MakeInt(t.Year()), nil
	case "month":
		return starlark.MakeInt(int(t.Month())), nil
	case "day":
		return starlark.MakeInt(t.Day()), nil
	case "strftime":
		return starlark.NewBuiltin("strftime", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var f string
			if err := starlark.UnpackPositionalArgs("strftime", args, kwargs, 1, &f); err != nil {
				return nil, err
			}
			s, err := strftime(t, f)
			if err != nil {
				return nil, err
			}
			return starlark.String(s), nil
		}), nil
	case "isoformat":
		return starlark.NewBuiltin("isoformat", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if err := starlark.UnpackPositionalArgs("isoformat", args, kwargs, 0); err != nil {
				return nil, err
			}
			return starlark.String(strings.Replace(d.String(), " ", "T", 1)), nil
		}), nil
	case "weekday", "isoweekday":
		wd := (int(t.Weekday()) + 6) % 7 // Monday is 0
		if name == "isoweekday" {
			wd++
		}
		return starlark.NewBuiltin(name, func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if err := starlark.UnpackPositionalArgs(name, args, kwargs, 0); err != nil {
				return nil, err
			}
			return starlark.MakeInt(wd), nil
		}), nil
	}
	if !d.dateOnly {
		switch name {
		case "hour":
			return starlark.MakeInt(t.Hour()), nil
		case "minute":
			return starlark.MakeInt(t.Minute()), nil
		case "second":
			return starlark.MakeInt(t.Second()), nil
		case "microsecond":
			return starlark.MakeInt(t.Nanosecond() / 1000), nil
		}
	}
	return nil, nil
}

// strftime formats t with C-locale strftime directives, as Python's
// strftime does on Linux. Directives that depend on a time zone or a
// locale beyond C are refused.
func strftime(t time.Time, format string) (string, error) {
	var b strings.Builder
	two := func(n int) { b.WriteString(fmt.Sprintf("%02d", n)) }
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(format) {
			b.WriteByte('%')
			break
		}
		i++
		switch format[i] {
		case 'Y':
			b.WriteString(strconv.Itoa(t.Year()))
		case 'y':
			two(t.Year() % 100)
		case 'm':
			two(int(t.Month()))
		case 'd':
			two(t.Day())
		case 'e':
			b.WriteString(fmt.Sprintf("%2d", t.Day()))
		case 'H':
			two(t.Hour())
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			two(h)
		case 'M':
			two(t.Minute())
		case 'S':
			two(t.Second())
		case 'f':
			b.WriteString(fmt.Sprintf("%06d", t.Nanosecond()/1000))
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'j':
			b.WriteString(fmt.Sprintf("%03d", t.YearDay()))
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'w':
			b.WriteString(strconv.Itoa(int(t.Weekday())))
		case 'u':
			b.WriteString(strconv.Itoa((int(t.Weekday())+6)%7 + 1))
		case 'F':
			b.WriteString(fmt.Sprintf("%d-%02d-%02d", t.Year(), int(t.Month()), t.Day()))
		case 'T':
			b.WriteString(fmt.Sprintf("%02d:%02d:%02d", t.Hour(), t.Minute(), t.Second()))
		case 'D':
			b.WriteString(fmt.Sprintf("%02d/%02d/%02d", int(t.Month()), t.Day(), t.Year()%100))
		case 'R':
			b.WriteString(fmt.Sprintf("%02d:%02d", t.Hour(), t.Minute()))
		case 'z', 'Z':
			// A naive datetime has no zone: empty, as in Python.
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '%':
			b.WriteByte('%')
		default:
			return "", fmt.Errorf("strftime: directive %%%c is not supported", format[i])
		}
	}
	return b.String(), nil
}
