package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/sim/desktop"
)

// guestHandler is the guest server (port 5000) of one simulated VM: the
// routes of ScienceBoard's vm_config/server.py that codapipe and the
// benchmark use, answered as that Flask server answers them (flask.go),
// plus the simulator-only control endpoints under /sim/.
type guestHandler struct {
	v   *vm
	app *appHandler // the VM's app server, which /chimerax/run calls
}

// guestRoute is one route of the guest server: the method Flask routes
// it for (GET routes answer HEAD too; every route answers OPTIONS).
type guestRoute struct {
	method string
	h      func(g *guestHandler, w http.ResponseWriter, r *http.Request)
}

// guestRoutes are the routes of server.py the simulator serves. The
// others (/terminal, /window_size, /desktop_path, /wallpaper,
// /list_directory, /setup/change_wallpaper, /setup/download_file,
// /setup/open_file, /setup/activate_window, /setup/close_window,
// /start_recording, /end_recording) answer 404: neither codapipe nor
// ScienceBoard's harness calls them.
var guestRoutes = map[string]guestRoute{
	"/setup/execute":   {"POST", (*guestHandler).execute},
	"/execute":         {"POST", (*guestHandler).execute},
	"/setup/launch":    {"POST", (*guestHandler).launch},
	"/setup/upload":    {"POST", (*guestHandler).upload},
	"/screenshot":      {"GET", (*guestHandler).screenshot},
	"/platform":        {"GET", (*guestHandler).platform},
	"/screen_size":     {"POST", (*guestHandler).screenSize},
	"/cursor_position": {"GET", (*guestHandler).cursor},
	"/accessibility":   {"GET", (*guestHandler).accessibility},
	"/file":            {"POST", (*guestHandler).download},
	"/opt":             {"POST", (*guestHandler).opt},
	"/read":            {"GET", (*guestHandler).read},
	"/write":           {"POST", (*guestHandler).write},
	"/append":          {"POST", (*guestHandler).write},
	"/chimerax/run":    {"POST", (*guestHandler).chimeraxRun},
	"/lean/check":      {"POST", (*guestHandler).leanCheck},
	"/tex/check":       {"POST", (*guestHandler).texCheck},
}

// allow is the Allow header of a route.
func (rt guestRoute) allow() string {
	if rt.method == http.MethodGet {
		return "GET, HEAD, OPTIONS"
	}
	return "OPTIONS, " + rt.method
}

func (g *guestHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v := g.v
	if v.cfgErr != nil {
		writeError(w, http.StatusInternalServerError, "simulator: invalid guest configuration: "+v.cfgErr.Error())
		return
	}
	if strings.HasPrefix(r.URL.Path, "/sim/") {
		v.serveSim(w, r)
		return
	}
	body, err := readBody(w, r)
	if err != nil {
		werkzeugPage(w, http.StatusBadRequest, "The browser (or proxy) sent a request that this server could not understand.")
		return
	}
	v.recordCall(scienceboard.GuestServer, r, body)
	switch a, msg := v.admit(w, r); a {
	case busy:
		// A real VM that boots or reverts refuses the connection; the
		// simulated guest says why (/sim/health tells the same).
		writeError(w, http.StatusServiceUnavailable, "simulator: guest is "+msg)
		return
	case injected:
		writeException(w, "Exception", "codapipe "+msg)
		return
	}
	rt, ok := guestRoutes[r.URL.Path]
	switch {
	case !ok:
		notFound(w)
	case r.Method == http.MethodOptions:
		w.Header().Set("Allow", rt.allow())
		w.WriteHeader(http.StatusOK)
	case r.Method != rt.method && !(rt.method == http.MethodGet && r.Method == http.MethodHead):
		methodNotAllowed(w, rt.allow())
	default:
		rt.h(g, w, r)
	}
}

func (g *guestHandler) screenshot(w http.ResponseWriter, r *http.Request) {
	png, err := g.v.m.Screenshot()
	if err != nil {
		writeException(w, "OSError", "screenshot failed: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "image/png")
	_, _ = w.Write(png)
}

func (g *guestHandler) platform(w http.ResponseWriter, r *http.Request) {
	writeText(w, http.StatusOK, Platform)
}

func (g *guestHandler) screenSize(w http.ResponseWriter, r *http.Request) {
	writeFlaskJSON(w, http.StatusOK, map[string]any{"width": desktop.ScreenW, "height": desktop.ScreenH})
}

// cursor serves GET /cursor_position as the real server does: its view
// returns the tuple (x, y), which Flask takes for (body, status) with an
// int body, and fails with a TypeError (HTTP 500).
func (g *guestHandler) cursor(w http.ResponseWriter, r *http.Request) {
	writeException(w, "TypeError", "The view function did not return a valid response. The return type must be a string, dict, list, tuple with headers or status, Response instance, or WSGI callable, but it was a int.")
}

// accessibility serves GET /accessibility: {"AT": xml}, the tree cut at
// the depth POST /opt set (nodes deeper than MAX_DEPTH are left out; the
// desktop frame is depth 0, applications 1, their elements 2).
func (g *guestHandler) accessibility(w http.ResponseWriter, r *http.Request) {
	tree := g.v.m.Accessibility()
	g.v.mu.Lock()
	depth := g.v.maxDepth
	g.v.mu.Unlock()
	if depth >= 1 {
		var b strings.Builder
		for _, line := range strings.SplitAfter(tree, "\n") {
			indent := len(line) - len(strings.TrimLeft(line, " "))
			if indent/2 <= depth {
				b.WriteString(line)
			}
		}
		tree = b.String()
	}
	writeFlaskJSON(w, http.StatusOK, map[string]any{"AT": tree})
}

// opt serves POST /opt {"depth"}: sets MAX_DEPTH (default 50) and
// answers "OK". As in server.py, whatever depth is given is kept: the
// tree is cut where a node's depth equals it, so a depth that is not a
// whole number ≥ 1 cuts nothing.
func (g *guestHandler) opt(w http.ResponseWriter, r *http.Request) {
	data, ok := requestJSON(w, r)
	if !ok {
		return
	}
	depth := DefaultMaxDepth
	if d, has := data["depth"]; has {
		depth = -1
		switch x := d.(type) {
		case json.Number:
			if f, err := x.Float64(); err == nil && f == float64(int(f)) && f >= 1 {
				depth = int(f)
			}
		case bool:
			if x {
				depth = 1 // True == 1 in Python
			}
		}
	}
	g.v.mu.Lock()
	g.v.maxDepth = depth
	g.v.mu.Unlock()
	writeText(w, http.StatusOK, "OK")
}

// guestCwd is the guest server's working directory (osworld.service's
// WorkingDirectory): Python's open() resolves relative paths from it.
const guestCwd = desktop.HomeDir

// openPath is the file Python's open(p) opens: p relative to guestCwd,
// without ~ expansion.
func openPath(p string) string {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	return path.Join(guestCwd, p)
}

// expandUser is os.path.expandvars(os.path.expanduser(p)) for the
// simulated user (HOME=/home/user, USER=user); other variables stay.
func expandUser(p string) string {
	switch {
	case p == "~" || strings.HasPrefix(p, "~/"):
		p = desktop.HomeDir + p[1:]
	case p == "~user" || strings.HasPrefix(p, "~user/"):
		p = desktop.HomeDir + p[len("~user"):]
	}
	return strings.NewReplacer("${HOME}", desktop.HomeDir, "$HOME", desktop.HomeDir, "${USER}", "user", "$USER", "user").Replace(p)
}

// writeOSError answers a file error as the exception Python raises for
// it; shown is the path as the view passed it.
func writeOSError(w http.ResponseWriter, err error, shown string) {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		switch pe.Err {
		case syscall.ENOENT:
			writeException(w, "FileNotFoundError", "[Errno 2] No such file or directory: "+pyRepr(shown))
			return
		case syscall.EISDIR:
			writeException(w, "IsADirectoryError", "[Errno 21] Is a directory: "+pyRepr(shown))
			return
		case syscall.ENOTDIR:
			writeException(w, "NotADirectoryError", "[Errno 20] Not a directory: "+pyRepr(shown))
			return
		}
	}
	writeException(w, "OSError", err.Error())
}

// readText reads a file as Python's open(p, "r", encoding="utf-8").read()
// does: UTF-8, universal newlines ("\r\n" and "\r" become "\n").
func (g *guestHandler) readText(w http.ResponseWriter, shown string) (string, bool) {
	if shown == "" {
		writeException(w, "FileNotFoundError", "[Errno 2] No such file or directory: ''")
		return "", false
	}
	b, err := g.v.m.ReadFile(openPath(shown))
	if err != nil {
		writeOSError(w, err, shown)
		return "", false
	}
	if !utf8.Valid(b) {
		i := 0
		for i < len(b) {
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		writeException(w, "UnicodeDecodeError", fmt.Sprintf("'utf-8' codec can't decode byte 0x%02x in position %d: invalid start byte", b[i], i))
		return "", false
	}
	return strings.ReplaceAll(strings.ReplaceAll(string(b), "\r\n", "\n"), "\r", "\n"), true
}

// read serves GET /read?path=: the file's text (path default /dev/null).
// A missing file is the FileNotFoundError server.py does not catch: 500.
func (g *guestHandler) read(w http.ResponseWriter, r *http.Request) {
	p := "/dev/null"
	if q := r.URL.Query(); q.Has("path") {
		p = q.Get("path")
	}
	text, ok := g.readText(w, p)
	if ok {
		writeText(w, http.StatusOK, text)
	}
}

// write serves POST /write and POST /append {"path", "content"}: opens
// the file with mode "w" or "a" and writes the content; "OK". The folder
// must exist (no folder is created: FileNotFoundError, 500).
func (g *guestHandler) write(w http.ResponseWriter, r *http.Request) {
	data, ok := requestJSON(w, r)
	if !ok {
		return
	}
	p := dictGet(data, "path", "/dev/null")
	content := dictGet(data, "content", "")
	ps, ok := p.(string)
	if !ok {
		writeException(w, "TypeError", "expected str, bytes or os.PathLike object, not "+pyType(p))
		return
	}
	if ps == "" {
		writeException(w, "FileNotFoundError", "[Errno 2] No such file or directory: ''")
		return
	}
	appendTo := r.URL.Path == "/append"
	if !appendTo { // open(path, "w") truncates before anything is written
		if err := g.v.m.WriteFile(openPath(ps), nil, false); err != nil {
			writeOSError(w, err, ps)
			return
		}
	}
	cs, ok := content.(string)
	if !ok {
		if appendTo { // open(path, "a") happens first
			if err := g.v.m.WriteFile(openPath(ps), nil, true); err != nil {
				writeOSError(w, err, ps)
				return
			}
		}
		writeException(w, "TypeError", "write() argument must be str, not "+pyType(content))
		return
	}
	if err := g.v.m.WriteFile(openPath(ps), []byte(cs), appendTo); err != nil {
		writeOSError(w, err, ps)
		return
	}
	writeText(w, http.StatusOK, "OK")
}

// download serves POST /file (form field file_path): the file as an
// attachment; a missing file is 404 {"error": "File not found"}. A
// relative path is relative to Flask's root path, the server's folder.
func (g *guestHandler) download(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseMultipartForm(maxRequestBody); err != nil && !errors.Is(err, http.ErrNotMultipart) {
		werkzeugPage(w, http.StatusBadRequest, "The browser (or proxy) sent a request that this server could not understand.")
		return
	}
	if _, ok := r.PostForm["file_path"]; !ok {
		writeFlaskJSON(w, http.StatusBadRequest, map[string]any{"error": "file_path is required"})
		return
	}
	shown := expandUser(r.PostForm.Get("file_path"))
	p := shown
	if !strings.HasPrefix(p, "/") {
		p = path.Join(desktop.HomeDir, "server", p)
	}
	b, err := g.v.m.ReadFile(p)
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe) && pe.Err == syscall.ENOENT:
		writeFlaskJSON(w, http.StatusNotFound, map[string]any{"error": "File not found"})
		return
	case err != nil:
		writeOSError(w, err, shown)
		return
	}
	ct := mime.TypeByExtension(path.Ext(p))
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Disposition", "attachment; filename="+path.Base(p))
	_, _ = w.Write(b)
}

// upload serves POST /setup/upload (multipart file_path, file_data): saves
// the data at file_path (~ and $HOME expanded) and answers "File
// Uploaded". As file.save(path) does, it creates no folder: a missing one
// is FileNotFoundError, 500. Any bytes are kept.
func (g *guestHandler) upload(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseMultipartForm(maxRequestBody); err != nil && !errors.Is(err, http.ErrNotMultipart) {
		werkzeugPage(w, http.StatusBadRequest, "The browser (or proxy) sent a request that this server could not understand.")
		return
	}
	_, hasPath := r.PostForm["file_path"]
	var fh io.Reader
	if r.MultipartForm != nil && len(r.MultipartForm.File["file_data"]) > 0 {
		f, err := r.MultipartForm.File["file_data"][0].Open()
		if err == nil {
			defer f.Close()
			fh = f
		}
	}
	if !hasPath || fh == nil {
		writeFlaskJSON(w, http.StatusBadRequest, map[string]any{"error": "file_path and file_data are required"})
		return
	}
	data, err := io.ReadAll(fh)
	if err != nil {
		writeException(w, "OSError", "reading file_data: "+err.Error())
		return
	}
	shown := expandUser(r.PostForm.Get("file_path"))
	if shown == "" {
		writeException(w, "FileNotFoundError", "[Errno 2] No such file or directory: ''")
		return
	}
	if err := g.v.m.WriteFile(openPath(shown), data, false); err != nil {
		writeOSError(w, err, shown)
		return
	}
	writeText(w, http.StatusOK, "File Uploaded")
}

// command is the command of /setup/execute or /setup/launch after
// server.py's preparation: shlex-split when a string comes without shell,
// "~/" expanded in every list element.
type command struct {
	shell bool
	line  string   // a string command (shell only)
	argv  []string // a list command
	isStr bool
	odd   any // a command that is neither a string nor a list of strings (an object)
}

// readCommand reads the command of /execute, /setup/execute and
// /setup/launch (decodeCommand) and answers, returning false, one that
// subprocess cannot take (unrunnable) as server.py's except clause does.
func readCommand(w http.ResponseWriter, r *http.Request) (command, bool) {
	c, ok := decodeCommand(w, r)
	if !ok {
		return c, false
	}
	if msg := c.unrunnable(); msg != "" {
		commandError(w, msg)
		return c, false
	}
	return c, true
}

// decodeCommand decodes {"command": str | [str], "shell": bool} as
// server.py prepares it. What server.py does outside its try block
// (request.json, shlex.split, "~/" expansion) fails with Flask's error
// pages; it answers them and returns false.
func decodeCommand(w http.ResponseWriter, r *http.Request) (command, bool) {
	data, ok := requestJSON(w, r)
	if !ok {
		return command{}, false
	}
	c := command{shell: scienceboard.Truthy(data["shell"])}
	raw, has := data["command"]
	if !has {
		if c.shell {
			raw = ""
		} else {
			raw = []any{}
		}
	}
	switch x := raw.(type) {
	case string:
		if c.shell {
			c.line, c.isStr = x, true
			return c, true // iterating a string's characters expands nothing
		}
		argv, err := shlexSplit(x)
		if err != nil {
			writeException(w, "ValueError", err.Error())
			return c, false
		}
		c.argv = argv
	case []any:
		c.argv = make([]string, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				writeException(w, "AttributeError", fmt.Sprintf("'%s' object has no attribute 'startswith'", pyType(e)))
				return c, false
			}
			c.argv[i] = s
		}
	case map[string]any:
		c.odd = x
		return c, true
	default:
		writeException(w, "TypeError", fmt.Sprintf("'%s' object is not iterable", pyType(raw)))
		return c, false
	}
	for i, a := range c.argv {
		if strings.HasPrefix(a, "~/") {
			c.argv[i] = desktop.HomeDir + a[1:]
		}
	}
	return c, true
}

// script is what /bin/sh -c runs for a shell command: the string, or a
// list's first element (the others become $0, $1, ...).
func (c command) script() (string, bool) {
	if c.isStr {
		return c.line, true
	}
	if len(c.argv) == 0 {
		return "", false
	}
	return c.argv[0], true
}

// quoted is a list command as a line of the simulated shell that runs
// exactly that argv.
func (c command) quoted() string {
	parts := make([]string, len(c.argv))
	for i, a := range c.argv {
		parts[i] = desktop.ShellQuote(a)
	}
	return strings.Join(parts, " ")
}

// repr is the command as Python's %s renders it in exception messages.
func (c command) repr() string {
	if c.isStr {
		return c.line
	}
	if c.odd != nil {
		return pyRepr(c.odd)
	}
	return pyRepr(c.argv)
}

// pyProgram matches python, python3, python3.10, ...
var pyProgram = regexp.MustCompile(`^python(\d+(\.\d+)?)?$`)

// pythonCode reports python[3[.x]] -c CODE.
func pythonCode(argv []string) (string, bool) {
	if len(argv) >= 3 && pyProgram.MatchString(path.Base(argv[0])) && argv[1] == "-c" {
		return argv[2], true
	}
	return "", false
}

// unrunnable is what subprocess says of a command it cannot take, before
// running anything: an object, or an empty list without shell; "" for
// any other command.
func (c command) unrunnable() string {
	switch {
	case c.odd != nil:
		return "expected str, bytes or os.PathLike object, not dict"
	case !c.shell && len(c.argv) == 0:
		return "list index out of range"
	}
	return ""
}

// notFound reports a list command (no shell) whose program does not exist,
// by what the simulated shell said when it ran it; msg is Python's
// FileNotFoundError for it.
func (c command) notFound(stderr string, rc int) (msg string, ok bool) {
	if c.shell || rc != 127 || stderr != "sh: 1: "+c.argv[0]+": not found\n" {
		return "", false
	}
	return "[Errno 2] No such file or directory: " + pyRepr(c.argv[0]), true
}

// commandError answers a command that could not be run as server.py's
// except clause does: 500 {"status": "error", "message"}.
func commandError(w http.ResponseWriter, msg string) {
	writeFlaskJSON(w, http.StatusInternalServerError, map[string]any{"status": "error", "message": msg})
}

// execute serves /setup/execute and /execute as server.py does: it runs
// the command (subprocess.run, 120 s timeout) and answers 200
// {"status": "success", "output", "error", "returncode"} whatever the
// exit code; a command that cannot be run (a program that does not
// exist without shell, an empty list, the timeout) is 500 {"status":
// "error", "message"}. Commands run in the simulated shell; pyautogui
// code (python3 -c CODE) runs on the machine's input.
func (g *guestHandler) execute(w http.ResponseWriter, r *http.Request) {
	c, ok := readCommand(w, r)
	if !ok {
		return
	}
	var line string // the simulated shell's line
	argv := c.argv  // the program and its arguments, for python -c
	if c.shell {
		s, ok := c.script()
		if !ok {
			g.reply(w, "", "/bin/sh: 0: -c requires an argument\n", 2)
			return
		}
		line = s
		argv, _ = shlexSplit(s)
		if len(argv) != 3 {
			argv = nil // a shell line doing more than run python -c
		}
	} else {
		line = c.quoted()
	}
	if code, isPy := pythonCode(argv); isPy {
		g.runPython(w, r, c, code)
		return
	}
	stdout, stderr, rc := g.v.m.Shell(line)
	if msg, ok := c.notFound(stderr, rc); ok {
		commandError(w, msg)
		return
	}
	g.reply(w, stdout, stderr, rc)
}

// reply answers a command that ran (text=True: universal newlines).
func (g *guestHandler) reply(w http.ResponseWriter, stdout, stderr string, rc int) {
	nl := strings.NewReplacer("\r\n", "\n", "\r", "\n")
	writeFlaskJSON(w, http.StatusOK, map[string]any{"status": "success", "output": nl.Replace(stdout), "error": nl.Replace(stderr), "returncode": rc})
}

// runPython runs pyautogui code: parsed into input events applied to the
// machine in order, time.sleep through the clock, within ExecLimit.
func (g *guestHandler) runPython(w http.ResponseWriter, r *http.Request, c command, code string) {
	events, err := desktop.ParsePyAutoGUI(code)
	if err != nil {
		g.reply(w, "", "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n"+pyErrorLine(err), 1)
		return
	}
	var slept time.Duration
	limit := g.v.execLimit
	for _, ev := range events {
		if ev.Kind == desktop.EvSleep {
			d := time.Duration(ev.Seconds * float64(time.Second))
			if slept+d > limit {
				if g.v.clock.Sleep(r.Context(), limit-slept) != nil {
					abandon()
				}
				commandError(w, fmt.Sprintf("Command '%s' timed out after %s seconds", c.repr(), strconv.FormatFloat(limit.Seconds(), 'f', -1, 64)))
				return
			}
			slept += d
			if g.v.clock.Sleep(r.Context(), d) != nil {
				abandon()
			}
			continue
		}
		if err := g.v.m.Input(ev); err != nil {
			err = fmt.Errorf("simulator: %s: %w", ev.Kind, err)
			g.reply(w, "", "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n"+pyErrorLine(err), 1)
			return
		}
	}
	g.reply(w, "", "", 0)
}

// pyErrorLine renders err as the last line of a Python traceback.
func pyErrorLine(err error) string {
	return "Exception: " + strings.ReplaceAll(err.Error(), "\n", " ") + "\n"
}

// launch serves /setup/launch as server.py does: subprocess.Popen
// without waiting, then the text "{command} launched successfully" (the
// command string with shell, else the argv joined by spaces; a list with
// shell is shown as Python prints a list). A program that does not exist
// without shell is 500 {"status": "error", "message"}; with shell the
// shell always starts, so the launch always succeeds. A command line that
// starts a simulated app starts it; any other runs in the simulated shell
// for its effects.
func (g *guestHandler) launch(w http.ResponseWriter, r *http.Request) {
	c, ok := readCommand(w, r)
	if !ok {
		return
	}
	m := g.v.m
	var shown string
	if c.shell {
		shown = c.repr()
		if s, ok := c.script(); ok {
			if err := m.Launch(s); err != nil {
				m.Shell(s)
			}
		}
	} else {
		shown = strings.Join(c.argv, " ")
		if err := m.Launch(c.quoted()); err != nil {
			_, stderr, rc := m.Shell(c.quoted())
			if msg, ok := c.notFound(stderr, rc); ok {
				commandError(w, msg)
				return
			}
		}
	}
	writeText(w, http.StatusOK, shown+" launched successfully")
}

// chimeraxRun serves POST /chimerax/run {"command", "port"?}: server.py
// relays it as GET http://localhost:{port}/run?command=... (requests)
// and answers the reply's JSON. Here the request goes in-process to the
// VM's app server, which is port 8000; any other port, or no app
// listening, is the ConnectionError server.py does not catch (500), as is
// a reply that is not JSON.
func (g *guestHandler) chimeraxRun(w http.ResponseWriter, r *http.Request) {
	data, ok := requestJSON(w, r)
	if !ok {
		return
	}
	port := pyStr(dictGet(data, "port", "8000"))
	q := make(map[string][]string)
	if cmd, has := data["command"]; !has {
		q["command"] = []string{""}
	} else if cmd != nil { // requests drops None params
		q["command"] = []string{pyStr(cmd)}
	}
	target := "/run"
	if len(q) > 0 {
		target += "?" + encodeQuery(q)
	}
	refused := func() {
		writeException(w, "requests.exceptions.ConnectionError", fmt.Sprintf(
			"HTTPConnectionPool(host='localhost', port=%s): Max retries exceeded with url: %s (Caused by NewConnectionError('<urllib3.connection.HTTPConnection object at 0x7f0000000000>: Failed to establish a new connection: [Errno 111] Connection refused'))",
			port, target))
	}
	if port != strconv.Itoa(scienceboard.AppPort) {
		refused()
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://localhost:"+port+target, nil)
	if err != nil {
		writeException(w, "requests.exceptions.InvalidURL", err.Error())
		return
	}
	rec, err, aborted := serveLocal(g.app.serve, req)
	switch {
	case aborted && r.Context().Err() != nil:
		abandon() // our own client left
	case aborted:
		writeException(w, "requests.exceptions.ConnectionError", "('Connection aborted.', RemoteDisconnected('Remote end closed connection without response'))")
		return
	case err != nil:
		refused()
		return
	}
	dec := json.NewDecoder(rec.Body)
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		writeException(w, "requests.exceptions.JSONDecodeError", "Expecting value: line 1 column 1 (char 0)")
		return
	}
	switch x := v.(type) {
	case map[string]any, []any:
		writeFlaskJSON(w, http.StatusOK, x)
	case string:
		writeText(w, http.StatusOK, x)
	default:
		writeException(w, "TypeError", fmt.Sprintf("The view function did not return a valid response. The return type must be a string, dict, list, tuple with headers or status, Response instance, or WSGI callable, but it was a %s.", pyType(v)))
	}
}

// encodeQuery encodes a query as requests does (keys in order, spaces as
// "+").
func encodeQuery(q map[string][]string) string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		for _, v := range q[k] {
			parts = append(parts, url.QueryEscape(k)+"="+url.QueryEscape(v))
		}
	}
	return strings.Join(parts, "&")
}

// leanCheck serves POST /lean/check {"header"}: {"pass": false} when the
// header is not exactly one line of the Lean file, else the simulated
// `lake build` (leanBuild) decides. A missing Lean file is the
// FileNotFoundError server.py does not catch (500).
func (g *guestHandler) leanCheck(w http.ResponseWriter, r *http.Request) {
	data, ok := requestJSON(w, r)
	if !ok {
		return
	}
	header := dictGet(data, "header", "__PANIC__")
	text, ok := g.readText(w, desktop.LeanFile)
	if !ok {
		return
	}
	hs, isStr := header.(string)
	if !isStr || !containsLine(text, hs) {
		writeFlaskJSON(w, http.StatusOK, map[string]any{"pass": false})
		return
	}
	writeFlaskJSON(w, http.StatusOK, map[string]any{"pass": leanBuild(text) == ""})
}

// containsLine reports whether line is one of text's lines (split on
// "\n", as server.py does).
func containsLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// texCheck serves POST /tex/check {"path", "file", "bibtex"} (defaults
// /home/user, main, false): server.py runs pdflatex FILE.tex in PATH, and
// with bibtex then bibtex FILE and pdflatex twice more; pass iff every
// exit code is 0. The simulated tools are texCompile and texBibtex. A
// path that is no folder is the exception subprocess.run raises for a
// missing working directory (500).
func (g *guestHandler) texCheck(w http.ResponseWriter, r *http.Request) {
	data, ok := requestJSON(w, r)
	if !ok {
		return
	}
	dir, file := pyStr(dictGet(data, "path", "/home/user")), pyStr(dictGet(data, "file", "main"))
	bibtex := scienceboard.Truthy(data["bibtex"])
	cwd := openPath(dir)
	if _, err := g.v.m.ReadFile(cwd); err != nil {
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Err != syscall.EISDIR { // a folder cannot be read: it exists
			writeOSError(w, err, dir)
			return
		}
	} else {
		writeOSError(w, &fs.PathError{Op: "chdir", Path: cwd, Err: syscall.ENOTDIR}, dir)
		return
	}
	read := func(p string) (string, bool) {
		b, err := g.v.m.ReadFile(path.Join(cwd, p))
		return string(b), err == nil
	}
	pass := texCompile(read, file) == ""
	if pass && bibtex {
		pass = texBibtex(read, file) == ""
	}
	writeFlaskJSON(w, http.StatusOK, map[string]any{"pass": pass})
}
