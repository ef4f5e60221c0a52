package pylambda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.starlark.net/starlark"

	"github.com/codapipe/codapipe/internal/contract/scienceboard/sbtest"
)

var update = flag.Bool("update", false, "regenerate testdata/golden.json with python3 (tools/pylambda-golden/gen.py)")

const goldenFile = "testdata/golden.json"

// goldenDoc is testdata/golden.json, written by tools/pylambda-golden/gen.py.
type goldenDoc struct {
	Python string                     `json:"python"`
	Now    string                     `json:"now"`
	Inputs map[string]json.RawMessage `json:"inputs"`
	Cases  []goldenCase               `json:"cases"`
}

type goldenCase struct {
	Name string `json:"name"`
	Src  string `json:"src"`
	Args []struct {
		JSON json.RawMessage `json:"json"`
		Ref  string          `json:"ref"`
	} `json:"args"`
	Result       json.RawMessage `json:"result"`
	Error        string          `json:"error"`
	CompileError string          `json:"compile_error"`
}

// knownDivergences are golden cases where Starlark's semantics differ from
// CPython's and the translation does not paper over it, keyed by source
// and arguments (JSON). Each is also documented in doc.go. The test fails
// if one of them starts to agree, so that the list stays true.
var knownDivergences = map[string]string{
	"lambda x, y: x ** y | -8, 0.3333333333333333":                                 "complex result: an error here",
	"lambda x: '{} {:.2f} {:>5}'.format(x[0], x[1], x[2]) | [\"a\", 1.005, \"b\"]": "Starlark's str.format has no format specs",
	"lambda x: x == 1.0 and x == 1 and 1 == True | 1":                              "bool is not an int in Starlark",
	"lambda x: x == 1.0 and x == 1 and 1 == True | 1.0":                            "bool is not an int in Starlark",
	"lambda x: x == 1.0 and x == 1 and 1 == True | true":                           "bool is not an int in Starlark",
	"lambda x: reversed(x) | [1, 2]":                                               "iterators are lists",
	"lambda x: [*x] | [1]":                                                         "unpacking in displays is unsupported",
	"lambda x: x.__class__ | 1":                                                    "no Python object model",
}

func readGolden(t testing.TB) *goldenDoc {
	t.Helper()
	if *update {
		gen := filepath.Join("..", "..", "..", "..", "tools", "pylambda-golden", "gen.py")
		cmd := exec.Command("python3", gen, sbtest.Copy(), goldenFile)
		out, err := cmd.CombinedOutput()
		t.Logf("%s", out)
		if err != nil {
			t.Fatalf("gen.py: %v", err)
		}
	}
	data, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc goldenDoc
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%s: %v", goldenFile, err)
	}
	return &doc
}

func (doc *goldenDoc) args(t testing.TB, c goldenCase) []any {
	var args []any
	for _, a := range c.Args {
		switch {
		case a.Ref != "":
			raw, ok := doc.Inputs[a.Ref]
			if !ok {
				t.Fatalf("%s: no input %q", c.Name, a.Ref)
			}
			args = append(args, raw)
		default:
			args = append(args, a.JSON)
		}
	}
	return args
}

func (doc *goldenDoc) now(t testing.TB) time.Time {
	now, err := time.Parse("2006-01-02T15:04:05.999999", doc.Now)
	if err != nil {
		t.Fatalf("golden now %q: %v", doc.Now, err)
	}
	return now
}

func divergenceKey(c goldenCase) string {
	return c.Src + " | " + argsText(c)
}

// TestGolden replays every call of testdata/golden.json, recorded with
// CPython, and compares results exactly: the same type (int, float, str,
// list, tuple, dict, ...), floats bit for bit, exceptions where Python
// raised one, and compile errors where Python refused the source.
func TestGolden(t *testing.T) {
	doc := readGolden(t)
	now := doc.now(t)
	agreed, errCases, diverged := 0, 0, 0
	for _, c := range doc.Cases {
		t.Run(c.Name, func(t *testing.T) {
			key := divergenceKey(c)
			reason, known := knownDivergences[key]
			err := checkGolden(t, doc, c, now)
			switch {
			case err == nil && known:
				t.Errorf("listed as a divergence (%s) but agrees with Python now: remove it from knownDivergences", reason)
			case err == nil:
				agreed++
				if c.Error != "" || c.CompileError != "" {
					errCases++
				}
			case known:
				diverged++
				t.Logf("known divergence (%s): %v", reason, err)
			default:
				t.Errorf("%s\n  args: %s\n  %v\n  divergence key: %q", c.Src, argsText(c), err, key)
			}
		})
	}
	t.Logf("%d golden cases (Python %s): %d agree (%d of them errors), %d known divergences", len(doc.Cases), doc.Python, agreed, errCases, diverged)
}

func argsText(c goldenCase) string {
	var parts []string
	for _, a := range c.Args {
		if a.Ref != "" {
			parts = append(parts, "<"+a.Ref+">")
		} else {
			parts = append(parts, string(a.JSON))
		}
	}
	return strings.Join(parts, ", ")
}

func checkGolden(t *testing.T, doc *goldenDoc, c goldenCase, now time.Time) error {
	l, err := Compile(c.Src, WithNow(func() time.Time { return now }))
	if c.CompileError != "" {
		var se *SyntaxError
		var ue *UnsupportedError
		if err == nil {
			return fmt.Errorf("compiled, Python says %s", c.CompileError)
		}
		if !errors.As(err, &se) && !errors.As(err, &ue) {
			return fmt.Errorf("error %T %v, want *SyntaxError (Python: %s)", err, err, c.CompileError)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("compile: %v", err)
	}
	got, err := l.call(context.Background(), doc.args(t, c))
	if c.Error != "" {
		if err == nil {
			return fmt.Errorf("got %s, Python raised %s", got, c.Error)
		}
		var ee *EvalError
		if !errors.As(err, &ee) {
			return fmt.Errorf("error %T %v, want *EvalError (Python: %s)", err, err, c.Error)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("error %v, Python gives %s", err, c.Result)
	}
	var want any
	dec := json.NewDecoder(bytes.NewReader(c.Result))
	dec.UseNumber()
	if err := dec.Decode(&want); err != nil {
		return err
	}
	if why := match(want, got); why != "" {
		return fmt.Errorf("got %s, Python gives %s: %s", got, c.Result, why)
	}
	return nil
}

// match compares a Starlark value with the type-exact JSON form that
// gen.py writes (tag()). It returns why they differ, or "".
func match(want any, got starlark.Value) string {
	switch w := want.(type) {
	case nil:
		if got != starlark.None {
			return fmt.Sprintf("want None, got %s %s", got.Type(), got)
		}
		return ""
	case bool:
		if b, ok := got.(starlark.Bool); !ok || bool(b) != w {
			return fmt.Sprintf("want %v, got %s %s", w, got.Type(), got)
		}
		return ""
	case string:
		if s, ok := got.(starlark.String); !ok || string(s) != w {
			return fmt.Sprintf("want str %q, got %s %s", w, got.Type(), got)
		}
		return ""
	case []any:
		l, ok := got.(*starlark.List)
		if !ok {
			return fmt.Sprintf("want list, got %s", got.Type())
		}
		return matchSeq(w, l)
	case map[string]any:
		for kind, v := range w {
			switch kind {
			case "int":
				i, ok := got.(starlark.Int)
				if !ok || i.String() != fmt.Sprint(v) {
					return fmt.Sprintf("want int %v, got %s %s", v, got.Type(), got)
				}
			case "float":
				f, ok := got.(starlark.Float)
				if !ok {
					return fmt.Sprintf("want float %v, got %s %s", v, got.Type(), got)
				}
				wf, err := parsePyFloat(v.(string))
				if err != nil {
					return err.Error()
				}
				if math.Float64bits(wf) != math.Float64bits(float64(f)) && !(math.IsNaN(wf) && math.IsNaN(float64(f))) {
					return fmt.Sprintf("want float %s, got %s (bits %x vs %x)", v, strconv.FormatFloat(float64(f), 'g', -1, 64), math.Float64bits(wf), math.Float64bits(float64(f)))
				}
			case "tuple":
				tu, ok := got.(starlark.Tuple)
				if !ok {
					return fmt.Sprintf("want tuple, got %s", got.Type())
				}
				return matchSeq(v.([]any), tu)
			case "dict":
				d, ok := got.(*starlark.Dict)
				if !ok {
					return fmt.Sprintf("want dict, got %s", got.Type())
				}
				items := v.([]any)
				if len(items) != d.Len() {
					return fmt.Sprintf("want %d dict items, got %d", len(items), d.Len())
				}
				for i, kv := range d.Items() {
					pair := items[i].([]any)
					if why := match(pair[0], kv[0]); why != "" {
						return fmt.Sprintf("dict key %d: %s", i, why)
					}
					if why := match(pair[1], kv[1]); why != "" {
						return fmt.Sprintf("dict value %d: %s", i, why)
					}
				}
			case "set":
				s, ok := got.(*starlark.Set)
				if !ok {
					return fmt.Sprintf("want set, got %s", got.Type())
				}
				var tags []string
				it := s.Iterate()
				var x starlark.Value
				for it.Next(&x) {
					tags = append(tags, tagString(x))
				}
				it.Done()
				sort.Strings(tags)
				var wantTags []string
				for _, e := range v.([]any) {
					b, _ := json.Marshal(e)
					wantTags = append(wantTags, normJSON(b))
				}
				sort.Strings(wantTags)
				if strings.Join(tags, " ") != strings.Join(wantTags, " ") {
					return fmt.Sprintf("want set %v, got %v", wantTags, tags)
				}
			case "other":
				return fmt.Sprintf("Python gives a %v, got %s", v, got.Type())
			default:
				return "unknown tag " + kind
			}
		}
		return ""
	}
	return fmt.Sprintf("unexpected golden value %T", want)
}

func matchSeq(want []any, got starlark.Indexable) string {
	if len(want) != got.Len() {
		return fmt.Sprintf("want %d elements, got %d", len(want), got.Len())
	}
	for i, w := range want {
		if why := match(w, got.Index(i)); why != "" {
			return fmt.Sprintf("element %d: %s", i, why)
		}
	}
	return ""
}

// parsePyFloat reads Python's repr of a float.
func parsePyFloat(s string) (float64, error) {
	switch s {
	case "inf":
		return math.Inf(1), nil
	case "-inf":
		return math.Inf(-1), nil
	case "nan":
		return math.NaN(), nil
	}
	return strconv.ParseFloat(s, 64)
}

// tagString is the JSON text of the tag of a set element (ints, strings,
// floats and tuples of them).
func tagString(v starlark.Value) string {
	var t any
	switch v := v.(type) {
	case starlark.Int:
		t = map[string]any{"int": v.String()}
	case starlark.String:
		t = string(v)
	case starlark.Bool:
		t = bool(v)
	case starlark.NoneType:
		t = nil
	default:
		t = map[string]any{"other": v.String()}
	}
	b, _ := json.Marshal(t)
	return string(b)
}

func normJSON(b []byte) string {
	var v any
	json.Unmarshal(b, &v)
	out, _ := json.Marshal(v)
	return string(out)
}
