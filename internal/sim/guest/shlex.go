package guest

import (
	"errors"
	"strings"
)

// shlexSplit splits a command line as Python's shlex.split (POSIX mode,
// no comments) does, which is how the real guest reads a string command
// without shell=True. Unlike the simulated shell (desktop.Machine.Shell)
// it knows no operators and no ~.
func shlexSplit(s string) ([]string, error) {
	var (
		out   []string
		cur   strings.Builder
		inTok bool
	)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
			if inTok {
				out = append(out, cur.String())
				cur.Reset()
				inTok = false
			}
		case ch == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("No escaped character")
			}
			i++
			cur.WriteByte(s[i])
			inTok = true
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("No closing quotation")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inTok = true
		case ch == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '\\' || s[i+1] == '"') { // in "...", shlex escapes only \ and "
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("No closing quotation")
			}
			inTok = true
		default:
			cur.WriteByte(ch)
			inTok = true
		}
	}
	if inTok {
		out = append(out, cur.String())
	}
	return out, nil
}
