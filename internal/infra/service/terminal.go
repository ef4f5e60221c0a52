package service

import (
	"fmt"
	"io"
	"strings"
)

// EscapeControl returns s with every control character but newline and
// tab written as a Go escape ("\x1b", "\r", "\u009b"), so that text from
// outside (a guest's error page, a model's answer, a file name) cannot
// move the cursor, recolour or retitle the terminal it is printed on.
func EscapeControl(s string) string {
	if !hasControl(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if control(r) {
			switch r {
			case '\r':
				b.WriteString(`\r`)
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			case '\v':
				b.WriteString(`\v`)
			default:
				if r < 0x7f {
					fmt.Fprintf(&b, `\x%02x`, r)
				} else { // DEL and C1 as \u, which is JSON's escape too (a JSON log line stays JSON)
					fmt.Fprintf(&b, `\u%04x`, r)
				}
			}
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// control reports whether r is a C0 or C1 control character, DEL
// included, other than newline and tab.
func control(r rune) bool {
	return r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r <= 0x9f
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
			return true
		}
		if c == 0xc2 && i+1 < len(s) && s[i+1] >= 0x80 && s[i+1] <= 0x9f { // U+0080..U+009F
			return true
		}
	}
	return false
}

// controlWriter writes through EscapeControl: every line a command prints
// (logs, summaries, errors, its last line) reaches the terminal escaped.
// A carriage return that begins a write is kept: it is a progress bar
// (rollout's, sftpack's) drawing its line again, never text from outside,
// which stands inside a line.
type controlWriter struct{ w io.Writer }

func (c controlWriter) Write(p []byte) (int, error) {
	if !hasControl(string(p)) {
		return c.w.Write(p)
	}
	lead := ""
	if p[0] == '\r' {
		lead = "\r"
	}
	if _, err := io.WriteString(c.w, lead+EscapeControl(string(p[len(lead):]))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap returns the writer c writes to (to tell whether it is a terminal).
func (c controlWriter) Unwrap() io.Writer { return c.w }
