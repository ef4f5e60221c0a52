package judge

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/codapipe/codapipe/pkg/traj"
)

// AnswerFile is the file of a prompt set that says how the judge reads
// its answers; without one, answers are read as the default prompt asks
// (FormatResDict).
const AnswerFile = "answer.json"

// The answer formats a prompt set may declare (AnswerFormat.Kind).
const (
	// FormatResDict: captions, then a dict with a Correctness key (JSON or
	// a Python literal), between <res_dict> tags or bare (ParseAnswer).
	FormatResDict = "res_dict"
	// FormatVerdict: a labelled line, "Status: success", "**Verdict**:
	// NOT SUCCESS"; the last line with one of the labels decides.
	FormatVerdict = "verdict"
	// FormatFinalLine: the answer's last line starts with the verdict
	// ("Yes.", "**No**").
	FormatFinalLine = "final_line"
	// FormatJSON: a JSON object (bare or in a code fence) with the
	// verdict under Key: true/false, a success or failure word, or a
	// score when Threshold is set; the last such object decides.
	FormatJSON = "json"
	// FormatScore: a labelled score, "Score: 4", "Score: 4/5", "Rating:
	// 4 out of 5"; a success when it reaches Threshold.
	FormatScore = "score"
)

// AnswerFormat says how the answers of a prompt set are read (the prompt
// set's answer.json). Words and labels are matched ignoring case, the
// markdown (bold, italics, code, headings, list marks) and the quotes
// models put around them; what follows the verdict on its line (a
// reason, a full stop) does not matter. Text inside <think>…</think> (or
// before a lone </think>) never decides. Formats other than res_dict say
// only success or failure: a success is clean (no redundant step, no
// first error), since the answer says nothing more.
type AnswerFormat struct {
	// Kind is one of res_dict (the default), verdict, final_line, json,
	// score.
	Kind string `json:"kind"`
	// Labels (verdict, score) are the words before the colon of the
	// verdict's line; the last line with any of them decides.
	Labels []string `json:"labels,omitempty"`
	// Success and Failure (verdict, final_line, json) are the words that
	// mean each; the longest one that starts the verdict wins, so "not
	// success" is a failure. Defaults: success/failure words below.
	Success []string `json:"success,omitempty"`
	Failure []string `json:"failure,omitempty"`
	// Key (json) is the object key holding the verdict or score,
	// matched ignoring case, spaces and underscores.
	Key string `json:"key,omitempty"`
	// Scale (score, json with a threshold) is the lowest and highest
	// score an answer may give (a score outside is unusable); Threshold
	// the lowest score that is a success.
	Scale     []float64 `json:"scale,omitempty"`
	Threshold float64   `json:"threshold,omitempty"`
}

// defaultSuccess and defaultFailure are the verdict words of a format
// that names none.
var (
	defaultSuccess = []string{"success", "successful", "yes", "true", "correct", "pass", "passed", "complete", "completed"}
	defaultFailure = []string{"failure", "failed", "fail", "not success", "not successful", "unsuccessful", "no", "false", "incorrect", "not correct", "not complete", "incomplete"}
)

// DefaultAnswerFormat is how answers are read without an answer.json.
func DefaultAnswerFormat() AnswerFormat { return AnswerFormat{Kind: FormatResDict} }

// ParseAnswerFormat reads and checks an answer.json; src names it in
// errors.
func ParseAnswerFormat(b []byte, src string) (AnswerFormat, error) {
	var f AnswerFormat
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("judge: answer format %s: %w", src, err)
	}
	if err := f.check(); err != nil {
		return f, fmt.Errorf("judge: answer format %s: %w", src, err)
	}
	return f, nil
}

// check tells what is missing or wrong in f.
func (f AnswerFormat) check() error {
	for _, w := range slices.Concat(f.Labels, f.Success, f.Failure) {
		if strings.TrimSpace(w) == "" {
			return errors.New("an empty label or verdict word")
		}
	}
	for _, s := range f.Success {
		for _, x := range f.Failure {
			if normWords(s) == normWords(x) {
				return fmt.Errorf("%q is both a success and a failure word", s)
			}
		}
	}
	scored := f.Kind == FormatScore || (f.Kind == FormatJSON && len(f.Scale) > 0)
	if scored {
		if len(f.Scale) != 2 || !(f.Scale[0] < f.Scale[1]) {
			return fmt.Errorf("\"scale\" must be [lowest, highest] with lowest < highest, got %v", f.Scale)
		}
		if !(f.Threshold > f.Scale[0] && f.Threshold <= f.Scale[1]) {
			return fmt.Errorf("\"threshold\" %v must be above the scale's lowest score and at most its highest %v", f.Threshold, f.Scale)
		}
	} else if len(f.Scale) > 0 || f.Threshold != 0 {
		return fmt.Errorf("\"scale\" and \"threshold\" belong to the score format or json with a score")
	}
	switch f.Kind {
	case FormatResDict:
		if len(f.Labels)+len(f.Success)+len(f.Failure) > 0 || f.Key != "" {
			return errors.New("res_dict takes no labels, words or key")
		}
	case FormatVerdict, FormatScore:
		if len(f.Labels) == 0 {
			return fmt.Errorf("%s needs \"labels\" (the words before the verdict's colon, e.g. [\"Status\"])", f.Kind)
		}
	case FormatFinalLine:
		if len(f.Labels) > 0 || f.Key != "" {
			return errors.New("final_line takes no labels or key")
		}
	case FormatJSON:
		if strings.TrimSpace(f.Key) == "" {
			return errors.New("json needs \"key\" (the object key holding the verdict)")
		}
	default:
		return fmt.Errorf("unknown kind %q (want res_dict, verdict, final_line, json or score)", f.Kind)
	}
	return nil
}

// words returns the success and failure words, the defaults for none.
func (f AnswerFormat) words() (success, failure []string) {
	success, failure = f.Success, f.Failure
	if len(success) == 0 {
		success = defaultSuccess
		if f.Kind == FormatFinalLine {
			success = []string{"yes"}
		}
	}
	if len(failure) == 0 {
		failure = defaultFailure
		if f.Kind == FormatFinalLine {
			failure = []string{"no"}
		}
	}
	return success, failure
}

// Parse reads one answer in format f. The error is a *ParseError with
// the reason when no verdict can be read.
func (f AnswerFormat) Parse(text string) (Answer, error) {
	text, thinking := stripThinking(text)
	if f.Kind == "" || f.Kind == FormatResDict {
		a, err := ParseAnswer(text)
		if err != nil && thinking && strings.TrimSpace(text) == "" {
			return a, parseErr("the answer is all thinking (<think> without an end): no verdict")
		}
		return a, err
	}
	a := Answer{Captions: captions(text)}
	if strings.TrimSpace(text) == "" {
		if thinking {
			return a, parseErr("the answer is all thinking (<think> without an end): no verdict")
		}
		return a, parseErr("empty answer")
	}
	var ok bool
	var err error
	switch f.Kind {
	case FormatVerdict:
		ok, err = f.verdictLine(text)
	case FormatFinalLine:
		ok, err = f.finalLine(text)
	case FormatJSON:
		ok, err = f.jsonVerdict(text)
	case FormatScore:
		ok, err = f.scoreLine(text)
	default:
		return a, parseErr("unknown answer format %q", f.Kind)
	}
	if err != nil {
		return a, err
	}
	a.Verdict = traj.Verdict{Correctness: ok, Redundant: []int{}, Optimized: ok}
	return a, nil
}

// thinkOpen and thinkClose delimit a reasoning model's thinking.
var (
	thinkBlock = regexp.MustCompile(`(?is)<think>.*?</think>`)
	thinkOpen  = regexp.MustCompile(`(?i)<think>`)
	thinkClose = regexp.MustCompile(`(?i)</think>`)
)

// stripThinking removes the thinking of an answer: <think>…</think>
// blocks, everything before a lone </think> (a chat template that opens
// the block itself) and everything after an unclosed <think> (an answer
// cut while thinking); thinking reports whether an unclosed block was
// cut off.
func stripThinking(text string) (string, bool) {
	text = thinkBlock.ReplaceAllString(text, "\n")
	if loc := thinkClose.FindAllStringIndex(text, -1); len(loc) > 0 {
		text = text[loc[len(loc)-1][1]:]
	}
	if loc := thinkOpen.FindStringIndex(text); loc != nil {
		return text[:loc[0]], true
	}
	return text, false
}

// markup are the characters models wrap words in: markdown emphasis,
// code, headings, quotes, brackets.
const markup = "*_`#>\"'“”‘’«»[](){}$"

// latexCommand is a LaTeX command models wrap a verdict in
// (\boxed{…}, \text{…}); latexNot a negation among them.
var (
	latexCommand = regexp.MustCompile(`\\[a-zA-Z]+`)
	latexNot     = regexp.MustCompile(`\\(?:neg|lnot|not)\b`)
)

// normWords lower-cases s, drops markup and LaTeX commands and collapses
// spaces, so that "**NOT  Success**" and "\boxed{\text{NOT SUCCESS}}"
// read "not success".
func normWords(s string) string {
	s = latexNot.ReplaceAllString(s, " not ")
	s = latexCommand.ReplaceAllString(s, " ")
	s = strings.Map(func(r rune) rune {
		if strings.ContainsRune(markup, r) {
			return ' '
		}
		return r
	}, strings.ToLower(s))
	return strings.Join(strings.Fields(s), " ")
}

// startWord returns which of the success or failure words starts v
// (normalised), the longest match winning: true for success. A word
// matches only whole ("no" does not start "none") and only when nothing
// but punctuation follows it before the next word ("Failure. The file
// ...", "No, the value ..."), so that a verdict word that begins a longer
// phrase ("success not achieved") is not taken for the verdict.
func startWord(v string, success, failure []string) (bool, string, bool) {
	v = normWords(v)
	best, bestLen, found := false, 0, false
	try := func(words []string, isSuccess bool) {
		for _, w := range words {
			w = normWords(w)
			if len(w) <= bestLen || !strings.HasPrefix(v, w) {
				continue
			}
			if r, _ := utf8.DecodeRuneInString(strings.TrimLeft(v[len(w):], " ")); unicode.IsLetter(r) || unicode.IsDigit(r) {
				// More words follow without a stop ("success not
				// achieved", "complete failure", "no problems"): the
				// verdict is not the word alone, so it is not read.
				continue
			}
			best, bestLen, found = isSuccess, len(w), true
		}
	}
	try(success, true)
	try(failure, false)
	if !found {
		return false, "", false
	}
	return best, v[:bestLen], true
}

// lastByte is the last byte of s as a string ("" for none).
func lastByte(s string) string {
	if s == "" {
		return ""
	}
	return s[len(s)-1:]
}

// asciiLower lower-cases the ASCII letters of s, byte for byte.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// inWord reports whether c, in lower-cased text, continues a word.
func inWord(c byte) bool {
	return c == '_' || c == '-' || ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c >= 0x80
}

// lineLead are the characters that may come before a one-word label at
// the start of its line: spaces, markup, list marks, numbering.
const lineLead = " \t*_`#>-+•0123456789.)"

// labelled returns the text after the last "label:" of any of labels in
// text, up to the end of its line (or, when the line ends at the colon,
// the next non-empty line): "Status: success", "**Verdict:** NOT
// SUCCESS", "- Answer: yes". The label must start its line, after markup,
// or follow a sentence ("... the task is considered: ...").
func labelled(text string, labels []string) (string, string, bool) {
	type hit struct {
		at    int
		label string
		value string
	}
	var last *hit
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		low := asciiLower(line) // byte offsets stay line's
		for _, l := range labels {
			ll := asciiLower(strings.TrimSpace(l))
			for off := 0; ; {
				j := strings.Index(low[off:], ll)
				if j < 0 {
					break
				}
				j += off
				off = j + len(ll)
				if j > 0 && inWord(low[j-1]) {
					continue
				}
				// A one-word label starts its line (after markup, list
				// marks or numbering) or a sentence: "(confidence score:
				// 5)" or "recap: status: success" in prose is not the
				// verdict. A phrase ("the task is considered") may stand
				// anywhere.
				if before := line[:j]; !strings.Contains(ll, " ") && strings.TrimLeft(before, lineLead) != "" &&
					!strings.ContainsAny(lastByte(strings.TrimRight(before, " \t*_`")), ".!?;") {
					continue
				}
				rest := strings.TrimLeft(line[off:], markup+" \t")
				after, ok := strings.CutPrefix(rest, ":")
				if !ok {
					after, ok = strings.CutPrefix(rest, "：")
				}
				if !ok {
					continue
				}
				value := strings.TrimSpace(after)
				if strings.Trim(value, markup+" \t") == "" {
					for _, next := range lines[i+1:] {
						if strings.TrimSpace(next) != "" {
							value = strings.TrimSpace(next)
							break
						}
					}
				}
				pos := i<<20 | j
				if last == nil || pos >= last.at {
					last = &hit{at: pos, label: l, value: value}
				}
			}
		}
	}
	if last == nil {
		return "", "", false
	}
	return last.label, last.value, true
}

// verdictLine reads FormatVerdict.
func (f AnswerFormat) verdictLine(text string) (bool, error) {
	label, value, ok := labelled(text, f.Labels)
	if !ok {
		return false, parseErr("no verdict line (%s)", labelList(f.Labels))
	}
	success, failure := f.words()
	v, _, ok := startWord(value, success, failure)
	if !ok {
		return false, parseErr("%s: %q is neither a success word (%s) nor a failure word (%s)", label, clip(value), strings.Join(success, ", "), strings.Join(failure, ", "))
	}
	return v, nil
}

// finalLine reads FormatFinalLine.
func (f AnswerFormat) finalLine(text string) (bool, error) {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	var last string
	for i := len(lines) - 1; i >= 0; i-- {
		if normWords(lines[i]) != "" {
			last = lines[i]
			break
		}
	}
	success, failure := f.words()
	v, _, ok := startWord(last, success, failure)
	if !ok {
		return false, parseErr("the last line %q does not start with a success word (%s) or a failure word (%s)", clip(last), strings.Join(success, ", "), strings.Join(failure, ", "))
	}
	return v, nil
}

// jsonVerdict reads FormatJSON: the last object (in a code fence or bare)
// with the key; a Python-style literal is read too.
func (f AnswerFormat) jsonVerdict(text string) (bool, error) {
	key := normKey(f.Key)
	var found any
	have := false
	eachDict(text, func(int, error) {}, func(d map[string]any) {
		if x, ok := findKey(d, key, 0); ok {
			found, have = x, true
		}
	})
	if !have {
		return false, parseErr("no JSON object with the key %q", f.Key)
	}
	if len(f.Scale) > 0 {
		s, den, err := asScore(found)
		if err != nil {
			return false, parseErr("%s: %v", f.Key, err)
		}
		return f.passes(s, den)
	}
	switch t := found.(type) {
	case bool:
		return t, nil
	case string:
		success, failure := f.words()
		if v, _, ok := startWord(t, success, failure); ok {
			return v, nil
		}
		return false, parseErr("%s: %q is neither a success word (%s) nor a failure word (%s)", f.Key, clip(t), strings.Join(success, ", "), strings.Join(failure, ", "))
	}
	return false, parseErr("%s: want true/false or a verdict word, got %s", f.Key, describe(found))
}

// findKey returns the value under key (normalised) in d or the first
// object inside it that has it.
func findKey(d map[string]any, key string, depth int) (any, bool) {
	if v, ok := d[key]; ok {
		return v, true
	}
	if depth > maxDepth {
		return nil, false
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range d {
			if !yield(k) {
				return
			}
		}
	}) {
		if inner, ok := d[k].(map[string]any); ok {
			if v, ok := findKey(inner, key, depth+1); ok {
				return v, true
			}
		}
	}
	return nil, false
}

// scoreNumber is a score as models write it: "4", "4.5", "4/5", "4 out
// of 5", "4 / 5", with markup around it.
var scoreNumber = regexp.MustCompile(`^[-+]?\d+(?:\.\d+)?(?:\s*(?:/|out of)\s*(\d+(?:\.\d+)?))?`)

// scoreLine reads FormatScore.
func (f AnswerFormat) scoreLine(text string) (bool, error) {
	label, value, ok := labelled(text, f.Labels)
	if !ok {
		return false, parseErr("no score line (%s)", labelList(f.Labels))
	}
	s, den, err := asScore(value)
	if err != nil {
		return false, parseErr("%s: %v", label, err)
	}
	return f.passes(s, den)
}

// asScore reads a score from a JSON number or a score string, and the
// highest score it names ("4/5", "8 out of 10"; 0 when it names none).
func asScore(x any) (score, den float64, err error) {
	switch t := x.(type) {
	case float64:
		return t, 0, nil
	case string:
		v := strings.TrimSpace(strings.Trim(strings.TrimSpace(t), markup))
		m := scoreNumber.FindStringSubmatch(v)
		if m == nil {
			return 0, 0, fmt.Errorf("%q does not start with a score", clip(t))
		}
		num := m[0]
		if i := strings.IndexAny(num, "/o"); i >= 0 {
			num = num[:i]
		}
		if score, err = strconv.ParseFloat(strings.TrimSpace(num), 64); err != nil {
			return 0, 0, fmt.Errorf("%q: %v", clip(t), err)
		}
		if m[1] != "" {
			if den, err = strconv.ParseFloat(m[1], 64); err != nil {
				return 0, 0, fmt.Errorf("%q: %v", clip(t), err)
			}
		}
		return score, den, nil
	}
	return 0, 0, fmt.Errorf("want a score, got %s", describe(x))
}

// passes compares a score with the threshold; a score off the scale, or
// given on another scale ("4/10" where the scale ends at 5), is unusable.
func (f AnswerFormat) passes(s, den float64) (bool, error) {
	if den != 0 && den != f.Scale[1] {
		return false, parseErr("score %v/%v is not on the scale %v–%v", s, den, f.Scale[0], f.Scale[1])
	}
	if math.IsNaN(s) || s < f.Scale[0] || s > f.Scale[1] {
		return false, parseErr("score %v is off the scale %v–%v", s, f.Scale[0], f.Scale[1])
	}
	return s >= f.Threshold, nil
}

func labelList(labels []string) string {
	q := make([]string, len(labels))
	for i, l := range labels {
		q[i] = strconv.Quote(l + ":")
	}
	return "want a line with " + strings.Join(q, " or ")
}

// clip shortens s for an error message.
func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}
