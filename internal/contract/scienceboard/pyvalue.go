package scienceboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/internal/contract/pystr"
)

// The replies the checks read are JSON written by Python (the guest
// server, ChimeraX, GRASS GIS) or C++ (KAlgebra, Celestia), and the
// harness compares them with Python's semantics. These helpers decode JSON
// keeping numbers as written (json.Number) and compare, test and print
// values the way Python would.

// decodeJSON decodes one JSON value with numbers kept as json.Number.
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return v, nil
}

// objectKeys returns the keys of a JSON object in the order they appear
// (Python's dicts keep it, and "the first matching key" depends on it).
func objectKeys(b []byte) ([]string, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	if t != json.Delim('{') {
		return nil, fmt.Errorf("expected a JSON object")
	}
	var keys []string
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		keys = append(keys, k)
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// number returns v as a float64 when it is a JSON number (or a bool,
// which Python treats as 0 or 1 in comparisons).
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// pyEqual is Python's == over JSON values: numbers by value (True == 1),
// strings, lists and dicts structurally, None only with None.
func pyEqual(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && x == y
	}
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !pyEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !pyEqual(xv, yv) {
				return false
			}
		}
		return true
	}
	return false
}

// Truthy is Python's bool(v) of a decoded JSON value (or an int, int64 or
// float64).
func Truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	if f, ok := number(v); ok {
		return f != 0
	}
	return true
}

// pyFloat is Python's float(v) for a string or a number.
func pyFloat(v any) (float64, bool) {
	if s, ok := v.(string); ok {
		s = strings.TrimSpace(s)
		switch strings.ToLower(strings.TrimLeft(s, "+-")) {
		case "inf", "infinity", "nan":
			f, err := strconv.ParseFloat(s, 64)
			return f, err == nil
		}
		f, err := strconv.ParseFloat(s, 64)
		return f, err == nil && !strings.ContainsAny(s, "xXpP")
	}
	return number(v)
}

// PyJSON encodes v as Python's json.dumps does by default: ", " and ": "
// separators, non-ASCII escaped as \uXXXX, numbers as written. Object keys
// are sorted (Go maps keep no order).
func PyJSON(v any) string {
	var b strings.Builder
	writePyJSON(&b, v)
	return b.String()
}

func writePyJSON(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case json.Number:
		b.WriteString(x.String())
	case float64:
		b.WriteString(PyFloatRepr(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case int:
		b.WriteString(strconv.Itoa(x))
	case string:
		pystr.QuoteJSON(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writePyJSON(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			pystr.QuoteJSON(b, k)
			b.WriteString(": ")
			writePyJSON(b, x[k])
		}
		b.WriteByte('}')
	default:
		js, err := json.Marshal(x)
		if err != nil {
			b.WriteString("null")
			return
		}
		d, err := decodeJSON(js)
		if err != nil {
			b.WriteString("null")
			return
		}
		writePyJSON(b, d)
	}
}

// PyFloatRepr is Python's repr of a float: the shortest digits that read
// back, in decimal notation with at least one fraction digit when the
// exponent is between -5 and 15, else in exponent notation with at least
// two exponent digits; NaN and infinities as json.dumps writes them.
func PyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(e, "e")
	x, _ := strconv.Atoi(exp)
	if -4 <= x && x < 16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	sign := "+"
	if x < 0 {
		sign, x = "-", -x
	}
	digits := strconv.Itoa(x)
	if len(digits) < 2 {
		digits = "0" + digits
	}
	return mant + "e" + sign + digits
}

// pyRepr renders a value for messages: strings quoted as Go quotes them,
// the rest as JSON. It is not Python's repr() (the simulated guest's is
// internal/sim/guest's pyRepr): messages keep the JSON the servers sent.
func pyRepr(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return PyJSON(v)
}
