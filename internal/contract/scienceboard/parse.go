package scienceboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/codapipe/codapipe/internal/contract/jsonpos"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Sentinel errors wrapped by FileError.Err for field problems.
var (
	// ErrMissingField: a required top-level field is absent.
	ErrMissingField = errors.New("missing")
	// ErrInvalidField: a top-level field has the wrong type or value.
	ErrInvalidField = errors.New("invalid")
)

// FileError is a problem with one task file.
type FileError struct {
	// Path is the file concerned.
	Path string
	// Line and Col locate the problem (1-based, Col counted in characters);
	// both are 0 when there is no position (e.g. a missing field).
	Line, Col int
	// Field is the top-level field concerned ("" when not field-specific).
	Field string
	// Err is the underlying error: a *json.SyntaxError for malformed JSON,
	// an error wrapping *json.UnmarshalTypeError for a wrongly typed field,
	// ErrMissingField or ErrInvalidField (wrapped), or an I/O error.
	Err error
}

func (e *FileError) Error() string {
	var b strings.Builder
	b.WriteString(printPath(e.Path))
	if e.Line > 0 {
		fmt.Fprintf(&b, ": line %d, column %d", e.Line, e.Col)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": field %q", e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *FileError) Unwrap() error { return e.Err }

// printPath returns a path as it is, or Go-quoted when a character of it is
// not graphic (a newline or an escape in a file name must not reach a
// terminal raw).
func printPath(p string) string {
	if !utf8.ValidString(p) || strings.ContainsFunc(p, func(r rune) bool { return !unicode.IsGraphic(r) }) {
		return strconv.QuoteToGraphic(p)
	}
	return p
}

// fieldError describes a wrongly typed or invalid field value; it unwraps
// to its kind (ErrMissingField/ErrInvalidField) and its cause, if any.
type fieldError struct {
	kind  error
	msg   string
	cause error
}

func (e *fieldError) Error() string { return e.msg }
func (e *fieldError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

// Limits bound what a task file may ask for; the zero value is the
// defaults. Rollout's --max-task-bytes and --max-steps set them.
type Limits struct {
	// Bytes bounds a task file (DefaultMaxTaskBytes when 0): the
	// benchmark's are a few KB, and a file is read whole.
	Bytes int64
	// Steps bounds "steps", the step limit (DefaultMaxSteps when 0).
	Steps int
}

// DefaultMaxTaskBytes and DefaultMaxSteps are the defaults of Limits:
// ScienceBoard's task files are 1-5 KB with step limits of 15 to 50.
const (
	DefaultMaxTaskBytes = 1 << 20
	DefaultMaxSteps     = 500
)

func (l Limits) bytes() int64 {
	if l.Bytes > 0 {
		return l.Bytes
	}
	return DefaultMaxTaskBytes
}

func (l Limits) steps() int {
	if l.Steps > 0 {
		return l.Steps
	}
	return DefaultMaxSteps
}

// LoadFile reads and parses one task file under the default Limits.
func LoadFile(path string) (*Task, error) { return loadFile(path, Limits{}) }

func loadFile(path string, lim Limits) (*Task, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, lim.bytes()+1))
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	if int64(len(data)) > lim.bytes() {
		return nil, &FileError{Path: path, Err: &fieldError{kind: ErrInvalidField,
			msg: fmt.Sprintf("larger than the limit of %d bytes for a task file; --max-task-bytes raises it", lim.bytes())}}
	}
	return parseTask(path, data, lim)
}

// ParseTask parses the content of one task file. path names the file in
// errors, gives the task its Path, and its stem becomes the id part after
// the app. Every returned error is a *FileError for path, or several joined
// with errors.Join.
func ParseTask(path string, data []byte) (*Task, error) { return parseTask(path, data, Limits{}) }

func parseTask(path string, data []byte, lim Limits) (*Task, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // tolerate a UTF-8 BOM

	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, syntaxFileError(path, data, err)
	}
	if top == nil { // the document is `null`
		return nil, &FileError{Path: path, Line: 1, Col: 1, Err: &fieldError{
			kind: ErrInvalidField, msg: "expected a JSON object at top level, got null"}}
	}
	offsets := valueOffsets(data)

	t := &Task{Path: path}
	var errs []error
	bad := func(field string, err error) {
		fe := &FileError{Path: path, Field: field, Err: err}
		if !errors.Is(err, ErrMissingField) {
			fe.Line, fe.Col = jsonpos.Position(data, offsets[field])
		}
		errs = append(errs, fe)
	}
	// str decodes an optional string field, or a required one when
	// missing is the text for its absence.
	str := func(field string, dst *string, missing string) bool {
		raw, ok := top[field]
		if !ok {
			if missing != "" {
				bad(field, &fieldError{kind: ErrMissingField, msg: missing})
			}
			return false
		}
		if err := decodeValue(raw, dst); err != nil {
			bad(field, err)
			return false
		}
		return true
	}

	if str("type", &t.App, "missing; expected a string naming the app, e.g. \"ChimeraX\"") {
		if err := traj.CheckName(traj.AppName, t.App); err != nil {
			bad("type", &fieldError{kind: ErrInvalidField, msg: "expected an app name: " + err.Error(), cause: err})
		}
	}
	if str("instruction", &t.Instruction, "missing; expected a non-empty string (the task for the agent)") && strings.TrimSpace(t.Instruction) == "" {
		bad("instruction", &fieldError{kind: ErrInvalidField, msg: `expected a non-empty string, got ""`})
	}
	if raw, ok := top["steps"]; !ok {
		bad("steps", &fieldError{kind: ErrMissingField, msg: "missing; expected a positive integer (the step limit)"})
	} else if err := decodeValue(raw, &t.Steps); err != nil {
		bad("steps", err)
	} else if t.Steps <= 0 {
		bad("steps", &fieldError{kind: ErrInvalidField, msg: fmt.Sprintf("expected a positive integer, got %d", t.Steps)})
	} else if t.Steps > lim.steps() {
		bad("steps", &fieldError{kind: ErrInvalidField, msg: fmt.Sprintf("%d is more than the limit of %d steps; --max-steps raises it", t.Steps, lim.steps())})
	}
	if str("sort", &t.Sort, "") {
		t.has |= hasSort
	}
	if str("version", &t.Version, "") {
		t.has |= hasVersion
	}
	if str("snapshot", &t.Snapshot, "") {
		t.has |= hasSnapshot
	}
	var ans string
	if str("ans", &ans, "") {
		t.Answer = &ans
	}
	if raw, ok := top["penalty"]; ok {
		t.Penalty = cloneRaw(raw)
	}
	if raw, ok := top["query"]; ok {
		t.Query = cloneRaw(raw)
	}

	var initRaw, evalRaw []json.RawMessage
	if raw, ok := top["initialize"]; ok {
		if err := decodeValue(raw, &initRaw); err != nil {
			bad("initialize", err)
		} else {
			t.has |= hasInitialize
		}
	}
	if raw, ok := top["evaluate"]; ok {
		if err := decodeValue(raw, &evalRaw); err != nil {
			bad("evaluate", err)
		} else {
			t.has |= hasEvaluate
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	for k, v := range top {
		if !topLevelKeys[k] {
			if t.Extra == nil {
				t.Extra = map[string]json.RawMessage{}
			}
			t.Extra[k] = cloneRaw(v)
		}
	}

	t.ID = t.App + "/" + fileStem(path)
	if err := traj.CheckName(traj.TaskName, t.ID); err != nil {
		// The id is the app and the file's name: the file is named.
		return nil, &FileError{Path: path, Err: &fieldError{kind: ErrInvalidField,
			msg: "its task id (\"<type>/<file name>\") is not a valid name: " + err.Error(), cause: err}}
	}
	t.Initialize = make([]InitItem, len(initRaw))
	for i, raw := range initRaw {
		t.Initialize[i] = parseInitItem(t.App, raw)
	}
	t.Evaluate = make([]Check, len(evalRaw))
	for i, raw := range evalRaw {
		t.Evaluate[i] = parseCheck(t.App, raw)
	}
	t.refreshUnsupported()
	return t, nil
}

var topLevelKeys = map[string]bool{
	"type": true, "sort": true, "steps": true, "instruction": true, "version": true,
	"snapshot": true, "initialize": true, "evaluate": true, "ans": true, "penalty": true,
	"query": true,
}

func fileStem(path string) string {
	base := filepath.Base(path)
	if stem := strings.TrimSuffix(base, filepath.Ext(base)); stem != "" {
		return stem
	}
	return base
}

func cloneRaw(raw json.RawMessage) json.RawMessage {
	return append(json.RawMessage(nil), raw...)
}

// syntaxFileError turns a decoding error of the whole document into a
// FileError with a position.
func syntaxFileError(path string, data []byte, err error) *FileError {
	fe := &FileError{Path: path, Err: err}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off, _ := jsonpos.Offset(data, err)
		fe.Line, fe.Col = jsonpos.Position(data, off)
	case errors.As(err, &te):
		// The document is valid JSON but not an object.
		fe.Line, fe.Col = jsonpos.Position(data, firstNonSpace(data, 0))
		fe.Err = &fieldError{kind: ErrInvalidField,
			msg: "expected a JSON object at top level, got " + describeRaw(bytes.TrimSpace(data)), cause: err}
	}
	return fe
}

func firstNonSpace(data []byte, off int) int {
	for off < len(data) {
		switch data[off] {
		case ' ', '\t', '\n', '\r':
			off++
		default:
			return off
		}
	}
	return off
}

// valueOffsets returns, for each key of the top-level object in data (which
// must be a valid JSON object), the byte offset of its value. A repeated key
// maps to its last occurrence, as in decoding.
func valueOffsets(data []byte) map[string]int {
	offs := map[string]int{}
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // '{'
		return offs
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return offs
		}
		key, _ := tok.(string)
		start := int(dec.InputOffset())
		for start < len(data) && (data[start] == ':' || data[start] == ' ' || data[start] == '\t' || data[start] == '\n' || data[start] == '\r') {
			start++
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return offs
		}
		offs[key] = start
	}
	return offs
}

// decodeValue decodes raw into dst (a pointer), treating null as a type
// error unless dst is a *json.RawMessage. The error says what was expected
// and what was found.
func decodeValue(raw json.RawMessage, dst any) error {
	if rm, ok := dst.(*json.RawMessage); ok {
		*rm = cloneRaw(raw)
		return nil
	}
	t := reflect.TypeOf(dst).Elem()
	trimmed := bytes.TrimSpace(raw)
	if bytes.Equal(trimmed, []byte("null")) {
		return &fieldError{kind: ErrInvalidField, msg: fmt.Sprintf("expected %s, got null", describeType(t))}
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return &fieldError{kind: ErrInvalidField,
			msg: fmt.Sprintf("expected %s, got %s", describeType(t), describeRaw(trimmed)), cause: err}
	}
	return nil
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	commandType    = reflect.TypeFor[Command]()
)

func describeType(t reflect.Type) string {
	switch {
	case t == rawMessageType:
		return "any JSON value"
	case t == commandType:
		return "string or array of strings"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return describeType(t.Elem())
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		if t.Elem() == rawMessageType {
			return "array"
		}
		return "array of " + plural(describeType(t.Elem()))
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return t.String()
}

func plural(s string) string {
	switch {
	case strings.HasPrefix(s, "array"):
		return "arrays"
	case strings.HasSuffix(s, "JSON value"):
		return "JSON values"
	case s == "string or array of strings":
		return "commands"
	}
	return s + "s"
}

// describeRaw names the kind of a JSON value, with a short excerpt for
// scalars.
func describeRaw(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	excerpt := func() string {
		s := string(raw)
		if utf8.RuneCountInString(s) > 40 {
			r := []rune(s)
			s = string(r[:40]) + "…"
		}
		return s
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string " + excerpt()
	case 't', 'f':
		return "boolean " + string(raw)
	case 'n':
		return "null"
	}
	return "number " + excerpt()
}

type validator interface{ validate() error }

// decodeFields fills the struct pointed to by dst from fields, following the
// field conventions of the typed argument structs (omitzero = optional). It
// returns the fields dst does not define.
func decodeFields(dst any, fields map[string]json.RawMessage) (extra map[string]json.RawMessage, err error) {
	v := reflect.ValueOf(dst).Elem()
	t := v.Type()
	used := map[string]bool{}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" || name == "-" {
			continue
		}
		optional := strings.Contains(opts, "omitzero")
		used[name] = true
		raw, ok := fields[name]
		if !ok {
			if !optional {
				return nil, fmt.Errorf("missing field %q (%s)", name, describeType(sf.Type))
			}
			continue
		}
		if err := decodeValue(raw, v.Field(i).Addr().Interface()); err != nil {
			return nil, fmt.Errorf("field %q: %w", name, err)
		}
	}
	if val, ok := dst.(validator); ok {
		if err := val.validate(); err != nil {
			return nil, err
		}
	}
	for k, raw := range fields {
		if !used[k] {
			if extra == nil {
				extra = map[string]json.RawMessage{}
			}
			extra[k] = cloneRaw(raw)
		}
	}
	return extra, nil
}

func unknownFieldsIssue(prefix string, extra map[string]json.RawMessage) string {
	names := slices.Sorted(maps.Keys(extra))
	for i, n := range names {
		names[i] = fmt.Sprintf("%q", n)
	}
	word := "field"
	if len(names) > 1 {
		word = "fields"
	}
	return fmt.Sprintf("%s: unknown %s %s kept raw", prefix, word, strings.Join(names, ", "))
}

// splitItem decodes an item object and its discriminator field (func or
// type). It returns an issue text when the item cannot be typed at all.
func splitItem(raw json.RawMessage, disc string) (fields map[string]json.RawMessage, name string, issue string) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, "", "expected an object, got " + describeRaw(trimmed)
	}
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, "", "expected an object: " + err.Error()
	}
	d, ok := fields[disc]
	if !ok {
		return fields, "", fmt.Sprintf("missing field %q", disc)
	}
	if err := decodeValue(d, &name); err != nil {
		return fields, "", fmt.Sprintf("field %q: %v", disc, err)
	}
	delete(fields, disc)
	return fields, name, ""
}

func parseInitItem(app string, raw json.RawMessage) InitItem {
	it := InitItem{Raw: cloneRaw(raw)}
	wait := func(prefix string, fields map[string]json.RawMessage) string {
		w, ok := fields["wait"]
		if !ok {
			return ""
		}
		var wait float64
		if err := decodeValue(w, &wait); err != nil {
			return fmt.Sprintf("%s: field %q: %v", prefix, "wait", err)
		}
		if wait < 0 {
			return fmt.Sprintf("%s: field %q: expected a non-negative number of seconds, got %v", prefix, "wait", wait)
		}
		it.Wait = &wait
		delete(fields, "wait")
		return ""
	}
	it.Func, it.Args, it.Extra, it.Issue = typedItem(app, raw, "func", initCtor, wait)
	if it.Args == nil {
		it.Wait = nil // kept only with arguments that decode
	}
	return it
}

// typedItem types an item whose field disc (func or type) names its kind:
// the name, the arguments lookup's constructor makes for it, decoded from
// the item's other fields, those fields no argument takes, and an issue
// text when the item is not fully understood. shared, if not nil, first
// takes the fields every kind has and returns an issue text about them.
func typedItem[A any](app string, raw json.RawMessage, disc string, lookup func(app, name string) (func() A, bool), shared func(prefix string, fields map[string]json.RawMessage) string) (name string, args A, extra map[string]json.RawMessage, issue string) {
	fields, name, issue := splitItem(raw, disc)
	if issue != "" {
		return name, args, nil, issue
	}
	prefix := fmt.Sprintf("%s %q", disc, name)
	ctor, known := lookup(app, name)
	if !known {
		return name, args, nil, prefix + " not supported" + forApp(app)
	}
	if shared != nil {
		if issue := shared(prefix, fields); issue != "" {
			return name, args, nil, issue
		}
	}
	a := ctor()
	extra, err := decodeFields(a, fields)
	if err != nil {
		return name, args, nil, fmt.Sprintf("%s: %v", prefix, err)
	}
	if len(extra) > 0 {
		issue = unknownFieldsIssue(prefix, extra)
	}
	return name, a, extra, issue
}

// forApp names the app in a "not supported" issue when the tables know it.
func forApp(app string) string {
	if _, ok := appFuncs[app]; ok {
		return " by " + app
	}
	if _, ok := appChecks[app]; ok {
		return " by " + app
	}
	return ""
}

func parseCheck(app string, raw json.RawMessage) Check {
	c := Check{Raw: cloneRaw(raw)}
	c.Type, c.Args, c.Extra, c.Issue = typedItem(app, raw, "type", checkCtor, nil)
	return c
}
