package uitars

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/codapipe/codapipe/internal/contract/pystr"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Options control parsing and formatting.
type Options struct {
	// Coords is the coordinate space the model writes points in; the zero
	// value is grid1000 (0–1000 on both axes). Zero smart-resize
	// parameters of pixels-resized mean Qwen2.5-VL's defaults.
	Coords traj.Coords
	// Image is the size in pixels of the image the model was shown (the
	// screenshot as taken, before any resize by the model server). The
	// pixel spaces need it; grid1000 and unit ignore it.
	Image Screen
}

// DefaultOptions returns grid1000 options: the space of CODA's prompts and
// of canonical action text, independent of any image size.
func DefaultOptions() Options { return Options{Coords: Grid()} }

// ErrOutOfRange is wrapped by the *SyntaxError of a well-formed point with
// a number outside the coordinate space: usually a sign that the model
// answers in another space than the one configured.
var ErrOutOfRange = errors.New("coordinate outside the coordinate space")

// extent resolves the options to the extents of both axes and a label for
// error messages.
func (o Options) extent() (w, h float64, label string, err error) {
	c := o.Coords
	if c.Space == "" {
		c = Grid()
	}
	if w, h, err = Extent(c, o.Image); err != nil {
		return 0, 0, "", err
	}
	label = string(c.Space)
	if c.Space == traj.PixelsResized {
		label = fmt.Sprintf("%s (%gx%g for a %dx%d image)", c.Space, w, h, o.Image.W, o.Image.H)
	}
	return w, h, label, nil
}

// Parsed is the result of parsing one model response.
type Parsed struct {
	// Thought is the reasoning before the action part: the text of the
	// "Thought:" section, else of an "Action_Summary:" section, else the
	// text before the "Action:" line (without a leading "Reflection:"
	// label); empty for bare actions. For a response of several
	// Thought/Action blocks it is the thought of the block used.
	Thought string
	// Actions are the parsed actions in the order given.
	Actions []traj.Action
	// Raw is the input text, unchanged.
	Raw string
	// Joined is the number of actions in Actions that the response joined
	// to the action before them with the word "then"
	// (click(start_box='(1,2)') then wait() has Joined 1). UI-TARS's
	// grammar separates actions by whitespace only; they are kept, in
	// order, like whitespace-separated ones.
	Joined int
	// DroppedBlocks is the number of Thought/Action blocks of the response
	// that are not in the result, when the model wrote several (it went on
	// after its action): the blocks after the one used, and those before
	// it whose action part did not parse. 0 for a response of one block.
	DroppedBlocks int
	// Notes says in words, one sentence each, what Parse accepted beyond
	// the plain grammar that changes what the response means: the actions
	// joined by "then" and the blocks dropped (see Joined and
	// DroppedBlocks). Nil when there was nothing to note; meant for logs
	// and for storing with the parsed action.
	Notes []string
}

// SyntaxError reports why Parse rejected its input. Offset is a byte offset
// into Input (the text given to Parse) at which the problem was found. Err
// is ErrOutOfRange for a well-formed point outside the coordinate space,
// nil otherwise.
type SyntaxError struct {
	Offset int
	Msg    string
	Input  string
	Err    error
}

// Error returns "uitars: offset N: message".
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("uitars: offset %d: %s", e.Offset, e.Msg)
}

// Unwrap returns Err.
func (e *SyntaxError) Unwrap() error { return e.Err }

// Canonical argument names. Aliases map onto these.
const (
	argStart     = "start_box"
	argEnd       = "end_box"
	argKey       = "key"
	argContent   = "content"
	argDirection = "direction"
)

// argAliases maps every accepted argument name (lower-case) to its
// canonical name.
var argAliases = map[string]string{
	"start_box":   argStart,
	"point":       argStart,
	"start_point": argStart,
	"end_box":     argEnd,
	"end_point":   argEnd,
	"key":         argKey,
	"keys":        argKey,
	"hotkey":      argKey,
	"press":       argKey,
	"content":     argContent,
	"text":        argContent,
	"direction":   argDirection,
}

// callSpec describes one action call: its type, the canonical arguments it
// accepts and which of them are required.
type callSpec struct {
	typ      traj.ActionType
	args     []string
	required []string
}

// calls maps each accepted action name (lower-case) to its spec.
// "left_single" is an alias of click. As in UI-TARS's own action parser and
// desktop operator, "press" (and "keydown") presses and holds keys, and
// "release" (and "keyup") releases them; a tap is hotkey. type takes an
// optional start_box (point): where to click before typing, as UI-TARS-style
// action spaces write it (type(content='...', start_box='...')).
var calls = map[string]callSpec{
	"click":        {traj.Click, []string{argStart}, []string{argStart}},
	"left_single":  {traj.Click, []string{argStart}, []string{argStart}},
	"left_double":  {traj.LeftDouble, []string{argStart}, []string{argStart}},
	"right_single": {traj.RightSingle, []string{argStart}, []string{argStart}},
	"hover":        {traj.Hover, []string{argStart}, []string{argStart}},
	"drag":         {traj.Drag, []string{argStart, argEnd}, []string{argStart, argEnd}},
	"hotkey":       {traj.Hotkey, []string{argKey}, []string{argKey}},
	"keydown":      {traj.KeyDown, []string{argKey}, []string{argKey}},
	"press":        {traj.KeyDown, []string{argKey}, []string{argKey}},
	"keyup":        {traj.KeyUp, []string{argKey}, []string{argKey}},
	"release":      {traj.KeyUp, []string{argKey}, []string{argKey}},
	"type":         {traj.TypeText, []string{argContent, argStart}, []string{argContent}},
	"scroll":       {traj.Scroll, []string{argStart, argDirection}, []string{argDirection}},
	"wait":         {traj.Wait, nil, nil},
	"finished":     {traj.Finished, []string{argContent}, nil},
	"call_user":    {traj.CallUser, nil, nil},
}

// knownNames is the sorted list of action names for error messages.
var knownNames = func() string {
	names := make([]string, 0, len(calls)+1)
	for n := range calls {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(append(names, "ANS <answer>"), ", ")
}()

// Parse parses one model response into its thought and actions.
//
// The text may be a full response ("Thought: ...\nAction: ..."), the
// action part alone, or an answer ("ANS <answer>"), possibly inside a
// fenced code block; several actions are separated by whitespace
// (UI-TARS uses a blank line) or by the word "then" (counted in
// Parsed.Joined). Labels may end in a full-width colon ("Action："). When
// the text holds several Thought/Action blocks run together, the first
// block whose action part parses is the result and the others are counted
// in Parsed.DroppedBlocks. Points are read in opt's coordinate space and
// normalised to [0,1].
//
// On error the returned Parsed still carries Raw and, when it was found,
// Thought; the error is a *SyntaxError (wrapping ErrOutOfRange for a point
// outside the space) unless opt itself is invalid.
func Parse(text string, opt Options) (Parsed, error) {
	out := Parsed{Raw: text}
	w, h, label, err := opt.extent()
	if err != nil {
		return out, err
	}
	if strings.TrimSpace(text) == "" {
		return out, &SyntaxError{Offset: 0, Msg: "empty input: expected an action or \"ANS <answer>\"", Input: text}
	}
	blocks := splitBlocks(text)
	tries := blocks
	if len(blocks) > 1 {
		// The response as one block comes last: a labelled line inside a
		// multi-line typed text is not a new block.
		tries = append(tries[:len(tries):len(tries)], wholeBlock(text))
	}
	var firstErr error
	firstThought := ""
	for i, b := range tries {
		p := &parser{in: text[:b.end], full: text, w: w, h: h, space: label}
		var acts []traj.Action
		if !b.ok {
			err = p.errAt(b.end, "expected an \"Action:\" line after the thought")
		} else {
			acts, err = p.parse(b.start)
		}
		if err == nil {
			out.Thought, out.Actions, out.Joined = b.thought, acts, p.joined
			if p.joined > 0 {
				out.Notes = append(out.Notes, fmt.Sprintf("\"then\" joined %d of the %d actions to the action before it; all are kept, in order", p.joined, len(acts)))
			}
			if i < len(blocks) && len(blocks) > 1 {
				out.DroppedBlocks = len(blocks) - 1
				out.Notes = append(out.Notes, blocksNote(i, len(blocks)))
			}
			return out, nil
		}
		if firstErr == nil {
			firstErr, firstThought = err, b.thought
		}
		if errors.Is(err, ErrOutOfRange) {
			// A well-formed action outside the space is the answer, not
			// something to skip: later blocks are not tried.
			break
		}
	}
	out.Thought = firstThought
	return out, firstErr
}

// blocksNote describes the choice of block used (0-based) out of n.
func blocksNote(used, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "the response holds %d Thought/Action blocks; block %d is used", n, used+1)
	switch used {
	case 0:
	case 1:
		b.WriteString(" (block 1 did not parse)")
	default:
		fmt.Fprintf(&b, " (blocks 1-%d did not parse)", used)
	}
	if later := n - used - 1; later == 1 {
		b.WriteString(" and the block after it dropped")
	} else if later > 1 {
		fmt.Fprintf(&b, " and the %d blocks after it dropped", later)
	}
	return b.String()
}

// Response section labels (matched ignoring ASCII case, followed by an
// ASCII or a full-width colon).
const (
	labelThought = "thought"
	labelSummary = "action_summary"
	labelReflect = "reflection"
	labelAction  = "action"
)

// fullColon is U+FF1A FULLWIDTH COLON, which models trained on Chinese text
// write after labels.
const fullColon = "\uff1a"

// labelLen returns the length of label at the start of s, with spaces or
// tabs before its colon and the colon (':' or '：'), or -1 when s does not
// start with it.
func labelLen(s, label string) int {
	if len(s) < len(label) || !strings.EqualFold(s[:len(label)], label) {
		return -1
	}
	i := len(label)
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	switch {
	case strings.HasPrefix(s[i:], ":"):
		return i + 1
	case strings.HasPrefix(s[i:], fullColon):
		return i + len(fullColon)
	}
	return -1
}

// lineLabel finds the first line of s that starts, after spaces and tabs,
// with label. It returns the label's offset and length, or -1, 0.
func lineLabel(s, label string) (int, int) {
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
			j++
		}
		if n := labelLen(s[j:], label); n >= 0 {
			return j, n
		}
		nl := strings.IndexByte(s[i:], '\n')
		if nl < 0 {
			break
		}
		i += nl + 1
	}
	return -1, 0
}

// block is one Thought/Action block of a response.
type block struct {
	thought    string
	start, end int  // the action part is text[start:end]
	ok         bool // the block has an "Action:" line
}

// splitBlocks cuts a response into Thought/Action blocks: a line labelled
// Thought:, Reflection: or Action_Summary: that comes after an Action: line,
// or after a bare action part at the start of the response
// ("click(...)\nThought: ...\nAction: ..."), starts a new block. A response
// without any Action: line is one block (a bare action part, or a thought
// without an action: not ok).
func splitBlocks(text string) []block {
	var blocks []block
	bstart, act, actLen := 0, -1, 0
	flush := func(end int) {
		b := block{end: end}
		if act >= 0 {
			b.thought, b.start, b.ok = thoughtOf(text[bstart:act]), act+actLen, true
		} else {
			b.thought, b.start, b.ok = bareThought(text[bstart:end])
			b.start += bstart
		}
		blocks = append(blocks, b)
	}
	for i := 0; i < len(text); {
		j := i
		for j < len(text) && (text[j] == ' ' || text[j] == '\t') {
			j++
		}
		rest := text[j:]
		thoughtLine := labelLen(rest, labelThought) >= 0 || labelLen(rest, labelReflect) >= 0 || labelLen(rest, labelSummary) >= 0
		switch {
		case act >= 0 && thoughtLine, act < 0 && thoughtLine && i > bstart && startsWithAction(text[bstart:i]):
			flush(i)
			bstart, act = i, -1
			continue
		case act < 0:
			if n := labelLen(rest, labelAction); n >= 0 {
				act, actLen = j, n
			}
		}
		nl := strings.IndexByte(text[i:], '\n')
		if nl < 0 {
			break
		}
		i += nl + 1
	}
	flush(len(text))
	return blocks
}

// wholeBlock is the response read as one block: the thought before the
// first Action: line and everything after it as the action part, or a bare
// action part.
func wholeBlock(text string) block {
	whole := block{end: len(text)}
	if a, n := lineLabel(text, labelAction); a >= 0 {
		whole.thought, whole.start, whole.ok = thoughtOf(text[:a]), a+n, true
	} else {
		whole.thought, whole.start, whole.ok = bareThought(text)
	}
	return whole
}

// startsWithAction reports whether s starts, after whitespace and an
// opening code fence, with an action: "ANS" or a known call name and '('.
func startsWithAction(s string) bool {
	p := &parser{in: s}
	p.skipSpace()
	if p.peek("```") {
		p.fence()
		p.skipSpace()
	}
	return p.atAnswer() || p.callAt(p.pos)
}

// bareThought handles a block without an "Action:" line: a bare action
// part (no thought), or a labelled thought whose action is missing.
func bareThought(s string) (thought string, start int, ok bool) {
	lead := strings.TrimLeft(s, " \t\r\n")
	if labelLen(lead, labelThought) >= 0 || labelLen(lead, labelSummary) >= 0 || labelLen(lead, labelReflect) >= 0 {
		return thoughtOf(s), len(s), false
	}
	return "", 0, true
}

// thoughtOf extracts the thought from the text before the action part.
func thoughtOf(pre string) string {
	if i, n := lineLabel(pre, labelThought); i >= 0 {
		return strings.TrimSpace(pre[i+n:])
	}
	if i, n := lineLabel(pre, labelSummary); i >= 0 {
		return strings.TrimSpace(pre[i+n:])
	}
	pre = strings.TrimSpace(pre)
	if n := labelLen(pre, labelReflect); n >= 0 {
		pre = strings.TrimSpace(pre[n:])
	}
	return pre
}

// parser scans the action part of one block. All offsets are byte offsets
// into full, the whole response; in is the response up to the block's end.
type parser struct {
	in, full string
	pos      int
	w, h     float64 // extents of the coordinate space
	space    string  // the space, for messages
	inFence  bool
	// choice maps the offset of a quoted string's opening quote to the
	// candidate closing quote to take (quoteEnds; 0 when absent); strings
	// lists the offsets of the opening quotes of the quoted strings met by
	// the current attempt, in order.
	choice  map[int]int
	strings []int
	// joined counts the actions of the current reading that follow "then".
	joined int
}

// maxAttempts bounds the readings of one block that Parse tries (see
// parse): the first reading and at most this many minus one others.
const maxAttempts = 32

// parse parses the action part of one block, from start. When a reading
// fails it tries other choices of closing quotes — the last string's
// candidates first, then earlier strings' (with the later strings back at
// their first candidate) — up to maxAttempts readings, and returns the
// first reading that parses. When none does, the first reading's error is
// returned. A point outside the coordinate space ends the search: the
// action is well formed and its error is the one to report.
func (p *parser) parse(start int) ([]traj.Action, error) {
	p.choice = map[int]int{}
	var firstErr error
	for attempt := 0; attempt < maxAttempts; attempt++ {
		p.pos, p.inFence, p.strings, p.joined = start, false, p.strings[:0], 0
		acts, err := p.actions()
		if err == nil {
			return acts, nil
		}
		if firstErr == nil {
			firstErr = err
			if errors.Is(err, ErrOutOfRange) {
				break
			}
		}
		if !p.advance() {
			break
		}
	}
	return nil, firstErr
}

// advance moves to the next combination of closing quotes: the last string
// of the failed reading that has another candidate takes it, and the
// strings after it go back to their first. It reports false when no string
// has one.
func (p *parser) advance() bool {
	for i := len(p.strings) - 1; i >= 0; i-- {
		open := p.strings[i]
		next := p.choice[open] + 1
		if next < len(p.quoteEnds(open, true)) {
			for o := range p.choice {
				if o > open {
					delete(p.choice, o)
				}
			}
			p.choice[open] = next
			return true
		}
	}
	return false
}

func (p *parser) errAt(off int, format string, args ...any) *SyntaxError {
	return &SyntaxError{Offset: off, Msg: fmt.Sprintf(format, args...), Input: p.full}
}

// found describes the input at off for "found ..." in error messages.
func (p *parser) found(off int) string {
	if off >= len(p.in) {
		return "end of input"
	}
	s := p.in[off:]
	if len(s) > 16 {
		s = s[:16]
	}
	return strconv.Quote(s)
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func (p *parser) skipSpace() {
	for p.pos < len(p.in) && isSpace(p.in[p.pos]) {
		p.pos++
	}
}

func (p *parser) peek(s string) bool { return strings.HasPrefix(p.in[p.pos:], s) }

// ident scans [A-Za-z_][A-Za-z0-9_]* and returns it ("" if none).
func (p *parser) ident() string {
	start := p.pos
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || p.pos > start && '0' <= c && c <= '9' {
			p.pos++
			continue
		}
		break
	}
	return p.in[start:p.pos]
}

// actions parses every action from p.pos to the end of the input.
func (p *parser) actions() ([]traj.Action, error) {
	var acts []traj.Action
	for {
		p.skipSpace()
		if p.pos >= len(p.in) {
			break
		}
		if len(acts) > 0 {
			if j := p.thenAt(p.pos); j >= 0 {
				// click(...) then wait(): "then" between two actions.
				p.pos = j
				p.skipSpace()
				if !p.atAnswer() && !p.callAt(p.pos) {
					return nil, p.errAt(p.pos, "expected an action after \"then\" (one of %s), found %s", knownNames, p.found(p.pos))
				}
				p.joined++
			}
		}
		switch {
		case p.peek("```"):
			p.fence()
		case labelLen(p.in[p.pos:], labelAction) >= 0:
			// A repeated "Action:" label before a further action.
			p.pos += labelLen(p.in[p.pos:], labelAction)
		case p.atAnswer():
			a, err := p.answer()
			if err != nil {
				return nil, err
			}
			acts = append(acts, a)
		default:
			a, err := p.call()
			if err != nil {
				return nil, err
			}
			acts = append(acts, a)
		}
	}
	if len(acts) == 0 {
		return nil, p.errAt(len(p.in), "expected an action (one of %s), found end of input", knownNames)
	}
	return acts, nil
}

// fence consumes an opening or closing code fence. An opening fence may be
// followed by an info word ("text", "python") alone on its line; a fence
// left open at the end of the input is accepted.
func (p *parser) fence() {
	for p.pos < len(p.in) && p.in[p.pos] == '`' {
		p.pos++
	}
	if p.inFence {
		p.inFence = false
		return
	}
	p.inFence = true
	i := p.pos
	for i < len(p.in) {
		c := p.in[i]
		if c == '_' || c == '-' || c == '+' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			i++
			continue
		}
		break
	}
	j := i
	for j < len(p.in) && (p.in[j] == ' ' || p.in[j] == '\t' || p.in[j] == '\r') {
		j++
	}
	if j == len(p.in) || p.in[j] == '\n' {
		p.pos = j
	}
}

// atAnswer reports whether an "ANS <answer>" starts at p.pos.
func (p *parser) atAnswer() bool {
	if !p.peek("ANS") {
		return false
	}
	i := p.pos + 3
	return i == len(p.in) || isSpace(p.in[i]) || p.in[i] == ':'
}

// answer parses "ANS <answer>": the answer is the rest of the line (ended
// by '\n' or '\r'; inside a code fence, up to the closing fence if that
// comes first), trimmed.
func (p *parser) answer() (traj.Action, error) {
	start := p.pos
	p.pos += 3
	if p.pos < len(p.in) && p.in[p.pos] == ':' {
		p.pos++
	}
	end := len(p.in)
	if nl := strings.IndexAny(p.in[p.pos:], "\r\n"); nl >= 0 {
		end = p.pos + nl
	}
	if p.inFence {
		if f := strings.Index(p.in[p.pos:end], "```"); f >= 0 {
			end = p.pos + f
		}
	}
	text := strings.TrimSpace(p.in[p.pos:end])
	p.pos = end
	if text == "" {
		return traj.Action{}, p.errAt(start, "expected answer text after \"ANS\"")
	}
	return traj.Action{Type: traj.Answer, Text: text}, nil
}

// argValue is one argument value with the position of its text.
type argValue struct {
	s     string
	off   int  // offset of the value's first byte (after any opening quote)
	exact bool // offsets within s map 1:1 onto the input (no escapes)
}

// offset returns the input offset of byte i of the value.
func (v argValue) offset(i int) int {
	if v.exact {
		return v.off + i
	}
	return v.off
}

// call parses name(arg=value, ...).
func (p *parser) call() (traj.Action, error) {
	start := p.pos
	name := p.ident()
	if name == "" {
		return traj.Action{}, p.errAt(start, "expected an action (one of %s), found %s", knownNames, p.found(start))
	}
	spec, ok := calls[strings.ToLower(name)]
	if !ok {
		return traj.Action{}, p.errAt(start, "unknown action %q (known: %s)", name, knownNames)
	}
	p.skipSpace()
	if !p.peek("(") {
		return traj.Action{}, p.errAt(p.pos, "expected '(' after %q, found %s", name, p.found(p.pos))
	}
	p.pos++
	args := map[string]argValue{}
	afterQuote := false // the previous argument's value was a quoted string
	for {
		p.skipSpace()
		if p.peek(")") {
			break
		}
		argPos := p.pos
		key := p.ident()
		if key == "" {
			return traj.Action{}, p.errAt(argPos, "expected an argument name or ')', found %s", p.found(argPos))
		}
		p.skipSpace()
		if !p.peek("=") {
			return traj.Action{}, p.errAt(p.pos, "expected '=' after argument %q, found %s", key, p.found(p.pos))
		}
		p.pos++
		p.skipSpace()
		canon, ok := argAliases[strings.ToLower(key)]
		if !ok || !slices.Contains(spec.args, canon) {
			return traj.Action{}, p.unknownArg(argPos, key, name, spec, afterQuote)
		}
		afterQuote = p.pos < len(p.in) && (p.in[p.pos] == '\'' || p.in[p.pos] == '"')
		v, err := p.value()
		if err != nil {
			return traj.Action{}, err
		}
		if _, dup := args[canon]; dup {
			return traj.Action{}, p.errAt(argPos, "duplicate argument %q for %s", key, name)
		}
		args[canon] = v
		p.skipSpace()
		if p.peek(",") {
			p.pos++
			continue
		}
		if p.peek(")") {
			break
		}
		return traj.Action{}, p.errAt(p.pos, "expected ',' or ')' after argument %q, found %s", key, p.found(p.pos))
	}
	closing := p.pos
	p.pos++ // ')'
	for _, r := range spec.required {
		if _, ok := args[r]; !ok {
			return traj.Action{}, p.errAt(closing, "%s: missing required argument %s", name, r)
		}
	}
	return p.build(spec, args)
}

// unknownArg is the error for an argument named key that call name (of
// spec) does not take, at argPos. After a quoted value it adds how that
// value came to end there: a quoted value ends at the latest at a quote
// followed by ", key =", so an unescaped "', key='" meant as text is read
// as an argument.
func (p *parser) unknownArg(argPos int, key, name string, spec callSpec, afterQuote bool) *SyntaxError {
	msg := fmt.Sprintf("unknown argument %q for %s (accepted: %s)", key, name, acceptedArgs(spec))
	if afterQuote {
		msg += fmt.Sprintf("; the quoted value before it ends at the quote before \", %s=\": if that is part of the text, escape the quotes inside the text", key)
	}
	return p.errAt(argPos, "%s", msg)
}

// acceptedArgs lists the argument names (with aliases) a call accepts.
func acceptedArgs(spec callSpec) string {
	if len(spec.args) == 0 {
		return "none"
	}
	var names []string
	for alias, canon := range argAliases {
		if slices.Contains(spec.args, canon) {
			names = append(names, alias)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// build turns checked arguments into an action.
func (p *parser) build(spec callSpec, args map[string]argValue) (traj.Action, error) {
	a := traj.Action{Type: spec.typ}
	var err error
	if v, ok := args[argStart]; ok {
		var pt traj.Point
		if pt, err = p.point(v); err != nil {
			return traj.Action{}, err
		}
		if spec.typ == traj.Drag {
			a.Start = &pt
		} else {
			a.Point = &pt
		}
	}
	if v, ok := args[argEnd]; ok {
		var pt traj.Point
		if pt, err = p.point(v); err != nil {
			return traj.Action{}, err
		}
		a.End = &pt
	}
	if v, ok := args[argKey]; ok {
		a.Keys = splitKeys(v.s)
		if len(a.Keys) == 0 {
			return traj.Action{}, p.errAt(v.off, "empty key list: expected keys such as 'ctrl c'")
		}
	}
	if v, ok := args[argContent]; ok {
		a.Text = v.s
	}
	if v, ok := args[argDirection]; ok {
		d := strings.ToLower(strings.TrimSpace(v.s))
		switch d {
		case traj.DirUp, traj.DirDown, traj.DirLeft, traj.DirRight:
			a.Direction = d
		default:
			return traj.Action{}, p.errAt(v.off, "invalid scroll direction %q (want up, down, left or right)", v.s)
		}
	}
	return a, nil
}

// splitKeys splits a key combination on whitespace and '+', lower-cased
// ("Ctrl+Shift s" → ctrl, shift, s). A run of '+' standing alone is the
// key "+" itself ("ctrl +").
func splitKeys(s string) []string {
	var keys []string
	for _, f := range strings.Fields(s) {
		if strings.Trim(f, "+") == "" {
			keys = append(keys, "+")
			continue
		}
		for _, k := range strings.Split(f, "+") {
			if k != "" {
				keys = append(keys, strings.ToLower(k))
			}
		}
	}
	return keys
}

// value parses one argument value: a quoted string or an unquoted run.
func (p *parser) value() (argValue, error) {
	if p.pos < len(p.in) && (p.in[p.pos] == '\'' || p.in[p.pos] == '"') {
		return p.quoted()
	}
	start := p.pos
	depth := 0
scan:
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case '(', '[', '{':
			depth++
		case ']', '}':
			if depth > 0 {
				depth--
			}
		case ')':
			if depth == 0 {
				break scan
			}
			depth--
		case ',':
			if depth == 0 {
				break scan
			}
		case '\n':
			break scan
		}
		p.pos++
	}
	s := strings.TrimRight(p.in[start:p.pos], " \t\r\v\f")
	if s == "" {
		return argValue{}, p.errAt(start, "expected an argument value, found %s", p.found(start))
	}
	return argValue{s: s, off: start, exact: true}, nil
}

// quoted parses a single- or double-quoted string with the escapes \\,
// \', \", \n, \t and \r; any other backslash is kept as written. Models
// leave quotes inside typed text unescaped (type(content='print('hi')')),
// so which quote of the opening kind ends the string is a choice: the
// candidates, in the order Parse tries them (see quoteEnds), are the quotes
// where the call can go on, then those followed by ',' or ')', then the
// first quote — none of them past a quote followed by the start of a
// keyword argument (", name =", any name). quoted takes the candidate p.choice names for this string
// (the first by default) and records the string as a backtracking point.
func (p *parser) quoted() (argValue, error) {
	open := p.pos
	k := p.choice[open]
	ends := p.quoteEnds(open, k > 0)
	if len(ends) == 0 {
		return argValue{}, p.errAt(open, "unterminated string: no closing %c before the end of input", p.in[open])
	}
	k = min(k, len(ends)-1)
	p.strings = append(p.strings, open)
	end := ends[k]
	s, exact := p.decode(open+1, end)
	p.pos = end + 1
	return argValue{s: s, off: open + 1, exact: exact}, nil
}

// quoteEnds returns the offsets of the quotes that may end the string
// opened at open, in the order they are tried: the quotes where the call
// can go on (closesCall), then those followed by ',' or ')' (closes), then
// the first quote. The scan ends at the first quote followed by the start
// of a keyword argument, ", name =" and a value (argAfter), whatever the
// name: type(content='a', start_box='(1,2,3)') is a bad point and
// type(content='Hello', button='left') an unknown argument, never the text
// "a', start_box='(1,2,3)" or "Hello', button='left". Unless all is set it
// stops at the first quote where the call can go on, which is the only one
// most strings need (the scan stays linear in the input).
func (p *parser) quoteEnds(open int, all bool) []int {
	q := p.in[open]
	var strict, loose []int
	first := -1
scan:
	for i := open + 1; i < len(p.in); i++ {
		switch c := p.in[i]; {
		case c == '\\':
			i++ // the escaped byte (or the next one: it is not a quote either way)
		case c == q:
			if first < 0 {
				first = i
			}
			switch {
			case p.closesCall(i + 1):
				strict = append(strict, i)
				if !all {
					return strict
				}
			case p.closes(i + 1):
				loose = append(loose, i)
			}
			if p.argAfter(i+1) != "" {
				break scan // the string ends here at the latest
			}
		}
	}
	out := append(strict, loose...)
	if first >= 0 && !slices.Contains(out, first) {
		out = append(out, first)
	}
	return out
}

// decode returns the text of a quoted string between its quotes,
// in[start:end], with its escapes applied as Python (which UI-TARS's own
// parser evaluates the actions with) or JSON would (pystr.Lenient: an
// escape neither decodes is kept as written), and whether offsets in it
// map 1:1 onto the input (no escapes).
func (p *parser) decode(start, end int) (string, bool) {
	var b strings.Builder
	exact := true
	for i := start; i < end; {
		c := p.in[i]
		if c != '\\' || i+1 >= end {
			b.WriteByte(c)
			i++
			continue
		}
		exact = false
		e, size := utf8.DecodeRuneInString(p.in[i+1 : end])
		i += 1 + size
		i += pystr.Lenient(&b, e, p.in[i:end])
	}
	return b.String(), exact
}

// closesCall reports whether a quote ending at i ends an argument where the
// call can go on: after spaces, the end of the input; ')' followed by spaces
// and the end of the line, the input, a code fence or another action on the
// same line; or ',' followed by the next argument ("name =") or by ')'.
func (p *parser) closesCall(i int) bool {
	for i < len(p.in) && isSpace(p.in[i]) {
		i++
	}
	if i == len(p.in) {
		return true
	}
	switch p.in[i] {
	case ')':
		i++
		for i < len(p.in) && (p.in[i] == ' ' || p.in[i] == '\t') {
			i++
		}
		if i == len(p.in) || p.in[i] == '\n' || p.in[i] == '\r' || strings.HasPrefix(p.in[i:], "```") || p.callAt(i) {
			return true
		}
		if j := p.thenAt(i); j >= 0 {
			for j < len(p.in) && isSpace(p.in[j]) {
				j++
			}
			return p.callAt(j)
		}
		return false
	case ',':
		if p.argAfter(i) != "" {
			return true
		}
		i++
		for i < len(p.in) && isSpace(p.in[i]) {
			i++
		}
		return i < len(p.in) && p.in[i] == ')'
	}
	return false
}

// argAfter returns name when the input from i is, after whitespace,
// ", name =" and the start of a value (the start of the next keyword
// argument), else "". name is an identifier; whitespace may surround it and
// follow '='; the value starts with any byte but '=' (so "name ==" is a
// comparison, not an argument), ',' or ')'.
func (p *parser) argAfter(i int) string {
	for i < len(p.in) && isSpace(p.in[i]) {
		i++
	}
	if i >= len(p.in) || p.in[i] != ',' {
		return ""
	}
	i++
	for i < len(p.in) && isSpace(p.in[i]) {
		i++
	}
	j := i
	for j < len(p.in) && (p.in[j] == '_' || 'a' <= p.in[j] && p.in[j] <= 'z' || 'A' <= p.in[j] && p.in[j] <= 'Z' || j > i && '0' <= p.in[j] && p.in[j] <= '9') {
		j++
	}
	name := p.in[i:j]
	for j < len(p.in) && isSpace(p.in[j]) {
		j++
	}
	if name == "" || j >= len(p.in) || p.in[j] != '=' {
		return ""
	}
	j++
	for j < len(p.in) && isSpace(p.in[j]) {
		j++
	}
	if j >= len(p.in) || p.in[j] == '=' || p.in[j] == ',' || p.in[j] == ')' {
		return ""
	}
	return name
}

// thenAt returns the offset after the word "then" (any case) when it
// starts at i and is followed by whitespace or the end of the input, else
// -1.
func (p *parser) thenAt(i int) int {
	if len(p.in)-i < 4 || !strings.EqualFold(p.in[i:i+4], "then") || i+4 < len(p.in) && !isSpace(p.in[i+4]) {
		return -1
	}
	return i + 4
}

// callAt reports whether a known action ("name(" or "ANS") starts at i.
func (p *parser) callAt(i int) bool {
	j := i
	for j < len(p.in) && (p.in[j] == '_' || 'a' <= p.in[j] && p.in[j] <= 'z' || 'A' <= p.in[j] && p.in[j] <= 'Z') {
		j++
	}
	if _, ok := calls[strings.ToLower(p.in[i:j])]; ok {
		for j < len(p.in) && (p.in[j] == ' ' || p.in[j] == '\t') {
			j++
		}
		return j < len(p.in) && p.in[j] == '('
	}
	return p.in[i:j] == "ANS"
}

// closes reports whether the input from i (after whitespace) is the end,
// ',' or ')'.
func (p *parser) closes(i int) bool {
	for i < len(p.in) && isSpace(p.in[i]) {
		i++
	}
	return i == len(p.in) || p.in[i] == ',' || p.in[i] == ')'
}
