package judge

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/codapipe/codapipe/internal/contract/pystr"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Answer is what one judge answer holds: the per-frame captions and the
// result dict.
type Answer struct {
	Captions []string
	Verdict  traj.Verdict
}

// ParseError says why a judge answer holds no usable result dict.
type ParseError struct{ Reason string }

func (e *ParseError) Error() string { return "judge answer: " + e.Reason }

func parseErr(format string, args ...any) error {
	return &ParseError{Reason: fmt.Sprintf(format, args...)}
}

// maxDepth bounds the nesting of a result dict (fuzzed input must not
// exhaust the stack).
const maxDepth = 32

// indexASCIIFold is strings.Index ignoring ASCII case; byte offsets stay
// those of s (strings.ToLower would change them for invalid UTF-8).
func indexASCIIFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if asciiEqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

// lastIndexASCIIFold is strings.LastIndex ignoring ASCII case.
func lastIndexASCIIFold(s, sub string) int {
	for i := len(s) - len(sub); i >= 0; i-- {
		if asciiEqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

func asciiEqualFold(a, b string) bool {
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// ParseAnswer reads a judge's answer: captions on lines such as "Frame 3:
// ..." or "Step 3 - ...", and the result dict with the keys Correctness,
// Redundant, Optimized, First_Error_Step, Error_Type and Correct_Action.
// The dict may be JSON or a Python literal (True/False/None, single
// quotes, trailing commas, tuples), inside <res_dict> tags, a code fence
// or bare, with prose around it; key names are matched ignoring case,
// spaces and underscores. When the text holds several dicts with a
// Correctness key, the last one counts. Values are read leniently:
// "true"/"yes" strings, step numbers as strings, a single number for
// Redundant, and None, null, "" or a number below 1 for "no first error".
// Anything else is a *ParseError with the reason.
func ParseAnswer(text string) (Answer, error) {
	var a Answer
	if strings.TrimSpace(text) == "" {
		return a, parseErr("empty answer")
	}
	a.Captions = captions(text)
	region := text
	if i := lastIndexASCIIFold(text, "<res_dict>"); i >= 0 {
		region = text[i+len("<res_dict>"):]
		if j := indexASCIIFold(region, "</res_dict>"); j >= 0 {
			region = region[:j]
		}
	}
	var found map[string]any
	var firstErr error
	mentions := false
	eachDict(region, func(at int, err error) {
		if firstErr == nil && hasCorrectnessKey(region[at:]) {
			firstErr = err
		}
	}, func(d map[string]any) {
		if r := resultIn(d, 0); r != nil {
			found = r
		} else {
			mentions = mentions || len(d) > 0
		}
	})
	if found == nil {
		switch {
		case firstErr != nil:
			return a, parseErr("the result dict does not parse: %v", firstErr)
		case mentions:
			return a, parseErr("no result dict with a Correctness key (a dict without one was found)")
		}
		return a, parseErr("no result dict with a Correctness key")
	}
	v, err := verdictOf(found)
	if err != nil {
		return a, err
	}
	a.Verdict = v
	return a, nil
}

// eachDict calls dict with each dict (JSON or a Python literal) in s, in
// order, skipping over each one it read (a later dict may follow), and
// bad with the offset and error of each '{' that starts none.
func eachDict(s string, bad func(at int, err error), dict func(map[string]any)) {
	for i := 0; i < len(s); i++ {
		if s[i] != '{' {
			continue
		}
		p := &litParser{s: s, pos: i}
		v, err := p.value(0)
		if err != nil {
			bad(i, err)
			continue
		}
		if d, ok := v.(map[string]any); ok {
			dict(d)
			i = p.pos - 1
		}
	}
}

// resultIn returns d when it has a Correctness key, else the first dict
// inside it that has one ({"result": {...}}), or nil.
func resultIn(d map[string]any, depth int) map[string]any {
	if _, ok := d["correctness"]; ok {
		return d
	}
	if depth > maxDepth {
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(d)) {
		if inner, ok := d[k].(map[string]any); ok {
			if r := resultIn(inner, depth+1); r != nil {
				return r
			}
		}
	}
	return nil
}

func hasCorrectnessKey(s string) bool {
	if len(s) > 4096 {
		s = s[:4096]
	}
	return strings.Contains(strings.ToLower(s), "correctness")
}

// captionLine matches "Frame 3: ...", "Step 3 - ...", "Screenshot 3. ...".
var captionLine = regexp.MustCompile(`(?i)^\s*[*#-]*\s*(?:frame|step|screenshot|image)\s*(\d+)\s*[*]*\s*[:：.\-–]\s*(.+)$`)

// captions returns the caption lines of an answer, in order.
func captions(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if m := captionLine.FindStringSubmatch(line); m != nil {
			out = append(out, strings.TrimSpace(m[2]))
		}
	}
	return out
}

// normKey reduces a key to lower-case letters and digits.
func normKey(k string) string {
	var b strings.Builder
	for _, r := range k {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// verdictOf turns a parsed dict (keys normalised) into a Verdict.
func verdictOf(d map[string]any) (traj.Verdict, error) {
	v := traj.Verdict{Redundant: []int{}}
	var err error
	if v.Correctness, err = asBool(d["correctness"]); err != nil {
		return v, parseErr("Correctness: %v", err)
	}
	if x, ok := d["optimized"]; ok && x != nil {
		if v.Optimized, err = asBool(x); err != nil {
			return v, parseErr("Optimized: %v", err)
		}
	}
	if x, ok := d["redundant"]; ok {
		if v.Redundant, err = asSteps(x); err != nil {
			return v, parseErr("Redundant: %v", err)
		}
	}
	if x, ok := d["firsterrorstep"]; ok {
		if v.FirstErrorStep, err = asStep(x); err != nil {
			return v, parseErr("First_Error_Step: %v", err)
		}
	}
	v.ErrorType = asText(d["errortype"])
	v.CorrectAction = asText(d["correctaction"])
	return v, nil
}

func asBool(x any) (bool, error) {
	switch t := x.(type) {
	case bool:
		return t, nil
	case float64:
		if t == 0 || t == 1 {
			return t == 1, nil
		}
	case string:
		switch strings.ToLower(strings.TrimSpace(t)) {
		case "true", "yes", "correct":
			return true, nil
		case "false", "no", "incorrect":
			return false, nil
		}
	case nil:
		return false, fmt.Errorf("missing (None)")
	}
	return false, fmt.Errorf("want True or False, got %s", describe(x))
}

// asStep reads a step number; None, "", "none", "null" and numbers below 1
// mean no step.
func asStep(x any) (*int, error) {
	switch t := x.(type) {
	case nil:
		return nil, nil
	case float64:
		if t != math.Trunc(t) || math.Abs(t) > 1e9 {
			return nil, fmt.Errorf("want a whole step number, got %v", t)
		}
		if t < 1 {
			return nil, nil
		}
		n := int(t)
		return &n, nil
	case string:
		s := strings.ToLower(strings.TrimSpace(t))
		switch s {
		case "", "none", "null", "n/a", "na", "-":
			return nil, nil
		}
		s = strings.TrimPrefix(strings.TrimPrefix(s, "step"), " ")
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, fmt.Errorf("want a step number, got %q", t)
		}
		return asStep(f)
	}
	return nil, fmt.Errorf("want a step number or None, got %s", describe(x))
}

func asSteps(x any) ([]int, error) {
	out := []int{}
	var items []any
	switch t := x.(type) {
	case nil:
		return out, nil
	case []any:
		items = t
	case float64, string:
		if s, ok := t.(string); ok && strings.Contains(s, ",") {
			for _, p := range strings.Split(s, ",") {
				items = append(items, p)
			}
		} else {
			items = []any{t}
		}
	default:
		return nil, fmt.Errorf("want a list of step numbers, got %s", describe(x))
	}
	for _, it := range items {
		n, err := asStep(it)
		if err != nil {
			return nil, err
		}
		if n != nil {
			out = append(out, *n)
		}
	}
	return out, nil
}

func asText(x any) string {
	switch t := x.(type) {
	case nil:
		return ""
	case string:
		return strings.TrimSpace(t)
	case bool:
		return strconv.FormatBool(t)
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	}
	return ""
}

func describe(x any) string {
	switch t := x.(type) {
	case nil:
		return "None"
	case map[string]any:
		return "a dict"
	case []any:
		return "a list"
	case string:
		if len(t) > 40 {
			t = t[:40] + "..."
		}
		return strconv.Quote(t)
	}
	return fmt.Sprint(x)
}

// litParser reads one JSON or Python literal: dicts (keys normalised with
// normKey), lists, tuples, strings, numbers, True/False/None and
// true/false/null, with trailing commas.
type litParser struct {
	s   string
	pos int
}

func (p *litParser) errf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *litParser) space() {
	for p.pos < len(p.s) {
		switch p.s[p.pos] {
		case ' ', '\t', '\n', '\r', '\f', '\v':
			p.pos++
		default:
			return
		}
	}
}

func (p *litParser) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, p.errf("nested more than %d deep", maxDepth)
	}
	p.space()
	if p.pos >= len(p.s) {
		return nil, p.errf("unexpected end of text")
	}
	switch c := p.s[p.pos]; {
	case c == '{':
		return p.dict(depth)
	case c == '[' || c == '(':
		return p.list(depth)
	case c == '"' || c == '\'':
		return p.str()
	case c == '-' || c == '+' || c == '.' || c >= '0' && c <= '9':
		return p.number()
	default:
		return p.word()
	}
}

func (p *litParser) dict(depth int) (any, error) {
	p.pos++ // '{'
	d := map[string]any{}
	for {
		p.space()
		if p.pos >= len(p.s) {
			return nil, p.errf("unclosed dict")
		}
		if p.s[p.pos] == '}' {
			p.pos++
			return d, nil
		}
		var key string
		switch p.s[p.pos] {
		case '"', '\'':
			k, err := p.str()
			if err != nil {
				return nil, err
			}
			key = k.(string)
		default: // a bare key: Correctness: True
			start := p.pos
			for p.pos < len(p.s) && (p.s[p.pos] == '_' || p.s[p.pos] == ' ' || isWordByte(p.s[p.pos])) {
				p.pos++
			}
			key = strings.TrimSpace(p.s[start:p.pos])
			if key == "" {
				return nil, p.errf("expected a key")
			}
		}
		p.space()
		if p.pos >= len(p.s) || p.s[p.pos] != ':' {
			return nil, p.errf("expected ':' after key %q", key)
		}
		p.pos++
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		d[normKey(key)] = v
		p.space()
		if p.pos < len(p.s) && p.s[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.s) && p.s[p.pos] == '}' {
			continue
		}
		return nil, p.errf("expected ',' or '}' in a dict")
	}
}

func (p *litParser) list(depth int) (any, error) {
	closeCh := byte(']')
	if p.s[p.pos] == '(' {
		closeCh = ')'
	}
	p.pos++
	out := []any{}
	for {
		p.space()
		if p.pos >= len(p.s) {
			return nil, p.errf("unclosed list")
		}
		if p.s[p.pos] == closeCh {
			p.pos++
			return out, nil
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		p.space()
		if p.pos < len(p.s) && p.s[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.s) && p.s[p.pos] == closeCh {
			continue
		}
		return nil, p.errf("expected ',' or %q in a list", closeCh)
	}
}

// str reads a quoted string with Python/JSON escapes.
func (p *litParser) str() (any, error) {
	q := p.s[p.pos]
	p.pos++
	var b strings.Builder
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		switch {
		case c == q:
			p.pos++
			return b.String(), nil
		case c == '\\' && p.pos+1 < len(p.s):
			// An answer is JSON or a Python literal: the escapes of both
			// (pystr.Lenient), what neither decodes kept as written.
			e, size := utf8.DecodeRuneInString(p.s[p.pos+1:])
			p.pos += 1 + size
			p.pos += pystr.Lenient(&b, e, p.s[p.pos:])
		default:
			_, size := utf8.DecodeRuneInString(p.s[p.pos:])
			b.WriteString(p.s[p.pos : p.pos+size])
			p.pos += size
		}
	}
	return nil, p.errf("unterminated string")
}

func (p *litParser) number() (any, error) {
	start := p.pos
	for p.pos < len(p.s) && strings.IndexByte("+-.0123456789eE", p.s[p.pos]) >= 0 {
		p.pos++
	}
	f, err := strconv.ParseFloat(p.s[start:p.pos], 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, p.errf("bad number %q", p.s[start:p.pos])
	}
	return f, nil
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func (p *litParser) word() (any, error) {
	start := p.pos
	for p.pos < len(p.s) && isWordByte(p.s[p.pos]) {
		p.pos++
	}
	switch w := p.s[start:p.pos]; w {
	case "True", "true":
		return true, nil
	case "False", "false":
		return false, nil
	case "None", "null", "none", "NULL", "Null":
		return nil, nil
	case "":
		p.pos = start
		return nil, p.errf("unexpected %q", p.s[start:min(start+1, len(p.s))])
	default:
		p.pos = start
		return nil, p.errf("unexpected word %q", w)
	}
}
