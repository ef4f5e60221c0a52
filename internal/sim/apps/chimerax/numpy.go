package chimerax

// Printing numpy arrays and Python values as the chimerax-states bundle
// writes them: an ndarray as str(array) without its newlines, the dump as
// Python's json.dump(obj, indent=2, ensure_ascii=False).

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
)

// ndarray is a 1- or 2-dimensional numpy array of float32 (bits 32),
// float64 (bits 64) or integers (bits 0), row-major.
type ndarray struct {
	rows, cols int // rows 0: one dimension of cols elements
	bits       int
	data       []float64
}

func vector32(v ...float64) ndarray { return ndarray{cols: len(v), bits: 32, data: v} }

func matrix(bits, rows, cols int, data []float64) ndarray {
	return ndarray{rows: rows, cols: cols, bits: bits, data: data}
}

// numpyLineWidth is numpy's default print line width.
const numpyLineWidth = 75

// String is str(array) with numpy's default print options (precision 8,
// floatmode maxprec, linewidth 75) and the newlines removed, as
// chimerax-states' cruise() stores an ndarray.
func (a ndarray) String() string {
	words := a.format()
	if a.rows == 0 {
		return strings.ReplaceAll(formatRow(words, " ", numpyLineWidth), "\n", "")
	}
	var b strings.Builder
	b.WriteByte('[')
	for r := 0; r < a.rows; r++ {
		if r > 0 {
			b.WriteString("\n ")
		}
		b.WriteString(formatRow(words[r*a.cols:(r+1)*a.cols], "  ", numpyLineWidth-1))
	}
	b.WriteByte(']')
	return strings.ReplaceAll(b.String(), "\n", "")
}

// formatRow is numpy's _formatArray for one row: "[" words joined by
// spaces "]", wrapped before a word that would pass width, continuation
// lines starting with indent.
func formatRow(words []string, indent string, width int) string {
	elemWidth := width - 1 // room for "]"
	var s strings.Builder
	line := indent
	for i, w := range words {
		limit := elemWidth
		if len(line)+len(w) > limit && len(line) > len(indent) {
			s.WriteString(strings.TrimRight(line, " ") + "\n")
			line = indent
		}
		line += w
		if i < len(words)-1 {
			line += " "
		}
	}
	s.WriteString(line)
	return "[" + s.String()[len(indent):] + "]"
}

// format returns the array's elements as numpy pads them: integers right
// aligned; floats in positional notation (the shortest digits that read
// back, at most 8 after the point, "1." for an integral value) aligned on
// the point, or in scientific notation when the largest magnitude is at
// least 1e8, the smallest non-zero one below 1e-4, or their ratio above
// 1000.
func (a ndarray) format() []string {
	out := make([]string, len(a.data))
	if a.bits == 0 {
		w := 0
		for i, v := range a.data {
			out[i] = strconv.FormatInt(int64(v), 10)
			w = max(w, len(out[i]))
		}
		for i := range out {
			out[i] = strings.Repeat(" ", w-len(out[i])) + out[i]
		}
		return out
	}
	maxV, minV := 0.0, math.Inf(1)
	for _, v := range a.data {
		if v = math.Abs(v); v != 0 {
			maxV, minV = math.Max(maxV, v), math.Min(minV, v)
		}
	}
	exp := maxV >= 1e8 || minV < 1e-4 || maxV/minV > 1e3
	if maxV == 0 {
		exp = false
	}
	ints, fracs, exps := make([]string, len(a.data)), make([]string, len(a.data)), make([]string, len(a.data))
	padL, padR, padE := 0, 0, 0
	for i, v := range a.data {
		var s string
		if exp {
			s = strconv.FormatFloat(v, 'e', -1, a.bits)
			mant, e, _ := strings.Cut(s, "e")
			if d := strings.IndexByte(mant, '.'); d >= 0 && len(mant)-d-1 > 8 {
				mant = strconv.FormatFloat(v, 'e', 8, a.bits)
				mant, e, _ = strings.Cut(mant, "e")
				mant = strings.TrimRight(mant, "0")
			}
			sign, digits := e[:1], strings.TrimLeft(e[1:], "0")
			for len(digits) < 2 {
				digits = "0" + digits
			}
			exps[i] = "e" + sign + digits
			padE = max(padE, len(exps[i]))
			s = mant
		} else {
			s = strconv.FormatFloat(v, 'f', -1, a.bits)
			if d := strings.IndexByte(s, '.'); d >= 0 && len(s)-d-1 > 8 {
				s = strings.TrimRight(strconv.FormatFloat(v, 'f', 8, a.bits), "0")
			}
		}
		in, fr, _ := strings.Cut(s, ".")
		ints[i], fracs[i] = in, fr
		padL, padR = max(padL, len(in)), max(padR, len(fr))
	}
	for i := range a.data {
		out[i] = strings.Repeat(" ", padL-len(ints[i])) + ints[i] + "." + fracs[i]
		if exp {
			out[i] += strings.Repeat("0", padR-len(fracs[i])) + exps[i]
		} else {
			out[i] += strings.Repeat(" ", padR-len(fracs[i]))
		}
	}
	return out
}

// odict is a Python dict: keys in insertion order.
type odict struct {
	keys []string
	vals map[string]any
}

func newODict() *odict { return &odict{vals: map[string]any{}} }

// set adds or replaces a key; it returns the dict for chaining.
func (d *odict) set(k string, v any) *odict {
	if _, ok := d.vals[k]; !ok {
		d.keys = append(d.keys, k)
	}
	d.vals[k] = v
	return d
}

// flatten is chimerax-states' flatten(): the scalar leaves of a nested
// value under dotted keys, list items as "#i"; empty dicts and lists
// leave nothing.
func flatten(v any) *odict {
	out := newODict()
	var walk func(v any, prefix string)
	walk = func(v any, prefix string) {
		switch v := v.(type) {
		case *odict:
			for _, k := range v.keys {
				walk(v.vals[k], prefix+k+".")
			}
		case []any:
			for i, x := range v {
				walk(x, prefix+"#"+strconv.Itoa(i)+".")
			}
		default:
			out.set(strings.TrimSuffix(prefix, "."), v)
		}
	}
	walk(v, "")
	return out
}

// pyJSON writes v as Python's json.dump(v, indent=2, ensure_ascii=False):
// floats as repr() prints them ("1.0", "0.01", "1e-05").
func pyJSON(v any) []byte {
	var b bytes.Buffer
	var write func(v any, depth int)
	nl := func(depth int) {
		b.WriteByte('\n')
		b.WriteString(strings.Repeat("  ", depth))
	}
	write = func(v any, depth int) {
		switch v := v.(type) {
		case *odict:
			if len(v.keys) == 0 {
				b.WriteString("{}")
				return
			}
			b.WriteByte('{')
			for i, k := range v.keys {
				if i > 0 {
					b.WriteByte(',')
				}
				nl(depth + 1)
				writeString(&b, k)
				b.WriteString(": ")
				write(v.vals[k], depth+1)
			}
			nl(depth)
			b.WriteByte('}')
		case []any:
			if len(v) == 0 {
				b.WriteString("[]")
				return
			}
			b.WriteByte('[')
			for i, x := range v {
				if i > 0 {
					b.WriteByte(',')
				}
				nl(depth + 1)
				write(x, depth+1)
			}
			nl(depth)
			b.WriteByte(']')
		case string:
			writeString(&b, v)
		case float64:
			b.WriteString(scienceboard.PyFloatRepr(v))
		case int:
			b.WriteString(strconv.Itoa(v))
		case bool:
			b.WriteString(strconv.FormatBool(v))
		case nil:
			b.WriteString("null")
		default:
			writeString(&b, "N/A")
		}
	}
	write(v, 0)
	return b.Bytes()
}

// writeString writes a JSON string as Python's json module does with
// ensure_ascii=False: only ", \ and control characters escaped.
func writeString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s)
	// encoding/json escapes <, > and & and U+2028/9; Python does not.
	r := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&", `\u2028`, "\u2028", `\u2029`, "\u2029")
	b.WriteString(r.Replace(string(enc)))
}
