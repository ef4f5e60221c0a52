package scienceboard

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"
)

// instructionWidth is how many characters of the instruction the text
// listing shows.
const instructionWidth = 60

type listTask struct {
	ID          string   `json:"id"`
	App         string   `json:"app"`
	Steps       int      `json:"steps"`
	Instruction string   `json:"instruction"`
	Unsupported []string `json:"unsupported"`
}

type listDoc struct {
	Tasks  []listTask     `json:"tasks"`
	Counts map[string]int `json:"counts"`
}

// WriteList writes the tasks of set to w. In JSON mode it writes exactly one
// document {"tasks":[{"id","app","steps","instruction","unsupported"}],
// "counts":{"App":n}} with full instructions and "unsupported" always an
// array. In text mode it writes a table (id, app, step limit, the start of
// the instruction, unsupported items as count and names) followed by the
// number of tasks per app and in total.
func WriteList(w io.Writer, set *Set, asJSON bool) error {
	var tasks []Task
	if set != nil {
		tasks = set.Tasks
	}
	if asJSON {
		doc := listDoc{Tasks: make([]listTask, 0, len(tasks)), Counts: set.Counts()}
		for _, t := range tasks {
			uns := t.Unsupported
			if uns == nil {
				uns = []string{}
			}
			doc.Tasks = append(doc.Tasks, listTask{ID: t.ID, App: t.App, Steps: t.Steps, Instruction: t.Instruction, Unsupported: uns})
		}
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAPP\tSTEPS\tINSTRUCTION\tUNSUPPORTED")
	withIssues := map[string]int{}
	total := 0
	for _, t := range tasks {
		uns := "-"
		if len(t.Unsupported) > 0 {
			uns = fmt.Sprintf("%d (%s)", len(t.Unsupported), strings.Join(t.UnsupportedNames(), ", "))
			withIssues[t.App]++
			total++
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", cell(t.ID), cell(t.App), t.Steps, shorten(t.Instruction, instructionWidth), cell(uns))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "APP\tTASKS\tWITH UNSUPPORTED")
	counts := set.Counts()
	for _, app := range set.Apps() {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", cell(app), counts[app], withIssues[app])
	}
	fmt.Fprintf(tw, "total\t%d\t%d\n", len(tasks), total)
	return tw.Flush()
}

// cell makes s safe for one tabwriter cell: whitespace runs (tabs and
// newlines included) become one space and other control characters are
// dropped.
func cell(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			space = true
			continue
		case unicode.IsControl(r):
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// shorten returns cell(s) cut to at most n characters, ending in "…" when
// cut.
func shorten(s string, n int) string {
	s = cell(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimRightFunc(string(r[:n-1]), unicode.IsSpace) + "…"
}
