package scienceboard

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Accept says how the harness decides that a setup request succeeded.
type Accept int

const (
	// AcceptStatus: HTTP 200 (ScienceBoard's _request_factory).
	AcceptStatus Accept = iota
	// AcceptOK: the reply body is exactly "OK" (touch through /write,
	// KAlgebra and GRASS GIS setup routes; GRASS answers "ERROR" with
	// HTTP 200 when it fails).
	AcceptOK
	// AcceptChimeraX: a ChimeraX REST reply whose "error" is null.
	AcceptChimeraX
)

// String names the rule for messages.
func (a Accept) String() string {
	switch a {
	case AcceptOK:
		return `body "OK"`
	case AcceptChimeraX:
		return `ChimeraX reply with "error": null`
	}
	return "HTTP 200"
}

// LeanFile is the Lean source file of the VM's Lake project that Lean
// tasks append their theorem to and /lean/check builds.
const LeanFile = "/home/user/sci/Sci/Basic.lean"

// SetupStep is one initialize item as the harness performs it: a request
// to one of the VM's servers, a download, or nothing (Lean's import, open
// and def items only add lines to the text that query appends).
type SetupStep struct {
	// Item is the index in Task.Initialize; Func its func.
	Item int
	Func string
	// Request is the request to send; nil for a download or a step that
	// sends nothing.
	Request *Request
	// Accept is how the reply is judged.
	Accept Accept
	// Download is set for a download item: the host fetches URL and copies
	// the file into the guest at Path (as ScienceBoard's vm_download does
	// with vmrun CopyFileFromHostToGuest).
	Download *Download
	// Wait is the pause after the step (the item's "wait").
	Wait time.Duration
}

// SetupSteps maps a task's initialize items (expand placeholders first)
// onto the requests ScienceBoard's harness sends for them; docs/tasks.md
// has the table. An item the loader could not type is an error naming it;
// nothing is run for such a task.
func SetupSteps(t *Task) ([]SetupStep, error) {
	var steps []SetupStep
	var lean []string // Lean's buffered lines (VMTask.buffer)
	probe := func() {
		if len(lean) == 0 || lean[len(lean)-1] != "" {
			lean = append(lean, "")
		}
	}
	for i, it := range t.Initialize {
		st := SetupStep{Item: i, Func: it.Func, Wait: it.WaitDuration()}
		switch a := it.Args.(type) {
		case *Execute:
			st.Request = postJSON(GuestServer, "/setup/execute", commandBody{a.Command, a.UseShell()})
		case *Launch:
			st.Request = postJSON(GuestServer, "/setup/launch", commandBody{a.Command, a.UseShell()})
		case *Opt:
			st.Request = postJSON(GuestServer, "/opt", map[string]int{"depth": a.Depth})
		case *Append:
			st.Request = postJSON(GuestServer, "/append", fileBody{a.Path, a.Content})
		case *Touch:
			st.Request, st.Accept = postJSON(GuestServer, "/write", fileBody{a.Path, a.Text}), AcceptOK
		case *Download:
			d := *a
			st.Download = &d
		case *Open:
			st.Request, st.Accept = ChimeraXRun("open "+a.Name), AcceptChimeraX
		case *Turn:
			st.Request, st.Accept = ChimeraXRun("turn "+a.Axis+" "+strconv.FormatFloat(a.Angle, 'f', -1, 64)), AcceptChimeraX
		case *ClearLog:
			st.Request, st.Accept = ChimeraXRun("log clear"), AcceptChimeraX
		case *Color:
			cmd := "color " + a.Style
			if a.Style == "rainbow" {
				cmd = "rainbow" // ScienceBoard's TaskMixin._color
			}
			st.Request, st.Accept = ChimeraXRun(cmd), AcceptChimeraX
		case *AlphaFoldMatch:
			st.Request, st.Accept = ChimeraXRun("alphafold match "+a.Name), AcceptChimeraX
		case *Destroy:
			st.Request, st.Accept = ChimeraXRun("destroy"), AcceptChimeraX
		case *Tab:
			st.Request, st.Accept = postJSON(AppServer, "/tab", a.Index), AcceptOK
		case *Func2D:
			st.Request, st.Accept = &Request{Server: AppServer, Method: "POST", Path: "/add/2d", Body: []byte(a.Expr)}, AcceptOK
		case *Func3D:
			st.Request, st.Accept = &Request{Server: AppServer, Method: "POST", Path: "/add/3d", Body: []byte(a.Expr)}, AcceptOK
		case *Map:
			st.Request, st.Accept = postJSON(AppServer, "/init/map", a), AcceptOK
		case *Layer:
			st.Request, st.Accept = postJSON(AppServer, "/init/layer", a), AcceptOK
		case *Scale:
			st.Request, st.Accept = postJSON(AppServer, "/init/scale", a), AcceptOK
		case *GrassCmd:
			st.Request, st.Accept = &Request{Server: AppServer, Method: "GET", Path: "/init/cmd"}, AcceptOK
		case *Import:
			var libs []string
			for _, l := range a.Libs {
				if l != "Mathlib" { // the project imports Mathlib already
					libs = append(libs, l)
				}
			}
			if len(libs) > 0 {
				probe()
				lean = append(lean, "import "+strings.Join(libs, " "))
			}
		case *OpenLibs:
			probe()
			lean = append(lean, "open "+strings.Join(a.Libs, " "))
			probe()
		case *Def:
			lean = append(lean, a.Expr)
		case *LeanQuery:
			probe()
			lean = append(lean, a.Header()+"\n  sorry\n")
			st.Request = postJSON(GuestServer, "/append", fileBody{LeanFile, strings.Join(lean, "\n")})
		default:
			reason := it.Issue
			if reason == "" {
				reason = fmt.Sprintf("func %q is not supported", it.Func)
			}
			return nil, fmt.Errorf("%s: initialize[%d]: %s", t.ID, i, reason)
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// ChimeraXRun is the request that runs a ChimeraX command the way the
// harness does in a VM: through the guest server, which forwards it to
// ChimeraX's REST server (GET :8000/run?command=) and relays the reply.
func ChimeraXRun(command string) *Request {
	return postJSON(GuestServer, "/chimerax/run", map[string]string{"command": command})
}

// commandBody is the body of /setup/execute and /setup/launch.
type commandBody struct {
	Command Command `json:"command"`
	Shell   bool    `json:"shell"`
}

// fileBody is the body of /write and /append.
type fileBody struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// postJSON is a POST of v as JSON (the harness's requests json=...).
func postJSON(server, path string, v any) *Request {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("scienceboard: %s %s: %v", server, path, err)) // only our own types are encoded
	}
	return &Request{Server: server, Method: "POST", Path: path, Body: b, ContentType: "application/json"}
}

// CheckReply applies the step's Accept rule to a reply body; the error is
// the reason the reply is a refusal.
func (st SetupStep) CheckReply(body []byte) error {
	switch st.Accept {
	case AcceptOK:
		if string(body) != "OK" {
			return fmt.Errorf(`expected the reply "OK", got %q`, truncate(string(body), 200))
		}
	case AcceptChimeraX:
		if _, err := ChimeraXReply(body); err != nil {
			return err
		}
	}
	return nil
}

// ChimeraXReply decodes a ChimeraX REST reply and returns its note-level
// log messages; a reply whose "error" is not null is an error carrying
// ChimeraX's message.
func ChimeraXReply(body []byte) ([]string, error) {
	var r struct {
		Log   map[string][]string `json:"log messages"`
		Error json.RawMessage     `json:"error"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("expected a ChimeraX REST reply (JSON with \"log messages\" and \"error\"), got %q", truncate(string(body), 200))
	}
	if e := strings.TrimSpace(string(r.Error)); e != "" && e != "null" {
		var m struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(r.Error, &m) == nil && m.Message != "" {
			return nil, fmt.Errorf("ChimeraX: %s", truncate(m.Message, maxReplyMessage))
		}
		return nil, fmt.Errorf("ChimeraX: %s", truncate(e, 200))
	}
	return r.Log["note"], nil
}

// maxReplyMessage bounds the part of a ChimeraX error message an error
// quotes (its traceback can be long).
const maxReplyMessage = 1000

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
