package uitars

import (
	"strings"

	"github.com/codapipe/codapipe/pkg/traj"
)

// Format returns the canonical UI-TARS text of one action, for example
// click(start_box='(512,384)'), hotkey(key='ctrl c'),
// type(content='line one\nline two'),
// type(content='x', start_box='(300,400)') or ANS 42. Coordinates are written in
// opt's coordinate space (see gridString for the exact representation);
// strings are single-quoted with \\, \', \n, \r and \t escaped. The
// grid1000 form (DefaultOptions) is the canonical action text of the
// contract: it does not depend on any image size.
//
// Parse(Format(a)) returns a exactly for every action Parse can produce
// with the same options. Actions built elsewhere round-trip when their
// points are values Parse can produce (k/1000 for integer k on the grid,
// for example), their keys are non-empty, lower-case, free of whitespace
// and '+' (or exactly "+"), their direction is valid, and an answer is
// non-empty, trimmed and on one line (no '\n' or '\r'). A missing
// required point is written as an empty argument list, which Parse
// rejects.
//
// A pixel space needs opt.Image. Options that Parse would reject — a pixel
// space without the image size among them — are treated as DefaultOptions:
// the text is then on the 0–1000 grid, not in the space asked for.
func Format(a traj.Action, opt Options) string {
	var b strings.Builder
	w, h := formatExtent(opt)
	writeAction(&b, a, w, h)
	return b.String()
}

// FormatAll formats several actions, separated by a blank line as UI-TARS
// writes them.
func FormatAll(as []traj.Action, opt Options) string {
	w, h := formatExtent(opt)
	var b strings.Builder
	for i, a := range as {
		if i > 0 {
			b.WriteString("\n\n")
		}
		writeAction(&b, a, w, h)
	}
	return b.String()
}

func formatExtent(opt Options) (w, h float64) {
	w, h, _, err := opt.extent()
	if err != nil {
		return GridSize, GridSize
	}
	return w, h
}

func writeAction(b *strings.Builder, a traj.Action, w, h float64) {
	if a.Type == traj.Answer {
		b.WriteString("ANS ")
		b.WriteString(a.Text)
		return
	}
	b.WriteString(string(a.Type))
	b.WriteByte('(')
	sep := ""
	arg := func(name string) {
		b.WriteString(sep)
		b.WriteString(name)
		b.WriteByte('=')
		sep = ", "
	}
	box := func(name string, pt *traj.Point) {
		if pt == nil {
			return
		}
		arg(name)
		b.WriteString("'(")
		b.WriteString(gridString(pt.X, w))
		b.WriteByte(',')
		b.WriteString(gridString(pt.Y, h))
		b.WriteString(")'")
	}
	switch a.Type {
	case traj.Drag:
		box(argStart, a.Start)
		box(argEnd, a.End)
	case traj.Hotkey, traj.KeyDown, traj.KeyUp:
		arg(argKey)
		writeQuoted(b, strings.Join(a.Keys, " "))
	case traj.TypeText:
		arg(argContent)
		writeQuoted(b, a.Text)
		box(argStart, a.Point)
	case traj.Scroll:
		box(argStart, a.Point)
		arg(argDirection)
		writeQuoted(b, a.Direction)
	case traj.Finished:
		if a.Text != "" {
			arg(argContent)
			writeQuoted(b, a.Text)
		}
	case traj.Click, traj.LeftDouble, traj.RightSingle, traj.Hover:
		box(argStart, a.Point)
	}
	b.WriteByte(')')
}

// writeQuoted writes s as a single-quoted UI-TARS string.
func writeQuoted(b *strings.Builder, s string) {
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '\'':
			b.WriteString(`\'`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
}
