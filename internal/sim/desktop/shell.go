package desktop

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// shellTok is one token of a shell command line.
type shellTok struct {
	text string
	op   bool // an unquoted operator: ; && || | & > >> < 2> 2>>
}

// shellLex splits a command line into words and operators, POSIX-style:
// single quotes are literal, double quotes allow \" \\ \$ \` escapes, a
// backslash outside quotes escapes the next character, and an unquoted
// leading ~ becomes the home directory.
func shellLex(s string) ([]shellTok, error) {
	var toks []shellTok
	var cur strings.Builder
	inWord := false
	quoted := false
	flush := func() {
		if inWord {
			w := cur.String()
			if !quoted && (w == "~" || strings.HasPrefix(w, "~/")) {
				w = HomeDir + w[1:]
			}
			toks = append(toks, shellTok{text: w})
		}
		cur.Reset()
		inWord, quoted = false, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			flush()
			if c == '\n' {
				toks = append(toks, shellTok{text: ";", op: true})
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			inWord, quoted = true, true
			i += j + 1
		case c == '"':
			inWord, quoted = true, true
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated double quote")
			}
		case c == '\\':
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					cur.WriteByte(s[i])
				}
			}
			inWord = true
		case c == ';' || c == '|' || c == '&' || c == '>' || c == '<':
			if c == '>' && inWord && !quoted && (cur.String() == "2" || cur.String() == "1") {
				cur.Reset()
				inWord = false
				op := "2>"
				if i+1 < len(s) && s[i+1] == '>' {
					op = "2>>"
					i++
				}
				toks = append(toks, shellTok{text: op, op: true})
				continue
			}
			flush()
			op := string(c)
			if i+1 < len(s) && (s[i+1] == c && c != ';' && c != '<' || c == '>' && s[i+1] == '&') {
				op += string(s[i+1])
				i++
			}
			toks = append(toks, shellTok{text: op, op: true})
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return toks, nil
}

// ShellWords splits a command line into words as a POSIX shell does
// (quotes, escapes, a leading ~ expanded to HomeDir); operators are plain
// words.
func ShellWords(s string) ([]string, error) {
	toks, err := shellLex(s)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = t.text
	}
	return out, nil
}

// ShellQuote quotes s for a POSIX shell, such as Machine.Shell.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// snapshotFS returns the simulated file system of a fresh machine with
// the apps of cat: the user's folders and what the apps add. Paths ending
// in "/" are directories.
func snapshotFS(cat *Catalog) map[string]string {
	fs := cat.files()
	for _, d := range []string{
		"/", "/home/", HomeDir + "/", HomeDir + "/Desktop/", HomeDir + "/Documents/", HomeDir + "/Downloads/",
		HomeDir + "/.config/", HomeDir + "/.local/", HomeDir + "/.local/share/", "/tmp/", "/app/", "/app/bin/",
	} {
		fs[d] = ""
	}
	fs[HomeDir+"/README-SIMULATOR.txt"] = "This machine is the codapipe SIMULATOR, not a real VM.\n"
	return fs
}

// Shell runs a setup shell command from a small simulated subset.
func (m *machine) Shell(command string) (string, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	toks, err := shellLex(command)
	if err != nil {
		return "sh: 1: Syntax error: " + err.Error() + "\n", 2
	}
	m.ui.version++
	var out strings.Builder
	code := 0
	skip := false // the next command is skipped by && / ||
	var cmd []shellTok
	run := func(sep string) {
		if len(cmd) > 0 && !skip {
			o, c := m.runSimple(cmd)
			out.WriteString(o)
			code = c
		}
		cmd = nil
		switch sep {
		case "&&":
			skip = code != 0
		case "||":
			skip = code == 0
		default:
			skip = false
		}
	}
	for _, t := range toks {
		if t.op && (t.text == ";" || t.text == "&&" || t.text == "||" || t.text == "&") {
			run(t.text)
			continue
		}
		cmd = append(cmd, t)
	}
	run(";")
	return out.String(), code
}

func (m *machine) abs(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = HomeDir + p[1:]
	}
	if !strings.HasPrefix(p, "/") {
		p = HomeDir + "/" + p
	}
	return path.Clean(p)
}

func (m *machine) isDir(p string) bool {
	_, ok := m.fs[strings.TrimSuffix(p, "/")+"/"]
	return ok || p == "/"
}

func (m *machine) isFile(p string) bool {
	if strings.HasSuffix(p, "/") {
		return false
	}
	_, ok := m.fs[p]
	return ok
}

// glob expands a pattern against the file system (no match: the pattern).
func (m *machine) glob(p string) []string {
	p = m.abs(p)
	if !strings.ContainsAny(p, "*?[") {
		return []string{p}
	}
	var out []string
	for k := range m.fs {
		name := strings.TrimSuffix(k, "/")
		if ok, _ := path.Match(p, name); ok && name != "" {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return []string{p}
	}
	sort.Strings(out)
	return out
}

func (m *machine) writeFile(p, text string, appendTo bool) error {
	p = m.abs(p)
	if p == "/dev/null" {
		return nil
	}
	if m.isDir(p) {
		return fmt.Errorf("%s: Is a directory", p)
	}
	if !m.isDir(path.Dir(p)) {
		return fmt.Errorf("%s: No such file or directory", p)
	}
	if appendTo {
		m.fs[p] += text
	} else {
		m.fs[p] = text
	}
	return nil
}

// runSimple runs one simple command with its redirections.
func (m *machine) runSimple(toks []shellTok) (string, int) {
	var words []string
	var outFile, errFile string
	var outAppend bool
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.op {
			if i+1 >= len(toks) || toks[i+1].op {
				return fmt.Sprintf("sh: 1: Syntax error: %q unexpected\n", t.text), 2
			}
			target := toks[i+1].text
			i++
			switch t.text {
			case ">", ">|", ">&":
				outFile, outAppend = target, false
			case ">>":
				outFile, outAppend = target, true
			case "2>", "2>>":
				errFile = target
			case "<":
			case "|":
				// A pipe: run the left side for its effects, keep the right.
				words = append(words[:0], target)
			default:
				return fmt.Sprintf("sh: 1: unsupported operator %q\n", t.text), 2
			}
			continue
		}
		words = append(words, t.text)
	}
	for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "=") {
		words = words[1:] // VAR=value prefixes
	}
	if len(words) == 0 {
		return "", 0
	}
	stdout, stderr, code := m.builtin(words)
	if outFile != "" {
		if err := m.writeFile(outFile, stdout, outAppend); err != nil {
			return "sh: 1: cannot create " + outFile + ": " + err.Error() + "\n", 2
		}
		stdout = ""
	}
	if errFile != "" {
		stderr = ""
	}
	return stdout + stderr, code
}

func (m *machine) builtin(w []string) (stdout, stderr string, code int) {
	name := path.Base(w[0])
	args := w[1:]
	flags := map[byte]bool{}
	var operands []string
	for _, a := range args {
		if len(a) > 1 && a[0] == '-' && name != "echo" && name != "printf" {
			for i := 1; i < len(a); i++ {
				flags[a[i]] = true
			}
			continue
		}
		operands = append(operands, a)
	}
	switch name {
	case "true", ":", "cd", "export", "chmod", "chown", "nmcli", "sync", "xdotool", "wmctrl":
		return "", "", 0
	case "nohup", "setsid", "env", "exec":
		for len(args) > 0 && strings.Contains(args[0], "=") {
			args = args[1:] // env VAR=value cmd
		}
		if len(args) == 0 {
			return "", "", 0
		}
		return m.builtin(args)
	case "false":
		return "", "", 1
	case "sleep":
		return "", "", 0
	case "echo":
		nl := "\n"
		if len(args) > 0 && args[0] == "-n" {
			nl, args = "", args[1:]
		}
		return strings.Join(args, " ") + nl, "", 0
	case "printf":
		if len(args) == 0 {
			return "", "printf: usage: printf format [arguments]\n", 2
		}
		return shellPrintf(args[0], args[1:]), "", 0
	case "cat":
		var b strings.Builder
		for _, p := range operands {
			for _, f := range m.glob(p) {
				if !m.isFile(f) {
					return b.String(), "cat: " + p + ": No such file or directory\n", 1
				}
				b.WriteString(m.fs[f])
			}
		}
		return b.String(), "", 0
	case "ls":
		if len(operands) == 0 {
			operands = []string{HomeDir}
		}
		var b strings.Builder
		for _, p := range operands {
			for _, f := range m.glob(p) {
				switch {
				case m.isDir(f):
					prefix := strings.TrimSuffix(f, "/") + "/"
					var names []string
					for k := range m.fs {
						if rest, ok := strings.CutPrefix(k, prefix); ok && rest != "" {
							rest = strings.TrimSuffix(rest, "/")
							if !strings.Contains(rest, "/") && (flags['a'] || !strings.HasPrefix(rest, ".")) {
								names = append(names, rest)
							}
						}
					}
					sort.Strings(names)
					for _, n := range names {
						b.WriteString(n + "\n")
					}
				case m.isFile(f):
					b.WriteString(f + "\n")
				default:
					return b.String(), "ls: cannot access '" + p + "': No such file or directory\n", 2
				}
			}
		}
		return b.String(), "", 0
	case "rm":
		code := 0
		var errs strings.Builder
		for _, p := range operands {
			for _, f := range m.glob(p) {
				switch {
				case m.isFile(f):
					delete(m.fs, f)
				case m.isDir(f) && flags['r']:
					prefix := strings.TrimSuffix(f, "/") + "/"
					for k := range m.fs {
						if strings.HasPrefix(k, prefix) {
							delete(m.fs, k)
						}
					}
				case m.isDir(f):
					errs.WriteString("rm: cannot remove '" + p + "': Is a directory\n")
					code = 1
				case !flags['f']:
					errs.WriteString("rm: cannot remove '" + p + "': No such file or directory\n")
					code = 1
				}
			}
		}
		return "", errs.String(), code
	case "mkdir":
		for _, p := range operands {
			p = m.abs(p)
			if !flags['p'] && !m.isDir(path.Dir(p)) {
				return "", "mkdir: cannot create directory '" + p + "': No such file or directory\n", 1
			}
			for d := p; d != "/" && d != "."; d = path.Dir(d) {
				m.fs[d+"/"] = ""
			}
		}
		return "", "", 0
	case "touch":
		for _, p := range operands {
			p = m.abs(p)
			if !m.isFile(p) {
				if err := m.writeFile(p, "", false); err != nil {
					return "", "touch: cannot touch '" + p + "': No such file or directory\n", 1
				}
			}
		}
		return "", "", 0
	case "curl", "wget":
		// No network: a download writes a placeholder file.
		out := ""
		var url string
		for i := 1; i < len(w); i++ {
			switch a := w[i]; {
			case (a == "-o" || a == "-O" || a == "--output" || a == "--output-document") && i+1 < len(w):
				out = w[i+1]
				i++
			case strings.HasPrefix(a, "--output-document="):
				out = strings.TrimPrefix(a, "--output-document=")
			case !strings.HasPrefix(a, "-"):
				url = a
			}
		}
		if url == "" {
			return "", name + ": no URL specified\n", 2
		}
		text := "simulated download of " + url + "\n"
		if out == "" || out == "-" {
			return text, "", 0
		}
		if err := m.writeFile(out, text, false); err != nil {
			return "", name + ": " + err.Error() + "\n", 23
		}
		return "", "", 0
	case "pkill", "killall":
		if m.app != nil && len(operands) > 0 {
			pat := strings.ToLower(operands[len(operands)-1])
			app := strings.ToLower(m.app.spec.Name)
			if strings.Contains(app, pat) || strings.Contains(pat, strings.Fields(app)[0]) {
				m.app, m.inst = nil, nil
				m.ui = &UI{m: m, fields: map[string]string{}, version: m.ui.version + 1}
				return "", "", 0
			}
		}
		return "", "", 1
	}
	if app, appArgs := m.cfg.Apps.program(w); app != nil {
		m.startApp(app, appArgs)
		return "", "", 0
	}
	return "", "sh: 1: " + w[0] + ": not found\n", 127
}

// shellPrintf implements printf with %s, %d, %% and backslash escapes in
// the format; the format is reused while arguments remain.
func shellPrintf(format string, args []string) string {
	var b strings.Builder
	for first := true; first || len(args) > 0; first = false {
		used := 0
		for i := 0; i < len(format); i++ {
			c := format[i]
			switch {
			case c == '\\' && i+1 < len(format):
				i++
				switch format[i] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				case '\\':
					b.WriteByte('\\')
				default:
					b.WriteByte('\\')
					b.WriteByte(format[i])
				}
			case c == '%' && i+1 < len(format):
				i++
				switch format[i] {
				case '%':
					b.WriteByte('%')
				case 's', 'd', 'b':
					if used < len(args) {
						b.WriteString(args[used])
						used++
					}
				default:
					b.WriteByte('%')
					b.WriteByte(format[i])
				}
			default:
				b.WriteByte(c)
			}
		}
		if used == 0 {
			break
		}
		args = args[used:]
	}
	return b.String()
}
