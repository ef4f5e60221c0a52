package guest

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"unicode"
)

// The simulated compilers of /lean/check and /tex/check. The real guest
// server runs `lake build` on the Lean project and pdflatex/bibtex on the
// document; the simulator has neither, so it checks the text for what
// makes those tools fail in the benchmark's tasks. A document that passes
// here may still fail the real tools (a wrong proof, an undefined control
// sequence); one that fails here fails them too.

// leanBuild is the simulated `lake build` of the Lean file's text (the
// only file of the simulated project): "" when it passes, else why it
// fails. Comments (-- to the end of the line, nested /- -/ blocks) and
// string literals are skipped; then the build fails when
//
//   - a comment or string is not terminated;
//   - the word sorry or admit appears (lake prints "declaration uses
//     'sorry'", which /lean/check counts as a failure; anywhere in the
//     file, as a real build of the file would);
//   - the brackets ( ) [ ] { } ⟨ ⟩ do not balance;
//   - a declaration ends with := or by and nothing after it (a proof
//     that was deleted and not replaced). A declaration runs from a line
//     that starts, at column 0, with a command keyword (theorem, lemma,
//     def, example, instance, abbrev, open, namespace, section, end,
//     variable, universe, import, set_option, noncomputable, structure,
//     inductive, class, attribute, @[, #) to the next such line.
func leanBuild(text string) string {
	code, err := leanCode(text)
	if err != "" {
		return err
	}
	for _, w := range leanWords(code) {
		if w == "sorry" || w == "admit" {
			return "declaration uses 'sorry'"
		}
	}
	if err := balanced(code, "([{⟨", ")]}⟩"); err != "" {
		return err
	}
	var decl []string
	flush := func() string {
		body := strings.TrimSpace(strings.Join(decl, "\n"))
		decl = nil
		if strings.HasSuffix(body, ":=") || body == "by" || strings.HasSuffix(body, " by") || strings.HasSuffix(body, "\nby") || strings.HasSuffix(body, "\tby") {
			return "a declaration ends without its body: " + lastLine(body)
		}
		return ""
	}
	for _, line := range strings.Split(code, "\n") {
		if leanCommand.MatchString(line) {
			if err := flush(); err != "" {
				return err
			}
		}
		decl = append(decl, line)
	}
	return flush()
}

// leanCommand matches a line that starts a Lean command at column 0.
var leanCommand = regexp.MustCompile(`^(theorem|lemma|def|example|instance|abbrev|open|namespace|section|end|variable|universe|import|set_option|noncomputable|private|protected|structure|inductive|class|attribute)\b|^@\[|^#`)

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

// leanCode blanks out Lean comments and string literals (keeping the
// newlines); err reports one that is not terminated.
func leanCode(text string) (string, string) {
	var b strings.Builder
	rs := []rune(text)
	for i := 0; i < len(rs); i++ {
		switch {
		case rs[i] == '-' && i+1 < len(rs) && rs[i+1] == '-':
			for i < len(rs) && rs[i] != '\n' {
				i++
			}
			if i < len(rs) {
				b.WriteRune('\n')
			}
		case rs[i] == '/' && i+1 < len(rs) && rs[i+1] == '-':
			depth := 0
			for ; i < len(rs); i++ {
				switch {
				case rs[i] == '/' && i+1 < len(rs) && rs[i+1] == '-':
					depth++
					i++
				case rs[i] == '-' && i+1 < len(rs) && rs[i+1] == '/':
					depth--
					i++
				case rs[i] == '\n':
					b.WriteRune('\n')
				}
				if depth == 0 {
					break
				}
			}
			if depth > 0 {
				return "", "unterminated comment"
			}
			b.WriteRune(' ')
		case rs[i] == '"':
			i++
			for ; i < len(rs) && rs[i] != '"'; i++ {
				if rs[i] == '\\' {
					i++
				}
			}
			if i >= len(rs) {
				return "", "unterminated string literal"
			}
			b.WriteString(`""`)
		default:
			b.WriteRune(rs[i])
		}
	}
	return b.String(), ""
}

// leanWords splits code into identifiers (letters, digits, _, ', ., and
// other identifier characters) .
func leanWords(code string) []string {
	return strings.FieldsFunc(code, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '\'' || r == '.' || r == '!' || r == '?')
	})
}

// balanced checks that the open and close brackets (pairs by position)
// nest properly in s.
func balanced(s, open, close string) string {
	op, cl := []rune(open), []rune(close)
	var stack []rune
	line := 1
	for _, r := range s {
		if r == '\n' {
			line++
		}
		if i := strings.IndexRune(open, r); i >= 0 {
			stack = append(stack, cl[indexRune(op, r)])
			continue
		}
		if strings.ContainsRune(close, r) {
			if len(stack) == 0 || stack[len(stack)-1] != r {
				return fmt.Sprintf("line %d: unexpected %q", line, r)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 {
		return fmt.Sprintf("%q expected at the end", stack[len(stack)-1])
	}
	return ""
}

func indexRune(rs []rune, r rune) int {
	for i, x := range rs {
		if x == r {
			return i
		}
	}
	return -1
}

// texMaxDepth bounds \input nesting.
const texMaxDepth = 8

var (
	texInclude   = regexp.MustCompile(`\\(?:input|include)\s*\{([^}]*)\}`)
	texEnv       = regexp.MustCompile(`\\(begin|end)\s*\{([^}]*)\}`)
	texBib       = regexp.MustCompile(`\\bibliography\s*\{([^}]*)\}`)
	texBibStyle  = regexp.MustCompile(`\\bibliographystyle\s*\{[^}]*\}`)
	texCitation  = regexp.MustCompile(`\\(?:no)?cite[a-zA-Z]*\*?\s*(?:\[[^\]]*\]\s*)*\{[^}]+\}`)
	texDocClass  = regexp.MustCompile(`\\documentclass\s*(?:\[[^\]]*\])?\s*\{[^}]+\}`)
	texBeginDoc  = regexp.MustCompile(`\\begin\s*\{document\}`)
	texCommentRE = regexp.MustCompile(`(^|[^\\])%.*`)
)

// texSource reads FILE.tex (or a name as \input gives it, with or without
// .tex) with its \input and \include files spliced in and its comments
// removed.
func texSource(read func(name string) (string, bool), name string, depth int) (string, string) {
	if depth > texMaxDepth {
		return "", "\\input nested too deep"
	}
	text, ok := read(name)
	if !ok && path.Ext(name) != ".tex" {
		text, ok = read(name + ".tex")
	}
	if !ok {
		return "", fmt.Sprintf("! LaTeX Error: File `%s' not found.", name)
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = texCommentRE.ReplaceAllString(l, "$1")
	}
	text = strings.Join(lines, "\n")
	var err string
	text = texInclude.ReplaceAllStringFunc(text, func(m string) string {
		if err != "" {
			return ""
		}
		sub, e := texSource(read, texInclude.FindStringSubmatch(m)[1], depth+1)
		err = e
		return sub
	})
	return text, err
}

// texCompile is the simulated `pdflatex FILE.tex`: "" when it exits 0,
// else why not. read reads a file of the working folder. It fails when
// FILE.tex (or a file it \input's or \include's) is missing, when there
// is no \documentclass before \begin{document}, when \begin{document} or
// \end{document} is missing, when the braces (not counting \{ and \})
// do not balance, or when \begin{X} and \end{X} do not nest.
func texCompile(read func(name string) (string, bool), file string) string {
	src, err := texSource(read, file+".tex", 0)
	if err != "" {
		return err
	}
	bd := texBeginDoc.FindStringIndex(src)
	if bd == nil {
		return "! LaTeX Error: Missing \\begin{document}."
	}
	if dc := texDocClass.FindStringIndex(src); dc == nil || dc[0] > bd[0] {
		return "! LaTeX Error: \\begin{document} ended by \\documentclass missing."
	}
	var braces strings.Builder
	for i := 0; i < len(src); i++ {
		if src[i] == '\\' {
			i++ // \{ \} \\ and control words: the next character is not a brace
			continue
		}
		if src[i] == '{' || src[i] == '}' {
			braces.WriteByte(src[i])
		}
	}
	if e := balanced(braces.String(), "{", "}"); e != "" {
		return "! unbalanced braces: " + e
	}
	var envs []string
	for _, m := range texEnv.FindAllStringSubmatch(src, -1) {
		name := strings.TrimSpace(m[2])
		if m[1] == "begin" {
			envs = append(envs, name)
			continue
		}
		if len(envs) == 0 || envs[len(envs)-1] != name {
			return fmt.Sprintf("! LaTeX Error: \\end{%s} without a matching \\begin.", name)
		}
		envs = envs[:len(envs)-1]
	}
	if len(envs) > 0 {
		return fmt.Sprintf("! LaTeX Error: \\begin{%s} ended by end of file.", envs[len(envs)-1])
	}
	if !strings.Contains(src[bd[1]:], "\\end{document}") {
		return "! Emergency stop: *** (job aborted, no legal \\end found)"
	}
	return ""
}

// texBibtex is the simulated `bibtex FILE` after pdflatex: "" when it
// exits 0, else why not. It fails, as bibtex does, when the document has
// no \bibliography{...} (no \bibdata), no \bibliographystyle (no
// \bibstyle), no \cite or \nocite (no \citation), or a database it names
// cannot be read. Citation keys missing from the database are not
// checked (bibtex only warns about them).
func texBibtex(read func(name string) (string, bool), file string) string {
	src, err := texSource(read, file+".tex", 0)
	if err != "" {
		return err
	}
	bib := texBib.FindAllStringSubmatch(src, -1)
	switch {
	case len(bib) == 0:
		return "I found no \\bibdata command"
	case !texBibStyle.MatchString(src):
		return "I found no \\bibstyle command"
	case !texCitation.MatchString(src):
		return "I found no \\citation commands"
	}
	for _, m := range bib {
		for _, db := range strings.Split(m[1], ",") {
			db = strings.TrimSpace(db)
			if path.Ext(db) != ".bib" {
				db += ".bib"
			}
			if _, ok := read(db); !ok {
				return "I couldn't open database file " + db
			}
		}
	}
	return ""
}
