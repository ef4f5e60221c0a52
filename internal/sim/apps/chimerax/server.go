package chimerax

// ChimeraX's REST server, which the benchmark starts on port 8000 with
// "remotecontrol rest start json true port 8000" (ChimeraX's rest_server
// bundle). Only /run executes commands; the server answers GET and POST
// alike (HEAD and other methods: 501, as Python's BaseHTTPRequestHandler).
//
//	GET  /run?command=CMD[&command=CMD2...]
//	POST /run with a form body (command=CMD, x-www-form-urlencoded) and/or
//	     the same query
//
// Each command runs as ChimeraX's run(session, cmd, log=False) (no echo
// in the log); the reply is HTTP 200, text/plain JSON:
//
//	{"json values": [one per command that ran to the end],
//	 "python values": [the same],
//	 "log messages": {"note": [...], "warning": [...], "error": [...], "bug": [...]},
//	 "error": null | {"type": "UserError", "message": "..."}}
//
// Every value is null in the simulator. A command that fails stops the
// request: its UserError's message is also logged at note level, as the
// server logs NotABug errors. Messages end with a newline, as ChimeraX's
// logger adds one. Without a command parameter the server logs the error
// "\"command\" parameter missing". The guest server's /chimerax/run
// forwards {"command"} here as GET /run?command=.

import (
	"net/url"

	"github.com/codapipe/codapipe/internal/sim/desktop"
)

// Serve serves the REST server's /run.
func (c *chimerax) Serve(u *desktop.UI, method, p string, q url.Values, body []byte) ([]byte, int, bool) {
	if p != "/run" {
		return nil, 0, false
	}
	if method != "GET" && method != "POST" {
		return []byte("Error code: 501\nMessage: Unsupported method ('" + method + "')."), 501, true
	}
	commands := restCommands(method, q, body)
	notes, warnings, errs := []string{}, []string{}, []string{}
	values := []any{}
	var failure any
	if len(commands) == 0 {
		errs = append(errs, "\"command\" parameter missing\n")
	}
	for _, cmd := range commands {
		res := c.run(u, cmd, false)
		for _, n := range res.notes {
			notes = append(notes, n+"\n")
		}
		for _, w := range res.warnings {
			warnings = append(warnings, w+"\n")
		}
		for _, e := range res.errors {
			errs = append(errs, e+"\n")
		}
		if res.err != nil {
			if res.err.Type == "UserError" {
				notes = append(notes, res.err.Message+"\n")
			}
			failure = res.err
			break
		}
		for range res.commands {
			values = append(values, nil)
		}
	}
	return desktop.JSON(map[string]any{
		"json values":   values,
		"python values": values,
		"log messages":  map[string][]string{"note": notes, "warning": warnings, "error": errs, "bug": {}},
		"error":         failure,
	}), 200, true
}

// restCommands are the command lines of a /run request: the query's, then
// a POST's form body's.
func restCommands(method string, q url.Values, body []byte) []string {
	commands := append([]string(nil), q["command"]...)
	if method == "POST" && len(body) > 0 {
		if form, err := url.ParseQuery(string(body)); err == nil {
			commands = append(commands, form["command"]...)
		}
	}
	return commands
}
