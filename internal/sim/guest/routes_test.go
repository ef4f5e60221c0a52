package guest_test

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/guest"
)

// routeCase is one request to the guest server and what it must answer.
type routeCase struct {
	name   string
	method string
	path   string // with its query
	ct     string // Content-Type; "" sends none
	body   string
	setup  string // a shell command run on the machine first
	prep   func(m desktop.Machine)

	code  int
	body0 string // the exact body, when exact
	exact bool
	has   []string // substrings of the body otherwise
	ctype string   // the answer's Content-Type, when given
	check func(t *testing.T, m desktop.Machine)
}

// fileIs checks a file's content; missing is "<missing>".
func fileIs(p, want string) func(t *testing.T, m desktop.Machine) {
	return func(t *testing.T, m desktop.Machine) {
		t.Helper()
		b, err := m.ReadFile(p)
		got := string(b)
		if err != nil {
			got = "<missing>"
		}
		if got != want {
			t.Errorf("%s holds %q, want %q", p, got, want)
		}
	}
}

const (
	jsonCT = "application/json"
	htmlCT = "text/html; charset=utf-8"
)

// multipartBody is a /setup/upload body with the given fields (file_data
// as a file).
func multipartBody(fields map[string]string) (string, string) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, k := range []string{"file_path", "file_data"} {
		v, ok := fields[k]
		if !ok {
			continue
		}
		if k == "file_data" {
			fw, _ := mw.CreateFormFile(k, "data.bin")
			_, _ = fw.Write([]byte(v))
			continue
		}
		_ = mw.WriteField(k, v)
	}
	_ = mw.Close()
	return mw.FormDataContentType(), buf.String()
}

func runRoutes(t *testing.T, vm *vmT, cases []routeCase) {
	t.Helper()
	c := &http.Client{Timeout: 20 * time.Second}
	for _, rc := range cases {
		t.Run(rc.name, func(t *testing.T) {
			if rc.prep != nil {
				rc.prep(vm.m)
			}
			if rc.setup != "" {
				if _, stderr, code := vm.m.Shell(rc.setup); code != 0 {
					t.Fatalf("setup %q: %d %s", rc.setup, code, stderr)
				}
			}
			req, err := http.NewRequest(rc.method, vm.srv.URL+rc.path, strings.NewReader(rc.body))
			if err != nil {
				t.Fatal(err)
			}
			if rc.ct != "" {
				req.Header.Set("Content-Type", rc.ct)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != rc.code {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, rc.code, b)
			}
			if rc.exact && string(b) != rc.body0 {
				t.Errorf("body %q, want %q", b, rc.body0)
			}
			for _, h := range rc.has {
				if !bytes.Contains(b, []byte(h)) {
					t.Errorf("body lacks %q:\n%s", h, b)
				}
			}
			if rc.ctype != "" && resp.Header.Get("Content-Type") != rc.ctype {
				t.Errorf("Content-Type %q, want %q", resp.Header.Get("Content-Type"), rc.ctype)
			}
			if rc.check != nil {
				rc.check(t, vm.m)
			}
		})
	}
}

// TestGuestRoutes: the guest server's routes answer with server.py's
// bodies, replies and status codes, and Flask's pages for what its views
// do not handle.
func TestGuestRoutes(t *testing.T) {
	vm := startVM(t, guest.Config{})
	up, upBody := multipartBody(map[string]string{"file_path": "~/Documents/u.bin", "file_data": "\x00\x01binary\r\n"})
	upMissing, upMissingBody := multipartBody(map[string]string{"file_path": "/home/user/nodir/u.txt", "file_data": "x"})
	upNoData, upNoDataBody := multipartBody(map[string]string{"file_path": "/home/user/u.txt"})
	err500 := func(exc string) []string { return []string{"<!doctype html>", "<title>" + exc} }
	runRoutes(t, vm, []routeCase{
		// Routing as Flask does it.
		{name: "unknown path", method: "GET", path: "/dump", code: 404, has: []string{"<title>404 Not Found</title>"}, ctype: htmlCT},
		{name: "wrong method", method: "GET", path: "/write", code: 405, has: []string{"<title>405 Method Not Allowed</title>"}},
		{name: "OPTIONS", method: "OPTIONS", path: "/read", code: 200, exact: true},
		{name: "HEAD of a GET route", method: "HEAD", path: "/platform", code: 200, exact: true},
		{name: "platform", method: "GET", path: "/platform", code: 200, exact: true, body0: guest.Platform, ctype: htmlCT},
		{name: "screen size is POST", method: "POST", path: "/screen_size", code: 200, exact: true,
			body0: "{\n  \"height\": 800,\n  \"width\": 1280\n}\n", ctype: jsonCT},
		{name: "cursor position fails as in server.py", method: "GET", path: "/cursor_position", code: 500, has: err500("TypeError")},

		// /opt
		{name: "opt", method: "POST", path: "/opt", ct: jsonCT, body: `{"depth": 1}`, code: 200, exact: true, body0: "OK", ctype: htmlCT},
		{name: "opt needs JSON", method: "POST", path: "/opt", ct: "text/plain", body: `{"depth": 1}`, code: 415, has: []string{"415 Unsupported Media Type"}},

		// /write, /append, /read
		{name: "write", method: "POST", path: "/write", ct: jsonCT, body: `{"path": "/home/user/atelier/main.tex", "content": "a\r\nb\rc"}`,
			code: 200, exact: true, body0: "OK", check: fileIs("/home/user/atelier/main.tex", "a\r\nb\rc")},
		{name: "read translates newlines", method: "GET", path: "/read?path=/home/user/atelier/main.tex", code: 200, exact: true, body0: "a\nb\nc", ctype: htmlCT},
		{name: "append", method: "POST", path: "/append", ct: jsonCT, body: `{"path": "atelier/main.tex", "content": "+"}`,
			code: 200, exact: true, body0: "OK", check: fileIs("/home/user/atelier/main.tex", "a\r\nb\rc+")},
		{name: "write truncates", method: "POST", path: "/write", ct: jsonCT, body: `{"path": "/home/user/atelier/main.tex", "content": "é"}`,
			code: 200, exact: true, body0: "OK", check: fileIs("/home/user/atelier/main.tex", "é")},
		{name: "write creates no folder", method: "POST", path: "/write", ct: jsonCT, body: `{"path": "/home/user/new/x.txt", "content": "x"}`,
			code: 500, has: err500("FileNotFoundError: [Errno 2] No such file or directory: &#x27;/home/user/new/x.txt&#x27;"),
			check: fileIs("/home/user/new/", "<missing>")},
		{name: "append creates no folder", method: "POST", path: "/append", ct: jsonCT, body: `{"path": "/home/user/new/x.txt", "content": "x"}`,
			code: 500, has: err500("FileNotFoundError")},
		{name: "write to a folder", method: "POST", path: "/write", ct: jsonCT, body: `{"path": "/home/user/Desktop", "content": "x"}`,
			code: 500, has: err500("IsADirectoryError")},
		{name: "write needs str content", method: "POST", path: "/write", ct: jsonCT, body: `{"path": "/home/user/a.txt", "content": 3}`,
			code: 500, has: err500("TypeError: write() argument must be str, not int")},
		{name: "write without a path writes /dev/null", method: "POST", path: "/write", ct: jsonCT, body: `{}`, code: 200, exact: true, body0: "OK"},
		{name: "bad JSON", method: "POST", path: "/write", ct: jsonCT, body: `{"path": `, code: 400, has: []string{"400 Bad Request", "Failed to decode JSON object"}},
		{name: "read a missing file", method: "GET", path: "/read?path=/home/user/nope.txt", code: 500,
			has: err500("FileNotFoundError: [Errno 2] No such file or directory: &#x27;/home/user/nope.txt&#x27;")},
		{name: "read a folder", method: "GET", path: "/read?path=/home/user", code: 500, has: err500("IsADirectoryError")},
		{name: "read without a path reads /dev/null", method: "GET", path: "/read", code: 200, exact: true, body0: ""},
		{name: "read does not expand ~", method: "GET", path: "/read?path=~/README-SIMULATOR.txt", code: 500, has: err500("FileNotFoundError")},
		{name: "read relative to the home folder", method: "GET", path: "/read?path=README-SIMULATOR.txt", code: 200, has: []string{"SIMULATOR"}},
		{name: "read non-UTF-8", method: "GET", path: "/read?path=/home/user/bin.dat", prep: func(m desktop.Machine) { _ = m.WriteFile("/home/user/bin.dat", []byte("ok\xff"), false) },
			code: 500, has: err500("UnicodeDecodeError")},

		// /setup/upload
		{name: "upload", method: "POST", path: "/setup/upload", ct: up, body: upBody, code: 200, exact: true, body0: "File Uploaded",
			check: fileIs("/home/user/Documents/u.bin", "\x00\x01binary\r\n")},
		{name: "upload creates no folder", method: "POST", path: "/setup/upload", ct: upMissing, body: upMissingBody, code: 500,
			has: err500("FileNotFoundError"), check: fileIs("/home/user/nodir/", "<missing>")},
		{name: "upload needs file_data", method: "POST", path: "/setup/upload", ct: upNoData, body: upNoDataBody, code: 400,
			exact: true, body0: "{\n  \"error\": \"file_path and file_data are required\"\n}\n"},
		{name: "file", method: "POST", path: "/file", ct: "application/x-www-form-urlencoded", body: "file_path=~/Documents/u.bin",
			code: 200, exact: true, body0: "\x00\x01binary\r\n"},
		{name: "file missing", method: "POST", path: "/file", ct: "application/x-www-form-urlencoded", body: "file_path=/nope",
			code: 404, exact: true, body0: "{\n  \"error\": \"File not found\"\n}\n"},

		// /setup/execute
		{name: "execute shell", method: "POST", path: "/setup/execute", ct: jsonCT, body: `{"command": "echo hi; rm /nope", "shell": true}`,
			code: 200, exact: true, body0: "{\n  \"error\": \"rm: cannot remove '/nope': No such file or directory\\n\",\n  \"output\": \"hi\\n\",\n  \"returncode\": 1,\n  \"status\": \"success\"\n}\n", ctype: jsonCT},
		{name: "execute string without shell is shlex-split", method: "POST", path: "/execute", ct: jsonCT, body: `{"command": "echo 'a;  b' \"c\\\\d\""}`,
			code: 200, has: []string{`"output": "a;  b c\\d\n"`, `"returncode": 0`}},
		{name: "execute expands ~/ in a list", method: "POST", path: "/execute", ct: jsonCT, body: `{"command": ["ls", "~/atelier"]}`,
			code: 200, has: []string{`"output": "main.tex\n"`}},
		{name: "execute: a program that does not exist", method: "POST", path: "/setup/execute", ct: jsonCT, body: `{"command": ["nope", "-x"]}`,
			code: 500, exact: true, body0: "{\n  \"message\": \"[Errno 2] No such file or directory: 'nope'\",\n  \"status\": \"error\"\n}\n"},
		{name: "execute: not found in a shell", method: "POST", path: "/setup/execute", ct: jsonCT, body: `{"command": "nope -x", "shell": true}`,
			code: 200, has: []string{`"returncode": 127`, "nope: not found"}},
		{name: "execute: an empty list", method: "POST", path: "/setup/execute", ct: jsonCT, body: `{"command": []}`,
			code: 500, has: []string{`"message": "list index out of range"`}},
		{name: "execute: no command", method: "POST", path: "/setup/execute", ct: jsonCT, body: `{"shell": true}`, code: 200, has: []string{`"returncode": 0`}},
		{name: "execute: a list with shell runs its first element", method: "POST", path: "/setup/execute", ct: jsonCT,
			body: `{"command": ["echo one", "two"], "shell": true}`, code: 200, has: []string{`"output": "one\n"`}},
		{name: "execute: reset.sh", method: "POST", path: "/setup/execute", ct: jsonCT, body: `{"command": "/bin/bash /home/user/server/reset.sh", "shell": true}`,
			code: 200, has: []string{`"returncode": 0`, `"status": "success"`}},
		{name: "execute: shlex error", method: "POST", path: "/setup/execute", ct: jsonCT, body: `{"command": "echo \"x"}`,
			code: 500, has: err500("ValueError: No closing quotation")},

		// /setup/launch
		{name: "launch through the shell always starts", method: "POST", path: "/setup/launch", ct: jsonCT,
			body: `{"command": "texstudio ~/atelier/main.tex", "shell": true}`, code: 200, exact: true,
			body0: "texstudio ~/atelier/main.tex launched successfully", ctype: htmlCT},
		{name: "launch argv joins it", method: "POST", path: "/setup/launch", ct: jsonCT, body: `{"command": ["fakeapp", "--cmd", "a b"]}`,
			code: 200, exact: true, body0: "fakeapp --cmd a b launched successfully",
			check: func(t *testing.T, m desktop.Machine) {
				if app := m.State().App; app != "Fake" {
					t.Errorf("app %q runs", app)
				}
			}},
		{name: "launch a list with shell shows the list", method: "POST", path: "/setup/launch", ct: jsonCT,
			body: `{"command": ["true", "x"], "shell": true}`, code: 200, exact: true, body0: "['true', 'x'] launched successfully"},
		{name: "launch a program that does not exist", method: "POST", path: "/setup/launch", ct: jsonCT, body: `{"command": "nope --x"}`,
			code: 500, has: []string{`"status": "error"`, `No such file or directory: 'nope'`}},

		// /chimerax/run relays to the app server (the fake app runs now).
		{name: "chimerax run", method: "POST", path: "/chimerax/run", ct: jsonCT, body: `{"command": "open 1abc"}`, code: 200,
			has: []string{"\"note\": [\n      \"ran open 1abc\",\n      \"\\u00fcn\\u00ef\"\n    ]", "\"error\": null"}, ctype: jsonCT},
		{name: "chimerax run, another port", method: "POST", path: "/chimerax/run", ct: jsonCT, body: `{"command": "x", "port": 8001}`,
			code: 500, has: err500("requests.exceptions.ConnectionError"), check: func(t *testing.T, m desktop.Machine) {}},
		{name: "chimerax run, a reply that is not JSON", method: "POST", path: "/chimerax/run", ct: jsonCT, body: `{"command": "text"}`,
			code: 500, has: err500("requests.exceptions.JSONDecodeError")},
		{name: "chimerax run, a JSON string", method: "POST", path: "/chimerax/run", ct: jsonCT, body: `{"command": "string"}`,
			code: 200, exact: true, body0: "just a string"},
		{name: "chimerax run, a number", method: "POST", path: "/chimerax/run", ct: jsonCT, body: `{"command": "number"}`,
			code: 500, has: err500("TypeError")},
		{name: "chimerax run, no app", setup: "pkill fake", method: "POST", path: "/chimerax/run", ct: jsonCT, body: `{"command": "x"}`,
			code: 500, has: err500("requests.exceptions.ConnectionError"), check: func(t *testing.T, m desktop.Machine) {}},
	})

	// /chimerax/run sent GET /run?command= to the app server.
	var relayed []guest.Recorded
	for _, r := range vm.rec.take() {
		if r.Server == "app" {
			relayed = append(relayed, r)
		}
	}
	if len(relayed) != 4 || relayed[0].Method != "GET" || relayed[0].Path != "/run" || relayed[0].Query.Get("command") != "open 1abc" {
		t.Errorf("the app server received %+v", relayed)
	}
}

// TestGuestOptCutsTheTree: /opt's depth cuts the accessibility tree, and
// a revert restores the default.
func TestGuestOptCutsTheTree(t *testing.T) {
	vm := startVM(t, guest.Config{})
	c := &http.Client{Timeout: 20 * time.Second}
	if err := vm.m.Launch("fakeapp"); err != nil {
		t.Fatal(err)
	}
	tree := func() string {
		resp, err := c.Get(vm.srv.URL + "/accessibility")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	post := func(p, body string) {
		resp, err := c.Post(vm.srv.URL+p, jsonCT, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if !strings.Contains(tree(), "Fake canvas") {
		t.Fatalf("the tree lacks the app's element:\n%s", tree())
	}
	post("/opt", `{"depth": 1}`)
	if at := tree(); strings.Contains(at, "Fake canvas") || !strings.Contains(at, "application") {
		t.Errorf("depth 1 keeps the application, not its elements:\n%s", at)
	}
	post("/opt", `{"depth": 0}`) // depth == 0 is never reached: no cut
	if !strings.Contains(tree(), "Fake canvas") {
		t.Errorf("depth 0 cut the tree")
	}
	post("/opt", `{"depth": 1}`)
	post("/sim/reset", "")
	if err := vm.m.Launch("fakeapp"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tree(), "Fake canvas") {
		t.Errorf("the depth survived the revert")
	}
}

// TestGuestLeanAndTeXChecks: /lean/check and /tex/check over the
// simulated files.
func TestGuestLeanAndTeXChecks(t *testing.T) {
	vm := startVM(t, guest.Config{})
	header := "theorem t (n : ℕ) : n + 0 = n := by"
	lean := func(proof string) string {
		return "printf '%s' " + desktop.ShellQuote("import Mathlib\n\n"+header+"\n  "+proof+"\n") + " > " + desktop.LeanFile
	}
	check := `{"header": "` + header + `"}`
	const tex = `\documentclass{article}
\begin{document}
Hello \cite{x}. % a comment with } and \begin{itemize}
\bibliographystyle{plain}
\bibliography{refs}
\end{document}
`
	runRoutes(t, vm, []routeCase{
		{name: "lean: a header not in the file", method: "POST", path: "/lean/check", ct: jsonCT, body: check,
			code: 200, exact: true, body0: "{\n  \"pass\": false\n}\n"},
		{name: "lean: sorry", setup: lean("sorry"), method: "POST", path: "/lean/check", ct: jsonCT, body: check,
			code: 200, exact: true, body0: "{\n  \"pass\": false\n}\n"},
		{name: "lean: a proof", setup: lean("simp"), method: "POST", path: "/lean/check", ct: jsonCT, body: check,
			code: 200, exact: true, body0: "{\n  \"pass\": true\n}\n"},
		{name: "lean: no proof", setup: lean(""), method: "POST", path: "/lean/check", ct: jsonCT, body: check,
			code: 200, exact: true, body0: "{\n  \"pass\": false\n}\n"},
		{name: "lean: no file", setup: "rm " + desktop.LeanFile, method: "POST", path: "/lean/check", ct: jsonCT, body: check,
			code: 500, has: []string{"FileNotFoundError"}},
		{name: "tex: no file", method: "POST", path: "/tex/check", ct: jsonCT, body: `{"path": "/home/user/atelier", "file": "main", "bibtex": false}`,
			code: 200, exact: true, body0: "{\n  \"pass\": false\n}\n"},
		{name: "tex: a document", setup: "printf '%s' " + desktop.ShellQuote(tex) + " > ~/atelier/main.tex",
			method: "POST", path: "/tex/check", ct: jsonCT, body: `{"path": "/home/user/atelier", "file": "main", "bibtex": false}`,
			code: 200, exact: true, body0: "{\n  \"pass\": true\n}\n"},
		{name: "tex: bibtex without the database", method: "POST", path: "/tex/check", ct: jsonCT, body: `{"path": "/home/user/atelier", "file": "main", "bibtex": true}`,
			code: 200, exact: true, body0: "{\n  \"pass\": false\n}\n"},
		{name: "tex: bibtex", setup: "printf '@article{x,\\n}\\n' > ~/atelier/refs.bib", method: "POST", path: "/tex/check", ct: jsonCT,
			body: `{"path": "/home/user/atelier", "file": "main", "bibtex": true}`, code: 200, exact: true, body0: "{\n  \"pass\": true\n}\n"},
		{name: "tex: defaults are /home/user and main", method: "POST", path: "/tex/check", ct: jsonCT, body: `{}`,
			code: 200, exact: true, body0: "{\n  \"pass\": false\n}\n"},
		{name: "tex: no such folder", method: "POST", path: "/tex/check", ct: jsonCT, body: `{"path": "/home/user/nope"}`,
			code: 500, has: []string{"FileNotFoundError: [Errno 2] No such file or directory: &#x27;/home/user/nope&#x27;"}},
	})
}
