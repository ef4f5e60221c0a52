package guest

import (
	"strings"
	"testing"
)

func TestLeanBuild(t *testing.T) {
	const head = "import Mathlib\n\nopen Nat\n\ntheorem t (n : ℕ) : n + 0 = n := by\n"
	for _, c := range []struct {
		name, text string
		fail       string // a substring of the reason; "" passes
	}{
		{"a proof", head + "  simp\n", ""},
		{"a term proof", "theorem u : 1 = 1 := rfl\n", ""},
		{"sorry", head + "  sorry\n", "sorry"},
		{"admit", head + "  admit\n", "sorry"},
		{"sorry in an earlier declaration", "def f : ℕ := sorry\n" + head + "  simp\n", "sorry"},
		{"sorry in a comment", head + "  simp -- no sorry here\n/- nor sorry /- nested -/ here -/\n", ""},
		{"sorry in a string", head + "  simp\n#eval \"sorry\"\n", ""},
		{"an identifier containing sorry", head + "  exact sorry_lemma n\n", ""},
		{"no proof", head, "without its body"},
		{"no proof before the next declaration", head + "\ntheorem v : 1 = 1 := rfl\n", "without its body"},
		{"a term without its body", "def f : ℕ :=\n", "without its body"},
		{"unbalanced", head + "  exact (foo ⟨n, n⟩\n", "expected at the end"},
		{"mismatched", head + "  exact [foo)\n", "unexpected"},
		{"unterminated comment", head + "  simp /- oops\n", "unterminated comment"},
		{"unterminated string", head + "  simp\n#eval \"x\n", "unterminated string"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := leanBuild(c.text)
			if (c.fail == "") != (got == "") || !strings.Contains(got, c.fail) {
				t.Errorf("leanBuild = %q, want %q", got, c.fail)
			}
		})
	}
}

func TestTeXChecks(t *testing.T) {
	const doc = "\\documentclass{article}\n\\begin{document}\n%s\n\\end{document}\n"
	files := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(n string) (string, bool) { s, ok := m[n]; return s, ok }
	}
	body := func(s string) string { return strings.Replace(doc, "%s", s, 1) }
	for _, c := range []struct {
		name  string
		read  func(string) (string, bool)
		latex string // "" passes
		bib   string // "" passes; "-" not run
	}{
		{"minimal", files("main.tex", body("Hello.")), "", "no \\bibdata"},
		{"missing", files(), "not found", "-"},
		{"no documentclass", files("main.tex", "\\begin{document}x\\end{document}"), "documentclass missing", "-"},
		{"no begin document", files("main.tex", "\\documentclass{article}\nx"), "Missing \\begin{document}", "-"},
		{"no end document", files("main.tex", "\\documentclass{article}\n\\begin{document}\nx\n"), "ended by end of file", "-"},
		{"unbalanced braces", files("main.tex", body("\\textbf{x")), "unbalanced braces", "-"},
		{"escaped braces", files("main.tex", body("\\{ \\} {\\em x}")), "", "-"},
		{"braces in a comment", files("main.tex", body("x % }{ \\end{itemize}")), "", "-"},
		{"mismatched environments", files("main.tex", body("\\begin{itemize}\\item x\\end{enumerate}")), "without a matching", "-"},
		{"nested environments", files("main.tex", body("\\begin{figure}\\begin{center}x\\end{center}\\end{figure}")), "", "-"},
		{"input", files("main.tex", body("\\input{code}"), "code.tex", "\\begin{verbatim}x\\end{verbatim}"), "", "-"},
		{"missing input", files("main.tex", body("\\input{code}")), "code' not found", "-"},
		{"bibtex", files("main.tex", body("\\cite{x}\\bibliographystyle{plain}\\bibliography{refs}"), "refs.bib", "@article{x,}"), "", ""},
		{"bibtex, two databases", files("main.tex", body("\\citep[p.~2]{x}\\bibliographystyle{plain}\\bibliography{a, b.bib}"), "a.bib", "", "b.bib", ""), "", ""},
		{"bibtex, no database file", files("main.tex", body("\\cite{x}\\bibliographystyle{plain}\\bibliography{refs}")), "", "couldn't open database file refs.bib"},
		{"bibtex, no style", files("main.tex", body("\\cite{x}\\bibliography{refs}"), "refs.bib", ""), "", "no \\bibstyle"},
		{"bibtex, no citation", files("main.tex", body("\\bibliographystyle{plain}\\bibliography{refs}"), "refs.bib", ""), "", "no \\citation"},
		{"bibtex, nocite", files("main.tex", body("\\nocite{*}\\bibliographystyle{plain}\\bibliography{refs}"), "refs.bib", ""), "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := texCompile(c.read, "main")
			if (c.latex == "") != (got == "") || !strings.Contains(got, c.latex) {
				t.Errorf("texCompile = %q, want %q", got, c.latex)
			}
			if c.bib == "-" {
				return
			}
			got = texBibtex(c.read, "main")
			if (c.bib == "") != (got == "") || !strings.Contains(got, c.bib) {
				t.Errorf("texBibtex = %q, want %q", got, c.bib)
			}
		})
	}
}

func TestPyJSON(t *testing.T) {
	b, err := pyJSON(map[string]any{"b": []any{}, "a": map[string]any{}, "é": "ü😀<&>", "n": nil})
	want := "{\n  \"a\": {},\n  \"b\": [],\n  \"n\": null,\n  \"\\u00e9\": \"\\u00fc\\ud83d\\ude00<&>\"\n}\n"
	if err != nil || string(b) != want {
		t.Errorf("pyJSON = %q, %v\nwant %q", b, err, want)
	}
}

func TestPyRepr(t *testing.T) {
	for in, want := range map[string]string{"a": "'a'", "it's": `"it's"`, `a'b"c`: `'a\'b"c'`, "a\nb": `'a\nb'`} {
		if got := pyRepr(in); got != want {
			t.Errorf("pyRepr(%q) = %s, want %s", in, got, want)
		}
	}
	if got := pyRepr([]string{"a", "b"}); got != "['a', 'b']" {
		t.Errorf("list: %s", got)
	}
}
