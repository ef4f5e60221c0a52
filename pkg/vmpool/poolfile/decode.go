package poolfile

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/codapipe/codapipe/pkg/vmpool"
)

// yamlError turns a YAML syntax error into a ConfigError.
func yamlError(name string, err error) error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	ce := &vmpool.ConfigError{File: name, Msg: "not valid YAML: " + msg}
	// "line 3: did not find expected key"
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				ce.Line, ce.Column = n, 1
				ce.Msg = "not valid YAML: " + strings.TrimSpace(rest[i+1:])
			}
		}
	}
	return ce
}

// decoder maps a YAML node tree onto Go values by yaml tags, strictly:
// unknown fields and wrong types are errors naming the field, the line and
// what is expected.
type decoder struct {
	file  string
	pos   map[string][2]int // field path → line, column
	nodes int
}

// maxNodes bounds the work on one file (aliases can multiply it).
const maxNodes = 100_000

var durationType = reflect.TypeOf(time.Duration(0))

// position is the line and column of field, or of its nearest parent that
// the file names.
func (d *decoder) position(field string) (int, int) {
	for f := field; ; {
		if p, ok := d.pos[f]; ok {
			return p[0], p[1]
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			if p, ok := d.pos[""]; ok && f != "" {
				return p[0], p[1]
			}
			return 0, 0
		}
		f = f[:i]
	}
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) error {
	return &vmpool.ConfigError{File: d.file, Line: n.Line, Column: n.Column, Field: path, Msg: fmt.Sprintf(format, args...)}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) error {
	d.nodes++
	if d.nodes > maxNodes {
		return d.fail(n, path, "too many nodes (more than %d; aliases?)", maxNodes)
	}
	for depth := 0; n.Kind == yaml.AliasNode; depth++ {
		if n.Alias == nil || depth > 100 {
			return d.fail(n, path, "bad alias")
		}
		n = n.Alias
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return d.fail(n, path, "empty document")
		}
		return d.decode(n.Content[0], v, path)
	}
	if _, ok := d.pos[path]; !ok {
		d.pos[path] = [2]int{n.Line, n.Column}
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		v.Set(reflect.Zero(v.Type()))
		return nil
	}
	if v.Type() == durationType {
		return d.duration(n, v, path)
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return d.decode(n, v.Elem(), path)
	case reflect.Struct:
		return d.structure(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return d.fail(n, path, "want a list (- item lines, or [a, b]), got %s", describe(n))
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			if err := d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return d.fail(n, path, "want a mapping (NAME: value lines), got %s", describe(n))
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return d.fail(k, path, "want plain keys")
			}
			ev := reflect.New(v.Type().Elem()).Elem()
			if err := d.decode(val, ev, join(path, k.Value)); err != nil {
				return err
			}
			m.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), ev)
		}
		v.Set(m)
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return d.fail(n, path, "want %s, got %s", kindName(v.Kind()), describe(n))
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(n.Value)
	case reflect.Int, reflect.Int64, reflect.Int32:
		var i int64
		if n.ShortTag() != "!!int" || n.Decode(&i) != nil || v.OverflowInt(i) {
			return d.fail(n, path, "%q: want a whole number", n.Value)
		}
		v.SetInt(i)
	case reflect.Bool:
		var b bool
		if n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			return d.fail(n, path, "%q: want true or false", n.Value)
		}
		v.SetBool(b)
	case reflect.Float64:
		var f float64
		if (n.ShortTag() != "!!float" && n.ShortTag() != "!!int") || n.Decode(&f) != nil {
			return d.fail(n, path, "%q: want a number", n.Value)
		}
		v.SetFloat(f)
	default:
		return d.fail(n, path, "unsupported field type %s", v.Type())
	}
	return nil
}

func (d *decoder) structure(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind != yaml.MappingNode {
		return d.fail(n, path, "want a mapping (field: value lines), got %s", describe(n))
	}
	fields := map[string][]int{}
	var names []string
	yamlFields(v.Type(), nil, fields, &names)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return d.fail(k, path, "want plain field names")
		}
		fp := join(path, k.Value)
		idx, ok := fields[k.Value]
		if !ok {
			return d.fail(k, fp, "unknown field; want one of: %s", strings.Join(names, ", "))
		}
		// Errors about a value point at it; about a section, at its name.
		if val.Kind == yaml.MappingNode {
			d.pos[fp] = [2]int{k.Line, k.Column}
		} else {
			d.pos[fp] = [2]int{val.Line, val.Column}
		}
		if err := d.decode(val, v.FieldByIndex(idx), fp); err != nil {
			return err
		}
	}
	return nil
}

// yamlFields maps the yaml names of struct type t's fields to their
// indexes (below prefix), in the order they are declared; the fields of a
// struct field tagged ",inline" count as t's own.
func yamlFields(t reflect.Type, prefix []int, fields map[string][]int, names *[]string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		idx := append(append([]int(nil), prefix...), i)
		switch {
		case !f.IsExported() || tag == "-":
		case tag == "" && opts == "inline" && f.Type.Kind() == reflect.Struct:
			yamlFields(f.Type, idx, fields, names)
		case tag != "":
			fields[tag] = idx
			*names = append(*names, tag)
		}
	}
}

// duration accepts Go durations ("30s", "5m", "1h30m"), plain numbers of
// seconds, and "off" (-1, for fields where negative disables).
func (d *decoder) duration(n *yaml.Node, v reflect.Value, path string) error {
	const want = "want a duration such as 30s, 5m or 1h30m (a plain number is seconds)"
	if n.Kind != yaml.ScalarNode {
		return d.fail(n, path, "%s, got %s", want, describe(n))
	}
	s := strings.TrimSpace(n.Value)
	switch {
	case s == "off" || s == "none" || s == "never":
		v.SetInt(-1)
		return nil
	case n.ShortTag() == "!!int" || n.ShortTag() == "!!float":
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f > float64(1<<62)/float64(time.Second) || f < -float64(1<<62)/float64(time.Second) {
			return d.fail(n, path, "%q: %s", n.Value, want)
		}
		v.SetInt(int64(f * float64(time.Second)))
		return nil
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		return d.fail(n, path, "%q: %s", n.Value, want)
	}
	v.SetInt(int64(dur))
	return nil
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		v := n.Value
		if len(v) > 40 {
			v = v[:37] + "..."
		}
		return fmt.Sprintf("%q", v)
	}
	return "something else"
}

func kindName(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "a whole number"
	case reflect.Bool:
		return "true or false"
	case reflect.Float64:
		return "a number"
	}
	return k.String()
}
