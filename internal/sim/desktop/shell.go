package desktop

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/codapipe/codapipe/internal/contract/guestproto"
)

// shellTok is one token of a shell command line.
type shellTok struct {
	text string
	op   bool // an unquoted operator: ; && || | & > >> < 2> 2>>
}

// shellLex splits a command line into words and operators, POSIX-style:
// single quotes are literal, double quotes allow \" \\ \$ \` escapes, a
// backslash outside quotes escapes the next character, an unquoted
// leading ~ becomes the home directory, and a # that starts a word starts
// a comment that runs to the end of the line.
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
		case c == '#' && !inWord:
			// A comment runs to the end of the line.
			for i+1 < len(s) && s[i+1] != '\n' {
				i++
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

// Files of the ScienceBoard VM snapshot (sci_bench) that the simulated
// machines have too.
const (
	// ResetScript is the script ScienceBoard's harness runs after every
	// snapshot revert (POST /setup/execute {"command": "/bin/bash
	// /home/user/server/reset.sh", "shell": true}; sci/vm/vtask.py
	// VTask._init). The real one (vm_config/reset.sh) bounces the VM's
	// ethernet connection with nmcli; the simulated one goes through the
	// motions with the shell's no-op nmcli and sleep and exits 0.
	ResetScript = guestproto.ResetScript
	// ResetCommand is the command line that runs ResetScript.
	ResetCommand = guestproto.ResetCommand
	// LeanFile is the Lean source file of the VM's Lake project
	// (/home/user/sci, made by `lake new sci`) that Lean tasks append their
	// theorem to and /lean/check builds.
	LeanFile = HomeDir + "/sci/Sci/Basic.lean"
	// TeXDir is the folder TeXstudio tasks write their documents to.
	TeXDir = HomeDir + "/atelier"
)

// resetScript is the simulated ResetScript.
const resetScript = `#!/bin/bash
# codapipe SIMULATOR stand-in for ScienceBoard's vm_config/reset.sh, which
# finds the VM's ethernet connection with nmcli and bounces it. The
# simulated machine has no network: nmcli and sleep do nothing here.
nmcli connection down "Wired connection 1"
sleep 2
nmcli connection up "Wired connection 1"
`

// leanFile is the simulated LeanFile of the snapshot. ScienceBoard's VM
// manual says only that the project was made with ` + "`lake new sci`" + ` and
// given Mathlib; since task files drop "import Mathlib" because the file
// imports it already, the simulated file is that one import.
const leanFile = "import Mathlib\n"

// snapshotFS returns the simulated file system of a fresh machine with
// the apps of cat: the user's folders, the files of ScienceBoard's VM
// snapshot the protocol touches (ResetScript, LeanFile, TeXDir) and what
// the apps add. Paths ending in "/" are directories.
func snapshotFS(cat *Catalog) map[string]string {
	files := cat.files()
	for _, d := range []string{
		"/", "/home/", HomeDir + "/", HomeDir + "/Desktop/", HomeDir + "/Documents/", HomeDir + "/Downloads/",
		HomeDir + "/.config/", HomeDir + "/.local/", HomeDir + "/.local/share/", "/tmp/", "/app/", "/app/bin/",
		HomeDir + "/server/", HomeDir + "/sci/", HomeDir + "/sci/Sci/", TeXDir + "/",
	} {
		files[d] = ""
	}
	files[HomeDir+"/README-SIMULATOR.txt"] = "This machine is the codapipe SIMULATOR, not a real VM.\n"
	files[ResetScript] = resetScript
	files[LeanFile] = leanFile
	return files
}

// maxShellDepth bounds scripts running scripts (bash FILE, bash -c).
const maxShellDepth = 8

// Shell runs a command line in the simulated shell.
func (m *machine) Shell(command string) (string, string, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ui.version++
	return m.runLine(command, 0)
}

// runLine runs a command line (or a script's text) with ; && || & and
// newlines between simple commands; exit ends it.
func (m *machine) runLine(command string, depth int) (string, string, int) {
	if depth > maxShellDepth {
		return "", "sh: 1: scripts nested too deep\n", 2
	}
	toks, err := shellLex(command)
	if err != nil {
		return "", "sh: 1: Syntax error: " + err.Error() + "\n", 2
	}
	var out, errs strings.Builder
	code := 0
	skip := false   // the next command is skipped by && / ||
	exited := false // exit ran
	var cmd []shellTok
	run := func(sep string) {
		if len(cmd) > 0 && !skip && !exited {
			o, e, c, exit := m.runSimple(cmd, depth)
			out.WriteString(o)
			errs.WriteString(e)
			code, exited = c, exit
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
	return out.String(), errs.String(), code
}

// ReadFile returns the content of the file at p.
func (m *machine) ReadFile(p string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p = m.abs(p)
	if p == "/dev/null" {
		return []byte{}, nil
	}
	if err := m.checkPath("open", p, true); err != nil {
		return nil, err
	}
	return []byte(m.fs[p]), nil
}

// WriteFile writes or appends data to the file at p.
func (m *machine) WriteFile(p string, data []byte, appendTo bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ui.version++
	return m.writeFile(p, string(data), appendTo)
}

// checkPath reports why p cannot be opened as a file (for reading when
// exist, else for writing): *fs.PathError with the errno the real file
// system gives.
func (m *machine) checkPath(op, p string, exist bool) error {
	fail := func(errno syscall.Errno) error { return &fs.PathError{Op: op, Path: p, Err: errno} }
	if m.isDir(p) {
		return fail(syscall.EISDIR)
	}
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		if m.isFile(d) {
			return fail(syscall.ENOTDIR)
		}
	}
	if !m.isDir(path.Dir(p)) || exist && !m.isFile(p) {
		return fail(syscall.ENOENT)
	}
	return nil
}

// shellErr renders a file error as the shell's tools do.
func shellErr(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		switch pe.Err {
		case syscall.ENOENT:
			return "No such file or directory"
		case syscall.EISDIR:
			return "Is a directory"
		case syscall.ENOTDIR:
			return "Not a directory"
		}
	}
	return err.Error()
}

func (m *machine) abs(p string) string { return AbsPath(p) }

// AbsPath returns the absolute path of p on a machine: relative to the
// home folder, ~ expanded, cleaned.
func AbsPath(p string) string {
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
	if err := m.checkPath("open", p, false); err != nil {
		return err
	}
	if appendTo {
		m.fs[p] += text
	} else {
		m.fs[p] = text
	}
	return nil
}

// runSimple runs one simple command with its redirections; exit reports
// that the command was exit.
func (m *machine) runSimple(toks []shellTok, depth int) (stdout, stderr string, code int, exit bool) {
	var words []string
	var outFile, errFile string
	var outAppend bool
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.op {
			if i+1 >= len(toks) || toks[i+1].op {
				return "", fmt.Sprintf("sh: 1: Syntax error: %q unexpected\n", t.text), 2, false
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
				return "", fmt.Sprintf("sh: 1: unsupported operator %q\n", t.text), 2, false
			}
			continue
		}
		words = append(words, t.text)
	}
	for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "=") {
		words = words[1:] // VAR=value prefixes
	}
	if len(words) == 0 {
		return "", "", 0, false
	}
	if words[0] == "exit" {
		if len(words) > 1 {
			n, err := strconv.Atoi(words[1])
			if err != nil {
				return "", "sh: 1: exit: Illegal number: " + words[1] + "\n", 2, true
			}
			code = n & 0xff
		}
		return "", "", code, true
	}
	stdout, stderr, code = m.builtin(words, depth)
	if outFile != "" {
		if err := m.writeFile(outFile, stdout, outAppend); err != nil {
			return "", "sh: 1: cannot create " + outFile + ": " + shellErr(err) + "\n", 2, false
		}
		stdout = ""
	}
	if errFile != "" {
		stderr = ""
	}
	return stdout, stderr, code, false
}

// builtin runs one command (words after redirections and VAR=value
// prefixes): a simulated tool, a script (bash FILE, bash -c SCRIPT), or a
// simulated app's program, which starts the app.
func (m *machine) builtin(w []string, depth int) (stdout, stderr string, code int) {
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
	case "code", "texstudio":
		// Programs of ScienceBoard's VM image (VS Code for Lean, TeXstudio)
		// that the simulator has no app for: they start and show nothing.
		return "", "", 0
	case "nohup", "setsid", "env", "exec":
		for len(args) > 0 && strings.Contains(args[0], "=") {
			args = args[1:] // env VAR=value cmd
		}
		if len(args) == 0 {
			return "", "", 0
		}
		return m.builtin(args, depth)
	case "false":
		return "", "", 1
	case "bash", "sh", "dash":
		if o, e, c, ok := m.script(name, args, depth); ok {
			return o, e, c
		}
		return "", "", 0 // an interactive shell with no script: nothing to do
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
					return "", "touch: cannot touch '" + p + "': " + shellErr(err) + "\n", 1
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
			return "", name + ": " + out + ": " + shellErr(err) + "\n", 23
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

// script runs `bash -c SCRIPT` or `bash FILE` (also sh, dash; options
// such as -i, -l, -e are accepted and ignored) in the simulated shell. ok
// is false when the arguments name no script (bash alone), so that the
// caller looks for an app in them.
func (m *machine) script(name string, args []string, depth int) (stdout, stderr string, code int, ok bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
		case len(a) > 1 && a[0] == '-' && strings.Contains(a[1:], "c") && !strings.HasPrefix(a, "--"):
			if i+1 >= len(args) {
				return "", name + ": " + a + ": option requires an argument\n", 2, true
			}
			o, e, c := m.runLine(args[i+1], depth+1)
			return o, e, c, true
		case len(a) > 1 && a[0] == '-':
		default:
			p := m.abs(a)
			if !m.isFile(p) {
				return "", name + ": " + a + ": No such file or directory\n", 127, true
			}
			o, e, c := m.runLine(m.fs[p], depth+1)
			return o, e, c, true
		}
	}
	return "", "", 0, false
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
