package pylambda

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"reflect"
	"sort"
	"strings"

	"go.starlark.net/starlark"
)

// maxDepth bounds the nesting of converted values.
const maxDepth = 1000

// maxExactInt is the largest magnitude below which every integer is a
// float64; integral float64 arguments within it become Python ints.
const maxExactInt = 1 << 53

// toValue converts a JSON-like Go value into a Starlark value.
func toValue(a any, depth int) (starlark.Value, error) {
	if depth > maxDepth {
		return nil, errors.New("value nested too deeply")
	}
	switch a := a.(type) {
	case nil:
		return starlark.None, nil
	case bool:
		return starlark.Bool(a), nil
	case string:
		return starlark.String(a), nil
	case json.Number:
		return numberValue(string(a))
	case float64:
		return floatValue(a), nil
	case float32:
		return floatValue(float64(a)), nil
	case int:
		return starlark.MakeInt(a), nil
	case int64:
		return starlark.MakeInt64(a), nil
	case int32:
		return starlark.MakeInt64(int64(a)), nil
	case uint64:
		return starlark.MakeUint64(a), nil
	case uint:
		return starlark.MakeUint64(uint64(a)), nil
	case *big.Int:
		return starlark.MakeBigInt(a), nil
	case json.RawMessage:
		return decodeJSON(a)
	case []any:
		elems := make([]starlark.Value, len(a))
		for i, x := range a {
			v, err := toValue(x, depth+1)
			if err != nil {
				return nil, err
			}
			elems[i] = v
		}
		return starlark.NewList(elems), nil
	case map[string]any:
		keys := make([]string, 0, len(a))
		for k := range a {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := starlark.NewDict(len(a))
		for _, k := range keys {
			v, err := toValue(a[k], depth+1)
			if err != nil {
				return nil, err
			}
			d.SetKey(starlark.String(k), v)
		}
		return d, nil
	}
	// Other slices and string-keyed maps, by reflection.
	rv := reflect.ValueOf(a)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		elems := make([]starlark.Value, rv.Len())
		for i := range elems {
			v, err := toValue(rv.Index(i).Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			elems[i] = v
		}
		return starlark.NewList(elems), nil
	case reflect.Map:
		if rv.Type().Key().Kind() == reflect.String {
			m := make(map[string]any, rv.Len())
			for it := rv.MapRange(); it.Next(); {
				m[it.Key().String()] = it.Value().Interface()
			}
			return toValue(m, depth)
		}
	case reflect.Int8, reflect.Int16:
		return starlark.MakeInt64(rv.Int()), nil
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return starlark.MakeUint64(rv.Uint()), nil
	}
	return nil, fmt.Errorf("cannot convert a %T to a Python value", a)
}

// floatValue gives an integral float64 of at most 2^53 in magnitude as an
// int, since JSON decoders that use float64 lose the difference between
// 400 and 400.0.
func floatValue(f float64) starlark.Value {
	if f == math.Trunc(f) && math.Abs(f) <= maxExactInt {
		return starlark.MakeInt64(int64(f))
	}
	return starlark.Float(f)
}

// numberValue reads a JSON number as Python's json module does: an int
// when it has no fraction or exponent, else a float (±inf when too large).
func numberValue(s string) (starlark.Value, error) {
	if !strings.ContainsAny(s, ".eE") {
		i, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return nil, fmt.Errorf("invalid JSON number %q", s)
		}
		return starlark.MakeBigInt(i), nil
	}
	v, err := starlark.Call(&starlark.Thread{}, starlark.Universe["float"], starlark.Tuple{starlark.String(s)}, nil)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON number %q", s)
	}
	return v, nil
}

// decodeJSON decodes one JSON value keeping object key order and the
// int/float distinction of the text, as Python's json.loads does.
func decodeJSON(raw []byte) (starlark.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeNext(dec, 0)
	if err != nil {
		return nil, fmt.Errorf("JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("JSON: data after the value")
	}
	return v, nil
}

func decodeNext(dec *json.Decoder, depth int) (starlark.Value, error) {
	if depth > maxDepth {
		return nil, errors.New("value nested too deeply")
	}
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '[':
			var elems []starlark.Value
			for dec.More() {
				v, err := decodeNext(dec, depth+1)
				if err != nil {
					return nil, err
				}
				elems = append(elems, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return starlark.NewList(elems), nil
		case '{':
			d := starlark.NewDict(0)
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, errors.New("object key is not a string")
				}
				v, err := decodeNext(dec, depth+1)
				if err != nil {
					return nil, err
				}
				d.SetKey(starlark.String(k), v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return d, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case nil, bool, string, json.Number:
		return toValue(t, depth) // a scalar, as a Go value converts
	}
	return nil, fmt.Errorf("unexpected token %v", t)
}

// fromValue converts a Starlark result into a JSON-like Go value: ints
// become json.Number (exact), floats float64, lists, tuples and sets
// []any, dicts with string keys map[string]any.
func fromValue(v starlark.Value, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errors.New("value nested too deeply (or cyclic)")
	}
	switch v := v.(type) {
	case starlark.NoneType:
		return nil, nil
	case starlark.Bool:
		return bool(v), nil
	case starlark.Int:
		return json.Number(v.String()), nil
	case starlark.Float:
		return float64(v), nil
	case starlark.String:
		return string(v), nil
	case starlark.Indexable: // list, tuple
		out := make([]any, v.Len())
		for i := range out {
			x, err := fromValue(v.Index(i), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case *starlark.Set:
		out := make([]any, 0, v.Len())
		it := v.Iterate()
		defer it.Done()
		var x starlark.Value
		for it.Next(&x) {
			y, err := fromValue(x, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, y)
		}
		return out, nil
	case *starlark.Dict:
		out := make(map[string]any, v.Len())
		for _, kv := range v.Items() {
			k, ok := kv[0].(starlark.String)
			if !ok {
				return nil, fmt.Errorf("dict key %s is not a string", kv[0])
			}
			x, err := fromValue(kv[1], depth+1)
			if err != nil {
				return nil, err
			}
			out[string(k)] = x
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %s has no JSON form", className(v))
}
